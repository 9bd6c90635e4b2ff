"""Every tool's rows say the connections the link carried (issue #49: s5cmd's settings said
fewer than it opens). Through a link that caps each connection (tests/infra/shaper.py), a
campaign measures rclone and s5cmd each asked for one object at a time; the link's own record
of each row's seconds counts the connections held at their cap, and the row's ``connections``
column must be that count: rclone-1x1 carries 1, s5cmd (whose --numworkers never goes below 2)
is named s5cmd-1x2 and carries 2. Both counts come from the same seconds, so a slow machine
changes neither."""

from __future__ import annotations

import json

import pytest

from tests.infra.s3 import serve_s3
from tests.infra.shaper import UP, shaping_proxy
from tests.infra.workflow import BIN, snakemake, write_config

pytestmark = [pytest.mark.full, pytest.mark.slow]
# bytes/s: only each connection's own cap binds. A quarter of a MB/s, so that a connection at
# its cap carries a copy for four times the seconds a client's start and the listing after an
# upload take on a busy machine: at 1 MB/s s5cmd's two connections moved the data in 1.05 s
# of a 2.54-s row (s57b, the machine shared), at their cap for under half the row's seconds
PER_CONNECTION, TOTAL = 0.25e6, 16e6
OBJECT = 512 * 2**10  # each file, under every tool's multipart threshold: one PUT


def _config() -> dict:
    return {
        "campaign": "conns",
        "remote": "capped:",
        "bucket": "conns",
        "dataset": {"files": 4, "size": f"{OBJECT // 2**10}KiB"},  # 2 MiB: 8 s at one cap
        "strategies": ["plain"],
        "concurrency": {"plain": 1},
        "tools": ["rclone", "s5cmd"],
        "repeats": 1,
        "probe": {"count": 1},  # the latency probes are read by nothing here: one request each
        "sites": {"lab": {"upload": True, "download": False, "scratch": "scratch"}},
    }


def test_each_tools_rows_state_the_connections_the_link_carried(tmp_path):
    path = write_config(tmp_path, _config())
    with (
        serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3,
        shaping_proxy(s3.port, PER_CONNECTION, TOTAL) as link,
    ):
        env = s3.client_env("CAPPED") | {
            "RCLONE_CONFIG_CAPPED_ENDPOINT": f"http://127.0.0.1:{link.port}"
        }
        # the rows as each upload job wrote them, the run stopped before the report's tables
        # (the aggregate copies the column as it is: tests/test_tools_campaign.py,
        # tests/test_real_campaign.py and tests/test_tune_s5cmd.py read it there)
        run = snakemake(tmp_path, path, "--omit-from", "aggregate", env=env)
        assert run.returncode == 0, run.stderr[-3000:]
        up = tmp_path / "results/conns/sites/lab/transfers/upload"
        rows = [json.loads(p.read_text()) for p in sorted(up.glob("*/*/*/r1.json"))]
        assert sorted(r["setting"] for r in rows) == ["rclone-1x1", "s5cmd-1x2"], rows
        for row in rows:
            w = link.row_window(UP, row)
            carried = w.held_at_cap()  # each at its own cap for half the copy or more
            print(f"{row['setting']}: {row['connections']} said, {carried} carried; {w}")
            assert row["connections"] == carried, (row["setting"], w)
            # more on the link than the row's bytes only by what it says was sent again (s5cmd's
            # SDK re-sent a whole object after serve s3's odd 500, s60h: each object here is
            # one PUT)
            resent = (row.get("request_retries") or 0) * OBJECT
            assert row["bytes_moved"] <= w.bytes <= 1.05 * row["bytes_moved"] + resent, (
                w, row.get("request_retries"),
            )  # fmt: skip
