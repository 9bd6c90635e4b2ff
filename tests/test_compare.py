"""Comparing two campaigns: a known 20% regression in one measurement, and nothing else."""

from __future__ import annotations

import subprocess
import sys

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


def test_measurements_of_one_campaign_only_are_listed_not_dropped():
    extra = ("ral", "s3", "download", "rclone", "plain", "rclone-1x8")
    table = compare(campaign(1), campaign(2, only=[extra]))
    row = table[table["site"] == "ral"].iloc[0]
    assert row["verdict"] == "only in B" and len(table) == len(IDENTITIES) + 1
    few = compare(campaign(1, repeats=2), campaign(2, repeats=2))
    assert set(few["verdict"]) == {"too few repeats"}
    text = lines(table, "A", "B")
    assert text[0].startswith("B against A") and any("only in B" in t for t in text)


@pytest.mark.quick
def test_compare_command_writes_a_table_and_a_page(tmp_path):
    for name, frame in (("a", campaign(1)), ("b", campaign(2, slower=IDENTITIES[3]))):
        (tmp_path / name).mkdir()
        frame.to_csv(tmp_path / name / "transfers.tsv", sep="\t", index=False)
    run = subprocess.run(
        [sys.executable, "-m", "cloudbench", "compare", str(tmp_path / "a"), str(tmp_path / "b"),
         "--out", str(tmp_path / "cmp")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[1].startswith(
        "  bnl s3 download rclone plain rclone-1x8: slower"
    )
    tsv = pd.read_csv(tmp_path / "cmp" / "compare.tsv", sep="\t")
    assert (
        tsv.loc[0, "verdict"] == "slower"
        and "<table" in (tmp_path / "cmp/compare.html").read_text()
    )
    missing = subprocess.run(
        [sys.executable, "-m", "cloudbench", "compare", str(tmp_path / "a"), str(tmp_path / "z")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
