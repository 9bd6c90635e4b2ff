"""Checks run first at every site, before any data is generated or moved.

Each problem is one line naming what is wrong and what to do; all of them are reported
together, so a user fixes everything in one go instead of one failure per hour-long job.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudbench.campaign import paths
from cloudbench.campaign.rclone_options import remote_env_prefix
from cloudbench.campaign.secrets import redact, secret_values
from cloudbench.measure import clients
from cloudbench.measure import rclone as rc
from cloudbench.measure.clients.s3 import not_configured
from cloudbench.records import clip_tail, host_info, utc_now, write_json
from cloudbench.site import exchange
from cloudbench.sizes import size_label

FREE_SPACE_OVERRIDE = "CLOUDBENCH_FREE_BYTES"  # for tests on machines without a small fs


@dataclass(frozen=True)
class PreflightSpec:
    """What one preflight checks. A site's own preflight names its scratch (and the upload
    it downloads); a gate names one remote and one tool. Each check runs only when its
    part is given, so neither re-runs, nor re-gates finished transfers, when a campaign
    gains a tool, a remote, a template or a chunk size."""

    campaign: str
    site: str
    flags: tuple[str, ...]
    min_rclone_version: str
    scratch: str = ""  # "": not this preflight's check
    needed_bytes: int = 0
    remote_prefixes: dict[str, str] = field(default_factory=dict)
    upload_site: str = ""
    needs_upload: bool = False  # downloads, uploads not: the upload must be on the remote
    # (false when the upload site runs in this same run: campaign.jobs.RunSpec)
    upload_prefix: str = ""  # where the campaign's manifest is looked for
    tools: tuple[str, ...] = ()
    command_template: str | None = None
    # the remotes each tool measures (remotes.<name>.tools), where the gates say; a tool
    # absent here is checked against every remote (a gate: its one tool and remote)
    tool_remotes: dict[str, list[str]] = field(default_factory=dict)
    # the run a site's own preflight ran in (jobspec.RunSpec.run_started_epoch), kept in its
    # record: a gate of the same run finds its remote and tool checked there (checked_by_site)
    run_started_epoch: float | None = None


def with_gates(data: dict[str, Any], gates: list[dict[str, Any]]) -> dict[str, Any]:
    """A site preflight's spec widened by its gates: every remote and tool they check, so
    that a wrong key or a missing tool stops the site before any data is made (the gates
    still run, and are what the transfers wait for)."""
    out = dict(data)
    out["remote_prefixes"] = dict(data.get("remote_prefixes") or {})
    tools = list(data.get("tools") or ())
    out["tool_remotes"] = {}
    for g in gates:
        out["remote_prefixes"].update(g.get("remote_prefixes") or {})
        tools += [t for t in g.get("tools") or () if t not in tools]
        for t in g.get("tools") or ():
            out["tool_remotes"].setdefault(t, []).extend(g.get("remote_prefixes") or {})
        out["command_template"] = out.get("command_template") or g.get("command_template")
    out["tools"] = tuple(tools)
    return out


def checked_by_site(
    site_record: Mapping[str, Any], gate: PreflightSpec, run_started: float
) -> dict[str, Any] | None:
    """A gate's record, when the site's own preflight of this same run (its record's
    ``run_started_epoch``) checked every remote and tool of ``gate``: it did so widened by
    the gates (with_gates), moments before, so the gate writes nothing to the store again.
    None otherwise: a gate added to a campaign later (a new tool or remote) finds an earlier
    run's record, and checks for itself."""
    if not (
        site_record.get("run_started_epoch") == run_started
        and set(gate.remote_prefixes) <= set(site_record.get("remotes") or ())
        and set(gate.tools) <= set(site_record.get("tools") or ())
    ):
        return None
    scope = {"remotes": list(gate.remote_prefixes), "tools": list(gate.tools)}
    return {**site_record, **scope, "checked_by": "the site's preflight"}


