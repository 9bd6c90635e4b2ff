"""The report's first screen in one form (issue #49, item 4), on a campaign shaped like the
demo: plain at 1x4 only, chunked at 1x2, 1x4 and 1x8, a link that caps each connection so
that chunked at 4 is about four times plain and 8 connections buy nothing more, and a tuning
search per route whose knee (1x4) is not the fastest measured (1x8).

What a reader was given before: rates with 2 decimals beside rates with 1 (4.15 beside
16.3), intervals in three forms ("16 [14, 16.3]", "(75%)", "at 90%"), "0.987x" beside
"×3.88", a tuning block naming 1x4 above "fastest ... 1x8 ... plain was not measured at this
setting, so no speed-up" with nothing saying why both hold, and no speed-up over plain
anywhere near the top."""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
import pytest

from cloudbench.report import headline
from cloudbench.report.labels import coverage_note, factor, rate, with_interval
from cloudbench.report.stats import summarise
from cloudbench.report.tuned import COLUMNS, LINE_BREAK

pytestmark = pytest.mark.unit

MB = 10**6
# the demo's link: each connection at 4 MiB/s (4.19 MB/s), 16 MiB/s in all
SETTINGS = {  # (layout, setting): median MB/s
    ("plain", "rclone-1x4"): 4.15,
    ("chunked-4MiB", "rclone-1x2"): 8.22,
    ("chunked-4MiB", "rclone-1x4"): 16.1,
    ("chunked-4MiB", "rclone-1x8"): 16.3,
}
ROUTES = [("tursa", "upload"), ("tursa", "download"), ("tesseract", "download")]


def demo_like() -> pd.DataFrame:
    """transfers.tsv rows: 3 repeats of every setting on every route, within 0.3% of its
    median."""
    rng = np.random.default_rng(4)
    rows = []
    for site, direction in ROUTES:
        for (layout, setting), median in SETTINGS.items():
            for repeat, wobble in enumerate(rng.uniform(0.997, 1.003, 3), start=1):
                v = median * wobble
                rows.append({
                    "site": site, "remote": "main", "direction": direction, "tool": "rclone",
                    "strategy": layout.split("-")[0], "layout": layout, "setting": setting,
                    "repeat": repeat, "bytes_requested": 32 * 2**20, "bytes_moved": 32 * 2**20,
                    "seconds": 32 * 2**20 / (v * MB), "mb_per_s": v, "status": "ok",
                    "retries": 0, "connections": 1, "clients": 1,
                    "concurrency": int(setting.rsplit("x", 1)[1]),
                    "started_utc": f"2026-01-01T00:0{repeat}:00Z",
                })  # fmt: skip
    return pd.DataFrame(rows)


def tuned_rows() -> pd.DataFrame:
    """tuned.tsv as the demo's searches wrote it: the knee 1x4, the fastest 1x8 within 10%;
    both downloads share one command."""
    rows = []
    for site, direction in ROUTES:
        row = dict.fromkeys(COLUMNS, "")
        row.update(site=site, remote="main", direction=direction, tool="rclone", status="done")
        row.update(layout="chunked-4MiB", setting="rclone-1x4", clients=1, concurrency=4)
        row.update(median_mb_per_s=16.106, low_mb_per_s=16.07, high_mb_per_s=16.3, level=0.75)
        row.update(runner_up_layout="chunked-4MiB", runner_up_setting="rclone-1x8")
        row.update(runner_up_mb_per_s=16.323, factor=0.9867, factor_low=0.9831)
        row.update(factor_high=1.0045, factor_level=0.9, clearly_ahead=False)
        row.update(measurements=12, grid_measurements=12, budget="1GiB moved", margin=0.1)
        row.update(command=LINE_BREAK.join([f"# {direction}", f"rclone copy a b # {direction}"]))
        rows.append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def first_screen() -> str:
    t = demo_like()
    return headline.headline_html(
        t, summarise(t, pd.DataFrame()), {"campaign": "demo"}, None, tuned=tuned_rows()
    )


