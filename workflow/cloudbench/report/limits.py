"""What limits a measurement, and a route: a verdict from the kernel's evidence, never a guess.

Each copy leaves its evidence beside its record (:mod:`cloudbench.measure.evidence`): its
client's TCP sockets every second as ``ss -tin`` saw them, and its CPU seconds against the
cores it had. The rules are the ones ESnet's fasterdata pages teach, applied in this order:

1. **store (throttling)**: the store answered requests with 503 SlowDown or 429 (the record's
   ``throttled``) and the connections stood idle for most of the copy (the client was
   waiting out its back-off, not moving data).
2. **client CPU**: the client's processes used nearly all the cores they were allowed
   (affinity, and a cgroup quota): :data:`CPU_FULL` of them or more.
2a. **disk**: the connections waited for data (an upload's idle, a download's unread) while
   a thread of the client waited on the disk (state ``D``) in most samples and most of the
   bytes moved came from storage (``/proc/<pid>/io``), not the page cache: the scratch.
3. An upload is read from the sender's side, which is ours. Of the time its data
   connections were busy:

   * **sender's buffer**: mostly ``sndbuf_limited``: the host's send buffer
     (``net.ipv4.tcp_wmem``'s maximum) held each connection to one buffer per round trip;
     the value that lifts it is rate x RTT per connection, said with the current maximum;
   * **receiver's window**: mostly ``rwnd_limited`` with the window full of a round trip's
     worth (rate x the path's minimum RTT near the advertised window): the far end's receive
     buffer is too small for the path;
   * **per-connection path**: mostly ``rwnd_limited`` with a window far larger than a round
     trip's worth, so the far end drained each connection at its own pace; or busy, held by
     its own congestion window, without a queue building: each connection is held alone, so
     more connections help;
   * **shared link**: busy, held by the congestion window, with the signs of a queue that
     all the connections share: round trips well above the path's minimum and retransmitted
     data (drops at the bottleneck). More connections do not help.

   A download is read from the receiver's side: a receive queue that stayed full says the
   client read slowly (its CPU, when full, is named by rule 2); otherwise the store or the
   path sent slower than the client read. Packets that arrived out of order (``rcv_ooopack``)
   are a drop upstream, where a queue overflowed: a **shared link**, as for an upload's
   drops; without them, per connection or shared is the route's scaling to say (below).
4. Otherwise **undetermined**, with the figures: idle connections with neither throttling, a
   full CPU nor a disk wait may be the store's latency per request or the client itself, and
   the evidence here does not tell them apart.

A route's verdict (:func:`route_verdict`) combines its measurements at its best setting, and
where the campaign measured that setting's layout at more than one connection count (a
tuning sweep), how the rate scaled from the next lower count to the best one decides between
per-connection (the rate grew with the connections) and shared (it did not): the strongest
evidence of the two. Everything here is pure; reading the files is :func:`of_record`.
"""

from __future__ import annotations

import html
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudbench.measure.evidence import INTERVAL_S

PER_CONNECTION = "per-connection path"
SHARED = "shared link"
RECEIVER_WINDOW = "receiver's window"
SENDER_BUFFER = "sender's buffer"
CPU = "client CPU"
DISK = "disk"
STORE = "store"
UNDETERMINED = "undetermined"
OWN_CAP = "the client's own cap"  # rclone's --bwlimit / --bwlimit-file, as the campaign set
LIMITS = (
    PER_CONNECTION, SHARED, RECEIVER_WINDOW, SENDER_BUFFER, CPU, DISK, STORE, OWN_CAP,
    UNDETERMINED,
)  # fmt: skip

ACTIONS = {
    PER_CONNECTION: "more connections (transfers, chunks or streams) help",
    SHARED: "more connections do not help: the link is full; a faster or second path does",
    RECEIVER_WINDOW: "raise the receiving end's buffer (its net.ipv4.tcp_rmem maximum)",
    SENDER_BUFFER: "raise this host's net.ipv4.tcp_wmem maximum",
    CPU: "more cores for the client, or less work per byte (no checksums, TLS offload)",
    DISK: "faster scratch",
    STORE: "fewer requests at once, or ask the store's operator (it throttles)",
    OWN_CAP: "the rate is the cap the campaign set: raise or remove it to measure the path",
    UNDETERMINED: "",
}

