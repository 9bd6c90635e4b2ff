"""A real rclone copy measured as a campaign measures it (``cloudbench.measure.copy.measure``:
rclone, its log, its record, the evidence sampled beside it), with the verdict
``cloudbench.report.limits`` reads from that evidence: what tests/test_limits_e2e.py (links)
and tests/test_limits_host_e2e.py (the client's host, the store) put a limit in the way of."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudbench.measure.clients.base import CopyJob
from cloudbench.measure.copy import measure
from cloudbench.measure.rclone import find_rclone
from cloudbench.report import limits
from tests.infra.s3 import VERSITYGW, built_stores, serve_s3

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: netns, tc, cgroups")

KEY, SECRET = "limitskey", "limits-Secret-1"
FILE = 4 * 2**20
REPEATS = 10
ENOUGH = 9  # of 10
IDENTITY = {  # a record's identity columns (its setting is the copy's tag)
    "campaign": "limits", "site": "here", "remote": "s3t", "direction": "upload",
    "strategy": "plain", "layout": "plain", "chunk_bytes": 0, "tool": "rclone", "clients": 1,
    "repeat": 0,
}  # fmt: skip


def dataset(root: Path, files: int, size: int = FILE) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    names = [f"f{i}.bin" for i in range(files)]
    for n in names:
        (root / n).write_bytes(os.urandom(size))
    return names


def upload(tmp: Path, src: Path, names: list[str], transfers: int, tag: str) -> dict:
    """One measured upload of ``names`` at ``transfers`` objects at once to ``s3t:bkt/tag``:
    its record (as a dict) with its verdict's ``limit`` and ``limit_evidence``."""
    work = tmp / "work" / tag
    work.mkdir(parents=True)
    job = CopyJob(
        direction="upload",
        strategy="plain",
        src=str(src),
        dst=f"s3t:bkt/{tag}",
        objects=tuple(names),
        expected_bytes=sum((src / n).stat().st_size for n in names),
        object_bytes=FILE,
        threads=transfers,
        remote_url="s3t:bkt",
        log_path=work / "copy.log",
        workdir=work,
    )
    return measured(job, work, {**IDENTITY, "setting": tag}, tag)


def measured(job: CopyJob, work: Path, keys: dict, tag: str) -> dict:
    """``job`` measured by rclone: its record (ok, its evidence kept beside it) with its
    verdict's columns and the evidence file's path."""
    record = work / "record.json"
    rec = measure(
        job, "rclone", keys=keys, series_path=work / "record.series.tsv", label=tag, timeout=300
    ).as_json()
    assert rec["status"] == "ok", rec.get("error")
    evidence = work / "record.evidence.jsonl"
    assert evidence.exists()
    return rec | limits.columns(record, rec) | {"evidence": evidence}


def download(tmp: Path, prefix: str, names: list[str], transfers: int, tag: str) -> dict:
    """One measured download of ``names`` from ``s3t:bkt/prefix`` at ``transfers`` objects
    at once into a fresh directory: its record with its verdict's columns."""
    work = tmp / "work" / tag
    work.mkdir(parents=True)
    job = CopyJob(
        direction="download",
        strategy="plain",
        src=f"s3t:bkt/{prefix}",
        dst=str(work / "data"),
        objects=tuple(names),
        expected_bytes=FILE * len(names),
        object_bytes=FILE,
        threads=transfers,
        remote_url="s3t:bkt",
        log_path=work / "copy.log",
        workdir=work,
    )
    return measured(job, work, {**IDENTITY, "setting": tag, "direction": "download"}, tag)


def route(rows: list[dict], scaling: limits.Scaling | None = None) -> limits.Verdict:
    return limits.route_verdict(
        [limits.Verdict(r["limit"], r["limit_evidence"] or "") for r in rows], scaling
    )


def median(rows: list[dict]) -> float:
    rates = sorted(r["mb_per_s"] for r in rows)
    return rates[len(rates) // 2]


def named(rows: list[dict], limit: str) -> int:
    return sum(r["limit"] == limit for r in rows)


def said(rows: list[dict]) -> str:
    return "\n".join(f"{r['mb_per_s']:.2f} MB/s {r['limit']}: {r['limit_evidence']}" for r in rows)


@pytest.fixture(name="store")
def store_fixture(tmp_path, monkeypatch) -> Iterator:
    """The store the copies go to, as the remote ``s3t:`` (its bucket ``bkt``) in the
    environment: versitygw, which checks signatures, where it was built."""
    store = VERSITYGW if VERSITYGW in built_stores() else built_stores()[0]
    with serve_s3(find_rclone(), tmp_path / "srv", key=KEY, secret=SECRET, store=store) as srv:
        (srv.root / "bkt").mkdir()
        for name, value in srv.client_env().items():
            monkeypatch.setenv(name, value)
        yield srv
