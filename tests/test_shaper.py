"""A link of known capacity (tests/infra/shaper.py): one connection moves at the
per-connection cap, N together at min(N x per-connection, total), more than the collapse limit
at the collapsed total, and real rclone copies to a real S3 server keep to the same caps.

Rates are measured where the bytes arrive (by the server and the clients of this file over raw
TCP, each direction at once; with rclone by rclone's own stats, as cloudbench reads them) and
judged by the link's own record of the same seconds (``Shaper.window``), never by a nominal
cap alone: the bytes that arrived are the bytes the link forwarded, no transfer ever beats the
cap that binds it (an upper bound a busy machine cannot break: it only slows), and each moved
at least what its binding bucket let through in the seconds it was in debt (the link was the
bottleneck then). On a quiet machine a bucket is in debt for nearly all of a transfer, and the
two bounds pinch the rate to within a few percent of the cap; on a starved one the link is
less often the bottleneck, the record says so, and the verdict stands.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cloudbench.measure.rclonelog import parse_rclone_log
from tests.infra.s3 import serve_s3
from tests.infra.shaper import BURST, DOWN, PIECE, STOP_TIMEOUT, UP, Shaper, Window, shaping_proxy
from tests.infra.workflow import BIN

pytestmark = pytest.mark.quick  # threads and sockets; the rclone test starts processes
MB = 1_000_000
PER_CONNECTION = 1 * MB  # bytes/s
TOTAL = 3 * MB  # the knee at 3 connections
SECONDS = 1.0  # each measured transfer, at its expected rate (a BURST is spent in 65 ms at 1 MB/s)
JOIN = 60.0  # seconds: only a hang reaches it


@dataclass
class Endpoint:
    """A TCP server on 127.0.0.1: on each connection it reads to the end, noting when the
    ``up``-th byte came, and from the first byte on sends ``down`` bytes back; it closes
    when the client has."""

    port: int
    up: int
    down: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    arrived: list[float] = field(default_factory=list)  # when a connection's up bytes were in
    ends: list[int] = field(default_factory=list)  # bytes read by each closed connection
    accepted: int = 0  # connections accepted (one still in the backlog has no serve yet)

    def serve(self, conn: socket.socket) -> None:
        with conn:
            got = len(conn.recv(64 * 1024))
            sender = threading.Thread(target=self._send, args=(conn,), daemon=True)
            sender.start()
            noted = False
            while True:
                if got >= self.up and not noted:
                    noted = True
                    with self.lock:
                        self.arrived.append(time.time())
                if not (data := conn.recv(64 * 1024)):
                    break
                got += len(data)
            with self.lock:
                self.ends.append(got)
            sender.join(JOIN)

    def _send(self, conn: socket.socket) -> None:
        with suppress(OSError):
            conn.sendall(bytes(self.down))

    def clear(self, up: int, down: int) -> None:
        with self.lock:
            self.up, self.down = up, down
            self.arrived.clear()
            self.ends.clear()


@contextmanager
def endpoint(up: int = 0, down: int = 0) -> Iterator[Endpoint]:
    listen = socket.socket()
    listen.bind(("127.0.0.1", 0))
    listen.listen(64)
    ep = Endpoint(listen.getsockname()[1], up, down)
    threads: list[threading.Thread] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listen.accept()
            except OSError:
                return
            thread = threading.Thread(target=ep.serve, args=(conn,), daemon=True)
            thread.start()
            threads.append(thread)
            with ep.lock:
                ep.accepted += 1

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield ep
    finally:
        with suppress(OSError):
            listen.shutdown(socket.SHUT_RDWR)
        listen.close()
        acceptor.join(5)
        for thread in threads:  # every one the acceptor started, now that it has ended
            thread.join(5)


@dataclass
class Rates:
    """Each direction's bytes over its own seconds, as they arrived, and the link's
    record of those seconds."""

    up: float  # bytes/s, all connections together
    down: float
    links: dict[str, Window]
    moved: dict[str, int]  # bytes that arrived, each direction

    def of(self, expected: float) -> str:
        up, down = self.up / expected, self.down / expected
        busy = ", ".join(
            f"{d}: total busy {w.total_busy_share:.2f}, own busy "
            + "/".join(f"{s / w.seconds:.2f}" for s in w.connection_busy_s[-4:])
            for d, w in self.links.items()
        )
        return f"up {up:.3f}, down {down:.3f} of {expected / MB:g} MB/s ({busy})"


def _wait_for(condition, seconds: float = JOIN) -> None:
    """Poll until ``condition()``; only a hang reaches the deadline, and fails."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the link never got there"
        time.sleep(0.01)


