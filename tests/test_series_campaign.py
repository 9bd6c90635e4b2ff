"""A series for real: eight short occurrences of one campaign file against a real S3 server
through a link of known capacity, uploads slowed by 30% from occurrence 6 on (downloads
not), and one more occurrence run while the store is down (cloudbench.report.series)."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

from tests.infra.s3 import serve_s3
from tests.infra.shaper import UP, shaping_proxy
from tests.infra.workflow import BIN, snakemake, write_config

pytestmark = pytest.mark.slow
CAP = 2e6  # bytes/s: the store's link, in each direction (one connection moves at it)
DOWN = "20261104"  # the occurrence run while the store is down


def _config() -> dict:
    return {
        "campaign": "weekly",
        "remote": "store:",
        "bucket": "series",
        "dataset": {"files": 1, "size": "2MiB"},  # a second a copy: start-up a small share
        "strategies": ["plain"],
        "concurrency": {"plain": 1},
        "repeats": 3,
        "sites": {"lab": {"upload": True, "download": True, "scratch": "scratch"}},
    }


# Its verdicts rest on rates through a link of known capacity: a baseline rate read at half
# the link's (a starved proxy, the test among the others at the least CPU weight of make
# test) widened a 3-against-9 interval past the 30% slowdown (exp3, 2026-11-26)
@pytest.mark.rates(seconds=190)
def test_eight_occurrences_flag_exactly_the_slowed_route_and_a_store_down_is_no_data(tmp_path):
    path = write_config(tmp_path, _config())
    labels = [f"2026110{k}" for k in range(1, 10)]
    with serve_s3(str(BIN / "rclone"), tmp_path / "root") as s3:
        with shaping_proxy(s3.port, 10 * CAP, CAP) as link:
            env = s3.client_env("STORE") | {
                "RCLONE_CONFIG_STORE_ENDPOINT": f"http://127.0.0.1:{link.port}"
            }
            for label in labels:
                if label == DOWN:  # nothing answers behind the link
                    s3.stop()
                    run = snakemake(tmp_path, path, "--config", f"occurrence={label}", env=env)
                    assert run.returncode != 0
                    s3.start()
                    continue
                if label == "20261106":  # uploads now cross a slower link; downloads do not
                    link.shared[UP].set_rate(0.7 * CAP)
                run = snakemake(tmp_path, path, "--config", f"occurrence={label}", env=env)
                assert run.returncode == 0, run.stderr[-3000:]
    series = subprocess.run(
        # a 15% margin, as a centre sets for routes measured on a busy machine: make test runs
        # three other tests beside this one, and in one run a download (not slowed) read 16%
        # slower than the baseline in one occurrence, a real change of the machine, not of
        # the link; the slowed route's 30% is far beyond either
        [str(BIN / "python"), "-m", "cloudbench", "series", "weekly", "--margin", "0.15"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert series.returncode == 1, series.stderr  # a route is not ok
    out = tmp_path / "results/weekly.series"
    doc = json.loads((out / "status.json").read_text())
    assert {r["direction"]: r["state"] for r in doc["routes"]} == {
        "upload": "regressed",
        "download": "ok",
    }, doc
    table = pd.read_csv(out / "series.tsv", sep="\t", dtype={"occurrence": str})
    slower = table[table["verdict"] == "slower"]
    assert set(slower["direction"]) == {"upload"}
    assert set(slower["occurrence"]) == set(labels[5:])  # from the first slow one on
    down = table[table["occurrence"] == DOWN]
    assert set(down["state"]) == {"no data"} and down["verdict"].isna().all()
    assert "upload: regressed" in series.stderr
