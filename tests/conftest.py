"""What every test shares: the demo campaign, the three tiers, and their order under xdist.

Tiers. Every test carries one of three marks, its own or its module's ``pytestmark`` (its
own wins); collection stops on a test with none, or with two of its own:

* ``unit``: pure functions, no process started (``make test-unit``);
* ``quick``: starts processes or servers, but no campaign, scheduler or browser
  (``make test-quick`` runs unit and quick);
* ``full``: campaigns through Snakemake, schedulers, browsers (``make test`` runs all three).

A unit test that starts a process fails, naming it: Python's audit events
(``subprocess.Popen``, ``os.fork``, ``os.posix_spawn``, ``os.system``, ``os.exec``) are watched
while it runs. Only rclone's answers about itself and its config file are let through, which
the package asks once per process and caches (``ALLOWED_IN_UNIT``).

Order. ``make test`` runs pytest-xdist with ``--dist loadfile --no-loadscope-reorder``: all
the tests of a file go to one worker, so a module-scoped campaign is made once, and files are
handed out in the order below: files with a full test first (those that wait longest first
of all), then quick, then unit, so that no long file starts last while the other workers
have nothing left to do.
"""

from __future__ import annotations

import copy
import fcntl
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

TIERS = ("unit", "quick", "full")


# What only `make demo` needs of the demo's campaign file: its tuning mode and the ladders it
# climbs. A test that builds a campaign of its own from the demo's (other strategies, repeats,
# tools, sites) starts from the demo's grid without them, so it need not undo them too; the
# demo itself (demo_report, demo_file) is the file whole.
DEMO_ONLY = ("tune", "concurrency")


@pytest.fixture
def demo_file() -> dict:
    """config/config.yaml as `make demo` runs it."""
    with open(ROOT / "config" / "config.yaml") as fh:
        return copy.deepcopy(yaml.safe_load(fh))


@pytest.fixture
def demo_config(demo_file) -> dict:
    """The demo's campaign as a grid to change: the file without ``DEMO_ONLY``."""
    return {k: v for k, v in demo_file.items() if k not in DEMO_ONLY}


