"""The transfer record: one type, one builder per kind of record, checked when made, written
and read.

Each builder's keys are spelled out here as the records on disk have them (results of earlier
runs, the report, the tests that read records rely on them): a builder that gains or loses a
key fails its test, so the JSON a record writes only changes on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cloudbench.measure import record as transfer
from cloudbench.measure.clients.base import CopyJob, Outcome
from cloudbench.measure.record import RecordError, TransferRecord

pytestmark = pytest.mark.unit

KEYS = {
    "campaign": "c", "site": "edinburgh", "remote": "main", "direction": "upload",
    "strategy": "plain", "layout": "plain", "chunk_bytes": 0, "setting": "rclone-1x4",
    "tool": "rclone", "clients": 1, "repeat": 1,
}  # fmt: skip
HOST = {"host", "node_cores", "batch_job", "job_step", "ran_on"}


def _job(tmp_path: Path) -> CopyJob:
    return CopyJob(
        direction="upload",
        strategy="plain",
        src=str(tmp_path / "data"),
        dst="main:bucket/c/objects",
        objects=("a.bin", "b.bin"),
        expected_bytes=2_000_000,
        object_bytes=1_000_000,
        threads=4,
        remote_url="main:bucket",
        log_path=tmp_path / "log",
        workdir=tmp_path,
    )


def _copied(tmp_path: Path, outcome: Outcome | None, error: str | None = None):
    return transfer.copied(
        KEYS,
        _job(tmp_path),
        {"concurrency": 4, "transfers": 4} if outcome else None,
        outcome,
        started="2026-01-01T00:00:00.000000Z",
        epoch=1767225600.0,
        seconds=2.0,
        error=error,
        corrupt=False,
        stalled_since=None,
        exit_code=0 if outcome else None,
        version="1.75.2" if outcome else None,
        command="rclone copy ..." if outcome else None,
    )


def _outcome(**columns) -> Outcome:
    return Outcome(
        bytes_moved=2_000_000,
        files_moved=2,
        moved_from="rclone stats",
        series_from="rclone stats lines",
        points=(),
        error=None,
        retries=0,
        columns=columns,
    )


COPIED_KEYS = {
    *KEYS, *HOST, "files", "objects", "bytes_requested", "bytes_moved", "bytes_moved_from",
    "series_from", "started_utc", "started_epoch", "seconds", "mb_per_s", "status", "error",
    "retries", "rclone_exit", "rclone_version", "rclone_errors", "stalled_since_epoch",
    "tool_exit", "tool_version", "source", "destination", "command",
}  # fmt: skip


def test_a_timed_copys_record_holds_the_keys_records_always_had(tmp_path):
    rec = _copied(tmp_path, _outcome(rclone_exit=0, rclone_version="1.75.2", rclone_errors=0))
    row = rec.as_json()
    assert set(row) == COPIED_KEYS | {"concurrency", "transfers"}
    assert (row["status"], row["mb_per_s"], row["files"]) == ("ok", 1.0, None)
    assert (row["rclone_exit"], row["rclone_version"]) == (0, "1.75.2")
    json.dumps(row)  # what write_json writes


def test_the_rclone_columns_are_emptied_for_a_client_that_fills_none(tmp_path):
    """Another client's outcome names no rclone_* column: the builder empties them, the one
    place that does (a record of every client has them, as before)."""
    row = _copied(tmp_path, _outcome()).as_json()
    assert {k: row[k] for k in ("rclone_exit", "rclone_version", "rclone_errors")} == dict.fromkeys(
        ("rclone_exit", "rclone_version", "rclone_errors")
    )


def test_a_copy_that_could_not_be_planned_is_failed_with_its_threads(tmp_path):
    row = _copied(tmp_path, None, error="s5cmd not found").as_json()
    assert set(row) == COPIED_KEYS | {"concurrency"}
    assert (row["status"], row["error"], row["mb_per_s"], row["concurrency"]) == (
        "failed",
        "s5cmd not found",
        None,
        4,
    )


def test_not_measured_is_failed_with_nothing_moved():
    row = transfer.not_measured(KEYS, "store down", 4, 4_000_000).as_json()
    assert set(row) == {
        *KEYS, *HOST, "status", "error", "seconds", "mb_per_s", "files", "bytes_requested",
        "bytes_moved", "retries", "started_utc",
    }  # fmt: skip
    assert (row["status"], row["error"], row["bytes_moved"], row["seconds"]) == (
        "failed",
        "store down",
        0,
        None,
    )


def _client(k: int, status: str = "ok") -> dict:
    return {
        "client": k, "status": status, "host": f"n{k}", "started_epoch": 100.0 + k,
        "seconds": 1.0, "bytes_requested": 10, "bytes_moved": 10, "tool_version": "2.3.0",
        "concurrency": 2, "error": None if status == "ok" else "boom",
    }  # fmt: skip


def _group(status: str = "ok") -> dict:
    return {"status": status, "error": None, "started_epoch": 100.0, "seconds": 2.0,
            "mb_per_s": 10.0, "hosts": ["n0", "n1"]}  # fmt: skip


def test_a_groups_record_takes_what_its_clients_share_and_names_every_client():
    per = [_client(0), None]
    rec = transfer.group_measured(
        KEYS | {"clients": 2}, per, _group(), files=4, launcher="srun", launcher_exit=0,
        src="s", dst="d",
    )  # fmt: skip
    assert rec.host == "n0,n1"
    assert rec.tool_version == "2.3.0"  # shared, from the first client that reported
    assert [c["status"] for c in rec.per_client] == ["ok", "failed"]
    assert rec.per_client[1] == {"client": 1, "status": "failed", "error": "did not report"}
    assert {"launcher", "launcher_exit", "per_client", "hosts", "source"} <= set(rec.as_json())


def test_a_group_whose_launcher_failed_is_failed_though_its_clients_were_ok():
    rec = transfer.group_measured(
        KEYS | {"clients": 2}, [_client(0), _client(1)], _group(), files=4, launcher="srun",
        launcher_exit=3, src="s", dst="d",
    )  # fmt: skip
    assert (rec.status, rec.error, rec.mb_per_s) == ("failed", "client launcher exited 3", None)


def test_a_group_whose_client_was_killed_says_by_which_signal():
    """A client killed outright (kill -9, the OOM killer) leaves no record: the group's
    error says it did not report and how the launcher saw it end (user check: 'client 0
    did not report', nothing more)."""
    failed = _group("failed") | {"error": "client 0 did not report", "mb_per_s": None}
    for code, said in ((-9, "a client was killed by SIGKILL"), (137, "a client was killed by "
                       "SIGKILL"), (2, "the client launcher exited 2")):  # fmt: skip
        rec = transfer.group_measured(
            KEYS | {"clients": 2}, [None, _client(1)], failed, files=4, launcher="2 local "
            "processes", launcher_exit=code, src="s", dst="d",
        )  # fmt: skip
        assert (rec.status, rec.error) == ("failed", f"client 0 did not report ({said})")


def test_a_client_that_could_not_take_part_names_its_measurement_and_why():
    rec = transfer.client_failed(KEYS, 2, "cannot tell which client this is")
    assert (rec.client, rec.status, rec.error, rec.campaign) == (
        2,
        "failed",
        "cannot tell which client this is",
        "c",
    )


def test_failed_drops_the_rate():
    rec = transfer.failed(transfer.not_measured(KEYS, "x", 1, 1).with_(mb_per_s=5.0), "not whole")
    assert (rec.status, rec.error, rec.mb_per_s) == ("failed", "not whole", None)


def test_outran_twice_gives_up_only_on_a_second_timeout_at_the_same_limit():
    out = transfer.TIMED_OUT + " 30 s"
    rec = transfer.not_measured(KEYS, out, 1, 1)
    first = transfer.outran_twice(rec, 30.0, lambda: None, "r.json")
    assert first.timeout_s == 30.0 and first.get("gave_up") is None
    other = transfer.outran_twice(rec, 30.0, lambda: {"timeout_s": 20.0, "error": out}, "r.json")
    assert other.get("gave_up") is None
    again = transfer.outran_twice(rec, 30.0, lambda: {"timeout_s": 30.0, "error": out}, "r.json")
    assert again.gave_up is True
    assert again.error.startswith(out + "; timed out twice at 30 s")
    assert again.error.endswith("--forcerun r.json")

    asked = []
    transfer.outran_twice(rec.with_(error="refused"), 30.0, lambda: asked.append(1), "r.json")
    assert not asked  # an error that is no timeout never reads the last attempt


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"byte_moved": 1}, "unknown field 'byte_moved'"),
        ({"bytes_moved": "1"}, "bytes_moved='1' is not int"),
        ({"clients": True}, "clients=True is not int"),
        ({"attempts": 2}, "'attempts' is computed by aggregate"),
        ({"status": transfer.ABSENT}, "no 'status'"),
    ],
)
def test_a_misspelt_mistyped_or_missing_field_fails_with_one_line_naming_it(change, named):
    rec = transfer.not_measured(KEYS, "x", 1, 1)
    with pytest.raises(RecordError, match=named) as err:
        rec.with_(change)
    assert "\n" not in str(err.value)


