"""``make bench``: the data path against the tools it stands in for, side by side, on this machine.

Every comparison runs both sides alternately on the same file (one untimed warm-up pair,
then ``--pairs`` timed pairs, the order within a pair rotating: ``ours, baseline``,
``baseline, ours``, ...) and reports the median of the per-pair ratios, so slow drifts of
the machine (other jobs, write-back, thermal) hit both sides alike.  Our side is always the
package's real step function (``cloudbench.steps.generate`` etc.), called in this process
and timed around the call; the baseline is the command line tool, run as a child process
and timed the same way.

Before every timed run, of either side: outputs of the previous run are deleted, ``sync``
flushes dirty pages (so no write-back is pending), and then either every input is read once
(warm page cache, the default) or the page cache is dropped (``--cold``, needs root).
Outputs are written to the page cache and not fsynced, as the workflow's own steps do.

Results: a table on stdout, ``<out>/bench.tsv`` (one row per target), ``<out>/pairs.tsv``
(every timed run, with CPU seconds) and ``<out>/bench.md`` (the table plus the machine).

``--child`` is internal: the fresh process in which the memory check runs one step.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MIB = 2**20
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
STEPS = ("generate", "checksum", "chunk", "reassemble", "transfer", "memory", "schedule")
MEMORY_LIMIT = 256 * MIB
SCHEDULE_LIMIT = 15.0
TRANSFER_PAIRS = 2  # x --pairs: an rclone copy varies by +-20% from run to run on a busy machine
SEED = "cloudbench-bench"
CTX = {"campaign": "bench", "site": "bench"}


def _dataset(size: int):
    from cloudbench.steps import DatasetSpec

    return DatasetSpec(CTX["campaign"], CTX["site"], size, SEED)


WRAPPER = r"""#!/bin/bash
# Written by cloudbench.bench: times `rclone copy` from outside rclone, with bash's own clock.
if [ "$1" = copy ]; then
    printf '%s\0' "$@" > "$CB_BENCH_ARGV"
    t0=$EPOCHREALTIME
    "$CB_BENCH_RCLONE" "$@"
    rc=$?
    t1=$EPOCHREALTIME
    printf '%s %s\n' "$t0" "$t1" > "$CB_BENCH_TIMES"
    exit $rc
