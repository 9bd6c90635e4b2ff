"""A series of occurrences (cloudbench.report.series) on synthetic results with a known story:
one route slowed by 30% from occurrence 6, one store down in the last occurrence."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest

from cloudbench.report import routes
from cloudbench.report.series import latest, main, occurrences, series_table

SLOWED = ("a", "r2", "upload")


def _write(root: Path, label: str, rows: list[dict]) -> None:
    d = root / f"camp@{label}"
    d.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(d / "transfers.tsv", sep="\t", index=False)


def _occurrence(k: int, rng: random.Random, down: str | None = None) -> list[dict]:
    rows = []
    for site in ("a", "b"):
        for remote in ("r1", "r2"):
            for layout, base in (("plain", 60.0), ("chunked-64MiB", 100.0)):
                for rep in (1, 2, 3):
                    rate = base * rng.uniform(0.97, 1.03)
                    if (site, remote, "upload") == SLOWED and k >= 6:
                        rate *= 0.7
                    failed = remote == down
                    rows.append(
                        {
                            "site": site,
                            "remote": remote,
                            "direction": "upload",
                            "tool": "rclone",
                            "strategy": layout.split("-")[0],
                            "layout": layout,
                            "setting": "rclone-1x8",
                            "repeat": rep,
                            "status": "failed" if failed else "ok",
                            "mb_per_s": None if failed else rate,
                            "outage": "during" if failed else "",
                        }  # fmt: skip
                    )
    return rows


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Nine occurrences' results, written once: the tests only read them (the command
    writes its own camp.series beside them)."""
    root = tmp_path_factory.mktemp("series")
    rng = random.Random(7)
    for k in range(1, 9):
        _write(root, f"2026110{k}T00", _occurrence(k, rng))
    _write(root, "20261109T00", _occurrence(9, rng, down="r1"))
    return root


@pytest.fixture(scope="module")
def table(results):
    """The series' table, computed once for the tests that read it."""
    return series_table(occurrences(results, "camp"))


@pytest.mark.unit
def test_exactly_the_slowed_route_is_flagged_from_its_first_slow_occurrence(table):
    slower = table[table["verdict"] == "slower"]
    assert set(zip(slower["site"], slower["remote"], slower["direction"], strict=True)) == {SLOWED}
    assert sorted(slower["occurrence"]) == [f"2026110{k}T00" for k in range(6, 10)]
    # the followed setting is each route's best in the baseline
    assert set(table["layout"].dropna()) == {"chunked-64MiB"}


@pytest.mark.unit
def test_a_store_down_is_no_data_for_its_column_not_a_regression(table):
    last = latest(table).set_index(["site", "remote"])
    assert last.loc[("a", "r2"), "state"] == routes.REGRESSED
    assert last.loc[("b", "r2"), "state"] == routes.OK
    for site in ("a", "b"):
        assert last.loc[(site, "r1"), "state"] == routes.NO_DATA
        assert last.loc[(site, "r1"), "no_data_for"] == 1


@pytest.mark.unit
def test_the_series_command_writes_its_status_and_exits_1_when_a_route_is_not_ok(results, capsys):
    assert main(["camp", "--results", str(results)]) == 1
    out = results / "camp.series"
    doc = json.loads((out / "status.json").read_text())
    states = {(r["site"], r["remote"]): r["state"] for r in doc["routes"]}
    assert states == {
        ("a", "r1"): "no data", ("a", "r2"): "regressed", ("b", "r1"): "no data",
        ("b", "r2"): "ok",
    }  # fmt: skip
    prom = (out / "status.prom").read_text()
    assert 'site="a",remote="r2",direction="upload",state="regressed"} 1' in prom
    page = (out / "series.html").read_text()
    assert "a r2 upload</b>: regressed" in page and (out / "series.png").stat().st_size > 0
    assert "a r2 upload: regressed" in capsys.readouterr().err
    assert main(["nothing", "--results", str(results)]) == 2


@pytest.mark.unit
@pytest.mark.parametrize("occurrence", [None, "2026-w48"])
def test_an_occurrences_report_opens_with_its_own_front_page(demo_config, occurrence):
    """The report's first page embeds results/<campaign>/figures/front_page.html by the name
    the campaign's results are kept under: <series>@<occurrence> for an occurrence (every
    occurrence's report opened with the series' first run's front page: user check)."""
    import re
    from types import SimpleNamespace

    import jinja2

    from cloudbench.campaign.model import load_campaign
    from tests.conftest import ROOT

    config = dict(demo_config, **({"occurrence": occurrence} if occurrence else {}))
    text = (ROOT / "workflow/report/workflow.rst").read_text()
    page = jinja2.Template(text).render(snakemake=SimpleNamespace(config=config))
    (embedded,) = re.findall(r":file: (\S+)", page)
    assert embedded == f"results/{load_campaign(config).name}/figures/front_page.html"
    assert ("@" in embedded) == bool(occurrence)


@pytest.mark.unit
def test_a_series_all_in_its_baseline_says_so_not_every_route_ok(tmp_path, capsys):
    """3 occurrences at the default baseline of 3: the page said "Every route ok." with every
    ratio and verdict empty (user check). It says what it knows: the baseline only."""
    import matplotlib.image

    rng = random.Random(3)
    for k in (1, 2, 3):
        _write(tmp_path, f"2026110{k}T00", _occurrence(k, rng))
    assert main(["camp", "--results", str(tmp_path)]) == 0
    out = tmp_path / "camp.series"
    said = capsys.readouterr().out
    assert "baseline only (3 of 3 occurrences in the baseline): nothing compared yet" in said
    page = (out / "series.html").read_text()
    assert "baseline only (3 of 3 occurrences in the baseline)" in page
    assert "Every route ok" not in page
    assert "<style>" in page and "font-family" in page  # the report's own page style
    assert json.loads((out / "status.json").read_text())["baseline_only"] is True
    assert matplotlib.image.imread(out / "series.png").shape[0] > 0
    # a fourth occurrence is compared: the page then says so, and the status knows
    _write(tmp_path, "20261104T00", _occurrence(4, rng))
    assert main(["camp", "--results", str(tmp_path)]) == 0
    assert "nothing compared" not in capsys.readouterr().out
    assert "Every route ok." in (out / "series.html").read_text()
    assert json.loads((out / "status.json").read_text())["baseline_only"] is False


@pytest.mark.unit
def test_the_series_figure_starts_its_rate_axes_at_zero(table, tmp_path, monkeypatch):
    """98.6 -> 120 MB/s on an axis from 95 looked like a fivefold jump."""
    import matplotlib.pyplot as plt

    from cloudbench.report import series

    seen = []
    monkeypatch.setattr(plt, "close", lambda fig: seen.append(fig))
    series.series_png(table, tmp_path / "s.png")
    (fig,) = seen
    lows = [ax.get_ylim()[0] for ax in fig.axes if ax.get_visible()]
    assert lows and all(low == 0 for low in lows)
