"""A link of known capacity on loopback: a TCP proxy on 127.0.0.1 in front of a real server
that forwards the bytes both ways untouched (no HTTP parsing, so S3 signatures still check)
at most ``per_connection_bytes_per_s`` per connection and ``total_bytes_per_s`` for all its
connections together, in each direction. The caps on a copy's rate are then the network
path's, as at a site, not the client's own flags (``--bwlimit`` caps one process; a link
caps whatever crosses it, however many processes and connections).

With N connections moving data, a direction carries ``min(N * per_connection, total)``: the
knee is at ``total / per_connection`` connections.

Collapse (optional, ``collapse_above``): while more than ``collapse_above`` connections are
open at once, the total cap of each direction falls to ``total_bytes_per_s *
collapse_factor`` (congestion collapse: more connections move less in all than fewer did),
and it returns when no more than ``collapse_above`` are open. A connection counts from its
accept to its close, idle keep-alive ones included, as a router's flow table counts them.
The per-connection cap stays. A search for the best concurrency must find the knee and stay
below the collapse.

Shaping: token buckets, one per connection and direction and one shared per direction,
refilling at their rate up to ``burst_bytes``. A piece read (up to 64 KiB) waits for its
tokens from its connection's bucket, then from the shared one, and is sent then; a bucket
may run into debt, so over any interval from the start a direction has forwarded at most
rate x interval + burst. What waits queues in the proxy's receive buffers (about 256 KiB
per connection and direction, ``RCVBUF``), as at a bottleneck's router: a sender sees its
first bytes leave faster than the link, never the receiver. Waiting is sleeping, not
spinning: the CPU cost is a few reads and writes per 64 KiB (0.1 CPU-seconds for 6 s at
3 MB/s).

Its own record, for a test to judge a measured rate by the link's evidence of the same
seconds (``Shaper.window``): every forwarded piece with its wall-clock time (``time.time()``,
the clock of a record's ``started_utc``), each direction, and when each bucket was in debt
(a piece waited for its tokens: the link, or that connection's own cap, was the bottleneck
then and forwarded at exactly its rate). Over a window a direction forwarded ``bytes``; of
its seconds the shared bucket was busy ``total_busy_s`` and each connection's own bucket
``connection_busy_s``. On a starved machine the link is simply less busy (a sender that
cannot keep it fed, a pump woken late): the record says so instead of a rate falling short
of a nominal cap.

Runs in threads of the calling process (an accept thread, two per connection) for the
``with`` block; leaving it closes every socket and joins the threads within a bounded time.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime

PIECE = 64 * 1024  # bytes read at a time
# Each socket's receive buffer, set before the connection is made: left to autotuning, a
# slow reader's buffer stays small and a read returns what a window of under 64 KiB let in,
# a different amount on each connection; the shared bucket serves reads in turn, so
# connections with smaller reads got less of the link (0.70 against 0.92 MB/s of 4 sharing
# 3 MB/s). With room for several pieces, every read of a busy connection is a whole one.
RCVBUF = 4 * PIECE
BURST = 64 * 1024  # a bucket's depth: about 50 ms at 1 MB/s
COLLAPSE_FACTOR = 0.3
STOP_TIMEOUT = 5.0  # seconds to join every thread when the block ends
CONNECT_TIMEOUT = 5.0
UP, DOWN = "up", "down"  # client -> server, server -> client


class TokenBucket:
    """``rate`` bytes/s, at most ``burst`` saved up; :meth:`take` may run into debt (a piece
    larger than the burst still passes), which later takers wait out in turn. ``debts``:
    the wall-clock intervals [start, end] during which it was in debt, merged (while in debt
    it lets bytes through at exactly ``rate``: the bottleneck), with the rate of each."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.stamp = time.monotonic()
        self.lock = threading.Lock()
        self.debts: list[list[float]] = []  # [start, end, rate]

    def _refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self, n: int) -> float:
        """Take ``n`` tokens: the seconds to wait before sending them (0: now)."""
        with self.lock:
            self._refill(time.monotonic())
            self.tokens -= n
            wait = max(0.0, -self.tokens / self.rate)
            if wait > 0:
                now = time.time()
                last = self.debts[-1] if self.debts else None
                if last is not None and now <= last[1] and last[2] == self.rate:
                    last[1] = now + wait
                else:
                    if last is not None and now < last[1]:
                        last[1] = now  # the rate changed while in debt: a new interval
                    self.debts.append([now, now + wait, self.rate])
            return wait

    def busy(self, t0: float, t1: float) -> tuple[float, float]:
        """Of [t0, t1] (wall clock): the seconds this bucket was in debt, and the bytes its
        rate let through in them."""
        with self.lock:
            spans = [(max(0.0, min(b, t1) - max(a, t0)), r) for a, b, r in self.debts]
        return sum(s for s, _ in spans), sum(s * r for s, r in spans)

    def set_rate(self, rate: float) -> None:
        with self.lock:
            self._refill(time.monotonic())
            self.rate = rate


