"""Shared fixtures (the demo config, the demo campaign), and the test tiers.

Every test belongs to exactly one tier; the Makefile runs them:

* ``unit``: pure functions, no process started (``make test-unit``, well under 30 s);
* ``quick``: starts processes or servers (rclone serve s3, sshd, git, make, a dry run of
  snakemake, plots drawn in forked workers) but no campaign, scheduler or browser
  (``make test-quick`` runs unit and quick: under 2 minutes);
* ``full``: campaigns, schedulers and browsers: every test marked ``slow``, ``scheduler``
  or ``browser`` (``make test`` runs every tier).

The rule, applied at collection (:func:`tier_of`): a tier mark on the test
(``@pytest.mark.unit``/``quick``/``full``) wins; else ``slow``/``scheduler``/``browser`` ->
full; else a test that, through its own code, the fixtures it uses or the functions of
``tests`` it calls, names a way to start a process (``subprocess``, ``Popen``, ``fork``...)
-> quick; else unit. That reading cannot see a process started inside the package
(``plots.build_report(jobs=2)`` forks), so it is checked as the tests run: a unit test that
starts a process FAILS, naming what it started; mark it ``@pytest.mark.quick`` (only
``rclone version`` and ``rclone config ...`` lookups, which the package makes once per process
and caches, are let through: see ``ALLOWED_IN_UNIT``). ``pytest --tiers`` lists quick tests
that started nothing (candidates for unit).

``make test`` runs the tests marked ``rates`` (they check measured rates against a
bandwidth cap, so load from other tests would fail them), RATES_WORKERS at a time (shared out
by their expected seconds: :func:`round_robin_order`), first and alone
(scripts/test-suite.sh); the others run side by side under pytest-xdist, where tests that share an
expensive module- or session-scoped fixture (a campaign, the Slurm cluster) are kept on one
worker (``xdist_group``) so that it is made once (the demo campaign: :func:`demo_report`).
"""

from __future__ import annotations

import copy
import fcntl
import inspect
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import yaml

try:
    from _pytest.nodeid import NodeId  # pytest >= 9.2