# --- thresholds (each a share of a measured quantity, none a rate or a time) -------------
CPU_FULL = 0.85  # of the cores allowed: the client had no more CPU
LIMITED = 0.5  # of busy time held by one cause: that cause held the connection
WINDOW_FULL = 0.5  # rate x RTT / advertised window: the window itself is the limit
BUSY = 0.5  # of the copy's seconds a data connection was busy: the network held the copy
QUEUE_RTT = 2.0  # RTT over the path's minimum: a queue has built
QUEUE_RTT_MS = 1.0  # ... by at least this much (loopback's minimum RTT is microseconds)
RETRANS = 0.001  # of the bytes sent, retransmitted: the bottleneck dropped
OOO_PACKETS = 1  # a download's packets out of order: one is a drop's sign (never on loopback)
RECV_Q_FULL = 0.5  # of a download's socket samples with unread data: the client read slowly
DISK_WAIT = 0.5  # of the samples with a thread waiting on the disk: the scratch held the copy
FROM_DISK = 0.5  # of the bytes moved, read from (or written to) storage, not the page cache
DATA_BYTES = 256 * 1024  # a connection that moved less carried requests, not the data
SCALES = 0.5  # of the proportional gain from more connections: they help
FLAT = 0.15  # of it, or less: they do not
# of the client's own cap: a route this close to it moved at the cap (rclone's rates read
# 0.91-0.99 of what a link of known capacity allows: docs/testing.md)
AT_CAP = 0.9


# How an undetermined verdict's figures begin when the network held the copy (an upload's
# connections busy, by their congestion window; a download's client keeping up): then how
# the rate scaled with the connections may decide per connection against shared. Otherwise
# (idle connections, a slow reader, no connection seen) a rate that did not grow says
# nothing of the link: on a busy machine more clients only share its cores.
CWND_BOUND = "cwnd-bound"
KEPT_UP = "the client kept up"


@dataclass(frozen=True)
class Verdict:
    """What limited a copy, the figures it rests on, and what to do about it."""

    limit: str
    figures: str
    action: str = ""

    def text(self) -> str:
        return f"{self.limit}: {self.figures}" if self.figures else self.limit

    @property
    def network_held(self) -> bool:
        """Whether the network held this copy (see :data:`CWND_BOUND`)."""
        return self.limit in (PER_CONNECTION, SHARED) or (
            self.limit == UNDETERMINED and self.figures.startswith((CWND_BOUND, KEPT_UP))
        )


@dataclass(frozen=True)
class Summary:
    """The evidence of one copy, reduced to what the rules read (module doc)."""

    samples: int
    connections: int  # data connections seen (moved at least DATA_BYTES)
    cpu_share: float | None  # of the cores allowed, over the sampled seconds
    cores: float | None
    busy_s: float  # the data connections' busy seconds, added
    seconds: float | None  # the copy's
    rwnd_share: float | None  # of the data connections' busy time
    sndbuf_share: float | None
    rtt_ms: float | None  # median of the data connections' smoothed RTT at their last sample
    minrtt_ms: float | None
    retrans_share: float | None  # bytes retransmitted / bytes sent
    # median over data connections of rate x the path's minimum RTT / the advertised window:
    # near 1, the window is all a round trip can carry; near 0, the far end drains slowly
    # (a slow reader's delayed acks stretch the smoothed RTT, never the minimum)
    window_fill: float | None
    recv_q_share: float | None  # of a download's socket samples, with unread data
    rcv_space: int | None  # median receive space of a download's connections
    wmem_max: int | None
    rmem_max: int | None
    no_ss: bool = False  # the node had no ss: its connections could not be seen
    # the copy's seconds before its first data connection can have opened (its first sample
    # less one interval): start-up and listing, which a loaded node stretches, not the
    # connections' idle time
    before_s: float = 0.0
    # a download's data connections that received packets out of order (a drop upstream),
    # and those packets
    ooo_connections: int = 0
    ooo_packets: int = 0
    # of the samples that looked (evidence files from before 2026-11-28 did not), those with
    # a thread of the client waiting on the disk; and the bytes its processes read from
    # storage (an upload) or wrote to it (a download), every client's last look added
    disk_wait_share: float | None = None
    storage_bytes: int | None = None


