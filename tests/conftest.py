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
