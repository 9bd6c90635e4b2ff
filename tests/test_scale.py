"""Several clients per measurement, for real: against ``rclone serve s3`` with a bandwidth cap
per client (rclone's --bwlimit is per process), N clients that really run together move N
times what one client moves; clients that ran one after the other would move 1 x.

Rates are judged against measurements of the same seconds, never a nominal cap from below:
a group against the sum of its own clients' rates (both slow down together on a busy
machine), its clients' windows against each other (they overlap: they ran together). The cap
is only ever an upper bound, which a busy machine cannot break.

Local clients are processes on this machine; on the 3-node Slurm of the tests they are tasks
of one batch job, one per node, started by srun (each reports its SLURM_PROCID, node and step).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from contextlib import ExitStack
from pathlib import Path

import pandas as pd
import pytest

from tests.infra.fixtures import slurm_cluster  # noqa: F401 - the fixture
from tests.infra.s3 import SERVE_S3, VERSITYGW, serve_s3, versitygw_binary
from tests.infra.slurm import PBS_BIN, PBS_STANDIN_VARIABLE
from tests.infra.terminal import full_log
from tests.infra.workflow import BIN, snakemake, trace_command, write_config

pytestmark = [pytest.mark.full, pytest.mark.slow]
CAP_MIB_S = 2  # per client
CAP = CAP_MIB_S * 2**20 / 1e6  # MB/s
# 4 clients: a 2 MiB file each, 1 s at the cap (their starts are milliseconds apart, the
# launcher's); one client: 4 files one after the other, 4 s
FILES, SIZE_MIB = 4, 2
# The local sweep: one client, and a group of 4 starting together (one after the other
# they would move 1 x a client, a quarter of their sum: the widest gap a group here shows)
LOCAL_CLIENTS = [1, 4]


def _adds_up(row, clients: pd.DataFrame, low: float = 0.7) -> bool:
    """A group's rate is the sum of its clients' own rates, each measured over its own
    seconds of the same run (one after the other it would be their mean: 1/N of it, 0.5 for
    a pair): at least ``low`` of the sum (a client slower than the others, as on a starved
    machine, ends the group's seconds later: 0.94 of it when 4 clients took 2.2-2.5 s) once
    the start skew the row reports is allowed for (the group's seconds run from the first
    client's start to the last one's end: a few tenths of a second of a 2-4 s copy, more
    when srun or pbsdsh start a client late on a loaded machine), and never above N x the
    per-client cap (an upper bound a busy machine cannot break)."""
    n, total = len(clients), clients["mb_per_s"].astype(float).sum()
    ideal = row["bytes_requested"] / (total * 1e6)
    late = ideal / (ideal + row["start_skew_s"])
    return total * late * low <= row["mb_per_s"] <= n * CAP * 1.1


def _together(clients: pd.DataFrame) -> bool:
    """A group's clients ran together: the last to start started before the first to end
    (one after the other, each would start after the one before it ended)."""
    start = clients["start_offset_s"].astype(float)
    end = start + clients["seconds"].astype(float)
    return start.max() < end.min()


def _campaign(
    tmp_path,
    clients,
    files=FILES,
    size=f"{SIZE_MIB}MiB",
    concurrency=1,
    site="edi",
    download=False,
    remotes=None,
):
    return write_config(
        tmp_path,
        {
            "campaign": "scale",
            **({"remotes": remotes} if remotes else {"remote": "s3t:"}),
            "bucket": "bench",
            "dataset": {"files": files, "size": size},
            "strategies": ["plain"],
            "concurrency": {"plain": concurrency},
            "repeats": 1,
            "clients": clients,
            "rclone": {"flags": ["--bwlimit", f"{CAP_MIB_S}M"]},
            "sites": {site: {"upload": True, "download": download, "scratch": "scratch"}},
        },
    )


def _rows(tmp_path):
    df = pd.read_csv(tmp_path / "results/scale/transfers.tsv", sep="\t")
    return df.set_index("clients").sort_index()


def test_local_clients_run_together_and_add_up(tmp_path):
    """Local clients against both S3 servers side by side, as two remotes of one campaign
    (rclone serve s3 as ``serve``, versitygw as ``gw`` where it is built): 1 and 4 clients
    each way, every group's clients running together and adding up. (A pair is a group like
    any other: the Slurm test below measures 3 clients, the PBS one a pair.)"""
    stores = {"serve": SERVE_S3} | ({"gw": VERSITYGW} if versitygw_binary().exists() else {})
    names = {"serve": "S3T", "gw": "S3G"}
    with ExitStack() as stack:
        servers = {
            r: stack.enter_context(serve_s3(str(BIN / "rclone"), tmp_path / f"root-{r}", store=s))
            for r, s in stores.items()
        }
        env = {k: v for r, srv in servers.items() for k, v in srv.client_env(names[r]).items()}
        remotes = {r: {"url": f"{names[r].lower()}:"} for r in servers}
        cfg = _campaign(tmp_path, LOCAL_CLIENTS, download=True, remotes=remotes)
        run = snakemake(tmp_path, cfg, env=env, figures=True)  # scaling.png below
        assert run.returncode == 0, run.stderr[-3000:]
        every = pd.read_csv(tmp_path / "results/scale/transfers.tsv", sep="\t")
        rows = 2 * len(LOCAL_CLIENTS)  # each client count, each way
        assert set(every["remote"]) == set(servers) and len(every) == rows * len(servers)
        # every row traces to its own raw files; a group's, to its clients' own rclone logs
        # added up, from the first client's start to the last one's end
        traced = trace_command(tmp_path / "results/scale")
        assert traced.returncode == 0, traced.stdout[-3000:] + traced.stderr[-2000:]
        assert traced.stdout.count("-> traced") == len(every), traced.stdout
        assert "4 clients: rclone's JSON log (r1.client-0.log)" in traced.stdout
        steps = pd.read_csv(tmp_path / "results/scale/steps.tsv", sep="\t")
        verify = steps[steps["step"] == "verify"]
        # several clients hash their own files on their node; verify compares the digests
        by = verify.groupby("setting")["digest_from"].agg(set)
        assert by["rclone-4x1"] == {"client"} and by["rclone-1x1"] == {"verify"}, by
        all_clients = pd.read_csv(tmp_path / "results/scale/clients.tsv", sep="\t")
        for remote in servers:
            _local_remote(tmp_path, every[every["remote"] == remote], all_clients, remote)
        # the report's Scaling section has the sweep and names a knee
        html = (tmp_path / "results/scale/figures/scaling.html").read_text()
        assert "Knee of each sweep" in html and "(rclone remote s3t) (upload)" in html
        assert (tmp_path / "results/scale/figures/scaling.png").stat().st_size > 10_000
        # finished work is never measured again
        started = sorted(every["started_utc"])
        again = snakemake(tmp_path, cfg, env=env)
        assert again.returncode == 0 and "Nothing to be done" in again.stderr
        after = pd.read_csv(tmp_path / "results/scale/transfers.tsv", sep="\t")
        assert sorted(after["started_utc"]) == started


def _local_remote(tmp_path, every: pd.DataFrame, all_clients: pd.DataFrame, remote: str) -> None:
    """The local scale test's checks of one remote's rows."""
    clients = all_clients[all_clients["remote"] == remote]
    down = every[every["direction"] == "download"].set_index("clients")
    assert (down["status"] == "ok").all(), down["error"]  # each verified against the manifest
    assert down.loc[1, "mb_per_s"] <= CAP * 1.1
    groups = LOCAL_CLIENTS[1:]
    for n in groups:  # together, not one after the other (that would be 1 x a client)
        group = clients[(clients["direction"] == "download") & (clients["clients"] == n)]
        assert _together(group) and _adds_up(down.loc[n], group), (remote, n, group)
    df = every[every["direction"] == "upload"].set_index("clients")
    assert list(df.index) == LOCAL_CLIENTS and (df["status"] == "ok").all(), df["error"]
    # A client whose PUT failed after its last byte sends the file again (rclone's
    # low-level retry, silent at -v). Against serve s3, one of 4 clients starting
    # together into a fresh prefix does so with its first file in most runs here (2 of
    # the last 2; 4 MiB files); real stores have no directories to race for. That group
    # is slower by what it re-sent, so it is measured truly but not at N x the cap: it
    # is left out of the rate checks, and the front page must say so instead.
    # A part or request the S3 SDK sent again after a 5xx (counted now that the copies
    # log every response) costs time the same way, without adding to bytes_moved.
    resent = (df["bytes_moved"] > df["bytes_requested"]) | (
        df["server_errors"].fillna(0) + df["throttled"].fillna(0) > 0
    )
    assert resent.sum() <= 1, df[["bytes_moved", "bytes_requested", "server_errors"]]
    clean = [n for n in LOCAL_CLIENTS if not resent[n]]
    clients = clients[clients["direction"] == "upload"]
    assert df.loc[1, "mb_per_s"] <= CAP * 1.1 or resent[1]  # the cap holds
    for n in groups:
        # N clients that ran together move the sum of their own rates, N x what one
        # moves (one after the other they would move 1 x). The group's seconds run from
        # the first client's start to the last one's end, so the clients' start skew is
        # in them: the lower bound allows for the skew the row itself reports.
        group = clients[clients["clients"] == n]
        assert df.loc[n, "start_skew_s"] >= 0 and _together(group), group
        if n in clean:
            assert _adds_up(df.loc[n], group), (remote, n, group, df.loc[n, "start_skew_s"])
            assert df.loc[n, "client_mb_per_s_max"] <= CAP * 1.1  # each at most its cap
    if resent.any():
        front = (tmp_path / "results/scale/figures/headline.html").read_text()
        assert "rclone counted bytes beyond the data (sent again" in front, front
    assert sorted(clients.groupby("clients")["client"].nunique().items()) == [
        (n, n) for n in groups
    ]
    assert (clients.groupby("clients")["files"].sum() == FILES).all()  # every file, once
    # the aggregate row traces to the clients' own rclone logs
    index = tmp_path / f"results/scale/sites/edi/client-logs/upload/{remote}"
    logs = sorted(index.rglob("r1.client-*.log"))
    assert len(logs) == sum(groups)
    (own,) = [p for p in index.rglob("rclone-4x1/r1.log")]  # no longer left empty
    assert "4 clients: r1.client-0.log, r1.client-1.log" in own.read_text()
    moved = 0
    for log in logs:
        if "rclone-4x1" in str(log):
            stats = [json.loads(x)["stats"] for x in log.read_text().splitlines() if '"stats"' in x]
            moved += stats[-1]["bytes"]
    assert moved == df.loc[4, "bytes_moved"]
    assert moved == FILES * SIZE_MIB * 2**20 or resent[4]
    series = pd.read_csv(tmp_path / "results/scale/timeseries.tsv", sep="\t")
    four = series[
        (series["setting"] == "rclone-4x1")
        & (series["direction"] == "upload")
        & (series["remote"] == remote)
    ]
    assert four["bytes"].max() == moved  # the summed series ends at every byte moved


def test_a_client_count_above_the_files_is_refused_before_any_work(tmp_path):
    cfg = _campaign(tmp_path, [1, 16], files=8)
    run = snakemake(tmp_path, cfg, "-n")
    assert run.returncode != 0
    assert "clients: 16 clients need at least as many files, and dataset.files is 8" in run.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.scheduler
def test_pbs_starts_each_client_on_a_chunk_of_its_own_with_pbsdsh(slurm_cluster, tmp_path):  # noqa: F811
    """A PBS site (the tesseract profile, through qsub): a 2-client measurement is one job
    of select=2 chunks placed apart, its clients started by pbsdsh, one per node, each
    knowing its rank from PBS_VNODENUM. PBS itself does not run here: qsub/qstat are
    Slurm's torque wrappers, PBS's variables come from a TaskProlog and pbsdsh is srun
    underneath (tests/infra/pbs/pbsdsh); what is tested is ours: detection, placement,
    ranks and rows."""
    env = {
        **slurm_cluster.env,
        "PBS_ACCOUNT": "cloudbench",
        PBS_STANDIN_VARIABLE: "1",
        "PATH": f"{PBS_BIN}:{os.environ['PATH']}",
    }
    store = VERSITYGW if versitygw_binary().exists() else SERVE_S3  # see the test above
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root", store=store) as s3:
        # 4 MiB a client, 2 s at the cap: pbsdsh (srun underneath) starts a client late on a
        # loaded machine by a few tenths of a second
        cfg = _campaign(tmp_path, [2], files=2, size="4MiB", site="tesseract")
        run = snakemake(
            tmp_path, cfg, "--cores", "2", profile="tesseract",
            env={**env, **s3.client_env("S3T")}, timeout=900,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    row = _rows(tmp_path).loc[2]
    assert row["status"] == "ok"
    # the pair ran together (the second started before the first ended) and moved the sum
    # of its clients' own rates, never above 2 x the cap
    clients = pd.read_csv(tmp_path / "results/scale/clients.tsv", sep="\t")
    assert _together(clients), clients
    if row["bytes_moved"] == row["bytes_requested"]:  # nothing re-sent (serve s3's odd 500)
        assert _adds_up(row, clients), (clients, row["start_skew_s"])
    else:
        assert store == SERVE_S3, row["bytes_moved"]
    rec = json.loads(
        next((tmp_path / "results/scale/sites/tesseract/transfers").rglob("r1.json")).read_text()
    )
    assert rec["launcher"] == "pbsdsh --"
    assert sorted((c["client"], c["rank_from"]) for c in rec["per_client"]) == [
        (0, "PBS_VNODENUM"),
        (1, "PBS_VNODENUM"),
    ]
    hosts = [c["host"] for c in rec["per_client"]]
    assert len(set(hosts)) == 2 and set(hosts) <= set(slurm_cluster.nodes)
    assert list((tmp_path / "logs/pbs/jobs").glob("*.exit")), "nothing went through qsub"


def _one_allocation_profile(tmp_path: Path, site: str) -> Path:
    """A Slurm site's profile from the template, with its one-allocation lines uncommented."""
    profile = tmp_path / f"profile-{site}"
    shutil.copytree(Path(__file__).parents[1] / "profiles/slurm", profile)
    text = (profile / "config.yaml").read_text().replace("site=mysite", f"site={site}")
    text = text.replace("# - transfers_on=one_allocation", "- transfers_on=one_allocation")
    text = text.replace("# group-components: [transfers=", "group-components: [transfers=")
    assert "- transfers_on=one_allocation" in text and "\ngroup-components:" in text
    (profile / "config.yaml").write_text(text)
    return profile


