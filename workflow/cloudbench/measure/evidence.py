"""What limited a copy, as the kernel saw it: sampled beside the client, from outside it.

About once a second while a client runs, one ``ss -tinHe`` call gives every TCP socket's
own account of its flow (Linux's tcp_info): how long it was busy, how much of that the
receiver's window (``rwnd_limited``) or the sender's own buffer (``sndbuf_limited``) held it,
its cwnd, RTT, retransmissions, delivery rate, and for a receiver its receive queue and
``rcv_space``. The sockets kept are the client's own, found by their inodes in
``/proc/<pid>/fd`` of the client's process tree. The same sample reads the tree's CPU seconds
(``/proc/<pid>/stat`` utime + stime, and what its reaped children used), to set against the
cores the client may use: its affinity, and a cgroup's CPU quota where one is set.

Why from outside, and only this: the copy's clock must not notice it (one ``ss`` and a walk
of ``/proc`` per second; ``make bench`` row ``evidence-weight``). The same walk reads each
thread's state (``D``: waiting on the disk) and each process's ``io`` (bytes from and to
storage, not the page cache): a copy held by its scratch. The judging is elsewhere
(:mod:`cloudbench.report.limits`); this module parses (:func:`parse_ss`, pure, tested on
captured output) and records (:class:`Sampler`, a small JSON file beside the record:
``campaign.paths.evidence``, JSON lines: a header, a line per sample, an end).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

INTERVAL_S = 1.0  # one ss call per second
FIRST_S = 0.5  # the first sample, so a copy of a second or two still has one
SS_TIMEOUT_S = 5.0
FORMAT = 1  # the evidence file's format

SS_ARGV = ("ss", "-tinHe")  # TCP, internal info, numeric, no header, extended (the inode)

# --- parsing ss (pure) ----------------------------------------------------------------------


@dataclass(frozen=True)
class Socket:
    """One TCP socket's tcp_info as ``ss -tin(e)`` printed it; None where it printed none.
    Times in ms, rates in bytes/s, sizes in bytes (cwnd in segments of ``mss``)."""

    state: str
    local: str
    peer: str
    recv_q: int
    send_q: int
    inode: int | None = None
    busy_ms: int | None = None
    rwnd_limited_ms: int | None = None
    sndbuf_limited_ms: int | None = None
    cwnd: int | None = None
    mss: int | None = None
    rtt_ms: float | None = None
    minrtt_ms: float | None = None
    rcv_rtt_ms: float | None = None
    retrans: int | None = None  # segments retransmitted over the socket's life
    bytes_retrans: int | None = None
    delivery_rate: float | None = None  # bytes/s, the last estimate
    bytes_sent: int | None = None
    bytes_acked: int | None = None
    bytes_received: int | None = None
    rcv_space: int | None = None
    snd_wnd: int | None = None  # the peer's advertised window
    rcv_ooopack: int | None = None  # packets received out of order: a drop upstream
    app_limited: bool = False

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and v is not False}

    @classmethod
    def of_json(cls, d: Mapping[str, Any]) -> Socket:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


_INT_FIELDS = {
    "cwnd": "cwnd",
    "mss": "mss",
    "bytes_retrans": "bytes_retrans",
    "bytes_sent": "bytes_sent",
    "bytes_acked": "bytes_acked",
    "bytes_received": "bytes_received",
    "rcv_space": "rcv_space",
    "snd_wnd": "snd_wnd",
    "rcv_ooopack": "rcv_ooopack",
}
_MS_FIELDS = {
    "busy": "busy_ms",
    "rwnd_limited": "rwnd_limited_ms",
    "sndbuf_limited": "sndbuf_limited_ms",
}
_TOKEN = re.compile(r"([a-z_]+):(\S+)")
_RATE = re.compile(r"delivery_rate (\d+(?:\.\d+)?)([KMG]?)bps")
_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}


def _info(text: str) -> dict[str, Any]:
    """The tcp_info fields of one socket's detail line."""
    out: dict[str, Any] = {}
    for key, value in _TOKEN.findall(text):
        if key in _INT_FIELDS and value.isdigit():
            out[_INT_FIELDS[key]] = int(value)
        elif key in _MS_FIELDS:
            if m := re.match(r"(\d+)ms", value):
                out[_MS_FIELDS[key]] = int(m.group(1))
        elif key == "rtt":
            out["rtt_ms"] = float(value.split("/")[0])
        elif key == "minrtt":
            out["minrtt_ms"] = float(value)
        elif key == "rcv_rtt":
            out["rcv_rtt_ms"] = float(value)
        elif key == "retrans":  # in flight now / over the socket's life
            out["retrans"] = int(value.split("/")[-1])
        elif key == "ino":
            out["inode"] = int(value)
    if m := _RATE.search(text):
        out["delivery_rate"] = float(m.group(1)) * _SCALE[m.group(2)] / 8
    out["app_limited"] = bool(re.search(r"(^|\s)app_limited(\s|$)", text))
    return out


