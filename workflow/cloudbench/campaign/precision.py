"""Repeats chosen by precision (``repeats: auto``): each measurement identity is repeated
until its median is known as well as the campaign asks, or until a maximum.

An identity is one transfer without its repeat number: the keys of
:data:`cloudbench.campaign.identity.GROUP` (site, remote, direction, layout, setting). A site
first measures :func:`first_rounds` rounds of every identity: the fewest repeats whose
order-statistic interval of the median reaches the report's 95% (6; below that even [min,
max] covers less, :mod:`cloudbench.intervals`). After each round a Snakemake checkpoint
(``rules/precision.smk``) decides, per identity, from the rates of its records
(:func:`decide`):

* ``met target``: the interval, high minus low, is at most ``width`` times the median, and
  so is the wider interval at ``STOPPING_LEVEL`` (97.5%) that the decision rests on;
* ``reached max``: it is still wider, and the identity has ``max_repeats`` repeats;
* ``failed``: one of its repeats failed. More rounds would spend hours on a store that may
  be down; the next run measures the failed repeat again (its retry token), which changes
  the checkpoint's input, so the decision is taken again and the rounds resume;
* ``more``: none of these; the next round measures this identity again.

The interval and the width are those the report prints, so "met target" means the report's
own interval is that narrow. Stopping once an interval is narrow picks the rounds whose
repeats happen to lie close together, so the 95% interval printed after such a stop covers
the true median less often than 95%: simulated on skewed rates (lognormal and a long slow
tail, 5-12% spread, with and without a slow drift), as low as 93.7%. The decision therefore
asks the wider 97.5% interval to be narrow enough; then the printed 95% interval holds at
least 95% in every such case (95.1-96.4%), at one or two more repeats
(tests/test_precision_levels.py holds the rule to that simulation).

Decisions depend only on the records, so a rerun with the same records decides the same and
measures nothing.

Downloads beyond the first rounds read the first rounds' copies again, in turn
(:func:`copy_repeat`): whether the upload site made a copy for a later round depends on that
upload's own decisions, which a download site cannot wait for.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from cloudbench.campaign.identity import GROUP

MORE = "more"
MET = "met target"
MAX = "reached max"
FAILED = "failed"
STOPS = (MET, MAX, FAILED)  # how an identity's rounds end, as the report counts them

# the columns of a decision (precision.json per site; precision.tsv in the report): the
# identity's keys that tell one measurement's repeats from another's, then the numbers
IDENTITY_KEYS = tuple(GROUP)
COLUMNS = (
    *IDENTITY_KEYS,
    "repeats",
    "ok",
    "median_mb_per_s",
    "low_mb_per_s",
    "high_mb_per_s",
    "level",
    "relative_width",
    "decision",
)


# the level of the interval that must be narrow for "met target" (module doc): above the
# printed one, so that the printed interval keeps its level after a stop that chose it
STOPPING_LEVEL = 0.975


class Precision(NamedTuple):
    """``repeats: auto``'s target: the median's interval at most ``width`` times the median
    (0.10: within 10%), with at most ``max_repeats`` repeats of any identity."""

    width: float
    max_repeats: int


def default_width() -> float:
    """``precision.width``'s default, from the schema (the one place it is written)."""
    from cloudbench.campaign.schema import load_schema

    raw = str(load_schema()["properties"]["precision"]["properties"]["width"]["default"])
    return float(raw.rstrip("%")) / (100 if raw.endswith("%") else 1)


def first_rounds() -> int:
    """The fewest repeats whose [min, max] covers the median with the report's target
    level: with fewer, no interval can meet any width at that level."""
    from cloudbench.intervals import TARGET_LEVEL, median_coverage

    n = 1
    while median_coverage(n, 1) < TARGET_LEVEL:
        n += 1
    return n


def copy_repeat(repeat: int, first: int) -> int:
    """The upload repeat whose copy a download of ``repeat`` reads (module doc)."""
    return repeat if repeat <= first else (repeat - 1) % first + 1


def identity(record: Mapping[str, Any]) -> tuple[str, ...]:
    """A record's measurement identity: everything but its repeat."""
    return tuple(str(record[k]) for k in IDENTITY_KEYS)


