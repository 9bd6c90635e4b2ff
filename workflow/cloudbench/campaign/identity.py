"""A measurement's identity, declared once: which timed transfer of which copy a record is.

Paths name a record by it, the tables and statistics group by it, ``repeats: auto`` and
``compare`` match measurements by it. Its keys are written here and nowhere else:
:data:`KEYS` is read from :class:`MeasurementId`'s fields, and every view a caller needs
(the route, the repeats of one measurement, a curve without its swept knob) is derived from
:data:`KEYS` by :func:`keys_without` or :func:`keys_through`, never spelled again. A view is a
list, in the canonical order: pandas takes a list as several keys (a tuple as one).

``tool`` and ``strategy`` are columns of every table and keys of many of its statistics,
but they follow from the setting (``rclone-4x32``) and the layout (``chunked-64MiB``): a
record's path and the fewest keys that tell two measurements apart (:data:`GROUP`) leave
them out (:data:`LABELS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from cloudbench.campaign.labels import Layout, Setting  # the labels' one reader

# The metadata of a key that another key's label already names: (that key, its reader)
NAMED_BY = "named_by"


def _tool_of(setting: str) -> str:
    return Setting.from_label(setting).tool


def _strategy_of(layout: str) -> str:
    return Layout.from_label(layout).strategy


@dataclass(frozen=True)
class MeasurementId:
    """One timed transfer of one copy: where (site, remote, direction), with what (tool,
    strategy, layout, setting) and which repeat. Labels as the tables and paths write them."""

    site: str
    remote: str
    direction: str  # upload or download
    tool: str = field(metadata={NAMED_BY: ("setting", _tool_of)})
    strategy: str = field(metadata={NAMED_BY: ("layout", _strategy_of)})
    layout: str  # the strategy with its chunk size: chunked-64MiB
    setting: str  # <tool>-<clients>x<concurrency>: rclone-4x32
    repeat: int

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> MeasurementId:
        """The identity of a record, a table's row or a plan's entry (any mapping with the
        keys); one that names only the labels (:data:`LABELS`: a plan, a path's parts) has
        its tool and strategy read from them."""
        missing = [k for k in LABELS if k not in row]
        if missing:
            raise KeyError(f"not a measurement: no {', '.join(missing)} in {dict(row)!r}")
        values = {}
        for f in fields(cls):
            value = row.get(f.name)
            if NAMED_BY in f.metadata and not (isinstance(value, str) and value):
                label, read = f.metadata[NAMED_BY]  # absent, or a table's empty cell
                value = read(str(row[label]))
            values[f.name] = int(value) if f.type == "int" else str(value)
        return cls(**values)

    @classmethod
    def wildcards(cls, direction: str | None = None) -> MeasurementId:
        """Snakemake's pattern of an identity (``{site}``, ...; a direction the rule fixes):
        a path function given it returns a rule's output pattern, not one record's path."""
        values: dict[str, Any] = {k: f"{{{k}}}" for k in KEYS}
        return cls(**values | ({"direction": direction} if direction else {}))

    def values(self, keys: Sequence[str] = ()) -> tuple[Any, ...]:
        """The values of ``keys`` (a view; all of :data:`KEYS` by default), in their order."""
        return tuple(getattr(self, k) for k in keys or KEYS)


# The identity's keys in their one order: the order every table shows them in
KEYS: tuple[str, ...] = tuple(f.name for f in fields(MeasurementId))
# Keys another key's label names: tool (by the setting), strategy (by the layout)
NAMED: tuple[str, ...] = tuple(f.name for f in fields(MeasurementId) if NAMED_BY in f.metadata)


def keys_without(*names: str, of: Sequence[str] = KEYS) -> list[str]:
    """The keys of ``of`` (a view; every key by default) but ``names``, in their order."""
    _known(names)
    return [k for k in of if k not in names]


def keys_through(name: str) -> list[str]:
    """The keys up to and including ``name``: the leading keys of the order."""
    _known([name])
    return list(KEYS[: KEYS.index(name) + 1])


def _known(names: Sequence[str]) -> None:
    unknown = [n for n in names if n not in KEYS]
    if unknown:
        raise ValueError(f"not a key of a measurement's identity: {', '.join(unknown)}")


# --- the views, each derived from KEYS ------------------------------------------------------

# The keys a record's path names (tool and strategy follow from setting and layout)
LABELS: list[str] = keys_without(*NAMED)
# Between which site and which store: what a latency probe measures, a distance is of
LINK: list[str] = keys_through("remote")
# ... and which way: a panel of the figures, a drift's trend
ROUTE: list[str] = keys_through("direction")
# What tells apart the routes of one site and direction, named only where a campaign has
# several: the store, and the tool (a heading or a row of the tuning block)
ASIDE: list[str] = keys_without("site", "direction", of=keys_through("tool"))
# A measurement less its repeat: what one statistic pools (the tables' identity columns)
MEASUREMENT: list[str] = keys_without("repeat")
# The fewest keys that tell the repeats of one measurement from another's
GROUP: list[str] = keys_without("repeat", of=LABELS)
