"""The evidence sampled beside a copy (cloudbench.measure.evidence): ``ss -tin`` parsed as
captured here, the client's sockets found by their inodes, its CPU and the cores it may use,
and the file a sampler leaves (a line per sample, read back whole or cut short by a kill)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cloudbench.campaign import paths
from cloudbench.measure import evidence

SS = Path(__file__).parent / "data" / "ss"


# --- parsing captured output (pure) ----------------------------------------------------------


@pytest.mark.unit
def test_a_slow_readers_sender_shows_its_receivers_window_holding_it():
    """Captured here (``ss -tinHe``, a receiver reading 64 KiB every 20 ms): the sender's
    socket is busy and rwnd-limited most of it (85%), its inode read; the receiver's socket
    holds unread data (Recv-Q) and its receive space."""
    socks = evidence.parse_ss((SS / "slow-reader.txt").read_text())
    assert len(socks) == 2
    sender = next(s for s in socks if s.busy_ms)
    receiver = next(s for s in socks if s is not sender)
    assert sender.rwnd_limited_ms is not None and sender.rwnd_limited_ms >= 0.8 * sender.busy_ms
    assert sender.inode and sender.send_q > 0 and sender.bytes_acked
    assert sender.snd_wnd is None  # a zero window (its persist timer): ss prints none
    assert sender.minrtt_ms is not None and sender.rtt_ms is not None
    assert sender.state == "ESTAB" and sender.local.startswith("127.0.0.1:")
    assert receiver.recv_q > 0 and receiver.rcv_space and receiver.bytes_received
    assert receiver.busy_ms is None and receiver.app_limited


@pytest.mark.unit
def test_the_header_and_no_inode_are_read_alike():
    """``ss -tin`` with its header line and without ``-e``: the same sockets, no inode."""
    socks = evidence.parse_ss((SS / "slow-reader-with-header.txt").read_text())
    assert len(socks) == 2 and all(s.inode is None for s in socks)
    assert any(s.rwnd_limited_ms for s in socks)


@pytest.mark.unit
def test_flows_through_a_shared_tbf_cap_show_its_queue_and_drops():
    """Captured here: 4 flows into a network namespace through a 32 Mbit/s tbf qdisc. None
    is held by a window or a buffer; their RTTs stand far above their minimum (the queue)
    and they retransmitted (the drops); bbr's own ``mrtt`` is not taken for the RTT."""
    socks = evidence.parse_ss((SS / "shared-tbf.txt").read_text())
    assert len(socks) == 4
    assert all(s.busy_ms and not s.rwnd_limited_ms and not s.sndbuf_limited_ms for s in socks)
    assert all(s.rtt_ms > 2 * s.minrtt_ms for s in socks)
    assert sum(s.bytes_retrans or 0 for s in socks) > 0
    assert all(s.mss == 1448 for s in socks)  # a veth's MTU, not loopback's
    assert all(s.delivery_rate and s.delivery_rate < 32e6 / 8 * 1.5 for s in socks)


@pytest.mark.unit
def test_fields_in_any_order_and_units():
    text = (
        "ESTAB 0 100 10.0.0.1:1 10.0.0.2:443 ino:77 sk:1 <->\n"
        "\t cubic rtt:80.5/2 minrtt:79.9 cwnd:100 mss:1448 delivery_rate 12.5Mbps busy:900ms "
        "sndbuf_limited:800ms(88.9%) retrans:1/7 bytes_retrans:2896 bytes_acked:99 snd_wnd:4096\n"
    )
    (s,) = evidence.parse_ss(text)
    assert (s.inode, s.send_q, s.busy_ms, s.sndbuf_limited_ms) == (77, 100, 900, 800)
    assert (s.rtt_ms, s.minrtt_ms, s.retrans, s.cwnd) == (80.5, 79.9, 7, 100)
    assert s.delivery_rate == pytest.approx(12.5e6 / 8)
    assert evidence.Socket.of_json(s.as_json()) == s


@pytest.mark.unit
def test_proc_readings():
    assert evidence.socket_inodes(["socket:[12]", "pipe:[3]", "/dev/null", "socket:[9]"]) == {
        9,
        12,
    }
    stat = "42 (a (b) c) S 7 " + " ".join(["0"] * 9) + " 150 50 20 30 0 0"
    assert evidence.parent_of(stat) == 7
    assert evidence.cpu_seconds(stat, 100) == pytest.approx(2.5)
    # the live threads' nanoseconds where they say more than the ticks (utime 1.50 + stime
    # 0.50 s here), the ticks where they say more (a thread that exited), children on top
    assert evidence.cpu_seconds(stat, 100, [1_500_000_000, 507_000_000]) == pytest.approx(2.507)
    assert evidence.cpu_seconds(stat, 100, [900_000_000]) == pytest.approx(2.5)
    assert evidence.quota_cores("50000\n", "100000\n") == 0.5
    assert evidence.quota_cores("-1", "100000") is None
    assert evidence.cpu_max_cores("max 100000") is None
    assert evidence.cpu_max_cores("25000 100000\n") == 0.25
    assert evidence.task_state("7 (rclone) D 1 7 7 0") == "D"
    assert evidence.task_state("8 (a) b) S 1 7 7 0") == "S"  # a name with a parenthesis
    io = "rchar: 9\nwchar: 0\nread_bytes: 8478720\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n"
    assert evidence.storage_bytes(io) == (8478720, 4096)