fi
exec "$CB_BENCH_RCLONE" "$@"
"""


# --- results ---------------------------------------------------------------------------------


@dataclass
class Row:
    step: str
    ours: float
    baseline: float
    unit: str
    ratio: float
    target: str
    passed: bool
    detail: str = ""

    def cells(self) -> list[str]:
        return [
            self.step,
            _fmt(self.ours),
            _fmt(self.baseline),
            self.unit,
            f"{self.ratio:.3f}",
            self.target,
            "PASS" if self.passed else "FAIL",
            self.detail,
        ]


HEADER = ["step", "ours", "baseline", "unit", "ratio", "target", "pass", "detail"]


def _fmt(x: float) -> str:
    if x != x:  # nan
        return "-"
    return f"{x:.4g}" if abs(x) < 1000 else f"{x:.0f}"


@dataclass
class Run:
    """One timed run of one side: wall seconds, CPU seconds, and anything else it measured."""

    step: str
    side: str
    pair: int
    seconds: float
    cpu: float
    extra: dict[str, Any] = field(default_factory=dict)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.size: int = args.size
        self.pairs: int = args.pairs
        self.cold: bool = args.cold
        self.quiesce: float = args.quiesce
        self.work: Path = args.work
        self.chunk: int = args.chunk
        self.mem_size: int = args.mem_size
        self.rows: list[Row] = []
        self.runs: list[Run] = []
        self.name = "bench-001.bin"
        self.data = self.work / "data" / self.name
        self.width = max(4, len(str(max(1, -(-self.size // self.chunk)) - 1)))

    # --- page cache and timing --------------------------------------------------------------

    def settle(self, *inputs: Path) -> None:
        """Before a timed run: flush dirty pages, warm the inputs or drop the cache, then wait
        ``--quiesce`` seconds (0 by default; see the option's help)."""
        os.sync()
        if self.cold:
            DROP_CACHES.write_text("3\n")
        else:
            for path in inputs:
                for p in sorted(path.rglob("*")) if path.is_dir() else [path]:
                    if p.is_file():
                        _read_through(p)
        time.sleep(self.quiesce)

    def timed(self, step: str, side: str, pair: int, fn: Callable[[], Any]) -> Run:
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        extra = fn() or {}
        seconds = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = sum(
            getattr(b, k) - getattr(a, k)
            for a, b in ((r0, r1), (c0, c1))
            for k in ("ru_utime", "ru_stime")
        )
        run = Run(step, side, pair, seconds, cpu, extra)
        if pair > 0:
            self.runs.append(run)
        return run

    def pairs_of(
        self,
        step: str,
        sides: list[tuple[str, Callable[[], None], Callable[[], Any]]],
        pairs: int | None = None,
    ) -> dict[str, list[Run]]:
        """A warm-up round (pair 0, not kept) and then ``pairs`` rounds of every side.

        The order within a round rotates (ours first, then the baseline first, ...), so an
        advantage of running first or second in a round cancels out.
        """
        out: dict[str, list[Run]] = {name: [] for name, _, _ in sides}
        for pair in range((pairs or self.pairs) + 1):
            shift = (pair - 1) % len(sides) if pair else 0
            for name, prepare, fn in sides[shift:] + sides[:shift]:
                prepare()
                run = self.timed(step, name, pair, fn)
                if pair > 0:
                    out[name].append(run)
            label = " ".join(f"{n}={out[n][-1].seconds:.3f}s" for n, _, _ in sides) if pair else ""
            print(
                f"  {step} pair {pair}{' (warm-up)' if not pair else ''} {label}",
                file=sys.stderr,
                flush=True,
            )
        return out

    def speed_row(
        self,
        step: str,
        ours: list[Run],
        base: list[Run],
        baseline: str,
        target: float,
        detail: str = "",
    ) -> None:
        ratios = [b.seconds / o.seconds for o, b in zip(ours, base, strict=True)]
        cpus = [b.cpu / o.cpu for o, b in zip(ours, base, strict=True) if o.cpu > 0]
        cpu = statistics.median(cpus) if cpus else float("nan")
        ratio = statistics.median(ratios)
        o_s = statistics.median(r.seconds for r in ours)
        b_s = statistics.median(r.seconds for r in base)
        self.rows.append(
            Row(
                step,
                o_s,
                b_s,
                "s",
                ratio,
                f">= {target:.2f}x",
                ratio >= target,
                f"vs {baseline}; {self.size / o_s / 1e6:.0f} vs {self.size / b_s / 1e6:.0f} MB/s; "
                f"ratios {' '.join(f'{r:.2f}' for r in ratios)}; CPU-time ratio {cpu:.2f}"
                + (f"; {detail}" if detail else ""),
            )
        )

    # --- the data file ------------------------------------------------------------------------

    def ensure_data(self) -> None:
        if not (self.data.is_file() and self.data.stat().st_size == self.size):
            from cloudbench.datagen import generate_file

            generate_file(self.data, self.size, SEED)

    # --- generate -------------------------------------------------------------------------------

    def bench_generate(self) -> None:
        from cloudbench import steps

        d = self.work / "generate"
        d.mkdir(parents=True, exist_ok=True)
        ours_out, dd_out, ssl_out = d / "ours.bin", d / "dd.bin", d / "openssl.bin"
        count = _dd_count(self.size)

        def clean():
            for p in (ours_out, dd_out, ssl_out):
                p.unlink(missing_ok=True)
            self.settle()

        def ours():
            steps.generate(_dataset(self.size), d, ours_out.name, d / "record.json")

        def dd():
            subprocess.run(
                ["dd", "if=/dev/zero", f"of={dd_out}", "bs=1M", *count, "status=none"], check=True
            )

        def openssl():
            flags = "iflag=fullblock" + (",count_bytes" if self.size % MIB else "")
            subprocess.run(
                [
                    "bash",
                    "-c",
                    f"openssl enc -aes-256-ctr -nosalt -pass pass:X < /dev/zero "
                    f"2>/dev/null | dd of={shlex.quote(str(ssl_out))} bs=1M {count[-1]} {flags} "
                    "status=none",
                ],
                check=True,
            )

        runs = self.pairs_of(
            "generate", [("ours", clean, ours), ("dd", clean, dd), ("openssl", clean, openssl)]
        )
        for p in (ours_out, dd_out, ssl_out):
            p.unlink(missing_ok=True)
        self.speed_row("generate", runs["ours"], runs["dd"], "dd if=/dev/zero bs=1M", 0.9)
        self.speed_row(
            "generate-openssl",
            runs["ours"],
            runs["openssl"],
            "openssl enc -aes-256-ctr < /dev/zero | dd iflag=fullblock",
            1.2,
        )

    # --- checksum -------------------------------------------------------------------------------

    def bench_checksum(self) -> None:
        from cloudbench import steps
        from cloudbench.checksums import parse_xxh128sum

        self.ensure_data()
        d = self.work / "checksum"
        d.mkdir(parents=True, exist_ok=True)
        seen: dict[str, set[str]] = {"ours": set(), "xxh128sum": set()}

        def ours():
            steps.checksum(
                _dataset(self.size),
                self.data.parent,
                self.data.name,
                [self.chunk],
                d / "sum",
                d / "chunks.json",
                d / "rec.json",
            )
            seen["ours"].add(json.loads((d / "chunks.json").read_text())["xxh128"])

        def base():
            out = subprocess.run(
                ["xxh128sum", str(self.data)], check=True, capture_output=True, text=True
            ).stdout
            seen["xxh128sum"].add(parse_xxh128sum(out)[str(self.data)])

        def prep():
            self.settle(self.data)

        runs = self.pairs_of("checksum", [("ours", prep, ours), ("xxh128sum", prep, base)])
        same = seen["ours"] == seen["xxh128sum"] and len(seen["ours"]) == 1
        if not same:
            raise SystemExit(f"checksum: ours {seen['ours']} != xxh128sum {seen['xxh128sum']}")
        self.speed_row(
            "checksum",
            runs["ours"],
            runs["xxh128sum"],
            "xxh128sum",
            0.9,
            f"ours also computes the {self.chunk // MIB} MiB chunk digests; same digest",
        )

    # --- chunk ----------------------------------------------------------------------------------

    def bench_chunk(self) -> None:
        from cloudbench import steps

        self.ensure_data()
        d = self.work / "chunk"
        from cloudbench.sizes import size_label

        ours_root, split_dir = d / "ours", d / "split"
        ours_dir = ours_root / size_label(self.chunk) / self.data.name

        def prep_ours():
            shutil.rmtree(ours_dir, ignore_errors=True)
            self.settle(self.data)

        def prep_split():
            shutil.rmtree(split_dir, ignore_errors=True)
            split_dir.mkdir(parents=True)
            self.settle(self.data)

        def ours():
            steps.chunk(
                _dataset(self.size),
                self.data.parent,
                self.data.name,
                self.chunk,
                ours_root,
                d / "rec.json",
            )

        def base():
            subprocess.run(
                ["split", "-b", str(self.chunk), str(self.data), str(split_dir / "x.")], check=True
            )

        runs = self.pairs_of("chunk", [("ours", prep_ours, ours), ("split", prep_split, base)])
        n = len(list(ours_dir.iterdir()))
        if n != len(list(split_dir.iterdir())):
            raise SystemExit("chunk: ours and split made different numbers of chunks")
        shutil.rmtree(d, ignore_errors=True)
        self.speed_row(
            "chunk", runs["ours"], runs["split"], f"split -b {self.chunk}", 1.5, f"{n} chunks"
        )

    # --- reassemble + verify ---------------------------------------------------------------------

    def download_spec(self, scratch: Path, size: int):
        from cloudbench.campaign import Layout
        from cloudbench.spec import TransferSpec

        return TransferSpec(
            campaign="bench",
            bucket="bench",
            site="bench",
            upload_site="bench",
            remote="local",
            remote_url=str(self.work / "remote"),
            direction="download",
            layout_label=Layout("chunked", self.chunk).label,
            repeat=1,
            files=(self.name,),
            file_bytes=size,
            chunk_width=self.width,
            scratch=str(scratch),
            seed=SEED,
        )

    def manifest_for(self, spec, data: Path, out: Path) -> str:
        from cloudbench import steps
        from cloudbench.checksums import hash_stream
        from cloudbench.records import write_json

        digest, per_chunk, nbytes = hash_stream([data], [self.chunk])
        hashes = {
            self.name: {
                "bytes": nbytes,
                "xxh128": digest,
                "chunks": {str(c): d for c, d in per_chunk.items()},
            }
        }
        write_json(out, steps.copy_manifest(spec, hashes))
        return digest

    def bench_reassemble(self) -> None:
        from cloudbench import steps
        from cloudbench.checksums import parse_xxh128sum
        from cloudbench.chunking import split_file
        from cloudbench.records import read_json

        self.ensure_data()
        d = self.work / "reassemble"
        spec = self.download_spec(d / "site", self.size)
        man = d / "manifest.json"
        digest = self.manifest_for(spec, self.data, man)
        local = spec.local_dir
        chunk_dir = local / self.name
        cat_out = local / "cat.out"

        def prep():
            shutil.rmtree(local, ignore_errors=True)
            split_file(self.data, chunk_dir, self.chunk, self.width)
            self.settle(chunk_dir)

        def ours():
            steps.reassemble(spec, man, d / "reassemble.json", CTX)
            steps.verify(spec, man, d / "verify.json", CTX, keep_data=True)
            rec = read_json(d / "verify.json")
            if rec["status"] != "ok":
                raise SystemExit(f"reassemble+verify: {rec['problems']}")
            return {"digest_from": rec.get("digest_from")}

        def base():
            parts = sorted(str(p) for p in chunk_dir.iterdir())
            with open(cat_out, "wb") as fh:
                subprocess.run(["cat", *parts], stdout=fh, check=True)
            out = subprocess.run(
                ["xxh128sum", str(cat_out)], check=True, capture_output=True, text=True
            ).stdout
            if parse_xxh128sum(out)[str(cat_out)] != digest:
                raise SystemExit("reassemble: cat + xxh128sum disagrees with the manifest")

        runs = self.pairs_of("reassemble", [("ours", prep, ours), ("cat+xxh128sum", prep, base)])
        source = runs["ours"][-1].extra.get("digest_from")
        shutil.rmtree(d, ignore_errors=True)
        self.speed_row(
            "reassemble+verify",
            runs["ours"],
            runs["cat+xxh128sum"],
            "cat chunks > file; xxh128sum file",
            1.5,
            f"verify took its digest from: {source}",
        )

    # --- transfer -------------------------------------------------------------------------------

    def bench_transfer(self) -> None:
        from cloudbench import rclone as rc
        from cloudbench import steps
        from cloudbench.checksums import hash_stream
        from cloudbench.records import read_json, write_json
        from cloudbench.spec import TransferSpec

        self.ensure_data()
        d = self.work / "transfer"
        src = d / "dataset"
        src.mkdir(parents=True, exist_ok=True)
        if not (src / self.name).exists():
            os.link(self.data, src / self.name)  # same inode: no copy, same page cache
        digest, _, nbytes = hash_stream([self.data])
        sums = d / "checksums" / f"{self.name}.chunks.json"
        write_json(sums, {"file": self.name, "bytes": nbytes, "xxh128": digest, "chunks": {}})
        threads = len(os.sched_getaffinity(0))
        spec = TransferSpec(
            campaign="bench",
            bucket="bench",
            site="bench",
            upload_site="bench",
            remote="local",
            remote_url=str(d / "remote"),
            direction="upload",
            layout_label="plain",
            repeat=1,
            files=(self.name,),
            file_bytes=self.size,
            chunk_width=0,
            scratch=str(d / "site"),
            seed=SEED,
        )
        real = rc.find_rclone()
        wrapper = d / "rclone-timer"
        wrapper.write_text(WRAPPER)
        wrapper.chmod(0o755)
        argv_file, times_file = d / "argv", d / "times"
        listing = d / "objects"
        listing.write_text(f"{self.name}\n")
        dst = f"{spec.data_prefix}/objects"
        rec_path = d / "record.json"
        env = {
            "CLOUDBENCH_RCLONE": str(wrapper),
            "CB_BENCH_RCLONE": real,
            "CB_BENCH_ARGV": str(argv_file),
            "CB_BENCH_TIMES": str(times_file),
        }

        def prep():
            shutil.rmtree(d / "remote", ignore_errors=True)
            self.settle(src / self.name)

        def ours():
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                steps.upload(
                    spec,
                    threads,
                    src,
                    d / "chunks",
                    [sums],
                    rec_path,
                    d / "rclone.jsonl",
                    d / "series.tsv",
                )
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            rec = read_json(rec_path)
            if rec["status"] != "ok":
                raise SystemExit(f"transfer: upload failed: {rec.get('error')}")
            t0, t1 = (float(x.replace(",", ".")) for x in times_file.read_text().split())
            return {"mb_per_s": rec["mb_per_s"], "seconds": rec["seconds"], "outside_s": t1 - t0}

        def bare_argv() -> list[str]:
            argv = argv_file.read_bytes().split(b"\0")[:-1]
            argv = [real] + [a.decode() for a in argv]
            i = argv.index("--files-from")
            argv[i + 1] = str(listing)  # the upload's own listing was a temporary file
            i = argv.index("--log-file")
            argv[i + 1] = str(d / "bare.jsonl")
            if argv[2:4] != [str(src), dst]:
                raise SystemExit(f"transfer: unexpected rclone command line {argv}")
            return argv

        def bare():
            argv = bare_argv()
            (d / "bare.jsonl").unlink(missing_ok=True)
            t0 = time.perf_counter()
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            seconds = time.perf_counter() - t0
            if proc.returncode != 0:
                raise SystemExit(f"transfer: bare rclone failed: {proc.stdout[-500:]}")
            return {"mb_per_s": self.size / seconds / 1e6, "seconds": seconds}

        runs = self.pairs_of(
            "transfer",
            [("ours", prep, ours), ("bare-rclone", prep, bare)],
            pairs=TRANSFER_PAIRS * self.pairs,
        )
        shutil.rmtree(d / "remote", ignore_errors=True)
        ours_runs, bare_runs = runs["ours"], runs["bare-rclone"]
        ratios = [
            o.extra["mb_per_s"] / b.extra["mb_per_s"]
            for o, b in zip(ours_runs, bare_runs, strict=True)
        ]
        ratio = statistics.median(ratios)
        o_rate = statistics.median(o.extra["mb_per_s"] for o in ours_runs)
        b_rate = statistics.median(b.extra["mb_per_s"] for b in bare_runs)
        cmd = " ".join(shlex.quote(a) for a in bare_argv()[1:])
        self.rows.append(
            Row(
                "transfer",
                o_rate,
                b_rate,
                "MB/s",
                ratio,
                ">= 0.97x",
                ratio >= 0.97,
                f"steps.upload's reported rate vs the same command run bare (rclone {cmd}); "
                f"ratios {' '.join(f'{r:.3f}' for r in ratios)}",
            )
        )
        agree = [o.extra["mb_per_s"] / (self.size / o.extra["outside_s"] / 1e6) for o in ours_runs]
        worst = max(agree, key=lambda a: abs(a - 1))
        med = statistics.median(agree)
        self.rows.append(
            Row(
                "transfer-rate-honest",
                o_rate,
                statistics.median(self.size / o.extra["outside_s"] / 1e6 for o in ours_runs),
                "MB/s",
                med,
                "1 +/- 0.01",
                abs(worst - 1) <= 0.01,
                "reported rate vs bytes / wall time of the rclone process taken outside it "
                f"(bash wrapper clock); per run {' '.join(f'{a:.4f}' for a in agree)}",
            )
        )

    # --- memory ---------------------------------------------------------------------------------

    def bench_memory(self) -> None:
        from cloudbench.checksums import digest_note_path
        from cloudbench.chunking import split_file

        size = self.mem_size
        d = self.work / "memory"
        shutil.rmtree(d, ignore_errors=True)
        data = d / "dataset" / self.name
        spec = self.download_spec(d / "site", size)
        man = d / "manifest.json"
        chunk_dir = spec.local_dir / self.name
        results: list[tuple[str, int, float]] = []

        def child(step: str, **kw: Any) -> None:
            cmd = [sys.executable, "-m", "cloudbench.bench", "--child", step, json.dumps(kw)]
            env = {
                **os.environ,
                "PYTHONPATH": os.pathsep.join(
                    p
                    for p in (
                        str(Path(__file__).resolve().parents[1]),
                        os.environ.get("PYTHONPATH"),
                    )
                    if p
                ),
            }
            t0 = time.perf_counter()
            proc = subprocess.Popen(cmd, env=env)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            seconds = time.perf_counter() - t0
            if proc.returncode != 0:
                raise SystemExit(f"memory: {step} failed in its child process")
            results.append((step, usage.ru_maxrss * 1024, seconds))
            print(
                f"  memory {step}: max RSS {usage.ru_maxrss / 1024:.0f} MiB ({seconds:.1f} s)",
                file=sys.stderr,
                flush=True,
            )

        child(
            "import",
        )
        child("generate", out=str(data), size=size)
        child("checksum", data=str(data), chunk=self.chunk, out=str(d / "sums"))
        child("chunk", data=str(data), chunk=self.chunk, width=self.width, outdir=str(d / "chunks"))
        shutil.rmtree(d / "chunks")
        self.manifest_for(spec, data, man)
        split_file(data, chunk_dir, self.chunk, self.width)
        data.unlink()
        child("reassemble", spec=spec.to_json(), manifest=str(man), out=str(d / "rec"))
        digest_note_path(spec.local_dir / self.name).unlink()  # make verify read the file
        child("verify", spec=spec.to_json(), manifest=str(man), out=str(d / "rec"))
        shutil.rmtree(d, ignore_errors=True)
        base_rss = results[0][1]
        for step, rss, _ in results[1:]:
            self.rows.append(
                Row(
                    f"memory-{step}",
                    rss / MIB,
                    MEMORY_LIMIT / MIB,
                    "MiB",
                    rss / MEMORY_LIMIT,
                    "<= 1 (256 MiB)",
                    rss < MEMORY_LIMIT,
                    f"max RSS of a fresh process running the step on a {size / 2**30:g} GiB file "
                    f"(of which {base_rss / MIB:.0f} MiB is Python + the CLI's imports)"
                    + (
                        "; verify reads the whole file (no note from reassemble)"
                        if step == "verify"
                        else ""
                    ),
                )
            )

    # --- scheduling -----------------------------------------------------------------------------

    def bench_schedule(self) -> None:
        import yaml

        d = self.work / "schedule"
        d.mkdir(parents=True, exist_ok=True)
        sites = {
            f"site{i}": {"upload": i == 1, "download": True, "scratch": str(d / f"scratch{i}")}
            for i in range(1, 6)
        }
        cfg = {
            "campaign": "study",
            "remote": str(d / "remote"),
            "bucket": "cloudbench",
            "dataset": {"name": "gauge", "files": 10, "size": "3.8GiB", "chunk_sizes": ["64MiB"]},
            "strategies": ["plain", "chunked", "multithread"],
            "repeats": 3,
            "sites": sites,
            "site": "all",
        }
        config = d / "campaign.yaml"
        config.write_text(yaml.safe_dump(cfg, sort_keys=False))
        bindir = Path(sys.executable).parent
        cmd = [
            str(bindir / "snakemake"),
            "--snakefile",
            str(REPO / "workflow" / "Snakefile"),
            "--directory",
            str(d),
            "--profile",
            str(REPO / "profiles" / "local"),
            "--configfile",
            str(config),
            "-n",
        ]
        env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
        times, jobs = [], "?"
        for _ in range(max(1, min(3, self.pairs))):
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True)
            times.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                raise SystemExit(f"schedule: snakemake -n failed:\n{proc.stderr[-2000:]}")
            for line in (proc.stdout + proc.stderr).splitlines():
                if line.startswith("total"):
                    jobs = line.split()[-1]
        med = statistics.median(times)
        self.rows.append(
            Row(
                "schedule",
                med,
                SCHEDULE_LIMIT,
                "s",
                med / SCHEDULE_LIMIT,
                "<= 1 (15 s)",
                med < SCHEDULE_LIMIT,
                "snakemake -n, 10 files x 3.8 GiB, 64 MiB chunks, 3 strategies, 3 repeats, "
                f"5 sites: {jobs} jobs; runs {' '.join(f'{t:.2f}' for t in times)} s",
            )
        )


