"""The order a site measures in: rounds, shuffled within each round.

A store or a link drifts over the hours of a campaign (other tenants, a route that changes,
a cache that warms). Measured layout after layout, that drift would show up as a difference
between layouts. So a site measures in rounds: repeat r of every layout, tool and setting
before repeat r+1 of any, in a random order within the round (uploads of the round before
its downloads, which read them). The order comes from the campaign's seed, so it is recorded
and the same on every rerun; the report draws each rate against its start time and tests for
a trend across rounds (:mod:`cloudbench.report.drift`).

Snakemake picks the ready job of highest priority, so the order reaches it as priorities.
Priorities are not rerun triggers: a new order never measures anything again.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from cloudbench.campaign.model import DIRECTIONS, Measurement

#: Transfers' priorities lie in this open band: above data steps (0), so their data is not
#: starved, and below the checks (10) and latency probes (20) that must come first.
PRIORITY_BAND = (1.0, 9.0)


def run_order(measurements: Iterable[Measurement], seed: str) -> list[Measurement]:
    """Every measurement in the order it should run: by round (repeat), uploads then
    downloads, shuffled within each from ``seed``."""
    ms = sorted(
        measurements, key=lambda m: (m.repeat, DIRECTIONS.index(m.direction), m.site, m.key)
    )
    order: list[Measurement] = []
    for r in sorted({m.repeat for m in ms}):
        for direction in DIRECTIONS:
            part = [m for m in ms if m.repeat == r and m.direction == direction]
            random.Random(f"{seed}:order:r{r}:{direction}").shuffle(part)
            order += part
    return order


def priorities(order: Sequence[Measurement]) -> dict[Measurement, float]:
    """A priority per measurement, falling along ``order`` inside :data:`PRIORITY_BAND`."""
    lo, hi = PRIORITY_BAND
    step = (hi - lo) / (len(order) + 1)
    return {m: hi - step * (k + 1) for k, m in enumerate(order)}