def _disk(samples: Sequence[Mapping[str, Any]], direction: str) -> tuple[float | None, int | None]:
    """(disk_wait_share, storage_bytes) of a copy's samples (:class:`Summary`)."""
    looked = [s for s in samples if "disk_wait" in s]
    if not looked:
        return None, None
    key = "read_bytes" if direction == "upload" else "write_bytes"
    last: dict[int, int] = {}
    for s in looked:  # cumulative per process tree: each client's last look
        last[s.get("client", 0)] = s.get(key, 0)
    return sum(s["disk_wait"] > 0 for s in looked) / len(looked), sum(last.values())


def _median(xs: Iterable[float | None]) -> float | None:
    got = [x for x in xs if x is not None and not math.isnan(x)]
    return statistics.median(got) if got else None


def _last_views(samples: Sequence[Mapping[str, Any]]) -> dict[Any, Any]:
    """Each socket's last sample (its counters are cumulative over its life)."""
    last: dict[Any, Any] = {}
    for s in samples:
        for sock in s["sockets"]:
            last[(s.get("client", 0), sock.inode, sock.local)] = sock
    return last


def summarise(docs: Sequence[Mapping[str, Any]], direction: str, seconds: float | None) -> Summary:
    """One copy's evidence files (several for a group of clients) as a :class:`Summary`."""
    samples = [{**s, "client": k} for k, d in enumerate(docs) for s in d.get("samples", []) if s]
    shares, cores = [], None
    for d in docs:
        own = [s for s in d.get("samples", []) if s.get("t")]
        if own and d.get("cores"):
            last = own[-1]
            shares.append(last["cpu_s"] / last["t"] / d["cores"])
            cores = d["cores"] if cores is None else min(cores, d["cores"])
    last = _last_views(samples)
    moved = "bytes_received" if direction == "download" else "bytes_acked"
    data = [s for s in last.values() if (getattr(s, moved) or 0) >= DATA_BYTES]
    busy = sum(s.busy_ms or 0 for s in data)
    secs = seconds or max((s.get("t", 0) for s in samples), default=0)
    ids = {key for key, sock in last.items() if sock in data}
    first = min(
        (
            s["t"]
            for s in samples
            if "t" in s and any((s["client"], k.inode, k.local) in ids for k in s["sockets"])
        ),
        default=None,
    )
    interval = next((d["interval_s"] for d in docs if d.get("interval_s")), INTERVAL_S)
    before = max(0.0, first - interval) if first is not None else 0.0
    per_conn_rate = []
    for s in data:
        if s.busy_ms and s.bytes_acked:
            per_conn_rate.append(s.bytes_acked / (s.busy_ms / 1000))
    fills = [
        (s.bytes_acked / (s.busy_ms / 1000)) * (s.minrtt_ms / 1000) / s.snd_wnd
        for s in data
        if s.busy_ms and s.bytes_acked and s.minrtt_ms and s.snd_wnd
    ]
    sent = sum(s.bytes_sent or 0 for s in data)
    views = [
        sock
        for s in samples
        for sock in s["sockets"]
        if direction == "download" and (sock.bytes_received or 0) >= DATA_BYTES
    ]
    disk_wait_share, storage = _disk(samples, direction)
    wmem = next((d["tcp_wmem"][-1] for d in docs if d.get("tcp_wmem")), None)
    rmem = next((d["tcp_rmem"][-1] for d in docs if d.get("tcp_rmem")), None)
    return Summary(
        samples=len(samples),
        connections=len(data),
        cpu_share=max(shares) if shares else None,
        cores=cores,
        busy_s=busy / 1000,
        seconds=secs or None,
        rwnd_share=sum(s.rwnd_limited_ms or 0 for s in data) / busy if busy else None,
        sndbuf_share=sum(s.sndbuf_limited_ms or 0 for s in data) / busy if busy else None,
        rtt_ms=_median(s.rtt_ms for s in data),
        minrtt_ms=min((s.minrtt_ms for s in data if s.minrtt_ms is not None), default=None),
        retrans_share=sum(s.bytes_retrans or 0 for s in data) / sent if sent else None,
        window_fill=_median(fills),
        recv_q_share=sum(v.recv_q > 0 for v in views) / len(views) if views else None,
        rcv_space=int(m) if (m := _median(v.rcv_space for v in views)) is not None else None,
        wmem_max=wmem,
        rmem_max=rmem,
        no_ss=any("ss" in d and d["ss"] is None for d in docs),
        ooo_connections=sum(bool(s.rcv_ooopack) for s in data if direction == "download"),
        ooo_packets=sum(s.rcv_ooopack or 0 for s in data if direction == "download"),
        before_s=min(before, secs or 0.0),
        disk_wait_share=disk_wait_share,
        storage_bytes=storage,
    )


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{x:.0%}"


