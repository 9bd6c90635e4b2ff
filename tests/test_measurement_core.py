"""One measurement core: what arrived is checked for every client, every timed copy has a
timeout, and a group of download clients measures disjoint shares.

Unit tests for the pure parts, then real campaigns against ``rclone serve s3``.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from cloudbench.campaign.model import ConfigError, auto_runtime_min, load_campaign
from cloudbench.measure import arrival
from cloudbench.measure.copy import copy_timeout
from cloudbench.processes import descendants, kill_tree
from cloudbench.records import read_json, utc_now
from cloudbench.sizes import SizeError, parse_duration
from tests.infra.s3 import serve_s3
from tests.infra.workflow import BIN, HANG_S, snakemake, wait_for, write_config

KEY, SECRET = "corekeyid0042", "core-Secret-9f3e"

# --- pure parts ------------------------------------------------------------------------


@pytest.mark.unit
def test_object_sizes_give_the_last_chunk_the_rest():
    files = [
        {"name": "a", "bytes": 10, "object": "a"},
        {
            "name": "b",
            "bytes": 10,
            "chunk_bytes": 4,
            "chunks": [{"object": f"b/b.{i}"} for i in range(3)],
        },
    ]
    assert arrival.object_sizes(files) == {"a": 10, "b/b.0": 4, "b/b.1": 4, "b/b.2": 2}


@pytest.mark.unit
def test_arrival_names_what_is_missing_or_short():
    expected = {"a": 10, "b": 10, "c": 10}
    whole = arrival.compare(expected, {"a": 10, "b": 10, "c": 10, "stray": 5})
    assert whole.whole and whole.problem() is None and whole.bytes_found == 30
    part = arrival.compare(expected, {"a": 10, "b": 3})
    assert not part.whole
    assert (part.objects_found, part.bytes_found) == (1, 13)
    assert part.missing == ("c",) and part.wrong_size == ("b",)
    text = part.problem("client 1 (s5cmd)")
    assert text.startswith("client 1 (s5cmd) exited without error but 1 of 3 objects")
    assert "13 of 30 bytes" in text


@pytest.mark.unit
@pytest.mark.parametrize(
    ("walltime_min", "campaign_s", "expected"),
    [
        (None, None, None),  # nothing known: no timeout
        (720, None, 720 * 60 - 300),  # a 12 h job: 5 minutes of margin
        (10, None, 540),  # a 10 min job: 10% margin
        (720, 90, 90),  # the campaign's own limit, under the walltime
        (10, 3600, 540),  # never past the walltime: the scheduler would kill the record too
    ],
)
def test_copy_timeout_is_the_campaigns_capped_by_the_walltime(walltime_min, campaign_s, expected):
    assert copy_timeout(walltime_min, campaign_s) == expected


@pytest.mark.unit
def test_copy_timeout_key_reads_durations_and_refuses_nonsense():
    assert parse_duration("90s") == 90 and parse_duration("30m") == 1800
    assert parse_duration("1.5h") == 5400 and parse_duration(45) == 45
    for bad in ("5 parsecs", "-3s", 0):
        with pytest.raises(SizeError):
            parse_duration(bad)
    cfg = {
        "campaign": "c",
        "remote": "/tmp/r",
        "bucket": "b",
        "dataset": {"files": 1, "size": "1MiB"},
        "strategies": ["plain"],
        "sites": {"x": {"upload": True, "download": True, "scratch": "s"}},
    }
    assert load_campaign(cfg).copy_timeout_s is None  # auto
    assert load_campaign(cfg | {"copy_timeout": "2h"}).copy_timeout_s == 7200
    with pytest.raises(ConfigError, match="copy_timeout"):
        load_campaign(cfg | {"copy_timeout": "2 fortnights"})
    # without a site profile's runtime: 100 MB at 1 MB/s plus 10 minutes
    assert auto_runtime_min(100_000_000) == 12


@pytest.mark.quick
def test_kill_tree_ends_the_grandchild_a_shell_started():
    """A template runs its client under a shell: ending only the shell would leave the
    client moving data beside the next measurement."""
    # the grandchild sleeps far longer than wait_for's hang limit: one that survived the
    # kill can only fail the wait, never end by itself within it and pass
    proc = subprocess.Popen(["sh", "-c", f"sleep {int(HANG_S) * 12} & wait"])
    (grandchild,) = wait_for(lambda: descendants(proc.pid), "the shell's child")
    stat = Path(f"/proc/{grandchild}/stat")

    def gone() -> bool:  # or a zombie, its parent gone before it could reap it
        try:
            return stat.read_text().split(") ")[1].startswith("Z")
        except (FileNotFoundError, ProcessLookupError):
            return True

    try:
        kill_tree(proc, grace_s=2)
        assert proc.returncode is not None
        wait_for(gone, f"the grandchild {grandchild} to end")  # signalled: it ends at once
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(grandchild, signal.SIGKILL)  # a survivor left behind by a failure


@pytest.mark.unit
def test_chunk_digests_taken_while_splitting_equal_a_separate_hash(tmp_path):
    """The copy manifest's per-chunk digests now come from the chunk step (so a new chunk
    size re-hashes nothing else): they must equal hashing the file chunk by chunk."""
    from cloudbench.data.checksums import hash_stream
    from cloudbench.data.chunking import split_file

    src = tmp_path / "f.bin"
    src.write_bytes(bytes(range(256)) * 4099)  # 1,049,344 bytes: a short last chunk
    digests: list[str] = []
    parts = split_file(src, tmp_path / "chunks", 300_000, 4, digests)
    assert len(parts) == len(digests) == 4
    assert digests == hash_stream([src], [300_000])[1][300_000]


# --- real campaigns against rclone serve s3 -----------------------------------------------


def _config(campaign: str, tools: list[str], **over) -> dict:
    return {
        "campaign": campaign,
        "remote": "s3c:",
        "bucket": "core",
        "dataset": {"files": 4, "size": "2MiB"},
        "strategies": ["plain"],
        "concurrency": {"plain": 2},
        "repeats": 1,
        "tools": tools,
        "sites": {"ams": {"upload": True, "download": True, "scratch": "scratch"}},
    } | over


def _serve(tmp_path: Path):
    return serve_s3(str(BIN / "rclone"), tmp_path / "s3root", key=KEY, secret=SECRET)


def _transfers(tmp_path: Path, campaign: str) -> pd.DataFrame | None:
    table = tmp_path / f"results/{campaign}/transfers.tsv"
    return pd.read_csv(table, sep="\t") if table.exists() else None


def _run(tmp_path: Path, cfg: dict, timeout: float = 300):
    path = write_config(tmp_path, cfg)
    with _serve(tmp_path) as s3:
        run = snakemake(tmp_path, path, env=s3.client_env("S3C"), timeout=timeout)
    return run, _transfers(tmp_path, cfg["campaign"])


#: One campaign, two broken clients: the command copies nothing and exits 0 at 2 transfers
#: (LAZY) and hangs at 4 (HUNG), so three runs show both failures (each run through
#: Snakemake costs seconds of CPU here, a campaign per client as many again).
LAZY, HUNG = "command-1x2", "command-1x4"
TIMEOUT_S = 2  # the campaign's copy_timeout; the hung client would hang for 600 s
FAILING_TEMPLATE = "sh -c 'if [ \"$0\" = 2 ]; then exit 0; fi; sleep 600' {threads} {src} {dst}"


@dataclass(frozen=True)
class FailingRuns:
    """Three runs of the campaign of broken clients, and what each left."""

    workdir: Path
    runs: list[subprocess.CompletedProcess]
    tables: list[pd.DataFrame]  # transfers.tsv after each run
    left_behind: str  # pgrep's processes of the hung client after the first run
    hung_record: Path
    hung_row: dict  # its record after the second run
    mtimes: list[int]  # its record's after the second and third runs


#: the broken clients' dataset (the lazy client's error names what the listing expected):
#: two files, so the counts are the whole dataset's, not one file's
FAILING_FILES, FAILING_FILE_BYTES = 2, 2**20


@pytest.fixture(scope="module")
def failing_clients(tmp_path_factory) -> FailingRuns:
    """The campaign of :data:`LAZY` and :data:`HUNG` run three times over, as a user
    would rerun it after each failure. The third run reads only the hung client's record: it
    stops short of the report (--omit-from aggregate)."""
    tmp_path = tmp_path_factory.mktemp("failing")
    cfg = _config(
        "failing",
        ["command"],
        dataset={"files": FAILING_FILES, "size": FAILING_FILE_BYTES},
        command_template=FAILING_TEMPLATE,
        concurrency={"plain": [2, 4]},
        copy_timeout=f"{TIMEOUT_S}s",
    )
    path = write_config(tmp_path, cfg)
    record = tmp_path / f"results/failing/sites/ams/transfers/upload/main/plain/{HUNG}/r1.json"
    runs: list[subprocess.CompletedProcess] = []
    tables: list[pd.DataFrame] = []
    with _serve(tmp_path) as s3:

        def run_once(*args: str) -> None:
            runs.append(snakemake(tmp_path, path, *args, env=s3.client_env("S3C"), timeout=300))
            tables.append(_transfers(tmp_path, "failing"))

        run_once()
        left = subprocess.run(["pgrep", "-f", "sleep 600"], capture_output=True, text=True)
        run_once()
        hung_row = json.loads(record.read_text())
        mtimes = [record.stat().st_mtime_ns]
        run_once("--omit-from", "aggregate")
        mtimes.append(record.stat().st_mtime_ns)
    return FailingRuns(tmp_path, runs, tables, left.stdout.strip(), record, hung_row, mtimes)


def _by_setting(df: pd.DataFrame, setting: str) -> pd.DataFrame:
    return df[df["setting"] == setting].set_index("direction")


@pytest.mark.full
@pytest.mark.slow
def test_a_client_that_exits_0_without_copying_fails_its_upload(failing_clients):
    """The listing after the copy, not the exit status, says whether the upload happened;
    the copy is not published, so its download is failed too, never ok."""
    assert failing_clients.runs[0].returncode != 0  # the run says what is not ok
    rows = _by_setting(failing_clients.tables[0], LAZY)
    up = rows.loc["upload"]
    assert up["status"] == "failed"
    assert "exited without error but 0 of 2 objects (0 of 2097152 bytes)" in up["error"]
    assert up["bytes_moved"] == 0 and up["bytes_moved_from"] == arrival.MOVED_FROM_LISTING
    assert pd.isna(up["mb_per_s"])  # no rate for what did not move
    assert rows.loc["download", "status"] != "ok"
    copy = failing_clients.workdir / f"s3root/core/failing/data/plain/{LAZY}/r1/copy.json"
    assert not copy.exists()  # never published, in any of the three runs


@pytest.mark.full
@pytest.mark.slow
def test_a_hung_client_fails_its_measurement_within_the_timeout(failing_clients):
    """A client that never returns is ended with everything it started, and the
    measurement fails with how long it was given; the campaign goes on."""
    rows = _by_setting(failing_clients.tables[0], HUNG)
    up = rows.loc["upload"]
    assert up["status"] == "failed" and up["error"].startswith(f"timed out after {TIMEOUT_S} s")
    # the copy's own clock: given its whole timeout, then ended within the kill's grace
    # (SIGTERM, then SIGKILL for whatever is left), not by the client, which would hang on
    grace = inspect.signature(kill_tree).parameters["grace_s"].default
    assert TIMEOUT_S <= up["seconds"] <= TIMEOUT_S + grace
    # the campaign goes on: the download is recorded (and not ok: nothing was uploaded)
    assert rows.loc["download", "status"] != "ok"
    assert failing_clients.left_behind == ""  # nothing left behind
    # the second attempt times out at the same limit: it is not tried again, and says how
    record = failing_clients.hung_record
    up = _by_setting(failing_clients.tables[1], HUNG).loc["upload"]
    assert up["timeout_s"] == TIMEOUT_S
    assert f"timed out twice at {TIMEOUT_S} s: not tried again" in up["error"]
    assert f"--forcerun {record.relative_to(failing_clients.workdir)}" in up["error"]
    assert failing_clients.hung_row["gave_up"] is True
    before, after = failing_clients.mtimes  # a third run measures nothing
    assert after == before, failing_clients.runs[2].stderr[-2000:]


@pytest.mark.full
@pytest.mark.slow
def test_four_s5cmd_clients_download_disjoint_shares(tmp_path):
    """Each client writes into and samples only its own share: the group's series ends at
    exactly the dataset's bytes and never goes down; every client hashed after the group's
    copy had ended."""
    cfg = _config("four", ["s5cmd"], clients=4, dataset={"files": 4, "size": "3MiB"})
    run, df = _run(tmp_path, cfg)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (df["status"] == "ok").all(), df[["direction", "error"]]
    total = 4 * 3 * 2**20
    down = df.set_index("direction").loc["download"]
    assert down["bytes_moved"] == total
    series = pd.read_csv(tmp_path / "results/four/timeseries.tsv", sep="\t")
    s = series[series["direction"] == "download"].sort_values("elapsed_s")
    assert s["bytes"].iloc[-1] == total
    assert (s["bytes"].diff().dropna() >= 0).all()
    assert (s["mb_per_s"] >= 0).all()
    record = tmp_path / "results/four/sites/ams/transfers/download/main/plain/s5cmd-4x2/r1.json"
    group = json.loads(record.read_text())
    ends = [c["started_epoch"] + c["seconds"] for c in group["per_client"]]
    clients_dir = record.parent / "r1.clients"
    for k in range(4):
        c = json.loads((clients_dir / f"client-{k}.json").read_text())
        assert c["bytes_moved"] == 3 * 2**20  # its own share, not the directory's
        assert c["waited_for_group_s"] is not None
        assert c["hashed"]["bytes"] == 3 * 2**20
        # one start, one clock: the ISO time is the epoch's (they were 0.8 ms apart)
        assert c["started_utc"] == utc_now(c["started_epoch"])
    assert max(ends) > min(ends)  # clients ended apart, and the barrier held them
    assert not (tmp_path / "scratch/four/download/ams/main/plain/s5cmd-4x2/r1/.clients").exists()
    # s5cmd counts nothing itself: each upload client's bytes are its share found by the
    # listing after the copy, and clients.tsv names the tool of every row
    per = pd.read_csv(tmp_path / "results/four/clients.tsv", sep="\t")
    assert set(per["tool"]) == {"s5cmd"}
    assert (per["bytes_moved"] == 3 * 2**20).all(), per[["direction", "client", "bytes_moved"]]
    assert sorted(per["direction"].value_counts().items()) == [("download", 4), ("upload", 4)]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-v"]))


def _starts(results: Path) -> dict[str, str]:
    """Every transfer record's start time, by path: a re-measured transfer gets a new one."""
    return {
        str(p.relative_to(results)): json.loads(p.read_text())["started_utc"]
        for p in (results / "sites").rglob("transfers/**/r*.json")
    }