@dataclass(frozen=True)
class Window:
    """What the link did over [start, end] (wall clock) in one direction: the bytes it
    forwarded, and for how long (and how many bytes' worth) its shared bucket and each
    connection's own bucket were in debt, i.e. were the bottleneck."""

    start: float
    end: float
    bytes: int  # forwarded
    total_busy_s: float  # the shared bucket in debt: the total cap held the link
    total_allowed: float  # its rate x those seconds: the bytes the total cap let through
    connection_busy_s: tuple[float, ...]  # each connection's own bucket, in order opened
    connection_allowed: tuple[float, ...]

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def rate(self) -> float:
        """Bytes/s forwarded over the window."""
        return self.bytes / self.seconds

    @property
    def total_busy_share(self) -> float:
        return self.total_busy_s / self.seconds

    def held_at_cap(self, share: float = 0.5) -> int:
        """The connections held at their own cap (their bucket in debt) for at least
        ``share`` of the window: the ones that carried the copy, where each connection's
        cap binds (a total cap that binds too holds them less)."""
        return sum(busy >= share * self.seconds for busy in self.connection_busy_s)


@dataclass
class Shaper:
    """The link, and its counters (read them while it runs or after the block)."""

    port: int
    target_port: int
    per_connection_bytes_per_s: float
    total_bytes_per_s: float
    collapse_above: int | None = None
    collapse_factor: float = COLLAPSE_FACTOR
    burst_bytes: int = BURST
    bytes_up: int = field(default=0, init=False)  # client -> server, forwarded
    bytes_down: int = field(default=0, init=False)  # server -> client, forwarded
    connections_opened: int = field(default=0, init=False)
    open_connections: int = field(default=0, init=False)
    peak_connections: int = field(default=0, init=False)
    collapses: int = field(default=0, init=False)  # times more than collapse_above came open
    collapsed: bool = field(default=False, init=False)
    lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    shared: dict[str, TokenBucket] = field(default_factory=dict, init=False, repr=False)
    # (wall-clock time a piece was released to its receiver, cumulative bytes of its
    # direction after it), each direction
    sent: dict[str, list[tuple[float, int]]] = field(
        default_factory=lambda: {UP: [], DOWN: []}, init=False, repr=False
    )
    # each connection's own buckets, in the order opened
    own: list[dict[str, TokenBucket]] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self.shared = {d: TokenBucket(self.total_bytes_per_s, self.burst_bytes) for d in (UP, DOWN)}

    @property
    def total_cap(self) -> float:
        """The total cap of each direction now, bytes/s (lower while collapsed)."""
        factor = self.collapse_factor if self.collapsed else 1.0
        return self.total_bytes_per_s * factor

    def _opened(self) -> None:
        with self.lock:
            self.connections_opened += 1
            self.open_connections += 1
            self.peak_connections = max(self.peak_connections, self.open_connections)
            if self.collapse_above is not None and self.open_connections > self.collapse_above:
                if not self.collapsed:
                    self.collapsed = True
                    self.collapses += 1
                    self._set_total_rate()

    def _closed(self) -> None:
        with self.lock:
            self.open_connections -= 1
            if self.collapsed and self.open_connections <= (self.collapse_above or 0):
                self.collapsed = False
                self._set_total_rate()

    def _set_total_rate(self) -> None:
        for bucket in self.shared.values():
            bucket.set_rate(self.total_cap)

    def _forwarded(self, direction: str, n: int) -> None:
        """Record a piece as it leaves, stamped in the lock so the record's times ascend."""
        with self.lock:
            released = time.time()
            if direction == UP:
                self.bytes_up += n
                total = self.bytes_up
            else:
                self.bytes_down += n
                total = self.bytes_down
            self.sent[direction].append((released, total))

    def forwarded(self, direction: str, t0: float, t1: float) -> int:
        """Bytes forwarded in ``direction`` whose piece left during [t0, t1] (wall clock)."""
        with self.lock:
            sent = list(self.sent[direction])
        before = [b for t, b in sent if t < t0]
        upto = [b for t, b in sent if t <= t1]
        return (upto[-1] if upto else 0) - (before[-1] if before else 0)

    def row_window(self, direction: str, row: dict) -> Window:
        """The link's record of a transfers.tsv row's own seconds (its started_utc and
        seconds)."""
        t0 = datetime.fromisoformat(row["started_utc"].replace("Z", "+00:00")).timestamp()
        return self.window(direction, t0, t0 + row["seconds"])

    def window(self, direction: str, t0: float, t1: float) -> Window:
        """The link's own evidence of [t0, t1] (wall clock) in ``direction``: see Window."""
        with self.lock:
            own = [buckets[direction] for buckets in self.own]
        each = [b.busy(t0, t1) for b in own]
        return Window(
            t0, t1, self.forwarded(direction, t0, t1), *self.shared[direction].busy(t0, t1),
            tuple(s for s, _ in each), tuple(a for _, a in each),
        )  # fmt: skip