@pytest.fixture(scope="session")
def demo_report(tmp_path_factory):
    """The default campaign run once, exactly as `make demo` does, with its report.

    With CLOUDBENCH_DEMO_DIR set, it is made in that directory, once for every worker: the
    first to ask makes it under a lock, the others wait for it and read it as it is.
    """
    from tests.infra.workflow import snakemake, write_config

    with open(ROOT / "config" / "config.yaml") as fh:
        config = yaml.safe_load(fh)
    shared = os.environ.get("CLOUDBENCH_DEMO_DIR")
    workdir = Path(shared) if shared else tmp_path_factory.mktemp("demo")
    report = workdir / "results" / config["campaign"] / "report.html"
    done = workdir / "demo-made-by-tests"  # written last: the campaign and its report are whole
    with open(workdir.with_name(f"{workdir.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return workdir, config, report
        if shared:  # what an earlier run left unfinished is not resumed
            shutil.rmtree(workdir, ignore_errors=True)
        cfg = write_config(workdir, config)
        run = snakemake(workdir, cfg, figures=True)
        assert run.returncode == 0, run.stderr[-3000:]
        (workdir / "terminal.txt").write_text(run.stderr)  # what the user saw (test_e2e)
        rep = snakemake(workdir, cfg, "--report", str(report))
        assert rep.returncode == 0, rep.stderr[-3000:]
        done.write_text(yaml.safe_dump(config))
    return workdir, config, report


# --- tiers -----------------------------------------------------------------------------------


def tier_of(item: pytest.Item) -> str:
    """The tier of ``item``: its closest tier mark (the test's own wins over its module's)."""
    own = {mark.name for mark in item.own_markers if mark.name in TIERS}
    closest = next((mark.name for mark in item.iter_markers() if mark.name in TIERS), None)
    if len(own) > 1 or closest is None:
        given = " and ".join(sorted(own)) or "none"
        raise pytest.UsageError(
            f"{item.nodeid}: give it exactly one tier mark of {', '.join(TIERS)} "
            f"(it has {given}); tests/conftest.py says what each means"
        )
    return closest


#: the files that wait longest (a dead store's stall limit and its reruns, shaped links,
#: batch jobs and their polls), handed out first among the full ones: started late, each
#: ran on alone while the other workers had nothing left (s60c: test_store_down started at
#: 323 s and ran 201, test_tune_campaign at 471 s; three workers idle for the last 45-50 s)
WAIT_LONGEST = (
    "test_limits_e2e.py", "test_store_down.py", "test_scale.py", "test_status_failures.py",
    "test_profiles.py", "test_tune_campaign.py",
)  # fmt: skip

#: the files that read the demo campaign start after this many others: by then the first,
#: which makes the demo (about four minutes), is done (started early, a worker sat four
#: minutes on the demo's lock, s53c), and they are not the last full files either (last, the
#: browser's 75 s ran alone while three workers sat idle for 110-145 s, s56d and s56e)
DEMO_READERS_AFTER = 14


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check every test's tier, and order the files: those with a full test first
    (``WAIT_LONGEST`` first of them), then quick, then unit (each file's tests stay together,
    in their own order). Of the files that read the demo campaign (``demo_report``), the
    first makes it, first of all, and the others start after ``DEMO_READERS_AFTER`` files."""
    rank: dict[str, int] = {}
    demo: list[str] = []
    for item in items:
        path = str(item.path)
        rank[path] = max(rank.get(path, 0), TIERS.index(tier_of(item)))
        if "demo_report" in getattr(item, "fixturenames", ()) and path not in demo:
            demo.append(path)
    first = {name: n for n, name in enumerate(WAIT_LONGEST)}
    files = sorted(  # stable: collection order in a tier
        rank, key=lambda path: (-rank[path], first.get(Path(path).name, len(first)))
    )
    rest = demo[:1] + [f for f in files if f not in demo]  # the demo is made first of all
    order = rest[:DEMO_READERS_AFTER] + demo[1:] + rest[DEMO_READERS_AFTER:]
    position = {path: n for n, path in enumerate(order)}
    items.sort(key=lambda item: position[str(item.path)])  # stable: a file's own order


# --- a unit test starts no process -----------------------------------------------------------

PROCESS_EVENTS = frozenset(
    {"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.system", "os.exec",
     "os.spawn"}
)  # fmt: skip
#: rclone's answers about itself and its config file, asked once per process and cached
ALLOWED_IN_UNIT = re.compile(r"\S*rclone (version|config (dump|providers|file|paths))")


class _Watch:
    """The processes started while a unit test runs, from Python's audit events."""

    started: list[str] | None = None

    @classmethod
    def hook(cls, event: str, args: tuple) -> None:
        if cls.started is None or event not in PROCESS_EVENTS:
            return
        if event == "subprocess.Popen":
            argv = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
            what = " ".join(str(a) for a in list(argv)[:4])
            if ALLOWED_IN_UNIT.match(what):
                return
            cls.started.append(f"subprocess {what}")
        else:
            cls.started.append(event)


sys.addaudithook(_Watch.hook)


def _check_unit(item: pytest.Item, started: list[str]) -> None:
    if started:
        shown = "\n  ".join(started[:5]) + ("\n  ..." if len(started) > 5 else "")
        pytest.fail(
            f"{item.nodeid} is marked unit but started {len(started)} process(es):\n  {shown}\n"
            "Mark it quick (or full), so that `make test-unit` stays pure.",
            pytrace=False,
        )


def _unit_watched(item: pytest.Item):
    """The body of a hook wrapper: a unit test's phase, watched for processes started."""
    if tier_of(item) != "unit":
        return (yield)
    _Watch.started = []
    try:
        result = yield
    finally:
        started, _Watch.started = _Watch.started, None
    _check_unit(item, started)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    return (yield from _unit_watched(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    return (yield from _unit_watched(item))


# --- where the suite's time goes ---------------------------------------------------------------

#: a file to write every test phase's worker, start and stop to (``make test-timeline``)
TIMELINE = os.environ.get("CLOUDBENCH_TEST_TIMELINE")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """One line per test phase, in the process that collects the reports (the controller
    under xdist, whose reports carry each worker's clock): what `scripts/test-timeline.py`
    reads to show each worker's busy and idle seconds."""
    if not TIMELINE or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a worker's reports reach the controller, which writes them
    worker = getattr(report, "node", None)
    name = getattr(getattr(worker, "gateway", None), "id", "main")
    with open(TIMELINE, "a") as fh:
        fh.write(f"{name}\t{report.nodeid}\t{report.when}\t{report.start:.3f}\t{report.stop:.3f}\n")
