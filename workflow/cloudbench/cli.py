"""``cloudbench <step>``: the one command each workflow rule runs.

Errors a user can act on (a missing upload, a too-old rclone) end as one line on stderr and
exit status 2; anything else is a bug and keeps its traceback.

Every command imports only the modules it uses (a data job needs no rclone, YAML or pandas):
a Python start-up per job is most of what a job costs on small files.
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys
from pathlib import Path

# The errors a user can act on, by the module that defines them: a module that was never
# imported cannot have raised its error, so only the imported ones are caught.
USER_ERRORS = {
    "cloudbench.data.steps": "StepError",
    "cloudbench.measure.rclone": "RcloneError",
    "cloudbench.campaign.labels": "ConfigError",  # campaign.model's, defined in its labels
    "cloudbench.sizes": "SizeError",
    "cloudbench.site.exchange": "ExchangeError",
}


def user_errors() -> tuple[type[BaseException], ...]:
    return tuple(getattr(sys.modules[m], n) for m, n in USER_ERRORS.items() if m in sys.modules)


def _step_error(message: str) -> Exception:
    from cloudbench.data.steps import StepError

    return StepError(message)


def _spec(a: argparse.Namespace):
    from cloudbench.campaign.spec import TransferSpec

    return TransferSpec.from_json(a.spec)


def _dataset(a: argparse.Namespace):
    from cloudbench.data.steps import DatasetSpec

    return DatasetSpec.from_json(a.dataset)


def cmd_generate(a):
    from cloudbench.data import steps as datasteps

    datasteps.generate(_dataset(a), Path(a.dataset_dir), a.file, Path(a.record))


def cmd_generate_small_files(a):
    from cloudbench.campaign.model import file_names
    from cloudbench.data import steps as datasteps

    names = json.loads(a.names)
    datasteps.generate_small_files(
        _dataset(a),
        Path(a.dataset_dir),
        file_names(names["name"], names["files"], names["layout"]),
        Path(a.checksums),
        Path(a.record),
    )


def cmd_checksum(a):
    from cloudbench.data import steps as datasteps

    sizes = [int(s) for s in a.chunk_sizes.split(",") if s]
    datasteps.checksum(
        _dataset(a),
        Path(a.dataset_dir),
        a.file,
        sizes,
        Path(a.sum),
        Path(a.chunks),
        Path(a.record),
    )


def cmd_chunk(a):
    from cloudbench.data import steps as datasteps

    datasteps.chunk(
        _dataset(a),
        Path(a.dataset_dir),
        a.file,
        int(a.chunk_bytes),
        Path(a.chunks_root),
        Path(a.record),
    )


def cmd_upload(a):
    from cloudbench import steps

    steps.upload(_job(a), Path(a.dataset_dir), Path(a.chunks_root), [Path(p) for p in a.checksums])


def _job(a):
    """What a transfer job is given (cloudbench.steps.Job), from its command line."""
    from cloudbench import steps

    paths = (Path(a.record), Path(a.client_log), Path(a.series))
    return steps.Job(_spec(a), a.threads, *paths, *_limits(a), _policy(a))


RUN_SPEC_ARG = (
    "--run-spec",
    {
        "default": None,
        "help": "this run's spec (campaign.jobs.RunSpec: store_down, when the run began, the "
        "site preflights' gates), written when the run starts; unset: store_down's defaults",
    },
)


def _run_spec(a):
    """The run's spec named by --run-spec (None when none is), or a one-line error."""
    from cloudbench.campaign import jobspec

    if not a.run_spec:
        return None
    try:
        return jobspec.read_run(a.run_spec)
    except jobspec.RunSpecError as e:
        raise _step_error(str(e)) from None


def _policy(a):
    """The campaign's store_down (cloudbench.site.breaker.Policy), from the run's spec."""
    from cloudbench.site.breaker import Policy, policy_of_run

    run = _run_spec(a)
    return Policy() if run is None else policy_of_run(run)


