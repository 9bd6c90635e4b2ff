"""A burst, then a lower sustained rate, found in a transfer's per-second series."""

from __future__ import annotations

import json
import subprocess
import time

import numpy as np
import pandas as pd
import pytest

from cloudbench.campaign.identity import MeasurementId
from cloudbench.campaign.paths import transfer_log
from cloudbench.measure.rclonelog import parse_rclone_log
from cloudbench.report.burst import burst_lines, bursts, change_point, find_burst
from tests.infra.browser import needs_chromium

MIB = 2**20
SWITCH = 40 * MIB  # the copy's rate limit lowered once it moved this (5 s at 8 MiB/s)


def series(rates_mb_s: list[float], noise: float = 0.05, seed: int = 3, dt: float = 1.0):
    """Samples (elapsed s, cumulative bytes) of a transfer moving ``rates_mb_s`` in turn, one
    per ``dt`` seconds, each with lognormal noise."""
    rng = np.random.default_rng(seed)
    r = np.asarray(rates_mb_s, float) * rng.lognormal(0, noise, len(rates_mb_s))
    t = dt * np.arange(1, len(r) + 1)
    return t, np.cumsum(r * dt * 1e6)


@pytest.mark.unit
def test_a_fast_start_then_half_rate_gives_its_length_and_both_rates():
    t, b = series([200.0] * 10 + [100.0] * 30)
    found = find_burst(t, b)
    assert found is not None
    assert found.seconds == pytest.approx(10, rel=0.10)
    assert found.rate == pytest.approx(200, rel=0.10)
    assert found.after == pytest.approx(100, rel=0.10)


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(5))
def test_a_steady_transfer_has_no_burst(seed):
    assert find_burst(*series([150.0] * 40, noise=0.08, seed=seed)) is None


@pytest.mark.unit
def test_a_ramp_and_a_slow_start_are_no_burst():
    assert find_burst(*series([20.0, 80.0] + [150.0] * 30)) is None  # ramp-up
    assert find_burst(*series([60.0] * 10 + [150.0] * 30)) is None  # faster after
    assert find_burst(*series([150.0] * 2 + [100.0] * 30)) is None  # 2 s: under MIN_SIDE_S
    assert find_burst(*series([150.0] * 4)) is None  # too short to tell


@pytest.mark.unit
def test_a_stall_after_a_steady_rate_is_no_burst():
    """A user's store went down for the last 7 s of an upload (its bytes all counted at
    6 s): the front page said 'a longer copy settles at' 0 MB/s. A stall is said as one."""
    t, b = series([4.16] * 6 + [0.0] * 7, noise=0.01)
    assert find_burst(t, b) is None
    # a store that still trickles in most seconds has settled lower: that is a burst
    t, b = series([4.16] * 6 + [1.0, 0.0] * 2 + [1.0] * 6, noise=0.01)
    assert find_burst(t, b) is not None


@pytest.mark.unit
def test_a_small_step_is_no_burst():
    assert find_burst(*series([110.0] * 10 + [100.0] * 30, noise=0.02)) is None  # 9% lower


@pytest.mark.unit
def test_the_split_is_where_least_squares_puts_it():
    x = np.r_[np.full(7, 5.0), np.full(13, 2.0)]
    k, gain = change_point(x)
    assert k == 7 and gain == pytest.approx(7 * 13 / 20 * 9)  # n1 n2 / n (mean step)^2


@pytest.mark.unit
def test_every_ok_transfer_gets_its_own_columns_and_a_sentence():
    rows, samples = [], []
    for rep, shape in ((1, [200.0] * 8 + [90.0] * 20), (2, [150.0] * 28), (3, [200.0] * 28)):
        t, b = series(shape, seed=rep)
        status = "ok" if rep < 3 else "failed"
        rows.append({"site": "edi", "remote": "s3", "direction": "upload", "layout": "plain",
                     "repeat": rep, "status": status})  # fmt: skip
        samples += [{"site": "edi", "repeat": rep, "elapsed_s": e, "bytes": x}
                    for e, x in zip(t, b, strict=True)]  # fmt: skip
    transfers, ts = pd.DataFrame(rows), pd.DataFrame(samples)
    out = bursts(transfers, ts, ["site", "repeat"])
    assert out.loc[0, "burst_s"] == pytest.approx(8, abs=1)
    assert out.loc[1:, "burst_s"].isna().all()  # steady; failed
    lines = burst_lines(pd.concat([transfers, out], axis=1))
    assert lines == [lines[0]] and lines[0].startswith("edi upload (s3) plain: 1 of 2 transfers")


# --- a real transfer that is throttled midway ---------------------------------------------------


