"""The demo campaign end to end, as `make demo` runs it (its local-directory remote). The
same campaign against a real S3 endpoint, with the same checks (tests/infra/e2e.py), is
tests/test_faults.py::test_secret_never_written_anywhere."""

from __future__ import annotations

import json

import pytest

from tests.infra.e2e import check_campaign
from tests.infra.workflow import snakemake

pytestmark = [pytest.mark.full, pytest.mark.slow]


def test_demo_campaign_end_to_end(demo_report):
    workdir, config, report = demo_report
    df = check_campaign(workdir, config)
    assert set(df["site"]) == {"tursa", "tesseract"}
    # measured in rounds: every layout's repeat r (3 layouts x 3 repeats) before any r+1,
    # in the order cloudbench.campaign.order gives (not layout after layout)
    ran = df.sort_values("started_utc")
    assert list(ran["repeat"]) == sorted(ran["repeat"]), ran[["layout", "repeat"]]
    first_round = ran[ran["repeat"] == 1]
    assert first_round.groupby("direction")["layout"].nunique().to_dict() == {
        "upload": 3, "download": 3,
    }  # fmt: skip
    copy = workdir / "scratch/demo-remote/cloudbench/demo/data/chunked-4MiB/rclone-1xauto/r1"
    man = json.loads((copy / "manifest.json").read_text())
    assert len(man["files"][0]["chunks"]) == 6  # 24 MiB in 4 MiB chunks
    assert (copy / "objects/demo-001.bin/demo-001.bin.0005").stat().st_size == 4 * 2**20
    assert report.stat().st_size > 50_000
    assert (workdir / "results/demo/status.txt").read_text() == "all measurements ok\n"
    # a second run measures nothing again
    again = snakemake(workdir, workdir / "campaign.yaml", "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
    # the demo's own cap is in force here (and only here: tests/test_real_campaign.py)
    log = workdir / "results/demo/sites/tursa/client-logs/upload/main/plain/rclone-1xauto/r1.log"
    assert "bandwidth limiter" in log.read_text().lower()
