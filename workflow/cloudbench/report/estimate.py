"""How long your data takes: a dataset the user names (total size, file count), per route, at
the setting the report tells them to use, with a prediction interval, its egress cost and
the limit that sets it.

The model (docs/estimate.md), fitted to the route's own rows at that setting (the ``ok``
repeats of transfers.tsv, their seconds, bytes and sustained rates):

* **a copy's time is a fixed cost plus its bytes at the sustained rate**: start-up, listing
  and the last bytes cost the same whatever the size, and only the bytes scale. Where the
  rows moved different sizes (at least :data:`MIN_SIZES` of them, spread by
  :data:`SIZE_SPREAD`), both come from a least-squares line of seconds against bytes and
  the interval is that line's prediction interval. With one size (a campaign's usual
  case), each row gives its own fixed cost, ``seconds - bytes / sustained``, and its own
  time for the user's bytes, ``fixed + bytes' / sustained``; the estimate is their mean.
* **the interval is a prediction interval for one new copy**, not the confidence interval
  of a median: mean +/- t(n-1) x sd x sqrt(1 + 1/n) of the rows' times, at
  :data:`COVERAGE` (95%), assuming the copy varies as the campaign's repeats did (normal,
  independent). A copy too short for a sustained rate (``sustained_method`` is
  whole-transfer: under 1.5 s of series after ramp-up) cannot separate the fixed cost from
  the rate: its rate is read over the series' last window (first sample to the end), and
  the interval spans three readings, that one, the whole-transfer rate with no fixed cost,
  and the fixed cost spent inside the window (the rate over the window's rest), so that
  none is taken on trust.
* **connections**: the user's objects (files, times chunks for a chunked layout) may be
  fewer than the setting's objects at once; on a route limited per connection (limits.tsv)
  the rate is then the measured one x the connections the dataset can use / the
  connections the campaign's copies used. On another limit, the answer may change and it
  is said, not guessed.
* **many small files**: a campaign of many small files (``dataset.layout: nested``) measured
  the cost per file: its fixed cost scales with the files. A campaign of large files did
  not, and a dataset of files smaller than any object it moved is said to be outside what
  was measured.
* **extrapolation**: a dataset larger than the largest copy measured is said, by how much.

Everything here is pure but :func:`main` and the readers.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from cloudbench.campaign import identity
from cloudbench.report.labels import setting_as_run

COVERAGE = 0.95  # of the prediction interval for one new copy
MIN_SIZES = 3  # distinct sizes among the rows before seconds are fitted against bytes
SIZE_SPREAD = 1.5  # ... the largest at least this times the smallest
SMALLER = 0.5  # of the smallest object measured: objects this much smaller cost per file
DEFAULT_FACTOR = 100  # the report's dataset without an `estimate` key: the campaign's x100
UNDETERMINED = "undetermined"
PER_CONNECTION = "per-connection path"  # report.limits' name, checked in the tests


@dataclass(frozen=True)
class Dataset:
    """The user's data: its total bytes and how many files hold them."""

    bytes: int
    files: int

    def text(self) -> str:
        return f"{size_text(self.bytes)} in {self.files} file{'s' if self.files != 1 else ''}"


@dataclass(frozen=True)
class Row:
    """One repeat at the route's setting, as the model reads it."""

    seconds: float
    bytes: float
    whole_mb_per_s: float  # bytes / seconds
    mb_per_s: float  # the sustained rate, or the series' last window's (``separated``)
    separated: bool  # the rate came from a sustained window: the fixed cost is its own
    objects: int
    connections: int
    transfers: int  # objects at once the setting allowed
    streams: int  # connections per object
    window_s: float = math.nan  # the seconds a short copy's rate was read over (not separated)
    concurrency: float = math.nan  # objects at once as run (an "auto" setting's number)


