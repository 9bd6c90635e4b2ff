"""The demo campaign end to end, as `make demo` runs it (its local-directory remote). The
same campaign against a real S3 endpoint, with the same checks (tests/infra/e2e.py), is
tests/test_faults.py::test_secret_never_written_anywhere."""

from __future__ import annotations

import json
import re

import pytest

from cloudbench.campaign.model import load_campaign
from tests.infra.e2e import check_campaign
from tests.infra.terminal import measurement_lines
from tests.infra.workflow import snakemake

pytestmark = [pytest.mark.full, pytest.mark.slow]


def test_demo_campaign_end_to_end(demo_report):
    workdir, config, report = demo_report
    df = check_campaign(workdir, config)
    assert set(df["site"]) == {"tursa", "tesseract"}
    # the demo searches (tuning mode): its first round is every layout at its ladder's first
    # step, measured in rounds: every layout's repeat r (2 layouts x 3 repeats) before any
    # r+1, in the order cloudbench.campaign.order gives (not layout after layout)
    first = {(m.layout.label, m.setting.label) for m in load_campaign(config).measurements()}
    assert first == {("plain", "rclone-1x4"), ("chunked-4MiB", "rclone-1x2")}
    ran = df.sort_values("started_utc")
    ran = ran[[(lay, s) in first for lay, s in zip(ran["layout"], ran["setting"], strict=True)]]
    assert list(ran["repeat"]) == sorted(ran["repeat"]), ran[["layout", "repeat"]]
    assert ran.groupby("direction")["layout"].nunique().to_dict() == {
        "upload": 2, "download": 2,
    }  # fmt: skip
    # downloads read the copies the upload site made in its first round
    copy = workdir / "scratch/demo-remote/cloudbench/demo/data/chunked-4MiB/rclone-1x2/r1"
    man = json.loads((copy / "manifest.json").read_text())
    assert len(man["files"][0]["chunks"]) == 8  # 32 MiB in 4 MiB chunks
    assert (copy / "objects/demo-001.bin/demo-001.bin.0007").stat().st_size == 4 * 2**20
    assert report.stat().st_size > 50_000
    assert (workdir / "results/demo/status.txt").read_text() == "all measurements ok\n"
    # the terminal shows the campaign (cloudbench.site.terminal): a header, one line per
    # measurement with its record's rate (a download's with its verification), progress
    # lines with the time left, the summary; about N + 20 lines for N measurements
    text = (workdir / "terminal.txt").read_text()
    lines = text.splitlines()
    assert len(lines) <= len(df) + 20, text
    ups = len(ran[ran["direction"] == "upload"])
    assert [ln for ln in lines if ln.startswith("cloudbench: campaign ")] == [
        f"cloudbench: campaign demo at tesseract, tursa: {len(ran)} measurements to make "
        f"({ups} uploads, {len(ran) - ups} downloads), 0 recorded already"
    ], text  # the first round's: a search's later rounds are not known yet
    measured = measurement_lines(text)
    assert len(measured) == len(df), text
    keys = {(m["site"], m["direction"], m["layout"], m["setting"], m["repeat"]) for m in measured}
    assert len(keys) == len(df)
    for m in measured:  # each line's rate is its own record's, to the tenth it is printed to
        record = json.loads(
            (workdir / "results/demo/sites" / m["site"] / "transfers" / m["direction"]
             / m["remote"] / m["layout"] / m["setting"] / f"r{m['repeat']}.json").read_text()
        )  # fmt: skip
        assert abs(m["rate"] - record["mb_per_s"]) <= 0.05 + 1e-9, (m["line"], record["mb_per_s"])
        assert m["said"].endswith("ok, verified" if m["direction"] == "download" else "ok")
    # progress counts what is known so far: the later rounds add to it, the last says all
    progress = [ln for ln in lines if re.match(r"cloudbench: \d+ of \d+ measurements, ", ln)]
    assert progress and all(ln.endswith(" left") for ln in progress), text
    assert f" of {len(df)} measurements, " in progress[-1], text
    assert lines[-1].startswith(f"cloudbench: {len(df)} measurements made in this run (all ok)")
    assert "tables in results/demo" in lines[-1] and "--report results/demo/report.html" in text
    # a second run measures nothing again
    again = snakemake(workdir, workdir / "campaign.yaml", "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
    # the demo's own cap is in force here (and only here: tests/test_real_campaign.py)
    log = workdir / "results/demo/sites/tursa/client-logs/upload/main/plain/rclone-1x4/r1.log"
    assert "bandwidth limiter" in log.read_text().lower()
