"""Every record of a campaign into three tables: transfers, per-second series, and steps.

A download's status comes from its transfer and from ``verify``: a transfer that moved every
byte but whose data does not match the manifest is ``corrupt``, never ``ok``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from cloudbench.campaign import paths, precision, tune
from cloudbench.campaign.identity import KEYS, LABELS, MeasurementId, keys_without
from cloudbench.measure import record as transfer
from cloudbench.measure.rclonelog import longest_stall, parse_rclone_log
from cloudbench.measure.record import TRANSFER_COLUMNS, WHOLE_TRANSFER_COLUMNS
from cloudbench.report import limits, tuned
from cloudbench.report.outputs import TABLES

# One row per client of a measurement with several clients (its row in transfers.tsv is the
# aggregate); start_offset_s is the client's start after the group's first, both on the
# group's one clock (client 0's node), clock_offset_s how far that clock is ahead of the
# client's node, within clock_uncertainty_s (cloudbench.measure.group.measure_offset).
CLIENT_TABLE_COLUMNS = [
    "campaign", *KEYS, "clients", "concurrency", "client", "host", "batch_job", "job_step",
    "status", "mb_per_s", "seconds", "start_offset_s", "started_utc", "clock_offset_s",
    "clock_uncertainty_s", "files", "objects", "bytes_requested", "bytes_moved", "connections",
    "retries", "error",
]  # fmt: skip
STEP_COLUMNS = [
    "campaign", "site", "step", "item", "setting", "remote", "repeat", "chunk_bytes", "bytes",
    "started_utc", "seconds", "mb_per_s", "digest_from", "host", "node_cores",
]  # fmt: skip
# A transfer's series carries its identity (less the tool, which the setting names)
SERIES_COLUMNS = ["campaign", *keys_without("tool"), "elapsed_s", "bytes", "mb_per_s"]


def _record_path(results: Path, key: dict) -> Path:
    return Path(paths.transfer_record(results, MeasurementId.of(key)))


def _load(path: Path) -> dict:
    with open(path) as fh:
        return json.load(fh)


def attempt_totals(record: Path, rec: dict) -> dict[str, int | None]:
    """How many times a measurement ran and the bytes all its runs moved.

    The store bills every byte, also of a failed, killed or superseded attempt, and only the
    current one is the row: ``<record>.attempts/`` keeps each recorded attempt (the current
    one too) and the rclone log of each attempt killed before its record (its last stats
    line: the bytes moved by then, up to a second short). A record from before attempts
    were kept counts as one attempt.
    """
    folder = paths.attempts_dir(record)
    recorded = sorted(folder.glob("*.json")) if folder.is_dir() else []
    killed = sorted(folder.glob("*.unrecorded.*")) if folder.is_dir() else []
    if not recorded and not killed:
        return {"attempts": 1, "bytes_moved_all_attempts": rec.get("bytes_moved")}
    # a failed attempt that reported no bytes moved none the store could bill (it failed
    # before its copy, or its client counts nothing): 0, not an unknown that blanks the sum
    moved = [
        r.get("bytes_moved") if r.get("bytes_moved") is not None or r.get("status") == "ok" else 0
        for r in map(_load, recorded)
    ]
    for log in killed:
        final = parse_rclone_log(log.read_text(errors="replace").splitlines()).final
        moved.append(final.bytes if final else 0)
    # a killed attempt of N clients leaves N logs, each named after its client's log
    per_log = Counter(p.name.split(".unrecorded.", 1)[1] for p in killed)
    runs = len(recorded) + max(per_log.values(), default=0)
    total = None if None in moved else int(sum(moved))
    return {"attempts": runs, "bytes_moved_all_attempts": total}


def stall(record: Path) -> float | None:
    """The longest stretch without progress in a transfer's per-second series (None: no
    series, e.g. a tool that reports none)."""
    path = Path(paths.series(record))
    if not path.exists():
        return None
    s = pd.read_csv(path, sep="\t")
    return longest_stall(s["elapsed_s"].tolist(), s["bytes"].tolist()) if len(s) else None


def transfers_table(results: Path, expected: Iterable[dict]) -> tuple[pd.DataFrame, list[dict]]:
    """Rows for every expected measurement that has a record; the rest are returned as missing."""
    rows, missing = [], []
    for key in expected:
        path = _record_path(results, key)
        if not path.exists():
            missing.append(key)
            continue
        rec = transfer.read(path).as_json()  # a field it cannot hold fails here, named
        if key["direction"] == "download":
            vpath = Path(paths.verify_record(results, MeasurementId.of(key)))
            if rec["status"] == "ok" and vpath.exists():
                ver = _load(vpath)
                if ver["status"] != "ok":
                    rec["status"] = ver["status"]
                    rec["mb_per_s"] = None
                    rec["error"] = "; ".join(ver["problems"])
            elif rec["status"] == "ok":
                rec["status"] = "unverified"
        rows.append(
            rec
            | per_object_rates(rec)
            | attempt_totals(path, rec)
            | {"longest_stall_s": stall(path)}
            | limits.columns(path, rec)
        )
    df = pd.DataFrame(rows, columns=TRANSFER_COLUMNS)
    for col in WHOLE_TRANSFER_COLUMNS:  # blank where not applicable, never "1.0"
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
    df.loc[df["chunk_bytes"] == 0, "chunk_bytes"] = pd.NA  # a whole-file layout: no chunk
    return df, missing


def per_object_rates(rec: dict) -> dict:
    """files/s (files / wall seconds) and seconds per object (wall seconds / objects) of an
    ok transfer: what many small files cost, where MB/s alone hides it."""
    seconds, ok = rec.get("seconds"), rec.get("status") == "ok"
    if not ok or not seconds:
        return {"files_per_s": None, "s_per_object": None}
    files, objects = rec.get("files") or 0, rec.get("objects") or 0
    return {
        "files_per_s": round(files / seconds, 3) if files else None,
        "s_per_object": round(seconds / objects, 6) if objects else None,
    }


def series_table(results: Path, transfers: pd.DataFrame) -> pd.DataFrame:
    frames = []
    for rec in transfers.to_dict("records"):
        path = Path(paths.series(_record_path(results, rec)))
        if not path.exists():
            continue
        s = pd.read_csv(path, sep="\t")
        for col in SERIES_COLUMNS[: SERIES_COLUMNS.index("repeat") + 1]:
            s[col] = rec[col]
        frames.append(s)
    if not frames:
        return pd.DataFrame(columns=SERIES_COLUMNS)
    return pd.concat(frames, ignore_index=True)[SERIES_COLUMNS]


def clients_table(transfers: pd.DataFrame, results: Path) -> pd.DataFrame:
    """Every client of every measurement with several clients, one row each."""
    rows = []
    for key in transfers.to_dict("records"):
        if not key.get("clients") or int(key["clients"]) < 2:
            continue
        rec = transfer.read(Path(_record_path(results, key)))  # checked, as every row's
        first = rec.get("started_epoch")
        for c in rec.get("per_client") or []:
            start = c.get("started_epoch")
            offset = round(start - first, 6) if start is not None and first else None
            rows.append(
                {**{k: key[k] for k in CLIENT_TABLE_COLUMNS if k in key}, **c}
                | {"start_offset_s": offset}
            )
    df = pd.DataFrame(rows, columns=CLIENT_TABLE_COLUMNS)
    for col in ("files", "objects", "bytes_requested", "bytes_moved", "connections", "retries"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")  # never "25165824.0"
    return df


def expected_steps(results: Path, plan: dict) -> list[Path]:
    """The step records the current campaign implies, and no others: records of chunk sizes
    or repeats since removed from the campaign stay on disk but out of the tables."""
    up = plan["upload_site"]
    out = []
    if plan.get("small_files"):  # one job made the whole dataset (files is then empty)
        out.append(paths.dataset_step_record(results, up, "generate"))
    for name in plan["files"]:
        out.append(paths.data_step_record(results, up, "generate", name))
        out.append(paths.data_step_record(results, up, "checksum", name))
        out += [paths.data_step_record(results, up, "chunk", name, c) for c in plan["chunks"]]
    for m in plan["measurements"]:
        if m["direction"] != "download":
            continue
        key = MeasurementId.of(m)
        if m["layout"].startswith("chunked-"):
            out.append(paths.reassemble_record(results, key))
        out.append(paths.verify_record(results, key))
    return [Path(p) for p in out]


def steps_table(results: Path, plan: dict) -> pd.DataFrame:
    rows = [_load(p) for p in expected_steps(results, plan) if p.exists()]
    df = pd.DataFrame(rows)
    for col in STEP_COLUMNS:
        if col not in df:
            df[col] = None
    for col in ("repeat", "chunk_bytes", "bytes"):  # whole numbers, blank where not applicable
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
    return df[STEP_COLUMNS]


def probes_table(results: Path, sites: Iterable[str]) -> pd.DataFrame:
    """Every latency probe record of these sites (measured here or pulled), one row each
    (``latency.probe_table``: skipped probes keep their row with empty times)."""
    from cloudbench.report import latency

    records = []
    for site in sorted(set(sites)):
        for path in sorted(Path(paths.sites_dir(results), site, "probe").glob("*/*.json")):
            records.append(_load(path))
    return latency.probe_table(records)


def precision_table(results: Path, plan: dict) -> pd.DataFrame:
    """How ``repeats: auto`` ended at each site of the plan (its precision.json, measured
    here or pulled): one row per identity, none when the campaign's repeats are fixed."""
    rows = []
    if plan.get("precision_first"):
        for site in sorted({m["site"] for m in plan["measurements"]}):
            path = Path(paths.precision_final(results, site))
            if path.exists():
                rows += _load(path)["decisions"]
    return pd.DataFrame(rows, columns=list(precision.COLUMNS))


