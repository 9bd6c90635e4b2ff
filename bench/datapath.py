"""The data path against the tools it stands in for: generate, checksum, chunk, reassemble +
verify, one transfer, memory of every step in a fresh process, and the DAG build time.

Our side is always the package's real step function (``cloudbench.data.steps.generate`` etc.),
run in a fresh process as the workflow's job runs it, its Python start and imports taken off
(the upload's rate comes from its record); the compared version runs the same way, and the
baseline is the command line tool, run as a child process and timed around it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import REPO
from bench.harness import MIB, Harness, Row, versus_previous

MEMORY_LIMIT = 256 * MIB
SCHEDULE_LIMIT = 15.0
TRANSFER_PAIRS = 2  # x --pairs: an rclone copy varies by +-20% from run to run on a busy machine
# x --pairs: writing 2 GiB of fresh page cache, on a VM whose host takes memory back, varies
# 4x from one run to the next for dd and for us alike (per-pair ratios 0.29-1.72, 2026-11-25)
GENERATE_PAIRS = 2
SEED = "cloudbench-bench"
CTX = {"campaign": "bench", "site": "bench"}


def _dataset(size: int):
    from cloudbench.data.steps import DatasetSpec

    return DatasetSpec(CTX["campaign"], CTX["site"], size, SEED)


WRAPPER = r"""#!/bin/bash
# Written by make bench: times `rclone copy` from outside rclone, with bash's own clock.
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


