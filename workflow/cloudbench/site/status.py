"""The end of a run: say plainly what did not work, and clean up on request."""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cloudbench.records import KEPT_AS_FOUND

BAD = ("failed", *KEPT_AS_FOUND)


def failures(transfers_tsv: Path) -> list[dict[str, Any]]:
    """The rows of transfers.tsv that are not ok (read with csv: the last job of every run
    should not pay for importing pandas)."""
    with open(transfers_tsv, newline="") as fh:
        return [r for r in csv.DictReader(fh, delimiter="\t") if r["status"] in BAD]


def avoided_by_search(results: Path) -> set[tuple[str, ...]]:
    """The settings a tuning search found failing while the store answered (each site's
    tune.json, campaign.tune): a finding the search avoids, not a failure of the run.
    As (site, remote, direction, layout, setting)."""
    found = set()
    for path in sorted(Path(results, "sites").glob("*/tune.json")):
        state = json.loads(path.read_text())
        for s in state["searches"]:
            for c in s["settled"]:
                found.add((state["site"], s["remote"], s["direction"], c["layout"], c["setting"]))
    return found


def split_avoided(
    rows: list[dict[str, Any]], avoided: set[tuple[str, ...]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The failed rows that are a run's failures, and those a tuning search avoids."""
    from cloudbench.campaign.identity import GROUP

    mine = [r for r in rows if tuple(r[k] for k in GROUP) not in avoided]
    return mine, [r for r in rows if tuple(r[k] for k in GROUP) in avoided]


def describe(rows: list[dict[str, Any]], results: Path | None = None) -> str:
    """What is not ok, one line each; for a download kept as found (corrupt, unverified),
    which a rerun does not measure again, the ``--forcerun`` that does (with ``results``)."""
    from cloudbench.campaign import paths
    from cloudbench.campaign.identity import MeasurementId

    failed = sum(r["status"] not in KEPT_AS_FOUND for r in rows)
    again = f" (a rerun measures the {failed} failed again)" if failed else ""
    lines = [f"{len(rows)} measurement(s) not ok{again}:"]
    for r in rows:
        keys = (r["site"], r["direction"], r["remote"], r["layout"], r.get("setting"))
        what = " ".join(str(k) for k in keys if isinstance(k, str) and k)
        lines.append(f"  {r['status']}: {what} r{r['repeat']}: {r.get('error')}")
        if results is not None and r["status"] in KEPT_AS_FOUND:
            record = paths.transfer_record(results, MeasurementId.of(r))
            lines.append(
                f"    kept as found, a rerun does not measure it again: {forcerun([record])}"
            )
    return "\n".join(lines)


def forcerun(records: Sequence[Path | str]) -> str:
    """How to measure kept-as-found measurements again: Snakemake's --forcerun on their
    transfer records (the checks after them follow)."""
    from cloudbench.records import first_few

    return f"to measure again, add --forcerun {first_few(records, sep=' ')} to the same command"


def _status(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("status")
    except (OSError, ValueError):
        return None


def cleanup(spec: dict[str, Any]) -> None:
    """Remove the campaign's bulk data from the remotes and scratch; keep every result.

    Unfinished multipart uploads of the campaign (left by a transfer killed hard) are
    aborted too: no listing shows them, but providers bill them.
    """
    from cloudbench.campaign.secrets import redact, secret_values
    from cloudbench.measure import rclone as rc
    from cloudbench.records import clip_tail

    binary = rc.find_rclone()
    flags = tuple(spec["flags"])
    for remote in spec["remotes"]:
        prefix = remote["data"]
        res = rc.run_helper(rc.helper_command(binary, "purge", prefix, extra_flags=flags))
        ok = res.returncode in rc.NOT_FOUND_EXITS  # already gone is fine
        print(f"{'removed' if ok else 'FAILED to remove'} {prefix}")
        if not ok:
            raise RuntimeError(redact(clip_tail(res.stderr), secret_values()))
        if rc.backend_type(binary, remote["url"]) in rc.MULTIPART_BACKENDS:
            err, count = rc.abort_multipart_said(binary, remote["campaign"], flags)
            if err:
                raise RuntimeError(redact(err, secret_values()))
            print(
                f"aborted {count} unfinished multipart upload(s) under {remote['campaign']}"
                if count
                else f"no unfinished multipart uploads under {remote['campaign']} (the store "
                "listed none)"
            )
    for path in spec["scratch"]:
        if Path(path).exists():
            shutil.rmtree(path)
        print(f"removed {path}")


PREFLIGHT_FAILED = "preflight failed at site "


def preflight_problems(logs: Sequence[Path]) -> list[str]:
    """The problems failed preflights wrote to their job logs, one line each, without
    repeats (a site's preflight and its gate find the same wrong key)."""
    out: list[str] = []
    for log in logs:
        try:
            text = log.read_text(errors="replace").splitlines()
        except OSError:
            continue
        site = ""
        for line in text:
            if PREFLIGHT_FAILED in line:
                site = line.split(PREFLIGHT_FAILED, 1)[1].rstrip(":")
            elif site and line.startswith("  ") and line.strip():
                problem = f"cloudbench: preflight at site {site}: {line.strip()}"
                if problem not in out:
                    out.append(problem)
    return out


def stopped_summary(
    records: list[Path],
    failed_checks: Sequence[Path] = (),
    checks: Mapping[Path, Path] | None = None,
) -> str:
    """One line for a run that stopped early (Ctrl-C, a failed job): what is finished, and
    that the same command measures what is left (finished measurements are kept). A site
    whose preflight did not pass (``failed_checks``: its logs) needs a fix first, not a
    rerun: each of its problems comes first, one line each, and the line names the log.
    ``checks`` maps a download's record to its verify record: a download whose bytes did
    not check out is counted corrupt, and the line says how to measure it again (a rerun
    does not)."""
    counts = {"ok": 0, "failed": 0, "corrupt": 0}
    corrupt: list[Path] = []
    missing = 0
    for path in records:
        status = _status(path) if path.exists() else None
        if status is None:
            missing += 1
        elif status in KEPT_AS_FOUND:  # the client's own check found the bytes corrupt
            counts["corrupt"] += 1
            corrupt.append(path)
        elif status != "ok":
            counts["failed"] += 1
        elif checks and path in checks and _status(checks[path]) in KEPT_AS_FOUND:
            counts["corrupt"] += 1
            corrupt.append(path)
        else:
            counts["ok"] += 1
    done = sum(counts.values())
    todo = missing + counts["failed"]
    left = " and ".join(
        part
        for part, n in ((f"the {counts['failed']} failed", counts["failed"]),
                        (f"the {missing} not measured", missing))
        if n
    )  # fmt: skip
    what = (
        f"rerun the same command to measure {left}"
        + (" (the ok ones are kept)" if counts["ok"] else "")
        if todo
        else "every measurement is recorded"
        # with a corrupt one kept, the same command stops again: the line says what does not
        + ("" if corrupt else "; rerun the same command to finish the report")
    )
    if corrupt:
        n = len(corrupt)
        what += (
            f"; the {n} corrupt {'is' if n == 1 else 'are'} kept as found, and every run ends "
            f"non-zero until {'it is' if n == 1 else 'they are'} measured again: "
            f"{forcerun(corrupt)}"
        )
    problems = ""
    if failed_checks:
        logs = ", ".join(str(p) for p in failed_checks)
        what = f"the preflight failed (see {logs}): fix what it says, then {what}"
        problems = "".join(f"{line}\n" for line in preflight_problems(failed_checks))
    recorded = f"{counts['ok']} ok, {counts['failed']} failed" + (
        f", {counts['corrupt']} corrupt" if counts["corrupt"] else ""
    )
    return problems + (
        f"cloudbench: stopped with {done} of {len(records)} measurements recorded "
        f"({recorded}), {missing} not measured yet; {what}"
    )