def _limits(a) -> tuple[float | None, float | None]:
    """The copy's time limit (cloudbench.measure.copy.copy_timeout), and the seconds the
    steps after it share (``after_copy_s``). A job no scheduler holds (a local run, or the
    submit host) has no walltime, whatever its runtime resource says (the workflow profile
    asks 12 h for batch transfers): there the limit is the copy's bytes at 1 MB/s plus 10
    minutes, so a store that died mid-copy ends the copy in minutes, not hours. In a batch
    job, the walltime is what the scheduler says is left (site.walltime), when that is less
    than the rule's runtime: one allocation runs many transfers in one job."""
    import os

    from cloudbench.campaign.jobspec import auto_runtime_min
    from cloudbench.measure.copy import after_copy_s, copy_timeout
    from cloudbench.records import batch_job
    from cloudbench.site.walltime import time_left_s

    walltime = a.walltime_min
    if not batch_job(os.environ)[0]:
        spec = _spec(a)
        walltime = auto_runtime_min(spec.file_bytes * len(spec.files))
        return copy_timeout(walltime, a.copy_timeout_s), None
    left = time_left_s(os.environ)
    if left is not None:
        walltime = min(walltime, left / 60) if walltime else left / 60
    copy_s = copy_timeout(walltime, a.copy_timeout_s)
    return copy_s, after_copy_s(walltime, copy_s)


def cmd_download(a):
    from cloudbench import steps

    steps.download(_job(a), Path(a.manifest), Path(a.upload_record) if a.upload_record else None)


def cmd_stage(a):
    from cloudbench.data import steps as datasteps

    datasteps.stage([Path(p) for p in a.checksums], Path(a.out), [Path(p) for p in a.steps])


def cmd_client(a):
    from cloudbench.measure import timed

    timed.run_client(Path(a.plan), a.index)


def _skipped(a, step: str) -> bool:
    """A failed download has nothing to reassemble or verify: record that, don't crash."""
    from cloudbench.records import read_json, write_json

    rec = read_json(Path(a.download_record))
    if rec["status"] == "ok":
        return False
    write_json(
        Path(a.record),
        {
            "step": step,
            "status": "skipped",
            "site": rec["site"],
            "campaign": rec["campaign"],
            "item": rec["layout"],
            "setting": rec.get("setting"),
            "remote": rec["remote"],
            "repeat": rec["repeat"],
            "problems": [f"download {rec['status']}: {rec.get('error')}"],
        },
    )
    return True


def cmd_reassemble(a):
    from cloudbench.measure import check

    if _skipped(a, "reassemble"):
        return
    spec = _spec(a)
    check.reassemble(
        spec, Path(a.manifest), Path(a.record), {"campaign": spec.campaign, "site": spec.site}
    )


def cmd_verify(a):
    from cloudbench.measure import check

    if _skipped(a, "verify"):
        return
    spec = _spec(a)
    check.verify(
        spec,
        Path(a.manifest),
        Path(a.record),
        {"campaign": spec.campaign, "site": spec.site},
        keep_data=a.keep_data,
    )


def cmd_manifest(a):
    from cloudbench import steps
    from cloudbench.data import steps as datasteps

    steps.campaign_manifest(
        json.loads(a.info),
        [Path(p) for p in a.checksums],
        [Path(p) for p in a.uploads],
        Path(a.out),
    )
    if a.release:
        datasteps.release_upload_data(Path(a.release))


def cmd_precision_final(a):
    """repeats: auto's last decisions are final: keep them, and release the upload site's
    generated data (the later rounds' uploads made it again; nothing will read it now)."""
    import shutil

    from cloudbench.data import steps as datasteps

    shutil.copyfile(a.decisions, a.out)
    if a.release:
        datasteps.release_upload_data(Path(a.release))


