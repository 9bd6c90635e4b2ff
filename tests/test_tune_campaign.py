"""The tuning mode for real: campaigns whose searches run through Snakemake against a real S3
server (``rclone serve s3``), interrupted, resumed and rerun.

A setting that fails is made by the ``command`` tool: its template (a real rclone copy) exits
non-zero above 2 transfers, and sleeps 2 s / transfers before copying, so the rate doubles
with each step up to where it fails; the search must climb to 2 and avoid 4.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from tests.infra.s3 import VERSITYGW, serve_s3, versitygw_binary
from tests.infra.shaper import BURST, PIECE, UP, Shaper, Window, shaping_proxy
from tests.infra.terminal import full_log, measurement_lines
from tests.infra.workflow import (
    BIN,
    HANG_S,
    popen_snakemake,
    snakemake,
    snakemake_env,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.full, pytest.mark.slow]
KEY, SECRET = "tunekeyid0042", "tune-Secret-7c1d"
FAILS_ABOVE_TWO = (
    "sh -c 'test $3 -le 2 || exit 7; sleep $((2 / $3)); exec rclone copy --transfers $3 $1 $2'"
    " tune {src} {dst} {threads}"
)


def _config() -> dict:
    return {
        "campaign": "climb",
        "remote": "s3c:",
        "bucket": "tuned",
        "dataset": {"files": 1, "size": "256KiB"},  # the template's sleep sets the rate
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


def _site_state(tmp_path: Path) -> dict[str, int]:
    """Every file of the site's state (its records, the search's rounds and tune.json, the
    probes, the data steps), by modification time: what a rerun's search replays from."""
    root = tmp_path / "results/climb/sites/lab"
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def test_a_search_interrupted_resumes_avoids_the_failing_setting_and_reruns_measure_nothing(
    tmp_path,
):
    path = write_config(tmp_path, _config())
    round1 = tmp_path / "results/climb/sites/lab/tune/round-1.json"
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root", key=KEY, secret=SECRET) as s3:
        env = s3.client_env("S3C")
        # 1. Ctrl-C once the first round is decided: the search stops mid-way
        proc = popen_snakemake(tmp_path, path, env=env)
        wait_for(round1.exists, "the first round's decision", proc=proc)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=HANG_S)  # a deadline only a hang reaches
        assert proc.returncode != 0, out[-2000:]
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
        assert "The command to use" in report and ">plain command-1x2</td>" in report

        # 3. once more: nothing is measured, not even the setting that failed; and the rerun
        # leaves the site's state as it found it, so any later rerun replays the same search
        # from the same records and measures nothing either (the search is a pure function of
        # them: cloudbench.campaign.search), which two reruns in a row once showed
        before, state_before = _records(tmp_path), _site_state(tmp_path)
        run = snakemake(tmp_path, path, env=env)
        assert _records(tmp_path) == before, run.stderr[-3000:]
        assert _site_state(tmp_path) == state_before, run.stderr[-3000:]
        assert not measurement_lines(run.stderr), run.stderr[-3000:]
        assert "rule upload" not in full_log(tmp_path, run.stderr)  # Snakemake's own account


PER_CONN, TOTAL = 1e6, 4e6  # bytes/s: the link's knee at 4 connections


def _knee_config() -> dict:
    return {
        "campaign": "knee",
        "remote": "linked:",
        "bucket": "tuned",
        "dataset": {"files": 2, "size": "2MiB", "chunk_sizes": ["512KiB"]},
        "strategies": ["plain", "chunked"],
        # the ladder skips 2: plain (2 files) is behind chunked at 4 and dropped there
        "concurrency": {"plain": [1, 4, 8, 16], "chunked": [1, 4, 8, 16]},
        "clients": [1, 2],
        "repeats": 3,
        "tools": ["rclone"],
        "tune": {"budget": "1GiB"},
        "sites": {"nearby": {"upload": True, "download": False, "scratch": "scratch"}},
    }


def _epoch(utc: str) -> float:
    return datetime.fromisoformat(utc.replace("Z", "+00:00")).timestamp()


def _held_to_link(rate: float, moved: int, seconds: float, w: Window, n: int) -> None:
    """A copy of ``moved`` bytes in ``seconds`` at ``rate`` (bytes/s) over ``n`` connections
    against the link's record ``w`` of the same seconds: the link carried its bytes (and the
    requests' heads); it never beat the link's total (the burst aside: an upper bound a busy
    machine cannot break); and it moved at least what the total let through while it was the
    bottleneck (on a quiet machine nearly all of the copy, pinching the rate to the total)."""
    assert moved <= w.bytes <= 1.05 * moved, w
    assert rate <= TOTAL * (1 + n * BURST / (TOTAL * seconds)) * 1.02, (rate / TOTAL, w)
    assert moved >= 0.98 * w.total_allowed - n * PIECE and w.total_allowed > 0, (rate, w)


