"""The per-second series of a transfer: one file format and one rate convention for every
client and for a group of clients.

A series is a list of points ``(elapsed s, cumulative bytes)`` on the wall clock since the
copy started; where they come from differs (rclone's stats lines, a destination sampled
every second, the clients of a group added up), what is done with them does not.

The rate of a point is the byte delta since the previous point over the time delta; the
first point is measured from the origin (0 s, 0 bytes). Why not rclone's ``speed``: since
1.56 it is an exponentially weighted average, which smooths away exactly the stalls and
ramps a benchmark wants to see. ``sum(rate * dt)`` telescopes to the last point's bytes.

Time deltas that are not positive are handled so that the byte total survives:

* a point less than ``MIN_GAP_S`` after the previous one (two lines written in the same
  instant; rclone's final stats line milliseconds after the last periodic one) replaces
  that point's byte count and its rate is recomputed over that point's own interval: the
  bytes were moved by then, and a few ms would turn them into a spike;
* a point at elapsed time 0 before any other (nothing to divide by) is skipped; its bytes
  are attributed to the next interval;
* a point whose time goes *backwards* is skipped (two logs were concatenated).

Rates are not clamped: a byte count that went down (a client that overwrote another's
file) keeps the total right and shows the anomaly as a negative rate instead of hiding it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

HEADER = "elapsed_s\tbytes\tmb_per_s\n"
MIN_GAP_S = 0.1  # points closer than this are one (see the module docstring)
MB = 1e6

Point = tuple[float, int]


def counted_all(moved: Sequence[float]) -> int:
    """The index of the point from which the count stays at its final value (the trailing
    plateau's first point; the last point when the count still grew there).

    A sender's counter counts bytes as the client hands them to the network: an upload's
    last bytes sit in socket buffers while the store takes them, so its count reaches the
    total and stays there until the copy ends (a user's 5 MiB uploads through a 3 MB/s
    store: counted whole at 1.0 s, copied at 2.6 and 3.3 s). What follows that point is
    the buffers draining, not a stall and not a rate; a count that went down and grew
    again is not a plateau."""
    if not moved:
        return 0
    i = len(moved) - 1
    while i > 0 and moved[i - 1] == moved[-1]:
        i -= 1
    return i


def rates(points: Iterable[Point]) -> list[tuple[float, int, float]]:
    """``(elapsed s, cumulative bytes, bytes/s over the interval before it)`` per point."""
    out: list[tuple[float, int, float]] = []
    base_t, base_b = 0.0, 0  # start of the last emitted point's interval
    prev_t, prev_b = 0.0, 0  # the last emitted point (or the origin)
    for elapsed, nbytes in points:
        dt = elapsed - prev_t
        if dt >= MIN_GAP_S or (dt > 0 and not out):
            out.append((elapsed, nbytes, (nbytes - prev_b) / dt))
            base_t, base_b = prev_t, prev_b
            prev_t, prev_b = elapsed, nbytes
        elif dt >= 0 and out:
            prev_t = max(prev_t, elapsed)
            out[-1] = (prev_t, nbytes, (nbytes - base_b) / (prev_t - base_t))
            prev_b = nbytes
        # else: elapsed 0 before any point, or time went backwards: skip.
    return out


def write(path: Path, points: Iterable[Point]) -> None:
    """The series file of one transfer (or one client): elapsed_s, bytes, mb_per_s."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fh.write(HEADER)
        for elapsed, nbytes, rate in rates(points):
            fh.write(f"{elapsed:.3f}\t{nbytes}\t{rate / MB:.3f}\n")


def read(path: Path) -> list[Point]:
    """The points of a series file (none when it is absent)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines()[1:]:
        elapsed, nbytes, _ = line.split("\t")
        out.append((float(elapsed), int(nbytes)))
    return out


def added_up(clients: Sequence[tuple[float, Sequence[Point], int]]) -> list[Point]:
    """A group's points: each client's cumulative bytes, put on one clock and added.

    ``clients``: (start offset from the first start in s, points, final bytes) per client.
    A client has moved 0 bytes before it starts and its final count after its last point;
    in between its count is interpolated. The sum is taken at every client's point times
    and ends at the last client's end with every byte. Since each client moves (and counts)
    only its own share, the parts are disjoint and the sum never exceeds the copy.
    """
    # exact times, rounded only when written: a time rounded before interpolating lands a
    # hair before a client's last point and loses bytes (CI saw a 4-client group end 10 B short)
    times = sorted({off + e for off, pts, _ in clients for e, _ in pts if off + e > 0})
    out = []
    for t in times:
        total = 0.0
        for off, pts, final in clients:
            total += _interpolate(t, [(off, 0), *((off + e, b) for e, b in pts)], final)
        out.append((round(t, 3), int(round(total))))
    return out


def _interpolate(t: float, pts: Sequence[tuple[float, float]], final: float) -> float:
    if t <= pts[0][0]:
        return 0.0
    for (t0, b0), (t1, b1) in zip(pts, pts[1:], strict=False):
        if t <= t1:
            return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else b1
    return float(final)
