"""The evidence sampler's weight: the same measured upload with and without the sampler
beside it (cloudbench.measure.evidence: one ``ss`` and a walk of /proc a second).

Both sides are ``steps.upload`` in a fresh process, as a transfer job runs it, to versitygw
on 127.0.0.1: 4 files of 64 MiB at 4 transfers (plain), so that four connections are
sampled. The side without sets ``CLOUDBENCH_EVIDENCE=off``. Each side's rate comes from its
own record. Pairs alternate; the ratio is the median of the per-pair ratios, with, without
(target 1 +/- 0.01: the issue's "nothing measurable" is 1%).
"""

from __future__ import annotations

import os
import statistics
import subprocess

from bench import REPO
from bench.datapath import SEED, fresh_record, run_child, upload_args
from bench.harness import MIB, Row
from bench.weight import _random_file
from tests.infra.s3 import VERSITYGW, serve_s3, versitygw_binary

FILES = 4
FILE_BYTES = 64 * MIB
CONCURRENCY = 4
PAIRS = 3  # x --pairs
REMOTE = "EVIDENCE"
TOLERANCE = 0.01


def bench_evidence_weight(bench) -> None:
    from cloudbench.campaign.spec import TransferSpec
    from cloudbench.data.checksums import hash_stream
    from cloudbench.measure import rclone as rc
    from cloudbench.records import read_json, write_json

    if not versitygw_binary().exists():
        raise SystemExit(f"evidence: versitygw not built ({versitygw_binary()})")
    d = bench.work / "evidence-weight"
    src = d / "dataset"
    names = tuple(f"f{k}.bin" for k in range(FILES))
    for name in names:
        _random_file(src / name, FILE_BYTES)
        digest, _, nbytes = hash_stream([src / name])
        write_json(
            d / "checksums" / f"{name}.chunks.json",
            {"file": name, "bytes": nbytes, "xxh128": digest, "chunks": {}},
        )
    real = rc.find_rclone()
    rec_path = d / "record.json"
    with serve_s3(real, d / "store", store=VERSITYGW) as srv:
        (srv.root / "bench").mkdir(parents=True, exist_ok=True)
        spec = TransferSpec(
            campaign="evidence",
            bucket="bench",
            site="bench",
            upload_site="bench",
            remote="evidence",
            remote_url=f"{REMOTE}:bench",
            direction="upload",
            layout_label="plain",
            repeat=1,
            files=names,
            file_bytes=FILE_BYTES,
            chunk_width=0,
            scratch=str(d / "site"),
            seed=SEED,
            setting_label=f"rclone-1x{CONCURRENCY}",
        )
        store_env = srv.client_env(REMOTE)
        upload = upload_args(spec, CONCURRENCY, src, d, d / "checksums", rec_path)
        upload["sums"] = os.pathsep.join(str(d / "checksums" / f"{n}.chunks.json") for n in names)

        def prep() -> None:
            fresh_record(rec_path)
            subprocess.run(
                [real, "purge", spec.campaign_prefix()],
                env={**os.environ, **store_env},
                capture_output=True,
                timeout=300,
            )
            bench.settle(*(src / n for n in names))

        def side(extra: dict[str, str]):
            def run() -> dict[str, float]:
                run_child(REPO, "upload", upload, {**store_env, **extra})
                rec = read_json(rec_path)
                if rec["status"] != "ok":
                    raise SystemExit(f"evidence: upload failed: {rec.get('error')}")
                return {"mb_per_s": rec["mb_per_s"]}

            return run

        runs = bench.pairs_of(
            "evidence-weight",
            [("with", prep, side({})), ("without", prep, side({"CLOUDBENCH_EVIDENCE": "off"}))],
            pairs=bench.rounds(PAIRS),
        )
    ratios = [
        w.extra["mb_per_s"] / o.extra["mb_per_s"]
        for w, o in zip(runs["with"], runs["without"], strict=True)
    ]
    ratio = statistics.median(ratios)
    bench.rows.append(
        Row(
            "evidence-weight",
            statistics.median(w.extra["mb_per_s"] for w in runs["with"]),
            statistics.median(o.extra["mb_per_s"] for o in runs["without"]),
            "MB/s",
            ratio,
            f"1 +/- {TOLERANCE}",
            abs(ratio - 1) <= TOLERANCE,
            f"the measured upload with the evidence sampler beside it vs without "
            f"(CLOUDBENCH_EVIDENCE=off), {FILES} x {FILE_BYTES // MIB} MiB at {CONCURRENCY} "
            "transfers to versitygw; ratios " + " ".join(f"{r:.3f}" for r in ratios),
        )
    )
