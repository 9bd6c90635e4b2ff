"""Several clients moving one copy at once: their shares, the start barrier, how they are
launched, and the one aggregate record they add up to.

A measurement with ``clients: N`` is still one batch job: it writes a plan, starts N client
processes (one per node: ``srun`` tasks inside a Slurm job, ``pbsdsh`` tasks inside a PBS
job; N processes on one machine otherwise), and each client moves its own files once all of
them are ready. The aggregate rate is all bytes over the wall-clock window from the first
start to the last end, which is what the store delivered to the site; each client's own rate
and the start skew are kept, so a rate that only looks high because the clients ran one
after the other cannot pass.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudbench.measure.record import COUNTED_COLUMNS
from cloudbench.processes import LAUNCHER_ENV, die_with_parent
from cloudbench.records import copy_status, rate_mb_s, read_json, utc_now, write_json

# Environment variables that carry a task's rank under the launchers HPC centres use
# (PBS_VNODENUM: pbsdsh's index of the task's line in $PBS_NODEFILE, from 0).
RANK_VARIABLES = (
    "SLURM_PROCID", "PMIX_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PALS_RANKID",
    "PBS_VNODENUM",
)  # fmt: skip
# A site's own launcher, as a template: {n} clients, {threads} per client, {command}.
# --overlap: in one allocation per site run the transfer itself is a job step holding its
# node's cores while it waits for its clients
SRUN_TEMPLATE = (
    "srun --ntasks={n} --ntasks-per-node=1 --cpus-per-task={threads} --overlap "
    "--kill-on-bad-exit=0 {command}"
)
# PBS's own task spawner: one task per line of $PBS_NODEFILE, i.e. per chunk of the job's
# select=<n>:ncpus=<threads> (the PBS profiles' submit script asks for one chunk per client)
PBSDSH_TEMPLATE = "pbsdsh -- {command}"
BARRIER_TIMEOUT_S = 600.0  # a client that never shows up fails the group, it does not hang it
GO_LEAD_S = 0.5  # the agreed start lies this far ahead, so every client sees it in time
POLL_S = 0.002
CLOCK_ROUNDS = 8  # clock exchanges per client: the shortest round trip is kept (a few ms)
PLAN = "plan.json"
GO = "go.json"


class ClientError(RuntimeError):
    """A client could not take part (no rank, a barrier that never filled)."""


def shares(files: Sequence[str], n: int) -> list[list[str]]:
    """Each client's own files, dealt round-robin (sizes are equal, so shares differ by at
    most one file)."""
    return [list(files[k::n]) for k in range(n)]


def launcher(
    n: int, threads: int, command: Sequence[str], env: Mapping[str, str]
) -> list[str] | None:
    """The command that starts ``n`` copies of ``command`` as tasks of this batch job, or
    None to start them as local processes.

    ``$CLOUDBENCH_LAUNCHER`` (a template) wins; then the batch system's own launcher
    (:func:`batch_launcher`); anywhere else the clients share this machine.
    """
    template = env.get(LAUNCHER_ENV) or batch_launcher(env)
    if not template:
        return None
    text = template.format(n=n, threads=threads, command=shlex.join(command))
    return shlex.split(text)


def batch_launcher(env: Mapping[str, str]) -> str | None:
    """The template of the launcher this batch job has, found as a user would: in a PBS job
    (``PBS_JOBID`` and ``PBS_NODEFILE``) ``pbsdsh``, one task per chunk; in a Slurm job
    ``srun``, one task per node (each asks for ``threads`` cores). PBS first: a PBS site
    whose jobs run on Slurm underneath (qsub wrappers) still has PBS's node list."""
    path = env.get("PATH")
    if env.get("PBS_JOBID") and env.get("PBS_NODEFILE") and shutil.which("pbsdsh", path=path):
        return PBSDSH_TEMPLATE
    if env.get("SLURM_JOB_ID") and shutil.which("srun", path=path):
        return SRUN_TEMPLATE
    return None


def client_index(explicit: int | None, env: Mapping[str, str]) -> tuple[int, str]:
    """This client's number, and where it came from: the command line (local processes) or
    the task rank a launcher sets (``SLURM_PROCID`` under srun)."""
    if explicit is not None:
        return explicit, "--index"
    for name in RANK_VARIABLES:
        if env.get(name, "").isdigit():
            return int(env[name]), name
    raise ClientError(
        f"cannot tell which client this is: none of {', '.join(RANK_VARIABLES)} is set; "
        f"start clients with srun or set {LAUNCHER_ENV} to a launcher that sets a rank"
    )