@pytest.mark.skipif(not versitygw_binary().exists(), reason="versitygw not built: make versitygw")
def test_on_a_link_of_known_capacity_the_search_finds_the_knee_with_half_the_grid(tmp_path):
    """Through a shaping proxy (1 MB/s per connection, 4 MB/s in all) in front of versitygw:
    the best setting is the knee, 4 connections, wherever they fill the link (on a machine too
    starved for that, more), and moves what the link allows (each of its
    rows held to the link's own record of its seconds), and the search spent at most half the
    full grid's measurements (the grid, measured whole, finds the same knee: every setting of
    4 connections or more reads the total cap). The printed command, run as printed, moves
    what the link allows too, and the same lines at 1 transfer, run right after it, move at
    most one connection's cap."""
    path = write_config(tmp_path, _knee_config())
    with (
        serve_s3(str(BIN / "rclone"), tmp_path / "s3root", store=VERSITYGW) as s3,
        shaping_proxy(s3.port, PER_CONN, TOTAL) as link,
    ):
        env = s3.client_env("LINKED") | {
            "RCLONE_CONFIG_LINKED_ENDPOINT": f"http://127.0.0.1:{link.port}"
        }
        run = snakemake(tmp_path, path, env=env)
        assert run.returncode == 0, run.stderr[-3000:]
        state = json.loads((tmp_path / "results/knee/sites/nearby/tune.json").read_text())
        (search,) = state["searches"]
        best = search["best"]
        assert best["layout"] == "chunked-512KiB"  # plain moves at most its 2 files at once
        assert search["lines"]["plain"] == "dropped", search["log"]
        rows = pd.read_csv(tmp_path / "results/knee/transfers.tsv", sep="\t")
        # The knee is where the link puts it (4 connections) wherever 4 connections carried
        # the link: their median within the margin of the fastest setting measured (the link
        # caps every setting alike, so none can read more than the margin above them), and
        # the search then names the fewest connections there, the knee. On a machine too
        # starved for 4 connections to fill the link (seen: 3.01 MB/s at 4, 3.5 at 8), the
        # search rightly climbs past it; never below it, where each connection's own cap
        # holds fewer connections back.
        knee = int(TOTAL / PER_CONN)
        medians = rows.groupby(["layout", "clients", "concurrency"])["mb_per_s"].median()
        connections = medians.index.get_level_values("clients") * medians.index.get_level_values(
            "concurrency"
        )
        at_knee = medians[(medians.index.get_level_values("layout") == best["layout"])
                          & (connections == knee)]  # fmt: skip
        assert len(at_knee) >= 1, search["log"]  # the search measured the knee
        filled = at_knee.max() >= (1 - state["margin"]) * medians.max()
        print(f"4 connections: {at_knee.max():.2f} MB/s, the fastest {medians.max():.2f}")
        if filled:
            assert best["clients"] * best["concurrency"] == knee, search["log"]
        else:
            assert best["clients"] * best["concurrency"] > knee, search["log"]
        n = best["clients"] * best["concurrency"]  # the best's connections
        mine = rows[rows["setting"] == best["setting"]]
        mine = mine[(mine["clients"] == best["clients"]) & (mine["layout"] == best["layout"])]
        assert len(mine) == 3, mine
        for row in mine.to_dict("records"):
            t0 = _epoch(row["started_utc"])
            w = link.window(UP, t0, t0 + row["seconds"])
            share = row["mb_per_s"] * 1e6 / TOTAL
            print(f"best row: {share:.3f} of the link, busy {w.total_busy_share:.2f}")
            _held_to_link(row["mb_per_s"] * 1e6, row["bytes_moved"], row["seconds"], w, n)
        grid = len(["plain", "chunked"]) * 4 * 2 * 3  # layouts x concurrency x clients x repeats
        assert search["grid_measurements"] == grid
        assert search["measurements"] <= grid / 2, search["log"]
        transfers = pd.read_csv(tmp_path / "results/knee/transfers.tsv", sep="\t")
        assert len(transfers) == search["measurements"] and (transfers["status"] == "ok").all()
        run = snakemake(tmp_path, path, "-n", env=env)
        assert "Nothing to be done" in run.stdout + run.stderr
        # the printed command, run as printed (the user's directory and prefix put in)
        tuned = pd.read_csv(tmp_path / "results/knee/tuned.tsv", sep="\t")
        lines = tuned.loc[0, "command"].split("\\n")  # tuned.tsv: one line, literal \\n
        transfers_flag = f"--transfers {best['concurrency']}"
        assert transfers_flag in lines[-1] and lines[-1].startswith("rclone copy")
        # as printed it moves what the link allows, as the tuned setting did
        rate, seconds, w = _run_printed(tmp_path, lines, env, 0, link)
        print(f"printed: {rate / TOTAL:.3f} of the link, busy {w.total_busy_share:.2f}")
        _held_to_link(rate, 4 * 2**20, seconds, w, n)
        # the same lines at 1 transfer, right after, a different setting: under half the
        # link (an upper bound: a busy machine only slows it; a transfer is one connection,
        # rclone's listing may be a second), and the total was never what held it back
        one = [line.replace(transfers_flag, "--transfers 1") for line in lines]
        rate1, seconds1, w1 = _run_printed(tmp_path, one, env, 1, link)
        print(f"at 1 transfer: {rate1 / TOTAL:.3f} of the link")
        assert rate1 <= 0.5 * TOTAL, rate1
        assert w1.total_busy_s < w.total_busy_s, (w1, w)  # the total held the printed one


def _run_printed(
    tmp_path: Path, lines: list[str], env: dict, k: int, link: Shaper
) -> tuple[float, float, Window]:
    """The printed lines run by bash on a copy of the campaign's files: the copy's rate
    (bytes/s), its seconds and the link's record of them."""
    mine = tmp_path / f"mine-{k}"
    mine.mkdir()
    for i in range(2):
        (mine / f"file{i}").write_bytes(os.urandom(2 * 2**20))
    script = "\n".join(lines).replace("<your-directory>", str(mine))
    script = script.replace("<your-prefix>", f"mine-{k}")
    *setup, copy = script.splitlines()
    run_env = snakemake_env(env)
    subprocess.run(["bash", "-ec", "\n".join(setup)], cwd=tmp_path, env=run_env, check=True)
    t0 = time.time()
    subprocess.run(["bash", "-ec", copy], cwd=tmp_path, env=run_env, check=True)
    t1 = time.time()
    return 4 * 2**20 / (t1 - t0), t1 - t0, link.window(UP, t0, t1)
