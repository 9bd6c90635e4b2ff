"""The tuning mode for real: campaigns whose searches run through Snakemake against a real S3
server (``rclone serve s3``), interrupted, resumed and rerun.

A setting that fails is made by the ``command`` tool: its template (a real rclone copy) exits
non-zero above 2 transfers, and sleeps 4 s / transfers before copying, so the rate doubles
with each step up to where it fails; the search must climb to 2 and avoid 4.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.infra.s3 import serve_s3
from tests.infra.workflow import (
    BIN,
    default_sigint,
    snakemake,
    snakemake_command,
    snakemake_env,
    write_config,
)

pytestmark = pytest.mark.slow
KEY, SECRET = "tunekeyid0042", "tune-Secret-7c1d"
FAILS_ABOVE_TWO = (
    "sh -c 'test $3 -le 2 || exit 7; sleep $((4 / $3)); exec rclone copy --transfers $3 $1 $2'"
    " tune {src} {dst} {threads}"
)


def _config() -> dict:
    return {
        "campaign": "climb",
        "remote": "s3c:",
        "bucket": "tuned",
        "dataset": {"files": 4, "size": "256KiB"},
        "strategies": ["plain"],
        "concurrency": {"plain": [1, 2, 4, 8]},
        "repeats": 3,
        "tools": ["command"],
        "command_template": FAILS_ABOVE_TWO,
        "tune": {"budget": "1GiB", "margin": "10%"},
        "sites": {"lab": {"upload": True, "download": False, "scratch": "scratch"}},
    }


def _records(tmp_path: Path) -> dict[str, int]:
    root = tmp_path / "results/climb/sites/lab/transfers"
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("r*.json")}


def test_a_search_interrupted_resumes_avoids_the_failing_setting_and_reruns_measure_nothing(
    tmp_path,
):
    path = write_config(tmp_path, _config())
    round1 = tmp_path / "results/climb/sites/lab/tune/round-1.json"
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root", key=KEY, secret=SECRET) as s3:
        env = s3.client_env("S3C")
        # 1. Ctrl-C once the first round is decided: the search stops mid-way
        proc = subprocess.Popen(
            snakemake_command(tmp_path, path, profile="local"),
            cwd=tmp_path,
            env=snakemake_env(env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=default_sigint,
        )
        deadline = time.monotonic() + 240
        while not round1.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert round1.exists(), "the first round was never decided"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode != 0, err[-2000:]
        assert not (tmp_path / "results/climb/sites/lab/tune.json").exists()
        first = {k: v for k, v in _records(tmp_path).items() if "command-1x1" in k}
        assert len(first) == 3

        # 2. the rerun resumes where it stopped: round 1 is not measured again
        run = snakemake(tmp_path, path, env=env)
        # the failing setting's repeats are failed rows, but a finding, not the run's failure
        assert run.returncode == 0, run.stderr[-3000:]
        status = (tmp_path / "results/climb/status.txt").read_text()
        assert "except 3 repeat(s) of settings that failed while the store answered" in status
        after = _records(tmp_path)
        assert {k: after[k] for k in first} == first
        state = json.loads((tmp_path / "results/climb/sites/lab/tune.json").read_text())
        (search,) = state["searches"]
        assert search["status"] == "done"
        assert search["best"]["setting"] == "command-1x2", search["log"]
        assert search["lines"]["plain"] == "collapse"
        assert [c["setting"] for c in search["settled"]] == ["command-1x4"]
        assert search["measurements"] == 9 and search["grid_measurements"] == 12
        tuned = pd.read_csv(tmp_path / "results/climb/tuned.tsv", sep="\t")
        assert tuned.loc[0, "setting"] == "command-1x2"
        assert tuned.loc[0, "runner_up_setting"] == "command-1x1"  # the failed one is no rival
        transfers = pd.read_csv(tmp_path / "results/climb/transfers.tsv", sep="\t")
        by_setting = transfers.groupby("setting")["status"].agg(lambda s: sorted(set(s)))
        assert by_setting.to_dict() == {
            "command-1x1": ["ok"],
            "command-1x2": ["ok"],
            "command-1x4": ["failed"],
        }
        report = (tmp_path / "results/climb/figures/headline.html").read_text()
        assert "The command to use" in report and "plain at 1 x 2" in report

        # 3. twice more: nothing is measured, not even the setting that failed
        for _ in range(2):
            before = _records(tmp_path)
            run = snakemake(tmp_path, path, env=env)
            assert _records(tmp_path) == before, run.stderr[-3000:]
            assert "rule upload" not in run.stderr and "localrule upload" not in run.stderr