def _kib(n: float) -> str:
    return f"{n / 1024:.0f} KiB" if n < 4 * 1024**2 else f"{n / 1024**2:.1f} MiB"


def _scratch(ev: Summary, direction: str, mb_per_s: float | None, cpu: str) -> Verdict | None:
    """The disk held a copy whose connections waited for data (an upload's idle, a download's
    unread): a thread of the client waiting on the disk in most samples, and most of the
    bytes moved read from storage (written to it), not the page cache. None: not shown."""
    if ev.disk_wait_share is None or ev.disk_wait_share < DISK_WAIT:
        return None
    if not (ev.storage_bytes and mb_per_s and ev.seconds):
        return None
    if ev.storage_bytes < FROM_DISK * mb_per_s * 1e6 * ev.seconds:
        return None
    verb = "read from" if direction == "upload" else "written to"
    return Verdict(
        DISK,
        f"a thread waiting on the disk in {_pct(ev.disk_wait_share)} of samples; "
        f"{ev.storage_bytes / ev.seconds / 1e6:.1f} MB/s {verb} storage for a copy at "
        f"{mb_per_s:.1f} MB/s; {cpu}",
        ACTIONS[DISK],
    )


def verdict(
    ev: Summary | None,
    direction: str,
    mb_per_s: float | None,
    connections: int | None,
    throttled: int | None = None,
) -> Verdict:
    """What limited one copy (module doc), from its evidence and its record's rate,
    connections and throttled answers."""
    if ev is None:
        return Verdict(UNDETERMINED, "no evidence beside the record")
    if ev.samples == 0:  # the file is there: the copy ended before its first sample
        return Verdict(UNDETERMINED, "the copy ended before its first sample (too short to see)")
    # of the copy's seconds x the connections it ran at once (its record's, else those seen)
    at_once = min(connections or ev.connections, ev.connections) or 1
    open_s = (ev.seconds or 0.0) - ev.before_s  # from the first data connection on
    busy_share = ev.busy_s / open_s / at_once if open_s > 0 and ev.busy_s else None
    idle = busy_share is not None and busy_share < BUSY
    if throttled and (idle or busy_share is None):
        return Verdict(
            STORE,
            f"{throttled} answers 503/429 (throttling); connections busy "
            f"{_pct(busy_share)} of the copy",
            ACTIONS[STORE],
        )
    if ev.cpu_share is not None and ev.cpu_share >= CPU_FULL:
        return Verdict(
            CPU, f"CPU {_pct(ev.cpu_share)} of {ev.cores:g} core(s) allowed", ACTIONS[CPU]
        )
    cpu = f"CPU {_pct(ev.cpu_share)} of {ev.cores:g}" if ev.cores else "CPU ?"
    waited = (
        ev.recv_q_share is not None and ev.recv_q_share >= RECV_Q_FULL
        if direction == "download"
        else busy_share is None or idle
    )
    if waited and (scratch := _scratch(ev, direction, mb_per_s, cpu)):
        return scratch
    if ev.connections == 0:
        why = " (no ss on the node)" if ev.no_ss else ""
        return Verdict(UNDETERMINED, f"no data connection seen in {ev.samples} samples{why}; {cpu}")
    if direction == "download":
        if ev.recv_q_share is not None and ev.recv_q_share >= RECV_Q_FULL:
            return Verdict(
                UNDETERMINED,
                f"the client read slowly (unread data in {_pct(ev.recv_q_share)} of samples) "
                f"with its CPU not full ({cpu}): its disk or itself",
            )
        kept_up = f"{KEPT_UP} (unread data in {_pct(ev.recv_q_share)} of samples)"
        if ev.ooo_packets >= OOO_PACKETS:
            return Verdict(
                SHARED,
                f"{kept_up}; {ev.ooo_packets} packets arrived out of order on "
                f"{ev.ooo_connections} of {ev.connections} connections: drops upstream, where "
                "a queue the connections share overflowed",
                ACTIONS[SHARED],
            )
        return Verdict(
            UNDETERMINED,
            f"{kept_up}, nothing arrived out of order; {cpu}: the store or the path sent "
            "slower; per connection or shared is for the route's scaling to say",
        )
    rate_conn = (mb_per_s or 0) * 1e6 / max(connections or ev.connections, 1)
    rtt_s = (ev.rtt_ms or 0) / 1000
    held = f"busy {_pct(busy_share)} of the copy"
    if busy_share is None or busy_share < BUSY:
        return Verdict(
            UNDETERMINED,
            f"connections idle most of the copy ({held}), {cpu}: the disk, the store's "
            "latency per request or the client, which the evidence here does not tell apart",
        )
    if ev.sndbuf_share is not None and ev.sndbuf_share >= LIMITED:
        need = rate_conn * rtt_s
        wmem = f"; net.ipv4.tcp_wmem max now {ev.wmem_max}" if ev.wmem_max else ""
        per_mib = 1024**2 / rtt_s / 1e6 if rtt_s else None
        return Verdict(
            SENDER_BUFFER,
            f"sndbuf-limited {_pct(ev.sndbuf_share)} of busy time; rate x RTT = "
            f"{rate_conn / 1e6:.2f} MB/s x {ev.rtt_ms:.1f} ms = {_kib(need)} per connection"
            f"{wmem}",
            f"{ACTIONS[SENDER_BUFFER]} above {int(need)} bytes"
            + (
                f" (each MiB more: about {per_mib:.0f} MB/s more per connection)" if per_mib else ""
            ),
        )
    if ev.rwnd_share is not None and ev.rwnd_share >= LIMITED:
        if ev.window_fill is not None and ev.window_fill >= WINDOW_FULL:
            return Verdict(
                RECEIVER_WINDOW,
                f"rwnd-limited {_pct(ev.rwnd_share)} of busy time; rate x minimum RTT fills "
                f"{_pct(ev.window_fill)} of the advertised window",
                ACTIONS[RECEIVER_WINDOW],
            )
        window = (
            f"with rate x minimum RTT {_pct(ev.window_fill)} of the window"
            if ev.window_fill is not None
            else "with the window shut (zero) when sampled"
        )
        return Verdict(
            PER_CONNECTION,
            f"rwnd-limited {_pct(ev.rwnd_share)} of busy time {window}: the far end drained "
            f"each connection at its own pace ({rate_conn / 1e6:.2f} MB/s each); {held}",
            ACTIONS[PER_CONNECTION],
        )
    # busy, held by neither window nor buffer: by its congestion window
    queue = (
        ev.rtt_ms is not None
        and ev.minrtt_ms is not None
        and ev.rtt_ms >= QUEUE_RTT * ev.minrtt_ms
        and ev.rtt_ms - ev.minrtt_ms >= QUEUE_RTT_MS
    )
    drops = ev.retrans_share is not None and ev.retrans_share >= RETRANS
    signs = (
        f"RTT {ev.rtt_ms or 0:.1f} ms over a {ev.minrtt_ms or 0:.2f} ms minimum; "
        f"retransmitted {_pct(ev.retrans_share)} of bytes sent"
    )
    if queue and drops:
        return Verdict(
            SHARED,
            f"{CWND_BOUND} ({held}) with a shared queue's signs: {signs}",
            ACTIONS[SHARED],
        )
    if not queue and not drops:
        return Verdict(
            PER_CONNECTION,
            f"{CWND_BOUND} ({held}) with no queue: {signs}",
            ACTIONS[PER_CONNECTION],
        )
    return Verdict(UNDETERMINED, f"{CWND_BOUND} ({held}), signs mixed: {signs}")


