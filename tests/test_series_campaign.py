"""A series for real: short occurrences of one campaign file against a real S3 server through
a link of known capacity (tests/infra/shaper.py): one as the baseline, one unchanged, one while
the store is down, then one whose uploads cross a link slowed to a quarter of itself (downloads
not) (cloudbench.report.series). A baseline of one occurrence is the fewest runs that show every
verdict here (3 repeats against 3, the fewest a verdict takes); pooling several occurrences into
the baseline is the same pure function, held on synthetic series in tests/test_series.py.

Every row is first held to the link's own record of its seconds: the bytes the link carried
in the copy's window are the row's, the row's rate never beats the link's cap then (an upper
bound a busy machine cannot break), and it is at least what the link let through while it was
the bottleneck. The rest of a copy's seconds (rclone's start, its listing) are the machine's,
not the link's: the largest share of them in any copy is the smallest change this run can
attribute to the link, so the series is read with that margin (the product's own 5% when the
machine added less). An unchanged route then cannot read slower by more than the margin, and
the slowed route's 75% stays beyond it until the machine takes half of a copy's seconds.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime

import pandas as pd
import pytest

from tests.infra.s3 import serve_s3
from tests.infra.shaper import BURST, DOWN, PIECE, UP, shaping_proxy
from tests.infra.workflow import BIN, HANG_S, snakemake, write_config

pytestmark = [pytest.mark.full, pytest.mark.slow]
CAP = 1e6  # bytes/s: the store's link, in each direction (one connection moves at it)
# the uploads' link in the slowed occurrence: an eighth, so that the machine may take up to
# 0.646 of a copy's seconds before the test cannot tell (at a quarter, 0.5: s56f read 0.505)
SLOW = 0.125
MIB = 2**20
BASELINE = 1  # occurrences in the baseline: its 3 rates against each later occurrence's 3
UNSLOWED, DOWN_LABEL, SLOWED = "20261102", "20261103", "20261104"
LABELS = ["20261101", UNSLOWED, DOWN_LABEL, SLOWED]
MARGIN = 0.05  # cloudbench.report.compare.MARGIN, compare_margin's default


def _config() -> dict:
    return {
        "campaign": "weekly",
        "remote": "store:",
        "bucket": "series",
        "dataset": {"files": 1, "size": "1MiB"},  # a second a copy through the link
        "strategies": ["plain"],
        "concurrency": {"plain": 1},
        "repeats": 3,
        # the latency probes (before and after each site's transfers) are read by nothing
        # here: one request each, not 16 (tests/test_probe.py holds what a probe records)
        "probe": {"count": 1},
        "sites": {"lab": {"upload": True, "download": True, "scratch": "scratch"}},
    }


def _epoch(utc: str) -> float:
    return datetime.fromisoformat(utc.replace("Z", "+00:00")).timestamp()


def test_only_the_slowed_route_is_flagged_and_only_where_slowed_and_a_store_down_is_no_data(
    tmp_path,
):
    path = write_config(tmp_path, _config())
    windows = []  # (occurrence, direction, row, link's record of the row's seconds)
    with serve_s3(str(BIN / "rclone"), tmp_path / "root") as s3:
        with shaping_proxy(s3.port, 10 * CAP, CAP) as link:
            env = s3.client_env("STORE") | {
                "RCLONE_CONFIG_STORE_ENDPOINT": f"http://127.0.0.1:{link.port}"
            }
            for label in LABELS:
                if label == DOWN_LABEL:  # nothing answers behind the link
                    s3.stop()
                    run = snakemake(tmp_path, path, "--config", f"occurrence={label}", env=env)
                    assert run.returncode != 0
                    s3.start()
                    continue
                if label == SLOWED:  # uploads now cross a slower link; downloads do not
                    link.shared[UP].set_rate(SLOW * CAP)
                run = snakemake(tmp_path, path, "--config", f"occurrence={label}", env=env)
                assert run.returncode == 0, run.stderr[-3000:]
                rows = pd.read_csv(tmp_path / f"results/weekly@{label}/transfers.tsv", sep="\t")
                for row in rows.to_dict("records"):
                    t0 = _epoch(row["started_utc"])
                    d = UP if row["direction"] == "upload" else DOWN
                    windows.append((label, d, row, link.window(d, t0, t0 + row["seconds"])))
    # the premise: every copy moved through the link at what it allowed in the same seconds
    for label, d, row, w in windows:
        cap = SLOW * CAP if d == UP and label == SLOWED else CAP
        print(
            f"{label} {d}: {row['mb_per_s'] * 1e6 / cap:.3f} of the link, busy "
            f"{w.total_busy_share:.2f} of {row['seconds']:.2f} s"
        )
        assert row["status"] == "ok" and row["bytes_moved"] == row["bytes_requested"] == MIB
        assert MIB <= w.bytes <= 1.05 * MIB, (label, d, w)  # the copy's bytes, its heads
        assert row["mb_per_s"] * 1e6 <= cap * (1 + BURST / MIB) * 1.02, (label, d, row)
        assert MIB >= 0.98 * w.total_allowed - PIECE and w.total_allowed > 0, (label, d, w)
    # the machine's share of a copy's seconds: an unchanged route's rate moves by at most
    # this from one occurrence to another; the slowed route's ratio is at most
    # SLOW / (1 - machine), beyond 1 - machine while machine < 1 - sqrt(SLOW)
    machine = max(1 - w.total_busy_share for *_, w in windows)
    margin = max(MARGIN, round(machine + 0.005, 2))
    print(f"the machine's share of a copy's seconds: at most {machine:.3f}; margin {margin}")
    assert machine < 1 - SLOW**0.5, "the machine, not the link, set these copies' rates"
    series = subprocess.run(
        [
            str(BIN / "python"),
            "-m",
            "cloudbench",
            "series",
            "weekly",
            "--baseline",
            str(BASELINE),
            "--margin",
            str(margin),
        ],  # fmt: skip
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=HANG_S,  # a deadline only a hang reaches
    )
    assert series.returncode == 1, series.stderr  # a route is not ok
    out = tmp_path / "results/weekly.series"
    doc = json.loads((out / "status.json").read_text())
    assert {r["direction"]: r["state"] for r in doc["routes"]} == {
        "upload": "regressed",
        "download": "ok",
    }, doc
    table = pd.read_csv(out / "series.tsv", sep="\t", dtype={"occurrence": str})
    print(table[["occurrence", "direction", "median_mb_per_s", "ratio", "verdict", "state"]])
    slower = table[table["verdict"] == "slower"]
    assert set(slower["direction"]) == {"upload"}
    assert set(slower["occurrence"]) == {SLOWED}  # that occurrence, no other
    down = table[table["occurrence"] == DOWN_LABEL]
    assert set(down["state"]) == {"no data"} and down["verdict"].isna().all()
    assert "upload: regressed" in series.stderr
