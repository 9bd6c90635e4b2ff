"""Three sites that share nothing but the remote (a real S3 endpoint on 127.0.0.1)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.infra.s3 import serve_s3
from tests.infra.workflow import BIN, snakemake, write_config

pytestmark = pytest.mark.slow
SITES = ("tursa", "tesseract", "bnl")


def _config(demo_config: dict, campaign: str = "demo") -> dict:
    demo_config.update(campaign=campaign, remote="s3t:", strategies=["plain", "chunked"], repeats=1)
    demo_config["dataset"].update(files=1, size="6MiB", chunk_sizes=["2MiB"])
    demo_config["rclone"]["flags"] = []
    demo_config["sites"] = {
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
    return demo_config


def _run_site(root: Path, cfg: dict, site: str, env: dict, *args: str):
    workdir = root / site
    path = write_config(workdir, cfg)
    return snakemake(workdir, path, "--config", f"site={site}", *args, env=env)


def _table(workdir: Path, name: str = "transfers.tsv") -> pd.DataFrame:
    return pd.read_csv(workdir / "results/demo" / name, sep="\t")


def test_three_sites_meet_at_the_remote(tmp_path, demo_config):
    cfg = _config(demo_config)
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        env = s3.client_env("S3T")
        for site in ("tursa", "tesseract"):
            run = _run_site(tmp_path, cfg, site, env)
            assert run.returncode == 0, site + run.stderr[-3000:]

        laptop = _run_site(tmp_path, cfg, "none", env)  # aggregate anywhere: pulls everything
        assert laptop.returncode == 0, laptop.stderr[-3000:]
        missing = _table(tmp_path / "none", "missing.tsv")
        assert set(missing["site"]) == {"bnl"}  # not reported yet: listed, not dropped
        assert len(_table(tmp_path / "none")) == 2 + 2 + 2

        run = _run_site(tmp_path, cfg, "bnl", env)
        assert run.returncode == 0, run.stderr[-3000:]
        laptop = _run_site(tmp_path, cfg, "none", env)
        assert laptop.returncode == 0, laptop.stderr[-3000:]
        before = _table(tmp_path / "none")
        assert len(before) == 8 and (before["status"] == "ok").all()
        assert _table(tmp_path / "none", "missing.tsv").empty
        assert set(before["site"]) == set(SITES)
        for col in ("host", "started_utc", "rclone_version", "node_cores"):
            assert before[col].notna().all()
        # cross-site visibility, both ends from the manifest exchange: every site read the
        # same copy's publication time, after its upload ended; bnl ran last, so its copies
        # were oldest when read
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
        report = tmp_path / "none/results/demo/report.html"
        rep = _run_site(tmp_path, cfg, "none", env, "--report", str(report))
        assert rep.returncode == 0 and report.stat().st_size > 50_000
        latency_page = (tmp_path / "none/results/demo/figures/latency.html").read_text()
        assert "Cross-site visibility" in latency_page and "min_copy_age_s" in latency_page

        # rerun one downloader: only its rows change, its earlier run is kept as history
        rerun = _run_site(tmp_path, cfg, "tesseract", env, "--forcerun", "download")
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        laptop = _run_site(tmp_path, cfg, "none", env)
        assert laptop.returncode == 0, laptop.stderr[-3000:]
        after = _table(tmp_path / "none")
        key = ["site", "direction", "layout", "repeat"]
        merged = before.merge(after, on=key, suffixes=("_before", "_after"))
        changed = merged[merged["started_utc_before"] != merged["started_utc_after"]]
        assert set(changed["site"]) == {"tesseract"} and len(changed) == 2
        history = tmp_path / "s3root/cloudbench/demo/history/tesseract"
        runs = [p for p in history.iterdir() if p.is_dir()]
        assert len(runs) == 1
        old = json.loads((runs[0] / "run.json").read_text())
        new = json.loads(
            (tmp_path / "s3root/cloudbench/demo/results/tesseract/run.json").read_text()
        )
        assert old["run_id"] != new["run_id"]


def test_download_site_before_upload_stops_at_once(tmp_path, demo_config):
    cfg = _config(demo_config, campaign="early")
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        run = _run_site(tmp_path, cfg, "bnl", s3.client_env("S3T"))
    assert run.returncode != 0
    log = (tmp_path / "bnl/results/early/sites/bnl/logs/preflight.log").read_text()
    assert "campaign 'early'" in log
    assert "s3t:cloudbench/early/manifest.json" in log
    assert "run the upload site 'tursa' first" in log
    assert not (tmp_path / "bnl/results/early/sites/bnl/transfers").exists()


def test_two_remotes_measured_side_by_side(tmp_path, demo_config):
    demo_config.pop("remote")
    demo_config["remotes"] = {
        "alpha": {"url": "scratch/remote-alpha", "location": [50.11, 8.68]},
        "beta": {"url": "scratch/remote-beta", "location": [39.04, -77.49]},
    }
    demo_config.update(strategies=["plain"], repeats=1)
    demo_config["dataset"].update(files=1, size="2MiB", chunk_sizes=["1MiB"])
    demo_config["rclone"]["flags"] = []
    cfg = write_config(tmp_path, demo_config)
    run = snakemake(tmp_path, cfg)
    assert run.returncode == 0, run.stderr[-3000:]
    df = pd.read_csv(tmp_path / "results/demo/transfers.tsv", sep="\t")
    pairs = {(r.site, r.remote, r.direction) for r in df.itertuples()}
    assert pairs == {
        (s, r, d)
        for r in ("alpha", "beta")
        for s, d in (("tursa", "upload"), ("tursa", "download"), ("tesseract", "download"))
    }
    assert (df["status"] == "ok").all()
    for remote in ("alpha", "beta"):
        assert (
            tmp_path / f"scratch/remote-{remote}/cloudbench/demo/results/tesseract/run.json"
        ).exists()


def test_site_by_site_then_all_measures_nothing_again(tmp_path, demo_config):
    """The README's two ways to run, in one directory: site=<name> at each site, then
    site=all (and back). A preflight's params once differed between the two (seen by a
    user: every download measured again), with site=all a download also waits for its
    upload's record, and each site's run pulls the others: none of it may measure a
    finished transfer again, or publish the same results again."""
    cfg = _config(demo_config)
    cfg["strategies"] = ["plain"]
    cfg["sites"] = {"up": {**cfg["sites"]["tursa"], "download": False}, "down": cfg["sites"]["bnl"]}
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root") as s3:
        env = s3.client_env("S3T")
        path = write_config(tmp_path, cfg)
        for site in ("up", "down"):
            run = snakemake(tmp_path, path, "--config", f"site={site}", env=env)
            assert run.returncode == 0, site + run.stderr[-3000:]
        measured = _table(tmp_path)
        assert len(measured) == 2 and (measured["status"] == "ok").all()
        for site in ("all", "down", "all"):
            run = snakemake(tmp_path, path, "--config", f"site={site}", env=env)
            assert run.returncode == 0, site + run.stderr[-3000:]
            jobs = run.stdout + run.stderr
            assert not any(f"rule {r}:" in jobs for r in ("upload", "download", "generate")), (
                site + jobs[-3000:]
            )
            after = _table(tmp_path)
            assert sorted(after["started_utc"]) == sorted(measured["started_utc"]), site
        # nor publish the same results again (each publish moves the last one to history/)
        history = tmp_path / "s3root/cloudbench/demo/history"
        assert not history.exists(), sorted(p.name for p in history.rglob("*") if p.is_dir())
        assert (tmp_path / "results/demo/sites/up/transfers").is_dir()  # never pulled over