def text_of(page: str) -> str:
    """The words of a fragment of the page, its style left out."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.split("</style>")[-1]))


def tuning_block(page: str) -> str:
    """The tuning block's HTML, its no-break spaces (which keep an interval whole) as spaces."""
    start = page.index('class="cb-tuned"')
    return page[start : page.index("</table>", start)].replace("\u00a0", " ")


def test_rates_and_factors_each_read_alike():
    """A column of rates has one decimal whatever their size; factors two, after ×."""
    assert [rate(v) for v in (4.15, 8.216, 16.3, 162.04, 1234.56)] == [
        "4.2", "8.2", "16.3", "162.0", "1,234.6",
    ]  # fmt: skip
    assert coverage_note([4, 3]).endswith(
        "(at 3 repeats 75% for a median, 90% for a factor between two settings; at 4, 87% and 97%)"
    )
    assert rate(0.042) == "0.042" and rate(float("nan")) == "–"
    assert [factor(v) for v in (0.9867, 1.0, 3.876)] == ["0.99", "1.00", "3.88"]
    assert with_interval(16.1, 16.07, 16.3, 0.75, unit=" MB/s") == "16.1 MB/s [16.1, 16.3] 75%"
    assert coverage_note([3, 3]).endswith("(at 3 repeats 75% for a median, 90% for a factor "
                                     "between two settings)")  # fmt: skip


def test_every_interval_on_the_first_screen_names_its_coverage_in_one_form():
    page = text_of(first_screen())
    intervals = re.findall(r"(×?)([\d.,]+)( MB/s)? \[([\d.,]+), ([\d.,]+)\]( \d+%)?", page)
    assert len(intervals) >= 12 + 3 * 3, intervals  # the table's rows, the tuning block's
    for times, v, _, low, high, level in intervals:
        assert level, (v, low, high)  # every interval is followed by its coverage
        decimals = 2 if times else 1  # a factor's two, a rate's one
        for x in (v, low, high):
            assert len(x.rsplit(".", 1)[-1]) == decimals, (times, v, low, high)
    assert "(75%)" not in page and "at 90%" not in page and "x [" not in page
    assert "at 3 repeats 75% for a median, 90% for a factor" in page


def test_the_tuning_block_and_the_fastest_lines_say_why_they_name_different_settings():
    """The command uses the knee (1x4), the fastest measured is 1x8: the block says the knee
    is the fewest connections within the margin of the fastest, and each fastest line says
    the command uses 1x4 instead, and why."""
    page = first_screen()
    block = text_of(tuning_block(page))
    assert "knee, the fewest connections whose median is within 10% of the fastest" in block
    assert block.count("chunked-4MiB rclone-1x4") == 3 and block.count("rclone-1x8 at 16.3") == 3
    assert block.count("×0.99 [0.98, 1.00] 90%") == 3  # the knee's rate over the fastest's
    lines = [s for s in re.findall(r"<p>([^<]*fastest chunked[^<]*)</p>", page)]
    assert len(lines) == 3, lines
    for line in lines:
        assert "fastest chunked-4MiB rclone-1x8 at 16.3 MB/s" in line, line
        assert "the command above uses chunked-4MiB rclone-1x4 instead, the knee: the fewest " \
            "connections within 10% of the fastest" in line, line  # fmt: skip


def test_the_speed_up_over_plain_is_on_the_first_screen():
    """Plain ran at 1x4 only: the speed-up is chunked's at 1x4 (about x3.9), said in the
    tuning block for the setting to use and, in the fastest lines, where both ran (it was
    "plain was not measured at this setting, so no speed-up")."""
    page = first_screen()
    factors = re.findall(r"×(\d\.\d\d) \[[\d.]+, [\d.]+\] 90%", tuning_block(page))
    speedups = [float(x) for x in factors[::2]]  # each row: over plain, then ÷ the fastest
    assert len(factors) == 6 and all(3.8 < x < 4.0 for x in speedups), factors
    assert "plain was not measured at this setting" not in page
    assert page.count("chunked-4MiB is ×3.") == 3 and page.count("over plain at rclone-1x4") == 3
    # and the tuning block comes before the table, the fastest lines after it
    assert (
        page.index('class="cb-tuned"')
        < page.index('class="cb-legend"')
        < page.index("fastest chunked")
    )