def exchange(shaper: Shaper, ep: Endpoint, n: int, up: int, down: int) -> Rates:
    """``n`` connections through the link at once, each sending ``up`` bytes and reading
    ``down`` back: each direction's bytes over the seconds from the start until the last
    of them arrived (at the server, at the clients). Every connection stays open until all
    have arrived: a link that collapses while more than N are open would otherwise speed up
    for the last bytes, after the first connection closed."""
    _wait_for(lambda: shaper.open_connections == 0)  # those of an earlier exchange
    ep.clear(up, down)
    socks = [socket.create_connection(("127.0.0.1", shaper.port)) for _ in range(n)]
    _wait_for(lambda: shaper.open_connections == n)
    received: list[float] = []

    def send(s: socket.socket) -> None:
        s.sendall(bytes(up))

    def read(s: socket.socket) -> None:
        got = 0
        while got < down and (data := s.recv(64 * 1024)):
            got += len(data)
        if got == down:
            received.append(time.time())

    start = time.time()
    threads = [threading.Thread(target=f, args=(s,)) for s in socks for f in (send, read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN)
    _wait_for(lambda: len(ep.arrived) == n, JOIN)
    for s in socks:
        s.close()
    _wait_for(lambda: len(ep.ends) == n)
    assert len(received) == n and ep.ends == [up] * n, (received, ep.ends)
    ends = {UP: max(ep.arrived), DOWN: max(received)}
    links = {d: shaper.window(d, start, ends[d]) for d in (UP, DOWN)}
    return Rates(
        n * up / (ends[UP] - start),
        n * down / (ends[DOWN] - start),
        links,
        {UP: n * up, DOWN: n * down},
    )


def held_to(rates: Rates, cap: float, binding: str, n: int) -> None:
    """Each direction of an exchange of ``n`` connections against the link's record of its
    seconds: the bytes that arrived are what the link forwarded then; the rate never beats
    ``cap`` (the burst aside, which a bucket saves up while idle); and it is at least what
    the ``binding`` bucket(s) let through while in debt ("total": the shared one; "own":
    the last ``n`` connections' own): the link was the bottleneck for those seconds and
    moved at exactly its rate in them."""
    for d, rate in ((UP, rates.up), (DOWN, rates.down)):
        w = rates.links[d]
        assert w.bytes == rates.moved[d], (d, w)
        ceiling = cap * (1 + n * BURST / (cap * w.seconds)) * 1.02
        assert rate <= ceiling, (d, rate / cap, w)
        allowed = w.total_allowed if binding == "total" else sum(w.connection_allowed[-n:])
        assert rate * w.seconds >= allowed - n * PIECE, (d, rate / cap, w)
        assert allowed > 0, (d, "the link was never the bottleneck", w)


def _size(n: int, rate: float) -> int:
    """Bytes per connection for ``n`` connections to move for SECONDS at ``rate`` in all."""
    return int(rate * SECONDS / n)


def test_one_connection_moves_at_its_cap_each_way():
    """One connection, sending and receiving at once: each way at the per-connection cap
    (the total's 3x is no help to one connection)."""
    size = _size(1, PER_CONNECTION)
    with endpoint() as ep, shaping_proxy(ep.port, PER_CONNECTION, TOTAL) as link:
        rates = exchange(link, ep, 1, size, size)
        print(f"1 connection: {rates.of(PER_CONNECTION)}")
        held_to(rates, PER_CONNECTION, "own", 1)
        _wait_for(lambda: link.open_connections == 0)  # its pumps have ended, counted
        assert (link.bytes_up, link.bytes_down) == (size, size)
        assert (link.connections_opened, link.peak_connections) == (1, 1)


def test_connections_add_up_to_the_total_and_no_further():
    """2 connections move 2x the per-connection cap; 4 move the total (3x), not 4x: the
    knee is at total / per-connection = 3 connections. Each way at once."""
    with endpoint() as ep, shaping_proxy(ep.port, PER_CONNECTION, TOTAL) as link:
        for n, expected, binding in ((2, 2 * PER_CONNECTION, "own"), (4, TOTAL, "total")):
            size = _size(n, expected)
            rates = exchange(link, ep, n, size, size)
            print(f"{n} connections: {rates.of(expected)}")
            held_to(rates, expected, binding, n)
        assert link.connections_opened == 6 and link.peak_connections == 4
        assert link.collapses == 0


def test_more_connections_than_the_limit_collapse_the_total():
    """With collapse_above=4 and the factor 0.3: 4 connections move the total, a fifth
    brings all five down to 0.3 x the total together (0.9 of one connection's cap), and
    the link recovers when they close."""
    with endpoint() as ep, shaping_proxy(ep.port, PER_CONNECTION, TOTAL, 4, 0.3) as link:
        for n, expected, collapses in ((4, TOTAL, 0), (5, 0.3 * TOTAL, 1)):
            size = _size(n, expected)
            rates = exchange(link, ep, n, size, size)
            print(f"{n} connections: {rates.of(expected)}")
            held_to(rates, expected, "total", n)
            assert link.collapses == collapses
        _wait_for(lambda: link.open_connections == 0)
        assert (link.open_connections, link.collapsed, link.total_cap) == (0, False, TOTAL)
        assert link.peak_connections == 5


def _shaper_threads(port: int) -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(f"shaper-{port}-")]


