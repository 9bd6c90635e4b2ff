"""The data steps at the upload site: generate, checksum, chunk, and stage, the index of what
they made (one function per rule).

Apart from :mod:`cloudbench.steps` so that a data job imports only what it uses (no rclone,
no YAML, no progress display): one Python start-up per job is the workflow's main cost on
small files. Every function writes its outputs atomically and returns nothing.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudbench.data.checksums import hash_stream, xxh128sum_line
from cloudbench.data.chunking import chunk_count, chunk_index_width, chunks_of, split_file
from cloudbench.data.generate import generate_file
from cloudbench.records import read_json, timed_step, write_json
from cloudbench.sizes import size_label


class StepError(RuntimeError):
    """A step that cannot go on; the message says what to do."""


# --- data steps at the upload site -----------------------------------------------------------


@dataclass(frozen=True)
class DatasetSpec:
    """What fixes the bytes of every generated file: the same spec gives the same bytes."""

    campaign: str
    site: str
    size: int
    seed: str

    def context(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "site": self.site}

    @classmethod
    def from_json(cls, text: str) -> DatasetSpec:
        return cls(**json.loads(text))


def ensure_file(
    dataset: DatasetSpec, dataset_dir: Path, name: str, expected_xxh128: str | None = None
) -> bool:
    """Make sure ``dataset_dir/name`` is the generated file; True if it had to be regenerated.

    Bulk data is removed once every upload has run, and a later rerun (a failed upload, a
    new chunk size) regenerates it. The keystream is seeded, so the bytes are the same; when
    the file's XXH128 is already known, the regenerated file is checked against it, so a
    changed generator can never send data that does not match the manifest.
    """
    path = dataset_dir / name
    if path.is_file() and path.stat().st_size == dataset.size:
        return False
    generate_file(path, dataset.size, dataset.seed)
    if expected_xxh128 is not None:
        digest, _, _ = hash_stream([path])
        if digest != expected_xxh128:
            path.unlink()
            raise StepError(
                f"{name}: regenerated file has XXH128 {digest}, the campaign recorded "
                f"{expected_xxh128}; the generator or dataset.seed changed since the checksums "
                "were taken: rerun with --forcerun generate"
            )
    return True


def ensure_chunks(
    dataset: DatasetSpec,
    dataset_dir: Path,
    chunks_root: Path,
    name: str,
    chunk_bytes: int,
    expected_xxh128: str | None = None,
) -> bool:
    """Make sure ``name``'s chunks of ``chunk_bytes`` exist; True if they had to be made."""
    outdir = chunks_root / size_label(chunk_bytes) / name
    count = chunk_count(dataset.size, chunk_bytes)
    if outdir.is_dir():
        parts = chunks_of(outdir, name)
        if len(parts) == count and sum(p.stat().st_size for p in parts) == dataset.size:
            return False
    ensure_file(dataset, dataset_dir, name, expected_xxh128)
    tmp = outdir.with_name(f".{name}.{os.getpid()}.part")
    shutil.rmtree(tmp, ignore_errors=True)
    split_file(dataset_dir / name, tmp, chunk_bytes, chunk_index_width(dataset.size, chunk_bytes))
    shutil.rmtree(outdir, ignore_errors=True)
    tmp.rename(outdir)
    return True


def generate(dataset: DatasetSpec, dataset_dir: Path, name: str, record: Path) -> None:
    with timed_step("generate") as t:
        generate_file(dataset_dir / name, dataset.size, dataset.seed)
        t.nbytes = dataset.size
    write_json(record, t.record(**dataset.context(), item=name))


def checksum(
    dataset: DatasetSpec,
    dataset_dir: Path,
    name: str,
    chunk_sizes: Sequence[int],
    out_sum: Path,
    out_chunks: Path,
    record: Path,
) -> None:
    ensure_file(dataset, dataset_dir, name)
    data = dataset_dir / name
    with timed_step("checksum") as t:
        digest, per_chunk, nbytes = hash_stream([data], chunk_sizes)
        t.nbytes = nbytes
    out_sum.parent.mkdir(parents=True, exist_ok=True)
    out_sum.write_text(xxh128sum_line(digest, data.name))
    write_json(
        out_chunks,
        {
            "file": data.name,
            "bytes": nbytes,
            "xxh128": digest,
            "chunks": {str(c): d for c, d in per_chunk.items()},
        },
    )
    write_json(record, t.record(**dataset.context(), item=data.name))


