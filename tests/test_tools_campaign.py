"""Tools beyond rclone in a real campaign: s5cmd, the AWS CLI, s3cmd and a command template
move the same dataset as rclone, each row verified against the manifest; their credentials
never reach a command line or an output file. The shared campaign measures both S3 servers
(``rclone serve s3`` and versitygw) side by side as two remotes, so every check holds for
each store from one run. It measures one setting per tool (plain): each tool proves it moves
the dataset verified, up and down, at each store; no client branches on the strategy (the
chunk objects each tool moves: tests/test_user_command.py's round trips, s5cmd's in a
campaign: tests/test_tune_s5cmd.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from pathlib import Path

import pandas as pd
import pytest

from cloudbench.campaign.model import ConfigError, load_campaign
from cloudbench.measure.arrival import MOVED_FROM_LISTING
from cloudbench.measure.clients.base import MOVED_FROM_DESTINATION
from tests.infra.browser import (
    browser,
    check_outputs_in_browser,
    needs_chromium,
    open_page,
    report_results,
    select_view,
)
from tests.infra.s3 import SERVE_S3, VERSITYGW, both_stores, env_of, remotes_of, serve_s3
from tests.infra.workflow import BIN, snakemake, trace_command, write_config

SECRET = "h13b-Campaign-Secret-7c1d"
KEY = "h13bkeyid0042"
# rclone itself as a site's "native client": reads its remote from RCLONE_CONFIG_S3T_*
TEMPLATE = "rclone copy --files-from {files_from} --transfers {threads} {src} {dst}"


def _config(tools=("rclone",), **over) -> dict:
    cfg = {
        "campaign": "tools",
        "remote": "s3t:",
        "bucket": "bench",
        "dataset": {"files": 2, "size": "3MiB", "chunk_sizes": ["1MiB"]},
        "strategies": ["plain", "chunked"],
        "concurrency": {"plain": 2, "chunked": 2},
        "repeats": 1,
        "tools": list(tools),
        "sites": {"edi": {"upload": True, "download": True, "scratch": "scratch"}},
    }
    return cfg | over


# --- the config: one line for every mistake, before any work ----------------------------


@pytest.mark.unit
def test_each_tool_gets_its_settings_and_multithread_stays_rclones():
    cfg = _config(("rclone", "s5cmd", "aws"), strategies=["plain", "multithread"])
    cfg["concurrency"] = {"plain": 2}
    cfg["rclone"] = {"multi_thread_cutoff": "1MiB"}
    c = load_campaign(cfg)
    site = c.sites[0]
    assert [s.label for s in c.settings(site, "plain")] == ["rclone-1x2", "s5cmd-1x2", "aws-1x2"]
    assert [s.tool for s in c.settings(site, "multithread")] == ["rclone"]
    assert len(list(c.measurements())) == 2 * (3 + 1)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (
            {
                "tools": ["s5cmd"],
                "strategies": ["multithread"],
                "concurrency": {},
                "rclone": {"multi_thread_cutoff": "1MiB"},
            },
            "add rclone to tools",
        ),
        ({"tools": ["rclone", "command"]}, "command_template: tools lists command"),
        ({"command_template": TEMPLATE}, "tools does not list command"),
        (
            {"tools": ["command"], "command_template": "cp {src} {threads}"},
            "lacks {dst}",
        ),
        ({"tools": ["rclone", "rclone"]}, "listed twice"),
        ({"tools": ["s5cmd"], "remote": "/data/remote"}, "s5cmd speaks S3 only"),
        ({"tools": ["aws"], "remote": ":s3,provider=Ceph:"}, "a connection string"),
        ({"tools": ["curl"]}, "tools"),
    ],
)
def test_tool_config_mistakes_are_one_line(change, needle):
    with pytest.raises(ConfigError) as err:
        load_campaign(_config() | change)
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert "Ceph" not in str(err.value)  # a connection string's parameters are not echoed


# --- a real campaign --------------------------------------------------------------------


# what each tool's process shows in ``ps``: the watch must have seen every one run
LOOKED_FOR = ("s5cmd", "/aws ", "/s3cmd --config", "rclone copy --files-from")


class CmdlineWatch:
    """Reads every process's command line on the machine while a campaign runs: what any
    user could see with ``ps``. Plain ``os`` calls on bytes, every 20 ms; a process is read
    at every scan for its first 2 s (from fork to exec and through a short copy: an s5cmd
    copy here may last 50 ms), then at every fifth (100 ms): the machine's long-running
    processes (other tests' workers, servers) were most of a scan's reads, and this runs
    beside the whole campaign. A pid that leaves the listing is forgotten, so one reused is
    young again."""

    SCAN_S = 0.02
    YOUNG_SCANS = 100  # 2 s
    OLD_EVERY = 5  # 100 ms

    def __init__(self, needles: tuple[str, ...]) -> None:
        self.needles = tuple(n.encode() for n in needles)
        self.hits: list[str] = []
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        tools = tuple((t, t.encode()) for t in LOOKED_FOR)
        first: dict[str, int] = {}  # pid -> the scan that first listed it
        scan = 0
        while not self._stop.wait(self.SCAN_S):
            scan += 1
            listed: dict[str, int] = {}
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                since = listed[pid] = first.get(pid, scan)
                if scan - since >= self.YOUNG_SCANS and scan % self.OLD_EVERY:
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb", buffering=0) as fh:
                        data = fh.read().replace(b"\0", b" ")
                except OSError:
                    continue
                for tool, raw in tools:
                    if raw in data:
                        self.seen.add(tool)
                if any(n in data for n in self.needles):
                    self.hits.append(data.decode(errors="replace"))
            first = listed

    def __enter__(self) -> CmdlineWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _no_secret_in_files(root: Path, skip: tuple[Path, ...]) -> list[Path]:
    """Files under ``root`` (but not under ``skip``, the server's own files) holding the
    secret key or the key id, in content or name."""
    found = []
    for p in root.rglob("*"):
        if p.is_file() and not any(p.is_relative_to(s) for s in skip):
            data = p.read_bytes()
            if SECRET.encode() in data or KEY.encode() in data or KEY in p.name:
                found.append(p)
    return found


ALL_TOOLS = ("rclone", "s5cmd", "aws", "s3cmd", "command")


@pytest.fixture(scope="module")
def tools_campaign(tmp_path_factory):
    """One campaign with every tool (and its report), both S3 servers measured side by side
    as two remotes (named after their store), shared by the checks below."""
    tmp_path = tmp_path_factory.mktemp("tools")
    with both_stores(str(BIN / "rclone"), tmp_path / "s3root", key=KEY, secret=SECRET) as s3:
        cfg = _config(ALL_TOOLS, command_template=TEMPLATE, remotes=remotes_of(s3))
        cfg |= {"strategies": ["plain"], "concurrency": {"plain": 2}}  # a setting per tool
        cfg.pop("remote")
        path = write_config(tmp_path, cfg)
        env = env_of(s3)
        with CmdlineWatch((SECRET, KEY)) as watch:
            run = snakemake(tmp_path, path, env=env, figures=True)
        assert run.returncode == 0, run.stderr[-3000:]
        report = tmp_path / "results/tools/report.html"
        rep = snakemake(tmp_path, path, "--report", str(report), env=env)
        assert rep.returncode == 0, rep.stderr[-3000:]
    return tmp_path, watch, tuple(s3), report


@pytest.mark.full
@pytest.mark.slow
def test_every_tool_moves_the_same_dataset_verified(tools_campaign):
    tmp_path, watch, stores, _ = tools_campaign
    tools = ALL_TOOLS
    assert watch.hits == [], watch.hits[:2]
    assert set(LOOKED_FOR) <= watch.seen  # it did look
    df = pd.read_csv(tmp_path / "results/tools/transfers.tsv", sep="\t")
    assert len(df) == len(tools) * 2 * len(stores)  # tools x directions x stores
    # every tool and direction against each store: the store's differences
    # (docs/testing.md) are its own, and each tool copes with both
    assert df.groupby("remote").size().to_dict() == {s: len(tools) * 2 for s in stores}
    assert (df["status"] == "ok").all(), df[df["status"] != "ok"][["setting", "error"]]
    assert set(df["tool"]) == set(tools)
    total = 2 * 3 * 2**20
    assert (df["bytes_requested"] == total).all()
    assert ((df["mb_per_s"] - total / df["seconds"] / 1e6).abs() < 0.01).all()
    down = df[df["direction"] == "download"]
    assert (down["bytes_moved"] == total).all()  # found at the destination, every tool
    others = df[df["tool"] != "rclone"]
    assert set(others["bytes_moved_from"]) == {MOVED_FROM_DESTINATION, MOVED_FROM_LISTING}
    assert (others["bytes_moved"] == total).all()  # uploads too: the listing after the copy
    assert others["retries"].isna().all()  # they do not report retries: not 0
    assert others[others["tool"].isin(["s5cmd", "aws", "s3cmd"])]["tool_version"].notna().all()
    s3cmd = df[df["tool"] == "s3cmd"]  # one object at a time: measured at concurrency 1
    assert set(s3cmd["setting"]) == {"s3cmd-1x1"}
    assert (s3cmd["transfers"] == 1).all() and (s3cmd["connections"] == 1).all()
    assert (df["files_per_s"] > 0).all() and (df["s_per_object"] > 0).all()
    # every download was verified against the manifest (a corrupt one would not be ok)
    verify = list((tmp_path / "results/tools/sites/edi/verify").rglob("r1.json"))
    assert len(verify) == len(down)
    # the downloads' per-second series come from sampling the destination
    series = pd.read_csv(tmp_path / "results/tools/timeseries.tsv", sep="\t")
    assert {"s5cmd-1x2", "aws-1x2", "s3cmd-1x1", "command-1x2"} <= set(
        series[series["direction"] == "download"]["setting"]
    )
    for store in stores:
        up = tmp_path / f"results/tools/sites/edi/transfers/upload/{store}/plain/aws-1x2/r1.json"
        assert json.loads(up.read_text())["series_from"].startswith("none")  # said, not faked
        # the tool's own output is kept as the measurement's log (s5cmd's: a line per object)
        log = (
            tmp_path / f"results/tools/sites/edi/client-logs/upload/{store}/plain/s5cmd-1x2/r1.log"
        )
        assert '"operation":"cp"' in log.read_text()
    _check_traced(tmp_path / "results/tools", df)
    # results, job logs, Snakemake's own logs and metadata: the whole working directory
    servers = [tmp_path / "s3root" / s for s in stores]
    skip = tuple(servers) + tuple(s.with_name(f"{s.name}.server") for s in servers)
    assert _no_secret_in_files(tmp_path, skip=skip) == []
    _check_probes(tmp_path / "results/tools", df)
    _check_sections(tmp_path / "results/tools/figures", tools)
    # the probes travel with the site's published results, to each store
    for store in stores:
        published = tmp_path / f"s3root/{store}/bench/tools/results/edi/probe/{store}"
        assert (published / "after.json").exists(), store


@pytest.mark.full
@pytest.mark.slow
def test_trace_names_the_row_whose_kept_files_were_changed(tools_campaign, tmp_path):
    """A copy of the campaign with one s5cmd log missing a line and one AWS CLI listing
    with a size changed: the checker fails, naming those two rows and only them."""
    campaign, _, stores, _ = tools_campaign
    store = stores[-1]  # versitygw where it is built
    results = tmp_path / "tools"
    shutil.copytree(campaign / "results/tools", results)
    edi = results / "sites/edi"
    log = edi / f"client-logs/upload/{store}/plain/s5cmd-1x2/r1.log"
    lines = log.read_text().splitlines(keepends=True)
    cp = next(i for i, x in enumerate(lines) if '"operation":"cp"' in x)
    log.write_text("".join(lines[:cp] + lines[cp + 1 :]))
    listing = edi / f"transfers/upload/{store}/plain/aws-1x2/r1.listing.tsv"
    head, first, *rest = listing.read_text().splitlines(keepends=True)
    name, size, modified = first.split("\t")
    listing.write_text("".join([head, f"{name}\t{int(size) - 1}\t{modified}", *rest]))
    run = trace_command(results, "--allow-untimed")
    assert run.returncode == 1, run.stdout[-3000:]
    bad = [x for x in run.stdout.splitlines() if x.endswith("-> MISMATCH")]
    assert len(bad) == 2, run.stdout
    for row in ("plain/s5cmd-1x2/r1 [s5cmd]", "plain/aws-1x2/r1 [aws]"):
        assert sum(f"edi upload {store} {row}" in x for x in bad) == 1, (row, bad)
    assert "bytes 6291455 in the evidence, 6291456 in the row" in run.stdout
    assert "objects 1 in the evidence, 2 in the row" in run.stdout
    assert f"NOT TRACED: 2 of {10 * len(stores)} ok rows" in run.stdout
    # the campaign itself is untouched: it still traces
    assert trace_command(campaign / "results/tools", "--allow-untimed").returncode == 0


def _check_traced(results: Path, transfers: pd.DataFrame) -> None:
    """Every row's bytes, objects and seconds recomputed by ``cloudbench trace`` from the raw
    files kept beside its record (its client's log; the destination's listing where the
    log has no sizes or times; the series where the files keep the source's times)."""
    run = trace_command(results, "--allow-untimed")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    rows = [x for x in run.stdout.splitlines() if " -> " in x]
    assert len(rows) == len(transfers)
    verdicts = {t: {x.rsplit(" -> ", 1)[1] for x in rows if f"[{t}]" in x} for t in ALL_TOOLS}
    for tool in ("rclone", "s5cmd", "aws", "s3cmd"):
        assert verdicts[tool] == {"traced"}, (tool, run.stdout)
    # rclone as the command template sends the source's times, which ``rclone serve s3``
    # keeps as the object's own: that store's listing cannot time the upload, and the
    # checker says so; versitygw keeps its own time: traced
    assert "traced" in verdicts["command"] <= {"traced", "untimed"}
    untimed = [x for x in rows if x.endswith("-> untimed")]
    assert all(" upload " in x and "[command]" in x and "source's" in x for x in untimed)
    assert not any(f" {VERSITYGW} " in x for x in untimed), untimed
    assert all(f" {SERVE_S3} " in x for x in untimed), untimed
    strict = trace_command(results)  # untimed rows fail the check unless allowed
    assert strict.returncode == (1 if untimed else 0), strict.stdout[-2000:]
    assert "seconds windows" in run.stdout and "log time stamps: 1.00 s below" in run.stdout


def _check_sections(figures: Path, tools) -> None:
    """The Tools and Latency sections: every tool's rate and failure rate, the probes, the
    window/RTT ceiling (this Linux node states its TCP buffers)."""
    for png in ("tools.png", "latency.png"):
        assert (figures / png).stat().st_size > 10_000
    text = (figures / "tools.html").read_text()
    for tool in tools:
        assert f">{tool}<" in text
    assert "Failure rate per tool" in text and "Per object" in text
    lat = (figures / "latency.html").read_text()
    assert "Round-trip time per site and remote" in lat
    assert "window unknown" not in lat and "ceiling_mb_s" in lat


def _check_probes(results: Path, transfers: pd.DataFrame) -> None:
    """Before and after for the site and remote, positive and ordered percentiles, the
    ``after`` probe started once the last transfer had ended."""
    probes = pd.read_csv(results / "probes.tsv", sep="\t")
    assert set(probes["remote"]) == set(transfers["remote"])  # the campaign's names: they join
    for _, of_remote in probes.groupby("remote"):
        assert sorted(of_remote["when"]) == ["after", "before"]
    assert (probes["status"] == "ok").all()
    for op in ("get", "put"):
        p50, p90, p99 = (probes[f"{op}_ttfb_{q}_ms"] for q in ("p50", "p90", "p99"))
        assert (p50 > 0).all() and (p50 <= p90).all() and (p90 <= p99).all()
    assert (probes["connect_p50_ms"] > 0).all()
    for remote, of_remote in probes.groupby("remote"):
        when = of_remote.set_index("when")["started_utc"].map(pd.Timestamp)
        measured = transfers[transfers["remote"] == remote]
        starts = pd.to_datetime(measured["started_utc"])
        ends = starts + pd.to_timedelta(measured["seconds"], "s")
        assert when["before"] <= starts.min() and when["after"] >= ends.max(), remote


@pytest.mark.unit
def test_nested_small_files_refuse_chunked_and_multithread():
    cfg = _config(dataset={"files": 2000, "size": "16KiB", "layout": "nested"})
    with pytest.raises(ConfigError, match="chunked is refused for dataset.layout nested"):
        load_campaign(cfg)
    c = load_campaign(cfg | {"strategies": ["plain"], "concurrency": {}})
    names = c.file_names
    assert names[0] == "d00/d00/tools-0001.bin"
    assert names[1999] == "d01/d09/tools-2000.bin" and len(set(names)) == 2000
    assert c.small_files


# More keys than one S3 listing page (1,000) and past ten leaf directories: every listing
# of the copy is paged (its second page holds the last key), and the last file is the first
# of the second top directory (d01/d00)
N_SMALL = 1001


@pytest.mark.full
@pytest.mark.slow
def test_small_files_campaign(tmp_path):
    """1,001 files of 16 KiB in nested directories (two top directories, and more keys
    than one S3 listing page holds), up and down with rclone and s5cmd: one job makes the
    data, every file verified, files/s and seconds per object reported."""
    cfg = _config(
        ("rclone", "s5cmd"),
        dataset={"files": N_SMALL, "size": "16KiB", "layout": "nested"},
        strategies=["plain"],
        concurrency={"plain": 8},
    )
    path = write_config(tmp_path, cfg)
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root", key=KEY, secret=SECRET) as s3:
        run = snakemake(tmp_path, path, env=s3.client_env("S3T"))
    assert run.returncode == 0, run.stderr[-3000:]
    results = tmp_path / "results/tools"
    df = pd.read_csv(results / "transfers.tsv", sep="\t")
    assert len(df) == 4 and (df["status"] == "ok").all(), df[["setting", "error"]]
    assert (df["files"] == N_SMALL).all() and (df["objects"] == N_SMALL).all()
    assert ((df["files_per_s"] - N_SMALL / df["seconds"]).abs() < 0.01).all()
    assert ((df["s_per_object"] - df["seconds"] / N_SMALL).abs() < 1e-5).all()
    copy = tmp_path / "s3root/bench/tools/data/plain/s5cmd-1x8/r1/objects"
    assert (copy / f"d01/d00/tools-{N_SMALL}.bin").stat().st_size == 16 * 2**10
    steps = pd.read_csv(results / "steps.tsv", sep="\t")
    made = steps[steps["step"] == "generate+checksum"]
    assert len(made) == 1 and made["bytes"].iloc[0] == N_SMALL * 16 * 2**10
    assert not list((results / "sites/edi/steps").glob("generate/*.json"))  # no job per file
    verify = [json.loads(p.read_text()) for p in (results / "sites/edi/verify").rglob("r1.json")]
    assert len(verify) == 2 and all(v["status"] == "ok" for v in verify)
    assert all(v["bytes_checked"] == N_SMALL * 16 * 2**10 for v in verify)
    _check_probes(results, df)


@pytest.mark.full
@pytest.mark.slow
@pytest.mark.browser
@needs_chromium
def test_tools_and_latency_sections_in_the_browser(tools_campaign):
    tmp_path, *_, report = tools_campaign
    figures = tmp_path / "results/tools/figures"
    new = [figures / n for n in ("tools.png", "tools.html", "latency.png", "latency.html")]
    doms = check_outputs_in_browser(new, tmp_path, "tools")
    assert "s5cmd" in doms["tools.html"] and "Window / RTT ceiling" in doms["latency.html"]
    results = report_results(report)
    names = {r["name"] for r in results.values()}
    assert {"tools.png", "tools.html", "latency.png", "latency.html", "probes.tsv"} <= names
    with browser(tmp_path) as b:
        dom = open_page(b, report.as_uri())
        assert "Tools" in dom and "Latency" in dom  # the menu's categories
        assert b.errors == [], b.errors
        for key, r in results.items():
            if r["name"] not in ("tools.png", "latency.html"):
                continue
            shown = select_view(b, key)
            assert b.errors == [], (key, b.errors)
            if r["name"] == "tools.png":
                assert shown["img_width"] is not None and shown["img_width"] > 300, shown
            else:
                assert shown["iframe"], shown


# A "native client" that copies like rclone, then damages one byte of what it downloaded.
CORRUPTING = (
    'sh -c \'rclone copy --files-from "$1" "$2" "$3" || exit 1; case "$3" in *:*) ;; '
    '*) f=$(find "$3" -type f | sort | head -1); '
    'printf X | dd of="$f" bs=1 seek=100 conv=notrunc 2>/dev/null;; esac\' '
    "_ {files_from} {src} {dst}"
)


@pytest.mark.full
@pytest.mark.slow
def test_a_tool_that_corrupts_data_is_caught(tmp_path):
    """Verification does not trust the tool: a download it damaged is corrupt, not ok, and
    counts against the tool's failure rate."""
    cfg = _config(("command",), command_template=CORRUPTING, strategies=["plain"])
    cfg |= {"concurrency": {"plain": 2}, "dataset": {"files": 1, "size": "1MiB"}}
    path = write_config(tmp_path, cfg)
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root", key=KEY, secret=SECRET) as s3:
        run = snakemake(tmp_path, path, env=s3.client_env("S3T"))
    assert run.returncode != 0  # the run ends non-zero, naming what is not ok
    df = pd.read_csv(tmp_path / "results/tools/transfers.tsv", sep="\t")
    status = df.set_index("direction")["status"]
    assert status["upload"] == "ok" and status["download"] == "corrupt"
    assert "XXH128" in df.set_index("direction").loc["download", "error"]
    html = (tmp_path / "results/tools/figures/tools.html").read_text()
    # the failure table flags the tool's download row: 1 of 1 not ok, corrupt
    assert re.search(r'<tr class="flag">.*?>command<.*?>download<.*?>1<.*?>1<.*?>0<.*?>1<', html)


@pytest.mark.unit
def test_preflight_refuses_a_named_non_s3_remote_and_a_missing_client(monkeypatch):
    """What config load cannot know without rclone's config: the remote's type, the
    tools on this site's PATH. One line each, before any data moves."""
    from cloudbench.site.preflight import PreflightSpec, check_tools

    monkeypatch.setenv("RCLONE_CONFIG_DISK_TYPE", "local")
    spec = PreflightSpec(
        campaign="c",
        site="edi",
        scratch="/tmp",
        needed_bytes=0,
        remote_prefixes={"main": "disk:bench/c"},
        flags=(),
        min_rclone_version="1.65.0",
        tools=("rclone", "s5cmd", "command"),
        command_template="no-such-client-h13b cp {src} {dst}",
    )
    problems = check_tools(spec)
    assert sorted(problems) == [
        "command_template: no-such-client-h13b not found on this site's PATH",
        "tools: remote 'disk' is of type local: only S3 remotes can use s5cmd "
        "(use rclone or command)",
    ]


@pytest.mark.full
@pytest.mark.slow
def test_the_first_screens_figure_and_table_agree_for_every_tool(tools_campaign, monkeypatch):
    """Short real transfers of five tools: every median the first screen's figure prints
    is a median of its table, and the other way round (issue: the figure once drew the
    sustained rate and ranked tools opposite to the table's whole-transfer medians)."""
    from cloudbench.report import build, figures, headline, stats

    results = tools_campaign[0] / "results/tools"
    transfers = stats.with_setting(pd.read_csv(results / "transfers.tsv", sep="\t"))
    series = stats.with_setting(pd.read_csv(results / "timeseries.tsv", sep="\t"))
    metrics = stats.transfer_metrics(transfers, series)
    summary = stats.summarise(transfers, series, metrics)
    drawn = []
    monkeypatch.setattr(figures, "save", lambda fig, path: drawn.append(fig))
    figures.whole_rates(build.by_variant(metrics), {"campaign": "tools"}, results / "x.png")
    shown = sorted(float(t.get_text()) for ax in drawn[0].axes for t in ax.texts)
    table = headline.rows(metrics, summary)
    assert len(table) == len(
        transfers.drop_duplicates(["remote", "direction", "layout", "setting"])
    )
    assert shown == sorted(float(figures.num(m)) for m in table["median"])
    assert len(set(transfers["tool"])) == 5
