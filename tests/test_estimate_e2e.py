"""How long your data takes, checked for real (issue #50, Done when): on the demo's shaped
link (rclone's --bwlimit-file and --bwlimit, the campaign's own flags), the estimate for a
dataset 20 times the campaign's, moved with the report's printed command to use, holds the
time that copy took inside its stated prediction interval."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from cloudbench.measure import rclone as rc
from cloudbench.measure.suggest import LOCAL_DIR, YOUR_PREFIX
from cloudbench.report.tuned import LINE_BREAK
from cloudbench.sizes import parse_size

pytestmark = [pytest.mark.full, pytest.mark.slow]

TIMES = 20  # the dataset against the campaign's
ROUTE = ("tursa", "upload", "main")  # the demo's upload: its printed command splits, then copies


def _copy_line(lines: list[str]) -> int:
    """The index of the copy itself: the last line that is not a comment or a shell step
    (the chunks split before it, a directory made)."""
    steps = ("#", "printf ", "mkdir ", "for ")
    return max(i for i, line in enumerate(lines) if not line.startswith(steps))


def test_a_dataset_20_times_the_campaigns_takes_a_time_inside_the_stated_interval(
    demo_report, tmp_path
):
    workdir, config, _ = demo_report
    results = workdir / "results" / config["campaign"]
    ds = config["dataset"]
    files, file_bytes = TIMES * int(ds["files"]), parse_size(ds["size"])
    site, direction, remote = ROUTE
    asked = subprocess.run(
        [sys.executable, "-m", "cloudbench", "estimate", str(results), "--json",
         "--size", str(files * file_bytes), "--files", str(files),
         "--route", f"{site}/{direction}/{remote}"],
        cwd=workdir, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    estimate = json.loads(asked.stdout)
    tuned = pd.read_csv(results / "tuned.tsv", sep="\t")
    mine = tuned[(tuned["site"] == site) & (tuned["direction"] == direction)].iloc[0]
    # the estimate is for the setting whose command the report prints
    assert (estimate["layout"], estimate["setting"]) == (mine["layout"], mine["setting"])
    assert f"{TIMES}x the largest copy measured" in " ".join(estimate["notes"])

    local = tmp_path / "my data"
    local.mkdir()
    for i in range(files):
        (local / f"f{i:03d}.bin").write_bytes(os.urandom(file_bytes))
    prefix = f"estimate-{os.getpid()}"
    lines = [
        line.replace(LOCAL_DIR, str(local)).replace(YOUR_PREFIX, prefix)
        for line in str(mine["command"]).split(LINE_BREAK)
    ]
    env = dict(os.environ, PATH=f"{Path(rc.find_rclone()).parent}{os.pathsep}{os.environ['PATH']}")
    at = _copy_line(lines)
    before = subprocess.run(
        ["bash", "-e", "-c", "\n".join(lines[:at])], cwd=workdir, env=env, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    assert before.returncode == 0, before.stderr
    start = time.monotonic()
    copy = subprocess.run(
        ["bash", "-e", "-c", lines[at]], cwd=workdir, env=env, capture_output=True, text=True,
        timeout=3600,
    )  # fmt: skip
    took = time.monotonic() - start
    assert copy.returncode == 0, copy.stderr
    stored = workdir / config["remote"] / config["bucket"] / prefix
    assert sum(p.stat().st_size for p in stored.rglob("*") if p.is_file()) == files * file_bytes
    figures = (
        f"{estimate['seconds']:.2f} s [{estimate['low_s']:.2f}, {estimate['high_s']:.2f}] "
        f"({estimate['method']}); the copy took {took:.2f} s"
    )
    print(figures)
    assert estimate["low_s"] <= took <= estimate["high_s"], figures