def decide(
    rates: Sequence[float | None], statuses: Sequence[str], precision: Precision
) -> dict[str, Any]:
    """The decision for one identity after a round, from its repeats so far (their MB/s and
    statuses, one each): the numbers it rests on, and one of the decisions (module doc)."""
    import statistics

    from cloudbench.intervals import TARGET_LEVEL, median_interval

    ok = [float(r) for r, s in zip(rates, statuses, strict=True) if s == "ok" and r is not None]
    low, high, level = median_interval(ok)
    median = statistics.median(ok) if ok else math.nan
    width = (high - low) / median if median > 0 and not math.isnan(low) else math.nan
    s_low, s_high, _ = median_interval(ok, STOPPING_LEVEL)
    stop_width = (s_high - s_low) / median if median > 0 and not math.isnan(s_low) else math.nan
    if len(ok) < len(rates):
        decision = FAILED
    elif level >= TARGET_LEVEL and stop_width <= precision.width:
        decision = MET
    elif len(rates) >= precision.max_repeats:
        decision = MAX
    else:
        decision = MORE
    return {
        "repeats": len(rates),
        "ok": len(ok),
        "median_mb_per_s": _round(median),
        "low_mb_per_s": _round(low),
        "high_mb_per_s": _round(high),
        "level": _round(level),
        "relative_width": _round(width),
        "decision": decision,
    }


def _round(v: float) -> float | None:
    return None if math.isnan(v) else round(v, 6)


def decide_round(
    records: Iterable[Mapping[str, Any]],
    previous: Sequence[Mapping[str, Any]],
    precision: Precision,
) -> list[dict[str, Any]]:
    """Every identity's decision after a round: those measured in it from ``records`` (all
    their repeats so far), the others as ``previous`` (the last round's decisions) left them."""
    by_identity: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for rec in records:
        by_identity.setdefault(identity(rec), []).append(rec)
    decided = {identity(d): dict(d) for d in previous}
    for key, recs in by_identity.items():
        recs = sorted(recs, key=lambda r: int(r["repeat"]))
        decided[key] = dict(zip(IDENTITY_KEYS, key, strict=True)) | decide(
            [r.get("mb_per_s") for r in recs], [str(r.get("status")) for r in recs], precision
        )
    return [decided[k] for k in sorted(decided)]


def decide_files(
    records: Sequence[str], previous: Sequence[str], target: str, out: str, log: str
) -> None:
    """The precision checkpoint's work, from and to files: every repeat so far of the
    identities of this round (``records``), the round before's decisions (``previous``: none
    after the first rounds) and the target (JSON: width, max_repeats); one line in ``log``."""
    import json

    from cloudbench.records import write_json

    goal = json.loads(target)
    before = json.loads(Path(previous[0]).read_text())["decisions"] if previous else []
    decisions = decide_round(
        (json.loads(Path(p).read_text()) for p in records),
        before,
        Precision(float(goal["width"]), int(goal["max_repeats"])),
    )
    write_json(Path(out), {"target": goal, "decisions": decisions})
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    Path(log).write_text(
        f"precision: {len(continuing(decisions))} of {len(decisions)} measurements need "
        "another round\n"
    )


def continuing(decisions: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The identities the next round measures again."""
    return [d for d in decisions if d["decision"] == MORE]


def later_rounds(decisions: Iterable[Mapping[str, Any]], first: int) -> list[dict[str, Any]]:
    """The measurements a site made beyond the first rounds (the report expects them):
    the labels of each (identity.LABELS)."""
    return [
        {**{k: d[k] for k in IDENTITY_KEYS}, "repeat": r}
        for d in decisions
        for r in range(first + 1, int(d["repeats"]) + 1)
    ]


def width_text(width: float) -> str:
    """A relative width as the campaign file writes it: 0.1 -> 10%, 1e-05 -> 0.001%."""
    return f"{width * 100:.6g}%"


def stops_text(decisions: Sequence[Mapping[str, Any]], precision: Mapping[str, Any]) -> str:
    """One sentence: how the identities' rounds ended (front page and the Repeats page)."""
    target = width_text(float(precision["width"]))
    parts = []
    for stop in STOPS:
        ds = [d for d in decisions if d["decision"] == stop]
        if not ds:
            continue
        reps = sorted(int(d["repeats"]) for d in ds)
        span = f"{reps[0]}" if reps[0] == reps[-1] else f"{reps[0]}-{reps[-1]}"
        text = f"{len(ds)} {stop} after {span} repeats"
        if stop == MAX:
            widest = max((d["relative_width"] or math.inf) for d in ds)
            text += f" (widest interval {widest:.0%} of its median)"
        parts.append(text)
    return (
        f"chosen by precision, until the median's interval is within {target} of it "
        f"(at most {precision['max_repeats']} repeats): " + "; ".join(parts or ["nothing yet"])
    )