# --- a route: its measurements and how its rate scaled -------------------------------------


@dataclass(frozen=True)
class Scaling:
    """The rate at the best setting against the same layout at the next lower connection
    count (or a higher count that was slower)."""

    from_connections: int
    to_connections: int
    from_mb_per_s: float
    to_mb_per_s: float

    @property
    def gain(self) -> float:
        """The share of the proportional gain the added connections gave: 1 when the rate
        grew with the connections, 0 when it stood still, below 0 when it fell."""
        c = self.to_connections / self.from_connections
        return (self.to_mb_per_s / self.from_mb_per_s - 1) / (c - 1)

    def text(self) -> str:
        return (
            f"{self.from_connections} -> {self.to_connections} connections: "
            f"{self.from_mb_per_s:.1f} -> {self.to_mb_per_s:.1f} MB/s"
        )


def scaling_of(points: Sequence[tuple[int, float]], best_connections: int) -> Scaling | None:
    """From (connections, median MB/s) of one layout: the best count against the next lower
    one, or, when the best is the highest, that is all; when a higher count exists it was
    slower, and it is said instead (more connections did not help)."""
    rates = dict(points)
    if best_connections not in rates:
        return None
    higher = sorted(c for c in rates if c > best_connections)
    if higher:
        c = higher[0]
        return Scaling(best_connections, c, rates[best_connections], rates[c])
    lower = sorted(c for c in rates if c < best_connections)
    if lower:
        c = lower[-1]
        return Scaling(c, best_connections, rates[c], rates[best_connections])
    return None