def _new(labels: list[dict], planned: list[dict]) -> list[dict]:
    """The labels not planned already (a search's first round is in the plan)."""
    seen = {tuple(sorted(m.items())) for m in planned}
    out = []
    for m in labels:
        key = tuple(sorted(m.items()))
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


def write_tables(results: Path, plan: dict, out_dir: Path) -> dict[str, Path]:
    """``plan``: the campaign's expected ``measurements`` (site, direction, remote, layout,
    repeat), its dataset ``files``, chunk size labels ``chunks`` and ``upload_site``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    decided = precision_table(results, plan)
    later = precision.later_rounds(decided.to_dict("records"), plan.get("precision_first") or 0)
    found = tuned.states(results, {m["site"] for m in plan["measurements"]})
    later += _new(
        [m for state in found for m in tune.measured_labels(state, plan.get("tune_repeats") or 0)],
        plan["measurements"],
    )
    transfers, missing = transfers_table(results, [*plan["measurements"], *later])
    paths = {name: out_dir / t.path for name, t in TABLES.items()}
    transfers.to_csv(paths["transfers"], sep="\t", index=False)
    series_table(results, transfers).to_csv(paths["timeseries"], sep="\t", index=False)
    clients_table(transfers, results).to_csv(paths["clients"], sep="\t", index=False)
    steps_table(results, plan).to_csv(paths["steps"], sep="\t", index=False)
    sites = {m["site"] for m in plan["measurements"]}
    probes_table(results, sites).to_csv(paths["probes"], sep="\t", index=False)
    decided.to_csv(paths["precision"], sep="\t", index=False)
    tuned.tuned_table(found).to_csv(paths["tuned"], sep="\t", index=False)
    # a missing measurement as the plan names it: its labels
    pd.DataFrame(missing, columns=LABELS).to_csv(paths["missing"], sep="\t", index=False)
    return paths
