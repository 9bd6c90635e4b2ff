"""Bookkeeping around a measurement: what it asks of the store, counted by the store.

A store across an ocean charges a round trip per request, per measurement, so the calls
around a timed copy are held to few requests: publishing a manifest is one PUT, reading one
is a listing of its folder and a GET, listing a copy is one request per 1,000 objects. The
counts come from versitygw's own access log (it logs the User-Agent of every request, and
every bookkeeping call carries ``cloudbench-bookkeeping``); rclone serve s3 keeps no such log,
so against it the same calls are checked for what they do.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from bench.requests import classify
from cloudbench.campaign.paths import live_log
from cloudbench.measure import rclone as rc
from cloudbench.measure.attempts import attempted_before
from tests.infra.s3 import VERSITYGW, serve_s3, store_params

KEY, SECRET = "cbbookkeepingkey", "cbbookkeepingsecret"


# --- unit -------------------------------------------------------------------------------


@pytest.mark.unit
def test_a_measurement_was_attempted_before_only_with_a_kept_attempt_or_a_left_log(tmp_path):
    record = tmp_path / "r1.json"
    log = tmp_path / "r1.jsonl"
    assert not attempted_before(record, [log])
    live_log(log).write_text("{}\n")  # a job killed before its record: its log's second name
    assert attempted_before(record, [log])
    live_log(log).unlink()
    attempts = record.with_name("r1.attempts")
    attempts.mkdir()
    assert not attempted_before(record, [log])  # an empty folder is no attempt
    (attempts / "20261124T000000Z.json").write_text("{}")
    assert attempted_before(record, [log])


@pytest.mark.unit
@pytest.mark.parametrize(
    ("prefix", "local"),
    [
        ("/scratch/remote/bkt/c/data", True),
        ("relative/dir", True),
        ("C:\\data", True),
        ("mystore:bkt/c", False),
        (":s3,provider=Ceph:bkt/c", False),
        ("my store.1:bkt", False),
    ],
)
def test_plain_paths_are_local_remotes_are_not(prefix, local):
    assert (rc.local_path(prefix) is not None) is local


@pytest.mark.unit
def test_a_local_remote_is_listed_read_and_written_without_rclone(tmp_path):
    copy = tmp_path / "bkt" / "c" / "data" / "r1"
    (copy / "objects" / "f.bin").mkdir(parents=True)
    (copy / "objects" / "f.bin" / "f.bin.0000").write_bytes(b"x" * 5)
    (copy / "objects" / "g.bin").write_bytes(b"y" * 3)
    found = rc.list_objects("no-such-rclone", f"{copy}/objects")
    assert {name: size for name, (size, _) in found.items()} == {"f.bin/f.bin.0000": 5, "g.bin": 3}
    assert rc.list_objects("no-such-rclone", str(tmp_path / "absent")) == {}
    assert rc.read_object("no-such-rclone", str(copy), "manifest.json").stdout == ""
    src = tmp_path / "m.json"
    src.write_text('{"files": []}')
    assert rc.publish_file("no-such-rclone", src, f"{copy}/manifest.json").returncode == 0
    said = rc.read_object("no-such-rclone", str(copy), "manifest.json")
    assert (said.returncode, json.loads(said.stdout)) == (0, {"files": []})
    assert sorted(p.name for p in copy.iterdir()) == ["manifest.json", "objects"]  # no temp


@pytest.mark.unit
def test_a_remote_from_the_environment_is_found_in_any_case():
    listing = (
        '[{"name":"ucs3","type":"s3","source":"environment","description":""},'
        '{"name":"Disk","type":"local","source":"file","description":""}]'
    )
    assert rc.type_in_listing(listing, "UCS3") == "s3"  # RCLONE_CONFIG_UCS3_* -> "ucs3"
    assert rc.type_in_listing(listing, "ucs3") == "s3"
    assert rc.type_in_listing(listing, "Disk") == "local"
    assert rc.type_in_listing(listing, "disk") == "unknown"  # a config file's name is exact
    assert rc.type_in_listing("not json", "ucs3") == "unknown"


@pytest.mark.unit
def test_every_bookkeeping_call_names_itself_to_the_store():
    cmd = rc.helper_command("rclone", "lsjson", "s:b/p", extra_flags=("--user-agent", "mine"))
    assert cmd[cmd.index("--user-agent") + 1] == rc.BOOKKEEPING_AGENT
    assert cmd[-2:] == ["--user-agent", "mine"]  # a campaign's own flags still come last


@pytest.mark.unit
def test_the_bench_tells_bookkeeping_from_the_copy_and_the_run_by_the_stores_log():
    line = (
        "k bkt [24/November/2026:14:41:42 +0000] 127.0.0.1 k ID {action} {key} {uri} 200 - 0 "
        "0 0 0 - {agent} - SIG SigV4 - AuthHeader host - arn Yes"
    )
    lines = [
        line.format(action="s3_PutObject", key="e2e/data/plain/rclone-1xauto/r1/objects/a",
                    uri="/bkt/e2e/data/plain/rclone-1xauto/r1/objects/a", agent="rclone/v1.75.2"),
        line.format(action="s3_ListObjects", key="-",
                    uri="/bkt?prefix=e2e%2Fdata%2Fplain%2Frclone-1xauto%2Fr1%2Fobjects%2F",
                    agent=rc.BOOKKEEPING_AGENT),
        line.format(action="s3_PutObject", key="e2e/data/plain/rclone-1xauto/r1/manifest.json",
                    uri="/bkt/e2e/data/plain/rclone-1xauto/r1/manifest.json",
                    agent=rc.BOOKKEEPING_AGENT),
        line.format(action="s3_PutObject", key="e2e/results/here/x.json",
                    uri="/bkt/e2e/results/here/x.json", agent=rc.BOOKKEEPING_AGENT),
        "log starts 2026-11-24",
    ]  # fmt: skip
    out = classify(lines, "e2e")
    assert out["bookkeeping"] == Counter({"plain/rclone-1xauto/r1": 2})
    assert out["copy"] == Counter({"plain/rclone-1xauto/r1": 1})
    assert out["per_run"] == Counter({"PutObject": 1})


# --- against the stores -------------------------------------------------------------------


def _requests(srv, since: int) -> list[tuple[str, str]]:
    """(S3 action, User-Agent) of the requests versitygw logged after line ``since``."""
    out = []
    for line in srv.access_log.read_text().splitlines()[since:]:
        words = line.split()
        action = next((w for w in words if w.startswith("s3_")), None)
        if action:
            agent = rc.BOOKKEEPING_AGENT if rc.BOOKKEEPING_AGENT in words else "other"
            out.append((action[3:], agent))
    return out


def _logged(srv) -> int:
    return len(srv.access_log.read_text().splitlines()) if srv.access_log.exists() else 0


@pytest.mark.quick
@pytest.mark.parametrize("store", store_params())
def test_bookkeeping_calls_cost_the_store_one_or_two_requests(store, tmp_path, monkeypatch):
    binary = rc.find_rclone()
    # a copy's 1,005 objects, put in the store's own directory before it starts (both keep
    # an object as a file there), not sent through it: only the calls below are counted
    objects = tmp_path / "srv" / "bucket1/c/data/plain/s/r1/objects"
    objects.mkdir(parents=True)
    for k in range(1005):
        (objects / f"o{k:04d}").write_bytes(b"z" * (k % 7))
    with serve_s3(binary, tmp_path / "srv", key=KEY, secret=SECRET, store=store) as srv:
        for name, value in srv.client_env("BKS").items():
            monkeypatch.setenv(name, value)
        copy = "BKS:bucket1/c/data/plain/s/r1"
        src = tmp_path / "manifest.json"
        src.write_text('{"files": ["a"]}')

        before = _logged(srv) if store == VERSITYGW else 0
        assert rc.read_object(binary, copy, "manifest.json").stdout == ""  # not there yet
        absent = _requests(srv, before) if store == VERSITYGW else None

        before = _logged(srv) if store == VERSITYGW else 0
        put = rc.publish_file(binary, src, f"{copy}/manifest.json")
        assert put.returncode == 0, put.stderr
        published = _requests(srv, before) if store == VERSITYGW else None

        before = _logged(srv) if store == VERSITYGW else 0
        said = rc.read_object(binary, copy, "manifest.json")
        assert json.loads(said.stdout) == {"files": ["a"]}
        read = _requests(srv, before) if store == VERSITYGW else None

        before = _logged(srv) if store == VERSITYGW else 0
        found = rc.list_objects(binary, f"{copy}/objects")
        assert len(found) == 1005 and found["o0006"][0] == 6
        listed = _requests(srv, before) if store == VERSITYGW else None

    if store != VERSITYGW:
        return
    ours = rc.BOOKKEEPING_AGENT
    assert absent == [("ListObjects", ours)]
    assert published == [("PutObject", ours)]
    assert read == [("ListObjects", ours), ("GetObject", ours)]
    assert listed == [("ListObjects", ours), ("ListObjects", ours)]  # 1,000 objects a page