except ImportError:  # pragma: no cover
    NodeId = None

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

    Shared by the end-to-end and the browser tests (one xdist group: made once, on one
    worker, side by side with other tests; test_demo_summary_tsv's bounds on the medians
    allow for a busy machine). With CLOUDBENCH_DEMO_DIR set, it is made in that directory,
    and a later pytest run given the same directory uses it as it is (`make test` sets it,
    so that its two sessions would share one demo whichever asks for it).
    """
    from tests.infra.workflow import snakemake, write_config

    with open(ROOT / "config" / "config.yaml") as fh:
        config = yaml.safe_load(fh)
    shared = os.environ.get("CLOUDBENCH_DEMO_DIR")
    workdir = Path(shared) if shared else tmp_path_factory.mktemp("demo")
    report = workdir / "results" / config["campaign"] / "report.html"
    done = workdir / "demo-made-by-tests"  # written last: the campaign and its report are whole
    # one maker at a time: two pytest sessions given the same directory may ask for it at
    # once, and the one that comes second waits for the first one's campaign
    with open(workdir.with_name(f"{workdir.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return workdir, config, report
        if shared:  # what an earlier run left unfinished is not resumed
            shutil.rmtree(workdir, ignore_errors=True)
        cfg = write_config(workdir, config)
        run = snakemake(workdir, cfg)
        assert run.returncode == 0, run.stderr[-3000:]
        rep = snakemake(workdir, cfg, "--report", str(report))
        assert rep.returncode == 0, rep.stderr[-3000:]
        done.write_text(yaml.safe_dump(config))
    return workdir, config, report


# --- tiers ---------------------------------------------------------------------------------

TIERS = ("unit", "quick", "full")
FULL_MARKS = ("slow", "scheduler", "browser")
#: Names whose presence in a test's code (or a fixture's, or a helper's of ``tests``) means
#: it starts a process. ``snakemake`` and the servers of tests/infra are reached through the
#: helpers' own code, which is read too.
SPAWNING_NAMES = frozenset(
    {
        "subprocess",
        "Popen",
        "fork",
        "forkpty",
        "posix_spawn",
        "posix_spawnp",
        "system",
        "spawnv",
        "spawnvp",
        "execv",
        "execvp",
        "multiprocessing",
        "ProcessPoolExecutor",
        # the helpers of tests/infra, also when imported inside a function
        "snakemake",
        "serve_s3",
        "serve_ssh",
        "start_slurm",
    }
)
#: What a unit test may still start: rclone's answers about itself and its config file
#: (``rclone version``, ``rclone config dump/providers``), which the package asks once per
#: process and caches, so whichever test comes first would pay for them.
ALLOWED_IN_UNIT = re.compile(r"^subprocess \S*rclone (version|config (dump|providers|file|paths))")

_spawns_cache: dict[int, bool] = {}


def _names(obj) -> set[str]:
    """The identifiers in ``obj``'s source: no strings, no comments."""
    try:
        source = inspect.getsource(obj)
    except (OSError, TypeError):
        return set()
    names = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.NAME:
                names.add(tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return names


def _ours(obj) -> bool:
    module = getattr(obj, "__module__", "") or ""
    return module == "tests" or module.startswith("tests.") or module == "conftest"


def spawns(obj) -> bool:
    """Whether ``obj`` (a function or class of ``tests``) names a way to start a process,
    itself or through the functions and classes of ``tests`` that it names."""
    obj = inspect.unwrap(obj)
    key = id(obj)
    if key in _spawns_cache:
        return _spawns_cache[key]
    _spawns_cache[key] = False  # a cycle adds nothing
    names = _names(obj)
    found = bool(names & SPAWNING_NAMES)
    scope = getattr(obj, "__globals__", None) or vars(sys.modules.get(obj.__module__, sys))
    for name in sorted(names):
        if found:
            break
        target = scope.get(name)
        if (inspect.isfunction(target) or inspect.isclass(target)) and _ours(target):
            found = spawns(target)
    _spawns_cache[key] = found
    return found


def _fixturedefs(item: pytest.Item):
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        for fixturedef in info.name2fixturedefs.get(name, ()) if info else ():
            if _ours(fixturedef.func):
                yield name, fixturedef


def tier_of(item: pytest.Item) -> str:
    """The tier of ``item`` by the rule in this module's docstring."""
    own = [m.name for m in item.own_markers if m.name in TIERS]
    if len(set(own)) > 1:
        raise pytest.UsageError(f"{item.nodeid}: marked {' and '.join(own)}: give one tier")
    for mark in item.iter_markers():  # the closest first: the test's, its class's, its module's
        if mark.name in TIERS:
            return mark.name
    if any(item.get_closest_marker(m) for m in FULL_MARKS):
        return "full"
    function = getattr(item, "function", None)
    if function is not None and spawns(function):
        return "quick"
    if any(spawns(fixturedef.func) for _, fixturedef in _fixturedefs(item)):
        return "quick"
    return "unit"


#: Shared fixtures every worker makes its own of, rather than holding their tests on one
#: worker: the Slurm cluster starts in about a second, and several run side by side.
PER_WORKER = frozenset({"slurm_cluster"})


def _shared_group(item: pytest.Item) -> str | None:
    """The expensive shared fixture of ``item`` (module or session scope, starts processes):
    its tests go to one xdist worker, so the fixture is made once."""
    shared = sorted(
        name
        for name, fixturedef in _fixturedefs(item)
        if fixturedef.scope in ("module", "session", "package")
        and spawns(fixturedef.func)
        and name not in PER_WORKER
    )
    return shared[0] if shared else None


TIER = pytest.StashKey[str]()
STARTED = pytest.StashKey[list]()


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the marks given here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):
        # xdist hands out tests in this order: the long ones first, so that none of them
        # starts last while the other workers have nothing left to do
        seconds = expected_seconds()
        order = suite_order(
            [tier_of(item) for item in items], [seconds.get(item.nodeid, 0.0) for item in items]
        )
        items[:] = [items[i] for i in order]
    for item in items:
        tier = tier_of(item)
        item.stash[TIER] = tier
        if not item.get_closest_marker(tier):
            item.add_marker(tier)
        group = _shared_group(item)
        if group and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(group))


EXPECTED_SECONDS = ROOT / "tests" / "expected-seconds.tsv"


