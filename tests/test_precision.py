"""repeats: auto: when an identity has been measured often enough, and why it stopped."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

from cloudbench.campaign import precision
from cloudbench.campaign.model import ConfigError, load_campaign
from cloudbench.campaign.precision import FAILED, MAX, MET, MORE, Precision, decide, decide_round
from cloudbench.intervals import median_interval

TARGET = Precision(width=0.10, max_repeats=12)


@pytest.mark.unit
def test_first_rounds_are_the_fewest_with_a_95_percent_median_interval():
    n = precision.first_rounds()
    assert n == 6
    assert median_interval([1.0] * n).level >= 0.95 > median_interval([1.0] * (n - 1)).level


@pytest.mark.unit
def test_a_steady_identity_meets_the_target_a_noisy_one_goes_on_then_stops_at_the_max():
    steady = decide([100, 101, 99, 100, 102, 98], ["ok"] * 6, TARGET)
    assert steady["decision"] == MET
    assert steady["relative_width"] == pytest.approx((102 - 98) / 100)
    noisy = list(np.random.default_rng(3).lognormal(np.log(100), 0.3, 12))
    assert decide(noisy[:6], ["ok"] * 6, TARGET)["decision"] == MORE
    last = decide(noisy, ["ok"] * 12, TARGET)
    assert last["decision"] == MAX and last["repeats"] == 12
    assert last["relative_width"] > TARGET.width
    # the numbers are the report's own interval (so "met" means the report's interval is narrow)
    low, high, level = median_interval(noisy)
    assert (last["low_mb_per_s"], last["high_mb_per_s"]) == pytest.approx((low, high))
    assert last["level"] == pytest.approx(level) and level >= 0.95


@pytest.mark.unit
def test_a_width_met_only_at_a_coverage_below_95_percent_is_not_met():
    five = decide([100.0] * 5, ["ok"] * 5, TARGET)  # width 0, but [min, max] of 5 is 93.75%
    assert five["decision"] == MORE and five["relative_width"] == 0


@pytest.mark.unit
def test_a_failed_repeat_stops_the_identity_with_its_reason():
    d = decide([100, None, 100, 100, 100, 100], ["ok", "failed", *["ok"] * 4], TARGET)
    assert d["decision"] == FAILED and d["ok"] == 5 and d["repeats"] == 6


@pytest.mark.unit
def test_a_round_decides_the_identities_measured_in_it_and_keeps_the_others():
    def rec(layout, repeat, rate):
        return {
            "site": "s", "direction": "upload", "remote": "r", "layout": layout,
            "setting": "rclone-1xauto", "repeat": repeat, "status": "ok", "mb_per_s": rate,
        }  # fmt: skip

    first = decide_round(
        [rec("plain", r, 100 + r % 2) for r in range(1, 7)]
        + [rec("chunked-1MiB", r, 50 * (1 + r % 3)) for r in range(1, 7)],
        [],
        TARGET,
    )
    assert [(d["layout"], d["decision"]) for d in first] == [
        ("chunked-1MiB", MORE),
        ("plain", MET),
    ]
    assert [d["layout"] for d in precision.continuing(first)] == ["chunked-1MiB"]
    second = decide_round(
        [rec("chunked-1MiB", r, 50 * (1 + r % 3)) for r in range(1, 8)], first, TARGET
    )
    assert [(d["layout"], d["repeats"]) for d in second] == [("chunked-1MiB", 7), ("plain", 6)]
    later = precision.later_rounds(second, first=6)
    assert [(m["layout"], m["repeat"]) for m in later] == [("chunked-1MiB", 7)]


@pytest.mark.unit
def test_downloads_beyond_the_first_rounds_read_those_copies_in_turn():
    assert [precision.copy_repeat(r, 6) for r in range(1, 15)] == [
        *range(1, 7), *range(1, 7), 1, 2,
    ]  # fmt: skip


@pytest.mark.unit
def test_the_stops_are_said_in_one_sentence():
    decisions = [
        {"decision": MET, "repeats": 6, "relative_width": 0.05},
        {"decision": MET, "repeats": 8, "relative_width": 0.09},
        {"decision": MAX, "repeats": 12, "relative_width": 0.31},
    ]
    text = precision.stops_text(decisions, {"width": 0.1, "max_repeats": 12})
    assert "within 10%" in text and "at most 12" in text
    assert "2 met target after 6-8 repeats" in text
    assert "1 reached max after 12 repeats (widest interval 31% of its median)" in text


def campaign_cfg(**changes):
    cfg = {
        "campaign": "c",
        "remote": "/tmp/r",
        "dataset": {"files": 1, "size": "1MiB"},
        "strategies": ["plain"],
        "sites": {"a": {"upload": True, "download": True, "scratch": "/tmp/s"}},
        "site": "a",
    }
    return cfg | changes


@pytest.mark.unit
def test_the_campaign_file_says_auto_and_its_target():
    c = load_campaign(campaign_cfg(repeats="auto", precision={"width": "5%", "max_repeats": 9}))
    assert (c.repeats, c.precision) == (6, Precision(0.05, 9))
    assert c.most_repeats == 9
    assert load_campaign(campaign_cfg(repeats=4)).precision is None


@pytest.mark.unit
@pytest.mark.parametrize(
    "repeats, target, message",
    [
        ("auto", {"max_repeats": 5}, "precision.max_repeats: 5 is below 6"),
        ("auto", {"width": "0%"}, "precision.width: '0%' must be a share"),
        ("sometimes", {}, "repeats: 'sometimes' is not a whole number or text matching ^auto$"),
        ("auto", {"width": 15}, "precision.width: 15 is a share of the median (15 = 1500%)"),
    ],
)
def test_a_wrong_auto_target_is_one_line_naming_it(repeats, target, message):
    with pytest.raises(ConfigError) as err:
        load_campaign(campaign_cfg(repeats=repeats, precision=target))
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.full
@pytest.mark.slow
@pytest.mark.browser
def test_auto_repeats_stop_at_the_target_or_the_max_and_a_rerun_measures_nothing(tmp_path):
    """A campaign of a local-directory remote (its rates vary by tens of percent): with a
    target any 6 repeats meet, every measurement stops after the first rounds; with one none
    can meet and a maximum of 7, the next run measures one more round of each, and nothing
    of the first six again (a download's seventh reads the first copy again); a third run
    measures nothing."""
    from cloudbench.site.scratch import bulk_left
    from tests.infra.workflow import snakemake, write_config

    def campaign(width: str) -> dict:
        return {
            "campaign": "auto", "remote": str(tmp_path / "remote"), "bucket": "b",
            "dataset": {"files": 1, "size": "1MiB"}, "strategies": ["plain"],
            "repeats": "auto", "precision": {"width": width, "max_repeats": 7},
            "sites": {"here": {"upload": True, "download": True, "scratch": "scratch"}},
        }  # fmt: skip

    results = tmp_path / "results/auto"
    records = results / "sites/here/transfers"

    def decisions() -> list[tuple[str, int, str]]:
        table = pd.read_csv(results / "precision.tsv", sep="\t")
        return sorted(zip(table["direction"], table["repeats"], table["decision"], strict=True))

    def site_decisions() -> list[tuple[str, int, str]]:
        """The site's final decisions (precision_final), what the report's table is made of."""
        doc = json.loads((results / "sites/here/precision.json").read_text())
        return sorted((d["direction"], d["repeats"], d["decision"]) for d in doc["decisions"])

    # the first run's tables are read by nothing: its decisions are the site's own file, and
    # the run stops before the report (the second run makes it from every record)
    cfg = write_config(tmp_path, campaign("5000%"))
    run = snakemake(tmp_path, cfg, "--omit-from", "aggregate")
    assert run.returncode == 0, run.stderr[-3000:]
    assert site_decisions() == [("download", 6, MET), ("upload", 6, MET)]
    assert not (results / "transfers.tsv").exists()  # the report's tables are the second run's
    first = {p: p.stat().st_mtime_ns for p in records.rglob("r*.json")}
    assert sorted(p.name for p in first) == sorted([f"r{r}.json" for r in range(1, 7)] * 2)

    # the second run builds the report as soon as it is done (--report-after-run: one
    # Snakemake process, not a second one reading the same DAG again)
    cfg = write_config(tmp_path, campaign("0.001%"))
    report = tmp_path / "report.html"
    run = snakemake(tmp_path, cfg, "--report", str(report), "--report-after-run", figures=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert decisions() == [("download", 7, MAX), ("upload", 7, MAX)]
    assert site_decisions() == decisions()
    assert {p: p.stat().st_mtime_ns for p in first} == first  # nothing measured again
    # the seventh round's upload generated the file again: once the last round is decided,
    # no bulk data is left in scratch, and the run's last lines say so
    assert bulk_left([tmp_path / "scratch"], "auto") == []
    assert "no bulk data of this campaign is left" in run.stderr
    seventh = json.loads((records / "download/main/plain/rclone-1xauto/r7.json").read_text())
    assert seventh["status"] == "ok" and seventh["source"].endswith("/r1/objects")
    transfers = pd.read_csv(results / "transfers.tsv", sep="\t")
    assert sorted(transfers["repeat"]) == sorted([*range(1, 8)] * 2)
    assert (results / "sites/here/verify/main/plain/rclone-1xauto/r7.json").exists()
    headline = (results / "figures/headline.html").read_text()
    assert "2 reached max after 7 repeats" in headline

    again = snakemake(tmp_path, cfg)
    assert again.returncode == 0 and "Nothing to be done" in again.stderr, again.stderr[-2000:]
    _repeats_shown_in_chromium(report, tmp_path)


def _repeats_shown_in_chromium(report, workdir) -> None:
    """The front page's first paragraph counts the stops, in red; the Repeats page shows
    its table (no errors, not blank)."""
    from tests.infra.browser import (
        CHROMIUM,
        WINDOW,
        assert_not_blank,
        browser,
        report_results,
        select_view,
    )

    if CHROMIUM is None:  # the campaign's own checks above still ran
        pytest.skip("chromium not installed: `make sysdeps` installs Debian's chromium")
    results = report_results(report)
    key = next(k for k, r in results.items() if r["name"].endswith("precision.html"))
    with browser(workdir) as b:
        b.open(report.as_uri())
        b.settle()
        first = b.evaluate("document.querySelector('.cb-headline p').innerText")
        colour = b.evaluate(
            "getComputedStyle([...document.querySelectorAll('.cb-headline p b')]"
            ".find(e => e.innerText === 'Repeats')).color"
        )
        assert select_view(b, key)["iframe"]
        shot = b.screenshot(workdir / "repeats.png")
        assert b.errors == [], b.errors
    assert (
        "Repeats: chosen by precision, until the median's interval is within 0.001% of it" in first
    )
    assert "2 reached max after 7 repeats" in first and colour == "rgb(187, 0, 0)"
    assert_not_blank(shot, box=(WINDOW[0] // 2 + 10, 0, WINDOW[0], WINDOW[1]))


def _longest_commands(
    tmp_path, name: str, clients: list[int], concurrency: list[int]
) -> dict[str, int]:
    """The longest shell command of each rule in a dry run of a sweep over ``clients`` and
    ``concurrency``."""
    from tests.infra.workflow import snakemake, write_config

    cfg = write_config(tmp_path / name, {
        "campaign": "sweep", "remote": str(tmp_path / "remote"), "bucket": "b",
        "dataset": {"files": 8, "size": "1MiB"}, "strategies": ["plain"],
        "clients": clients, "concurrency": {"plain": concurrency}, "repeats": "auto",
        "sites": {"a": {"upload": True, "download": True, "scratch": "scratch"}},
    })  # fmt: skip
    run = snakemake(tmp_path / name, cfg, "-n", "-p")
    assert run.returncode == 0, run.stderr[-2000:]
    longest: dict[str, int] = {}
    rule = None
    for line in (run.stdout + run.stderr).splitlines():
        if line.startswith(("rule ", "localrule ", "checkpoint ", "localcheckpoint ")):
            rule = line.split()[1].rstrip(":")
        elif line.startswith("Shell command:") and line != "Shell command: None" and rule:
            longest[rule] = max(longest.get(rule, 0), len(line))
    return longest


@pytest.mark.quick
def test_no_command_line_grows_with_the_sweep(tmp_path):
    """Linux takes at most 128 KiB in one argument, and Snakemake hands the shell each
    command as one: a command that lists every measurement (what the report may hold, the
    records a precision round decides on) fails on a large sweep after hours of measuring.
    Four times the measurements: the aggregate's command and every per-job command stay the
    same length; the precision rounds run in Snakemake's own process, with no command.
    The two dry runs at once, a Snakemake process each."""
    sweeps = {"small": ([1], [1]), "large": ([1, 2], [1, 2])}  # 12 measurements, then 48
    with ThreadPoolExecutor(len(sweeps)) as pool:
        runs = {n: pool.submit(_longest_commands, tmp_path, n, *s) for n, s in sweeps.items()}
        small, large = runs["small"].result(), runs["large"].result()
    assert "precision" not in small and "aggregate" in small
    for rule in ("aggregate", "upload", "download", "verify", "probe", "publish"):
        assert large[rule] <= small[rule] + 16, (rule, small[rule], large[rule])