def route_verdict(verdicts: Sequence[Verdict], scaling: Scaling | None = None) -> Verdict:
    """One route's verdict from its best setting's measurements (their majority, more than
    half) and, where measured, its scaling, which decides per-connection against shared
    when the network held most of those measurements (:attr:`Verdict.network_held`)."""
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.limit] = counts.get(v.limit, 0) + 1
    top = max(counts, key=lambda k: counts[k]) if counts else UNDETERMINED
    major = top if counts and counts[top] * 2 > len(verdicts) else UNDETERMINED
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "none"
    said = f"its best setting's measurements: {kinds}"
    example = next((v for v in verdicts if v.limit == major), None)
    if major in (STORE, CPU, SENDER_BUFFER, RECEIVER_WINDOW, DISK):
        figures = f"{said}; {example.figures}" if example else said
        return Verdict(major, figures, ACTIONS[major])
    held = sum(v.network_held for v in verdicts) * 2 > len(verdicts)
    if scaling is not None and held:
        if scaling.gain >= SCALES:
            return Verdict(
                PER_CONNECTION,
                f"the rate grew with the connections ({scaling.text()}); {said}",
                ACTIONS[PER_CONNECTION],
            )
        if scaling.gain <= FLAT:
            return Verdict(
                SHARED,
                f"more connections did not help ({scaling.text()}); {said}",
                ACTIONS[SHARED],
            )
    if major != UNDETERMINED and example is not None:
        return Verdict(major, f"{said}; {example.figures}", ACTIONS[major])
    extra = f"; {scaling.text()}" if scaling else ""
    first = next((v.figures for v in verdicts if v.limit == UNDETERMINED and v.figures), "")
    return Verdict(UNDETERMINED, f"{said}{extra}" + (f"; one said: {first}" if first else ""))


# --- the files and the tables (I/O at the edge) ---------------------------------------------


def evidence_files(record: Path, rec: Mapping[str, Any]) -> list[Path]:
    """The evidence files of one record: its own, or each of its clients'."""
    from cloudbench.campaign import paths

    if int(float(rec.get("clients") or 1)) > 1:
        folder = paths.clients_dir(record)
        return sorted(folder.glob("client-*.evidence.jsonl"))
    return [Path(paths.evidence(record))]


def of_record(record: Path, rec: Mapping[str, Any]) -> Verdict | None:
    """A record's verdict from the evidence beside it (None: a copy that did not work, or
    kept no evidence: a record from before evidence was sampled)."""
    from cloudbench.measure import evidence

    if rec.get("status") != "ok":
        return None
    if rec.get("mb_per_s"):  # moved at a cap of its own: that, whatever the evidence shows
        capped = _caps_of(record, rec).held(
            str(rec.get("tool") or "rclone"), float(rec["mb_per_s"]),
            int(float(rec.get("connections") or 1)), int(float(rec.get("clients") or 1)),
        )  # fmt: skip
        if capped:
            return capped
    docs = [d for p in evidence_files(record, rec) if (d := evidence.read(p)) is not None]
    if not docs:
        return None
    ev = summarise(docs, rec["direction"], rec.get("seconds"))
    return verdict(
        ev, rec["direction"], rec.get("mb_per_s"), rec.get("connections"), rec.get("throttled")
    )