def check_tools(spec: PreflightSpec) -> list[str]:
    """Every tool other than rclone is installed, and the S3-only tools can read each
    remote's S3 side (an S3 remote, named, its options found): one line per problem.

    Reads rclone's config (in-process, nothing printed), never the network: the remote
    itself is checked by ``check_remote``.
    """
    problems = []
    for tool in spec.tools:
        client = clients.load(tool)
        named = spec.tool_remotes.get(tool) or list(spec.remote_prefixes)
        for p in client.check([spec.remote_prefixes[n] for n in named], spec.command_template):
            if len(spec.remote_prefixes) > 1 and (
                where := [n for n in named if _names_remote(p, spec.remote_prefixes[n])]
            ):  # which of the campaign's remotes, and how to leave the tool off it
                p += f" (remote {where[0]!r}: set remotes.{where[0]}.tools without {tool})"
            problems.append(p)
    return problems


def _names_remote(problem: str, prefix: str) -> bool:
    """Whether a tool's problem names the rclone remote of ``prefix`` (``name:bucket/...``)."""
    name = prefix.split(":", 1)[0]
    return bool(name) and (f"'{name}'" in problem or f"{name}:" in problem)


def free_bytes(path: Path) -> int:
    override = os.environ.get(FREE_SPACE_OVERRIDE)
    if override:
        return int(override)
    probe = path
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free


_DENIED = ("StatusCode: 403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch")


def _access_denied(prefix: str, stderr: str) -> str | None:
    """The store refused the credentials: say which remote's to check, and where they live."""
    if not any(marker in stderr for marker in _DENIED):
        return None
    name = prefix.split(":", 1)[0].lstrip(":").split(",", 1)[0]
    where = (
        f"rclone's config for '{name}:' or the {remote_env_prefix(name)}* variables"
        if name and ":" in prefix
        else "rclone's config"
    )
    return f"access denied (HTTP 403): check the credentials of remote '{name}' ({where})"


def _not_configured(prefix: str, stderr: str) -> str | None:
    """rclone found no definition of the remote ("didn't find section in config file")."""
    name = prefix.split(":", 1)[0]
    if "didn't find section in config file" not in stderr or not name or ":" not in prefix:
        return None
    return not_configured(name)


def missing_keys(prefix: str, env: Mapping[str, str]) -> str | None:
    """A remote defined only by RCLONE_CONFIG_<NAME>_* variables, of type s3, with neither
    keys nor env_auth: the store's own answer (often a bare "400 Bad Request") does not say
    that the credentials are simply not there."""
    name = prefix.split(":", 1)[0]
    if not name or name.startswith(":") or ":" not in prefix:
        return None
    var = remote_env_prefix(name)
    if env.get(var + "TYPE", "").lower() != "s3":
        return None
    if env.get(var + "ACCESS_KEY_ID") or env.get(var + "SECRET_ACCESS_KEY"):
        return None
    if env.get(var + "ENV_AUTH", "").lower() in ("true", "1"):
        return None
    return (
        f"remote '{name}' is defined by {var}* variables with no {var}ACCESS_KEY_ID / "
        f"{var}SECRET_ACCESS_KEY and no {var}ENV_AUTH=true: set its credentials"
    )


# a second try: a store's odd 500 under load must not stop a site (rclone serve s3 gave one
# to a PutObject in a CI run)
ROUND_TRIP_PATIENCE = ("--retries", "2", "--low-level-retries", "2", "--contimeout", "15s",
                       "--timeout", "30s")  # fmt: skip


