"""Comparing two campaigns: a known 20% regression in one measurement, and nothing else."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cloudbench.report.compare import compare, lines

KEYS = ["site", "remote", "direction", "tool", "layout", "setting"]
IDENTITIES = [
    ("edi", "s3", "upload", "rclone", "plain", "rclone-1x8"),
    ("edi", "s3", "upload", "rclone", "chunked-64MiB", "rclone-1x8"),
    ("edi", "s3", "download", "s5cmd", "plain", "s5cmd-1x8"),
    ("bnl", "s3", "download", "rclone", "plain", "rclone-1x8"),
]


def campaign(seed: int, slower: tuple | None = None, repeats: int = 5, only=()) -> pd.DataFrame:
    """transfers.tsv rows: each identity at its own rate, 2% lognormal noise per repeat; the
    ``slower`` identity at 80% of its rate."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, ident in enumerate([*IDENTITIES, *only]):
        base = 100.0 * (k + 1) * (0.8 if ident == slower else 1.0)
        for rep in range(1, repeats + 1):
            rows.append(
                dict(zip(KEYS, ident, strict=True))
                | {"repeat": rep, "status": "ok", "mb_per_s": base * rng.lognormal(0, 0.02)}
            )
    return pd.DataFrame(rows)


@pytest.mark.unit
def test_a_known_regression_is_the_only_verdict_and_comes_first():
    before = campaign(1)
    after = campaign(2, slower=IDENTITIES[1])
    table = compare(before, after)
    assert list(table["verdict"]) == ["slower", *["no clear change"] * 3]
    first = table.iloc[0]
    assert (first["layout"], first["direction"]) == ("chunked-64MiB", "upload")
    assert first["ratio"] == pytest.approx(0.8, rel=0.05)
    assert first["high"] < 1 and first["level"] >= 0.95  # 5 against 5: a real 95%+
    assert all(r.low <= 1 <= r.high for r in table.iloc[1:].itertuples())


@pytest.mark.unit
def test_measurements_of_one_campaign_only_are_listed_not_dropped():
    extra = ("ral", "s3", "download", "rclone", "plain", "rclone-1x8")
    table = compare(campaign(1), campaign(2, only=[extra]))
    row = table[table["site"] == "ral"].iloc[0]
    assert row["verdict"] == "only in B" and len(table) == len(IDENTITIES) + 1
    few = compare(campaign(1, repeats=2), campaign(2, repeats=2))
    assert set(few["verdict"]) == {"too few repeats"}
    text = lines(table, "A", "B")
    assert text[0].startswith("B against A") and any("only in B" in t for t in text)


@pytest.mark.unit
def test_compare_command_writes_a_table_and_a_page(tmp_path, capsys):
    """``cloudbench compare``, called as ``python -m cloudbench`` calls it (in this process:
    the two interpreters it started took 8 s of the quick tier; other tests start
    ``python -m cloudbench`` itself)."""
    from cloudbench.cli import main

    for name, frame in (("a", campaign(1)), ("b", campaign(2, slower=IDENTITIES[3]))):
        (tmp_path / name).mkdir()
        frame.to_csv(tmp_path / name / "transfers.tsv", sep="\t", index=False)
    code = main(
        ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "cmp")]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.splitlines()[1].startswith("  bnl s3 download rclone plain rclone-1x8: slower")
    tsv = pd.read_csv(tmp_path / "cmp" / "compare.tsv", sep="\t")
    assert (
        tsv.loc[0, "verdict"] == "slower"
        and "<table" in (tmp_path / "cmp/compare.html").read_text()
    )
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "z")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.unit
def test_compare_with_in_a_campaign_file_is_checked_before_any_work(tmp_path):
    from cloudbench.campaign.model import ConfigError, _compare_with

    with pytest.raises(ConfigError, match=r"^compare_with: results/old has no transfers.tsv"):
        _compare_with("results/old", tmp_path)
    (tmp_path / "results/old").mkdir(parents=True)
    campaign(1).to_csv(tmp_path / "results/old/transfers.tsv", sep="\t", index=False)
    assert _compare_with("results/old", tmp_path) == tmp_path / "results/old/transfers.tsv"
    assert _compare_with(None, tmp_path) is None


