"""The series at scale (``make bench ONLY=series``): 50 occurrences of a 500-measurement
campaign, synthetic transfers.tsv files, read, compared and reported by ``python -m
cloudbench series`` in a process of its own, which must finish in under a minute and under
2 GiB of memory (its peak resident set, from the kernel's accounting of the child)."""

from __future__ import annotations

import random
import resource
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from bench.harness import Row

OCCURRENCES = 50
SITES, REMOTES, DIRECTIONS = 5, 2, ("upload", "download")  # 20 routes
LAYOUTS = ("plain", "chunked-64MiB", "chunked-256MiB", "multithread", "chunked-16MiB")
REPEATS = 5  # 20 routes x 5 layouts x 5 repeats = 500 measurements an occurrence
LIMIT_S, LIMIT_BYTES = 60.0, 2 * 2**30


def write_series(root: Path, name: str, occurrences: int = OCCURRENCES, seed: int = 1) -> int:
    """The synthetic occurrences under ``root``; the measurements of one."""
    rng = random.Random(seed)
    n = 0
    for k in range(occurrences):
        rows = []
        for s in range(SITES):
            for r in range(REMOTES):
                for d in DIRECTIONS:
                    for i, layout in enumerate(LAYOUTS):
                        for rep in range(1, REPEATS + 1):
                            rows.append(
                                {
                                    "site": f"site{s}",
                                    "remote": f"store{r}",
                                    "direction": d,
                                    "tool": "rclone",
                                    "strategy": layout.split("-")[0],
                                    "layout": layout,
                                    "setting": "rclone-1x16",
                                    "repeat": rep,
                                    "status": "ok",
                                    "mb_per_s": (100 + 20 * i) * rng.uniform(0.9, 1.1),
                                    "outage": "",
                                }  # fmt: skip
                            )
        d = root / f"{name}@2026{k:04d}"
        d.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(d / "transfers.tsv", sep="\t", index=False)
        n = len(rows)
    return n


def bench_series(bench) -> None:
    d = bench.work / "series"
    per = write_series(d, "scale")
    t0 = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "cloudbench", "series", "scale", "--results", str(d)],
        capture_output=True,
        text=True,
    )
    took = time.monotonic() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    if run.returncode not in (0, 1):
        raise SystemExit(f"series: {run.stderr[-2000:]}")
    bench.rows.append(
        Row(
            "series",
            took,
            LIMIT_S,
            "s",
            took / LIMIT_S,
            "< 60 s, < 2 GiB",
            took < LIMIT_S and peak < LIMIT_BYTES,
            f"python -m cloudbench series over {OCCURRENCES} occurrences x {per} measurements "
            f"(synthetic): {took:.1f} s, peak resident set {peak / 2**20:.0f} MiB",
        )
    )