@dataclass(frozen=True)
class Estimate:
    """One route's answer for a dataset."""

    site: str
    remote: str
    direction: str
    layout: str
    setting: str
    n: int
    seconds: float
    low_s: float
    high_s: float
    coverage: float
    fixed_s: float
    mb_per_s: float  # the rate the estimate moves the bytes at (after the connections)
    method: str  # "fit" (seconds against bytes), "per row", "per row, not separated"
    limit: str
    egress: str
    notes: tuple[str, ...] = field(default=())

    @property
    def route(self) -> str:
        return f"{self.site} {self.direction} {self.remote}"

    @property
    def limited_by(self) -> str:
        return (
            "its limit undetermined" if self.limit == UNDETERMINED else f"limited by {self.limit}"
        )

    def interval_text(self) -> str:
        if math.isnan(self.low_s):
            return f"{duration(self.seconds)} (no interval: {self.n} repeat)"
        return (
            f"{duration(self.seconds)} [{duration(self.low_s, self.seconds)}, "
            f"{duration(self.high_s, self.seconds)}] "
            f"{self.coverage:.0%} prediction interval for one copy"
        )

    def line(self) -> str:
        notes = "".join(f"; {n}" for n in self.notes)
        return (
            f"{self.route}: {self.interval_text()}, at {self.layout} {self.setting} "
            f"({self.n} repeats: fixed {self.fixed_s:.2f} s + the bytes at "
            f"{self.mb_per_s:.1f} MB/s); egress {self.egress}; {self.limited_by}{notes}"
        )


def size_text(n: float) -> str:
    """Bytes in IEC units, three figures: 640 MiB, 2 TiB, 1.5 GiB."""
    for unit, f in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= f:
            return f"{n / f:.3g} {unit}"
    return f"{int(n)} B"


UNITS = ((120, 1, "s"), (7200, 60, "min"), (172800, 3600, "h"), (math.inf, 86400, "days"))


def duration(s: float, like: float | None = None) -> str:
    """Seconds in the unit a person reads them in: 0.042 s, 40.1 s, 12.5 min, 5.2 h, 3.1 days;
    in the unit ``like`` would be (an interval's ends in its centre's unit)."""
    if math.isnan(s):
        return "?"
    ref = s if like is None or math.isnan(like) else like
    if ref < 1:  # two figures, never "0.0 s [0.0 s, 0.0 s]" for a small dataset
        return f"{s:.2g} s"
    _, size, unit = next(u for u in UNITS if ref < u[0])
    return f"{s / size:.1f} {unit}"


# --- the statistics --------------------------------------------------------------------------


def t_quantile(coverage: float, df: float) -> float:
    """Student's t with two-sided ``coverage`` (95%: its 97.5% point) at ``df``."""
    from cloudbench.report.moderated import t_isf

    return float(t_isf((1 - coverage) / 2, df))


def prediction_interval(
    values: Sequence[float], coverage: float = COVERAGE
) -> tuple[float, float, float]:
    """(mean, low, high) of one new draw like ``values``, times that vary by a factor (as
    rates do): mean +/- t(n-1) x sd x sqrt(1 + 1/n) on their logarithms, normal theory, so
    the interval never reaches below zero (sub-second copies at 3 repeats gave [-8.6 s,
    35.4 s] on a straight scale, usercheck53); (mean, nan, nan) for fewer than two values,
    and on a straight scale where one is not positive."""
    xs = [float(v) for v in values if not math.isnan(v)]
    if not xs:
        return math.nan, math.nan, math.nan
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return mean, math.nan, math.nan
    logs = all(x > 0 for x in xs)
    ys = [math.log(x) for x in xs] if logs else xs
    my = sum(ys) / n
    sd = math.sqrt(sum((y - my) ** 2 for y in ys) / (n - 1))
    half = t_quantile(coverage, n - 1) * sd * math.sqrt(1 + 1 / n)
    if logs:
        return mean, math.exp(my - half), math.exp(my + half)
    return mean, mean - half, mean + half


