"""Where a `make test` run's time went, from the timeline its conftest wrote
(CLOUDBENCH_TEST_TIMELINE): each worker's busy seconds and the idle ones at its end, and the
files that took longest. Measured times belong here, generated, not in the docs."""

from __future__ import annotations

import sys
from collections import defaultdict


def main(path: str) -> None:
    rows = [line.rstrip("\n").split("\t") for line in open(path)]
    start = min(float(r[3]) for r in rows)
    end = max(float(r[4]) for r in rows)
    busy: dict[str, float] = defaultdict(float)
    last: dict[str, float] = defaultdict(float)
    files: dict[str, float] = defaultdict(float)
    first: dict[str, float] = {}
    for worker, nodeid, _, t0, t1 in rows:
        t0f, t1f = float(t0), float(t1)
        busy[worker] += t1f - t0f
        last[worker] = max(last[worker], t1f)
        f = nodeid.split("::")[0]
        files[f] += t1f - t0f
        first[f] = min(first.get(f, t0f), t0f)
    print(f"tests ran {end - start:.0f} s")
    for w in sorted(busy):
        done, idle = last[w] - start, end - last[w]
        print(f"{w}: busy {busy[w]:.0f} s, done at {done:.0f} s, idle at the end {idle:.0f} s")
    print("longest files (seconds, started at):")
    for f, s in sorted(files.items(), key=lambda kv: -kv[1])[:25]:
        print(f"  {s:6.0f}  +{first[f] - start:5.0f}  {f}")


if __name__ == "__main__":
    main(sys.argv[1])
