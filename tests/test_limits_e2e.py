"""Each bottleneck built on purpose, a real rclone copy through it, and the verdict read from
the evidence sampled beside the copy (cloudbench.measure.evidence, cloudbench.report.limits).

Every copy runs as a measurement does (``cloudbench.measure.copy.measure``: rclone, its log,
its record) against a real S3 server on this machine; the limit is put in its way:

* per-connection caps: a proxy (tests/infra/shaper.py) capping each connection, total far
  above the sum;
* one total cap shared by all connections: a ``tbf`` qdisc on a veth pair into a network
  namespace where the store listens (this kernel has no netem; tbf exists);
* a client held to a fraction of a core: a cgroup v1 ``cpu.cfs_quota_us`` its rclone is put
  in (a wrapper named as rclone's override, CLOUDBENCH_RCLONE, that joins it first);
* a store that answers 503 SlowDown to a share of requests (tests/infra/throttle.py);
* a slow scratch: the files on ext4 over a loop device whose reads a cgroup v1 blkio throttle
  holds down for the rclone put in it, dropped from the page cache before each copy;
* nothing: unshaped loopback, where the verdict must be one the evidence shows.

Each asserts the verdict for at least 9 of 10 copies, and the route's verdict from them (and,
for the two caps, from how the rate scaled with the connections, measured the same way).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudbench.measure import evidence
from cloudbench.measure.clients.base import CopyJob
from cloudbench.measure.copy import measure
from cloudbench.measure.rclone import find_rclone
from cloudbench.report import limits
from tests.infra.s3 import VERSITYGW, built_stores, free_port, serve_s3, versitygw_binary

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: netns, tc, cgroups")
needs_versitygw = pytest.mark.skipif(
    not versitygw_binary().exists(), reason="versitygw not built: `make versitygw` (needs Go)"
)
needs_blkio = pytest.mark.skipif(
    not Path("/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device").exists()
    or not all(shutil.which(c) for c in ("losetup", "mkfs.ext4", "mount")),
    reason="no cgroup v1 blkio throttle, or no losetup/mkfs.ext4: a slow scratch cannot be built",
)
needs_cpu_quota = pytest.mark.skipif(
    not Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists(),
    reason="no cgroup v1 cpu controller here: a client's CPU quota cannot be set",
)

KEY, SECRET = "limitskey", "limits-Secret-1"
FILE = 4 * 2**20
REPEATS = 10
ENOUGH = 9  # of 10
IDENTITY = {  # a record's identity columns (its setting is the copy's tag)
    "campaign": "limits", "site": "here", "remote": "s3t", "direction": "upload",
    "strategy": "plain", "layout": "plain", "chunk_bytes": 0, "tool": "rclone", "clients": 1,
    "repeat": 0,
}  # fmt: skip


def _dataset(root: Path, files: int, size: int = FILE) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    names = [f"f{i}.bin" for i in range(files)]
    for n in names:
        (root / n).write_bytes(os.urandom(size))
    return names


def upload(tmp: Path, src: Path, names: list[str], transfers: int, tag: str) -> dict:
    """One measured upload of ``names`` at ``transfers`` objects at once to ``s3t:bkt/tag``:
    its record (as a dict) with its verdict's ``limit`` and ``limit_evidence``."""
    work = tmp / "work" / tag
    work.mkdir(parents=True)
    job = CopyJob(
        direction="upload",
        strategy="plain",
        src=str(src),
        dst=f"s3t:bkt/{tag}",
        objects=tuple(names),
        expected_bytes=sum((src / n).stat().st_size for n in names),
        object_bytes=FILE,
        threads=transfers,
        remote_url="s3t:bkt",
        log_path=work / "copy.log",
        workdir=work,
    )
    return _measured(job, work, {**IDENTITY, "setting": tag}, tag)


def _measured(job: CopyJob, work: Path, keys: dict, tag: str) -> dict:
    """``job`` measured by rclone: its record (ok, its evidence kept beside it) with its
    verdict's columns and the evidence file's path."""
    record = work / "record.json"
    rec = measure(
        job, "rclone", keys=keys, series_path=work / "record.series.tsv", label=tag, timeout=300
    ).as_json()
    assert rec["status"] == "ok", rec.get("error")
    evidence = work / "record.evidence.jsonl"
    assert evidence.exists()
    return rec | limits.columns(record, rec) | {"evidence": evidence}


