"""Sites that share nothing but the remote (a real S3 endpoint on 127.0.0.1).

Three sites, each in a directory of its own, and a laptop that only aggregates, run once
for the module (:func:`three_sites`); the tests below read what those runs left.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from tests.conftest import DEMO_ONLY
from tests.infra.s3 import serve_s3
from tests.infra.terminal import full_log, measurement_lines
from tests.infra.workflow import BIN, ROOT, snakemake, write_config

pytestmark = [pytest.mark.full, pytest.mark.slow]
SITES = ("tursa", "tesseract", "bnl")


def _demo_config() -> dict:
    """The demo's campaign as a grid (without the tuning mode and ladders of `make demo`)."""
    with open(ROOT / "config" / "config.yaml") as fh:
        cfg = copy.deepcopy(yaml.safe_load(fh))
    return {k: v for k, v in cfg.items() if k not in DEMO_ONLY}


def _config(campaign: str = "demo") -> dict:
    cfg = _demo_config()
    # one layout, the one with the most steps (chunks uploaded, reassembled at each site):
    # every check below is per layout or per site, so a second layout only doubles the copies
    cfg.update(campaign=campaign, remote="s3t:", strategies=["chunked"], repeats=1)
    cfg["dataset"].update(files=1, size="2MiB", chunk_sizes=["1MiB"])
    cfg["rclone"]["flags"] = []
    cfg["probe"] = {"count": 2}  # the probe is not what these tests look at
    cfg["sites"] = {
        "tursa": {
            "upload": True,
            "download": True,
            "scratch": "scratch",
            "location": [55.92, -3.17],
        },
        "tesseract": {
            "upload": False,
            "download": True,
            "scratch": "scratch",
            "location": [55.92, -3.17],
        },
        "bnl": {
            "upload": False,
            "download": True,
            "scratch": "scratch",
            "location": [40.87, -72.88],
        },
    }
    return cfg


#: a site's run whose own tables no test reads: no report (aggregate, and the status that
#: reads its table) and no pull of the other sites' results, which only the report reads
#: (about 3 CPU-seconds a run)
NO_TABLES = ("--omit-from", "pull", "aggregate")


def _run_site(root: Path, cfg: dict, site: str, env: dict, *args: str, figures: bool = False):
    workdir = root / site
    path = write_config(workdir, cfg)
    return snakemake(workdir, path, "--config", f"site={site}", *args, env=env, figures=figures)


def _table(workdir: Path, name: str = "transfers.tsv") -> pd.DataFrame:
    return pd.read_csv(workdir / "results/demo" / name, sep="\t")


@pytest.fixture(scope="module")
def three_sites(tmp_path_factory):
    """bnl tries to download before anything was uploaded (and stops); tursa uploads,
    tesseract and then bnl download, each in its own directory (each downloader's run pulls
    the others' results); tesseract's downloads are measured again; then a laptop
    (site=none), which measures nothing, aggregates and makes the report. What each step
    left, for the tests below."""
    root = tmp_path_factory.mktemp("three-sites")
    cfg = _config()
    seen = SimpleNamespace(root=root, s3root=root / "s3root")
    with serve_s3(str(BIN / "rclone"), seen.s3root) as s3:
        env = s3.client_env("S3T")
        # bnl, a download site, tries before the upload site has run: it stops at preflight
        # (its tables, of nothing measured, are not read)
        early = _run_site(root, cfg, "bnl", env, *NO_TABLES)
        seen.early_returncode = early.returncode
        bnl = root / "bnl/results/demo/sites/bnl"
        seen.early_log = (bnl / "logs/preflight.log").read_text()
        seen.early_transfers = (bnl / "transfers").exists()
        # tursa's own tables are not read: its run stops short of the report, and of pulling
        # the others (nothing published yet; tesseract's run shows a site not reported yet)
        run = _run_site(root, cfg, "tursa", env, *NO_TABLES)
        assert run.returncode == 0, run.stderr[-3000:]
        run = _run_site(root, cfg, "tesseract", env)
        assert run.returncode == 0, run.stderr[-3000:]
        # tesseract's run pulled tursa's results, and bnl has not reported yet
        seen.early = _table(root / "tesseract")
        seen.early_missing = _table(root / "tesseract", "missing.tsv")

        # the last site, in the directory where it stopped before: its run pulls the others
        run = _run_site(root, cfg, "bnl", env)
        assert run.returncode == 0, run.stderr[-3000:]
        seen.all_sites = _table(root / "bnl")
        seen.all_sites_missing = _table(root / "bnl", "missing.tsv")
        seen.run_before = json.loads(
            (seen.s3root / "cloudbench/demo/results/tesseract/run.json").read_text()
        )

        # rerun one downloader: only its rows change, its earlier run is kept as history (the
        # laptop's tables show it: the rerun's own are not read)
        rerun = _run_site(root, cfg, "tesseract", env, "--forcerun", "download", *NO_TABLES)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        laptop = _run_site(root, cfg, "none", env, figures=True)  # aggregate anywhere: pulls all
        assert laptop.returncode == 0, laptop.stderr[-3000:]
        seen.after = _table(root / "none")
        seen.after_missing = _table(root / "none", "missing.tsv")
        seen.report = root / "none/results/demo/report.html"
        rep = _run_site(root, cfg, "none", env, "--report", str(seen.report))
        assert rep.returncode == 0, rep.stderr[-3000:]
    return seen