class _Connection:
    """One client's connection and its own upstream one: two pumps, the last to end closes
    both sockets."""

    def __init__(self, shaper: Shaper, client: socket.socket, server: socket.socket) -> None:
        self.shaper = shaper
        self.client, self.server = client, server
        self.pumps_left = 2
        self.lock = threading.Lock()
        rate, burst = shaper.per_connection_bytes_per_s, shaper.burst_bytes
        self.own = {d: TokenBucket(rate, burst) for d in (UP, DOWN)}
        with shaper.lock:
            shaper.own.append(self.own)

    def shut(self) -> None:
        """Wake both pumps (a blocked recv or sendall returns): for a reset or the stop."""
        for s in (self.client, self.server):
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def pump(self, direction: str, stop: threading.Event, live: set[_Connection]) -> None:
        src, dst = (self.client, self.server) if direction == UP else (self.server, self.client)
        own = self.own[direction]
        shared = self.shaper.shared[direction]
        try:
            while data := src.recv(PIECE):
                # its own cap first, then a place in the shared one: a connection waiting
                # for its own tokens holds none of the link's
                if stop.wait(own.take(len(data))) or stop.wait(shared.take(len(data))):
                    break
                # recorded before it is sent: a client that has every byte and exits is
                # then always inside the record when its window is read (recorded after
                # sendall, a pump descheduled on a loaded machine left a download's last
                # piece out of the window read at its exit: 1,445,292 of 1,500,000 bytes)
                self.shaper._forwarded(direction, len(data))
                dst.sendall(data)
            else:
                dst.shutdown(socket.SHUT_WR)  # pass the end on; the other way goes on
        except OSError:  # a reset on either side ends both ways, as it would end-to-end
            self.shut()
        with self.lock:
            self.pumps_left -= 1
            last = self.pumps_left == 0
        if last:
            self.client.close()
            self.server.close()
            with self.shaper.lock:
                live.discard(self)
            self.shaper._closed()


def _accept(
    shaper: Shaper,
    listen: socket.socket,
    stop: threading.Event,
    live: set[_Connection],
    threads: list[threading.Thread],
) -> None:
    while not stop.is_set():
        try:
            client, _ = listen.accept()
        except TimeoutError:
            continue
        except OSError:  # the listening socket was shut: the block ended
            return
        client.settimeout(None)
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        server.settimeout(CONNECT_TIMEOUT)
        try:
            server.connect(("127.0.0.1", shaper.target_port))
        except OSError:
            server.close()
            client.close()  # the target is down: so is the link
            continue
        server.settimeout(None)
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no delay of our own
        conn = _Connection(shaper, client, server)
        shaper._opened()
        with shaper.lock:
            live.add(conn)
            n = shaper.connections_opened
        for direction in (UP, DOWN):
            thread = threading.Thread(
                target=conn.pump,
                args=(direction, stop, live),
                name=f"shaper-{shaper.port}-{n}-{direction}",
                daemon=True,
            )
            thread.start()
            threads.append(thread)
        if stop.is_set():  # the stop came while this one was being set up
            conn.shut()


@contextmanager
def shaping_proxy(
    target_port: int,
    per_connection_bytes_per_s: float,
    total_bytes_per_s: float,
    collapse_above: int | None = None,
    collapse_factor: float = COLLAPSE_FACTOR,
    burst_bytes: int = BURST,
) -> Iterator[Shaper]:
    """A link on 127.0.0.1:``Shaper.port`` to 127.0.0.1:``target_port`` capped at
    ``per_connection_bytes_per_s`` per connection and ``total_bytes_per_s`` in all, in each
    direction; while more than ``collapse_above`` connections are open, the total cap is
    ``total_bytes_per_s * collapse_factor`` (module doc)."""
    if per_connection_bytes_per_s <= 0 or total_bytes_per_s <= 0:
        raise ValueError("rates must be positive (bytes/s)")
    if collapse_above is not None and (collapse_above < 1 or not 0 < collapse_factor <= 1):
        raise ValueError("collapse_above must be >= 1 and collapse_factor in (0, 1]")
    listen = socket.socket()
    listen.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)  # the accepted ones' too
    listen.bind(("127.0.0.1", 0))
    listen.listen(128)
    listen.settimeout(0.5)  # the stop is seen within this even if the shutdown did not wake it
    shaper = Shaper(
        listen.getsockname()[1], target_port, per_connection_bytes_per_s, total_bytes_per_s,
        collapse_above, collapse_factor, burst_bytes,
    )  # fmt: skip
    stop = threading.Event()
    live: set[_Connection] = set()
    threads: list[threading.Thread] = []
    acceptor = threading.Thread(
        target=_accept,
        args=(shaper, listen, stop, live, threads),
        name=f"shaper-{shaper.port}-accept",
        daemon=True,
    )
    acceptor.start()
    try:
        yield shaper
    finally:
        stop.set()
        with suppress(OSError):
            listen.shutdown(socket.SHUT_RDWR)  # wakes accept() on Linux
        deadline = time.monotonic() + STOP_TIMEOUT
        acceptor.join(timeout=STOP_TIMEOUT)
        listen.close()
        with shaper.lock:
            conns = list(live)
        for conn in conns:
            conn.shut()
        for thread in list(threads):
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