@pytest.mark.unit
def test_the_evidence_sits_beside_the_record_and_its_clients():
    rec = "results/x/sites/a/transfers/upload/r/plain/s/r1.json"
    assert paths.evidence(rec) == rec.removesuffix(".json") + ".evidence.jsonl"
    assert paths.evidence(paths.series(rec)) == paths.evidence(rec)
    assert (
        paths.evidence("d/r1.clients/client-2.series.tsv") == "d/r1.clients/client-2.evidence.jsonl"
    )


@pytest.mark.unit
def test_a_file_cut_short_reads_up_to_its_last_whole_line(tmp_path):
    p = tmp_path / "e.evidence.jsonl"
    head = evidence.header(2.0, "affinity 2")
    one = {"t": 1.0, "cpu_s": 0.5, "processes": 1, "sockets": [{"state": "ESTAB", "local": "a",
           "peer": "b", "recv_q": 0, "send_q": 0, "busy_ms": 5}]}  # fmt: skip
    p.write_text(json.dumps(head) + "\n" + json.dumps(one) + '\n{"t": 2.0, "cpu')
    doc = evidence.read(p)
    assert doc is not None and len(doc["samples"]) == 1 and doc["seconds"] is None
    assert doc["samples"][0]["sockets"][0].busy_ms == 5
    assert evidence.read(tmp_path / "none.jsonl") is None


# --- sampling a real process -----------------------------------------------------------------

CHILD = """
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
t = time.process_time()
while time.process_time() - t < float(sys.argv[2]):
    s.sendall(b"x" * 65536)
s.shutdown(socket.SHUT_WR)  # its work done, its CPU all spent
s.recv(1)  # until the test has a sample of it so, and closes
"""


@pytest.mark.quick
def test_a_sampler_finds_its_clients_socket_and_cpu(tmp_path):
    """A child that sends to a listener here for a known CPU time: the sampler's lines hold
    its socket (found by inode, the listener's end left out, as is every socket of this
    process), its CPU seconds growing to what the kernel says it spent (the child waits,
    idle, for a sample after its work), the cores this process may use; the end line has
    the copy's seconds."""
    from tests.infra.workflow import wait_for

    with socket.socket() as listen:
        listen.bind(("127.0.0.1", 0))
        listen.listen(1)
        port = listen.getsockname()[1]
        spend = 0.6
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(port), str(spend)])
        conn, _ = listen.accept()
        t0 = time.perf_counter()
        path = tmp_path / "r1.evidence.jsonl"
        sampler = evidence.Sampler(child.pid, t0, path)
        got = 0
        while chunk := conn.recv(1 << 20):  # until the child's work is done
            got += len(chunk)
        done = time.perf_counter() - t0

        def after_the_work() -> bool:
            doc = evidence.read(path)
            return doc is not None and len(doc["samples"]) >= 2 and doc["samples"][-1]["t"] > done

        wait_for(after_the_work, "a second sample, after the child's work")
        conn.close()  # the child exits
        _, _, usage = os.wait4(child.pid, 0)
        sampler.stop(time.perf_counter() - t0)
        conn.close()
    doc = evidence.read(path)
    assert doc is not None and doc["seconds"] > 0 and doc["errors"] == []
    assert doc["cores"] == len(os.sched_getaffinity(0))
    assert doc["tcp_wmem"][-1] > 0 and doc["tcp_congestion_control"] and doc["ss"]
    samples = doc["samples"]
    assert len(samples) >= 2
    seen = {s.local for smp in samples for s in smp["sockets"]}
    assert seen and all(not a.endswith(f":{port}") for a in seen)  # only the child's end
    cpu = [smp["cpu_s"] for smp in samples]
    assert cpu == sorted(cpu)
    spent = usage.ru_utime + usage.ru_stime  # the kernel's own account, at its exit
    assert spent >= spend
    assert cpu[-1] == pytest.approx(spent, abs=0.05)
    sent = max(s.bytes_acked or 0 for smp in samples for s in smp["sockets"])
    assert 0 < sent <= got + 2  # bytes_acked counts the SYN and the FIN (the shutdown)


@pytest.mark.unit
def test_a_download_through_a_shared_cap_receives_out_of_order_and_one_capped_alone_does_not():
    """Captured here, 4 connections receiving each time: through a 32 Mbit/s tbf into a
    network namespace, packets arrived out of order (a drop upstream) on some of them;
    through the shaping proxy capping each connection at 1 MB/s, on none."""
    shared = evidence.parse_ss((SS / "shared-tbf-download.txt").read_text())
    alone = evidence.parse_ss((SS / "per-connection-download.txt").read_text())
    assert len(shared) == len(alone) == 4
    assert all(s.bytes_received and s.recv_q is not None for s in shared + alone)
    assert sum(s.rcv_ooopack or 0 for s in shared) > 0
    assert all(not s.rcv_ooopack for s in alone)


@pytest.mark.unit
def test_evidence_turned_off_leaves_no_earlier_file_to_be_read_as_this_copys(tmp_path, monkeypatch):
    from cloudbench.measure.copy import kept_evidence

    path = tmp_path / "r1.evidence.jsonl"
    path.write_text("{}\n")
    assert kept_evidence(path) == path and path.exists()
    monkeypatch.setenv("CLOUDBENCH_EVIDENCE", "off")
    assert kept_evidence(path) is None and not path.exists()