def test_a_site_not_reported_yet_is_listed_missing_not_dropped(three_sites):
    """At tesseract, after tursa and itself, before bnl."""
    assert set(three_sites.early_missing["site"]) == {"bnl"}
    assert len(three_sites.early) == 1 + 1 + 1  # tursa's upload and download, tesseract's
    assert set(three_sites.early["site"]) == {"tursa", "tesseract"}


def test_three_sites_meet_at_the_remote(three_sites):
    """Every site's rows at the last site to run, and at a laptop that measured nothing."""
    for table, missing in (
        (three_sites.all_sites, three_sites.all_sites_missing),
        (three_sites.after, three_sites.after_missing),
    ):
        assert len(table) == 4 and (table["status"] == "ok").all()
        assert missing.empty
        assert set(table["site"]) == set(SITES)
        for col in ("host", "started_utc", "rclone_version", "node_cores"):
            assert table[col].notna().all()


def test_cross_site_visibility_is_read_from_the_manifest_exchange(three_sites):
    """Both ends from the manifest exchange: every site read the same copy's publication
    time, after its upload ended; bnl ran last, so its copies were oldest when read."""
    before = three_sites.all_sites
    downs = before[before["direction"] == "download"]
    assert downs.groupby("layout")["copy_published_utc"].nunique().eq(1).all()
    ups = before[before["direction"] == "upload"].set_index("layout")
    for d in downs.itertuples():
        up_end = pd.Timestamp(ups.loc[d.layout, "started_utc"]) + pd.Timedelta(
            seconds=ups.loc[d.layout, "seconds"]
        )
        assert pd.Timestamp(d.copy_published_utc) >= up_end
        read = pd.Timestamp(d.copy_read_utc) - pd.Timestamp(d.copy_published_utc)
        assert d.copy_age_s == pytest.approx(read.total_seconds(), abs=0.01)
    age = downs.groupby("site")["copy_age_s"].min()
    assert 0 < age["tursa"] < age["tesseract"] < age["bnl"]


def test_the_laptops_report_shows_cross_site_visibility(three_sites):
    assert three_sites.report.stat().st_size > 50_000
    latency_page = (three_sites.root / "none/results/demo/figures/latency.html").read_text()
    assert "Cross-site visibility" in latency_page and "min_copy_age_s" in latency_page