@pytest.mark.full
@pytest.mark.slow
@pytest.mark.browser
@needs_chromium
def test_a_copy_throttled_midway_is_flagged_on_the_front_page(tmp_path):
    """rclone's own rate limit, lowered through its remote control while the timed copy runs
    (8 MiB/s, then 2 MiB/s once it has moved 40 MiB), against rclone serve s3: the summary
    gives the burst's length and both rates, each as rclone's own stats had them over the same
    seconds (read through its remote control at the switch), and the report's first
    paragraph flags it in Chromium."""
    from tests.infra.browser import browser
    from tests.infra.s3 import free_port, serve_s3
    from tests.infra.workflow import BIN, snakemake, snakemake_command, snakemake_env, write_config

    rc = f"127.0.0.1:{free_port()}"
    cfg = write_config(tmp_path, {
        "campaign": "burst", "remote": "s3t:", "bucket": "bench",
        "dataset": {"files": 1, "size": "56MiB"}, "strategies": ["plain"], "repeats": 1,
        "rclone": {"flags": ["--bwlimit", "8M", "--rc", "--rc-addr", rc, "--rc-no-auth"]},
        "sites": {"edi": {"upload": True, "download": False, "scratch": "scratch"}},
    })  # fmt: skip
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        env = s3.client_env("S3T")

        def rclone_rc(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [str(BIN / "rclone"), "rc", "--url", f"http://{rc}/", *args],
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip

        run = subprocess.Popen(
            snakemake_command(tmp_path, cfg, profile="local", figures=True), cwd=tmp_path,
            env=snakemake_env(env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

        def stats_once(moved: int) -> dict:
            """The timed copy's stats once it has moved ``moved`` bytes (bookkeeping calls
            answer rc too, with none); only a hang reaches the deadline."""
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                got = rclone_rc("core/stats")
                if got.returncode == 0 and json.loads(got.stdout).get("bytes", 0) >= moved:
                    return json.loads(got.stdout)
                time.sleep(0.1)
            raise AssertionError(f"the timed copy never moved {moved} bytes")

        try:
            switch = stats_once(SWITCH)  # the burst's end, read before the limit is lowered
            assert rclone_rc("core/bwlimit", "rate=2M").returncode == 0
            lowered = stats_once(SWITCH)  # the slower rate's start, read once it is in force
            _, err = run.communicate(timeout=300)
        finally:
            run.kill()
        assert run.returncode == 0, err[-3000:]
        report = tmp_path / "results/burst/report.html"
        rep = snakemake(tmp_path, cfg, "--report", str(report), env=env)
        assert rep.returncode == 0, rep.stderr[-3000:]
    summary = pd.read_csv(tmp_path / "results/burst/summary.tsv", sep="\t").iloc[0]
    assert summary["bursts"] == 1, summary
    # rclone's own stats of the same seconds: the burst's rate from the copy's start to the
    # switch (as the summary defines it: its start is in it, which a loaded machine slows,
    # so a rate read between two points inside the burst read 8.39 MB/s beside the
    # summary's 6.98 in s50b), its length, the rate after it from the first stats read with
    # the lower limit in force to the copy's last stats line (read from the switch, it held
    # the bytes moved at 8 MiB/s while the limit was being lowered: 2.27 MB/s beside the
    # summary's 1.98 on a machine with six test workers, s55a)
    m = MeasurementId.of(
        {"site": "edi", "remote": "main", "direction": "upload", "layout": "plain"}
        | {"setting": "rclone-1xauto", "repeat": 1}
    )
    final = parse_rclone_log(
        (tmp_path / transfer_log("results/burst", m)).read_text().splitlines()
    ).final
    assert final is not None and final.bytes == 56 * MIB
    burst = switch["bytes"] / switch["elapsedTime"]
    after = (final.bytes - lowered["bytes"]) / (final.elapsed - lowered["elapsedTime"])
    print(f"burst {burst / 1e6:.2f} MB/s to {switch['elapsedTime']:.1f} s, then {after / 1e6:.2f}")
    # the change point falls between the two reads (to the stats' whole second)
    assert switch["elapsedTime"] - 1.5 <= summary["burst_s"] <= lowered["elapsedTime"] + 1.5, (
        summary,
        switch["elapsedTime"],
        lowered["elapsedTime"],
    )
    assert summary["burst_mb_per_s"] * 1e6 == pytest.approx(burst, rel=0.10), summary
    assert summary["after_burst_mb_per_s"] * 1e6 == pytest.approx(after, rel=0.10), summary
    # and never above the limits (upper bounds: a busy machine only slows a copy)
    assert summary["burst_mb_per_s"] <= 8 * MIB / 1e6 * 1.1, summary
    assert summary["after_burst_mb_per_s"] <= 2 * MIB / 1e6 * 1.1, summary
    with browser(tmp_path) as b:
        b.open(report.as_uri())
        b.settle()
        first = b.evaluate("document.querySelector('.cb-headline p').innerText")
        details = b.evaluate("document.querySelector('.cb-headline p.burst').innerText")
        assert b.errors == [], b.errors
    assert "Burst, then slower in 1 of 1 transfers" in first, first
    assert details.startswith("Burst, then slower: edi upload (main) plain: 1 of 1"), details
