"""``make bench``: the data path against the tools it stands in for, side by side, on this machine.

Every comparison runs both sides alternately on the same file (one untimed warm-up pair,
then ``--pairs`` timed pairs, the order within a pair rotating: ``ours, baseline``,
``baseline, ours``, ...) and reports the median of the per-pair ratios, so slow drifts of
the machine (other jobs, write-back, thermal) hit both sides alike.  Our side is always the
package's real step function (``cloudbench.data.steps.generate`` etc.), run in a fresh process
as the workflow's job runs it, less that process's Python start and imports (the median of three
runs that only import); the compared version runs the same way; the baseline is the command
line tool, run as a child process and timed around it.

Before every timed run, of either side: outputs of the previous run are deleted, ``sync``
flushes dirty pages (so no write-back is pending), and then either every input is read once
(warm page cache, the default) or the page cache is dropped (``--cold``, needs root).
Outputs are written to the page cache and not fsynced, as the workflow's own steps do.

Results: a table on stdout, ``<out>/bench.tsv`` (one row per target), ``<out>/pairs.tsv``
(every timed run, with CPU seconds) and ``<out>/bench.md`` (the table plus the machine).

``--child`` is internal: the fresh process in which one step runs (timed, or for the memory
check).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from bench import REPO, endtoend, evidence_weight, requests, series, weight
from bench.datapath import GENERATE_PAIRS, TRANSFER_PAIRS, DataPath, child_main
from bench.harness import DROP_CACHES, HEADER, PREFAULT_SHARE, Row
from bench.machine import machine_info

STEPS = (
    "generate", "checksum", "chunk", "reassemble", "transfer", "memory", "schedule", "end-to-end",
    "requests", "weight", "evidence", "series",
)  # fmt: skip


def _scratch_default() -> Path:
    return REPO / "scratch" / "bench"


def compare_checkout(what: str, base: Path) -> Path:
    """The checkout to compare with: ``what`` itself if it is one, else a git commit of this
    repository checked out (once) as a detached worktree under ``base``."""
    path = Path(what)
    if (path / "workflow" / "Snakefile").is_file():
        return path.resolve()
    git = ["git", "-C", str(REPO)]
    found = subprocess.run([*git, "rev-parse", "--verify", "-q", f"{what}^{{commit}}"],
                           capture_output=True, text=True)  # fmt: skip
    if found.returncode != 0:
        raise SystemExit(f"--compare {what}: neither a checkout nor a commit of {REPO}")
    commit = found.stdout.strip()
    tree = base / f"compare-{commit[:12]}"
    if not (tree / "workflow" / "Snakefile").is_file():
        subprocess.run([*git, "worktree", "prune"], check=False)
        made = subprocess.run([*git, "worktree", "add", "--detach", str(tree), commit],
                              capture_output=True, text=True)  # fmt: skip
        if made.returncode != 0:
            raise SystemExit(f"--compare {what}: git worktree add failed: {made.stderr.strip()}")
    print(f"comparing with {commit[:12]} in {tree}", file=sys.stderr, flush=True)
    return tree


def write_results(
    bench: DataPath,
    out: Path,
    info: dict[str, str],
    cache: str,
    started: str,
    finished: str,
    loads: tuple[str, str],
    argv: list[str],
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "bench.tsv", "w") as fh:
        fh.write("\t".join(HEADER) + "\n")
        for row in bench.rows:
            fh.write("\t".join(c.replace("\t", " ") for c in row.cells()) + "\n")
    with open(out / "pairs.tsv", "w") as fh:
        fh.write("step\tside\tpair\tseconds\tcpu_s\textra\n")
        for r in bench.runs:
            fh.write(
                f"{r.step}\t{r.side}\t{r.pair}\t{r.seconds:.6f}\t{r.cpu:.6f}\t"
                f"{json.dumps(r.extra, sort_keys=True)}\n"
            )
    lines = [
        "# cloudbench: the data path against the tools it stands in for",
        "",
        f"`{' '.join(argv)}`, {started} to {finished} (UTC).",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    lines += [
        "| " + " | ".join(c.replace("|", "\\|") for c in row.cells()) + " |" for row in bench.rows
    ]
    lines += [
        "",
        "## Method",
        "",
        f"- Size: {bench.size} bytes ({bench.size / 2**30:g} GiB) per file, chunks of "
        f"{bench.chunk} bytes; memory check on {bench.mem_size / 2**30:g} GiB.",
        f"- {bench.pairs} timed pairs after "
        f"{'one untimed warm-up pair' if bench.warmup else 'no warm-up pair (--no-warmup)'}, "
        "run alternately, the "
        "order within a pair rotating (ours then baseline, baseline then ours, ...: on this "
        "machine the first run of a pair was measurably slower; the count is rounded up to a "
        "multiple of the sides compared, with the previous version one more, so each side "
        "holds each place equally often: `pairs.tsv` has the count run); a row's ratio is "
        "the median of the per-pair ratios "
        "(baseline time / our time; for transfers our rate / the bare rate). Transfers get "
        f"{bench.rounds(TRANSFER_PAIRS)} pairs: one rclone copy varies by far more than the "
        f"3% being tested. Generate runs {bench.rounds(GENERATE_PAIRS)} rounds (ours, dd, "
        "openssl): writing fresh page cache varies 4x from run to run on a VM whose host takes "
        "memory back.",
        "- Transfers: local to local, `steps.upload` (strategy plain, threads = usable cores) "
        "in a fresh process, as Snakemake runs the transfer job (its rate comes from its record, "
        "so Python's start is not in it), "
        "against the identical rclone command line (recorded by a wrapper) run bare; the "
        "wrapper's own clock (bash `$EPOCHREALTIME` around rclone) checks the reported rate, "
        "and its ~2 ms of bash start-up count against ours.",
        "- End-to-end: a whole campaign (`snakemake --profile profiles/local` in a fresh "
        "working directory, every rule down to the report) against the study's bash procedure "
        "(`bench/endtoend.py`: openssl | dd, xxh128sum, split, rclone copy up and down, cat, "
        "xxh128sum -c), wall time of each from outside; ratio = campaign / bash, rounds "
        "rotating as above (with `--e2e-compare`, a second checkout's campaign joins them).",
        "- Reassemble + verify: `steps.reassemble` then `steps.verify(keep_data=True)`; "
        "neither side deletes anything (the workflow's verify deletes the download after). "
        "Ours drops each chunk's pages from the page cache once copied, when all of them are "
        "on disk (the bench syncs them before each run, as write-back would have after a "
        "large download); `cat` keeps them.",
        "- Ours: the package's step function (`cloudbench.steps.<step>`) in a fresh process "
        "(`python -m bench --child`), as the workflow's job runs it, timed around the process "
        "less its Python start and imports (the median of three processes that only import; "
        "record writing included); the compared version the same way. Baselines: the tool as "
        "a child process, timed around it.",
        f"- Page cache: {cache}",
        "- `ratio` for memory and scheduling is measured / limit (pass if < 1).",
        "- On a VM with free page reporting, writing into memory the guest freed more than "
        "~2 s earlier is slow (the host took it back), so write-heavy runs vary with what the "
        "previous run freed; both sides see the same sequence, and CPU-time ratios are given "
        "beside the wall-time ones.",
        "- `pairs.tsv` holds every timed run with its wall and CPU seconds.",
        "",
        "## Machine",
        "",
    ]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += [f"- load average (1, 5, 15 min) at start: {loads[0]}; at end: {loads[1]}", ""]
    (out / "bench.md").write_text("\n".join(lines))


def print_table(rows: list[Row]) -> None:
    cells = [HEADER[:-1]] + [r.cells()[:-1] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER) - 1)]
    for i, c in enumerate(cells):
        print("  ".join(x.ljust(w) for x, w in zip(c, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))


def main(argv: list[str] | None = None) -> int:
    from cloudbench.sizes import parse_size

    p = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", default="results/bench", help="where the tables go")
    p.add_argument("--size", default="2GiB", help="bytes per file (default 2GiB)")
    p.add_argument("--pairs", type=int, default=5, help="timed pairs per comparison (default 5)")
    p.add_argument(
        "--dir",
        help="scratch directory for the data (default: <repo>/scratch/bench, "
        "on the repository's file system)",
    )
    p.add_argument(
        "--only", action="append", choices=STEPS, help="run only this comparison (repeatable)"
    )
    p.add_argument(
        "--cold",
        action="store_true",
        help=f"drop the page cache before every timed run (needs a writable {DROP_CACHES})",
    )
    p.add_argument(
        "--quiesce",
        type=float,
        default=0.0,
        help="seconds to wait after preparing each timed run (default 0). On a VM whose "
        "balloon reports free memory to the host (~2 s after it is freed), a wait of 3 s makes "
        "every write land in memory the host took back: up to 4x slower page-cache writes",
    )
    p.add_argument(
        "--no-prefault",
        dest="prefault",
        action="store_false",
        help="do not write to and free 1.5x the bytes a run writes before it (see "
        "harness.prefault): on a VM that hands freed memory back to its host, each side then "
        "meets whatever state the host left (reassemble+verify measured 0.65x-1.30x "
        "without it, 1.62x with it, 2026-11-25)",
    )
    p.add_argument("--chunk", default="64MiB", help="chunk size (default 64MiB, at most size/4)")
    p.add_argument(
        "--mem-size",
        help="file size for the memory check (default 4GiB; the "
        "--size when that is under 1GiB, for quick runs)",
    )
    p.add_argument(
        "--e2e-files",
        type=int,
        default=endtoend.FILES,
        help=f"files of the end-to-end job (default {endtoend.FILES})",
    )
    p.add_argument(
        "--e2e-size",
        default=f"{endtoend.FILE_SIZE // 2**20}MiB",
        help=f"bytes per file of the end-to-end job, whole MiB (default "
        f"{endtoend.FILE_SIZE // 2**20}MiB; its chunks are --chunk, at most a quarter of it)",
    )
    p.add_argument(
        "--compare",
        "--e2e-compare",
        metavar="CHECKOUT_OR_REF",
        help="run every step of this other version too, side by side in the same rotation (a "
        "before/after comparison under the same machine load): a checkout's directory, or a "
        "git commit of this repository (checked out for the run as a detached worktree); "
        "its figures go to the `previous` column",
    )
    p.add_argument("--keep", action="store_true", help="keep the scratch data")
    p.add_argument(
        "--no-warmup",
        dest="warmup",
        action="store_false",
        help="no untimed warm-up round before the timed ones (for a quick check that every "
        "row runs, as the tests do; its figures are then not comparable)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="the smallest run in which every row is made, to check that they all run (the "
        "test suite's; implies --pairs 1 --no-warmup): one round of every comparison, the "
        "plans' sweep of 4 measurements (1 and 64 clients x concurrency 4 and 64), the "
        "requests' campaigns of one file probed once; its figures say nothing of the machine",
    )
    p.add_argument("--child", nargs=2, metavar=("STEP", "JSON"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        child_main(a.child[0], json.loads(a.child[1]))
        return 0
    if a.quick:
        a.pairs, a.warmup = 1, False
    a.size = parse_size(a.size)
    if a.size < 4 or a.pairs < 1:
        p.error("--size must be at least 4 bytes and --pairs at least 1")
    a.chunk = max(1, min(parse_size(a.chunk), a.size // 4))
    a.mem_size = (
        parse_size(a.mem_size) if a.mem_size else (4 * 2**30 if a.size >= 2**30 else a.size)
    )
    if a.cold:
        try:
            os.sync()
            DROP_CACHES.write_text("3\n")
        except OSError as err:
            p.error(f"--cold needs to write {DROP_CACHES}: {err}")
    base = Path(a.dir) if a.dir else _scratch_default()
    base.mkdir(parents=True, exist_ok=True)
    a.work = Path(tempfile.mkdtemp(prefix="run-", dir=base))
    a.compare = compare_checkout(a.compare, base) if a.compare else None
    only = a.only or list(STEPS)
    cache = (
        (
            "cold: `sync; echo 3 > /proc/sys/vm/drop_caches` before every timed run of either side"
            if a.cold
            else "warm: `sync`, then every input read once, before every timed run of either side "
            "(outputs of the previous run deleted first; no write-back pending)"
        )
        + (
            f"; then {a.quiesce:g} s of quiet, so that memory freed by deleting the previous "
            "outputs has been handed back to the host for either side"
            if a.quiesce
            else ""
        )
        + (
            f"; then, before a run that writes, {PREFAULT_SHARE:g}x the bytes it writes of fresh "
            "memory written to and freed, so that either side writes into memory the host has "
            "backed (--no-prefault: not done)"
            if a.prefault
            else "; no prefault (--no-prefault)"
        )
    )
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    info = machine_info(a.work)
    if info["filesystem"].split()[0] in ("tmpfs", "ramfs"):
        info["warning"] = (
            f"{a.work} is on {info['filesystem'].split()[0]}: no disk behind it, so write "
            "and cold-read figures say nothing about a disk (pass --dir on a real file system)"
        )
        print(f"warning: {info['warning']}", file=sys.stderr)
    print(
        f"cloudbench bench: {a.size} bytes, {a.pairs} pairs, in {a.work} "
        f"({info['filesystem'].split(' (')[0]}); page cache {cache.split(':')[0]}",
        file=sys.stderr,
        flush=True,
    )
    bench = DataPath(a)
    try:
        for step in STEPS:
            if step in only:
                print(f"[{step}]", file=sys.stderr, flush=True)
                if step == "end-to-end":
                    endtoend.bench_end_to_end(bench, a.e2e_files, parse_size(a.e2e_size), a.compare)
                elif step == "requests":
                    requests.bench_requests(bench)
                elif step == "weight":
                    weight.bench_weight(bench)
                elif step == "evidence":
                    evidence_weight.bench_evidence_weight(bench)
                elif step == "series":
                    series.bench_series(bench)
                else:
                    getattr(bench, f"bench_{step}")()
    finally:
        if not a.keep:
            shutil.rmtree(a.work, ignore_errors=True)
    finished = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
    load1 = Path("/proc/loadavg").read_text().split()[:3]
    write_results(
        bench,
        Path(a.out),
        info,
        cache,
        started,
        finished,
        (" ".join(load0), " ".join(load1)),
        ["python -m bench", *(argv if argv is not None else sys.argv[1:])],
    )
    print_table(bench.rows)
    print(
        f"\n{sum(r.passed for r in bench.rows)}/{len(bench.rows)} targets met; "
        f"{Path(a.out) / 'bench.tsv'}, {Path(a.out) / 'bench.md'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