def _caps_of(record: Path, rec: Mapping[str, Any]) -> OwnCaps:
    """The caps a copy ran under: its record's, or, for a group of clients (whose record
    keeps no command of its own), its first client's record's."""
    if rec.get("command") or int(float(rec.get("clients") or 1)) <= 1:
        return OwnCaps.of_record(rec)
    import json

    from cloudbench.campaign import paths

    try:
        return OwnCaps.of_record(
            json.loads((paths.clients_dir(record) / "client-0.json").read_text())
        )
    except (OSError, ValueError):
        return OwnCaps()


def columns(record: Path, rec: Mapping[str, Any]) -> dict[str, str | None]:
    """The ``limit`` and ``limit_evidence`` cells of a transfers.tsv row."""
    v = of_record(record, rec)
    return {"limit": v.limit if v else None, "limit_evidence": v.figures if v else None}


@dataclass(frozen=True)
class OwnCaps:
    """The rate caps the campaign gave rclone (bytes/s; None: not set): in all per process
    (--bwlimit) and per file (--bwlimit-file)."""

    total: float | None = None
    per_file: float | None = None

    source: str = "the campaign's rclone.flags"

    @classmethod
    def of(cls, info: Mapping[str, Any] | None) -> OwnCaps:
        return cls.of_flags(
            [str(f) for f in (((info or {}).get("rclone") or {}).get("flags") or [])]
        )

    @classmethod
    def of_flags(cls, flags: Sequence[str], source: str = "") -> OwnCaps:
        from cloudbench.report.labels import bwlimit_bytes, flag_values

        total = [b for v in flag_values(flags, "--bwlimit") if (b := bwlimit_bytes(v))]
        per_file = [b for v in flag_values(flags, "--bwlimit-file") if (b := bwlimit_bytes(v))]
        return cls(
            total[-1] if total else None,
            per_file[-1] if per_file else None,
            *([source] if source else []),
        )

    @classmethod
    def of_record(cls, rec: Mapping[str, Any]) -> OwnCaps:
        """The caps one copy ran under: its command line's, then its environment's
        (``RCLONE_BWLIMIT=8M`` in the record's ``rclone_env``), which rclone reads as flags."""
        import shlex

        try:
            flags = shlex.split(str(rec.get("command") or ""))
        except ValueError:
            flags = []
        for item in str(rec.get("rclone_env") or "").split():
            name, _, value = item.partition("=")
            if name in ("RCLONE_BWLIMIT", "RCLONE_BWLIMIT_FILE"):
                flags += [f"--{name[7:].lower().replace('_', '-')}", value]
        return cls.of_flags(flags, "its command line and environment")

    def held(
        self, tool: str, mb_per_s: float, connections: int, processes: int = 1
    ) -> Verdict | None:
        """The verdict of a route of ``tool`` at ``mb_per_s`` over ``connections`` when it
        moved at a cap of rclone's own (None otherwise): the cap, not the path, set it.
        ``--bwlimit`` caps each rclone process: a group of ``processes`` clients may move
        that many times it."""
        from cloudbench.campaign.clients import capped_by_rclone_flags

        if not capped_by_rclone_flags(tool):
            return None
        each = f"--bwlimit {self.total / 2**20:g} MiB/s" if self.total else ""
        if processes > 1:
            each += f" x {processes} rclone processes"
        caps = [(self.total * processes, each)] if self.total else []
        if self.per_file:
            caps.append(
                (self.per_file * connections,
                 f"--bwlimit-file {self.per_file / 2**20:g} MiB/s x {connections} connections")
            )  # fmt: skip
        for cap, words in sorted((c for c in caps if c[0]), key=lambda c: c[0]):
            if mb_per_s * 1e6 >= AT_CAP * cap:
                return Verdict(
                    OWN_CAP,
                    f"{mb_per_s:.1f} MB/s is {mb_per_s * 1e6 / cap:.0%} of {words} = "
                    f"{cap / 1e6:.1f} MB/s, from {self.source}",
                    ACTIONS[OWN_CAP],
                )
        return None


