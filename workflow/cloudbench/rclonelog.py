"""The one place that reads rclone's JSON logs (``--use-json-log --stats 1s -v``).

Provisional version; see tests/test_rclonelog.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

_ATTEMPT_RE = re.compile(r"Attempt (\d+)/(\d+) (failed|succeeded)")


@dataclass(frozen=True)
class StatsSample:
    elapsed: float
    time_utc: str
    bytes: int
    total_bytes: int
    transfers: int
    total_transfers: int
    errors: int
    retry_error: bool
    speed: float


@dataclass(frozen=True)
class RcloneLog:
    samples: tuple[StatsSample, ...]
    final: StatsSample | None
    errors: tuple[str, ...]
    retries: int
    low_level_retries: int
    last_error: str | None
    version: str | None
    unparsed_lines: int = 0


def parse_rclone_log(lines: Iterable[str]) -> RcloneLog:
    samples, errors = [], []
    retries = low = bad = 0
    last_error = version = None
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        msg = str(obj.get("msg", ""))
        stats = obj.get("stats")
        if isinstance(stats, dict):
            samples.append(
                StatsSample(
                    elapsed=float(stats.get("elapsedTime", 0.0)),
                    time_utc=str(obj.get("time", "")),
                    bytes=int(stats.get("bytes", 0)),
                    total_bytes=int(stats.get("totalBytes", 0)),
                    transfers=int(stats.get("transfers", 0)),
                    total_transfers=int(stats.get("totalTransfers", 0)),
                    errors=int(stats.get("errors", 0)),
                    retry_error=bool(stats.get("retryError", False)),
                    speed=float(stats.get("speed", 0.0)),
                )
            )
            if stats.get("lastError"):
                last_error = str(stats["lastError"])
            continue
        m = _ATTEMPT_RE.search(msg)
        if m and m.group(3) == "failed" and int(m.group(1)) < int(m.group(2)):
            retries += 1
        if "Low level retry" in msg:
            low += 1
        if obj.get("level") in ("error", "critical"):
            errors.append(msg)
            last_error = msg
        if version is None and "Version" in msg and "starting" in msg:
            v = re.search(r'v(\d+\.\d+\.\d+)', msg)
            version = v.group(1) if v else None
    return RcloneLog(tuple(samples), samples[-1] if samples else None, tuple(errors), retries,
                     low, last_error, version, bad)


def rate_series(samples: Iterable[StatsSample]) -> list[tuple[float, int, float]]:
    out: list[tuple[float, int, float]] = []
    prev_t, prev_b = 0.0, 0
    for s in samples:
        dt = s.elapsed - prev_t
        if dt <= 0:
            continue
        out.append((s.elapsed, s.bytes, max(0.0, (s.bytes - prev_b) / dt)))
        prev_t, prev_b = s.elapsed, s.bytes
    return out