@pytest.mark.scheduler
def test_one_allocation_puts_each_client_on_a_node_of_its_own(slurm_cluster, tmp_path):  # noqa: F811
    """On the 3-node test Slurm, a site with transfers_on: one_allocation (the Slurm
    template's lines, uncommented) measuring 1 and 3 clients: one sbatch for the whole
    transfer phase, holding 3 nodes; inside it every transfer one after the other, srun
    starting a client per node, every client's node and job step in clients.tsv, and N
    clients moving N x what one client moved alone in the same job. Per-rule mode (a job
    per transfer) places its clients the same way: tests/test_hpc_docs.py runs it with 2
    clients on this cluster, and the PBS test below with pbsdsh.

    Against versitygw where it is built: rclone serve s3 answers the odd concurrent PUT
    into a new directory with a 500, and the client that re-sends a file is then slower by
    what it re-sent (docs/testing.md); that group is left out of the rate check."""
    env = {
        **slurm_cluster.env,
        "SBATCH_ACCOUNT": "cloudbench",
        "SBATCH_PARTITION": slurm_cluster.partition,
    }
    store = VERSITYGW if versitygw_binary().exists() else SERVE_S3
    profile = _one_allocation_profile(tmp_path, "tursa")
    with serve_s3(str(BIN / "rclone"), tmp_path / "s3root", store=store) as s3:
        # one client 3 s at the cap, then 3 clients a file each, 1 s (srun started them
        # 0.09 s apart on a machine at load 15)
        cfg = _campaign(tmp_path, [1, 3], files=3, size="2MiB", site="tursa")
        # the data steps first, without the scheduler (their batch arrays are
        # tests/test_profiles.py's): what goes through Slurm here is the transfer phase
        data = snakemake(
            tmp_path, cfg, "--omit-from", "upload", "--config", "site=tursa",
            env=s3.client_env("S3T"),
        )  # fmt: skip
        assert data.returncode == 0, data.stderr[-3000:]
        run = snakemake(
            tmp_path, cfg, "--cores", "2", profile=str(profile),
            env={**env, **s3.client_env("S3T")}, timeout=900,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # Snakemake's own words of each submission: the run's full log (the terminal is the
    # campaign's, tests/infra/terminal.py)
    out = full_log(tmp_path, run.stdout + run.stderr)
    groups = re.findall(r"submitted with SLURM jobid (\S+) \(log: \S*/group_transfers", out)
    assert len(groups) == 1, out[-3000:]  # one queue wait for every transfer
    assert not re.search(r"\(log: \S*rule_(upload|download)/", out)  # no job of their own
    df = _rows(tmp_path)
    assert list(df.index) == [1, 3] and (df["status"] == "ok").all(), df["error"]
    assert set(df["ran_on"]) == {f"batch job {groups[0]}"}
    resent = df["bytes_moved"] > df["bytes_requested"]
    assert resent.sum() <= 1 and (store == SERVE_S3 or not resent.any()), df["bytes_moved"]
    clients = pd.read_csv(tmp_path / "results/scale/clients.tsv", sep="\t")
    assert df.loc[1, "mb_per_s"] <= CAP * 1.1 or resent[1]
    for n in (1, 3):
        assert len(set(df.loc[n, "host"].split(","))) == n, df.loc[n, "host"]
        if n > 1 and not resent[n]:
            group = clients[clients["clients"] == n]
            assert _adds_up(df.loc[n], group), (n, group, df.loc[n, "start_skew_s"])
    ran = df.sort_values("started_utc")  # one after the other inside the one job
    ends = pd.to_datetime(ran["started_utc"]) + pd.to_timedelta(ran["seconds"], unit="s")
    assert (pd.to_datetime(ran["started_utc"]).iloc[1:].values >= ends.iloc[:-1].values).all()
    clients = pd.read_csv(tmp_path / "results/scale/clients.tsv", sep="\t", dtype=str)
    for n in (3,):
        group = clients[clients["clients"] == str(n)]
        assert _together(group), group
        assert sorted(group["host"]) == list(slurm_cluster.nodes[:n])  # one client per node
        assert set(group["batch_job"]) == {groups[0]}  # all of them tasks of the one job
        assert group["job_step"].nunique() == 1 and group["job_step"].iloc[0].isdigit()
    recs = [
        json.loads(p.read_text())
        for p in (tmp_path / "results/scale/sites/tursa/transfers").rglob("r1.json")
    ]
    for rec in (r for r in recs if int(r["clients"]) > 1):
        assert rec["launcher"].startswith("srun --ntasks=")
        assert {c["rank_from"] for c in rec["per_client"]} == {"SLURM_PROCID"}


def test_a_pbs_site_without_pbsdsh_is_refused_before_any_job(tmp_path):
    """No pbsdsh on PATH and no CLOUDBENCH_LAUNCHER: a PBS site asked for 2 clients stops
    with one line before anything is submitted, instead of running both on one node."""
    cfg = _campaign(tmp_path, [1, 2], files=2, site="tesseract")
    path = ":".join(p for p in os.environ["PATH"].split(":") if not (Path(p) / "pbsdsh").exists())
    run = snakemake(
        tmp_path, cfg, "--cores", "2", profile="tesseract", env={"PBS_ACCOUNT": "x", "PATH": path}
    )
    assert run.returncode != 0
    assert "site tesseract measures with up to 2 clients" in run.stderr
    assert "no pbsdsh on PATH" in run.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs/pbs").exists()


def test_one_allocation_without_group_components_is_one_line():
    """Without group-components naming the group, Snakemake would still submit one job per
    transfer: the run says what to add instead of silently paying every queue wait."""
    from cloudbench.site.jobenv import group_problem

    said = group_problem(True, "transfers", {})
    assert said is not None and "group-components: [transfers=100000]" in said
    assert group_problem(True, "transfers", {"transfers": 100000}) is None
    assert group_problem(False, "transfers", {}) is None
