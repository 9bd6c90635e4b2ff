"""The answer as a command (cloudbench.measure.suggest): the lines a user types to move their
own data the way a measured setting did. The setting's flags are the measured command's,
none of cloudbench's instrumentation is, no credential's value ever is; and the printed
lines, run as printed against a real S3 server, move the data intact both ways."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from cloudbench.campaign.clients import REGISTRY
from cloudbench.campaign.model import MULTI_STREAM_STRATEGIES, STRATEGIES
from cloudbench.campaign.secrets import REDACTED
from cloudbench.data.chunking import chunk_index_width, chunk_name
from cloudbench.measure import clients
from cloudbench.measure import rclone as rc
from cloudbench.measure.clients.aws import aws_config_text
from cloudbench.measure.clients.base import ClientError, ToolCommand, shell_lines
from cloudbench.measure.clients.s3 import S3Access, endpoint_placeholder
from cloudbench.measure.clients.s3cmd import config_text
from cloudbench.measure.suggest import (
    LOCAL_DIR,
    WIDE_INDEX,
    UserCopy,
    join_line,
    split_line,
    user_lines,
)
from tests.infra.s3 import serve_s3

SECRET = "u5r-Fake-Secret-Value-8d2e"
KEY = "u5rkeyid0007"
ENDPOINT = "https://s3.example.org"
REMOTE = "mystore:bucket/prefix"
TEMPLATE = "uplink cp --parallelism {threads} {src} {dst}"
CUTOFF, PART = 2**28, 64 * 2**20
FLAGS = ("--fast-list", "--retries", "3")
# What cloudbench adds to a measured copy to read it back: none of it is the user's
INSTRUMENTATION = (
    "--log-file", "--stats", "--use-json-log", "--stats-log-level", "-v", "-vv",
    "--s3-sdk-log-mode", "--files-from", "--json", "run", "--rinclude-from", "--exclude",
    "--include",
)  # fmt: skip
COMBOS = [
    (tool, strategy, direction)
    for tool, info in REGISTRY.items()
    for strategy in STRATEGIES
    if info.multithread or strategy not in MULTI_STREAM_STRATEGIES
    for direction in ("upload", "download")
]


def _define_remote(monkeypatch: pytest.MonkeyPatch) -> None:
    """The remote ``mystore:`` in the environment, with keys, and the user's own AWS keys
    too: the lines may name the variables, never hold their values."""
    prefix = "RCLONE_CONFIG_MYSTORE_"
    for name, value in {
        "TYPE": "s3", "PROVIDER": "Other", "ENDPOINT": ENDPOINT, "REGION": "eu-west-2",
        "ACCESS_KEY_ID": KEY, "SECRET_ACCESS_KEY": SECRET, "FORCE_PATH_STYLE": "true",
    }.items():  # fmt: skip
        monkeypatch.setenv(prefix + name, value)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)


def _spec(tool: str, strategy: str, direction: str, **over) -> UserCopy:
    base = dict(
        tool=tool, direction=direction, strategy=strategy, concurrency=7, remote=REMOTE,
        chunk_bytes=PART if strategy == "chunked" else 0, flags=FLAGS,
        multi_thread_cutoff=CUTOFF, multi_thread_chunk_size=PART, backend="s3",
        template=TEMPLATE if clients.info_of(tool).needs_template else None,
    )  # fmt: skip
    return UserCopy(**{**base, **over})


def _copy_line(lines: list[str]) -> str:
    """The copy itself: the last line that is not a comment or cloudbench's shell steps
    (a config file written, a directory made, a split or a join)."""
    steps = ("#", "printf ", "mkdir ", "for ")
    return [line for line in lines if not line.startswith(steps)][-1]


def _unset(lines: list[str]) -> list[str]:
    """The variables the copy line unsets in front of it (``env -u NAME ...``)."""
    words = shlex.split(_copy_line(lines))
    if not words or words[0] != "env":
        return []
    names = []
    while len(words) > 2 and words[1] == "-u":
        names.append(words[2])
        del words[1:3]
    return names


def _front(lines: list[str]) -> list[str]:
    """The copy line's words less ``env -u NAME ...`` in front of it."""
    words = shlex.split(_copy_line(lines))
    return words[1 + 2 * len(_unset(lines)) :] if words and words[0] == "env" else words