def routes_table(transfers: Any, caps: OwnCaps | None = None) -> Any:
    """One row per route (site, remote, direction): its best setting's verdict, from the
    ``limit`` column of its measurements and, where measured, its scaling; a route that
    moved at a cap the campaign gave rclone (``caps``) is named by that cap."""
    import pandas as pd

    from cloudbench.campaign.identity import ROUTE
    from cloudbench.report.routes import SETTING

    cols = [*ROUTE, "limit", "figures", "action"]
    if transfers.empty or "limit" not in transfers:
        return pd.DataFrame(columns=cols)
    rows = []
    ok = transfers[(transfers["status"] == "ok") & transfers["mb_per_s"].notna()]
    for key, g in ok.groupby(ROUTE, sort=True):
        medians = g.groupby(SETTING, sort=True, dropna=False)["mb_per_s"].median()
        top = medians.idxmax()
        best = dict(zip(SETTING, top if isinstance(top, tuple) else (top,), strict=True))
        mine = g[_matches(g, best)]
        verdicts = [
            Verdict(str(r["limit"]), str(r.get("limit_evidence") or ""))
            for _, r in mine.iterrows()
            if isinstance(r.get("limit"), str)
        ]
        scaling = None
        tool = str(mine["tool"].iloc[0]) if "tool" in mine and len(mine) else ""
        if "connections" in g and mine["connections"].notna().any():
            # the best setting's tool and layout at other connection counts: never another
            # tool's rows (a user's route read rclone's and s5cmd's rates as one median)
            same = g[_matches(g, {k: v for k, v in best.items() if k == "layout"})]
            if tool:
                same = same[same["tool"] == tool]
            pts = same.dropna(subset=["connections"]).groupby("connections")["mb_per_s"].median()
            scaling = scaling_of(
                [(int(c), float(r)) for c, r in pts.items()], int(mine["connections"].median())
            )
        v = route_verdict(verdicts, scaling)
        at_cap = (caps or OwnCaps()).held(
            tool, float(medians.max()), int(mine["connections"].median())
            if "connections" in mine and mine["connections"].notna().any() else 1,
            int(mine["clients"].median())
            if "clients" in mine and mine["clients"].notna().any() else 1,
        )  # fmt: skip
        v = at_cap or v
        rows.append(dict(zip(ROUTE, key, strict=True)) | {
            "limit": v.limit, "figures": v.figures, "action": v.action,
        })  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


def _matches(g: Any, best: Mapping[str, Any]) -> Any:
    import numpy as np
    import pandas as pd

    masks = [
        (g[k].isna() if (v is None or (isinstance(v, float) and math.isnan(v))) else g[k] == v)
        for k, v in best.items()
    ]
    return np.logical_and.reduce(masks) if masks else pd.Series(True, index=g.index)


def block_html(table: Any) -> str:
    """The report's "What limits each route" block: one line per route, its limit, the action
    and the first of its figures (all of them in limits.tsv); empty: nothing to say."""
    if table is None or table.empty:
        return ""
    if (table["limit"] == UNDETERMINED).all():  # one line, not one per route
        return (
            "<div class='cb-limits'><p><b>What limits each route</b>: undetermined on every "
            f"route ({html.escape(str(table['figures'].iloc[0]))}).</p></div>"
        )
    items = []
    for _, r in table.iterrows():
        route = f"{r['site']} {r['direction']} {r['remote']}"
        action = f": {html.escape(r['action'])}" if r["action"] else ""
        first = str(r["figures"]).split("; ")[0]  # the rest is in limits.tsv
        items.append(
            f"<li><b>{html.escape(route)}</b>: {html.escape(r['limit'])}{action} "
            f"<span class='cb-limit-figures' style='font-size:smaller'>({html.escape(first)})"
            "</span></li>"
        )
    return (
        "<div class='cb-limits'><h3>What limits each route</h3><ul>"
        + "".join(items)
        + "</ul></div>"
    )


def limits_block(transfers: Any, caps: OwnCaps | None = None) -> str:
    """The first screen's "What limits each route" block from a campaign's rows (those of
    transfers.tsv, with their ``limit``): empty where no row has one."""
    if transfers is None or transfers.empty or "limit" not in transfers:
        return ""
    judged = transfers["limit"].map(lambda x: isinstance(x, str) and x != "").any()
    if not judged and not (caps and (caps.total or caps.per_file)):
        return ""  # records from before evidence was sampled, and no cap of the campaign's
    return block_html(routes_table(transfers, caps))