def expected_seconds(path: Path = EXPECTED_SECONDS) -> dict[str, float]:
    """Each long test's seconds in an earlier whole run (test id -> seconds); {} without
    the file. Lines starting with # are comments."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    out = {}
    for line in lines:
        if line.strip() and not line.startswith("#"):
            seconds, nodeid = line.split("\t", 1)
            out[nodeid.strip()] = float(seconds)
    return out


def suite_order(tiers: list[str], seconds: list[float]) -> list[int]:
    """The order (indices) xdist hands tests out in: full, then quick, then unit tests,
    each tier the longest expected first (longest-processing-time first keeps the last
    test from running alone at the end); ties keep collection order."""
    return sorted(range(len(tiers)), key=lambda i: (TIERS[::-1].index(tiers[i]), -seconds[i]))


def round_robin_order(seconds: list[float], workers: int) -> list[int]:
    """The order of tests (indices into ``seconds``, each test's expected length) that gives
    the shortest run under pytest-xdist's hand-out of fewer tests than twice its workers:
    test k to worker k mod n, all at once, in collection order. Five rates tests on three
    workers in file order paired the two longest on one worker (231 s where 177 s would do).

    Each worker gets one or two tests: the longest run alone, the others in pairs, the
    longest of them with the shortest."""
    by_length = sorted(range(len(seconds)), key=lambda i: (-seconds[i], i))
    pairs = max(len(seconds) - workers, 0)
    alone, paired = by_length[: len(seconds) - 2 * pairs], by_length[len(seconds) - 2 * pairs :]
    firsts, seconds_ = paired[:pairs], paired[pairs:][::-1]
    return firsts + alone + seconds_


def _order_for_round_robin(session: pytest.Session) -> None:
    """Reorder a run of few tests (the rates phase of ``make test``) by their expected
    seconds, ``@pytest.mark.rates(seconds=...)``, for :func:`round_robin_order`."""
    workers = session.config.workerinput.get("workercount", 1)
    items = session.items
    if not items or len(items) >= 2 * workers:
        return
    marks = [item.get_closest_marker("rates") for item in items]
    seconds = [float(m.kwargs.get("seconds", 60)) if m else 60.0 for m in marks]
    items[:] = [items[i] for i in round_robin_order(seconds, workers)]


@pytest.hookimpl(tryfirst=True)  # before xdist's worker sends the ids to the controller
def pytest_collection_finish(session: pytest.Session) -> None:
    """Under xdist, order a run of few tests for its round-robin hand-out; under ``--dist
    loadgroup``, give each xdist_group test its ``@group`` id suffix.

    pytest-xdist 3.8.0 writes the suffix to ``item._nodeid``, which pytest 9.2 no longer
    reads (pytest-dev/pytest-xdist#1386), so groups are silently not kept together: every
    worker would start its own Slurm cluster. Here the id pytest does read is set, and a
    group that still has no suffix stops the run instead of splitting silently.
    """
    config = session.config
    if hasattr(config, "workerinput") and not config.getvalue("loadgroup"):
        _order_for_round_robin(session)  # (in a worker, "dist" always reads "no")
    if not (hasattr(config, "workerinput") and config.getvalue("loadgroup")):
        return
    for item in session.items:
        names = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
        if not names:
            continue
        suffix = "@" + "_".join(sorted(names))
        if item.nodeid.endswith(suffix):
            continue  # xdist did it
        if isinstance(getattr(item, "_id", None), NodeId):
            item._id = NodeId.parse(item.nodeid + suffix)
        else:
            item._nodeid = item.nodeid + suffix
        if not item.nodeid.endswith(suffix):
            raise pytest.UsageError(
                f"{item.nodeid}: cannot give it its xdist group {suffix[1:]!r}; with this "
                "pytest/pytest-xdist, run without --dist loadgroup (or -p no:xdist)"
            )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tiers",
        action="store_true",
        help="list quick tests that started no process (candidates for the unit tier)",
    )


# --- checking the unit tier as it runs ------------------------------------------------------


class _Recorder:
    """Notes every process started in this (the test) process while installed."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.saved: list[tuple[object, str, object]] = []

    def _wrap(self, owner, attr: str, describe) -> None:
        original = getattr(owner, attr, None)
        if original is None:
            return

        def wrapper(*args, **kwargs):
            self.started.append(describe(args, kwargs))
            return original(*args, **kwargs)

        self.saved.append((owner, attr, original))
        setattr(owner, attr, wrapper)

    def install(self) -> None:
        def popen(args, kwargs):
            argv = args[1] if len(args) > 1 else kwargs.get("args")
            argv = [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv or ())
            return "subprocess " + " ".join(str(a) for a in argv[:4])

        self._wrap(subprocess.Popen, "_execute_child", popen)
        self._wrap(os, "fork", lambda a, k: "os.fork()")
        for name in ("posix_spawn", "posix_spawnp", "system"):
            self._wrap(os, name, lambda a, k, n=name: f"os.{n} {a[0] if a else ''}")

    def remove(self) -> None:
        while self.saved:
            owner, attr, original = self.saved.pop()
            setattr(owner, attr, original)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    item.stash[STARTED] = []
    return (yield)


def _recorded(item: pytest.Item):
    recorder = _Recorder()
    recorder.install()
    try:
        yield
    finally:
        recorder.remove()
        item.stash.setdefault(STARTED, []).extend(recorder.started)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    gen = _recorded(item)
    next(gen)
    try:
        return (yield)
    finally:
        next(gen, None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    gen = _recorded(item)
    next(gen)
    try:
        return (yield)
    finally:
        next(gen, None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.when != "call":
        return report
    started = [s for s in item.stash.get(STARTED, []) if not ALLOWED_IN_UNIT.match(s)]
    tier = item.stash.get(TIER, "")
    report.user_properties.append(("tier", tier))
    report.user_properties.append(("processes_started", len(started)))
    if tier == "unit" and started and report.passed:
        report.outcome = "failed"
        shown = "\n  ".join(started[:5]) + ("\n  ..." if len(started) > 5 else "")
        report.longrepr = (
            f"{item.nodeid} is in the unit tier (see tests/conftest.py) but started "
            f"{len(started)} process(es):\n  {shown}\n"
            "Mark it @pytest.mark.quick (or full), so that `make test-unit` stays pure."
        )
    return report


_quick_idle: list[tuple[str, float]] = []
_seconds: dict[str, float] = {}


_outcome: dict[str, str] = {}


_span: dict[str, tuple[float, float, str]] = {}  # first start, last stop, xdist worker


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[report.nodeid] = _seconds.get(report.nodeid, 0.0) + report.duration
    node = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "-")
    start, _, _ = _span.get(report.nodeid, (report.start, 0.0, node))
    _span[report.nodeid] = (start, report.stop, node)
    if report.failed:
        _outcome[report.nodeid] = "failed"  # in any phase: an error in setup counts too
    elif report.skipped:
        _outcome.setdefault(report.nodeid, "skipped")
    elif report.when == "call":
        _outcome.setdefault(report.nodeid, "passed")
    if report.when != "call" or not report.passed:
        return
    props = dict(report.user_properties)
    if props.get("tier") == "quick" and props.get("processes_started") == 0:
        _quick_idle.append((report.nodeid, report.duration))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With CLOUDBENCH_DURATIONS_FILE set (make test), append each test's seconds (setup,
    call and teardown) and outcome to it, so that the ten slowest and the counts of several
    pytest runs can be told together."""
    path = os.environ.get("CLOUDBENCH_DURATIONS_FILE")
    if path and not hasattr(session.config, "workerinput"):  # xdist's controller only
        with open(path, "a") as fh:
            for nodeid, seconds in _seconds.items():
                fh.write(f"{seconds:8.2f}s  {_outcome.get(nodeid, 'failed'):7}  {nodeid}\n")
    # when each test ran, on which worker (epoch seconds): where a session's tail is idle
    timeline = os.environ.get("CLOUDBENCH_TIMELINE_FILE")
    if timeline and not hasattr(session.config, "workerinput"):
        with open(timeline, "a") as fh:
            for nodeid, (start, stop, node) in sorted(_span.items(), key=lambda kv: kv[1]):
                fh.write(f"{start:.1f}\t{stop:.1f}\t{node}\t{nodeid}\n")


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if not config.getoption("--tiers", False) or not _quick_idle:
        return
    terminalreporter.section("quick tests that started no process")
    for nodeid, seconds in sorted(_quick_idle):
        terminalreporter.write_line(f"{seconds:7.2f}s {nodeid}")