def cmd_aggregate(a):
    """The tables, then (in the same process: pandas loaded once) the HTML tables and the
    front page's text from them; no plotting library (the figures rule draws)."""
    from cloudbench.report import aggregate  # pandas: only where tables are made

    plan = json.loads(Path(a.expected).read_text())
    aggregate.write_tables(Path(a.results), plan, Path(a.out))
    from cloudbench.report import build as plots
    from cloudbench.report.outputs import AGGREGATE_OUTPUTS

    outputs = {name: Path(getattr(a, name)) for name in AGGREGATE_OUTPUTS}
    plots.build_report(Path(a.out), json.loads(a.info), outputs)


def cmd_figures(a):
    """The report's figures from the campaign's tables, and its front page: aggregate's
    headline with its figure."""
    from cloudbench.report import build as plots  # matplotlib and seaborn: only here
    from cloudbench.report.outputs import FIGURES

    outputs = {name: Path(getattr(a, name)) for name in FIGURES}
    jobs = plots.drawing_processes(a.jobs, *plots.spare_cores())
    plots.draw_figures(Path(a.tables), json.loads(a.info), outputs, Path(a.headline), jobs=jobs)


def cmd_preflight(a):
    from dataclasses import asdict

    from cloudbench.site import preflight

    data = json.loads(a.spec)
    data["flags"] = tuple(data["flags"])
    data["tools"] = tuple(data.get("tools", ()))
    if a.needed_bytes is not None:
        data["needed_bytes"] = a.needed_bytes
    if data.get("scratch"):  # a site's own preflight: its gates too, before any data
        run = _run_spec(a)
        gates = run.gates.get(data["site"], []) if run else []
        data = preflight.with_gates(data, [asdict(g) for g in gates])
        # the upload comes later in this same run: not asked of the remote
        data["needs_upload"] = data.get("needs_upload", False) and not (
            run and run.upload_in_this_run
        )
        data["run_started_epoch"] = run.run_started_epoch if run else None
    elif a.site_preflight and (run := _run_spec(a)):  # a gate: done by the site's, this run?
        from cloudbench.records import read_json, write_json

        site, gate = read_json(Path(a.site_preflight)), preflight.PreflightSpec(**data)
        if record := preflight.checked_by_site(site, gate, run.run_started_epoch):
            write_json(Path(a.out), record)
            return
    problems = preflight.run_preflight(preflight.PreflightSpec(**data), Path(a.out))
    if problems:
        raise _step_error(f"preflight failed at site {data['site']}:\n  " + "\n  ".join(problems))


def cmd_probe(a):
    from cloudbench.site import probe
    from cloudbench.sizes import parse_size

    try:
        probe.run_probe(
            a.remote_url,
            a.bucket_path,
            Path(a.out),
            count=a.count,
            object_bytes=parse_size(a.object_size),
            extra={
                k: v for k, v in (("when", a.when), ("site", a.site), ("remote", a.remote)) if v
            },
            skip_non_s3=a.skip_non_s3,
        )
    except probe.ProbeError as err:
        raise _step_error(str(err)) from None


def cmd_status(a):
    from cloudbench.site import status

    results = Path(a.transfers).parent
    failures, avoided = status.split_avoided(
        status.failures(Path(a.transfers)), status.avoided_by_search(results)
    )
    if failures:
        raise _step_error(status.describe(failures, results))
    Path(a.out).write_text(
        "all measurements ok\n"
        if not avoided
        else f"all measurements ok, except {len(avoided)} repeat(s) of settings that failed "
        "while the store answered: the tuning search found them and avoids them (tuned.tsv)\n"
    )


def cmd_publish(a):
    from cloudbench.site import exchange

    spec = json.loads(a.spec)
    exchange.publish(a.site, Path(a.local), spec["prefixes"], tuple(spec["flags"]), Path(a.out))


def cmd_pull(a):
    from cloudbench.site import exchange

    spec = json.loads(a.spec)
    exchange.pull(a.site, spec["prefixes"], Path(a.local), tuple(spec["flags"]), Path(a.out))


def cmd_cleanup(a):
    from cloudbench.site import status

    status.cleanup(json.loads(a.spec))