@pytest.mark.full
@pytest.mark.slow
def test_growing_a_measured_campaign_measures_only_the_new(tmp_path):
    """Adding a tool, a chunk size, a remote and a concurrency value to a measured campaign
    measures just the new measurements: every finished one keeps its record and start."""
    cfg = _config("grow", ["rclone"], dataset={"files": 1, "size": "2MiB", "chunk_sizes": ["1MiB"]})
    path = write_config(tmp_path, cfg)
    results = tmp_path / "results/grow"
    with (
        serve_s3(str(BIN / "rclone"), tmp_path / "s3root", key=KEY, secret=SECRET) as s3,
        serve_s3(str(BIN / "rclone"), tmp_path / "s3two", key=KEY, secret=SECRET) as s3b,
    ):
        env = s3.client_env("S3C") | s3b.client_env("S3D")
        # the first run's tables are not read (its records are): no report
        first = snakemake(tmp_path, path, "--omit-from", "aggregate", env=env)
        assert first.returncode == 0, first.stderr[-3000:]
        # the site's preflight checked the gate's remote and tool moments before, in this run:
        # the gate did not write to the store again
        gates = results / "sites/ams/preflight"
        assert read_json(gates / "main/rclone.json")["checked_by"] == "the site's preflight"
        before = _starts(results)
        assert len(before) == 2  # upload and download, rclone plain
        grown = cfg | {
            "tools": ["rclone", "s5cmd"],
            "strategies": ["plain", "chunked"],
            "concurrency": {"plain": [2, 4], "chunked": 2},
            # the new remote by one tool (its own list): a remote added is shown as well
            # by 3 measurements as by 6
            "remotes": {"main": {"url": "s3c:"}, "other": {"url": "s3d:", "tools": ["rclone"]}},
        }
        grown.pop("remote")
        write_config(tmp_path, grown)
        second = snakemake(tmp_path, path, env=env)
        assert second.returncode == 0, second.stderr[-3000:]
        after = _starts(results)
        # then a dry run of the grown campaign plans nothing (as test_e2e asks after the demo)
        third = snakemake(tmp_path, path, "-n", env=env)
        assert third.returncode == 0, third.stderr[-3000:]
    assert {k: after[k] for k in before} == before  # nothing finished was measured again
    # the gates the grown campaign added checked for themselves: the site's preflight, of the
    # first run, had not seen their tool or remote
    for gate in ("main/s5cmd.json", "other/rclone.json"):
        assert "checked_by" not in read_json(gates / gate), gate
    # (main: plain, 2 tools x 2 concurrencies + chunked, 2 tools; other: the same with
    # rclone alone) x 2 directions
    assert len(after) == ((4 + 2) + (2 + 1)) * 2
    df = pd.read_csv(results / "transfers.tsv", sep="\t")
    assert (df["status"] == "ok").all(), df[["setting", "error"]]
    assert "Nothing to be done" in third.stdout + third.stderr


