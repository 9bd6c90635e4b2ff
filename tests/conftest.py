"""Shared fixtures: the demo config as a dict, the repo root, and the venv's binaries."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))
BIN = Path(sys.executable).parent


@pytest.fixture
def demo_config() -> dict:
    with open(ROOT / "config" / "config.yaml") as fh:
        return copy.deepcopy(yaml.safe_load(fh))


@pytest.fixture(scope="session")
def demo_report(tmp_path_factory):
    """The default campaign run once, exactly as `make demo` does, with its report.

    Shared by the end-to-end and the browser tests: it is the slowest thing the suite does.
    """
    from tests.infra.workflow import snakemake, write_config

    with open(ROOT / "config" / "config.yaml") as fh:
        config = yaml.safe_load(fh)
    workdir = tmp_path_factory.mktemp("demo")
    cfg = write_config(workdir, config)
    run = snakemake(workdir, cfg)
    assert run.returncode == 0, run.stderr[-3000:]
    report = workdir / "results" / config["campaign"] / "report.html"
    rep = snakemake(workdir, cfg, "--report", str(report))
    assert rep.returncode == 0, rep.stderr[-3000:]
    return workdir, config, report
