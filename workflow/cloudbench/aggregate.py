"""Every record of a campaign into three tables: transfers, per-second series, and steps.

A download's status comes from its transfer and from ``verify``: a transfer that moved every
byte but whose data does not match the manifest is ``corrupt``, never ``ok``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from cloudbench import paths

TRANSFER_COLUMNS = [
    "campaign", "site", "remote", "direction", "strategy", "layout", "chunk_bytes", "repeat",
    "status", "mb_per_s", "seconds", "started_utc", "files", "objects", "bytes_requested",
    "bytes_moved", "transfers", "objects_in_flight", "streams_per_object", "connections",
    "backend", "backend_concurrency", "retries", "error", "rclone_version", "host",
    "node_cores",
]  # fmt: skip
STEP_COLUMNS = [
    "campaign", "site", "step", "item", "remote", "repeat", "chunk_bytes", "bytes",
    "started_utc", "seconds", "mb_per_s", "digest_from", "host", "node_cores",
]  # fmt: skip
SERIES_COLUMNS = [
    "campaign", "site", "remote", "direction", "strategy", "layout", "repeat",
    "elapsed_s", "bytes", "mb_per_s",
]  # fmt: skip


def _record_path(results: Path, key: dict) -> Path:
    return Path(
        paths.transfer_record(
            results, key["site"], key["direction"], key["remote"], key["layout"], key["repeat"]
        )
    )


def _load(path: Path) -> dict:
    with open(path) as fh:
        return json.load(fh)


def transfers_table(results: Path, expected: Iterable[dict]) -> tuple[pd.DataFrame, list[dict]]:
    """Rows for every expected measurement that has a record; the rest are returned as missing."""
    rows, missing = [], []
    for key in expected:
        path = _record_path(results, key)
        if not path.exists():
            missing.append(key)
            continue
        rec = _load(path)
        if key["direction"] == "download":
            vpath = Path(
                paths.verify_record(
                    results, key["site"], key["remote"], key["layout"], key["repeat"]
                )
            )
            if rec["status"] == "ok" and vpath.exists():
                ver = _load(vpath)
                if ver["status"] != "ok":
                    rec["status"] = ver["status"]
                    rec["mb_per_s"] = None
                    rec["error"] = "; ".join(ver["problems"])
            elif rec["status"] == "ok":
                rec["status"] = "unverified"
        rows.append(rec)
    df = pd.DataFrame(rows, columns=TRANSFER_COLUMNS)
    return df, missing


def series_table(results: Path, transfers: pd.DataFrame) -> pd.DataFrame:
    frames = []
    for rec in transfers.to_dict("records"):
        path = Path(paths.series(_record_path(results, rec)))
        if not path.exists():
            continue
        s = pd.read_csv(path, sep="\t")
        for col in ("campaign", "site", "remote", "direction", "strategy", "layout", "repeat"):
            s[col] = rec[col]
        frames.append(s)
    if not frames:
        return pd.DataFrame(columns=SERIES_COLUMNS)
    return pd.concat(frames, ignore_index=True)[SERIES_COLUMNS]


def expected_steps(results: Path, plan: dict) -> list[Path]:
    """The step records the current campaign implies, and no others: records of chunk sizes
    or repeats since removed from the campaign stay on disk but out of the tables."""
    up = plan["upload_site"]
    out = []
    for name in plan["files"]:
        out.append(paths.data_step_record(results, up, "generate", name))
        out.append(paths.data_step_record(results, up, "checksum", name))
        out += [paths.data_step_record(results, up, "chunk", name, c) for c in plan["chunks"]]
    for m in plan["measurements"]:
        if m["direction"] != "download":
            continue
        key = (results, m["site"], m["remote"], m["layout"], m["repeat"])
        if m["layout"].startswith("chunked-"):
            out.append(paths.reassemble_record(*key))
        out.append(paths.verify_record(*key))
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


def write_tables(results: Path, plan: dict, out_dir: Path) -> dict[str, Path]:
    """``plan``: the campaign's expected ``measurements`` (site, direction, remote, layout,
    repeat), its dataset ``files``, chunk size labels ``chunks`` and ``upload_site``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    transfers, missing = transfers_table(results, plan["measurements"])
    paths = {
        "transfers": out_dir / "transfers.tsv",
        "timeseries": out_dir / "timeseries.tsv",
        "steps": out_dir / "steps.tsv",
        "missing": out_dir / "missing.tsv",
    }
    transfers.to_csv(paths["transfers"], sep="\t", index=False)
    series_table(results, transfers).to_csv(paths["timeseries"], sep="\t", index=False)
    steps_table(results, plan).to_csv(paths["steps"], sep="\t", index=False)
    pd.DataFrame(missing, columns=["site", "direction", "remote", "layout", "repeat"]).to_csv(
        paths["missing"], sep="\t", index=False
    )
    return paths