def test_a_downloader_measured_again_changes_only_its_rows_and_keeps_its_run(three_sites):
    key = ["site", "direction", "layout", "repeat"]
    merged = three_sites.all_sites.merge(three_sites.after, on=key, suffixes=("_before", "_after"))
    assert len(merged) == 4
    changed = merged[merged["started_utc_before"] != merged["started_utc_after"]]
    assert set(changed["site"]) == {"tesseract"} and len(changed) == 1
    history = three_sites.s3root / "cloudbench/demo/history/tesseract"
    runs = [p for p in history.iterdir() if p.is_dir()]
    assert len(runs) == 1
    old = json.loads((runs[0] / "run.json").read_text())
    new = json.loads(
        (three_sites.s3root / "cloudbench/demo/results/tesseract/run.json").read_text()
    )
    assert old["run_id"] == three_sites.run_before["run_id"] != new["run_id"]


def test_download_site_before_upload_stops_at_once(three_sites):
    """bnl's first try, before tursa had uploaded: it stops at preflight, naming what to
    run first, and measures nothing (its later run, in the same directory, measures)."""
    assert three_sites.early_returncode != 0
    log = three_sites.early_log
    assert "campaign 'demo'" in log
    assert "s3t:cloudbench/demo/manifest.json" in log
    assert "run the upload site 'tursa' first" in log
    assert not three_sites.early_transfers


def test_two_remotes_site_by_site_then_all_measures_nothing_again(tmp_path):
    """The README's two ways to run, in one directory: site=<name> at each site, then
    site=all (and back), with two remotes measured side by side (an S3 store and a
    directory). A preflight's params once differed between the two (seen by a user: every
    download measured again), with site=all a download also waits for its upload's record,
    and each site's run pulls the others: none of it may measure a finished transfer again,
    or publish the same results again."""
    cfg = _config()
    cfg.pop("remote")
    disk = tmp_path / "remote-disk"
    cfg["remotes"] = {
        "s3": {"url": "s3t:", "location": [50.11, 8.68]},
        "disk": {"url": str(disk), "location": [39.04, -77.49]},
    }
    cfg["strategies"] = ["plain"]
    cfg["sites"] = {"up": {**cfg["sites"]["tursa"], "download": False}, "down": cfg["sites"]["bnl"]}
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        env = s3.client_env("S3T")
        path = write_config(tmp_path, cfg)
        for site, omit in (("up", ("--omit-from", "aggregate")), ("down", ())):
            # up's own tables are not read: down's, after it, hold both sites' rows
            run = snakemake(tmp_path, path, "--config", f"site={site}", *omit, env=env)
            assert run.returncode == 0, site + run.stderr[-3000:]
        measured = _table(tmp_path)
        assert (measured["status"] == "ok").all()
        pairs = {(r.site, r.remote, r.direction) for r in measured.itertuples()}
        assert len(measured) == len(pairs) == 4
        assert pairs == {
            (s, r, d) for r in ("s3", "disk") for s, d in (("up", "upload"), ("down", "download"))
        }
        for store in (tmp_path / "s3root", disk):  # each site's results go to every remote
            for site in ("up", "down"):
                assert (store / f"cloudbench/demo/results/{site}/run.json").exists(), (store, site)
        # site=all after the sites' runs, then a site's run after site=all: each way once
        # (site=all runs no job, so it writes nothing a later run compares with; a second
        # site=all after the site's rerun checked the first way again)
        for site in ("all", "down"):
            run = snakemake(tmp_path, path, "--config", f"site={site}", env=env)
            assert run.returncode == 0, site + run.stderr[-3000:]
            assert not measurement_lines(run.stderr), site + run.stderr[-3000:]
            jobs = full_log(tmp_path, run.stderr)  # Snakemake's own account of every job it ran
            assert not any(f"rule {r}:" in jobs for r in ("upload", "download", "generate")), (
                site + jobs[-3000:]
            )
            after = _table(tmp_path)
            assert sorted(after["started_utc"]) == sorted(measured["started_utc"]), site
        # nor publish the same results again (each publish moves the last one to history/)
        for store in (tmp_path / "s3root", disk):
            history = store / "cloudbench/demo/history"
            assert not history.exists(), sorted(p.name for p in history.rglob("*") if p.is_dir())
        assert (tmp_path / "results/demo/sites/up/transfers").is_dir()  # never pulled over