def fit_prediction(
    x: Sequence[float], y: Sequence[float], x0: float, coverage: float = COVERAGE
) -> tuple[float, float, float, float, float]:
    """Least squares y = a + b x, and its prediction interval for one new y at ``x0``:
    (a, b, y0, low, high), with t(n-2) x s x sqrt(1 + 1/n + (x0 - mean x)^2 / Sxx)."""
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((xi - mx) ** 2 for xi in x)
    b = sum((xi - mx) * (yi - my) for xi, yi in zip(x, y, strict=True)) / sxx
    a = my - b * mx
    y0 = a + b * x0
    if n < 3:
        return a, b, y0, math.nan, math.nan
    s = math.sqrt(sum((yi - a - b * xi) ** 2 for xi, yi in zip(x, y, strict=True)) / (n - 2))
    half = t_quantile(coverage, n - 2) * s * math.sqrt(1 + 1 / n + (x0 - mx) ** 2 / sxx)
    return a, b, y0, y0 - half, y0 + half


def window_rate(elapsed: Sequence[float], moved: Sequence[float]) -> float | None:
    """MB/s over a short copy's series from its first sample to the one that counted all
    its bytes (measure.series.counted_all): the rate without the start-up before the first
    sample; None with fewer than two samples."""
    from cloudbench.measure.series import counted_all

    pts = sorted(zip(elapsed, moved, strict=True))
    if len(pts) < 2:
        return None
    end = counted_all([b for _, b in pts])
    t0, b0 = pts[0]
    t1, b1 = pts[end]
    if t1 <= t0 or b1 <= b0:
        return None
    return (b1 - b0) / (t1 - t0) / 1e6


def window_seconds(elapsed: Sequence[float], moved: Sequence[float]) -> float:
    """The seconds :func:`window_rate` reads its rate over (nan where it reads none)."""
    from cloudbench.measure.series import counted_all

    pts = sorted(zip(elapsed, moved, strict=True))
    if len(pts) < 2:
        return math.nan
    return pts[counted_all([b for _, b in pts])][0] - pts[0][0]


# --- the model ---------------------------------------------------------------------------------


def objects_of(dataset: Dataset, layout_chunk_bytes: int) -> int:
    """The objects the dataset becomes: its files, or each file's chunks for a chunked
    layout (files of the dataset's mean size)."""
    if layout_chunk_bytes <= 0:
        return dataset.files
    mean = dataset.bytes / max(dataset.files, 1)
    return dataset.files * max(1, math.ceil(mean / layout_chunk_bytes))