def download(tmp: Path, prefix: str, names: list[str], transfers: int, tag: str) -> dict:
    """One measured download of ``names`` from ``s3t:bkt/prefix`` at ``transfers`` objects
    at once into a fresh directory: its record with its verdict's columns."""
    work = tmp / "work" / tag
    work.mkdir(parents=True)
    job = CopyJob(
        direction="download",
        strategy="plain",
        src=f"s3t:bkt/{prefix}",
        dst=str(work / "data"),
        objects=tuple(names),
        expected_bytes=FILE * len(names),
        object_bytes=FILE,
        threads=transfers,
        remote_url="s3t:bkt",
        log_path=work / "copy.log",
        workdir=work,
    )
    return _measured(job, work, {**IDENTITY, "setting": tag, "direction": "download"}, tag)


def _route(rows: list[dict], scaling: limits.Scaling | None = None) -> limits.Verdict:
    return limits.route_verdict(
        [limits.Verdict(r["limit"], r["limit_evidence"] or "") for r in rows], scaling
    )


def _median(rows: list[dict]) -> float:
    rates = sorted(r["mb_per_s"] for r in rows)
    return rates[len(rates) // 2]


def _named(rows: list[dict], limit: str) -> int:
    return sum(r["limit"] == limit for r in rows)


def _said(rows: list[dict]) -> str:
    return "\n".join(f"{r['mb_per_s']:.2f} MB/s {r['limit']}: {r['limit_evidence']}" for r in rows)


@pytest.fixture
def store(tmp_path, monkeypatch) -> Iterator:
    store = VERSITYGW if VERSITYGW in built_stores() else built_stores()[0]
    with serve_s3(find_rclone(), tmp_path / "srv", key=KEY, secret=SECRET, store=store) as srv:
        (srv.root / "bkt").mkdir()
        for name, value in srv.client_env().items():
            monkeypatch.setenv(name, value)
        yield srv


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
    names = _dataset(src, 4)
    with shaping_proxy(store.port, 1e6, 100e6) as link:
        monkeypatch.setenv("RCLONE_CONFIG_S3T_ENDPOINT", f"http://127.0.0.1:{link.port}")
        rows = [upload(tmp_path, src, names, 4, f"pc{k}") for k in range(REPEATS)]
        two = [upload(tmp_path, src, names, 2, f"pc2-{k}") for k in range(3)]
        down = [download(tmp_path, "pc0", names, 4, f"pcd{k}") for k in range(3)]
        down_two = [download(tmp_path, "pc0", names, 2, f"pcd2-{k}") for k in range(3)]
    assert _named(rows, limits.PER_CONNECTION) >= ENOUGH, _said(rows)
    scaling = limits.scaling_of([(2, _median(two)), (4, _median(rows))], 4)
    assert scaling is not None and scaling.gain >= limits.SCALES, scaling
    assert _route(rows, scaling).limit == limits.PER_CONNECTION
    assert _route(rows).limit == limits.PER_CONNECTION  # the measurements alone say it too
    # downloads: the receiver sees no drop, so no shared link; the scaling names the path
    assert _named(down + down_two, limits.SHARED) == 0, _said(down + down_two)
    scaling = limits.scaling_of([(2, _median(down_two)), (4, _median(down))], 4)
    assert scaling is not None and _route(down, scaling).limit == limits.PER_CONNECTION


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
    names = _dataset(src, 4)
    with shaped_namespace("32mbit", tmp_path) as (addr, port):
        for name, value in {
            "TYPE": "s3", "PROVIDER": "Other", "ENDPOINT": f"http://{addr}:{port}",
            "ACCESS_KEY_ID": KEY, "SECRET_ACCESS_KEY": SECRET, "FORCE_PATH_STYLE": "true",
        }.items():  # fmt: skip
            monkeypatch.setenv(f"RCLONE_CONFIG_S3T_{name}", value)
        rows = [upload(tmp_path, src, names, 4, f"sh{k}") for k in range(REPEATS)]
        two = [upload(tmp_path, src, names, 2, f"sh2-{k}") for k in range(3)]
    assert _named(rows, limits.SHARED) >= ENOUGH, _said(rows)
    scaling = limits.scaling_of([(2, _median(two)), (4, _median(rows))], 4)
    assert scaling is not None and scaling.gain <= limits.FLAT, scaling
    assert _route(rows, scaling).limit == limits.SHARED
    assert _route(rows).limit == limits.SHARED


@pytest.mark.full
@pytest.mark.slow
@needs_versitygw
def test_a_shared_cap_on_downloads_is_named_shared(tmp_path, monkeypatch):
    """The same tbf cap on the store's side, so downloads cross it (uploads do not): each
    download is named shared link from the receiver's side (packets out of order: drops
    where the queue overflowed), and the route by its scaling too."""
    src = tmp_path / "src"
    names = _dataset(src, 4)
    with shaped_namespace("32mbit", tmp_path, "download") as (addr, port):
        for name, value in {
            "TYPE": "s3", "PROVIDER": "Other", "ENDPOINT": f"http://{addr}:{port}",
            "ACCESS_KEY_ID": KEY, "SECRET_ACCESS_KEY": SECRET, "FORCE_PATH_STYLE": "true",
        }.items():  # fmt: skip
            monkeypatch.setenv(f"RCLONE_CONFIG_S3T_{name}", value)
        upload(tmp_path, src, names, 4, "data")  # the copy to read, across the unshaped way
        rows = [download(tmp_path, "data", names, 4, f"dl{k}") for k in range(REPEATS)]
        two = [download(tmp_path, "data", names, 2, f"dl2-{k}") for k in range(3)]
    assert _named(rows, limits.SHARED) >= ENOUGH, _said(rows)
    scaling = limits.scaling_of([(2, _median(two)), (4, _median(rows))], 4)
    assert scaling is not None and scaling.gain <= limits.FLAT, scaling
    assert _route(rows, scaling).limit == limits.SHARED
    assert _route(rows).limit == limits.SHARED


# --- a client held to a fraction of a core --------------------------------------------------


@contextlib.contextmanager
def in_cgroup(controller: str, settings: dict[str, str], tmp: Path) -> Iterator[Path]:
    """A cgroup v1 of ``controller`` with ``settings`` (file: value), and an rclone wrapper
    that joins it before it becomes rclone (exec: the same process, so the copy's pid is
    rclone's)."""
    root = Path("/sys/fs/cgroup") / controller
    group = root / f"cloudbench-limits-{os.getpid()}"
    group.mkdir()
    try:
        for name, value in settings.items():
            (group / name).write_text(value)
        wrapper = tmp / f"bin-{controller}" / "rclone"
        wrapper.parent.mkdir()
        wrapper.write_text(f'#!/bin/sh\necho $$ > {group}/tasks\nexec {find_rclone()} "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
        yield wrapper
    finally:
        for pid in (group / "tasks").read_text().split():  # none left, but never strand one
            with contextlib.suppress(OSError):
                (root / "tasks").write_text(pid)
        group.rmdir()


def cpu_quota(cores: float, tmp: Path) -> contextlib.AbstractContextManager[Path]:
    """A CPU quota of ``cores`` for the rclone of the wrapper it yields."""
    return in_cgroup("cpu", {"cpu.cfs_quota_us": str(int(cores * 100_000))}, tmp)


@pytest.mark.full
@pytest.mark.slow
@needs_cpu_quota
def test_a_client_held_to_a_fraction_of_a_core_is_named_cpu(store, tmp_path, monkeypatch):
    """rclone in a cgroup allowed 5% of a core: each copy is named client CPU with the
    quota as its cores, and so is the route."""
    src = tmp_path / "src"
    names = _dataset(src, 4)
    quota = 0.05
    with cpu_quota(quota, tmp_path) as wrapper:
        monkeypatch.setenv("CLOUDBENCH_RCLONE", str(wrapper))
        rows = [upload(tmp_path, src, names, 4, f"cpu{k}") for k in range(REPEATS)]
    assert _named(rows, limits.CPU) >= ENOUGH, _said(rows)
    assert all(
        f"of {quota:g} core" in r["limit_evidence"] for r in rows if r["limit"] == limits.CPU
    )
    assert _route(rows).limit == limits.CPU


# --- a slow scratch ---------------------------------------------------------------------------


@contextlib.contextmanager
def slow_scratch(tmp: Path, bytes_per_s: int) -> Iterator[tuple[Path, Path]]:
    """A scratch filesystem (ext4 on a loop device) whose reads a cgroup v1 blkio throttle
    holds to ``bytes_per_s`` for the rclone of the wrapper: (its mount point, the wrapper)."""
    image, mount = tmp / "scratch.img", tmp / "scratch"
    mount.mkdir()
    with open(image, "wb") as fh:
        fh.truncate(64 * 2**20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    device = subprocess.run(
        ["losetup", "--find", "--show", str(image)], check=True, capture_output=True, text=True
    ).stdout.strip()
    mounted = False
    try:
        subprocess.run(["mount", device, str(mount)], check=True, capture_output=True)
        mounted = True
        major_minor = Path(f"/sys/class/block/{Path(device).name}/dev").read_text().strip()
        throttle = {"blkio.throttle.read_bps_device": f"{major_minor} {bytes_per_s}"}
        with in_cgroup("blkio", throttle, tmp) as wrapper:
            yield mount, wrapper
    finally:
        if mounted:
            subprocess.run(["umount", str(mount)], capture_output=True)
        subprocess.run(["losetup", "-d", device], capture_output=True)


def out_of_page_cache(folder: Path) -> None:
    """Each file's pages dropped (clean, so the kernel may): its next read is the disk's."""
    for path in folder.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


@pytest.mark.full
@pytest.mark.slow
@needs_blkio
def test_a_copy_read_from_a_slow_scratch_is_named_disk(store, tmp_path, monkeypatch):
    """Its files on a scratch whose reads are held to 4 MB/s, out of the page cache before
    each upload: each copy is named disk, with the storage it read, and so is the route."""
    with slow_scratch(tmp_path, 4_000_000) as (scratch, wrapper):
        src = scratch / "src"
        names = _dataset(src, 4)
        os.sync()
        monkeypatch.setenv("CLOUDBENCH_RCLONE", str(wrapper))
        rows = []
        for k in range(REPEATS):
            out_of_page_cache(src)
            rows.append(upload(tmp_path, src, names, 4, f"disk{k}"))
    assert _named(rows, limits.DISK) >= ENOUGH, _said(rows)
    assert all(
        "read from storage" in r["limit_evidence"] for r in rows if r["limit"] == limits.DISK
    )
    assert _route(rows).limit == limits.DISK


# --- a store that throttles -------------------------------------------------------------------


@pytest.mark.full
@pytest.mark.slow
def test_a_store_answering_503_is_named_the_store(store, tmp_path, monkeypatch):
    """Every second PUT answered 503 SlowDown: each copy is named store, and the route.

    Each refusal comes FIRST_S late: 8 files of one PUT each at 4 at once, every second
    refused, keep the copy going at least 2 x FIRST_S, past the sampler's first look, at any
    machine speed (answered at once, a copy took 0.46 s on a fast day and was not sampled)."""
    from tests.infra.throttle import throttling_proxy

    src = tmp_path / "src"
    names = _dataset(src, 8, 8 * 2**20)  # one PUT each: under rclone's multipart cutoff
    with throttling_proxy(
        store.port, every=2, limit=10**6, within="/bkt/", answer_after_s=evidence.FIRST_S
    ) as throttle:
        monkeypatch.setenv("RCLONE_CONFIG_S3T_ENDPOINT", f"http://127.0.0.1:{throttle.port}")
        rows = [upload(tmp_path, src, names, 4, f"th{k}") for k in range(REPEATS)]
    assert throttle.refused
    assert _named(rows, limits.STORE) >= ENOUGH, _said(rows)
    assert _route(rows).limit == limits.STORE


# --- nothing in the way -----------------------------------------------------------------------


@pytest.mark.full
@pytest.mark.slow
def test_unshaped_loopback_names_only_what_its_evidence_shows(store, tmp_path):
    """No cap, no quota, no throttling: no copy is named for a limit that was not there
    (shared link, throttling, the sender's buffer); client CPU only where its own figure
    reached the threshold; and every verdict carries its figures."""
    src = tmp_path / "src"
    names = _dataset(src, 4, 16 * 2**20)
    rows = [upload(tmp_path, src, names, 4, f"free{k}") for k in range(REPEATS)]
    for r in rows:
        assert r["limit"] not in (limits.SHARED, limits.STORE, limits.SENDER_BUFFER), _said(rows)
        assert r["limit_evidence"], r
        if r["limit"] == limits.CPU:  # its own figure, read again from the file
            doc = evidence.read(r["evidence"])
            last = doc["samples"][-1]
            assert last["cpu_s"] / last["t"] / doc["cores"] >= limits.CPU_FULL
