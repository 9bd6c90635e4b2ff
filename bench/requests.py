"""Bookkeeping requests per measurement, counted by the store, and what they cost in seconds
on a store one wide-area round trip away.

A campaign of the study's shape, scaled down (``files`` x ``size``, plain and chunked, upload
then download, one site), runs against versitygw, an S3 gateway that logs every request it
serves with its User-Agent. cloudbench's bookkeeping calls carry ``cloudbench-bookkeeping``
(the timed copies keep rclone's own), so the store's log alone says which requests were the
copy's and which were ours. Requests under a copy's place (``<campaign>/data/...``) are the
measurement's; the rest (preflight, probe, results exchange, campaign manifest) are paid once
per run. The same campaign then runs through a proxy that adds 100 ms to every round trip
(:mod:`tests.infra.delay`): the transfer jobs' wall time beyond their timed copies, there
against here, is what bookkeeping costs a user of a store across an ocean.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import yaml

from bench import REPO
from bench.endtoend import (
    CAMPAIGN,
    campaign_config,
    orchestration_seconds,
    snakemake_command,
    user_env,
)
from bench.harness import MIB, Harness, Row
from tests.infra.delay import delay_proxy
from tests.infra.s3 import VERSITYGW, serve_s3, versitygw_binary

TARGET_PER_MEASUREMENT = 2  # bookkeeping requests beyond the copy's own, at most
RTT_S = 0.1
FAR_ROW = f"orchestration-at-{RTT_S * 1000:.0f}ms-rtt"
REMOTE = "BENCHS3"
BOOKKEEPING_AGENT = "cloudbench-bookkeeping"  # cloudbench.measure.rclone.BOOKKEEPING_AGENT
FILES, FILE_SIZE = 2, 16 * MIB


def classify(log_lines: list[str], campaign: str) -> dict[str, Counter]:
    """Requests of a versitygw access log by who made them and where: ``bookkeeping`` and
    ``copy`` requests under each copy's place (keyed by ``layout/setting/repeat``), and
    ``per_run`` bookkeeping elsewhere (keyed by S3 action)."""
    out: dict[str, Counter] = {"bookkeeping": Counter(), "copy": Counter(), "per_run": Counter()}
    marker = f"{campaign}/data/"
    for line in log_lines:
        words = line.split()
        action = next((w for w in words if w.startswith("s3_")), None)
        if action is None:
            continue
        text = unquote(line)
        ours = BOOKKEEPING_AGENT in words
        at = text.find(marker)
        if at < 0:
            if ours:
                out["per_run"][action[3:]] += 1
            continue
        place = "/".join(text[at + len(marker) :].split("/")[:3]).split(" ")[0].split("&")[0]
        out["bookkeeping" if ours else "copy"][place] += 1
    return out


def _run_campaign(
    work: Path, env: dict[str, str], files: int, size: int, chunk: int, quick: bool = False
) -> Path:
    cfg = campaign_config(work, files, size, chunk) | {"remote": f"{REMOTE}:"}
    if quick:  # the probe's requests are once a run, not the measurement's: one of each
        cfg["probe"] = {"count": 1}
    config = work / "campaign.yaml"
    config.write_text(yaml.safe_dump(cfg))
    # without the tables and figures (about 6 CPU-seconds a campaign): neither row reads
    # them, and the aggregate job reads local records only, never the store
    proc = subprocess.run(
        [*snakemake_command(work, config, REPO), "--omit-from", "aggregate"],
        cwd=work, env=env, capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"requests: the campaign failed:\n{proc.stderr[-3000:]}")
    return work / "results" / CAMPAIGN


def _remote_env(port: int, key: str, secret: str) -> dict[str, str]:
    p = f"RCLONE_CONFIG_{REMOTE}_"
    return {
        p + "TYPE": "s3",
        p + "PROVIDER": "Other",
        p + "ENDPOINT": f"http://127.0.0.1:{port}",
        p + "ACCESS_KEY_ID": key,
        p + "SECRET_ACCESS_KEY": secret,
        p + "FORCE_PATH_STYLE": "true",
    }


def bench_requests(h: Harness, files: int = FILES, size: int = FILE_SIZE) -> None:
    if not versitygw_binary().exists():
        why = f"not measured: versitygw is not built ({versitygw_binary()}); `make versitygw`"
        nan = float("nan")
        h.rows += [
            Row("bookkeeping-requests-per-measurement", nan, nan, "requests", nan,
                f"<= {TARGET_PER_MEASUREMENT}", False, why),
            Row(FAR_ROW, nan, nan, "s", nan, "(reported)", False, why),
        ]  # fmt: skip
        return
    size = min(size, max(MIB, h.size // MIB * MIB))  # a quick run (--size 8MiB) stays quick
    files = 1 if h.quick else files
    chunk = max(MIB, min(h.chunk, size // 2))
    rclone = shutil.which("rclone", path=user_env()["PATH"]) or "rclone"
    d = h.work / "requests"
    shutil.rmtree(d, ignore_errors=True)
    results: dict[str, Path] = {}
    counts: dict[str, Counter] = {}
    for side, rtt in (("here", 0.0), ("far", RTT_S)):
        work = d / side
        work.mkdir(parents=True)
        with serve_s3(rclone, work / "store", store=VERSITYGW) as srv:
            if rtt:
                with delay_proxy(srv.port, rtt) as proxy:
                    env = {**user_env(), **_remote_env(proxy.port, srv.key, srv.secret)}
                    results[side] = _run_campaign(work, env, files, size, chunk, h.quick)
            else:
                env = {**user_env(), **_remote_env(srv.port, srv.key, srv.secret)}
                results[side] = _run_campaign(work, env, files, size, chunk, h.quick)
                counts = classify(srv.access_log.read_text().splitlines(), CAMPAIGN)
    here = orchestration_seconds(results["here"])
    far = orchestration_seconds(results["far"])
    measurements = len(here)
    places = len(counts["bookkeeping"]) or 1
    per_measurement = sum(counts["bookkeeping"].values()) / max(1, measurements)
    worst = max(counts["bookkeeping"].values(), default=0) / max(1, measurements // places)
    copy_own = sum(counts["copy"].values()) / max(1, measurements)
    per_run = sum(counts["per_run"].values())
    h.rows.append(
        Row(
            "bookkeeping-requests-per-measurement",
            per_measurement,
            copy_own,
            "requests",
            per_measurement / TARGET_PER_MEASUREMENT,
            f"<= {TARGET_PER_MEASUREMENT}",
            per_measurement <= TARGET_PER_MEASUREMENT and worst <= TARGET_PER_MEASUREMENT,
            f"counted by the store (versitygw's access log, User-Agent {BOOKKEEPING_AGENT}) "
            f"under each copy's place, over {measurements} measurements ({files} x "
            f"{size // MIB} MiB, plain + {chunk // MIB} MiB chunks, up + down); the worst copy "
            f"{worst:.1f} a measurement; beside the timed copies' own "
            f"{copy_own:.1f} requests a measurement (baseline column). Once a run, not per "
            f"measurement: {per_run} bookkeeping requests (preflight, probe, results exchange, "
            f"campaign manifest: "
            + ", ".join(f"{n} {a}" for a, n in counts["per_run"].most_common())
            + ")",
        )
    )
    near_s, far_s = statistics.median(here), statistics.median(far)
    h.rows.append(
        Row(
            FAR_ROW,
            far_s,
            near_s,
            "s",
            far_s / near_s if near_s else float("nan"),
            "(reported)",
            True,
            f"a transfer job's wall time less its timed copy, median over {len(far)} "
            f"transfers, against versitygw through a proxy adding {RTT_S * 1000:.0f} ms to "
            f"every round trip (tests/infra/delay.py), beside the same campaign without it "
            f"(baseline column): {far_s - near_s:.2f} s more a measurement, about "
            f"{(far_s - near_s) / RTT_S:.1f} round trips (a new connection costs one more)",
        )
    )