class DataPath(Harness):
    def __init__(self, args) -> None:
        super().__init__(args)
        self.mem_size: int = args.mem_size
        self.name = "bench-001.bin"
        self.data = self.work / "data" / self.name
        self.width = max(4, len(str(max(1, -(-self.size // self.chunk)) - 1)))

    def in_child(self, repo: Path, *steps: tuple[str, dict[str, Any]]) -> dict[str, float]:
        """Run ``steps`` (name, arguments) with ``repo``'s code, each in a fresh process as
        the workflow's jobs run them, less that checkout's Python start and imports: a
        ``--child import`` run right before each step, in the same state of the machine.

        Ours and the compared version both run this way. Ours once ran in the bench's own
        process: the same code compared with itself then read 0.66x, a "REGRESSION" that
        was only the bench process's state after the steps before (2026-11-25). Then the
        imports were timed once per checkout, at its first step: the compared checkout's
        came after ours had written 6 GiB, and its every step read 0.02-0.05 s faster than
        the same code of ours (checksum 0.73x "REGRESSION", 2026-11-26)."""
        total = 0.0
        for step, kw in steps:
            start = run_child(repo, "import", {})[0]
            total += run_child(repo, step, kw)[0] - start
        return {"step_seconds": max(total, 1e-6)}

    def previous_side(self, prepare, *steps: tuple[str, dict[str, Any]]):
        """A side for :meth:`pairs_of` that runs ``steps`` with the compared checkout's
        code (:meth:`in_child`)."""
        assert self.compare is not None
        compare = self.compare
        return ("previous", prepare, lambda: self.in_child(compare, *steps))

    def ensure_data(self) -> None:
        if not (self.data.is_file() and self.data.stat().st_size == self.size):
            from cloudbench.data.generate import generate_file

            generate_file(self.data, self.size, SEED)

    # --- generate -------------------------------------------------------------------------------

    def bench_generate(self) -> None:
        d = self.work / "generate"
        d.mkdir(parents=True, exist_ok=True)
        ours_out, dd_out, ssl_out = d / "ours.bin", d / "dd.bin", d / "openssl.bin"
        prev_out = d / "previous" / "previous.bin"
        count = _dd_count(self.size)

        def clean():
            for p in (ours_out, dd_out, ssl_out, prev_out):
                p.unlink(missing_ok=True)
            self.settle(writes=self.size)

        def ours():
            return self.in_child(REPO, ("generate", {"out": str(ours_out), "size": self.size}))

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

        sides = [("ours", clean, ours), ("dd", clean, dd), ("openssl", clean, openssl)]
        if self.compare:
            sides.append(
                self.previous_side(clean, ("generate", {"out": str(prev_out), "size": self.size}))
            )
        runs = self.pairs_of("generate", sides, pairs=self.rounds(GENERATE_PAIRS))
        for p in (ours_out, dd_out, ssl_out, prev_out):
            p.unlink(missing_ok=True)
        previous = runs.get("previous")
        self.speed_row(
            "generate", runs["ours"], runs["dd"], "dd if=/dev/zero bs=1M", 0.9, previous=previous
        )
        self.speed_row(
            "generate-openssl",
            runs["ours"],
            runs["openssl"],
            "openssl enc -aes-256-ctr < /dev/zero | dd iflag=fullblock",
            1.2,
            previous=previous,
        )

    # --- checksum -------------------------------------------------------------------------------

    def bench_checksum(self) -> None:
        from cloudbench.data.checksums import parse_xxh128sum

        self.ensure_data()
        d = self.work / "checksum"
        d.mkdir(parents=True, exist_ok=True)
        seen: dict[str, set[str]] = {"ours": set(), "xxh128sum": set()}

        def ours():
            kw = {"data": str(self.data), "chunk": self.chunk, "out": str(d / "ours")}
            timed = self.in_child(REPO, ("checksum", kw))
            seen["ours"].add(json.loads((d / "ours" / "chunks.json").read_text())["xxh128"])
            return timed

        def base():
            out = subprocess.run(
                ["xxh128sum", str(self.data)], check=True, capture_output=True, text=True
            ).stdout
            seen["xxh128sum"].add(parse_xxh128sum(out)[str(self.data)])

        def prep():
            self.settle(self.data)

        sides = [("ours", prep, ours), ("xxh128sum", prep, base)]
        if self.compare:
            kw = {"data": str(self.data), "chunk": self.chunk, "out": str(d / "previous")}
            sides.append(self.previous_side(prep, ("checksum", kw)))
        runs = self.pairs_of("checksum", sides)
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
            previous=runs.get("previous"),
        )

    # --- chunk ----------------------------------------------------------------------------------

    def bench_chunk(self) -> None:
        self.ensure_data()
        d = self.work / "chunk"
        from cloudbench.sizes import size_label

        ours_root, split_dir = d / "ours", d / "split"
        ours_dir = ours_root / size_label(self.chunk) / self.data.name

        def prep_ours():
            shutil.rmtree(ours_dir, ignore_errors=True)
            self.settle(self.data, writes=self.size)

        def prep_split():
            shutil.rmtree(split_dir, ignore_errors=True)
            split_dir.mkdir(parents=True)
            self.settle(self.data, writes=self.size)

        def ours():
            kw = {"data": str(self.data), "chunk": self.chunk, "outdir": str(ours_root)}
            return self.in_child(REPO, ("chunk", kw))

        def base():
            subprocess.run(
                ["split", "-b", str(self.chunk), str(self.data), str(split_dir / "x.")], check=True
            )

        sides = [("ours", prep_ours, ours), ("split", prep_split, base)]
        if self.compare:
            prev_dir = d / "previous" / "chunks"

            def prep_previous():
                shutil.rmtree(prev_dir, ignore_errors=True)
                self.settle(self.data, writes=self.size)

            kw = {"data": str(self.data), "chunk": self.chunk, "width": self.width}
            sides.append(
                self.previous_side(prep_previous, ("chunk", kw | {"outdir": str(prev_dir)}))
            )
        runs = self.pairs_of("chunk", sides)
        n = len(list(ours_dir.iterdir()))
        if n != len(list(split_dir.iterdir())):
            raise SystemExit("chunk: ours and split made different numbers of chunks")
        shutil.rmtree(d, ignore_errors=True)
        self.speed_row(
            "chunk",
            runs["ours"],
            runs["split"],
            f"split -b {self.chunk}",
            1.5,
            f"{n} chunks",
            previous=runs.get("previous"),
        )

    # --- reassemble + verify ---------------------------------------------------------------------

    def download_spec(self, scratch: Path, size: int):
        from cloudbench.campaign.model import Layout
        from cloudbench.campaign.spec import TransferSpec

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
        from cloudbench.data.checksums import hash_stream
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
        from cloudbench.data.checksums import parse_xxh128sum
        from cloudbench.data.chunking import split_file
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
            self.settle(chunk_dir, writes=self.size)

        def ours():
            kw = {"spec": spec.to_json(), "manifest": str(man), "out": str(d / "ours")}
            timed = self.in_child(REPO, ("reassemble", kw), ("verify", kw))
            rec = read_json(d / "ours" / "verify.json")
            if rec["status"] != "ok":
                raise SystemExit(f"reassemble+verify: {rec['problems']}")
            return timed | {"digest_from": rec.get("digest_from")}

        def base():
            parts = sorted(str(p) for p in chunk_dir.iterdir())
            with open(cat_out, "wb") as fh:
                subprocess.run(["cat", *parts], stdout=fh, check=True)
            out = subprocess.run(
                ["xxh128sum", str(cat_out)], check=True, capture_output=True, text=True
            ).stdout
            if parse_xxh128sum(out)[str(cat_out)] != digest:
                raise SystemExit("reassemble: cat + xxh128sum disagrees with the manifest")

        sides = [("ours", prep, ours), ("cat+xxh128sum", prep, base)]
        if self.compare:
            kw = {"spec": spec.to_json(), "manifest": str(man), "out": str(d / "previous")}
            sides.append(self.previous_side(prep, ("reassemble", kw), ("verify", kw)))
        runs = self.pairs_of("reassemble", sides)
        source = runs["ours"][-1].extra.get("digest_from")
        shutil.rmtree(d, ignore_errors=True)
        self.speed_row(
            "reassemble+verify",
            runs["ours"],
            runs["cat+xxh128sum"],
            "cat chunks > file; xxh128sum file",
            1.5,
            f"verify took its digest from: {source}",
            previous=runs.get("previous"),
        )

    # --- transfer -------------------------------------------------------------------------------

    def bench_transfer(self) -> None:
        from cloudbench.campaign.spec import TransferSpec
        from cloudbench.data.checksums import hash_stream
        from cloudbench.measure import rclone as rc
        from cloudbench.records import read_json, write_json

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
            fresh_record(rec_path)
            self.settle(src / self.name, writes=self.size)

        upload = upload_args(spec, threads, src, d, sums, rec_path)

        def ours():
            # In a fresh process, as Snakemake runs the transfer job: this process's state
            # after four data steps is not a job's (bn5, bn6 on 2026-11-25: in here, ours
            # ran 4% behind bare rclone; alone, 1%).
            run_child(REPO, "upload", upload, env)
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
            pairs=self.rounds(TRANSFER_PAIRS),
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
        from cloudbench.data.checksums import digest_note_path
        from cloudbench.data.chunking import split_file

        size = self.mem_size
        d = self.work / "memory"
        shutil.rmtree(d, ignore_errors=True)
        data = d / "dataset" / self.name
        spec = self.download_spec(d / "site", size)
        man = d / "manifest.json"
        chunk_dir = spec.local_dir / self.name
        results: list[tuple[str, int, float]] = []

        previous: dict[str, int] = {}

        def child(step: str, **kw: Any) -> None:
            seconds, rss = run_child(REPO, step, kw)
            results.append((step, rss, seconds))
            print(
                f"  memory {step}: max RSS {rss / MIB:.0f} MiB ({seconds:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
            if self.compare is not None:  # the same step, in the other checkout's code
                previous[step] = run_child(self.compare, step, kw)[1]

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
                    versus_previous(rss, previous[step], "B") if step in previous else "-",
                )
            )

    # --- scheduling -----------------------------------------------------------------------------

    def bench_schedule(self) -> None:
        """``snakemake -n`` of two plans: the study's shape at 5 sites, and issue 12's large
        sweep (1-64 clients x 3 strategies x 5 concurrency values x 3 repeats at 5 sites),
        which must plan in under 15 s and submit one job per measurement, not per client."""
        d = self.work / "schedule"
        study = {
            "dataset": {"name": "gauge", "files": 10, "size": "3.8GiB", "chunk_sizes": ["64MiB"]},
        }
        clients, concurrency = [1, 2, 4, 8, 16, 32, 64], [4, 8, 16, 32, 64]
        if self.quick:  # the same plans, of 4 measurements where the sweep has 35
            clients, concurrency = [1, 64], [4, 64]
        sweep = {
            "dataset": {"name": "gauge", "files": 64, "size": "1GiB", "chunk_sizes": ["64MiB"]},
            "clients": clients,
            "concurrency": {s: concurrency for s in ("plain", "chunked", "multithread")},
        }
        self._plan("schedule", d / "study", study, "10 files x 3.8 GiB, 64 MiB chunks")
        what = (
            f"64 files, clients {clients[0]}-{clients[-1]} ({len(clients)} values) x "
            f"concurrency {concurrency[0]}-{concurrency[-1]} ({len(concurrency)} values)"
        )
        self._plan("schedule-sweep", d / "sweep", sweep, f"{what}, every site here")
        # what a centre runs: its own share (snakemake --profile <site>)
        self._plan("schedule-sweep-site", d / "sweep", sweep, f"{what}, site1's share", "site1")

    def _plan(
        self, name: str, d: Path, shape: dict[str, Any], what: str, site: str = "all"
    ) -> None:
        import yaml

        d.mkdir(parents=True, exist_ok=True)
        sites = {
            f"site{i}": {"upload": i == 1, "download": True, "scratch": str(d / f"scratch{i}")}
            for i in range(1, 6)
        }
        cfg = {
            "campaign": "study",
            "remote": str(d / "remote"),
            "bucket": "cloudbench",
            **shape,
            "strategies": ["plain", "chunked", "multithread"],
            "repeats": 3,
            "sites": sites,
            "site": site,
        }
        config = d / "campaign.yaml"
        config.write_text(yaml.safe_dump(cfg, sort_keys=False))
        bindir = Path(sys.executable).parent

        def command(repo: Path) -> list[str]:
            return [
                str(bindir / "snakemake"),
                "--snakefile", str(repo / "workflow" / "Snakefile"),
                "--directory", str(d),
                "--profile", str(repo / "profiles" / "local"),
                "--configfile", str(config),
                "-n",
            ]  # fmt: skip

        env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
        times, previous, jobs, transfers = [], [], "?", "?"
        for k in range(max(1, min(3, self.pairs))):
            if self.compare is not None:  # the other checkout's plan, in turn first and second
                if k % 2 == 0:
                    previous.append(_timed_plan(command(self.compare), d, env, name)[0])
            t0 = time.perf_counter()
            proc = subprocess.run(command(REPO), cwd=d, env=env, capture_output=True, text=True)
            times.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                raise SystemExit(f"{name}: snakemake -n failed:\n{proc.stderr[-2000:]}")
            if self.compare is not None and k % 2 == 1:
                previous.append(_timed_plan(command(self.compare), d, env, name)[0])
            counts: dict[str, int] = {}
            for line in (proc.stdout + proc.stderr).splitlines():
                words = line.split()
                if len(words) == 2 and words[1].isdigit():  # the job table (printed twice)
                    counts.setdefault(words[0], int(words[1]))
            jobs = str(counts.get("total", "?"))
            transfers = str(counts.get("upload", 0) + counts.get("download", 0))
        med = statistics.median(times)
        self.rows.append(
            Row(
                name,
                med,
                SCHEDULE_LIMIT,
                "s",
                med / SCHEDULE_LIMIT,
                "<= 1 (15 s)",
                med < SCHEDULE_LIMIT,
                f"snakemake -n, {what}, 3 strategies, 3 repeats, 5 sites: {jobs} jobs, "
                f"{transfers} transfer jobs (one per measurement); "
                f"runs {' '.join(f'{t:.2f}' for t in times)} s",
                versus_previous(med, statistics.median(previous)) if previous else "-",
            )
        )


# --- the memory check's child process ---------------------------------------------------------


def child_main(step: str, kw: dict[str, Any]) -> None:
    """Run one step as the workflow's command would, in this fresh process (for max RSS)."""
    import cloudbench.cli  # noqa: F401  - the modules every rule's `python -m cloudbench` loads
    from cloudbench.data import steps as datasteps

    if step == "import":
        return
    if step == "generate":
        out = Path(kw["out"])
        rec = out.with_name("generate.json")
        datasteps.generate(_dataset(kw["size"]), out.parent, out.name, rec)
    elif step == "checksum":
        out, data = Path(kw["out"]), Path(kw["data"])
        datasteps.checksum(
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
        datasteps.chunk(
            _dataset(data.stat().st_size),
            data.parent,
            data.name,
            kw["chunk"],
            out,
            out.with_name("chunk.json"),
        )
    elif step in ("reassemble", "verify"):
        from cloudbench import steps
        from cloudbench.campaign.spec import TransferSpec

        spec = TransferSpec.from_json(kw["spec"])
        fn = getattr(steps, step)
        args = (spec, Path(kw["manifest"]), Path(kw["out"]) / f"{step}.json", CTX)
        fn(*args, keep_data=True) if step == "verify" else fn(*args)
    elif step == "upload":
        from cloudbench import steps
        from cloudbench.campaign.spec import TransferSpec

        job = steps.Job(
            TransferSpec.from_json(kw["spec"]),
            kw["threads"],
            Path(kw["record"]),
            Path(kw["log"]),
            Path(kw["series"]),
        )
        sums = [Path(p) for p in kw["sums"].split(os.pathsep)]  # one file's, or several
        steps.upload(job, Path(kw["src"]), Path(kw["chunks"]), sums)
    else:
        raise SystemExit(f"unknown step {step}")


# --- helpers ------------------------------------------------------------------------------------


def fresh_record(record: Path) -> None:
    """No record and no attempts before an upload a row times again: a measurement left
    recorded ok is published again by the next upload, not measured (measure.ledger), so
    every pair after the first would read the first one's rate."""
    from cloudbench.campaign.paths import attempts_dir

    record.unlink(missing_ok=True)
    shutil.rmtree(attempts_dir(record), ignore_errors=True)


def upload_args(spec: Any, threads: int, src: Path, d: Path, sums: Path, record: Path) -> dict:
    """What :func:`child_main`'s ``upload`` step takes: one timed upload as the transfer job
    runs it, its files in ``d``."""
    return {
        "spec": spec.to_json(),
        "threads": threads,
        "src": str(src),
        "chunks": str(d / "chunks"),
        "sums": str(sums),
        "record": str(record),
        "log": str(d / "rclone.jsonl"),
        "series": str(d / "series.tsv"),
    }


def _timed_plan(cmd: list[str], d: Path, env: dict[str, str], name: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{name}: snakemake -n of {cmd[2]} failed:\n{proc.stderr[-2000:]}")
    return seconds, proc.stdout


def run_child(
    repo: Path, step: str, kw: dict[str, Any], extra_env: dict[str, str] | None = None
) -> tuple[float, int]:
    """Run one step in a fresh process with ``repo``'s bench and cloudbench (this checkout,
    or the one compared with), ``extra_env`` added to this one's: wall seconds and max RSS
    in bytes."""
    cmd = [sys.executable, "-m", "bench", "--child", step, json.dumps(kw)]
    path = [str(repo), str(repo / "workflow"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, **(extra_env or {}), "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=repo)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{step} failed in a child process of {repo}")
    return seconds, usage.ru_maxrss * 1024


def _dd_count(size: int) -> list[str]:
    if size % MIB == 0:
        return [f"count={size // MIB}"]
    return ["iflag=count_bytes", f"count={size}"]
