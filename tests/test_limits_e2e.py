"""Each bottleneck on the network built on purpose, a real rclone copy through it, and the
verdict read from the evidence sampled beside the copy (cloudbench.measure.evidence,
cloudbench.report.limits); the copies are made by tests/infra/limits.py as a measurement
makes them, against a real S3 server on this machine:

* per-connection caps: a proxy (tests/infra/shaper.py) capping each connection, total far
  above the sum;
* one total cap shared by all connections: a ``tbf`` qdisc on a veth pair into a network
  namespace where the store listens (this kernel has no netem; tbf exists).

Each asserts the verdict for at least 9 of 10 copies, and the route's verdict from them and
from how the rate scaled with the connections, measured the same way. The limits on the
client's host and at the store are tests/test_limits_host_e2e.py.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudbench.report import limits
from tests.infra.limits import (
    ENOUGH,
    KEY,
    REPEATS,
    SECRET,
    dataset,
    download,
    median,
    named,
    needs_root,
    route,
    said,
    store_fixture,  # noqa: F401 - the fixture `store`
    upload,
)
from tests.infra.s3 import free_port, versitygw_binary

pytestmark = needs_root
needs_versitygw = pytest.mark.skipif(
    not versitygw_binary().exists(), reason="versitygw not built: `make versitygw` (needs Go)"
)


# --- per-connection caps --------------------------------------------------------------------


@pytest.mark.full
@pytest.mark.slow
def test_per_connection_caps_are_named_per_connection(store, tmp_path, monkeypatch):
    """A proxy capping each connection at 1 MB/s (total 100x that): each upload is named
    per-connection path, and the route is too, by its measurements and by its scaling (2
    then 4 connections, the rate near doubling); no download is named shared, and their
    route is per-connection by its scaling."""
    from tests.infra.shaper import shaping_proxy

    src = tmp_path / "src"
    names = dataset(src, 4)
    with shaping_proxy(store.port, 1e6, 100e6) as link:
        monkeypatch.setenv("RCLONE_CONFIG_S3T_ENDPOINT", f"http://127.0.0.1:{link.port}")
        rows = [upload(tmp_path, src, names, 4, f"pc{k}") for k in range(REPEATS)]
        two = [upload(tmp_path, src, names, 2, f"pc2-{k}") for k in range(3)]
        down = [download(tmp_path, "pc0", names, 4, f"pcd{k}") for k in range(3)]
        down_two = [download(tmp_path, "pc0", names, 2, f"pcd2-{k}") for k in range(3)]
    assert named(rows, limits.PER_CONNECTION) >= ENOUGH, said(rows)
    scaling = limits.scaling_of([(2, median(two)), (4, median(rows))], 4)
    assert scaling is not None and scaling.gain >= limits.SCALES, scaling
    assert route(rows, scaling).limit == limits.PER_CONNECTION
    assert route(rows).limit == limits.PER_CONNECTION  # the measurements alone say it too
    # downloads: the receiver sees no drop, so no shared link; the scaling names the path
    assert named(down + down_two, limits.SHARED) == 0, said(down + down_two)
    scaling = limits.scaling_of([(2, median(down_two)), (4, median(down))], 4)
    assert scaling is not None and route(down, scaling).limit == limits.PER_CONNECTION


# --- one total cap shared by all ------------------------------------------------------------


@contextlib.contextmanager
def shaped_namespace(rate: str, tmp: Path, direction: str = "upload") -> Iterator[tuple[str, int]]:
    """A versitygw in a network namespace of its own, reached over a veth pair whose side
    here (``upload``) or there (``download``) sends through a tbf qdisc at ``rate``: (its
    address, its port)."""
    tag = f"{os.getpid() % 100000}"
    ns, here, there = f"cblim{tag}", f"cbl{tag}a", f"cbl{tag}b"
    subnet = 10 + os.getpid() % 200
    near, far = f"10.231.{subnet}.1", f"10.231.{subnet}.2"

    def ip(*args: str, inside: bool = False) -> None:
        cmd = ["ip", "netns", "exec", ns, *args] if inside else list(args)
        subprocess.run(cmd, check=True, capture_output=True)

    ip("ip", "netns", "add", ns)
    proc = None
    try:
        ip("ip", "link", "add", here, "type", "veth", "peer", "name", there)
        ip("ip", "link", "set", there, "netns", ns)
        ip("ip", "addr", "add", f"{near}/30", "dev", here)
        ip("ip", "link", "set", here, "up")
        ip("ip", "addr", "add", f"{far}/30", "dev", there, inside=True)
        ip("ip", "link", "set", there, "up", inside=True)
        ip("ip", "link", "set", "lo", "up", inside=True)
        ip("tc", "qdisc", "add", "dev", here if direction == "upload" else there, "root",
           "tbf", "rate", rate, "burst", "32kb", "latency", "50ms",
           inside=direction != "upload")  # fmt: skip
        port, root = free_port(), tmp / "nsroot"
        (root / "bkt").mkdir(parents=True)
        proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, str(versitygw_binary()), "--port", f"{far}:{port}",
             "--quiet", "posix", str(root)],
            env={**os.environ, "ROOT_ACCESS_KEY_ID": KEY, "ROOT_SECRET_ACCESS_KEY": SECRET},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(100):
            try:
                socket.create_connection((far, port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        yield far, port
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
        subprocess.run(["ip", "link", "del", here], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.mark.full
@pytest.mark.slow
@needs_versitygw
def test_a_shared_cap_is_named_shared(tmp_path, monkeypatch):
    """One tbf cap (32 Mbit/s) for every connection: each copy is named shared link, and
    the route is too, by its measurements and by its scaling (2 then 4 connections, the
    rate standing still)."""
    src = tmp_path / "src"
    names = dataset(src, 4)
    with shaped_namespace("32mbit", tmp_path) as (addr, port):
        for name, value in {
            "TYPE": "s3", "PROVIDER": "Other", "ENDPOINT": f"http://{addr}:{port}",
            "ACCESS_KEY_ID": KEY, "SECRET_ACCESS_KEY": SECRET, "FORCE_PATH_STYLE": "true",
        }.items():  # fmt: skip
            monkeypatch.setenv(f"RCLONE_CONFIG_S3T_{name}", value)
        rows = [upload(tmp_path, src, names, 4, f"sh{k}") for k in range(REPEATS)]
        two = [upload(tmp_path, src, names, 2, f"sh2-{k}") for k in range(3)]
    assert named(rows, limits.SHARED) >= ENOUGH, said(rows)
    scaling = limits.scaling_of([(2, median(two)), (4, median(rows))], 4)
    assert scaling is not None and scaling.gain <= limits.FLAT, scaling
    assert route(rows, scaling).limit == limits.SHARED
    assert route(rows).limit == limits.SHARED


@pytest.mark.full
@pytest.mark.slow
@needs_versitygw
def test_a_shared_cap_on_downloads_is_named_shared(tmp_path, monkeypatch):
    """The same tbf cap on the store's side, so downloads cross it (uploads do not): each
    download is named shared link from the receiver's side (packets out of order: drops
    where the queue overflowed), and the route by its scaling too."""
    src = tmp_path / "src"
    names = dataset(src, 4)
    with shaped_namespace("32mbit", tmp_path, "download") as (addr, port):
        for name, value in {
            "TYPE": "s3", "PROVIDER": "Other", "ENDPOINT": f"http://{addr}:{port}",
            "ACCESS_KEY_ID": KEY, "SECRET_ACCESS_KEY": SECRET, "FORCE_PATH_STYLE": "true",
        }.items():  # fmt: skip
            monkeypatch.setenv(f"RCLONE_CONFIG_S3T_{name}", value)
        upload(tmp_path, src, names, 4, "data")  # the copy to read, across the unshaped way
        rows = [download(tmp_path, "data", names, 4, f"dl{k}") for k in range(REPEATS)]
        two = [download(tmp_path, "data", names, 2, f"dl2-{k}") for k in range(3)]
    assert named(rows, limits.SHARED) >= ENOUGH, said(rows)
    scaling = limits.scaling_of([(2, median(two)), (4, median(rows))], 4)
    assert scaling is not None and scaling.gain <= limits.FLAT, scaling
    assert route(rows, scaling).limit == limits.SHARED
    assert route(rows).limit == limits.SHARED