@dataclass(frozen=True)
class ClockOffset:
    """How far the group's one clock (client 0's node) is ahead of this client's node's
    wall clock, in the NTP manner: ``offset_s`` is within ``uncertainty_s`` of the truth."""

    offset_s: float
    uncertainty_s: float


#: client 0 is the group's clock: no exchange, no doubt
ON_GROUP_CLOCK = ClockOffset(0.0, 0.0)


def offset_from_exchange(
    asked: float, round_trip_s: float, received: float, sent: float
) -> ClockOffset:
    """NTP's estimate from one exchange: this node asked at ``asked`` (its wall clock) and
    had the answer ``round_trip_s`` later (its monotonic clock: a wall clock stepped
    meanwhile cannot bend it); the coordinator saw the question at ``received`` and
    answered at ``sent`` (its wall clock). The offset is the mean of the two one-way
    differences; whatever the split of the round trip between the two ways, the truth
    lies within half the round trip less the coordinator's own holding time."""
    delay = max(0.0, round_trip_s - (sent - received))
    offset = (received + sent) / 2 - (asked + round_trip_s / 2)
    return ClockOffset(offset, delay / 2)


def measure_offset(folder: Path, index: int, deadline: float) -> ClockOffset:
    """This client's clock offset to client 0's, from ``CLOCK_ROUNDS`` question-and-answer
    exchanges through the barrier folder; the exchange with the shortest round trip (the
    least time for the two ways to differ) gives the estimate."""
    best: ClockOffset | None = None
    for r in range(CLOCK_ROUNDS):
        answer = folder / f"answer-{index}-{r}"
        asked, t0 = time.time(), time.monotonic()
        (folder / f"ask-{index}-{r}").write_text("")
        while not answer.exists():
            if time.monotonic() > deadline:
                raise ClientError("client 0 never answered the clock exchange")
            time.sleep(POLL_S)
        round_trip = time.monotonic() - t0
        got = read_json(answer)
        one = offset_from_exchange(asked, round_trip, got["received"], got["sent"])
        if best is None or one.uncertainty_s < best.uncertainty_s:
            best = one
    assert best is not None
    return best


def _answer_asks(folder: Path, names: Sequence[str], answered: set[str]) -> None:
    """Client 0's side of the clock exchange: each new question gets its time of arrival
    and of answer, on client 0's clock."""
    for name in names:
        if name.startswith("ask-") and name not in answered:
            received = time.time()
            answered.add(name)
            write_json(folder / f"answer-{name[4:]}", {"received": received, "sent": time.time()})


def wait_for_start(
    folder: Path, index: int, n: int, timeout: float = BARRIER_TIMEOUT_S
) -> ClockOffset:
    """Block until all ``n`` clients are ready, then until the agreed start; returns this
    client's offset to the group's clock.

    Each client measures its node's clock offset to client 0's (:func:`measure_offset`),
    then announces itself with a file; client 0 answers those exchanges and, once it sees
    all ``n``, writes the start time on its clock a little ahead (``GO_LEAD_S``) so that
    clients on other nodes, polling a shared filesystem, all see it before it comes. Each
    client waits for that time mapped onto its own clock, and then on its monotonic clock,
    so a node whose clock is off (NTP down, a step) still starts with the others.
    """
    folder.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    clock = ON_GROUP_CLOCK if index == 0 else measure_offset(folder, index, deadline)
    (folder / f"ready-{index}").write_text(str(time.time()))
    go = folder / GO
    if index == 0:
        answered: set[str] = set()
        while True:
            names = [e.name for e in os.scandir(folder)]
            _answer_asks(folder, names, answered)
            ready = sum(1 for name in names if name.startswith("ready-"))
            if ready >= n:
                break
            if time.monotonic() > deadline:
                raise ClientError(f"only {ready} of {n} clients ready")
            time.sleep(POLL_S)
        write_json(go, {"start_at": time.time() + GO_LEAD_S})
    while not go.exists():
        if time.monotonic() > deadline:
            raise ClientError(f"no start signal within {timeout:.0f} s")
        time.sleep(POLL_S)
    start_at = float(read_json(go)["start_at"])
    until = time.monotonic() + (start_at - clock.offset_s - time.time())
    while (left := until - time.monotonic()) > 0:
        time.sleep(min(left, POLL_S))
    return clock


