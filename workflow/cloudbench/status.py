"""The end of a run: say plainly what did not work, and clean up on request."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from cloudbench import rclone as rc

BAD = ("failed", "corrupt", "unverified")


def failures(transfers: pd.DataFrame) -> list[dict[str, Any]]:
    bad = transfers[transfers["status"].isin(BAD)]
    return bad.to_dict("records")


def describe(rows: list[dict[str, Any]]) -> str:
    lines = [f"{len(rows)} measurement(s) not ok (a rerun measures failed ones again):"]
    for r in rows:
        lines.append(
            f"  {r['status']}: {r['site']} {r['direction']} {r['remote']} {r['layout']} "
            f"r{r['repeat']}: {r.get('error')}"
        )
    return "\n".join(lines)


def cleanup(spec: dict[str, Any]) -> None:
    """Remove the campaign's bulk data from the remotes and scratch; keep every result."""
    binary = rc.find_rclone()
    for prefix in spec["remote_data"]:
        res = rc.run_helper(
            rc.helper_command(binary, "purge", prefix, extra_flags=tuple(spec["flags"]))
        )
        ok = res.returncode == 0 or "directory not found" in res.stderr
        print(f"{'removed' if ok else 'FAILED to remove'} {prefix}")
        if not ok:
            raise RuntimeError(res.stderr.strip()[-300:])
    for path in spec["scratch"]:
        if Path(path).exists():
            shutil.rmtree(path)
        print(f"removed {path}")