def _copy_argv(lines: list[str]) -> list[str]:
    """The copy's own words, less the variables in front of it."""
    words = _front(lines)
    while words and "=" in words[0] and not words[0].startswith("-"):
        words.pop(0)
    return words


def _env_of(lines: list[str]) -> dict[str, str]:
    words = _front(lines)
    return dict(w.split("=", 1) for w in words[: words.index(_copy_argv(lines)[0])])


def _written(lines: list[str]) -> dict[str, str]:
    """The files the printf lines write, by name, with their text."""
    out = {}
    for line in lines:
        if line.startswith("printf "):
            words = shlex.split(line)
            assert words[1] == "%s\\n" and words[-2] == ">"
            out[words[-1]] = "".join(w + "\n" for w in words[2:-2])
    return out


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


# --- the lines, for every tool x strategy x direction --------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(("tool", "strategy", "direction"), COMBOS)
def test_the_lines_carry_the_setting_and_nothing_of_cloudbenchs_or_the_secrets(
    tool, strategy, direction, monkeypatch
):
    _define_remote(monkeypatch)
    lines = user_lines(_spec(tool, strategy, direction))
    text = "\n".join(lines)
    # none to redact either: the clients put none in (user_lines would redact one)
    assert SECRET not in text and KEY not in text and REDACTED not in text
    assert ("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in text) == REGISTRY[tool].s3_only
    argv = _copy_argv(lines)
    assert argv[0] == (TEMPLATE.split()[0] if REGISTRY[tool].needs_template else tool)
    assert not [w for w in argv if w in INSTRUMENTATION], argv
    assert lines[0].startswith(f"# cloudbench: {tool}-1x7, ")
    for line in lines:
        shlex.split(line, comments=True)  # each one is whole: no quote left open
    chunked = strategy == "chunked"
    here = f"{LOCAL_DIR}.chunks" if chunked else LOCAL_DIR
    assert {here, f"{here}/", f"{here}/*"} & set(argv)  # the whole directory, no list
    if direction == "upload":
        assert any(line.startswith("for f in ") for line in lines) == chunked
        assert ("split -b 67108864 -d -a 6 --" in text) == chunked
    else:
        assert (_copy_line(lines) == lines[-2]) == chunked  # the join comes after it
        assert lines[-1].startswith("mkdir -p '<your-directory>' && for d in ") == chunked
        assert shlex.join(["mkdir", "-p", here]) in lines


@pytest.mark.unit
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("direction", ["upload", "download"])
def test_rclones_line_is_the_measured_command_less_its_instrumentation(
    strategy, direction, tmp_path
):
    lines = user_lines(_spec("rclone", strategy, direction))
    here = f"{LOCAL_DIR}.chunks" if strategy == "chunked" else LOCAL_DIR
    src, dst = (here, REMOTE) if direction == "upload" else (REMOTE, here)
    conc = rc.concurrency(
        strategy, 7, objects=3, object_bytes=2**30, cutoff=CUTOFF, part_bytes=PART,
        backend="s3", direction=direction,
    )  # fmt: skip
    log = tmp_path / "r1.log"
    measured = rc.copy_command(
        "/opt/x/bin/rclone", src, dst, conc=conc, log_file=log, multi_thread_cutoff=CUTOFF,
        extra_flags=(*FLAGS, "--files-from", str(tmp_path / "objects")),
    )  # fmt: skip
    cloudbenchs = {
        "--log-file", str(log), *rc.JSON_LOG_FLAGS, *rc.RESPONSE_LOG_FLAGS["s3"],
        "--files-from", str(tmp_path / "objects"),
    }  # fmt: skip
    assert _copy_argv(lines) == ["rclone", *[w for w in measured[1:] if w not in cloudbenchs]]
    argv = _copy_argv(lines)
    multi = strategy == "multithread"
    assert _value(argv, "--transfers") == ("1" if multi else "7")
    assert _value(argv, "--multi-thread-streams") == ("7" if multi else "1")
    assert ("--multi-thread-cutoff" in argv) == multi
    if multi:
        assert _value(argv, "--multi-thread-chunk-size") == str(PART)
    if direction == "upload":  # the backend's upload concurrency pinned as measured
        assert _value(argv, "--s3-upload-concurrency") == ("7" if multi else "1")
    else:
        assert "--s3-upload-concurrency" not in argv
    assert argv[-3:] == list(FLAGS)
    assert any("RCLONE_CONFIG_MYSTORE_* variables" in line for line in lines)


@pytest.mark.unit
@pytest.mark.parametrize("direction", ["upload", "download"])
def test_s5cmd_aws_and_s3cmd_carry_their_own_settings(direction, monkeypatch):
    _define_remote(monkeypatch)
    access = S3Access("mystore", ENDPOINT, "eu-west-2", path_style=True)
    s5 = _copy_argv(user_lines(_spec("s5cmd", "plain", direction, concurrency=12)))
    assert _value(s5, "--numworkers") == "12" and _value(s5, "--concurrency") == "1"
    assert _value(s5, "--endpoint-url") == ENDPOINT and "--json" not in s5
    assert s5[-2:] == (
        [f"{LOCAL_DIR}/*", "s3://bucket/prefix/"]
        if direction == "upload"
        else ["s3://bucket/prefix/*", f"{LOCAL_DIR}/"]
    )

    aws = user_lines(_spec("aws", "plain", direction, concurrency=12))
    assert _written(aws) == {"aws.config": aws_config_text(access, 12)}
    assert "    max_concurrent_requests = 12" in aws_config_text(access, 12).splitlines()
    assert _env_of(aws)["AWS_CONFIG_FILE"] == "aws.config"
    assert _env_of(aws)["AWS_REGION"] == "eu-west-2"
    # a profile in the user's shell is not read (the measured copy did not see one either)
    for lines in (aws, user_lines(_spec("s5cmd", "plain", direction))):
        assert {"AWS_PROFILE", "AWS_DEFAULT_PROFILE"} <= set(_unset(lines)), lines
    assert _value(_copy_argv(aws), "--endpoint-url") == ENDPOINT

    s3cmd = user_lines(_spec("s3cmd", "plain", direction, concurrency=1, config_dir="/etc/me"))
    assert _written(s3cmd) == {"/etc/me/s3cmd.cfg": config_text(access)}
    assert _value(_copy_argv(s3cmd), "--config") == "/etc/me/s3cmd.cfg"

    template = _copy_argv(user_lines(_spec("command", "plain", direction, concurrency=5)))
    assert template[:3] == ["uplink", "cp", "--parallelism"] and template[3] == "5"


@pytest.mark.unit
def test_chunk_names_are_cloudbenchs_when_the_files_size_is_given():
    spec = _spec("rclone", "chunked", "upload", chunk_bytes=2**20, file_bytes=2**34)
    width = chunk_index_width(2**34, 2**20)
    assert width == 5 and WIDE_INDEX > width
    split = next(line for line in user_lines(spec) if line.startswith("for f in "))
    assert f"split -b 1048576 -d -a {width} --" in split
    assert """'<your-directory>.chunks'/"$n"/"$n".""" in split  # <file>/<file>.<index>


@pytest.mark.unit
def test_several_clients_are_a_note_and_a_chunk_dir_may_be_given():
    spec = _spec("rclone", "chunked", "download", clients=4, chunk_dir="/scratch/my chunks")
    lines = user_lines(spec)
    assert lines[1].startswith("# the setting ran 4 clients at once") and "share" in lines[1]
    assert lines[-1] == (
        "mkdir -p '<your-directory>' && for d in '/scratch/my chunks'/*/; do "
        'n=$(basename "$d"); cat "$d$n".* > \'<your-directory>\'/"$n" || break; done'
    )
    assert _copy_argv(lines)[2:4] == [REMOTE, "/scratch/my chunks"]


@pytest.mark.unit
def test_a_remote_not_defined_here_gets_a_marked_placeholder(monkeypatch):
    _define_remote(monkeypatch)
    spec = _spec("aws", "plain", "upload", remote="elsewhere:bkt/x")
    lines = user_lines(spec)
    assert any("the rclone remote elsewhere is not defined here" in line for line in lines)
    assert _value(_copy_argv(lines), "--endpoint-url") == "https://<elsewhere-endpoint>"
    assert endpoint_placeholder("elsewhere") == "https://<elsewhere-endpoint>"
    assert "host_base = <elsewhere-endpoint>" in "\n".join(
        user_lines(_spec("s3cmd", "plain", "upload", remote="elsewhere:bkt/x"))
    )
    rclone = user_lines(_spec("rclone", "plain", "upload", backend="unknown"))
    assert "--s3-upload-concurrency" not in _copy_argv(rclone)
    assert "(on S3: --s3-upload-concurrency 1 --s3-chunk-size 67108864)" in rclone[2]


@pytest.mark.unit
def test_a_remote_of_another_type_and_an_impossible_setting_are_refused(monkeypatch):
    monkeypatch.setenv("RCLONE_CONFIG_BEE_TYPE", "b2")
    with pytest.raises(ClientError, match="only S3 remotes can use s5cmd"):
        user_lines(_spec("s5cmd", "plain", "upload", remote="bee:bkt"))
    with pytest.raises(ValueError, match="s5cmd cannot split one file"):
        user_lines(_spec("s5cmd", "multithread", "upload"))
    with pytest.raises(ValueError, match="chunked needs chunk_bytes"):
        user_lines(_spec("rclone", "chunked", "upload", chunk_bytes=0))


@pytest.mark.unit
def test_a_credential_in_a_commands_variables_is_never_printed():
    cmd = ToolCommand(
        "s5cmd", ["s5cmd", "ls"], {"AWS_REGION": "x", "AWS_SECRET_ACCESS_KEY": SECRET}
    )
    assert shell_lines(cmd) == ["AWS_REGION=x s5cmd ls"]


# --- the printed lines, run as printed --------------------------------------------------


FILES = {"a.bin": 3 * 2**20 + 17, "b c.bin": 2**20}  # a remainder chunk; a space
CHUNK = 2**20


def _binaries_on_path() -> tuple[str, list[str]]:
    """A PATH where each client's plain name finds the binary cloudbench uses, and the
    clients found (aws and s3cmd may not be installed)."""
    dirs, found = [], []
    for tool in ("rclone", "s5cmd", "aws", "s3cmd"):
        client = clients.load(tool)
        try:
            binary = client.find() if hasattr(client, "find") else rc.find_rclone()
        except (ClientError, rc.RcloneError):
            continue
        link = Path(binary)
        if link.name != tool:
            continue
        dirs.append(str(link.parent))
        found.append(tool)
    return os.pathsep.join([*dict.fromkeys(dirs), os.environ.get("PATH", "")]), found


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """rclone serve s3 on 127.0.0.1, its remote ``s3t:`` in the environment, and the user's
    AWS keys (what the printed lines tell a user to set)."""
    root = tmp_path_factory.mktemp("usercmd")
    with serve_s3(rc.find_rclone(), root / "srv", key=KEY, secret=SECRET) as srv:
        (srv.root / "bkt").mkdir()
        with pytest.MonkeyPatch.context() as mp:
            for name, value in srv.client_env().items():
                mp.setenv(name, value)
            yield srv


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("usercmd-data")
    for name, size in FILES.items():
        (root / name).write_bytes(os.urandom(size))
    return root


def _run(lines: list[str], local: Path, cwd: Path, path: str) -> subprocess.CompletedProcess:
    """The lines as a user pastes them into bash, the placeholder replaced by ``local``."""
    script = "\n".join(line.replace(LOCAL_DIR, str(local)) for line in lines)
    env = dict(os.environ) | {
        "PATH": path,
        "AWS_ACCESS_KEY_ID": KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET,
    }
    # a profile of the user's own, which the measured copies did not read either: the AWS
    # CLI would look for it in the config file the lines write, and stop
    env |= {"AWS_PROFILE": "someone-elses", "AWS_DEFAULT_PROFILE": "someone-elses"}
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        ["bash", "-e", "-c", script], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


ROUND_TRIPS = [
    ("rclone", "plain"), ("rclone", "chunked"), ("rclone", "multithread"),
    ("s5cmd", "plain"), ("s5cmd", "chunked"), ("aws", "plain"), ("aws", "chunked"),
    ("s3cmd", "plain"), ("s3cmd", "chunked"),
]  # fmt: skip


@pytest.mark.quick
@pytest.mark.parametrize(("tool", "strategy"), ROUND_TRIPS)
def test_the_printed_lines_move_the_data_intact_both_ways(tool, strategy, store, dataset, tmp_path):
    path, found = _binaries_on_path()
    if tool not in found:
        pytest.skip(f"{tool} is not installed here")
    chunked = strategy == "chunked"
    prefix = f"{tool}-{strategy}"
    spec = dict(
        tool=tool, strategy=strategy, concurrency=3, remote=f"s3t:bkt/{prefix}",
        chunk_bytes=CHUNK if chunked else 0, file_bytes=max(FILES.values()),
        multi_thread_cutoff=2**20, multi_thread_chunk_size=2**20,
    )  # fmt: skip
    up = user_lines(UserCopy(direction="upload", **spec))
    assert not any(SECRET in line or KEY in line or REDACTED in line for line in up)
    local = tmp_path / "my data"  # a space: the quoting holds
    local.mkdir()
    for name in FILES:
        (local / name).write_bytes((dataset / name).read_bytes())
    done = _run(up, local, tmp_path / "up", path)
    assert done.returncode == 0, done.stderr
    stored = store.root / "bkt" / prefix
    for name, size in FILES.items():
        if chunked:  # cloudbench's own chunk objects: <file>/<file>.<index>
            width = chunk_index_width(max(FILES.values()), CHUNK)
            count = -(-size // CHUNK)
            names = sorted(p.name for p in (stored / name).iterdir())
            assert names == [chunk_name(name, i, width) for i in range(count)]
            joined = b"".join((stored / name / n).read_bytes() for n in names)
            assert joined == (dataset / name).read_bytes(), name
        else:
            assert (stored / name).read_bytes() == (dataset / name).read_bytes(), name

    down = user_lines(UserCopy(direction="download", **spec))
    assert not any(SECRET in line or KEY in line or REDACTED in line for line in down)
    back = tmp_path / "back here"
    done = _run(down, back, tmp_path / "down", path)
    assert done.returncode == 0, done.stderr
    got = sorted(p.name for p in back.iterdir() if p.is_file())
    assert got == sorted(FILES)
    for name in FILES:
        assert (back / name).read_bytes() == (dataset / name).read_bytes(), name


@pytest.mark.quick
def test_the_split_and_join_lines_undo_each_other_and_keep_an_empty_file(tmp_path):
    """Run by bash alone: every file comes back byte for byte from its chunks, an empty
    one too (``split`` alone writes no chunk for it: it would be lost)."""
    local, chunks, back = tmp_path / "in dir", tmp_path / "chunks", tmp_path / "out"
    local.mkdir()
    sizes = {"a.bin": 2500, "b.bin": 1000, "empty.bin": 0, "one.bin": 1}
    for name, size in sizes.items():
        (local / name).write_bytes(os.urandom(size))
    (local / "sub").mkdir()  # a directory is not a file to split
    width = chunk_index_width(max(sizes.values()), 1000)
    script = [split_line(str(local), str(chunks), 1000, width), join_line(str(chunks), str(back))]
    done = subprocess.run(["bash", "-e", "-c", "\n".join(script)], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in chunks.iterdir()) == sorted(sizes)
    assert sorted(p.name for p in (chunks / "a.bin").iterdir()) == [
        chunk_name("a.bin", i, width) for i in range(3)
    ]
    assert [p.name for p in (chunks / "empty.bin").iterdir()] == [chunk_name("empty.bin", 0, 4)]
    assert sorted(p.name for p in back.iterdir()) == sorted(sizes)
    for name in sizes:
        assert (back / name).read_bytes() == (local / name).read_bytes(), name