def _connections(rows: Sequence[Row], objects: int) -> tuple[int, int]:
    """(connections the campaign's copies used, connections the dataset can use)."""
    used = sorted(r.connections for r in rows)[len(rows) // 2]
    transfers = max(r.transfers for r in rows)
    streams = max(r.streams for r in rows)
    return used, min(objects, transfers) * streams


def predict(
    rows: Sequence[Row],
    dataset: Dataset,
    chunk_bytes: int = 0,
    limit: str = UNDETERMINED,
    small_files: bool = False,
    coverage: float = COVERAGE,
) -> tuple[float, float, float, float, float, str, list[str]]:
    """(seconds, low, high, fixed seconds, MB/s, method, notes) for ``dataset`` from the
    route's ``rows`` at one setting (module doc). ``small_files``: the campaign's dataset
    was many small files, so its fixed cost is per file."""
    notes: list[str] = []
    objects = objects_of(dataset, chunk_bytes)
    used, can = _connections(rows, objects)
    scale = 1.0  # on the rate
    if can < used:
        what = f"{objects} object{'s' if objects != 1 else ''} use {can} of the {used} " + (
            "connections the campaign's copies used"
        )
        if limit == PER_CONNECTION:
            scale = can / used
            notes.append(f"{what}; the route is limited per connection: the rate x {scale:.2f}")
        else:
            notes.append(
                f"{what}; the route's limit ({limit}) does not say whether fewer connections "
                "move the bytes as fast: not counted in"
            )
    elif can > used:
        notes.append(
            f"the campaign's copies used {used} connections, yours can use {can}: faster if "
            "the route is limited per connection, not counted in"
        )
    campaign_objects = sorted(r.objects for r in rows)[len(rows) // 2]
    per_file = objects / max(campaign_objects, 1) if small_files else 1.0
    sizes = sorted({r.bytes for r in rows})
    big = max(sizes)
    if dataset.bytes > big:
        x = dataset.bytes / big
        notes.append(f"an extrapolation: {x:,.0f}x" if x >= 100 else f"an extrapolation: {x:.3g}x")
        notes[-1] += f" the largest copy measured ({size_text(big)})"
    smallest = min(r.bytes / max(r.objects, 1) for r in rows)
    mean_object = dataset.bytes / max(objects, 1)
    if small_files:
        notes.append(f"a per-file cost from the campaign's small files, x{per_file:.3g}")
    elif mean_object < SMALLER * smallest:
        notes.append(
            f"your objects ({size_text(mean_object)} on average) are far smaller than any "
            f"the campaign moved ({size_text(smallest)}): a per-file cost was not measured (a "
            "campaign with dataset.layout: nested measures it)"
        )
    if len(sizes) >= MIN_SIZES and sizes[-1] >= SIZE_SPREAD * sizes[0] and not small_files:
        a, b, y0, lo, hi = fit_prediction(
            [r.bytes for r in rows], [r.seconds for r in rows], dataset.bytes, coverage
        )
        rate = 1 / b / 1e6 * scale if b > 0 else math.nan
        y = a + dataset.bytes / (rate * 1e6) if rate == rate else y0
        if lo + (y - y0) > 0:  # else too loose a line: each row's own reading below
            return y, lo + (y - y0), hi + (y - y0), a, rate, "fit", notes
    fixed = [(r.seconds - r.bytes / (r.mb_per_s * 1e6)) * per_file for r in rows]
    times = [
        f + dataset.bytes / (r.mb_per_s * scale * 1e6) for f, r in zip(fixed, rows, strict=True)
    ]
    mean, lo, hi = prediction_interval(times, coverage)
    rate = dataset.bytes / (mean - sum(fixed) / len(fixed)) / 1e6
    method = "per row"
    if not all(r.separated for r in rows):
        # the fixed cost not separated from the rate: the whole-transfer reading too
        whole = [dataset.bytes / (r.whole_mb_per_s * scale * 1e6) for r in rows]
        _, wlo, whi = prediction_interval(whole, coverage)
        # and the other extreme: the fixed cost spent inside the short window (the last
        # stats line comes after the last responses), so the rate over the window's rest
        fast = [
            dataset.bytes / (r.mb_per_s * scale * 1e6) * (1 - min(max(f, 0.0), w / 2) / w)
            for f, r in zip(fixed, rows, strict=True)
            if (w := r.window_s) == w and w > 0
        ]
        _, flo, _ = prediction_interval(fast, coverage) if fast else (0, math.nan, 0)
        lo, hi = _span(lo, hi, wlo, whi, min(times + whole), max(times + whole))
        if fast:
            lo = min(lo, flo if not math.isnan(flo) else min(fast))
        method = "per row, not separated"
        notes.append(
            f"the campaign's copies ({min(r.seconds for r in rows):.1f} s) were too short for "
            "a sustained rate: its fixed cost is read from the series' last window, and the "
            "interval spans the whole-transfer rate with no fixed cost, and that cost spent "
            "inside the window, too"
        )
    return mean, lo, hi, sum(fixed) / len(fixed), rate, method, notes


def _span(lo: float, hi: float, wlo: float, whi: float, least: float, most: float):
    """The widest of two readings' intervals (a reading without one: its values)."""
    lows = [v for v in (lo, wlo) if not math.isnan(v)] or [least]
    highs = [v for v in (hi, whi) if not math.isnan(v)] or [most]
    return min(lows), max(highs)


# --- from the campaign's tables ------------------------------------------------------------


def rows_of(metrics: Any, series: Any, route: Mapping[str, Any]) -> list[Row]:
    """The ``ok`` rows of ``metrics`` (report.stats.transfer_metrics) at ``route``'s layout
    and setting, each with the rate the model reads (module doc)."""
    import pandas as pd

    m = metrics
    sel = (m["status"] == "ok") & m["mb_per_s"].notna() & m["seconds"].notna()
    for k in identity.GROUP:
        sel &= m[k].astype(str) == str(route[k])
    out = []
    by_key = {}
    if series is not None and not series.empty:
        keys = identity.LABELS
        by_key = {tuple(str(v) for v in k): g for k, g in series.groupby(keys)}
    for _, r in m[sel].iterrows():
        moved = float(r.get("bytes_moved") or r.get("bytes_requested") or 0)
        requested = r.get("bytes_requested")
        nbytes = float(requested) if pd.notna(requested) and requested else moved
        whole = nbytes / float(r["seconds"]) / 1e6
        separated = r.get("sustained_method") == "series" and pd.notna(r["sustained_mb_per_s"])
        rate = float(r["sustained_mb_per_s"]) if separated else None
        window = math.nan
        if rate is None:
            key = tuple(str(r[k]) for k in identity.LABELS)
            g = by_key.get(key)
            if g is not None:
                rate = window_rate(g["elapsed_s"].tolist(), g["bytes"].tolist())
                window = window_seconds(g["elapsed_s"].tolist(), g["bytes"].tolist())
        out.append(
            Row(
                seconds=float(r["seconds"]),
                bytes=nbytes,
                whole_mb_per_s=whole,
                mb_per_s=rate if rate else whole,
                separated=separated,
                window_s=window if rate else math.nan,
                objects=_int(r.get("objects"), 1),
                connections=_int(r.get("connections"), 1),
                transfers=_int(r.get("transfers"), _int(r.get("concurrency"), 1)),
                streams=_int(r.get("streams_per_object"), 1),
                concurrency=float(pd.to_numeric(r.get("concurrency"), errors="coerce")),
            )
        )
    return out


def _int(v: Any, default: int) -> int:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(f) or f < 1 else int(f)


def setting_to_use(routes: Sequence[Mapping[str, Any]], tuned: Any) -> list[dict[str, Any]]:
    """Each route with the setting the report tells the user to use: a tuning search's
    (tuned.tsv: the one its printed command runs), else the route's best (routes.json)."""
    chosen = {}
    for r in routes:
        if r.get("layout") is None or r.get("setting") is None:
            continue
        if isinstance(r.get("layout"), float) and math.isnan(r["layout"]):
            continue
        chosen[(r["site"], r["remote"], r["direction"])] = {k: r[k] for k in identity.GROUP}
    if tuned is not None and not tuned.empty and "layout" in tuned:
        for _, t in tuned.iterrows():
            key = (t["site"], t["remote"], t["direction"])
            if key in chosen and isinstance(t.get("layout"), str) and t.get("status") == "done":
                chosen[key] |= {"layout": t["layout"], "setting": t["setting"]}
    return [chosen[k] for k in sorted(chosen)]


def egress_text(nbytes: int, direction: str, prices: Any) -> str:
    """The egress of moving ``nbytes`` that way at the remote's list prices (report.stats'
    rule, the cost block's)."""
    from cloudbench.report.stats import egress_cost

    if direction != "download":
        return "none (upload)"
    if prices is None:
        return "no prices configured"
    return f"{egress_cost(nbytes, direction, prices):,.2f} {prices.currency}".strip()


def estimates(
    metrics: Any,
    series: Any,
    routes: Sequence[Mapping[str, Any]],
    limits: Any,
    dataset: Dataset,
    prices: Mapping[str, Any],
    small_files: bool = False,
    only: str | None = None,
) -> list[Estimate]:
    """One :class:`Estimate` per route (``only``: ``site/direction/remote``), from the
    campaign's rows with their sustained rates (``metrics``), its series, its routes and
    the settings to use (:func:`setting_to_use`), limits.tsv's table and each remote's
    prices (report.stats.Prices or None)."""
    from cloudbench.campaign.model import Layout

    verdicts = {}
    if limits is not None and not limits.empty:
        for _, r in limits.iterrows():
            verdicts[(r["site"], r["remote"], r["direction"])] = str(r["limit"])
    out = []
    for route in routes:
        if only and only != f"{route['site']}/{route['direction']}/{route['remote']}":
            continue
        rows = rows_of(metrics, series, route)
        if not rows:
            continue
        limit = verdicts.get((route["site"], route["remote"], route["direction"]), UNDETERMINED)
        chunk = Layout.from_label(route["layout"]).chunk_bytes
        seconds, lo, hi, fixed, rate, method, notes = predict(
            rows, dataset, chunk, limit, small_files
        )
        ran = [r.concurrency for r in rows if not math.isnan(r.concurrency)]
        out.append(
            Estimate(
                **{k: str(route[k]) for k in identity.GROUP}
                # as the first screen names it (rclone-1xauto that ran 4 at once: rclone-1x4)
                | {"setting": setting_as_run(route["setting"], median(ran) if ran else math.nan)},
                n=len(rows),
                seconds=seconds,
                low_s=lo,
                high_s=hi,
                coverage=COVERAGE,
                fixed_s=fixed,
                mb_per_s=rate,
                method=method,
                limit=limit,
                egress=egress_text(dataset.bytes, route["direction"], prices.get(route["remote"])),
                notes=tuple(notes),
            )
        )
    return out


def dataset_of(info: Mapping[str, Any]) -> Dataset | None:
    """The report's dataset: the campaign's ``estimate`` key, else its own dataset x
    :data:`DEFAULT_FACTOR` (as many more files of its size)."""
    from cloudbench.sizes import parse_size

    asked = info.get("estimate")
    if asked:
        return Dataset(parse_size(asked["size"]), int(asked["files"]))
    ds = info.get("dataset") or {}
    if not ds.get("file_bytes") or not ds.get("files"):
        return None
    files = int(ds["files"]) * DEFAULT_FACTOR
    return Dataset(int(ds["file_bytes"]) * files, files)


def block_html(found: Sequence[Estimate], dataset: Dataset, named: bool) -> str:
    """The report's "How long your data takes" block: a line per route (its time, interval,
    setting, egress and limit), what the line rests on and leaves out folded under it."""
    if not found:
        return ""
    whose = "the campaign's estimate key" if named else f"the campaign's dataset x{DEFAULT_FACTOR}"
    items = []
    for e in found:
        how = (
            f"fixed {e.fixed_s:.2f} s per copy + the bytes at {e.mb_per_s:.1f} MB/s, from "
            f"{e.n} repeats ({e.method})" + "".join(f"; {n}" for n in e.notes)
        )
        items.append(
            f"<li><b>{html.escape(e.route)}</b>: {html.escape(e.interval_text())}, at "
            f"{html.escape(e.layout)} {html.escape(e.setting)}; egress {html.escape(e.egress)};"
            f" {html.escape(e.limited_by)}"
            f"<details><summary>how</summary>{html.escape(how)}</details></li>"
        )
    return (
        "<div class='cb-limits cb-estimate'><h3>How long your data takes: "
        f"{html.escape(dataset.text())} ({html.escape(whose)})</h3>"
        "<p>At the setting to use: a fixed cost per copy plus the bytes at the sustained "
        f"rate, both from the route's repeats; {COVERAGE:.0%} of single copies fall in the "
        "interval if they vary as the repeats did. <code>cloudbench estimate</code> answers "
        "for your own data.</p>"
        f"<ul>{''.join(items)}</ul></div>"
    )


def report_block(
    metrics: Any, series: Any, route_table: Any, tuned: Any, limits: Any, info: Mapping[str, Any]
) -> str:
    """The block for the report (report.build): the campaign's named dataset or its own x100."""
    dataset = dataset_of(info)
    if dataset is None or route_table is None or route_table.empty or metrics.empty:
        return ""
    routes = setting_to_use(route_table.to_dict("records"), tuned)
    small = bool((info.get("dataset") or {}).get("small_files"))
    found = estimates(metrics, series, routes, limits, dataset, prices_of(info), small)
    return block_html(found, dataset, bool(info.get("estimate")))


# --- the command -------------------------------------------------------------------------------


def prices_of(info: Mapping[str, Any]) -> dict[str, Any]:
    """Each remote's list prices (report.stats.Prices, None where the campaign gives none)
    from the report's info."""
    from cloudbench.report.stats import Prices

    return {
        name: Prices.from_config((r or {}).get("prices"))
        for name, r in (info.get("remotes") or {}).items()
    }


def _read(path: Path) -> Any:
    import pandas as pd

    if not path.exists():
        return pd.DataFrame()
    try:
        return pd.read_csv(path, sep="\t")
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def _prices_of_config(path: Path | None) -> tuple[dict[str, Any], bool]:
    """Each remote's prices from the campaign's file (report info's rule), and whether its
    dataset is many small files."""
    if path is None:
        return {}, False
    import yaml

    from cloudbench.campaign import jobs
    from cloudbench.campaign.model import load_campaign

    cfg = yaml.safe_load(path.read_text()) or {}
    info = json.loads(jobs.report_info(load_campaign(cfg, path.parent), cfg).to_json())
    return prices_of(info), bool((info.get("dataset") or {}).get("small_files"))


def main(argv: Sequence[str]) -> int:
    """``cloudbench estimate RESULTS --size 2TiB --files 1000``: per route, how long."""
    p = argparse.ArgumentParser(
        prog="cloudbench estimate",
        description="How long your dataset takes on each route of a finished campaign, at "
        "the setting its report tells you to use: a fixed cost per copy plus the bytes at the "
        f"sustained rate, both from the route's repeats, with a {COVERAGE:.0%} prediction "
        "interval for one copy, the egress cost where the campaign gives prices and the "
        "limit that sets it (limits.tsv). docs/estimate.md says how.",
    )
    p.add_argument("results", type=Path, help="a campaign's results directory (results/NAME)")
    p.add_argument("--size", required=True, help="your data's total size: 2TiB, 500GB, bytes")
    p.add_argument("--files", type=int, required=True, help="how many files hold it")
    p.add_argument("--route", help="only this route: site/direction/remote")
    p.add_argument("--config", type=Path, help="the campaign's file, for its prices")
    p.add_argument("--json", action="store_true", help="one JSON object per route")
    a = p.parse_args(list(argv))
    from cloudbench.report import stats
    from cloudbench.sizes import SizeError, parse_size

    try:
        dataset = Dataset(parse_size(a.size), a.files)
        if a.files < 1 or dataset.bytes < 1:
            raise SizeError("--size and --files: at least 1")
    except SizeError as err:
        print(f"cloudbench estimate: {err}", file=sys.stderr)
        return 2
    transfers = _read(a.results / "transfers.tsv")
    routes_file = a.results / "routes.json"
    if transfers.empty or not routes_file.exists():
        print(
            f"cloudbench estimate: no transfers.tsv and routes.json in {a.results} "
            "(a finished campaign's results, after its report)",
            file=sys.stderr,
        )
        return 2
    series = stats.with_setting(_read(a.results / "timeseries.tsv"))
    metrics = stats.transfer_metrics(stats.with_setting(transfers), series)
    routes = setting_to_use(
        json.loads(routes_file.read_text())["routes"], _read(a.results / "tuned.tsv")
    )
    prices, small = _prices_of_config(a.config)
    found = estimates(
        metrics, series, routes, _read(a.results / "limits.tsv"), dataset, prices, small, a.route
    )
    if not found:
        print(f"cloudbench estimate: no route measured{' ' + a.route if a.route else ''}")
        return 2
    if a.json:
        for e in found:
            print(json.dumps(asdict(e) | {"dataset": asdict(dataset)}))
        return 0
    print(f"{dataset.text()}:")
    for e in found:
        print(e.line())
    if not a.config:
        print("(egress: give --config with the campaign's file for its prices)")
    return 0
