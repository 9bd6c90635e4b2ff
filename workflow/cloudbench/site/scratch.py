"""What a campaign leaves in a site's scratch, said at the end of every run.

Bulk data lives in three places under ``<scratch>/<campaign>/``: the generated files and
their chunks at the upload site (``dataset/``, ``chunks/``: released once every upload of
the campaign has run, by ``manifest`` after the first rounds and by ``precision-final``
after the last round of ``repeats: auto``), and each download (``download/``: removed by
``verify`` once checked, or when the attempt fails). A stopped run leaves what the
measurements still to come need; the run's last lines say what is kept, where, and why,
so a full scratch is never a surprise weeks later.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

BULK = {
    "dataset": "the generated files, for uploads still to measure",
    "chunks": "the generated chunks, for uploads still to measure",
    "download": "downloads not yet verified",
}


@dataclass(frozen=True)
class Left:
    path: Path
    files: int
    bytes: int
    why: str


def bulk_left(scratch_dirs: Iterable[str | Path], campaign: str) -> list[Left]:
    """Bulk data of ``campaign`` under each site's scratch: files and bytes per place."""
    found = []
    for scratch in dict.fromkeys(str(s) for s in scratch_dirs):
        for sub, why in BULK.items():
            root = Path(scratch) / campaign / sub
            files = size = 0
            for dirpath, _dirs, names in os.walk(root):
                for n in names:
                    try:
                        size += os.lstat(os.path.join(dirpath, n)).st_size
                    except OSError:
                        continue
                    files += 1
            if files:
                found.append(Left(root, files, size, why))
    return found


def describe(left: list[Left], finished: bool) -> list[str]:
    """One line per place that still holds bulk data, or one saying none is left."""
    from cloudbench.measure.progress import human_bytes

    if not left:
        return ["scratch: no bulk data of this campaign is left at this run's sites"]
    then = (
        "`snakemake cleanup --cores 1` with this campaign removes it"
        if finished
        else "the rerun uses it, then removes it"
    )
    return [
        f"scratch: kept {x.path} ({x.files} file(s), {human_bytes(x.bytes)}): {x.why}; {then}"
        for x in left
    ]