class StartBarrier:
    """``wait_for_start`` as a client's ``ready`` call, keeping the clock offset it found
    (None until it has run: a client that failed before the barrier has no offset)."""

    def __init__(self, folder: Path, index: int, n: int) -> None:
        self.folder, self.index, self.n = folder, index, n
        self.clock: ClockOffset | None = None

    def __call__(self) -> ClockOffset:
        self.clock = wait_for_start(self.folder, self.index, self.n)
        return self.clock


def on_group_clock(rec: dict[str, Any], clock: ClockOffset | None) -> dict[str, Any]:
    """A client's record with its start on the group's clock (its seconds are its own
    monotonic clock's: no offset to add) and the offset, with its uncertainty, kept."""
    if clock is None:
        return rec
    out = dict(rec, clock_offset_s=round(clock.offset_s, 6))
    out["clock_uncertainty_s"] = round(clock.uncertainty_s, 6)
    if rec.get("started_epoch") is not None:
        out["started_epoch"] = rec["started_epoch"] + clock.offset_s
        out["started_utc"] = utc_now(out["started_epoch"])
    return out


def wait_for_end(folder: Path, index: int, n: int, timeout: float = BARRIER_TIMEOUT_S) -> float:
    """Say this client's copy has ended, then wait until every client's has: the seconds
    waited. What a client does after its copy (hashing its share) must not compete for
    cores or the filesystem with a client that is still being timed. A client that never
    arrives (killed hard) is waited for at most ``timeout`` seconds."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"ended-{index}").write_text(str(time.time()))
    t0 = time.monotonic()
    while sum(1 for _ in folder.glob("ended-*")) < n:
        if time.monotonic() - t0 > timeout:
            raise ClientError(f"only {len(list(folder.glob('ended-*')))} of {n} clients ended")
        time.sleep(POLL_S * 10)
    return round(time.monotonic() - t0, 6)


def share_dir(local: Path, index: int) -> Path:
    """Where download client ``index`` puts its share until the group has ended."""
    return local / ".clients" / str(index)


def settle_share(share: Path, local: Path, names: Sequence[str]) -> None:
    """Move a client's downloaded files (or a chunked file's folder of chunks) from its
    share directory into the copy's directory, by rename (same filesystem: no bytes move).
    A name the client did not download stays missing, for ``verify`` to report."""
    for name in names:
        there = share / name
        if there.exists():
            target = local / name
            if target.is_dir():
                shutil.rmtree(target)
            there.replace(target)
    shutil.rmtree(share, ignore_errors=True)
    with contextlib.suppress(OSError):
        share.parent.rmdir()  # the last client to settle removes .clients


def run_clients(plan_path: Path, n: int, threads: int, env: Mapping[str, str]) -> tuple[int, str]:
    """Start the ``n`` clients of a plan and wait for all of them: the launcher's exit code
    (the clients record their own failures) and how they were started."""
    base = [sys.executable, "-m", "cloudbench", "client", "--plan", str(plan_path)]
    launch = launcher(n, threads, base, env)
    if launch is not None:
        how = shlex.join(launch[: len(launch) - len(base)])
        return subprocess.run(launch, env=dict(env)).returncode, how
    procs = [
        subprocess.Popen([*base, "--index", str(k)], env=dict(env), preexec_fn=die_with_parent)
        for k in range(n)
    ]
    codes = [p.wait() for p in procs]  # a client killed by a signal has a negative code
    return next((c for c in codes if c != 0), 0), f"{n} local processes"


def write_plan(folder: Path, plan: Mapping[str, Any]) -> Path:
    """A fresh plan (and an empty barrier) for one attempt of a measurement."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    path = folder / PLAN
    write_json(path, plan)
    return path


def client_record_path(folder: Path, index: int) -> Path:
    return folder / f"client-{index}.json"


def client_series_path(folder: Path, index: int) -> Path:
    return folder / f"client-{index}.series.tsv"


# --- adding the clients up -------------------------------------------------------------------


# A duration in an error ("failed in 3.5 s"): clients that met the same failure say it with
# their own seconds, and are one failure all the same
_SECONDS = re.compile(r"\b\d+(?:\.\d+)? s\b")


