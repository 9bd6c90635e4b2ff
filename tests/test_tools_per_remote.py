"""Tools per remote for real: one campaign file measures an S3 store with rclone and s5cmd and
a WebDAV store beside it with rclone alone (``remotes.<name>.tools``), to all ok, where s5cmd
on every remote was refused for the whole campaign (issue #49)."""

from __future__ import annotations

import os
import socket
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from tests.infra.s3 import free_port, serve_s3
from tests.infra.workflow import BIN, snakemake, wait_for, write_config

pytestmark = [pytest.mark.full, pytest.mark.slow]


@contextmanager
def serve_webdav(root: Path):
    """``rclone serve webdav`` over ``root`` on 127.0.0.1 for the block."""
    port = free_port()
    root.mkdir(parents=True)
    proc = subprocess.Popen(
        [str(BIN / "rclone"), "serve", "webdav", "--addr", f"127.0.0.1:{port}", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False

    try:
        wait_for(listening, "rclone serve webdav listening", proc=proc)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_an_s3_only_tool_measures_the_s3_remote_beside_a_webdav_one_in_one_campaign(tmp_path):
    config = {
        "campaign": "mixed",
        "bucket": "mixed",
        "remotes": {
            "objects": {"url": "objs:", "tools": ["rclone", "s5cmd"]},
            "files": {"url": "dav:"},  # the campaign's tools: rclone
        },
        "tools": ["rclone"],
        "dataset": {"files": 2, "size": "256KiB"},
        "strategies": ["plain"],
        "repeats": 1,
        "sites": {"lab": {"upload": True, "download": True, "scratch": "scratch"}},
    }
    path = write_config(tmp_path, config)
    with (
        serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3,
        serve_webdav(tmp_path / "davroot") as dav,
    ):
        env = s3.client_env("OBJS") | {
            "RCLONE_CONFIG_DAV_TYPE": "webdav",
            "RCLONE_CONFIG_DAV_URL": f"http://127.0.0.1:{dav}",
            "RCLONE_CONFIG_DAV_VENDOR": "other",
        }
        run = snakemake(tmp_path, path, env={**os.environ, **env})
    assert run.returncode == 0, run.stderr[-3000:]
    rows = pd.read_csv(tmp_path / "results/mixed/transfers.tsv", sep="\t")
    measured = sorted(set(zip(rows["remote"], rows["tool"], rows["direction"], strict=True)))
    assert measured == sorted(
        (remote, tool, direction)
        for remote, tool in (("objects", "rclone"), ("objects", "s5cmd"), ("files", "rclone"))
        for direction in ("upload", "download")
    ), measured
    assert (rows["status"] == "ok").all(), rows[["remote", "tool", "status", "error"]]
    # the bytes are at each store, under its own remote
    assert (tmp_path / "davroot/mixed").is_dir() and (tmp_path / "s3root/mixed").is_dir()