# --- the memory check's child process ---------------------------------------------------------


def child_main(step: str, kw: dict[str, Any]) -> None:
    """Run one step as the workflow's command would, in this fresh process (for max RSS)."""
    import cloudbench.cli  # noqa: F401  - the modules every rule's `python -m cloudbench` loads
    from cloudbench import steps
    from cloudbench.spec import TransferSpec

    if step == "import":
        return
    if step == "generate":
        out = Path(kw["out"])
        steps.generate(_dataset(kw["size"]), out.parent, out.name, out.with_name("generate.json"))
    elif step == "checksum":
        out, data = Path(kw["out"]), Path(kw["data"])
        steps.checksum(
            _dataset(data.stat().st_size),
            data.parent,
            data.name,
            [kw["chunk"]],
            out / "sum",
            out / "chunks.json",
            out / "rec.json",
        )
    elif step == "chunk":
        out, data = Path(kw["outdir"]), Path(kw["data"])
        steps.chunk(
            _dataset(data.stat().st_size),
            data.parent,
            data.name,
            kw["chunk"],
            out,
            out.with_name("chunk.json"),
        )
    elif step in ("reassemble", "verify"):
        spec = TransferSpec.from_json(kw["spec"])
        fn = getattr(steps, step)
        args = (spec, Path(kw["manifest"]), Path(kw["out"]) / f"{step}.json", CTX)
        fn(*args, keep_data=True) if step == "verify" else fn(*args)
    else:
        raise SystemExit(f"unknown step {step}")