def test_only_a_record_is_written_and_what_is_read_back_is_what_was_written(tmp_path):
    rec = transfer.not_measured(KEYS, "x", 1, 1)
    transfer.write(tmp_path / "r.json", rec)
    assert transfer.read(tmp_path / "r.json") == rec
    with pytest.raises(RecordError, match="must be a TransferRecord"):
        transfer.write(tmp_path / "d.json", rec.as_json())  # type: ignore[arg-type]


def test_reading_a_record_with_an_unknown_field_names_the_file_and_the_field(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(transfer.not_measured(KEYS, "x", 1, 1).as_json() | {"sped": 1}))
    with pytest.raises(RecordError, match=rf"{path}: transfer record: unknown field 'sped'"):
        transfer.read(path)


def test_a_record_of_an_earlier_version_is_read_and_says_so_in_one_line(tmp_path, capsys):
    path = tmp_path / "r.json"
    old = transfer.not_measured(KEYS, "x", 1, 1).as_json() | {"bytes_on_wire": 5}
    path.write_text(json.dumps(old))
    rec = transfer.read(path)
    assert rec.bytes_moved == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "earlier version" in err and "bytes_on_wire" in err


def test_every_field_a_record_holds_is_typed_for_its_check():
    for name, types in transfer._types().items():
        assert set(types) <= set(transfer._PYTHON_TYPES), name
    assert not {f for f in TransferRecord.__dataclass_fields__ if f in transfer.RETIRED}


