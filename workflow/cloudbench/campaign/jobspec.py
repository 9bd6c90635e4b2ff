"""The specs a job reads back itself, and the one serialiser of every spec.

Apart from campaign.jobs (which makes each kind of spec from the campaign) so that a job's
own process, which only reads its spec, imports neither the campaign model nor the twenty
other kinds of spec: each is a dataclass made when its module is imported, and one Python
start-up per job is most of what a small job costs. campaign.jobs names these too.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar


@dataclass(frozen=True)
class JobSpec:
    """A job's spec: ``to_json`` is the one place a spec becomes a param.

    A spec's text is a param Snakemake stores, so it must stay byte for byte what it was
    (a changed text re-runs the job): each kind keeps the key order and separators it was
    first written with, and says which fields it leaves out (:meth:`_fields`)."""

    # sorted keys: the specs that were written with json.dumps(..., sort_keys=True)
    SORTED: ClassVar[bool] = False
    # no spaces after , and : (the transfer spec, the longest, on every command line)
    COMPACT: ClassVar[bool] = False

    def _fields(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        separators = (",", ":") if self.COMPACT else None
        return json.dumps(self._fields(), sort_keys=self.SORTED, separators=separators)


def param(spec: JobSpec | None) -> str:
    """A spec as a rule's param ('' for a job that has none, e.g. no ``repeats: auto``)."""
    return "" if spec is None else spec.to_json()


@dataclass(frozen=True)
class GateSpec(JobSpec):
    """One remote with one tool at one site: reachable, writable, and the tool usable."""

    campaign: str
    site: str
    remote_prefixes: dict[str, str]
    flags: list[str]
    min_rclone_version: str
    tools: list[str]
    command_template: str | None


@dataclass(frozen=True)
class StoreDownSpec:
    """The campaign's ``store_down`` (campaign.model.StoreDown), as the transfers read it."""

    after_failures: int
    stall_s: float
    wait_s: float


@dataclass(frozen=True)
class RunSpec(JobSpec):
    """What one run tells its jobs that must never make a finished job run again: a file
    the run writes when it starts (site.lifecycle.started; paths.run_spec), named on the
    jobs' command lines, never a param (params are rerun triggers: docs/reruns.md).

    ``store_down`` may change between runs without measuring anything again;
    ``run_started_epoch``: a store's breaker not checked since then is checked again by the
    run's first job; ``upload_in_this_run``: a download site's preflight then does not ask
    the remote for the upload (it comes later in the same run), and which sites a run names
    must never re-run anything; ``gates``: every remote-and-tool gate of each site, which a
    site's own preflight checks before any data is made (a remote or tool added to the
    campaign must not re-run the preflight and everything below it).
    """

    store_down: StoreDownSpec
    run_started_epoch: float
    upload_in_this_run: bool
    gates: dict[str, list[GateSpec]]


def write_run(path: str | Path, spec: RunSpec) -> None:
    """Write the run's spec whole (a job never reads half of it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(spec.to_json())
    tmp.replace(path)


class RunSpecError(Exception):
    """The run's spec cannot be read: one line naming the file and why."""


def read_run(path: str | Path) -> RunSpec:
    """The spec the run wrote when it started; a clear error when there is none (a job run
    by hand, or a run started with --no-hooks, which skips onstart)."""
    try:
        d = json.loads(Path(path).read_text())
        return RunSpec(
            StoreDownSpec(**d["store_down"]),
            float(d["run_started_epoch"]),
            bool(d["upload_in_this_run"]),
            {site: [GateSpec(**g) for g in gs] for site, gs in d["gates"].items()},
        )
    except OSError as e:
        raise RunSpecError(
            f"{path}: no spec of this run ({e.strerror}); the run writes it when it starts "
            "(onstart: not with --no-hooks)"
        ) from None
    except (ValueError, KeyError, TypeError) as e:
        raise RunSpecError(f"{path}: not a run spec ({e})") from None


# Without a scheduler's walltime, a copy may take its bytes at this rate plus a fixed
# allowance (start-up, listings) before it is taken for hung.
AUTO_TIMEOUT_RATE = 1e6  # bytes/s
AUTO_TIMEOUT_EXTRA_S = 600


def auto_runtime_min(copy_bytes: int) -> int:
    """Minutes a transfer job asks for when no site profile sets its runtime (the workflow's
    runtime resource, and the job's own walltime on the submit host): the copy's
    bytes at ``AUTO_TIMEOUT_RATE`` plus ``AUTO_TIMEOUT_EXTRA_S``; the copy's timeout is
    derived from it like from any walltime. Here, beside the specs a job reads, because the
    job reads it too (cli._limits), without the campaign model."""
    return math.ceil((copy_bytes / AUTO_TIMEOUT_RATE + AUTO_TIMEOUT_EXTRA_S) / 60)