def parse_ss(text: str) -> list[Socket]:
    """Every socket in the output of ``ss -tin`` (with or without ``-H``, ``-e``, ``-p``):
    a line that starts in its first column names a socket (state, queues, addresses), the
    indented line after it holds its tcp_info. A header line is skipped."""
    out: list[Socket] = []
    head: list[str] | None = None
    detail: list[str] = []

    def flush() -> None:
        if head is None:
            return
        info = _info(" ".join([*head[5:], *detail]))
        out.append(
            Socket(head[0], head[3], head[4], int(head[1]), int(head[2]), **info)  # type: ignore[arg-type]
        )

    for line in text.splitlines():
        if not line.strip():
            continue
        if line[0].isspace():
            detail.append(line.strip())
            continue
        parts = line.split()
        if parts[0] == "State" or len(parts) < 5 or not parts[1].isdigit():
            continue  # the header, or a line of something else
        flush()
        head, detail = parts, []
    flush()
    return out


def socket_inodes(fd_targets: Iterable[str]) -> set[int]:
    """The socket inodes among a process's fd link targets (``socket:[12345]``)."""
    out = set()
    for target in fd_targets:
        if target.startswith("socket:[") and target.endswith("]"):
            out.add(int(target[8:-1]))
    return out


def cpu_seconds(stat: str, ticks_per_s: float, threads_ns: Iterable[int] = ()) -> float:
    """One process's CPU seconds, and those of the children it has reaped, from its
    ``/proc/<pid>/stat`` line and its live threads' run times (the first field of each
    ``/proc/<pid>/task/<tid>/schedstat``, in nanoseconds).

    ``stat`` alone counts in clock ticks (10 ms): a client held to 5% of a core runs 5 ticks
    a second, so a copy sampled for a second or two reads its share up to 20% low or high.
    The threads' nanoseconds do not count threads that have exited, which ``stat``'s own
    utime + stime do: the larger of the two is the process's own, never above the truth and
    never below it by more than a tick or an exited thread's time."""
    fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces and parentheses
    own = (int(fields[11]) + int(fields[12])) / ticks_per_s
    children = (int(fields[13]) + int(fields[14])) / ticks_per_s
    return max(own, sum(threads_ns) / 1e9) + children


def task_state(stat: str) -> str:
    """The state letter of one ``/proc/<pid>/task/<tid>/stat`` line: ``D`` is uninterruptible
    sleep, a thread waiting on its disk (or a network filesystem's scratch)."""
    return stat[stat.rindex(")") + 2 :].split(maxsplit=1)[0]


def storage_bytes(io: str) -> tuple[int, int]:
    """(read_bytes, write_bytes) of one ``/proc/<pid>/io``: what the process had read from and
    sent to storage, not from or to the page cache, since it started."""
    fields = dict(line.split(": ", 1) for line in io.splitlines() if ": " in line)
    return int(fields.get("read_bytes", 0)), int(fields.get("write_bytes", 0))


def parent_of(stat: str) -> int:
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def quota_cores(quota_us: str, period_us: str) -> float | None:
    """The cores a cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` allows (None: no
    quota, -1)."""
    quota, period = int(quota_us.strip()), int(period_us.strip())
    return quota / period if quota > 0 and period > 0 else None