def failed_clients(got: Sequence[dict[str, Any]]) -> list[str]:
    """Each failed client's error, said once for all the clients that met the same one
    (``clients 0, 1: ...``): a dead store fails every client alike, and the same sentence
    twice in a row read as one repeating itself. Errors that differ only in their seconds
    (two listings of the dead store, failed in 3.5 and in 7.2 s) are the same one, said in
    the words of the client that ended last, whose end is the group's."""
    same: dict[str, list[dict[str, Any]]] = {}
    for c in got:
        if c["status"] != "ok":
            same.setdefault(_SECONDS.sub("# s", str(c.get("error"))), []).append(c)
    said = []
    for cs in same.values():
        last = max(cs, key=lambda c: (c.get("started_epoch") or 0) + (c.get("seconds") or 0))
        ks = ", ".join(str(c["client"]) for c in cs)
        said.append(f"client{'s' if len(cs) > 1 else ''} {ks}: {last.get('error')}")
    return said


def aggregate(
    clients: Sequence[dict[str, Any] | None], n: int, tolerance_s: float
) -> dict[str, Any]:
    """The group's own columns from its clients' records (None: a client that never
    reported), their starts on the group's one clock (:func:`on_group_clock`), their
    seconds each on its own monotonic clock. Rate = all bytes / (last end - first start);
    the clock offset furthest from 0 and the largest uncertainty; failed if any client failed,
    did not report, or started more than ``tolerance_s`` after the first; corrupt if any
    client's own check found its bytes corrupt."""
    got = [c for c in clients if c is not None]
    errors = [f"client {k} did not report" for k, c in enumerate(clients) if c is None]
    errors += failed_clients(got)
    starts = [c["started_epoch"] for c in got if c.get("started_epoch") is not None]
    ends = [c["started_epoch"] + c["seconds"] for c in got if c.get("seconds") is not None]
    first = min(starts) if starts else None
    seconds = max(ends) - first if starts and ends else None
    skew = max(starts) - first if starts else None
    if skew is not None and skew > tolerance_s:
        errors.append(
            f"clients started {skew:.3f} s apart, more than start_tolerance_s {tolerance_s:g} s:"
            " they did not run together"
        )
    requested = sum(c.get("bytes_requested") or 0 for c in got)
    moved = [c.get("bytes_moved") for c in got]
    rates = [c["mb_per_s"] for c in got if c.get("mb_per_s") is not None]
    offsets = [c["clock_offset_s"] for c in got if c.get("clock_offset_s") is not None]
    doubts = [c["clock_uncertainty_s"] for c in got if c.get("clock_uncertainty_s") is not None]
    error = "; ".join(errors)[:2000] or None
    stalled = [c["stalled_since_epoch"] for c in got if c.get("stalled_since_epoch")]
    return {
        "status": copy_status(error, any(c["status"] == "corrupt" for c in got)),
        "error": error,
        "seconds": round(seconds, 6) if seconds is not None else None,
        "mb_per_s": round(rate_mb_s(requested, seconds), 3) if not error and seconds else None,
        "started_epoch": first,
        "start_skew_s": round(skew, 6) if skew is not None else None,
        "clock_offset_s": max(offsets, key=abs) if offsets else None,
        "clock_uncertainty_s": max(doubts) if doubts else None,
        "bytes_requested": requested,
        "bytes_moved": sum(moved) if moved and None not in moved else None,
        "objects": sum(c.get("objects") or 0 for c in got),
        "objects_in_flight": sum(c.get("objects_in_flight") or 0 for c in got),
        "connections": sum(c.get("connections") or 0 for c in got),
        # empty, not 0, where no client counts them (s5cmd), as in a one-client record
        **{k: _sum_counted(got, k) for k in COUNTED_COLUMNS},
        "client_mb_per_s_min": min(rates) if len(rates) == n else None,
        "client_mb_per_s_median": round(_median(rates), 3) if len(rates) == n else None,
        "client_mb_per_s_max": max(rates) if len(rates) == n else None,
        "hosts": sorted({c["host"] for c in got if c.get("host")}),
        # a client stalled on a dead store: when the first of them last moved bytes, so the
        # outage is dated from then, not from when the stall was judged (a minute later)
        "stalled_since_epoch": min(stalled) if stalled else None,
    }


def _median(values: Sequence[float]) -> float:
    import statistics  # only a job with several clients needs it

    return statistics.median(values)


def _sum_counted(got: Sequence[dict[str, Any]], key: str) -> int | None:
    """A count over the clients, None when no client counted it (its log could not)."""
    counted = [c[key] for c in got if c.get(key) is not None]
    return sum(counted) if counted else None


def read_clients(folder: Path, n: int) -> list[dict[str, Any] | None]:
    """Each client's record, None where a client wrote none."""
    out: list[dict[str, Any] | None] = []
    for k in range(n):
        p = client_record_path(folder, k)
        out.append(read_json(p) if p.exists() else None)
    return out