def check_remote(
    binary: str, name: str, prefix: str, site: str, flags: tuple[str, ...]
) -> str | None:
    """Write, read back and delete a tiny object: reachable, writable, and consistent. Two
    rclone calls: the object is written, then moved back here (read, then deleted)."""
    # one name per process: a site's gates (one per tool) check a remote at the same time
    obj = f"{prefix}/preflight/{site}-{host_info()['host']}-{os.getpid()}.txt"
    token = f"cloudbench preflight {utc_now()}\n"
    with tempfile.TemporaryDirectory(prefix="cloudbench-preflight-") as tmp:
        sent, back = Path(tmp) / "sent.txt", Path(tmp) / "back.txt"
        sent.write_text(token)
        for what, cmd in (
            ("write", rc.helper_command(binary, "copyto", str(sent), obj, extra_flags=flags)),
            ("read back", rc.helper_command(binary, "moveto", obj, str(back), extra_flags=flags)),
        ):
            try:
                res = rc.run_helper([*cmd, *ROUND_TRIP_PATIENCE], timeout=120)
            except Exception as err:  # noqa: BLE001 - any failure is the answer
                return f"remote {name} ({prefix}): cannot {what} a test object: {err}"
            if res.returncode != 0:
                if what == "read back" and back.exists():  # read, then not deleted
                    what = "delete"
                why = _access_denied(prefix, res.stderr) or _not_configured(prefix, res.stderr)
                if why:
                    return f"remote {name} ({prefix}): cannot {what} a test object: {why}"
                msg = res.stderr.strip().splitlines()[-1:] or ["rclone failed"]
                keys = missing_keys(prefix, os.environ)
                said = f"{keys} (rclone: {clip_tail(msg[0])})" if keys else clip_tail(msg[0])
                return f"remote {name} ({prefix}): cannot {what} a test object: {said}"
        if not back.exists() or back.read_text() != token:
            return f"remote {name} ({prefix}): test object read back differs from what was written"
    return None


def scratch_problem(scratch: Path, site: str) -> str | None:
    """Scratch can be created and written: a file is written there and removed. A path
    under a regular file, or on a read-only or pseudo filesystem (/proc), is named here,
    not as a traceback from every data step later."""
    try:
        scratch.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=scratch, prefix=".cloudbench-preflight-") as fh:
            fh.write(b"cloudbench preflight\n")
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as err:
        why = err.strerror or type(err).__name__
        return (
            f"scratch {scratch}: not writable ({why}); set sites.{site}.scratch to a directory "
            "this site can write"
        )
    return None


def run_preflight(spec: PreflightSpec, out: Path) -> list[str]:
    problems: list[str] = []
    version = None
    try:
        binary = rc.find_rclone()
        version = rc.rclone_version(binary)
        rc.check_version(version, spec.min_rclone_version)
    except rc.RcloneError as err:
        problems.append(str(err))
        binary = None
    problems += check_tools(spec)
    if binary and version:
        for name, prefix in spec.remote_prefixes.items():
            p = check_remote(binary, name, prefix, spec.site, spec.flags)
            if p:
                problems.append(p)
    if binary and version and spec.needs_upload and not problems:
        prefix = spec.upload_prefix or next(iter(spec.remote_prefixes.values()))
        if not exchange.campaign_manifest_exists(prefix, spec.flags):
            problems.append(
                f"campaign {spec.campaign!r}: nothing uploaded yet ({prefix}/{paths.MANIFEST} "
                f"missing); run the upload site {spec.upload_site!r} first"
            )
    free = None
    if spec.scratch:
        scratch = Path(spec.scratch)
        unusable = scratch_problem(scratch, spec.site)
        if unusable:
            problems.append(unusable)
        else:
            free = free_bytes(scratch)
            if free < spec.needed_bytes:
                problems.append(
                    f"scratch {scratch}: {size_label(free)} free ({free} bytes), this site "
                    f"needs {size_label(spec.needed_bytes)} ({spec.needed_bytes} bytes); free "
                    f"space or set sites.{spec.site}.scratch"
                )
    problems = [redact(p, secret_values()) for p in problems]
    if not problems:
        result: dict[str, Any] = {
            "campaign": spec.campaign,
            "site": spec.site,
            "checked_utc": utc_now(),
            "rclone_version": version,
            "scratch_free_bytes": free,
            "scratch_needed_bytes": spec.needed_bytes if spec.scratch else None,
            "remotes": list(spec.remote_prefixes),
            "tools": list(spec.tools),
            **host_info(),
        }
        if spec.run_started_epoch is not None:
            result["run_started_epoch"] = spec.run_started_epoch
        write_json(out, result)
    return problems