# --- helpers ------------------------------------------------------------------------------------


def _read_through(path: Path) -> None:
    buf = bytearray(MIB)
    fd = os.open(path, os.O_RDONLY)
    try:
        while os.readv(fd, [buf]):
            pass
    finally:
        os.close(fd)


def _page_reporting() -> str:
    order = Path("/sys/module/page_reporting/parameters/page_reporting_order")
    try:
        return f"on, blocks of 2^{order.read_text().strip()} pages"
    except OSError:
        return "not found"


def _dd_count(size: int) -> list[str]:
    if size % MIB == 0:
        return [f"count={size // MIB}"]
    return ["iflag=count_bytes", f"count={size}"]


def _scratch_default() -> Path:
    return REPO / "scratch" / "bench"


def _mount_of(path: Path) -> dict[str, str]:
    best: dict[str, str] = {}
    path = path.resolve()
    with open("/proc/self/mounts") as fh:
        for line in fh:
            dev, mnt, fstype, opts = line.split()[:4]
            mnt = mnt.replace("\\040", " ")
            if (path == Path(mnt) or Path(mnt) in path.parents) and len(mnt) >= len(
                best.get("mount", "")
            ):
                best = {"device": dev, "mount": mnt, "fstype": fstype, "options": opts}
    return best


def _cmd_out(cmd: list[str]) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (p.stdout or p.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "?"


def machine_info(work: Path) -> dict[str, str]:
    cpu = "?"
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = "?"
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    mnt = _mount_of(work)
    import cryptography
    import xxhash

    from cloudbench import rclone as rc

    return {
        "host": socket.gethostname(),
        "cpu": cpu,
        "cores": f"{os.cpu_count()} ({len(os.sched_getaffinity(0))} usable)",
        "ram": mem,
        "kernel": platform.release(),
        "free page reporting (virtio-balloon)": _page_reporting(),
        "bench dir": str(work),
        "filesystem": f"{mnt.get('fstype', '?')} on {mnt.get('device', '?')} mounted at "
        f"{mnt.get('mount', '?')} ({mnt.get('options', '?')})",
        "python": platform.python_version(),
        "cryptography / xxhash (libxxhash)": f"{cryptography.__version__} / {xxhash.VERSION} "
        f"({xxhash.XXHASH_VERSION})",
        "rclone": _cmd_out([rc.find_rclone(), "version"]),
        "xxh128sum": _cmd_out(["xxh128sum", "--version"]),
        "openssl": _cmd_out(["openssl", "version"]),
        "coreutils": _cmd_out(["split", "--version"]),
    }


def write_results(
    bench: Bench,
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
        f"- {bench.pairs} timed pairs after one untimed warm-up pair, run alternately, the "
        "order within a pair rotating (ours then baseline, baseline then ours, ...: on this "
        "machine the first run of a pair was measurably slower); a row's ratio is the median "
        "of the per-pair ratios "
        "(baseline time / our time; for transfers our rate / the bare rate). Transfers get "
        f"{TRANSFER_PAIRS * bench.pairs} pairs: one rclone copy varies by far more than the "
        "3% being tested. Generate runs as triples (ours, dd, openssl).",
        "- Transfers: local to local, `steps.upload` (strategy plain, threads = usable cores) "
        "against the identical rclone command line (recorded by a wrapper) run bare; the "
        "wrapper's own clock (bash `$EPOCHREALTIME` around rclone) checks the reported rate, "
        "and its ~2 ms of bash start-up count against ours.",
        "- Reassemble + verify: `steps.reassemble` then `steps.verify(keep_data=True)`; "
        "neither side deletes anything (the workflow's verify deletes the download after).",
        "- Ours: the package's step function (`cloudbench.steps.<step>`), called in the bench's "
        "process and timed around the call (record writing included). Baselines: the tool as "
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
        prog="python -m cloudbench.bench",
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
    p.add_argument("--chunk", default="64MiB", help="chunk size (default 64MiB, at most size/4)")
    p.add_argument(
        "--mem-size",
        help="file size for the memory check (default 4GiB; the "
        "--size when that is under 1GiB, for quick runs)",
    )
    p.add_argument("--keep", action="store_true", help="keep the scratch data")
    p.add_argument("--child", nargs=2, metavar=("STEP", "JSON"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        child_main(a.child[0], json.loads(a.child[1]))
        return 0
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
    only = a.only or list(STEPS)
    cache = (
        "cold: `sync; echo 3 > /proc/sys/vm/drop_caches` before every timed run of either side"
        if a.cold
        else "warm: `sync`, then every input read once, before every timed run of either side "
        "(outputs of the previous run deleted first; no write-back pending)"
    ) + (
        f"; then {a.quiesce:g} s of quiet, so that memory freed by deleting the previous "
        "outputs has been handed back to the host for either side"
        if a.quiesce
        else ""
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
    bench = Bench(a)
    try:
        for step in STEPS:
            if step in only:
                print(f"[{step}]", file=sys.stderr, flush=True)
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
        ["python -m cloudbench.bench", *(argv if argv is not None else sys.argv[1:])],
    )
    print_table(bench.rows)
    print(
        f"\n{sum(r.passed for r in bench.rows)}/{len(bench.rows)} targets met; "
        f"{Path(a.out) / 'bench.tsv'}, {Path(a.out) / 'bench.md'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