def test_the_link_stops_its_threads_and_closes_its_port_when_the_block_ends():
    """Leaving the block with one connection in the middle of a slow transfer (its pump
    asleep for tokens) and one idle: without waiting out its join deadline, every thread of
    the link has ended, both connections are closed at both ends, and the port refuses
    connections."""
    with endpoint(down=10 * MB) as ep:
        with shaping_proxy(ep.port, 50_000, 50_000) as link:
            busy = socket.create_connection(("127.0.0.1", link.port))
            idle = socket.create_connection(("127.0.0.1", link.port))
            busy.sendall(b"go")  # the endpoint answers with 10 MB, at 50 kB/s
            assert busy.recv(1024)
            _wait_for(lambda: len(_shaper_threads(link.port)) == 5)  # accept + 2 x 2 pumps
            # and the endpoint has both (the idle one's may still be in its backlog: left
            # there at the end, its end was never seen; s50d)
            _wait_for(lambda: ep.accepted == 2)
            assert link.open_connections == 2 and len(_shaper_threads(link.port)) == 5
            port = link.port
            leaving = time.monotonic()
        took = time.monotonic() - leaving
        assert took < STOP_TIMEOUT, took  # no thread waited out the join
        assert _shaper_threads(port) == []
        assert link.open_connections == 0
        for s in (busy, idle):
            s.settimeout(5)
            with suppress(ConnectionResetError):
                while s.recv(1024 * 1024):  # what was in flight, then the end
                    pass
            s.close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)
    # the endpoint saw the end of both connections: 2 bytes on one, none on the other
    assert sorted(ep.ends) == [0, 2]


def _rclone(env: dict, *args: str) -> subprocess.CompletedProcess:
    res = subprocess.run(
        [str(BIN / "rclone"), *args], env={**os.environ, **env},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    return res


@dataclass
class Copy:
    """An rclone copy's rate by its own stats, and the link's record of its seconds."""

    rate: float  # bytes over rclone's stats' seconds (as cloudbench reads a copy's log)
    bytes: int
    elapsed: float
    link: Window

    def held_to(self, cap: float, n: int) -> None:
        """As held_to above, for a copy of ``n`` transfers through a link whose shared
        bucket binds: the link carried the copy's bytes (and the requests' heads) in its
        seconds; rclone's rate never beats the cap; and the copy moved at least what the
        shared bucket let through while in debt, the requests' heads aside."""
        w = self.link
        assert self.bytes <= w.bytes <= self.bytes * 1.05, w
        assert self.rate <= cap * (1 + n * BURST / (cap * self.elapsed)) * 1.02, (self, cap)
        assert self.bytes >= 0.98 * w.total_allowed - n * PIECE, (self, cap)
        assert w.total_allowed > 0, ("the link was never the bottleneck", w)


def _copy(
    link: Shaper, direction: str, env: dict, size: int, source: str, dest: str, transfers: int = 1
) -> Copy:
    """An rclone copy of ``size`` bytes at -v with its JSON log, and the link's record of
    the seconds it ran (process start to exit, wall clock)."""
    t0 = time.time()
    res = _rclone(
        env, "copy", source, dest, "--transfers", str(transfers),
        "--use-json-log", "-v", "--stats", "10s",
    )  # fmt: skip
    t1 = time.time()
    final = parse_rclone_log(res.stderr.splitlines()).final
    assert final is not None and final.bytes == size, res.stderr[-3000:]  # nothing re-sent
    return Copy(
        final.bytes / final.elapsed, final.bytes, final.elapsed, link.window(direction, t0, t1)
    )


def _bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.iterdir())