def cmd_watch(argv: list[str]) -> int:
    """``cloudbench watch``: live progress of this site's running transfers."""
    import yaml

    from cloudbench.campaign.model import ConfigError, load_campaign
    from cloudbench.measure.progress import watch

    p = argparse.ArgumentParser(prog="cloudbench watch", description=cmd_watch.__doc__)
    p.add_argument("--configfile", default="config/config.yaml", help="the campaign file")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between updates")
    p.add_argument("--plain", action="store_true", help="plain lines, even on a terminal")
    p.add_argument("--remote", action="store_true", help="also list sites published")
    p.add_argument("--exit-when-idle", type=float, help="stop after this many idle seconds")
    a = p.parse_args(argv)
    try:
        with open(a.configfile) as fh:
            campaign = load_campaign(yaml.safe_load(fh))
    except (OSError, ConfigError) as err:
        print(f"cloudbench watch: {a.configfile}: {err}", file=sys.stderr)
        return 2
    remote = (campaign.rendezvous_prefixes, campaign.rclone_flags) if a.remote else None
    try:
        watch(
            Path("results") / campaign.name,
            interval=a.interval,
            plain=True if a.plain else None,
            idle_exit=a.exit_when_idle,
            remote=remote,
        )
    except KeyboardInterrupt:
        pass
    return 0


class Stopped(KeyboardInterrupt):
    """SIGTERM (scancel, qdel, a walltime, Snakemake stopping its jobs, the job's shell
    gone): ended as Ctrl-C ends a job, its client and temporary files with it, where the
    default action left them behind."""


