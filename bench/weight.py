"""The instrument's own weight: a measured transfer against the same transfer as a user would
type it, without the logging the measurement needs.

Every timed rclone copy runs with a JSON log, a stats line every second and, on S3, a DEBUG
line per response (``-vv --s3-sdk-log-mode Retries,Response``): what lets every number be
traced to the client's log and throttling be counted. The transfer row of ``make bench``
compares the measured copy with the same command run bare, logging included, so it cannot
see what the logging costs. This row does: versitygw (an S3 server that checks signatures)
on 127.0.0.1, one file in many small parts (5 MiB) at high concurrency (the multithread
layout: 16 parts at once), so that the store answers many requests a second and the DEBUG
log has the most to write.
Ours: ``steps.upload`` in a fresh process, its rate from its record. As typed: the same
``rclone copy`` with the same transfer settings, minus the logging flags, the log file and
the exact object list (the source directory holds that one file), timed around the process.
Pairs alternate; the ratio is the median of the per-pair ratios (target >= 0.97).
"""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import time
from pathlib import Path

from bench import REPO
from bench.datapath import SEED, WRAPPER, DataPath, fresh_record, run_child, upload_args
from bench.harness import MIB, Row
from tests.infra.s3 import VERSITYGW, serve_s3, versitygw_binary

SIZE = 256 * MIB
PART_BYTES = 5 * MIB  # S3's smallest part: the most requests per byte
PART = "5 MiB"
CONCURRENCY = 16
PAIRS = 3  # x --pairs
REMOTE = "WEIGHT"
TARGET = 0.97
# what the measurement adds to rclone's command line for its evidence (cloudbench.measure.rclone)
LOGGING_FLAGS_WITH_VALUE = {"--log-file", "--stats", "--stats-log-level", "--s3-sdk-log-mode"}
LOGGING_FLAGS = {"-v", "-vv", "--use-json-log"}
MEASUREMENT_ONLY_WITH_VALUE = {"--files-from"}  # the exact object list: the directory is it


def as_typed(argv: list[str]) -> list[str]:
    """``argv`` of a measured ``rclone copy`` as a user would type it: the same transfer
    settings, no logging flags, no log file, no object list."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
            continue
        if word in LOGGING_FLAGS_WITH_VALUE | MEASUREMENT_ONLY_WITH_VALUE:
            skip = True
            continue
        if word in LOGGING_FLAGS:
            continue
        out.append(word)
    return out


def _random_file(path: Path, size: int) -> None:
    if path.exists() and path.stat().st_size == size:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        for _ in range(size // (8 * MIB)):
            fh.write(os.urandom(8 * MIB))


def bench_weight(bench: DataPath) -> None:
    from cloudbench.campaign.spec import TransferSpec
    from cloudbench.data.checksums import hash_stream
    from cloudbench.measure import rclone as rc
    from cloudbench.records import read_json, write_json

    if not versitygw_binary().exists():
        raise SystemExit(f"weight: versitygw not built ({versitygw_binary()}): run make versitygw")
    d = bench.work / "weight"
    name = "weight.bin"
    src = d / "dataset"
    _random_file(src / name, SIZE)
    digest, _, nbytes = hash_stream([src / name])
    sums = d / "checksums" / f"{name}.chunks.json"
    write_json(sums, {"file": name, "bytes": nbytes, "xxh128": digest, "chunks": {}})
    real = rc.find_rclone()
    wrapper = d / "rclone-timer"
    wrapper.write_text(WRAPPER)
    wrapper.chmod(0o755)
    argv_file, times_file, rec_path = d / "argv", d / "times", d / "record.json"
    with serve_s3(real, d / "store", store=VERSITYGW) as srv:
        (srv.root / "bench").mkdir(parents=True, exist_ok=True)
        spec = TransferSpec(
            campaign="weight",
            bucket="bench",
            site="bench",
            upload_site="bench",
            remote="weight",
            remote_url=f"{REMOTE}:bench",
            direction="upload",
            layout_label="multithread",
            repeat=1,
            files=(name,),
            file_bytes=SIZE,
            chunk_width=0,
            scratch=str(d / "site"),
            seed=SEED,
            setting_label=f"rclone-1x{CONCURRENCY}",
            multi_thread_cutoff=64 * MIB,
            multi_thread_chunk_size=PART_BYTES,
        )
        store_env = srv.client_env(REMOTE)
        env = {
            **store_env,
            "CLOUDBENCH_RCLONE": str(wrapper),
            "CB_BENCH_RCLONE": real,
            "CB_BENCH_ARGV": str(argv_file),
            "CB_BENCH_TIMES": str(times_file),
        }
        upload = upload_args(spec, CONCURRENCY, src, d, sums, rec_path)
        dst = f"{spec.data_prefix}/objects"

        def prep() -> None:
            fresh_record(rec_path)
            subprocess.run(
                [real, "purge", spec.campaign_prefix()],
                env={**os.environ, **store_env},
                capture_output=True,
                timeout=300,
            )
            bench.settle(src / name)

        def ours() -> dict[str, float]:
            run_child(REPO, "upload", upload, env)
            rec = read_json(rec_path)
            if rec["status"] != "ok":
                raise SystemExit(f"weight: upload failed: {rec.get('error')}")
            return {"mb_per_s": rec["mb_per_s"]}

        def typed_argv() -> list[str]:
            argv = [a.decode() for a in argv_file.read_bytes().split(b"\0")[:-1]]
            if argv[:3] != ["copy", str(src), dst]:
                raise SystemExit(f"weight: unexpected rclone command line {argv}")
            return [real, *as_typed(argv)]

        def typed() -> dict[str, float]:
            t0 = time.perf_counter()
            proc = subprocess.run(
                typed_argv(),
                env={**os.environ, **store_env},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            seconds = time.perf_counter() - t0
            if proc.returncode != 0:
                raise SystemExit(f"weight: rclone as typed failed: {proc.stdout[-500:]}")
            return {"mb_per_s": SIZE / seconds / 1e6}

        prep()
        ours()  # the typed command line is the one the measurement ran: learn it first
        runs = bench.pairs_of(
            "weight", [("ours", prep, ours), ("as-typed", prep, typed)], pairs=bench.rounds(PAIRS)
        )
        cmd = " ".join(shlex.quote(a) for a in typed_argv()[1:])
    ratios = [
        o.extra["mb_per_s"] / t.extra["mb_per_s"]
        for o, t in zip(runs["ours"], runs["as-typed"], strict=True)
    ]
    ratio = statistics.median(ratios)
    bench.rows.append(
        Row(
            "weight",
            statistics.median(o.extra["mb_per_s"] for o in runs["ours"]),
            statistics.median(t.extra["mb_per_s"] for t in runs["as-typed"]),
            "MB/s",
            ratio,
            f">= {TARGET}x",
            ratio >= TARGET,
            f"the measured upload (-vv, JSON log, stats every second, the S3 SDK's response "
            f"log) vs the same transfer as typed (rclone {cmd}), {SIZE // MIB} MiB in "
            f"{PART} parts, {CONCURRENCY} at once, to versitygw; ratios "
            + " ".join(f"{r:.3f}" for r in ratios),
        )
    )
