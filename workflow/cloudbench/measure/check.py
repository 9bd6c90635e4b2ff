"""The checks after a download: reassemble a chunked copy's files, verify every file's
XXH128 against the copy's manifest (one function per rule of rules/check.smk).

Apart from :mod:`cloudbench.steps` so that a check job imports only what it uses (no client,
no rclone, no campaign model): one Python start-up per job is most of what a check of a small
copy costs. Every function writes its outputs atomically and returns nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cloudbench.data.checksums import hash_stream
from cloudbench.data.chunking import chunks_of, concatenate
from cloudbench.data.steps import StepError
from cloudbench.measure.attempts import keep_attempt, last_attempt
from cloudbench.records import read_json, timed_step, write_json

if TYPE_CHECKING:
    from cloudbench.campaign.spec import TransferSpec


def _check_keys(spec: TransferSpec) -> dict[str, Any]:
    """What a reassemble or verify record says it checked: which copy of which setting."""
    return {
        "item": spec.layout_label,
        "setting": spec.setting_label,
        "chunk_bytes": spec.layout.chunk_bytes or None,
        "repeat": spec.repeat,
        "remote": spec.remote,
    }


def _repeat_last_check(record: Path, step: str, local: Path) -> bool:
    """A forced rerun of a check whose downloaded data is gone repeats its last result.

    ``verify`` removes a download once it is checked, so ``--forcerun verify`` (or
    ``reassemble``) finds nothing to read. Rather than turn a good measurement into a
    missing-data failure, the step writes its last kept result again, saying so; with no
    earlier result it refuses, naming the command that measures again.
    """
    if local.exists():
        return False
    last = last_attempt(record)
    if last is None:
        raise StepError(
            f"{step}: the downloaded data ({local}) is gone and this step never ran on it; "
            "measure the download again: --forcerun download"
        )
    last["repeated"] = (
        f"data removed after the {step} of {last.get('started_utc')}; its result is repeated "
        "(measure again with --forcerun download)"
    )
    write_json(record, last)
    return True


def reassemble(spec: TransferSpec, manifest: Path, record: Path, context: dict[str, Any]) -> None:
    """Concatenate each file's chunks in index order into the file, in place of its chunks.

    Each file's XXH128 is computed in the same pass, from the new file's bytes read back right
    behind the kernel's copy (``concatenate``), and noted beside the file (bound to its inode,
    size and times), so ``verify`` need not read the file a second time.  The consumed chunks
    are set aside (``.<file>.chunks``), not deleted:
    ``verify`` removes them with the rest of the download, and until then a rerun of this step
    finds them again.  (Freeing blocks can take as long as writing them: ~1 s per 2 GiB on an
    ext4 mounted with ``discard``.)
    """
    from cloudbench.data.checksums import write_digest_note, xxh128

    man = read_json(manifest)
    local = spec.local_dir
    if _repeat_last_check(record, "reassemble", local):
        return
    with timed_step("reassemble") as t:
        for f in man["files"]:
            name = f["name"]
            chunk_dir, consumed = local / name, local / f".{name}.chunks"
            if not chunk_dir.is_dir() and consumed.is_dir():  # a rerun: the chunks set aside
                chunk_dir = consumed
            if not chunk_dir.is_dir():
                raise StepError(f"{chunk_dir}: downloaded chunks missing; rerun the download")
            parts = chunks_of(chunk_dir, name)
            tmp = local / f".{name}.reassembled"
            digest = xxh128()
            nbytes = concatenate(parts, tmp, on_data=digest.update)
            t.nbytes += nbytes
            if chunk_dir != consumed:
                shutil.rmtree(consumed, ignore_errors=True)
                chunk_dir.rename(consumed)
            tmp.replace(local / name)
            write_digest_note(local / name, digest.hexdigest(), nbytes)
        t.extra["digest_from"] = "reassemble"  # computed from the file as written
    rec = t.record(**context, **_check_keys(spec))
    keep_attempt(record, rec)
    write_json(record, rec)


def verify(
    spec: TransferSpec,
    manifest: Path,
    record: Path,
    context: dict[str, Any],
    keep_data: bool = False,
) -> None:
    """XXH128 of every downloaded file against the manifest; a mismatch names file and chunk.

    A file that ``reassemble`` hashed while writing it, and that has not changed since, is
    checked against that digest (``digest_from: reassemble``: nothing is read here, so the
    record has no rate); any other file is read and hashed here. Per-chunk digests are
    computed only to name the bad chunk of a file that does not match. Afterwards the whole
    download goes (files, notes, the chunks ``reassemble`` set aside) unless ``keep_data``.
    """
    from cloudbench.data.checksums import read_digest_note

    man = read_json(manifest)
    local = spec.local_dir
    if _repeat_last_check(record, "verify", local):
        return
    problems: list[str] = []
    sources: set[str] = set()
    digests: dict[str, str] = {}  # what the downloaded bytes hashed to, for the record
    checked = 0
    with timed_step("verify") as t:
        for f in man["files"]:
            path = local / f["name"]
            if not path.is_file():
                problems.append(f"{f['name']}: missing after download")
                continue
            chunk_bytes = f.get("chunk_bytes") or 0
            noted = read_digest_note(path)
            if noted is not None:
                digest, nbytes, source = noted
            else:
                digest, _, nbytes = hash_stream([path])
                source = "verify"
                t.nbytes += nbytes  # bytes this step really read
            sources.add(source)
            digests[f["name"]] = digest
            checked += nbytes
            if nbytes != f["bytes"]:
                problems.append(f"{f['name']}: {nbytes} bytes, expected {f['bytes']}")
            if digest != f["xxh128"]:
                per_chunk = hash_stream([path], [chunk_bytes])[1] if chunk_bytes else {}
                found = per_chunk.get(chunk_bytes, [])
                bad = [
                    c["object"]
                    for c, d in zip(f.get("chunks", []), found, strict=False)
                    if c["xxh128"] != d
                ]
                where = f" (chunk {', '.join(bad)})" if bad else ""
                problems.append(f"{f['name']}: XXH128 {digest} read, {f['xxh128']} expected{where}")
    rec = t.record(**context, **_check_keys(spec))
    rec.update(
        status="corrupt" if problems else "ok",
        problems=problems,
        bytes_checked=checked,
        digest_from="+".join(sorted(sources)),
        xxh128=digests,
    )
    keep_attempt(record, rec)
    write_json(record, rec)
    if not keep_data:
        shutil.rmtree(local, ignore_errors=True)
