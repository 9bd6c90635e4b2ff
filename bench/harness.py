"""Side-by-side timing: warm-up pair, alternating timed pairs, the median of per-pair ratios.

Every comparison of ``make bench`` runs through :class:`Harness`, so the data steps and the
end-to-end campaign are timed, ordered and tabulated the same way.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIB = 2**20
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
# Before a run that writes N bytes, this many times N of memory is written to and freed (see
# prefault): room for the run's own page cache and the baseline's buffers.
PREFAULT_SHARE = 1.5
PREFAULT_BLOCK = 64 * MIB


# --- results ---------------------------------------------------------------------------------


@dataclass
class Row:
    step: str
    ours: float
    baseline: float
    unit: str
    ratio: float
    target: str
    passed: bool
    detail: str = ""
    previous: str = "-"  # the same figure from the --compare checkout, in the same run

    def cells(self) -> list[str]:
        return [
            self.step,
            _fmt(self.ours),
            _fmt(self.baseline),
            self.unit,
            f"{self.ratio:.3f}",
            self.target,
            "PASS" if self.passed else "FAIL",
            self.previous,
            self.detail,
        ]


HEADER = ["step", "ours", "baseline", "unit", "ratio", "target", "pass", "previous", "detail"]
# ours slower than the previous version by more than this share: called a regression
REGRESSION = 0.15


def versus_previous(ours_s: float, previous_s: float, unit: str = "s") -> str:
    """The previous version's figure and how ours compares (its time / ours: above 1 is
    faster now); REGRESSION where ours lost more than REGRESSION of it."""
    if not (ours_s > 0 and previous_s > 0):
        return "-"
    speed = previous_s / ours_s
    flag = " REGRESSION" if speed < 1 - REGRESSION else ""
    return f"{_fmt(previous_s)} {unit} ({speed:.2f}x){flag}"


def balanced_rounds(rounds: int, sides: int) -> int:
    """``rounds`` rounded up to a multiple of ``sides`` (rotating, each side then holds
    each place of a round equally often); one round stays one."""
    if rounds <= 1 or sides <= 1:
        return rounds
    return -(-rounds // sides) * sides


def prefault(nbytes: int) -> None:
    """Write to ``nbytes`` of fresh anonymous memory, then free it, so the next run's page
    cache lands in memory the host has backed.

    On a VM that reports free memory to its host (free page reporting: this project's
    Firecracker machines, ``page_reporting`` on the kernel's command line), memory freed a
    couple of seconds ago has been handed back, and whichever side writes into it next pays
    a host fault per page: 2 GiB of page cache took 0.53 s or 1.35 s for the same
    ``sendfile`` copy. The freed pages are the first the kernel hands out again, and they
    stay backed for about 2 s, longer than a run. On bare metal this costs a fraction of a
    second, untimed.

    Done in a child process: a process forked from one whose resident set once reached
    3 GiB reports that high-water mark as its own maximum RSS (Linux copies it at fork and
    keeps it across exec), which is what the memory rows read.
    """
    if nbytes <= 0:
        return
    subprocess.run([sys.executable, "-c", _PREFAULT, str(nbytes), str(PREFAULT_BLOCK)], check=True)


_PREFAULT = """
import mmap, sys
n, step = int(sys.argv[1]), int(sys.argv[2])
block = b"\\x01" * step
with mmap.mmap(-1, n) as m:
    for off in range(0, n, step):
        m.write(block[: min(step, n - off)])
"""


def _fmt(x: float) -> str:
    if x != x:  # nan
        return "-"
    return f"{x:.4g}" if abs(x) < 1000 else f"{x:.0f}"


@dataclass
class Run:
    """One timed run of one side: wall seconds, CPU seconds, and anything else it measured."""

    step: str
    side: str
    pair: int
    seconds: float
    cpu: float
    extra: dict[str, Any] = field(default_factory=dict)


class Harness:
    """What every comparison shares: the settings, the page-cache policy, the clock, the rows."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.size: int = args.size
        self.pairs: int = args.pairs
        self.cold: bool = args.cold
        self.quiesce: float = args.quiesce
        self.prefault: bool = getattr(args, "prefault", True)
        self.work: Path = args.work
        self.chunk: int = args.chunk
        # another checkout of cloudbench (the previous landed version), run side by side
        self.compare: Path | None = getattr(args, "compare", None)
        self.warmup: bool = getattr(args, "warmup", True)
        # --quick: the smallest run in which every row is made (the test suite's), its
        # figures not comparable with a real run's
        self.quick: bool = getattr(args, "quick", False)
        self.rows: list[Row] = []
        self.runs: list[Run] = []

    def rounds(self, per_pair: int) -> int:
        """Timed rounds of a comparison that runs ``per_pair`` rounds per ``--pairs``; one
        per pair with ``--quick``."""
        return self.pairs if self.quick else per_pair * self.pairs

    # --- page cache and timing --------------------------------------------------------------

    def settle(self, *inputs: Path, writes: int = 0) -> None:
        """Before a timed run: flush dirty pages, warm the inputs or drop the cache, wait
        ``--quiesce`` seconds (0 by default; see the option's help), and, for a run that
        writes ``writes`` bytes, back the memory it will write into (:func:`prefault`)."""
        os.sync()
        if self.cold:
            DROP_CACHES.write_text("3\n")
        else:
            for path in inputs:
                for p in sorted(path.rglob("*")) if path.is_dir() else [path]:
                    if p.is_file():
                        _read_through(p)
        time.sleep(self.quiesce)
        if self.prefault and writes > 0:
            prefault(int(writes * PREFAULT_SHARE))

    def timed(self, step: str, side: str, pair: int, fn: Callable[[], Any]) -> Run:
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        extra = fn() or {}
        seconds = time.perf_counter() - t0
        if "step_seconds" in extra:  # a side that timed its step itself (in a child process)
            seconds = float(extra["step_seconds"])
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = sum(
            getattr(b, k) - getattr(a, k)
            for a, b in ((r0, r1), (c0, c1))
            for k in ("ru_utime", "ru_stime")
        )
        run = Run(step, side, pair, seconds, cpu, extra)
        if pair > 0:
            self.runs.append(run)
        return run

    def pairs_of(
        self,
        step: str,
        sides: list[tuple[str, Callable[[], None], Callable[[], Any]]],
        pairs: int | None = None,
    ) -> dict[str, list[Run]]:
        """A warm-up round (pair 0, not kept; none with ``--no-warmup``) and then ``pairs``
        rounds of every side.

        The order within a round rotates (ours first, then the baseline first, ...), so an
        advantage of running first or second in a round cancels out: ``pairs`` is rounded
        up to a multiple of the number of sides, so that every side runs at every place
        of a round equally often (2026-11-25: runs alternated fast and slow, one after the
        other, whichever side ran; 10 rounds of 4 sides put one side first 3 times and
        third twice). A single round (``--pairs 1``, the suite's quick run) stays one.
        """
        out: dict[str, list[Run]] = {name: [] for name, _, _ in sides}
        rounds = balanced_rounds(pairs or self.pairs, len(sides))
        for pair in range(0 if self.warmup else 1, rounds + 1):
            shift = (pair - 1) % len(sides) if pair else 0
            for name, prepare, fn in sides[shift:] + sides[:shift]:
                prepare()
                run = self.timed(step, name, pair, fn)
                if pair > 0:
                    out[name].append(run)
            label = " ".join(f"{n}={out[n][-1].seconds:.3f}s" for n, _, _ in sides) if pair else ""
            print(
                f"  {step} pair {pair}{' (warm-up)' if not pair else ''} {label}",
                file=sys.stderr,
                flush=True,
            )
        return out

    def speed_row(
        self,
        step: str,
        ours: list[Run],
        base: list[Run],
        baseline: str,
        target: float,
        detail: str = "",
        previous: list[Run] | None = None,
    ) -> None:
        ratios = [b.seconds / o.seconds for o, b in zip(ours, base, strict=True)]
        cpus = [b.cpu / o.cpu for o, b in zip(ours, base, strict=True) if o.cpu > 0]
        cpu = statistics.median(cpus) if cpus else float("nan")
        ratio = statistics.median(ratios)
        o_s = statistics.median(r.seconds for r in ours)
        b_s = statistics.median(r.seconds for r in base)
        self.rows.append(
            Row(
                step,
                o_s,
                b_s,
                "s",
                ratio,
                f">= {target:.2f}x",
                ratio >= target,
                f"vs {baseline}; {self.size / o_s / 1e6:.0f} vs {self.size / b_s / 1e6:.0f} MB/s; "
                f"ratios {' '.join(f'{r:.2f}' for r in ratios)}; CPU-time ratio {cpu:.2f}"
                + (f"; {detail}" if detail else ""),
                versus_previous(o_s, statistics.median(r.seconds for r in previous))
                if previous
                else "-",
            )
        )

    # --- the data file ------------------------------------------------------------------------


def _read_through(path: Path) -> None:
    buf = bytearray(MIB)
    fd = os.open(path, os.O_RDONLY)
    try:
        while os.readv(fd, [buf]):
            pass
    finally:
        os.close(fd)