def chunk(
    dataset: DatasetSpec,
    dataset_dir: Path,
    name: str,
    chunk_bytes: int,
    chunks_root: Path,
    record: Path,
) -> None:
    ensure_file(dataset, dataset_dir, name)
    outdir = chunks_root / size_label(chunk_bytes) / name
    with timed_step("chunk") as t:
        if outdir.exists():
            shutil.rmtree(outdir)
        digests: list[str] = []
        parts = split_file(
            dataset_dir / name,
            outdir,
            chunk_bytes,
            chunk_index_width(dataset.size, chunk_bytes),
            digests,
        )
        t.nbytes = sum(p.stat().st_size for p in parts)
        t.extra["chunks"] = len(parts)
        t.extra["chunk_xxh128"] = digests  # the copy manifest's per-chunk digests
    write_json(record, t.record(**dataset.context(), item=name, chunk_bytes=chunk_bytes))


def generate_small_files(
    dataset: DatasetSpec,
    dataset_dir: Path,
    names: Sequence[str],
    out_checksums: Path,
    record: Path,
) -> None:
    """Generate and checksum every file of a many-small-files dataset in one job.

    A job per file costs a Python start-up (and, in batch mode, a queue wait) per file,
    far more than writing 64 KiB; here each file is written, then hashed while it is still
    in the page cache. One checksums file lists them all (``{"files": [...]}``, each entry
    as ``checksum`` writes it for one file).
    """
    entries = []
    with timed_step("generate+checksum") as t:
        for name in names:
            path = dataset_dir / name
            generate_file(path, dataset.size, dataset.seed)
            digest, _, nbytes = hash_stream([path])
            entries.append({"file": name, "bytes": nbytes, "xxh128": digest, "chunks": {}})
            t.nbytes += nbytes
        t.extra["files"] = len(entries)
    write_json(out_checksums, {"files": entries})
    rec = t.record(**dataset.context(), item=f"{len(entries)} files")
    rec["files_per_s"] = round(len(entries) / t.seconds, 3) if t.seconds > 0 else None
    write_json(record, rec)


def release_upload_data(upload_data: Path) -> None:
    """Remove the generated files and chunks: every upload has run (regenerated on demand)."""
    for sub in ("dataset", "chunks"):
        shutil.rmtree(upload_data / sub, ignore_errors=True)


def file_hashes(checksum_jsons: Sequence[Path]) -> dict[str, dict[str, Any]]:
    """Each file's hashes, from per-file checksum records, a staged index of them, or a
    small-files dataset's one checksums file (``generate_small_files``): both list
    ``files``."""
    out = {}
    for p in checksum_jsons:
        d = read_json(p)
        for entry in d["files"] if "files" in d else [d]:
            out[entry["file"]] = entry
    return out


STAGED_FORMAT = "cloudbench-staged/1"


def stage(checksum_jsons: Sequence[Path], out: Path, step_records: Sequence[Path] = ()) -> None:
    """One record saying a layout's data steps are done, with every file's hashes: the
    whole-file XXH128 from ``checksum``, and for a chunked layout each chunk's from the
    ``chunk`` step records (their ``chunk_xxh128``, taken while splitting)."""
    hashes = file_hashes(checksum_jsons)
    for p in step_records:
        rec = read_json(p)
        if rec.get("step") == "chunk" and "chunk_xxh128" in rec:
            entry = hashes[rec["item"]]
            entry["chunks"] = {
                **entry.get("chunks", {}),
                str(rec["chunk_bytes"]): rec["chunk_xxh128"],
            }
    write_json(out, {"format": STAGED_FORMAT, "files": [hashes[n] for n in sorted(hashes)]})
