"""The client registry: what the code outside ``measure/clients/`` asks a client is one of
its capabilities, never its name; one finder and one version reader serve every client."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cloudbench import binaries as binary
from cloudbench.campaign import clients as catalogue

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "workflow"
_NAMES = "|".join(map(re.escape, catalogue.NAMES))
# A comparison with a client's name: ``tool == "rclone"``, ``"command" in tools``,
# ``- {"rclone"}``, ``in ("s5cmd", "aws")``, or a table keyed by names (``in S3_TOOLS``).
NAME_BRANCH = re.compile(
    rf"""(==|!=)\s*"({_NAMES})"|"({_NAMES})"\s*(==|!=)|"({_NAMES})"\s+(not\s+)?in\s"""
    rf"""|-\s*\{{"({_NAMES})"|in\s+\("({_NAMES})"|\bin\s+(tools\.)?S3_TOOLS\b"""
)


def _name_branches() -> list[str]:
    found = []
    sources = [*WORKFLOW.rglob("*.py"), *WORKFLOW.rglob("*.smk"), WORKFLOW / "Snakefile"]
    for path in sources:
        if "measure/clients" in path.as_posix() or not path.is_file():
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if NAME_BRANCH.search(line) and not line.lstrip().startswith("#"):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    return found


def test_no_code_outside_the_clients_branches_on_a_clients_name():
    """A fifth client is one module and one registry line only while nothing else asks
    for a client by name: ask the registry for a capability instead."""
    assert _name_branches() == []
    # the pattern does find what it forbids
    assert NAME_BRANCH.search('if tool == "rclone":') and NAME_BRANCH.search('- {"rclone"}')
    assert NAME_BRANCH.search('if "command" in chosen:')


def test_capabilities_are_asked_of_the_registry():
    assert catalogue.capped_by_rclone_flags("rclone") and not catalogue.capped_by_rclone_flags(
        "aws"
    )
    assert not catalogue.capped_by_rclone_flags("a-tool-of-an-old-table")
    assert catalogue.TEMPLATED == ("command",)
    assert [n for n, i in catalogue.REGISTRY.items() if i.counts_own_bytes] == ["rclone"]
    with pytest.raises(ValueError, match="unknown client 'rsync': use one of rclone"):
        catalogue.info_of("rsync")


@pytest.mark.parametrize(
    "path, split",
    [
        ("mys3:bkt/camp", ("mys3", "bkt/camp")),
        ("my store:bkt", ("my store", "bkt")),  # rclone allows a space inside a name
        ("C:\\data", None),  # a drive letter is a path
        ("/scratch/x", None),
        (":s3,provider=Ceph:bkt", None),  # a connection string names no remote
    ],
)
def test_one_pattern_for_a_remotes_name(path, split):
    assert catalogue.split_remote(path) == split
    assert catalogue.is_remote(path) is (split is not None)


@pytest.mark.parametrize(
    "line, version",
    [
        ("v2.3.0-991c9fb", "2.3.0-991c9fb"),
        ("aws-cli/1.46.3 Python/3.11.7 Linux/6.18 botocore/1.43", "1.46.3"),
        ("s3cmd version 2.4.0", "2.4.0"),
        ("rclone v1.75.2", "1.75.2"),
        ("development build", "development build"),
    ],
)
def test_one_version_reader_reads_every_clients_first_line(line, version):
    assert binary.version_number(line) == version


def test_one_finder_override_then_candidates_then_path(tmp_path, monkeypatch):
    spec = binary.Binary(
        "cb-no-such-tool", "CLOUDBENCH_NO_SUCH", "run `make`",
        candidates=lambda: [None, tmp_path / "first", tmp_path / "second"],
    )  # fmt: skip
    monkeypatch.delenv("CLOUDBENCH_NO_SUCH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(binary.BinaryError) as err:
        binary.find(spec)
    assert str(err.value) == "cb-no-such-tool not found: run `make` or set CLOUDBENCH_NO_SUCH"
    (tmp_path / "second").write_text("")
    assert binary.find(spec) == str(tmp_path / "second")
    monkeypatch.setenv("CLOUDBENCH_NO_SUCH", "/site/tool")
    assert binary.find(spec) == "/site/tool"


# --- the evidence a client leaves ------------------------------------------------------------


def test_a_listing_kept_beside_a_record_recounts_bytes_and_seconds(tmp_path):
    from cloudbench.campaign.paths import listing
    from cloudbench.measure.arrival import read_listing, write_listing
    from cloudbench.measure.clients.base import listing_evidence

    record = tmp_path / "r1.json"
    kept = listing(record)
    assert kept == tmp_path / "r1.listing.tsv"
    entries = {"a b.bin": (3, 1000.5), "sub/c.bin": (5, 1002.25), "d.bin": (7, None)}
    write_listing(kept, entries)
    assert read_listing(kept) == entries
    ev = listing_evidence(kept, started_epoch=1000.0)
    assert (ev.bytes, ev.objects, ev.seconds) == (15, 3, 2.25)
    assert listing_evidence(tmp_path / "absent.tsv", 0.0).bytes is None


def test_s5cmds_json_lines_count_each_copied_objects_size(tmp_path):
    from cloudbench.measure.arrival import write_listing
    from cloudbench.measure.clients import load
    from cloudbench.measure.clients.base import Kept
    from cloudbench.measure.clients.s5cmd import copied_objects

    log = tmp_path / "r1.log"
    log.write_text(
        '{"operation":"cp","success":true,"source":"/d/a","destination":"s3://b/p/a",'
        '"object":{"type":"file","size":3145728}}\n'
        '{"operation":"cp","command":"cp /d/x s3://b/p/x","error":"given object not found"}\n'
        "not json at all\n"
        '{"operation":"cp","success":true,"source":"/d/c","destination":"s3://b/p/c",'
        '"object":{"type":"file","size":5}}\n'
    )
    assert copied_objects(log.read_text()) == {"s3://b/p/a": 3145728, "s3://b/p/c": 5}
    listing = tmp_path / "r1.listing.tsv"
    write_listing(listing, {"a": (3145728, 101.0), "c": (5, 103.5)})
    ev = load("s5cmd").evidence(Kept(log, listing, None, 100.0))
    assert (ev.bytes, ev.objects, ev.seconds) == (3145733, 2, 3.5)


def test_s5cmds_requests_sent_again_are_counted_from_its_debug_lines():
    """At --log debug, s5cmd's --json output names each request its SDK sent again; the
    line as s5cmd 2.x printed it when a proxy answered one PUT 503 SlowDown."""
    from cloudbench.measure.clients.s5cmd import copied_objects, retried_requests

    output = (
        '{"error":"retryable error: SlowDown: Please reduce your request rate.\\n\\tstatus '
        'code: 503, request id: , host id: "}\n'
        '{"operation":"cp","success":true,"source":"/d/a","destination":"s3://b/x/a",'
        '"object":{"type":"file","size":300000}}\n'
        '{"error":"retryable error: InternalError: file does not exist\\n\\tstatus code: 500"}\n'
    )
    assert retried_requests(output) == 2
    assert copied_objects(output) == {"s3://b/x/a": 300000}  # not an object's failure
    assert retried_requests('{"operation":"cp","success":true}\n') == 0


def test_a_listing_with_the_sources_times_has_no_seconds_to_say(tmp_path):
    from cloudbench.measure.arrival import write_listing
    from cloudbench.measure.clients.base import listing_evidence

    kept = tmp_path / "r1.listing.tsv"
    write_listing(kept, {"a": (3, 500.0)})  # written long before the copy began at 1000
    ev = listing_evidence(kept, started_epoch=1000.0)
    assert (ev.bytes, ev.seconds) == (3, None) and "the source's" in ev.source
    write_listing(kept, {"a": (3, 999.4)})  # a second's rounding: still this copy's
    assert listing_evidence(kept, started_epoch=1000.0).seconds == pytest.approx(-0.6)


def test_a_download_whose_files_carry_the_objects_times_is_timed_by_its_series(tmp_path):
    """The AWS CLI sets a downloaded file's time to the object's: the series (the
    destination sampled every second) says when the bytes were all there."""
    from cloudbench.measure import series
    from cloudbench.measure.arrival import write_listing
    from cloudbench.measure.clients.base import Kept, timed_evidence

    listing, points = tmp_path / "r1.listing.tsv", tmp_path / "r1.series.tsv"
    write_listing(listing, {"a": (4, 10.0), "b": (6, 12.0)})
    series.write(points, [(0.0, 0), (1.0, 4), (2.0, 10), (2.2, 10)])
    ev = timed_evidence(Kept(tmp_path / "r1.log", listing, points, started_epoch=1000.0))
    assert (ev.bytes, ev.objects, ev.seconds) == (10, 2, 2.0)
    assert "r1.series.tsv" in ev.source
    assert ev.exited_s == 2.2  # the last sample, taken as the client exits, holds every byte
    # a last sample short of the bytes (a file removed as the client exited) saw no clean exit
    series.write(points, [(0.0, 0), (1.0, 4), (2.0, 10), (2.2, 6)])
    again = timed_evidence(Kept(tmp_path / "r1.log", listing, points, started_epoch=1000.0))
    assert again.seconds == 2.0 and again.exited_s is None


# --- s3cmd: its command line, its config file, its evidence ------------------------------------

SECRET = "s3cmd-Secret-Value-0012"


def _s3cmd_access(**kw):
    from cloudbench.measure.clients.s3 import S3Access

    base = dict(
        remote="s3t", endpoint="http://127.0.0.1:9", region="eu-west-2", path_style=True,
        access_key="AKIAS3CMD", secret_key=SECRET,
    )  # fmt: skip
    return S3Access(**{**base, **kw})


def test_s3cmd_command_lines_keep_keys_in_the_environment(tmp_path):
    from cloudbench.measure.tools import copy_command

    files = ["f1.bin", "sub/f2.bin", "f 3.bin"]
    up = copy_command(
        "s3cmd", "/data/set", "s3t:bkt/camp", concurrency=4, files=files, workdir=tmp_path,
        access=_s3cmd_access(), binary="s3cmd",
    )  # fmt: skip
    config, names = tmp_path / "s3cmd.cfg", tmp_path / "s3cmd.objects"
    assert up.argv == [
        "s3cmd", "--config", str(config), "put", "--recursive", "--no-progress",
        "--no-preserve", "--force", "--exclude", "*", "--rinclude-from", str(names),
        "/data/set/", "s3://bkt/camp/",
    ]  # fmt: skip
    assert up.files[config].splitlines() == [
        "[default]",
        "host_base = 127.0.0.1:9",
        "host_bucket = 127.0.0.1:9",  # no %(bucket)s: path-style addressing
        "use_https = False",
        "signature_v2 = False",
        "bucket_location = eu-west-2",
    ]
    # one anchored regex per object: a glob "f1.bin" would also take "sub/f1.bin"
    patterns = [re.compile(p) for p in up.files[names].splitlines()]
    assert [bool(p.search(n)) for p in patterns for n in files] == [
        True, False, False, False, True, False, False, False, True,
    ]  # fmt: skip
    assert not any(p.search("sub/f1.bin") for p in patterns)
    assert up.env["AWS_SECRET_ACCESS_KEY"] == SECRET and up.env["AWS_REGION"] == "eu-west-2"
    assert "AWS_PROFILE" in up.remove_env
    down = copy_command(
        "s3cmd", "s3t:bkt/camp", "/dl", concurrency=1, workdir=tmp_path,
        access=_s3cmd_access(endpoint="https://s3.example.org", path_style=False),
        binary="s3cmd",
    )  # fmt: skip
    assert down.argv[3] == "get" and down.argv[-2:] == ["s3://bkt/camp/", "/dl/"]
    assert "--rinclude-from" not in down.argv  # no list: everything under the prefix
    text = down.files[config]
    assert "host_bucket = %(bucket)s.s3.example.org" in text and "use_https = True" in text
    for cmd in (up, down):
        assert not any(SECRET in a or "AKIAS3CMD" in a for a in cmd.argv)
        assert not any(SECRET in t or "AKIAS3CMD" in t for t in cmd.files.values())


def test_s3cmds_output_recounts_its_bytes_and_seconds(tmp_path):
    from cloudbench.measure.clients import load
    from cloudbench.measure.clients.base import Kept
    from cloudbench.measure.clients.s3cmd import moved

    log = tmp_path / "r1.log"
    log.write_text(
        "upload: '/d/a.bin' -> 's3://bench/p/a.bin' (3145728 bytes in 0.1 seconds, "
        "57.17 MB/s) [1 of 3]\n"
        "upload: '/d/x y.bin' -> 's3://bench/p/x y.bin' (10 bytes in 0.0 seconds, "
        "539.58 B/s) [2 of 3]\n"
        "upload: '/d/big.bin' -> 's3://bench/p/big.bin' (15728640 bytes in 1.5 seconds, "
        "10.00 MB/s) [part 1 of 2, 15MB] [3 of 3]\n"
        "upload: '/d/big.bin' -> 's3://bench/p/big.bin' (5242880 bytes in 0.5 seconds, "
        "10.00 MB/s) [part 2 of 2, 5MB] [3 of 3]\n"
        "WARNING: Retrying failed request: /p/c.bin (timed out)\n"
    )
    assert moved(log.read_text()) == {
        "s3://bench/p/a.bin": (3145728, 0.1),
        "s3://bench/p/x y.bin": (10, 0.0),
        "s3://bench/p/big.bin": (20971520, 2.0),
    }
    ev = load("s3cmd").evidence(Kept(log, None, None, 0.0))
    assert (ev.bytes, ev.objects, ev.seconds) == (3145728 + 10 + 20971520, 3, 2.1)


def test_s3cmd_moves_one_object_at_a_time_and_its_record_says_so(tmp_path, monkeypatch):
    from cloudbench.measure.clients import load
    from cloudbench.measure.clients.base import CopyJob

    s3cmd = load("s3cmd")
    # the remote in the environment (no rclone config to read); no process in a unit test
    for key, value in {
        "TYPE": "s3",
        "ENDPOINT": "http://127.0.0.1:9",
        "ACCESS_KEY_ID": "AKIAS3CMD",
        "SECRET_ACCESS_KEY": SECRET,
    }.items():
        monkeypatch.setenv(f"RCLONE_CONFIG_S3T_{key}", value)
    monkeypatch.setattr(type(s3cmd), "find", lambda self: "s3cmd")
    monkeypatch.setattr(type(s3cmd), "version", lambda self, binary: "2.4.0")
    job = CopyJob(
        direction="upload", strategy="plain", src="/data", dst="s3t:bkt/p",
        objects=("a", "b", "c"), expected_bytes=3, object_bytes=1, threads=4,
        remote_url="s3t:bkt", log_path=tmp_path / "r1.log", workdir=tmp_path,
    )  # fmt: skip
    plan = s3cmd.plan(job)
    # what it does, not the 4 it was asked (campaign.clients.objects_at_once)
    assert plan.columns["concurrency"] == 1
    assert (plan.columns["transfers"], plan.columns["connections"]) == (1, 1)
    assert plan.columns["backend"] == "s3" and plan.version == "2.4.0"
    assert SECRET not in " ".join(plan.argv) and plan.environ["AWS_SECRET_ACCESS_KEY"] == SECRET
    assert not any(k.startswith("RCLONE_CONFIG_") for k in plan.environ)


@pytest.mark.unit
def test_s5cmd_asked_for_one_object_at_a_time_is_run_and_recorded_at_the_two_it_moves(
    tmp_path, monkeypatch
):
    """s5cmd's --numworkers has a floor of 2 (its parallel manager's minNumWorkers): through a
    link capped per connection, --numworkers 1 carried 2 connections at their cap, as 2 did.
    So a job asked for 1 runs --numworkers 2 and its record says 2 objects in flight; a
    campaign's sweep names it s5cmd-1x2 (tests/test_campaign.py)."""
    from cloudbench.measure.clients import load
    from cloudbench.measure.clients.base import CopyJob

    s5cmd = load("s5cmd")
    for key, value in {"TYPE": "s3", "ENDPOINT": "http://127.0.0.1:9",
                       "ACCESS_KEY_ID": "AKIAS5", "SECRET_ACCESS_KEY": SECRET}.items():  # fmt: skip
        monkeypatch.setenv(f"RCLONE_CONFIG_S3T_{key}", value)
    monkeypatch.setattr(type(s5cmd), "find", lambda self: "s5cmd")
    monkeypatch.setattr(type(s5cmd), "version", lambda self, binary: "2.3.0")
    for objects, in_flight in ((("a", "b", "c"), 2), (("a",), 1)):
        job = CopyJob(
            direction="upload", strategy="plain", src="/data", dst="s3t:bkt/p",
            objects=objects, expected_bytes=3, object_bytes=1, threads=1,
            remote_url="s3t:bkt", log_path=tmp_path / "r1.log", workdir=tmp_path,
        )  # fmt: skip
        plan = s5cmd.plan(job)
        argv = plan.argv
        assert argv[argv.index("--numworkers") + 1] == "2", argv
        assert plan.columns["concurrency"] == 2
        assert plan.columns["connections"] == plan.columns["objects_in_flight"] == in_flight