def cpu_max_cores(cpu_max: str) -> float | None:
    """The cores a cgroup v2 ``cpu.max`` (``quota period`` or ``max period``) allows."""
    quota, _, period = cpu_max.strip().partition(" ")
    return None if quota == "max" else int(quota) / int(period or 100000)


# --- reading the machine (I/O) --------------------------------------------------------------


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it (by the parent in /proc/<pid>/stat)."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := _read(f"/proc/{name}/stat")):
            try:
                parents[int(name)] = parent_of(stat)
            except (ValueError, IndexError):
                continue
    tree, frontier = [root], [root]
    while frontier:
        frontier = [p for p, pp in parents.items() if pp in set(frontier) and p not in tree]
        tree += frontier
    return tree


def tree_sockets(pids: Iterable[int]) -> set[int]:
    out: set[int] = set()
    for pid in pids:
        fds = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fds)
        except OSError:
            continue
        targets = []
        for n in names:
            try:
                targets.append(os.readlink(f"{fds}/{n}"))
            except OSError:
                continue
        out |= socket_inodes(targets)
    return out


def tree_cpu_s(pids: Iterable[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        if not (stat := _read(f"/proc/{pid}/stat")):
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            tids = []
        runs = (_read(f"/proc/{pid}/task/{t}/schedstat") for t in tids)
        total += cpu_seconds(stat, ticks, (int(r.split()[0]) for r in runs if r))
    return total


def tree_disk(pids: Iterable[int]) -> tuple[int, int, int]:
    """(threads waiting on the disk now, bytes read from storage, bytes written to it) of a
    process tree: one ``stat`` per thread and one ``io`` per process (root reads another
    user's ``io``; a process it may not read counts nothing)."""
    waiting = read = written = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        waiting += sum(
            1 for t in tids if (st := _read(f"/proc/{pid}/task/{t}/stat")) and task_state(st) == "D"
        )
        if io := _read(f"/proc/{pid}/io"):
            r, w = storage_bytes(io)
            read, written = read + r, written + w
    return waiting, read, written


def usable_cores(pid: int) -> tuple[float, str]:
    """The cores ``pid`` may use and why: its CPU affinity, lowered by a CPU quota of its
    cgroup or of any cgroup above it (v1 ``cpu.cfs_quota_us``, v2 ``cpu.max``)."""
    try:
        affinity = len(os.sched_getaffinity(pid))
    except OSError:
        affinity = os.cpu_count() or 1
    cores, why = float(affinity), f"affinity {affinity}"
    for line in (_read(f"/proc/{pid}/cgroup") or "").splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            base, files = "/sys/fs/cgroup/cpu", ("cpu.cfs_quota_us", "cpu.cfs_period_us")
        elif controllers == "":
            base, files = "/sys/fs/cgroup/unified", ("cpu.max",)
            if not os.path.isdir(base):
                base = "/sys/fs/cgroup"
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            folder = "/".join([base, *parts[:depth]])
            texts = [_read(f"{folder}/{f}") for f in files]
            if None in texts:
                continue
            try:
                q = quota_cores(*texts) if len(texts) == 2 else cpu_max_cores(texts[0])  # type: ignore[arg-type]
            except ValueError:
                continue
            if q is not None and q < cores:
                cores, why = q, f"cgroup {folder.removeprefix('/sys/fs/cgroup/')} quota {q:g}"
    return cores, why


def host_tcp() -> dict[str, Any]:
    """The host's TCP settings that bound a flow: the buffers' min/default/max and the
    congestion control."""
    out: dict[str, Any] = {}
    for name in ("tcp_wmem", "tcp_rmem", "tcp_congestion_control"):
        if (text := _read(f"/proc/sys/net/ipv4/{name}")) is not None:
            parts = text.split()
            out[name] = (
                [int(p) for p in parts] if name != "tcp_congestion_control" else text.strip()
            )
    return out


def run_ss() -> str:
    try:
        return subprocess.run(
            SS_ARGV, capture_output=True, text=True, timeout=SS_TIMEOUT_S, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


@dataclass(frozen=True)
class Sample:
    t: float  # seconds on the copy's clock
    cpu_s: float  # the client's process tree, since it started
    processes: int
    sockets: tuple[Socket, ...]
    disk_wait: int = 0  # the tree's threads waiting on the disk (state D) at this look
    read_bytes: int = 0  # from storage, since each process started (/proc/<pid>/io)
    write_bytes: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "t": round(self.t, 3),
            "cpu_s": round(self.cpu_s, 3),
            "processes": self.processes,
            "disk_wait": self.disk_wait,
            "read_bytes": self.read_bytes,
            "write_bytes": self.write_bytes,
            "sockets": [s.as_json() for s in self.sockets],
        }


def sample(pid: int, t: float, ss_text: str | None = None) -> Sample:
    """One look at the client ``pid``: its tree's CPU seconds, its TCP sockets, its threads
    waiting on the disk and the bytes it moved from and to storage."""
    pids = process_tree(pid)
    inodes = tree_sockets(pids)
    cpu = tree_cpu_s(pids)
    waiting, read, written = tree_disk(pids)
    text = run_ss() if ss_text is None else ss_text
    mine = tuple(s for s in parse_ss(text) if s.inode in inodes)
    return Sample(t, cpu, len(pids), mine, waiting, read, written)


class Sampler:
    """Samples the client ``pid`` every :data:`INTERVAL_S` in a thread of its own, on the
    copy's clock (``t0``, ``time.perf_counter``), each sample written to ``path`` as it is
    taken (JSON lines: a job killed mid-copy leaves what was seen); :meth:`stop` ends it."""

    def __init__(self, pid: int, t0: float, path: Path) -> None:
        self.pid, self.t0, self.path = pid, t0, path
        self.samples = 0
        self.errors: list[str] = []
        self._out: IO[str] | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._out = path.open("w")
        except OSError as err:
            self._lost(err)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cloudbench-evidence", daemon=True)
        self._thread.start()

    def _lost(self, err: OSError) -> None:
        """The evidence is lost, never the copy: said on its log."""
        print(f"cloudbench: evidence not written ({err})", file=sys.stderr, flush=True)
        self._out = None

    def _line(self, doc: Mapping[str, Any]) -> None:
        if self._out is not None:
            try:
                self._out.write(json.dumps(doc, separators=(",", ":")) + "\n")
                self._out.flush()
            except OSError as err:
                self._lost(err)

    def _run(self) -> None:
        wait = FIRST_S
        while not self._stop.wait(wait):
            try:
                if not self.samples:  # a wrapper that moves itself into a cgroup has done so
                    self._line(header(*usable_cores(self.pid)))
                self._line(sample(self.pid, time.perf_counter() - self.t0).as_json())
                self.samples += 1
            except Exception as err:  # never the copy's failure: said in the file
                if len(self.errors) < 5:
                    self.errors.append(f"{type(err).__name__}: {err}")
            wait = INTERVAL_S

    def stop(self, seconds: float | None = None) -> None:
        self._stop.set()
        self._thread.join()
        if not self.samples:  # a copy shorter than the first sample: its header still
            self._line(header(*usable_cores(self.pid)))
        self._line({"end": None if seconds is None else round(seconds, 3), "errors": self.errors})
        if self._out is not None:
            self._out.close()


def header(cores: float, cores_from: str) -> dict[str, Any]:
    """The evidence file's first line: what every sample is read against."""
    return {
        "format": FORMAT,
        "interval_s": INTERVAL_S,
        "cores": cores,
        "cores_from": cores_from,
        "ss": shutil.which(SS_ARGV[0]),  # None: this node has no ss, so no socket was seen
        **host_tcp(),
    }


def read(path: Path) -> dict[str, Any] | None:
    """An evidence file as one document: its header's fields, ``samples`` (their sockets as
    :class:`Socket`), and its end's ``seconds`` and ``errors`` (None: no file, or no
    header)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    doc: dict[str, Any] | None = None
    samples = []
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill
        if "format" in item:
            doc = dict(item)
        elif "end" in item:
            if doc is not None:
                doc["seconds"], doc["errors"] = item["end"], item.get("errors", [])
        elif "t" in item:
            item["sockets"] = [Socket.of_json(x) for x in item.get("sockets", [])]
            samples.append(item)
    if doc is None:
        return None
    doc["samples"] = samples
    doc.setdefault("seconds", None)
    return doc