def _on_disk(tmp_path: Path, row: dict, drop: str = "") -> dict:
    """A record where aggregate looks for it (without ``drop``), and the key aggregate looks
    it up by."""
    from cloudbench.campaign import paths
    from cloudbench.campaign.identity import LABELS, MeasurementId

    key = {k: row[k] for k in LABELS}
    path = Path(paths.transfer_record(tmp_path, MeasurementId.of(row)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({k: v for k, v in row.items() if k != drop}))
    return key


def test_aggregate_fails_on_a_misspelt_field_instead_of_dropping_it(tmp_path):
    from cloudbench.report.aggregate import transfers_table

    row = transfer.not_measured(KEYS, "x", 1, 1).as_json() | {"bytes_moveed": 0}
    with pytest.raises(RecordError, match="unknown field 'bytes_moveed'"):
        transfers_table(tmp_path, [_on_disk(tmp_path, row)])


def test_aggregate_leaves_blank_only_what_a_record_need_not_hold(tmp_path):
    from cloudbench.report.aggregate import transfers_table

    row = transfer.not_measured(KEYS, "x", 1, 1).as_json()
    table, missing = transfers_table(tmp_path, [_on_disk(tmp_path, row)])
    assert not missing and table.loc[0, "status"] == "failed"
    assert table["backend"].isna().all()  # a record that could not start names no backend
    with pytest.raises(RecordError, match="no 'tool', which every record holds"):
        transfers_table(tmp_path, [_on_disk(tmp_path, row, drop="tool")])


def test_copy_seen_bounds_the_copys_age_by_its_manifest_exchange():
    published = "2026-01-01T00:00:00.000000Z"
    seen = transfer.copy_seen({"uploaded_by": {"finished_utc": published}})
    assert seen["copy_published_utc"] == published and seen["copy_age_s"] > 0
    assert transfer.copy_seen({})["copy_age_s"] is None  # a manifest that names no upload