def _stopped(signum: int, frame: object) -> None:
    raise Stopped


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's options, or with ``only`` that one command's: a job runs one command,
    and making the parsers of all of them is a tenth of a small transfer job's own time
    (each argparse parser costs about a millisecond). The report's output options (aggregate,
    figures) are listed only for those, so a job of another command does not import them."""
    p = argparse.ArgumentParser(
        prog="cloudbench",
        description=__doc__,
        epilog="Commands for people, beside the steps above (each has its own --help): "
        + "; ".join(f"{name} ({what})" for name, (_, what) in PEOPLE_COMMANDS.items())
        + ".",
    )
    sub = p.add_subparsers(dest="command", required=True)
    made: list[str] = []
    p.set_defaults(commands=made)

    def add(name, func, *args: tuple[str, dict]):
        if only is not None and name != only:
            return None
        sp = sub.add_parser(name)
        made.append(name)
        for flag, kw in args:
            sp.add_argument(flag, **kw)
        sp.set_defaults(func=func)
        return sp

    req = {"required": True}
    data = [("--dataset", req), ("--dataset-dir", req), ("--file", req), ("--record", req)]
    add("generate", cmd_generate, *data)
    add(
        "generate-small-files",
        cmd_generate_small_files,
        ("--dataset", req),
        ("--dataset-dir", req),
        ("--names", {**req, "help": 'JSON {"name", "files", "layout"}: see campaign.file_names'}),
        ("--checksums", req),
        ("--record", req),
    )
    add(
        "checksum",
        cmd_checksum,
        *data,
        ("--chunk-sizes", {"default": ""}),
        ("--sum", req),
        ("--chunks", req),
    )
    add("chunk", cmd_chunk, *data, ("--chunk-bytes", req), ("--chunks-root", req))
    tx = [
        ("--spec", req),
        ("--threads", {"type": int, "required": True}),
        ("--record", req),
        ("--client-log", req),
        ("--series", req),
        ("--walltime-min", {"type": float, "default": None, "help": "the job's runtime"}),
        (
            "--copy-timeout-s",
            {
                "type": float,
                "default": None,
                "help": "campaign copy_timeout in seconds; 0 or unset: auto (the job's "
                "walltime less a margin, or the copy's bytes at 1 MB/s plus 10 minutes)",
            },
        ),
        RUN_SPEC_ARG,
    ]
    add(
        "upload",
        cmd_upload,
        *tx,
        ("--dataset-dir", req),
        ("--chunks-root", req),
        ("--checksums", {"nargs": "+", "required": True}),
    )
    add("download", cmd_download, *tx, ("--manifest", req), ("--upload-record", {}))
    add(
        "stage",
        cmd_stage,
        ("--checksums", {"nargs": "+", **req}),
        ("--steps", {"nargs": "*", "default": []}),
        ("--out", req),
    )
    add("client", cmd_client, ("--plan", req), ("--index", {"type": int, "default": None}))
    add(
        "reassemble",
        cmd_reassemble,
        ("--spec", req),
        ("--manifest", req),
        ("--record", req),
        ("--download-record", req),
    )
    add(
        "verify",
        cmd_verify,
        ("--spec", req),
        ("--manifest", req),
        ("--record", req),
        ("--download-record", req),
        ("--keep-data", {"action": "store_true"}),
    )
    add(
        "manifest",
        cmd_manifest,
        ("--info", req),
        ("--checksums", {"nargs": "+", **req}),
        ("--uploads", {"nargs": "+", **req}),
        ("--out", req),
        ("--release", {"default": ""}),
    )
    add(
        "precision-final",
        cmd_precision_final,
        ("--decisions", req),
        ("--out", req),
        ("--release", {"default": ""}),
    )
    report_outputs: dict[str, tuple[tuple[str, dict], ...]] = {"aggregate": (), "figures": ()}
    if only is None or only in report_outputs:
        from cloudbench.report.outputs import AGGREGATE_OUTPUTS, FIGURES

        for command, names in (("aggregate", AGGREGATE_OUTPUTS), ("figures", FIGURES)):
            report_outputs[command] = tuple((f"--{n.replace('_', '-')}", req) for n in names)
    add(
        "aggregate",
        cmd_aggregate,
        ("--results", req),
        ("--expected", {**req, "help": "plan.json: what the tables may hold"}),
        ("--out", req),
        ("--info", req),
        *report_outputs["aggregate"],
    )
    add(
        "figures",
        cmd_figures,
        ("--tables", {**req, "help": "the campaign's results directory, its tables"}),
        ("--info", req),
        ("--jobs", {"type": int, "default": 1, "help": "processes drawing the figures"}),
        ("--headline", {**req, "help": "aggregate's front page, without its figure"}),
        *report_outputs["figures"],
    )
    add(
        "preflight",
        cmd_preflight,
        ("--spec", req),
        ("--out", req),
        ("--needed-bytes", {"type": int, "default": None, "help": "scratch this site needs"}),
        ("--site-preflight", {"default": None, "help": "a gate: its site's preflight record"}),
        RUN_SPEC_ARG,
    )
    add(
        "probe",
        cmd_probe,
        ("--remote-url", {**req, "help": "the rclone remote, name: or name:bucket/prefix"}),
        ("--bucket-path", {"help": "bucket/prefix for the probe's objects (default: the url's)"}),
        ("--remote", {"help": "the campaign's name for the remote, kept in the record"}),
        ("--count", {"type": int, "default": 16, "help": "small PUTs and GETs, each"}),
        ("--object-size", {"default": "4KiB", "help": "size of each small object"}),
        ("--when", {"default": "", "help": "before or after the site's transfers"}),
        ("--site", {"default": ""}),
        ("--skip-non-s3", {"action": "store_true", "help": "record why, instead of failing"}),
        ("--out", req),
    )
    add("status", cmd_status, ("--transfers", req), ("--out", req))
    add("cleanup", cmd_cleanup, ("--spec", req))
    xchg = [("--site", req), ("--spec", req), ("--local", req), ("--out", req)]
    add("publish", cmd_publish, *xchg)
    add("pull", cmd_pull, *xchg)
    return p


def cmd_compare(argv: list[str]) -> int:
    """``cloudbench compare A B``: campaign B against campaign A, measurement by measurement."""
    p = argparse.ArgumentParser(
        prog="cloudbench compare",
        description="Campaign B against campaign A: for every measurement both made, the "
        "factor of B's median rate over A's with its exact interval and a verdict (slower, "
        "faster: by more than the margin, with the false discovery rate held at 5% over the "
        "measurements compared; else no clear change); regressions first; measurements of "
        "one campaign only are listed.",
    )
    p.add_argument("a", type=Path, help="results directory (or transfers.tsv) of campaign A")
    p.add_argument("b", type=Path, help="results directory (or transfers.tsv) of campaign B")
    p.add_argument("--out", type=Path, help="write compare.tsv and compare.html here")
    p.add_argument(
        "--margin",
        type=float,
        default=None,
        help="a change smaller than this share is no verdict (default 0.05: 5%%)",
    )
    a = p.parse_args(argv)
    from cloudbench.report import compare

    try:
        margin = compare.MARGIN if a.margin is None else a.margin
        if not 0 <= margin < 1:
            raise ValueError(f"--margin {margin}: give a share between 0 and 1 (0.05 is 5%)")
        table = compare.compare(compare.read_transfers(a.a), compare.read_transfers(a.b), margin)
    except (FileNotFoundError, ValueError) as err:
        print(f"cloudbench compare: {err}", file=sys.stderr)
        return 2
    print("\n".join(compare.lines(table, str(a.a), str(a.b))))
    if a.out:
        compare.write_outputs(
            table, str(a.a), str(a.b), a.out / "compare.tsv", a.out / "compare.html"
        )
    return 0


def cmd_config_doc(argv: list[str]) -> int:
    """``cloudbench config-doc``: every campaign key, from the schema."""
    from cloudbench.campaign.schema import config_doc

    sys.stdout.write(config_doc())
    return 0


def cmd_columns_doc(argv: list[str]) -> int:
    """``cloudbench columns-doc``: every column of transfers.tsv."""
    from cloudbench.measure.record import columns_doc

    sys.stdout.write(columns_doc())
    return 0


# The commands a person types (each parses its own options), in the order --help lists them:
# name -> ("module:function" taking the command's arguments and returning its exit status,
# what it does). The workflow's steps are build_parser's; one table serves main and --help.
PEOPLE_COMMANDS: dict[str, tuple[str, str]] = {
    "watch": ("cloudbench.cli:cmd_watch", "live progress of a campaign's transfers"),
    "compare": ("cloudbench.cli:cmd_compare", "one campaign against another"),
    "series": (
        "cloudbench.report.series:main",
        "a campaign run again and again: each route's rate over time, its changes against "
        "the baseline, a status for monitoring",
    ),
    "estimate": (
        "cloudbench.report.estimate:main",
        "how long your data takes on each route (--size 2TiB --files 1000), with its "
        "interval, egress cost and limit",
    ),
    "trace": (
        "cloudbench.report.trace:main",
        "every row of a campaign recomputed from the raw files beside its record",
    ),
    "launch": (
        "cloudbench.site.launch:main",
        "start every site's run over ssh, detached; --status, --follow",
    ),
    "config-doc": ("cloudbench.cli:cmd_config_doc", "every campaign key, from the schema"),
    "columns-doc": ("cloudbench.cli:cmd_columns_doc", "every column of transfers.tsv"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in PEOPLE_COMMANDS:
        module, _, function = PEOPLE_COMMANDS[argv[0]][0].partition(":")
        return getattr(importlib.import_module(module), function)(argv[1:])
    first = argv[0] if argv and not argv[0].startswith("-") else None
    parser = build_parser(only=first)
    if first not in parser.get_default("commands"):  # no such command: say which there are
        parser = build_parser()
    args = parser.parse_args(argv)
    from cloudbench.site.jobenv import end_with_job_shell

    end_with_job_shell()  # every command below is a job's (or a client's) own process
    signal.signal(signal.SIGTERM, _stopped)
    try:
        args.func(args)
    except Stopped:
        print(f"cloudbench {args.command}: stopped by SIGTERM", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:  # Ctrl-C reaches the job too: one line, not a traceback
        print(f"cloudbench {args.command}: interrupted (Ctrl-C)", file=sys.stderr)
        return 130
    except Exception as err:
        if not isinstance(err, user_errors()):
            raise
        print(f"cloudbench {args.command}: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