@pytest.mark.unit
def test_the_report_section_and_the_front_page_name_the_regression(tmp_path):
    from cloudbench.report.build import _comparison
    from cloudbench.report.headline import _against

    campaign(1).to_csv(tmp_path / "old.tsv", sep="\t", index=False)
    out = {"compare_tsv": tmp_path / "compare.tsv", "compare_html": tmp_path / "compare.html"}
    info = {"campaign": "new", "compare_with": {"transfers": str(tmp_path / "old.tsv"),
                                                "name": "old"}}  # fmt: skip
    table = _comparison(campaign(2, slower=IDENTITIES[2]), info, out)
    tsv = pd.read_csv(out["compare_tsv"], sep="\t")
    assert list(tsv["verdict"]) == ["slower", *["no clear change"] * 3]
    assert tsv.loc[0, "tool"] == "s5cmd"
    page = out["compare_html"].read_text()
    assert "new against old" in page and "1 slower, 3 no clear change" in page
    assert "Against old</b>: 1 slower, 3 no clear change" in _against(table)
    assert _comparison(campaign(2), {"campaign": "new"}, out) is None  # no compare_with
    assert "No campaign to compare with" in out["compare_html"].read_text()
    assert pd.read_csv(out["compare_tsv"], sep="\t").empty


@pytest.mark.unit
def test_compare_margin_is_a_campaign_key_checked_in_one_line(tmp_path):
    from cloudbench.campaign.model import ConfigError, _share

    assert _share("compare_margin", "5%", "of the median rate", "5%") == pytest.approx(0.05)
    assert _share("compare_margin", 0, "of the median rate", "5%", zero=True) == 0
    with pytest.raises(ConfigError, match=r"^compare_margin: 5 is a share .* write 5%$"):
        _share("compare_margin", 5, "of the median rate", "5%", zero=True)
    with pytest.raises(ConfigError, match=r"^compare_margin: 'x' must be a share"):
        _share("compare_margin", "x", "of the median rate", "5%", zero=True)


@pytest.mark.unit
def test_a_wider_margin_asks_for_a_larger_change():
    before, after = campaign(1), campaign(2, slower=IDENTITIES[1])  # 20% slower
    assert "slower" in set(compare(before, after, margin=0.05)["verdict"])
    assert "slower" not in set(compare(before, after, margin=0.25)["verdict"])


@pytest.mark.unit
def test_no_verdict_at_all_is_said_so():
    from cloudbench.report.compare import meaning

    few = compare(campaign(1, repeats=2), campaign(2, repeats=2))
    assert meaning(few).startswith("no verdicts: no measurement has 3 ok repeats")


@pytest.mark.unit
def test_few_measurements_use_their_own_noise_and_a_rate_of_zero_is_set_aside():
    """Below 3 measurements nothing is shared (each is an ordinary t-test), and the page's
    method sentence says so; an ok repeat at 0 MB/s has no log rate: it is set aside and
    counted, not dropped unsaid."""
    from cloudbench.report.compare import meaning

    one = IDENTITIES[:1]
    before = campaign(1)[lambda t: t["layout"].eq("plain") & t["site"].eq("edi")]
    after = campaign(2, slower=one[0])[lambda t: t["layout"].eq("plain") & t["site"].eq("edi")]
    after.loc[after.index[0], "mb_per_s"] = 0.0
    table = compare(before, after)
    assert "uses each measurement's own noise" in meaning(table)
    row = table[table["setting"] == "rclone-1x8"].iloc[0]
    assert row["set_aside"] == 1 and row["n_b"] == 5 and row["verdict"] == "slower"
    assert "moderated t" in meaning(compare(campaign(1), campaign(2)))