@pytest.mark.unit
def test_process_seconds_counts_from_the_kernels_start_of_the_process():
    """The job's own age includes the interpreter's start-up (the orchestration a transfer
    job costs beyond its timed copy, which make bench reports)."""
    from cloudbench.records import process_seconds

    # a command name with spaces and a ")" must not shift the fields
    stat = "4242 (py (x) y) S " + " ".join(str(i) for i in range(1, 19)) + " 250 0 0"
    assert process_seconds(stat, 10.0) == pytest.approx(10.0 - 250 / os.sysconf("SC_CLK_TCK"))
    assert process_seconds("garbage", 1.0) is None
    here = process_seconds()
    assert here is not None and 0 < here < 3600


@pytest.mark.unit
def test_a_jobs_small_files_go_to_memory_where_the_node_has_it(tmp_path):
    """A transfer job's object list and manifest go to /dev/shm where it is writable: their
    removal on a disk file system waited for its journal while another job freed
    gigabytes (0.3-3.5 s of a transfer job's own time here); elsewhere tempfile's choice."""
    from cloudbench.records import small_files_dir

    assert small_files_dir(tmp_path) == str(tmp_path)
    assert small_files_dir(tmp_path / "absent") is None
    (tmp_path / "file").write_text("")
    assert small_files_dir(tmp_path / "file") is None  # not a directory