def test_the_measurements_each_search_spent_wrap_where_their_counts_differ():
    """Searches that spent different counts get a column for them, a cell that wraps like
    the other long ones (a demo under load pushed the tuning table to 1,519 px, past the
    window, with it as one unbroken line)."""
    t = demo_like()
    tuned = tuned_rows()
    tuned.loc[0, "measurements"] = 9
    page = headline.headline_html(
        t, summarise(t, pd.DataFrame()), {"campaign": "demo"}, None, tuned=tuned
    )
    block = html.unescape(tuning_block(page))
    cells = re.findall(r'<td class="w"><span class="nb">(\d+ of the grid\'s \d+;)</span>', block)
    assert cells == ["9 of the grid's 12;", "12 of the grid's 12;", "12 of the grid's 12;"], block


def test_a_command_several_searches_share_is_printed_once_naming_them():
    page = first_screen()
    assert page.count('<pre class="cb-command">') == 2
    assert "For tursa download and tesseract download:" in page
    assert "For tursa upload:" in page


def test_the_limits_block_has_its_place_between_the_routes_and_the_command():
    """The "What limits each route" block (report.limits) is given to headline_html and
    shown above the command to use."""
    t = demo_like()
    block = "<div class='cb-limits'><h3>What limits each route</h3></div>"
    page = headline.headline_html(
        t, summarise(t, pd.DataFrame()), {"campaign": "demo"}, None, tuned=tuned_rows(),
        limits=block,
    )  # fmt: skip
    assert (
        page.index("</style>")
        < page.index("<div class='cb-limits'>")
        < page.index('class="cb-tuned"')
    )


def test_the_table_lists_routes_in_order_and_each_routes_layouts_in_the_one_order():
    """A heading row per route (its keys not repeated in columns of every row: the table
    stays narrow), the routes by site and direction, each route's layouts in the one order."""
    page = first_screen()
    table = page[page.index('class="cb-legend"') :]
    table = table[: table.index("</table>")]
    assert re.findall(r'<tr class="cb-route"><th[^>]*>([^<]*)</th>', table) == [
        "tesseract download", "tursa download", "tursa upload",
    ]  # fmt: skip
    layouts = re.findall(r'<tr class="[a-z]*"><td class="l">([^<]*)</td>', table)
    assert layouts == 3 * [
        "plain rclone-1x4", "chunked-4MiB rclone-1x2", "chunked-4MiB rclone-1x4",
        "chunked-4MiB rclone-1x8",
    ]  # fmt: skip
    assert ">site</th>" not in table and ">direction</th>" not in table


def test_where_the_knee_is_the_fastest_both_say_so():
    """A search whose answer is the fastest measured (1x8 ahead of 1x4 by more than its
    margin): the block names it the fastest, and the fastest lines say the command uses it;
    its speed-up over plain is chunked's at 1x4, where plain ran, said so."""
    t = demo_like()
    tuned = tuned_rows().assign(
        setting="rclone-1x8", concurrency=8, median_mb_per_s=16.3, runner_up_setting="rclone-1x4",
        runner_up_mb_per_s=16.1, factor=1.012, factor_low=1.005, factor_high=1.02,
        clearly_ahead=True,
    )  # fmt: skip
    page = headline.headline_html(
        t, summarise(t, pd.DataFrame()), {"campaign": "demo"}, None, tuned=tuned
    )
    block = text_of(tuning_block(page))
    assert block.count("chunked-4MiB rclone-1x8") == 3
    assert block.count("this one; runner-up rclone-1x4 at 16.1 ×1.01 [1.00, 1.02] 90%") == 3
    assert "each search's knee" in block and "bought less" not in block
    assert page.count("the command above uses it.") == 3 and "instead" not in page
    # plain never ran at 1x8: the speed-up shown is chunked's where both ran, named
    assert len(re.findall(r"×3\.\d\d \[[\d.]+, [\d.]+\] 90% at rclone-1x4", block)) == 3
