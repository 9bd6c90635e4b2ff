"""Every record of a campaign into three tables: transfers, per-second series, and steps.

A download's status comes from its transfer and from ``verify``: a transfer that moved every
byte but whose data does not match the manifest is ``corrupt``, never ``ok``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

TRANSFER_COLUMNS = [
    "campaign", "site", "remote", "direction", "strategy", "chunk_bytes", "transfers",
    "streams", "repeat", "files", "bytes", "started_utc", "seconds", "mb_per_s", "status",
    "retries", "low_level_retries", "rclone_version", "host", "node_cores", "layout", "error",
]  # fmt: skip
STEP_COLUMNS = [
    "campaign", "site", "step", "item", "remote", "repeat", "chunk_bytes", "bytes",
    "started_utc", "seconds", "mb_per_s", "host", "node_cores",
]  # fmt: skip
SERIES_COLUMNS = [
    "campaign", "site", "remote", "direction", "strategy", "layout", "repeat",
    "elapsed_s", "bytes", "mb_per_s",
]  # fmt: skip


def sites_dir(results: Path) -> Path:
    return results / "sites"


def transfer_record_path(
    results: Path, site: str, direction: str, remote: str, layout: str, repeat: int
) -> Path:
    """One place names where a transfer's record lives; rules and aggregation agree on it."""
    return sites_dir(results) / site / "transfers" / direction / remote / layout / f"r{repeat}.json"


def verify_record_path(results: Path, site: str, remote: str, layout: str, repeat: int) -> Path:
    return sites_dir(results) / site / "verify" / remote / layout / f"r{repeat}.json"


def series_path(record: Path) -> Path:
    return record.with_suffix(".series.tsv")


def _load(path: Path) -> dict:
    with open(path) as fh:
        return json.load(fh)


def transfers_table(results: Path, expected: Iterable[dict]) -> tuple[pd.DataFrame, list[dict]]:
    """Rows for every expected measurement that has a record; the rest are returned as missing."""
    rows, missing = [], []
    for key in expected:
        path = transfer_record_path(
            results, key["site"], key["direction"], key["remote"], key["layout"], key["repeat"]
        )
        if not path.exists():
            missing.append(key)
            continue
        rec = _load(path)
        if key["direction"] == "download":
            vpath = verify_record_path(
                results, key["site"], key["remote"], key["layout"], key["repeat"]
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
        path = series_path(
            transfer_record_path(
                results, rec["site"], rec["direction"], rec["remote"], rec["layout"], rec["repeat"]
            )
        )
        if not path.exists():
            continue
        s = pd.read_csv(path, sep="\t")
        for col in ("campaign", "site", "remote", "direction", "strategy", "layout", "repeat"):
            s[col] = rec[col]
        frames.append(s)
    if not frames:
        return pd.DataFrame(columns=SERIES_COLUMNS)
    return pd.concat(frames, ignore_index=True)[SERIES_COLUMNS]


def steps_table(results: Path) -> pd.DataFrame:
    rows = []
    for path in sorted(sites_dir(results).glob("*/steps/**/*.json")):
        rows.append(_load(path))
    for path in sorted(sites_dir(results).glob("*/verify/**/*.json")):
        rows.append(_load(path))
    df = pd.DataFrame(rows)
    for col in STEP_COLUMNS:
        if col not in df:
            df[col] = None
    return df[STEP_COLUMNS]


def write_tables(results: Path, expected: list[dict], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    transfers, missing = transfers_table(results, expected)
    paths = {
        "transfers": out_dir / "transfers.tsv",
        "timeseries": out_dir / "timeseries.tsv",
        "steps": out_dir / "steps.tsv",
        "missing": out_dir / "missing.tsv",
    }
    transfers.to_csv(paths["transfers"], sep="\t", index=False)
    series_table(results, transfers).to_csv(paths["timeseries"], sep="\t", index=False)
    steps_table(results).to_csv(paths["steps"], sep="\t", index=False)
    pd.DataFrame(missing, columns=["site", "direction", "remote", "layout", "repeat"]).to_csv(
        paths["missing"], sep="\t", index=False
    )
    return paths