def test_rclone_copies_to_a_real_s3_server_keep_to_the_links_caps(tmp_path):
    """rclone serve s3 behind the link (the remote's endpoint is the link's port, as
    tests/test_throttling.py does with its proxy): signed requests pass untouched, and
    rclone's own rates show the caps, as the link's record of the same seconds has them
    (Copy.held_to). 4 uploads at once move the total (3 MB/s, not 4); one
    download moves one connection's cap; 6 uploads at once, above collapse_above=5, move
    0.3 x the total. rclone opens one connection per transfer, so the link counts them."""
    collapsed = 0.3 * TOTAL
    four, six = tmp_path / "four", tmp_path / "six"
    for folder, n, size in ((four, 4, _size(1, PER_CONNECTION)), (six, 6, _size(6, collapsed))):
        folder.mkdir()  # four: each file is what one download moves in SECONDS
        for i in range(n):
            (folder / f"f{i}.bin").write_bytes(os.urandom(size))
    one = four / "f0.bin"
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        env = s3.client_env("S3T")
        with shaping_proxy(s3.port, PER_CONNECTION, TOTAL, collapse_above=5) as link:
            env["RCLONE_CONFIG_S3T_ENDPOINT"] = f"http://127.0.0.1:{link.port}"
            # a bucket each, the files at its top: serve s3 answers concurrent PUTs into a
            # new nested directory with the odd 500 (docs/testing.md), and a re-sent file
            # would slow the copy by what it re-sent
            _rclone(env, "mkdir", "s3t:four")
            _rclone(env, "mkdir", "s3t:six")
            up4 = _copy(link, UP, env, _bytes(four), str(four), "s3t:four", transfers=4)
            assert (link.peak_connections, link.collapses) == (4, 0)
            down1 = _copy(
                link, DOWN, env, one.stat().st_size, "s3t:four/f0.bin", str(tmp_path / "back")
            )
            up6 = _copy(link, UP, env, _bytes(six), str(six), "s3t:six", transfers=6)
            assert (link.peak_connections, link.collapses) == (6, 1)
            _wait_for(lambda: link.open_connections == 0)
            forwarded = link.bytes_up
    print(
        f"rclone: 4 uploads {up4.rate / TOTAL:.3f} of the total "
        f"(busy {up4.link.total_busy_share:.2f}), 1 download "
        f"{down1.rate / PER_CONNECTION:.3f} of one connection's cap, 6 uploads "
        f"{up6.rate / collapsed:.3f} of the collapsed total (busy {up6.link.total_busy_share:.2f})"
    )
    up4.held_to(TOTAL, 4)
    up6.held_to(collapsed, 6)
    # one download: its own connection's cap binds, not the total
    w = down1.link
    assert down1.bytes <= w.bytes <= down1.bytes * 1.05, w
    assert down1.rate <= PER_CONNECTION * (1 + BURST / (PER_CONNECTION * down1.elapsed)) * 1.02
    assert down1.bytes >= 0.98 * sum(w.connection_allowed) - PIECE, down1
    assert w.total_busy_s < sum(w.connection_busy_s), w  # its own cap held it, not the total
    # the bytes are the files', byte for byte, at the store and back
    for folder in (four, six):
        for f in folder.iterdir():
            assert (tmp_path / "s3root" / folder.name / f.name).read_bytes() == f.read_bytes()
    assert (tmp_path / "back" / one.name).read_bytes() == one.read_bytes()
    sent = _bytes(four) + _bytes(six)
    assert sent < forwarded < sent * 1.05  # the files and the requests' heads
