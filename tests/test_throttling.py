"""A store that throttles: its 503 SlowDown answers are counted per measurement, from the
timed copy's own log, and flagged on the report's front page."""

from __future__ import annotations

import pandas as pd
import pytest


@pytest.mark.full
@pytest.mark.slow
@pytest.mark.browser
def test_slowdown_answers_to_a_copy_are_counted_in_its_row_and_flagged(tmp_path):
    """rclone serve s3 behind a proxy (tests/infra/throttle.py) that answers every second
    write of the timed copy's objects with 503 SlowDown, twice: the upload's row counts 2
    throttled responses and 2 requests sent again, and is ok; the download's row counts 0
    (counted, not empty); the front page says so. The proxy's own tally is the truth.

    The front page is the headline fragment the campaign's aggregate job wrote, which the
    Snakemake report includes as it is (test_report_browser's
    test_report_opens_on_its_answer): read in Chromium from that file, without a second
    Snakemake run to build the report around it."""
    from tests.infra.s3 import serve_s3
    from tests.infra.throttle import throttling_proxy
    from tests.infra.workflow import BIN, snakemake, write_config

    cfg = write_config(tmp_path, {
        "campaign": "slow", "remote": "s3t:", "bucket": "bench",
        "dataset": {"files": 1, "size": "12MiB"}, "strategies": ["plain"], "repeats": 1,
        "rclone": {"flags": ["--s3-upload-cutoff", "5M"], "multi_thread_chunk_size": "5MiB"},
        "sites": {"edi": {"upload": True, "download": True, "scratch": "scratch"}},
    })  # fmt: skip
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        env = s3.client_env("S3T")
        with throttling_proxy(s3.port, every=2, limit=2, within="/objects/") as throttle:
            env["RCLONE_CONFIG_S3T_ENDPOINT"] = f"http://127.0.0.1:{throttle.port}"
            run = snakemake(tmp_path, cfg, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(throttle.refused) == 2, throttle.refused
    transfers = pd.read_csv(tmp_path / "results/slow/transfers.tsv", sep="\t")
    rows = {r.direction: r for r in transfers.itertuples()}
    up, down = rows["upload"], rows["download"]
    assert (up.status, up.throttled, up.request_retries, up.server_errors) == ("ok", 2, 2, 0)
    assert (down.status, down.throttled) == ("ok", 0)
    front = tmp_path / "results/slow/figures/headline.html"  # workflow/report/workflow.rst
    first = _first_paragraph_in_chromium(front, tmp_path)
    assert "Throttled: the store answered 2 requests with 503 SlowDown or 429 in 1 of 2" in first


def _first_paragraph_in_chromium(page, workdir) -> str:
    """The front page's first paragraph as Chromium shows it (no page errors)."""
    from tests.infra.browser import CHROMIUM, browser

    if CHROMIUM is None:  # the counts above were still checked
        pytest.skip("chromium not installed: `make sysdeps` installs Debian's chromium")
    with browser(workdir) as b:
        b.open(page.as_uri())
        b.settle()
        first = b.evaluate("document.querySelector('.cb-headline p').innerText")
        assert b.errors == [], b.errors
    return first
