"""What limits a copy and a route (cloudbench.report.limits), from evidence recorded here.

tests/data/evidence holds evidence files sampled beside real rclone uploads to versitygw on
this machine (tests/test_limits_e2e.py builds the same bottlenecks and runs the copies):
through a proxy capping each connection at 1 MB/s, through a 32 Mbit/s tbf qdisc shared by
all connections, from a cgroup allowed 5% of a core, against a store answering every second
PUT with 503 SlowDown, and on unshaped loopback; and downloads through the shared tbf (on
the store's side) and through the per-connection proxy. ``cases.tsv`` gives each file's
record figures (rate, connections, throttled answers, direction) and the bottleneck built.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest

from cloudbench.measure import evidence
from cloudbench.report import limits
from cloudbench.report.limits import Scaling, Summary, Verdict

pytestmark = pytest.mark.unit

DATA = Path(__file__).parent / "data" / "evidence"
BUILT = {
    "per-connection": limits.PER_CONNECTION,
    "shared": limits.SHARED,
    "cpu": limits.CPU,
    "throttled": limits.STORE,
}


def _cases() -> list[dict[str, str]]:
    with open(DATA / "cases.tsv", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _verdict(case: dict[str, str]) -> Verdict:
    doc = evidence.read(DATA / case["file"])
    assert doc is not None and doc["samples"], case["file"]
    ev = limits.summarise([doc], case["direction"], float(case["seconds"]))
    return limits.verdict(
        ev,
        case["direction"],
        float(case["mb_per_s"]),
        int(case["connections"]),
        int(case["throttled"]) if case["throttled"] else None,
    )


@pytest.mark.parametrize("built", sorted(BUILT))
def test_each_built_bottleneck_is_named_from_its_recorded_evidence(built):
    """Every recorded upload through a built bottleneck is named for it, with its figures."""
    cases = [c for c in _cases() if c["built"] == built and c["direction"] == "upload"]
    assert len(cases) >= 3
    for case in cases:
        v = _verdict(case)
        assert v.limit == BUILT[built], (case["file"], v.text())
        assert v.figures and v.action


def test_downloads_are_named_from_the_receivers_side():
    """Downloads through the shared tbf (on the store's side): named shared link by their
    out-of-order arrivals. Through the per-connection proxy: nothing out of order, so not
    shared; undetermined, for the route's scaling to decide."""
    downs = [c for c in _cases() if c["direction"] == "download"]
    assert {c["built"] for c in downs} == {"shared", "per-connection"}
    for case in downs:
        v = _verdict(case)
        want = limits.SHARED if case["built"] == "shared" else limits.UNDETERMINED
        assert v.limit == want, (case["file"], v.text())


def test_the_figures_are_the_evidence_s_own():
    """The CPU verdict names the quota as its cores; the shared link its queue and drops;
    per-connection its window; the store its count of 503s."""
    said = {c["built"]: _verdict(c) for c in _cases() if c["direction"] == "upload"}
    assert "of 0.05 core" in said["cpu"].figures
    assert "retransmitted" in said["shared"].figures and "minimum" in said["shared"].figures
    assert "rwnd-limited" in said["per-connection"].figures
    throttled = next(c for c in _cases() if c["built"] == "throttled")
    assert f"{throttled['throttled']} answers 503/429" in _verdict(throttled).figures


def test_unshaped_loopback_is_not_given_a_limit_it_did_not_have():
    """No cap was built: neither a shared link, nor the store, nor the sender's buffer; a
    CPU verdict only with its own figure above the threshold."""
    cases = [c for c in _cases() if c["built"] == "none"]  # uploads
    assert cases
    for case in cases:
        v = _verdict(case)
        assert v.limit not in (limits.SHARED, limits.STORE, limits.SENDER_BUFFER), v.text()


# --- the rules on summaries built to the point -----------------------------------------------


def _summary(**kw) -> Summary:
    base = dict(
        samples=5, connections=4, cpu_share=0.1, cores=2.0, busy_s=16.0, seconds=5.0,
        rwnd_share=0.0, sndbuf_share=0.0, rtt_ms=50.0, minrtt_ms=49.0, retrans_share=0.0,
        window_fill=None, recv_q_share=None, rcv_space=None, wmem_max=4194304, rmem_max=None,
    )  # fmt: skip
    return Summary(**(base | kw))


def test_a_send_buffer_names_the_sysctl_and_the_value_from_rate_times_rtt():
    v = limits.verdict(_summary(sndbuf_share=0.9), "upload", 320.0, 4)
    assert v.limit == limits.SENDER_BUFFER
    # 80 MB/s per connection x 50 ms = 4,000,000 bytes in flight
    assert "net.ipv4.tcp_wmem" in v.action and "4000000" in v.action
    assert "4194304" in v.figures  # the maximum now


def test_a_window_full_of_a_round_trip_is_the_receivers_window():
    v = limits.verdict(_summary(rwnd_share=0.95, window_fill=0.9), "upload", 40.0, 4)
    assert v.limit == limits.RECEIVER_WINDOW and "tcp_rmem" in v.action
    slow = limits.verdict(_summary(rwnd_share=0.95, window_fill=0.01), "upload", 40.0, 4)
    assert slow.limit == limits.PER_CONNECTION


def test_cwnd_bound_without_a_queue_is_per_connection_and_mixed_signs_decide_nothing():
    assert limits.verdict(_summary(), "upload", 40.0, 4).limit == limits.PER_CONNECTION
    queue_only = _summary(rtt_ms=150.0, minrtt_ms=49.0)
    assert limits.verdict(queue_only, "upload", 40.0, 4).limit == limits.UNDETERMINED
    both = _summary(rtt_ms=150.0, minrtt_ms=49.0, retrans_share=0.01)
    assert limits.verdict(both, "upload", 40.0, 4).limit == limits.SHARED


def test_idle_connections_and_no_evidence_are_undetermined_never_a_guess():
    idle = _summary(busy_s=2.0)  # 2 of 4 x 5 connection-seconds
    v = limits.verdict(idle, "upload", 40.0, 4)
    assert v.limit == limits.UNDETERMINED and "idle" in v.figures
    assert limits.verdict(None, "upload", 40.0, 4).limit == limits.UNDETERMINED
    blind = limits.verdict(_summary(connections=0, no_ss=True), "upload", 40.0, 4)
    assert blind.limit == limits.UNDETERMINED and "no ss on the node" in blind.figures
    # throttled but busy: the store's 503s did not hold the copy
    assert limits.verdict(_summary(), "upload", 40.0, 4, throttled=3).limit != limits.STORE


def test_a_copy_waiting_on_its_scratch_is_the_disk_and_only_with_both_signs():
    """Idle connections, a thread in D in most samples and the bytes from storage: the disk,
    with its figures; without either sign, or with the connections busy, not the disk."""
    # 40 MB/s for 5 s = 200 MB moved, 180 MB of it read from storage
    disk = dict(busy_s=2.0, disk_wait_share=0.8, storage_bytes=180_000_000)
    v = limits.verdict(_summary(**disk), "upload", 40.0, 4)
    assert v.limit == limits.DISK and v.action == limits.ACTIONS[limits.DISK]
    assert "waiting on the disk in 80% of samples" in v.figures
    assert "36.0 MB/s read from storage for a copy at 40.0 MB/s" in v.figures
    cached = _summary(**(disk | {"storage_bytes": 1_000_000}))  # the page cache's bytes
    assert limits.verdict(cached, "upload", 40.0, 4).limit == limits.UNDETERMINED
    rarely = _summary(**(disk | {"disk_wait_share": 0.2}))
    assert limits.verdict(rarely, "upload", 40.0, 4).limit == limits.UNDETERMINED
    busy = _summary(**(disk | {"busy_s": 16.0}))  # the network held the copy, not the disk
    assert limits.verdict(busy, "upload", 40.0, 4).limit == limits.PER_CONNECTION
    older = _summary(busy_s=2.0)  # evidence from before the disk was looked at
    assert limits.verdict(older, "upload", 40.0, 4).limit == limits.UNDETERMINED
    unread = _summary(recv_q_share=0.9, disk_wait_share=0.9, storage_bytes=150_000_000)
    down = limits.verdict(unread, "download", 40.0, 4)
    assert down.limit == limits.DISK and "written to storage" in down.figures


def test_the_disk_summary_reads_each_clients_last_look():
    docs = [
        {"cores": 2, "samples": [
            {"t": 1.0, "cpu_s": 0.1, "disk_wait": 2, "read_bytes": 10, "sockets": []},
            {"t": 2.0, "cpu_s": 0.2, "disk_wait": 0, "read_bytes": 30, "sockets": []},
        ]},
        {"cores": 2, "samples": [
            {"t": 1.0, "cpu_s": 0.1, "disk_wait": 1, "read_bytes": 5, "sockets": []},
        ]},
    ]  # fmt: skip
    ev = limits.summarise(docs, "upload", 2.0)
    assert ev.disk_wait_share == pytest.approx(2 / 3) and ev.storage_bytes == 35
    old = limits.summarise([{"cores": 2, "samples": [{"t": 1.0, "cpu_s": 0.1, "sockets": []}]}],
                           "upload", 1.0)  # fmt: skip
    assert old.disk_wait_share is None and old.storage_bytes is None


def test_a_download_is_read_from_the_receivers_side():
    full = _summary(cpu_share=0.95, recv_q_share=0.9)
    assert limits.verdict(full, "download", 40.0, 4).limit == limits.CPU
    slow = limits.verdict(_summary(recv_q_share=0.9), "download", 40.0, 4)
    assert slow.limit == limits.UNDETERMINED and "read slowly" in slow.figures
    kept = limits.verdict(_summary(recv_q_share=0.0), "download", 40.0, 4)
    assert kept.limit == limits.UNDETERMINED and "scaling" in kept.figures
    dropped = _summary(recv_q_share=0.0, ooo_connections=2, ooo_packets=35)
    v = limits.verdict(dropped, "download", 40.0, 4)
    assert v.limit == limits.SHARED and "35 packets arrived out of order on 2 of 4" in v.figures


# --- a route ---------------------------------------------------------------------------------


def test_scaling_is_read_at_the_best_setting():
    grew = limits.scaling_of([(2, 10.0), (4, 19.0)], 4)
    assert grew == Scaling(2, 4, 10.0, 19.0) and grew.gain == pytest.approx(0.9)
    fell = limits.scaling_of([(2, 10.0), (4, 12.0), (8, 11.0)], 4)
    assert fell == Scaling(4, 8, 12.0, 11.0) and fell.gain < 0
    assert limits.scaling_of([(4, 12.0)], 4) is None


def test_a_routes_verdict_is_its_majority_and_scaling_decides_per_connection_or_shared():
    per = Verdict(limits.PER_CONNECTION, "x")
    und = Verdict(limits.UNDETERMINED, "y")
    assert limits.route_verdict([per, per, und]).limit == limits.PER_CONNECTION
    assert limits.route_verdict([per, und]).limit == limits.UNDETERMINED  # no majority
    flat = Scaling(4, 8, 12.0, 12.5)
    assert limits.route_verdict([per, per, per], flat).limit == limits.SHARED
    grew = Scaling(2, 4, 10, 19)
    assert limits.route_verdict([und] * 3, grew).limit == limits.UNDETERMINED
    kept_up = Verdict(limits.UNDETERMINED, f"{limits.KEPT_UP} (unread data in 3% of samples)")
    assert limits.route_verdict([kept_up] * 3, grew).limit == limits.PER_CONNECTION
    # idle connections on a busy machine: a rate that did not grow says nothing of the link
    idle = Verdict(limits.UNDETERMINED, "connections idle most of the copy (busy 20% of it)")
    assert limits.route_verdict([idle] * 3, flat).limit == limits.UNDETERMINED
    cpu = Verdict(limits.CPU, "CPU 99% of 0.5 core(s) allowed")
    assert limits.route_verdict([cpu] * 3, flat).limit == limits.CPU  # not the link's doing


def _rows(
    limit: str, rates: dict[int, list[float]], evidence: str = "figures", **route
) -> list[dict]:
    out = []
    for conns, rs in rates.items():
        for k, r in enumerate(rs):
            out.append({
                "campaign": "c", "site": "edi", "remote": "s3", "direction": "upload",
                "strategy": "chunked", "layout": "chunked-4MiB", "chunk_bytes": 4 << 20,
                "setting": f"rclone-1x{conns}", "tool": "rclone", "clients": 1,
                "concurrency": conns, "repeat": k + 1, "status": "ok", "mb_per_s": r,
                "connections": conns, "limit": limit, "limit_evidence": evidence,
            } | route)  # fmt: skip
    return out


def test_the_routes_table_and_the_first_screens_block():
    """Two routes limited differently: one whose rate grew with its connections, one that
    stood still; the block names each with its figures and action."""
    df = pd.DataFrame(
        _rows(limits.UNDETERMINED, {2: [10, 10.2, 9.9], 4: [19.8, 20.1, 20.0]},
              f"{limits.CWND_BOUND} (busy 90% of the copy), signs mixed")
        + _rows(limits.SHARED, {2: [30, 30.5, 29.8], 4: [30.2, 30.1, 29.9]}, site="ams")
    )  # fmt: skip
    table = limits.routes_table(df).set_index("site")
    assert table.loc["edi", "limit"] == limits.PER_CONNECTION
    assert "2 -> 4 connections" in table.loc["edi", "figures"]
    assert table.loc["ams", "limit"] == limits.SHARED
    block = limits.limits_block(df)
    assert "What limits each route" in block and "edi upload s3" in block
    assert limits.ACTIONS[limits.SHARED] in block
    assert limits.limits_block(df.drop(columns=["limit"])) == ""
    none = limits.limits_block(df.assign(limit=limits.UNDETERMINED).head(3))
    assert "undetermined on every route" in none and none.count("<li>") == 0
    assert limits.limits_block(df.assign(limit=None)) == ""


def test_a_routes_scaling_is_its_own_tools():
    """Two tools on one route: the scaling compares the best setting's tool with itself, never
    a median of both tools' rows (a user's loopback route read 'shared link' from rclone's
    and s5cmd's rates pooled, a rate no setting ran at)."""
    held = f"{limits.CWND_BOUND} (busy 90% of the copy), signs mixed"
    rclone = _rows(limits.UNDETERMINED, {2: [10, 10.1, 9.9], 4: [20, 19.9, 20.1]}, held)
    s5cmd = [
        r | {"tool": "s5cmd", "setting": r["setting"].replace("rclone", "s5cmd")}
        for r in _rows(limits.UNDETERMINED, {2: [40, 40, 40], 4: [15, 15, 15]}, held)
    ]
    table = limits.routes_table(pd.DataFrame(rclone + s5cmd))
    (row,) = table.itertuples()
    assert row.limit == limits.SHARED, row.figures  # s5cmd's own: 40 at 2, 15 at 4
    assert "2 -> 4 connections: 40.0 -> 15.0 MB/s" in row.figures
    alone = limits.routes_table(pd.DataFrame(rclone))
    assert alone["limit"].iloc[0] == limits.PER_CONNECTION


def test_a_records_columns_come_from_the_file_beside_it(tmp_path):
    """transfers.tsv's limit columns: read from the evidence beside the record; a record
    with none (from before evidence, or a failed copy) leaves them empty."""
    case = next(c for c in _cases() if c["built"] == "shared" and c["direction"] == "upload")
    record = tmp_path / "r1.json"
    (tmp_path / "r1.evidence.jsonl").write_text((DATA / case["file"]).read_text())
    rec = {
        "status": "ok", "direction": "upload", "seconds": float(case["seconds"]),
        "mb_per_s": float(case["mb_per_s"]), "connections": int(case["connections"]),
        "throttled": 0, "clients": 1,
    }  # fmt: skip
    assert limits.columns(record, rec)["limit"] == limits.SHARED
    assert limits.columns(record, rec | {"status": "failed"}) == {
        "limit": None,
        "limit_evidence": None,
    }
    assert limits.columns(tmp_path / "r2.json", rec)["limit"] is None
    json.loads((tmp_path / "r1.evidence.jsonl").read_text().splitlines()[0])  # a header line


def test_trace_lists_the_evidence_beside_a_row(tmp_path):
    """`cloudbench trace` names each row's evidence file, its samples and the row's limit."""
    from cloudbench.campaign import paths
    from cloudbench.campaign.identity import MeasurementId
    from cloudbench.report.trace import kept_files

    case = next(c for c in _cases() if c["built"] == "per-connection")  # an upload: first
    cells = {k: str(v) for k, v in _rows(limits.PER_CONNECTION, {4: [3.7]})[0].items()}
    record = Path(paths.transfer_record(tmp_path, MeasurementId.of(cells)))
    assert kept_files(tmp_path, cells) == ()  # nothing beside it yet
    record.parent.mkdir(parents=True)
    Path(paths.evidence(record)).write_text((DATA / case["file"]).read_text())
    (said,) = kept_files(tmp_path, cells)
    samples = len(evidence.read(DATA / case["file"])["samples"])
    assert said == f"r1.evidence.jsonl ({samples} samples of what limited it: per-connection path)"


def test_a_group_of_clients_is_judged_on_all_their_connections(tmp_path):
    """A record of two clients: each client's evidence file is read, their connections
    pooled, and the CPU is the fuller client's."""
    cases = [
        c
        for c in _cases()
        if c["built"] == "per-connection" and c["connections"] == "4" and c["direction"] == "upload"
    ]
    docs = [evidence.read(DATA / c["file"]) for c in cases[:2]]
    one = limits.summarise(docs[:1], "upload", float(cases[0]["seconds"]))
    both = limits.summarise(docs, "upload", float(cases[0]["seconds"]))
    assert both.connections == 2 * one.connections
    assert both.cpu_share == max(limits.summarise([d], "upload", 1.0).cpu_share for d in docs)
    record = tmp_path / "r1.json"
    folder = tmp_path / "r1.clients"
    folder.mkdir()
    for k, c in enumerate(cases[:2]):
        (folder / f"client-{k}.evidence.jsonl").write_text((DATA / c["file"]).read_text())
    rec = {
        "status": "ok", "direction": "upload", "seconds": float(cases[0]["seconds"]),
        "mb_per_s": 2 * float(cases[0]["mb_per_s"]), "connections": 8, "clients": 2,
    }  # fmt: skip
    assert limits.evidence_files(record, rec) == sorted(folder.glob("*.jsonl"))
    assert limits.columns(record, rec)["limit"] == limits.PER_CONNECTION


@pytest.mark.unit
def test_a_route_at_the_campaigns_own_cap_is_named_by_it_not_the_link():
    """rclone's --bwlimit and --bwlimit-file are the campaign's own caps: a route that moved
    at one is held by it, and the action is to lift it, not to find a faster path (a user's
    --bwlimit 2M route read 'shared link: the link is full', usercheck53)."""
    caps = limits.OwnCaps.of({"rclone": {"flags": ["--bwlimit", "4M", "--bwlimit-file=1M"]}})
    assert (caps.total, caps.per_file) == (4 * 2**20, 2**20)
    at = caps.held("rclone", 2.04, 2)  # 97% of two files' 2 MiB/s = 2.10 MB/s
    assert at is not None and at.limit == limits.OWN_CAP, at
    assert "--bwlimit-file 1 MiB/s x 2 connections" in at.figures and "97%" in at.figures
    assert "raise or remove" in at.action
    at = caps.held("rclone", 4.1, 8)  # eight files' 8 MiB/s, above the process's 4 MiB/s
    assert "98% of --bwlimit 4 MiB/s" in at.figures, at
    assert caps.held("rclone", 1.0, 1).limit == limits.OWN_CAP  # one file: 1 MiB/s, 95%
    assert caps.held("rclone", 0.5, 2) is None  # well below both: the path or the store
    assert caps.held("s5cmd", 2.04, 2) is None  # rclone's flags do not cap s5cmd
    # --bwlimit caps each rclone process: two clients may move twice it (a user's 2-client
    # route read '188% of --bwlimit')
    total = limits.OwnCaps.of({"rclone": {"flags": ["--bwlimit", "4M"]}})
    two = total.held("rclone", 7.9, 4, processes=2)
    assert (
        two.limit == limits.OWN_CAP
        and "94% of --bwlimit 4 MiB/s x 2 rclone processes" in two.figures
    )
    assert total.held("rclone", 4.0, 4, processes=2) is None  # half of the two processes' cap
    assert limits.OwnCaps.of({"rclone": {"flags": []}}).held("rclone", 2.04, 2) is None
    assert limits.OwnCaps.of(None).held("rclone", 2.04, 2) is None


@pytest.mark.unit
def test_a_copy_at_its_own_cap_is_named_by_it_row_by_row(tmp_path):
    """A row that moved at the cap its command or its environment gave rclone is held by
    that cap, as its route is (a user's --bwlimit rows read 'undetermined', downloads
    blaming 'its disk or itself'); a row well below it is judged on its evidence."""
    rec = {
        "status": "ok", "direction": "download", "tool": "rclone", "mb_per_s": 4.1,
        "connections": 4, "clients": 1, "seconds": 2.0,
        "command": "rclone copy s3t:bkt/x /scratch/x --transfers 4 --bwlimit 4M",
    }  # fmt: skip
    v = limits.of_record(tmp_path / "r1.json", rec)
    assert v is not None and v.limit == limits.OWN_CAP, v
    assert (
        "98% of --bwlimit 4 MiB/s" in v.figures and "its command line and environment" in v.figures
    )
    env = rec | {"command": "rclone copy s3t:bkt/x /scratch/x", "rclone_env": "RCLONE_BWLIMIT=4M"}
    assert limits.of_record(tmp_path / "r1.json", env).limit == limits.OWN_CAP
    two = env | {"clients": 2, "mb_per_s": 8.0}  # each process its own cap
    assert "x 2 rclone processes" in limits.of_record(tmp_path / "r1.json", two).figures
    # a group's record keeps no command: its first client's has it
    group = tmp_path / "g1.json"
    (tmp_path / "g1.clients").mkdir()
    (tmp_path / "g1.clients/client-0.json").write_text(json.dumps({"command": rec["command"]}))
    two_clients = rec | {"command": None, "clients": 2, "mb_per_s": 7.9}
    assert (
        "94% of --bwlimit 4 MiB/s x 2 rclone processes"
        in limits.of_record(group, two_clients).figures
    )
    below = rec | {"mb_per_s": 1.0}  # no evidence beside it: no verdict, never a guess
    assert limits.of_record(tmp_path / "r1.json", below) is None
    s5cmd = rec | {"tool": "s5cmd"}  # rclone's flags never cap another tool
    assert limits.of_record(tmp_path / "r1.json", s5cmd) is None


@pytest.mark.unit
def test_a_copy_too_short_to_sample_says_so_not_that_it_has_no_evidence():
    """A copy under a second keeps its evidence file with no sample: its verdict says the
    copy was too short to see, not that the file is missing (usercheck53: 32 loopback rows
    read 'no evidence beside the record' beside their files)."""
    v = limits.verdict(_summary(samples=0), "upload", 70.0, 2)
    assert v.limit == limits.UNDETERMINED and "too short" in v.figures, v
    assert "no evidence" in limits.verdict(None, "upload", 70.0, 2).figures
