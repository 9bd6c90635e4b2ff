"""Tests for profiles/tesseract/pbs-{submit,status}.py and pbs-cancel.sh.

Unit tests use ``qstat -f`` output captured from Slurm's torque wrapper
(slurm-wlm-torque 22.05) on the test cluster, plus hand-written PBS Pro /
Torque style records (marked as such) for what the wrapper never prints
(Exit_status, F/X/B states, array ids, wrapped lines).  Integration tests
(marker ``scheduler``) run the scripts against the test Slurm cluster through
the wrapper's qsub/qstat/qdel.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.infra import fixtures
from tests.infra.slurm import SlurmCluster
from tests.infra.workflow import wait_for

slurm_cluster = fixtures.slurm_cluster  # the session fixture, visible to this module

PROFILE = Path(__file__).resolve().parents[1] / "profiles" / "tesseract"
SUBMIT = PROFILE / "pbs-submit.py"
STATUS = PROFILE / "pbs-status.py"
CANCEL = PROFILE / "pbs-cancel.sh"

needs_torque = pytest.mark.skipif(
    shutil.which("qsub") is None,
    reason="slurm-wlm-torque not installed: run `make sysdeps` (apt-get)",
)


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    return module


submit = load(SUBMIT)
status = load(STATUS)

# --- captured from `qstat -f ID` of slurm-wlm-torque on the test cluster ------
QSTAT_RUNNING = (
    "Job Id:\t10\n\tJob_Name = capture_run\n\tJob_Owner = root@localhost\n"
    "\tjob_state = R\n\tqueue = debug\n\tqtime = Sat Nov 21 03:59:05 2026\n"
    "\tmtime = Sat Nov 21 03:59:06 2026\n\tctime = Sat Nov 21 04:04:06 2026\n"
    "\texec_host = vm/1\n\tPriority = 4294901753\n\teuser = root(0)\n"
    "\tegroup = root(0)\n\tResource_List.walltime = 00:05:00\n"
    "\tResource_List.nodect = 1\n\tResource_List.ncpus = 1\n\n"
)
# the same job after qdel: C, and no exit status at all (the wrapper never has one)
QSTAT_CANCELLED = (
    "Job Id:\t10\n\tJob_Name = capture_run\n\tJob_Owner = root@localhost\n"
    "\tjob_state = C\n\tqueue = debug\n\tqtime = Sat Nov 21 03:59:05 2026\n"
    "\tmtime = Sat Nov 21 03:59:06 2026\n\tctime = Sat Nov 21 03:59:07 2026\n"
    "\texec_host = vm/1\n\tPriority = 4294901753\n\teuser = root(0)\n"
    "\tegroup = root(0)\n\tResource_List.walltime = 00:05:00\n"
    "\tResource_List.nodect = 1\n\tResource_List.ncpus = 1\n\n"
)
# `qstat -f` (all jobs): held job shows Q, an array's pending rest keeps the
# array id (11) while running tasks get new ids (12); Account_Name from -A.
QSTAT_ALL = (
    "Job Id:\t4\n\tJob_Name = acc\n\tJob_Owner = root@localhost\n\tjob_state = Q\n"
    "\tqueue = debug\n\tqtime = Sat Nov 21 03:57:38 2026\n\tAccount_Name = someacct\n"
    "\tPriority = 4294901757\n\teuser = root(0)\n\tegroup = root(0)\n"
    "\tResource_List.walltime = 71582788:15:00\n\tResource_List.nodect = 1\n"
    "\tResource_List.ncpus = 1\n\n"
    "Job Id:\t2\n\tJob_Name = held\n\tJob_Owner = root@localhost\n\tjob_state = Q\n"
    "\tqueue = debug\n\tqtime = Sat Nov 21 03:57:38 2026\n\tPriority = 0\n"
    "\teuser = root(0)\n\tegroup = root(0)\n"
    "\tResource_List.walltime = 71582788:15:00\n\tResource_List.nodect = 1\n"
    "\tResource_List.ncpus = 1\n\n"
    "Job Id:\t12\n\tJob_Name = capture_arr\n\tJob_Owner = root@localhost\n"
    "\tjob_state = R\n\tqueue = debug\n\tqtime = Sat Nov 21 03:59:05 2026\n"
    "\tmtime = Sat Nov 21 03:59:06 2026\n\tctime = Sun Nov 21 03:59:06 2027\n"
    "\texec_host = vm/1\n\tPriority = 4294901752\n\teuser = root(0)\n"
    "\tegroup = root(0)\n\tResource_List.walltime = 71582788:15:00\n"
    "\tResource_List.nodect = 1\n\tResource_List.ncpus = 1\n\n"
    "Job Id:\t11\n\tJob_Name = capture_arr\n\tJob_Owner = root@localhost\n"
    "\tjob_state = Q\n\tqueue = debug\n\tqtime = Sat Nov 21 03:59:05 2026\n"
    "\tPriority = 4294901752\n\teuser = root(0)\n\tegroup = root(0)\n"
    "\tResource_List.walltime = 71582788:15:00\n\tResource_List.nodect = 1\n"
    "\tResource_List.ncpus = 1\n\n"
)

# --- hand-written in PBS Pro format (NOT captured: no PBS Pro here) ----------
PBSPRO_FINISHED = """\
Job Id: 4711.tesseract-pbs
    Job_Name = smk.align.3
    Job_Owner = user@login1
    resources_used.walltime = 00:00:07
    job_state = F
    queue = standard
    Exit_status = 0
    Variable_List = PBS_O_HOME=/home/user,PBS_O_LANG=en_GB.UTF-8,
\tPBS_O_LOGNAME=user,PBS_O_PATH=/usr/bin
    comment = Job run at Sat Nov 21 at 10:00 on (node1:ncpus=4) and finished

"""
PBSPRO_ARRAY = """\
Job Id: 4712[].tesseract-pbs
    Job_Name = smk.arr
    job_state = B
    array_state_count = Queued:1 Running:1 Exiting:0 Expired:1

Job Id: 4712[1].tesseract-pbs
    job_state = X
    Exit_status = 2

"""
TORQUE_COMPLETED = """\
Job Id: 99.torque-server
    Job_Name = smk.x.1
    job_state = C
    exit_status = 271

"""
# `qstat -x -f -F json` of PBS Pro / OpenPBS, hand-written from the format its Reference
# Guide documents (qstat, "-F json": {"timestamp", "pbs_version", "pbs_server", "Jobs":
# {id: {attribute: value, "Resource_List": {...}, "Variable_List": {...}}}}, numbers as
# JSON numbers). NOT captured: no PBS Pro runs here, and the torque wrappers over Slurm
# have neither -x nor -F json.
PBSPRO_JSON = """\
{
    "timestamp":1795683600,
    "pbs_version":"2022.1.3",
    "pbs_server":"tesseract-pbs",
    "Jobs":{
        "4711.tesseract-pbs":{
            "Job_Name":"smk.upload.3",
            "Job_Owner":"user@login1",
            "resources_used":{"cpupercent":90, "walltime":"00:00:07"},
            "job_state":"F",
            "queue":"standard",
            "server":"tesseract-pbs",
            "Resource_List":{"ncpus":24, "nodect":1, "select":"1:ncpus=24",
                "walltime":"12:00:00"},
            "Variable_List":{"PBS_O_HOME":"/home/user", "PBS_O_WORKDIR":"/home/user/run"},
            "comment":"Job run at Thu Nov 26 at 10:00 on (node1:ncpus=24) and finished",
            "Exit_status":0,
            "history_timestamp":1795683590
        },
        "4713.tesseract-pbs":{
            "Job_Name":"smk.download.4",
            "job_state":"F",
            "Exit_status":271,
            "comment":"Job run at Thu Nov 26 at 10:01 and terminated"
        },
        "4714.tesseract-pbs":{"Job_Name":"smk.download.5", "job_state":"R"},
        "4712[].tesseract-pbs":{"Job_Name":"smk.arr", "job_state":"B",
            "array_state_count":"Queued:1 Running:1 Exiting:0 Expired:1"},
        "4712[1].tesseract-pbs":{"job_state":"X", "Exit_status":2}
    }
}
"""


# ============================ pbs-status.py: parsing ==========================
@pytest.mark.unit
def test_parse_captured_running_record() -> None:
    (rec,) = status.parse_qstat_full(QSTAT_RUNNING)
    assert rec["Job Id"] == "10"
    assert rec["job_state"] == "R"
    assert rec["Job_Name"] == "capture_run"
    assert rec["Resource_List.walltime"] == "00:05:00"
    assert status.exit_status_of(rec) is None


@pytest.mark.unit
def test_parse_captured_multi_record_output() -> None:
    recs = status.parse_qstat_full(QSTAT_ALL)
    assert [r["Job Id"] for r in recs] == ["4", "2", "12", "11"]
    assert recs[0]["Account_Name"] == "someacct"
    assert status.find_record(recs, "12")["job_state"] == "R"
    assert status.find_record(recs, "1") is None  # no prefix matching


@pytest.mark.unit
def test_parse_wrapped_values_and_exit_status() -> None:
    (rec,) = status.parse_qstat_full(PBSPRO_FINISHED)
    assert rec["Variable_List"].endswith("PBS_O_LOGNAME=user,PBS_O_PATH=/usr/bin")
    assert status.exit_status_of(rec) == 0
    (torque,) = status.parse_qstat_full(TORQUE_COMPLETED)
    assert status.exit_status_of(torque) == 271


@pytest.mark.parametrize(
    ("jobid", "key"),
    [
        ("123", ("123", None)),
        ("123.tesseract-pbs", ("123", None)),
        ("123[4]", ("123", "4")),
        ("123[4].srv.example.org", ("123", "4")),
        ("123[]", ("123", "")),
        ("123[].srv", ("123", "")),
        (" 42\n", ("42", None)),
        ("weird-id", ("weird-id", None)),
    ],
)
@pytest.mark.unit
def test_job_key(jobid: str, key: tuple) -> None:
    assert status.job_key(jobid) == key


@pytest.mark.unit
def test_array_ids_match_exact_records() -> None:
    recs = status.parse_qstat_full(PBSPRO_ARRAY)
    assert status.find_record(recs, "4712[]")["job_state"] == "B"
    assert status.find_record(recs, "4712[1].tesseract-pbs")["job_state"] == "X"
    assert status.find_record(recs, "4712[2]") is None
    assert status.find_record(recs, "4712") is None
    # the torque wrapper greps ids as regexes: '123[4]' would match job 1234
    assert status.find_record([{"Job Id": "1234"}], "123[4]") is None


@pytest.mark.parametrize(
    ("jobid", "rc", "out", "err", "kind", "exit_status"),
    [
        ("10", 0, QSTAT_RUNNING, "", "running", None),
        ("10", 0, QSTAT_CANCELLED, "", "finished", None),
        ("2", 0, QSTAT_ALL, "", "running", None),
        ("4711.tesseract-pbs", 0, PBSPRO_FINISHED, "", "finished", 0),
        ("4712[]", 0, PBSPRO_ARRAY, "", "running", None),
        ("4712[1]", 0, PBSPRO_ARRAY, "", "finished", 2),
        ("99.torque-server", 0, TORQUE_COMPLETED, "", "finished", 271),
        # wrapper: unknown id -> rc 153, no output at all
        ("99999", 153, "", "", "gone", None),
        ("5", 35, "", "qstat: 5.srv Job has finished, use -x or -H", "gone", None),
        ("5", 1, "", "qstat: Unknown Job Id 5.srv", "gone", None),
        # an answer without the job is not its end: a server that forgot it says so
        ("5", 0, "", "", "error", None),
        ("5", 255, "", "Problem loading jobs.", "error", None),
        ("5", 2, "", "Connection refused", "error", None),
    ],
)
@pytest.mark.unit
def test_interpret_qstat(jobid, rc, out, err, kind, exit_status) -> None:
    verdict = status.interpret_qstat(jobid, rc, out, err)
    assert (verdict.kind, verdict.exit_status) == (kind, exit_status)


# ============================ pbs-status.py: decisions ========================
def write_record(jobs_dir: Path, jobid: str, exit_code: int | None) -> None:
    jobs_dir.mkdir(parents=True, exist_ok=True)
    exit_file = jobs_dir / f"tok-{jobid}.exit"
    if exit_code is not None:
        exit_file.write_text(f"{exit_code}\n")
    rec = {"jobid": jobid, "exit_file": str(exit_file), "stderr": "x.err"}
    rec |= {"submitted": time.time(), "walltime_s": 3600}  # a 1 h job, submitted just now
    status.record_path(jobs_dir, jobid).write_text(json.dumps(rec))


def scripted(*verdicts) -> Callable[[str], object]:
    seq = list(verdicts)
    return lambda _jobid: seq.pop(0)


V = status.QstatVerdict
ERR = V("error", reason="qstat rc=255 Problem loading jobs.")


@pytest.mark.parametrize(
    ("verdict", "exit_code", "expected"),
    [
        (V("running"), None, "running"),
        (V("finished", 0), None, "success"),
        (V("finished", 1), 0, "failed"),  # scheduler's word first
        (V("finished", None), 0, "success"),  # torque wrapper case
        (V("finished", None), 3, "failed"),
        (V("finished", None), None, "failed"),  # killed: no exit file
        (V("gone"), 0, "success"),
        (V("gone"), 1, "failed"),
        (V("gone"), None, "failed"),
        # qstat failing says nothing about the job: its exit record, else running
        (ERR, None, "running"),
        (ERR, 0, "success"),
        (ERR, 2, "failed"),
    ],
)
@pytest.mark.unit
def test_decide(tmp_path: Path, verdict, exit_code, expected) -> None:
    write_record(tmp_path, "77", exit_code)
    result, reason, _ = status.decide("77", tmp_path, query=scripted(verdict), grace_s=0)
    assert result == expected, reason


def write_submitted(
    jobs_dir: Path, jobid: str, submitted: float, walltime_s: int | None, started: float | None
) -> None:
    """A record as pbs-submit.py writes it, with the wrapper's start file if it started."""
    jobs_dir.mkdir(parents=True, exist_ok=True)
    exit_file = jobs_dir / f"tok-{jobid}.exit"
    start_file = exit_file.with_suffix(".start")
    if started is not None:
        start_file.write_text(f"{started:.0f}\n")
    rec = {"jobid": jobid, "exit_file": str(exit_file), "start_file": str(start_file),
           "submitted": submitted, "walltime_s": walltime_s, "stderr": "x.err"}  # fmt: skip
    status.record_path(jobs_dir, jobid).write_text(json.dumps(rec))


MARGIN = status.DEADLINE_MARGIN_S


@pytest.mark.parametrize(
    ("walltime_s", "started", "now", "expected"),
    [
        # a 1 h job submitted at t=1000, started at t=5000 (it queued for over an hour)
        (3600, 5000.0, 1000 + 3600 + MARGIN + 1, "running"),  # its walltime counts from start
        (3600, 5000.0, 5000 + 3600 + MARGIN - 1, "running"),
        (3600, 5000.0, 5000 + 3600 + MARGIN + 1, "failed"),  # PBS would have killed it
        # not started (or its start not seen yet): from its submission, the earlier bound
        (3600, None, 1000 + 3600 + MARGIN - 1, "running"),
        (3600, None, 1000 + 3600 + MARGIN + 1, "failed"),
        # no walltime asked: the queue's default, unknown, taken as UNKNOWN_WALLTIME_S
        (None, None, 1000 + status.UNKNOWN_WALLTIME_S + MARGIN - 1, "running"),
        (None, None, 1000 + status.UNKNOWN_WALLTIME_S + MARGIN + 1, "failed"),
    ],
)
@pytest.mark.unit
def test_decide_a_failing_qstat_is_running_until_the_deadline(
    tmp_path: Path, walltime_s, started, now, expected
) -> None:
    write_submitted(tmp_path, "80", 1000.0, walltime_s, started)
    result, reason, _ = status.decide("80", tmp_path, query=scripted(ERR), grace_s=0, now=now)
    assert result == expected, reason
    assert "Problem loading jobs" in reason  # the log says why


@pytest.mark.unit
def test_decide_exit_record_beats_the_deadline(tmp_path: Path) -> None:
    write_submitted(tmp_path, "81", 1000.0, 60, 1000.0)
    Path(status.submit_record(tmp_path, "81")["exit_file"]).write_text("0\n")
    far = 10**9
    assert status.decide("81", tmp_path, query=scripted(ERR), grace_s=0, now=far)[0] == "success"


@pytest.mark.unit
def test_decide_without_submit_record(tmp_path: Path) -> None:
    result, reason, _ = status.decide("78", tmp_path, query=scripted(V("gone")), grace_s=0)
    assert result == "failed"
    assert "no pbs-submit.py record" in reason


@pytest.mark.parametrize(
    ("jobid", "kind", "exit_status"),
    [
        ("4711.tesseract-pbs", "finished", 0),
        ("4711", "finished", 0),  # the server suffix is not needed
        ("4713.tesseract-pbs", "finished", 271),
        ("4714.tesseract-pbs", "running", None),
        ("4712[].tesseract-pbs", "running", None),  # B: an array with tasks left
        ("4712[1].tesseract-pbs", "finished", 2),
        ("4715.tesseract-pbs", "error", None),  # not in the answer: says nothing
    ],
)
@pytest.mark.unit
def test_interpret_qstat_json(jobid: str, kind: str, exit_status) -> None:
    verdict = status.interpret_qstat_json(jobid, 0, PBSPRO_JSON, "")
    assert (verdict.kind, verdict.exit_status) == (kind, exit_status)


@pytest.mark.unit
def test_interpret_qstat_json_failures() -> None:
    gone = status.interpret_qstat_json("9.srv", 153, "", "qstat: Unknown Job Id 9.srv")
    assert gone.kind == "gone"
    # some PBS versions print values unescaped: invalid JSON is an error, not a verdict
    broken = PBSPRO_JSON.replace('"/home/user"', '"/home/"user"')
    assert status.interpret_qstat_json("4711", 0, broken, "").kind == "error"
    assert status.interpret_qstat_json("4711", 0, '{"Jobs": []}', "").kind == "error"
    assert status.interpret_qstat_json("4711", 255, "", "Connection refused").kind == "error"


@pytest.mark.parametrize(
    ("rc", "output", "flavour"),
    [
        (0, "pbs_version = 2022.1.3\n", ("pbspro", True)),  # PBS Pro / OpenPBS
        (0, "Version: 6.1.3\n", ("text", True)),  # Torque
        # captured: Slurm's torque wrapper (slurm-wlm-torque 22.05) has no --version
        (2, "Unknown option: version\nUsage:\n    qstat [-f] [-a|-i|-r] ...\n", ("text", True)),
        # a call that failed otherwise proves nothing: asked again next time
        (1, "perl: fatal: Could not establish a configuration source\n", ("text", False)),
        (2, "pbs_version = 2022.1.3\n", ("text", False)),
    ],
)
@pytest.mark.unit
def test_flavour_of(rc: int, output: str, flavour: tuple[str, bool]) -> None:
    assert status.flavour_of(rc, output) == flavour


@pytest.mark.unit
def test_status_main_logs_reason_and_always_exits_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(status, "run_qstat", lambda jobid: ERR)
    write_submitted(tmp_path / "logs/pbs/jobs", "123[4].srv", time.time(), 3600, None)
    assert status.main(["123[4].srv"]) == 0
    assert capsys.readouterr().out == "running\n"
    log = (tmp_path / "logs/pbs/status.log").read_text()
    assert "123[4].srv running: qstat rc=255 Problem loading jobs." in log
    write_submitted(
        tmp_path / "logs/pbs/jobs", "5.srv", time.time() - 2 * 3600 - MARGIN, 3600, None
    )
    assert status.main(["5.srv"]) == 0
    assert capsys.readouterr().out == "failed\n"
    assert "5.srv failed: qstat rc=255" in (tmp_path / "logs/pbs/status.log").read_text()


@pytest.mark.unit
def test_status_main_internal_error_prints_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)

    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(status, "decide", boom)
    assert status.main(["1"]) == 0
    assert capsys.readouterr().out == "failed\n"
    assert "internal error" in (tmp_path / "logs/pbs/status.log").read_text()


# ============================ pbs-submit.py ===================================
SINGLE = {
    "type": "single",
    "rule": "align sample",
    "local": False,
    "threads": 4,
    "resources": {"mem_mb": 2000, "runtime": 90, "tmpdir": "/tmp"},
    "jobid": 3,
}


def jobscript(props: dict, body: str = "echo hi") -> str:
    return f"#!/bin/sh\n# properties = {json.dumps(props)}\n{body}\n"


@pytest.mark.unit
def test_read_properties_and_names() -> None:
    props = submit.read_properties(jobscript(SINGLE))
    assert props == SINGLE
    assert submit.job_name(props) == "smk.align_sample.3"
    group = {"type": "group", "groupid": "g1", "jobid": "f00-ba7", "threads": 2}
    assert submit.job_name(group) == "smk.group.g1"
    assert submit.read_properties("#!/bin/sh\necho no props\n") == {}
    assert submit.job_name({}) == "smk.job"


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        (SINGLE, "select=1:ncpus=4:mem=2000mb,walltime=01:30:00"),
        ({"threads": 1, "resources": {}}, "select=1:ncpus=1"),
        ({"resources": {"runtime": 2880}}, "select=1:ncpus=1,walltime=48:00:00"),
        ({"threads": 0, "resources": {"mem_mb": "<TBD>"}}, "select=1:ncpus=1"),
        # a measurement with 4 clients: a node (chunk of 24 cores) per client
        (
            {"threads": 24, "resources": {"tasks": 4, "mem_mb": 16000}},
            "select=4:ncpus=24:mem=16000mb,place=scatter",
        ),
    ],
)
@pytest.mark.unit
def test_resource_list(props: dict, expected: str) -> None:
    assert submit.resource_list(props) == expected


@pytest.mark.unit
def test_build_qsub_args_account_and_queue() -> None:
    args = submit.build_qsub_args(
        SINGLE,
        Path("/w/j.sh"),
        Path("/w/o"),
        Path("/w/e"),
        {"PBS_ACCOUNT": "dp123", "PBS_QUEUE": "standard"},
    )
    assert args[0] == "qsub" and args[-1] == "/w/j.sh"
    assert args[args.index("-A") + 1] == "dp123"
    assert args[args.index("-q") + 1] == "standard"
    assert args.count("-l") == 1  # the torque wrapper keeps only the last -l
    bare = submit.build_qsub_args(SINGLE, Path("j"), Path("o"), Path("e"), {})
    assert "-A" not in bare and "-q" not in bare
    with pytest.raises(submit.SubmitError):
        submit.build_qsub_args(
            SINGLE, Path("j"), Path("o"), Path("e"), {"PBS_ACCOUNT_REQUIRED": "1"}
        )


@pytest.mark.unit
def test_record_path_shared_by_submit_and_status(tmp_path: Path) -> None:
    for jobid in ("12", "12[3].srv", "12[].srv"):
        assert submit.record_path(tmp_path, jobid) == status.record_path(tmp_path, jobid)


def run_script(script: Path, *args: str, cwd: Path, env: dict | None = None, timeout=60):
    return subprocess.run(
        [str(script), *args],
        cwd=cwd,
        env=env or dict(os.environ),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.quick
def test_submit_requires_account_when_asked(tmp_path: Path) -> None:
    (tmp_path / "js.sh").write_text(jobscript(SINGLE))
    env = {k: v for k, v in os.environ.items() if k != "PBS_ACCOUNT"}
    env["PBS_ACCOUNT_REQUIRED"] = "1"
    proc = run_script(SUBMIT, str(tmp_path / "js.sh"), cwd=tmp_path, env=env)
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "PBS_ACCOUNT" in proc.stderr
    assert not (tmp_path / "logs").exists()


@pytest.mark.quick
def test_submit_dry_run_and_wrapper_records_exit_code(tmp_path: Path) -> None:
    (tmp_path / "js.sh").write_text(jobscript(SINGLE, "echo ran > ran.txt; exit 3"))
    env = dict(os.environ, PBS_SUBMIT_DRY_RUN="1", PBS_ACCOUNT="dp1")
    proc = run_script(SUBMIT, str(tmp_path / "js.sh"), cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    jobid = proc.stdout.splitlines()[0]
    assert "-A dp1" in proc.stderr and "select=1:ncpus=4:mem=2000mb" in proc.stderr
    rec = json.loads(status.record_path(tmp_path / "logs/pbs/jobs", jobid).read_text())
    assert rec["qsub"][-1] == rec["wrapper"]
    assert Path(rec["stdout"]).parent == tmp_path / "logs/pbs"
    # run the wrapper the way PBS would: elsewhere ($HOME), by path
    ran = subprocess.run([rec["wrapper"]], cwd=tmp_path, timeout=30)
    assert ran.returncode == 3
    assert Path(rec["exit_file"]).read_text().strip() == "3"
    assert rec["walltime_s"] == 90 * 60 and rec["submitted"] <= time.time()
    assert abs(float(Path(rec["start_file"]).read_text()) - time.time()) < 600  # an epoch


@needs_torque
@pytest.mark.scheduler
@pytest.mark.full
def test_qsub_wrapper_accepts_our_arguments(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """`qsub --sbatchline` shows the sbatch call (submits nothing; needs a slurm.conf)."""
    args = submit.build_qsub_args(
        SINGLE,
        tmp_path / "j.sh",
        tmp_path / "o",
        tmp_path / "e",
        {"PBS_ACCOUNT": "dp1", "PBS_QUEUE": "debug"},
    )
    proc = subprocess.run(
        [args[0], "--sbatchline", *args[1:]],
        capture_output=True,
        text=True,
        timeout=30,
        env=slurm_cluster.client_env(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = proc.stdout
    for part in (
        "--mincpus=4",
        "--mem=2000M",
        "-t90",
        "--account=dp1",
        "-p debug",
        "-J smk.align_sample.3",
        "--export=all",
    ):
        assert part in line, line


# ============================ pbs-cancel.sh ===================================
@pytest.mark.quick
def test_cancel_qdels_each_id_and_never_fails(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    (bin_dir / "qdel").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n[ "$1" != "gone" ]\n')
    (bin_dir / "qdel").chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    proc = run_script(CANCEL, "1", "gone", "3[]", cwd=tmp_path, env=env)
    assert proc.returncode == 0
    assert sorted(calls.read_text().split()) == ["1", "3[]", "gone"]
    log = (tmp_path / "logs/pbs/cancel.log").read_text()
    assert "qdel gone failed" in log and "qdel 1 " not in log


# ============================ integration (scheduler) =========================
def poll_status(
    cluster: SlurmCluster, jobid: str, cwd: Path, until: set[str], timeout: float = 90
) -> str:
    deadline = time.monotonic() + timeout
    seen = "<none>"
    while time.monotonic() < deadline:
        proc = run_script(STATUS, jobid, cwd=cwd, env=cluster.client_env())
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert len(lines) == 1 and lines[0] in {"running", "success", "failed"}, proc.stdout
        seen = lines[0]
        if seen in until:
            return seen
        time.sleep(1)
    raise AssertionError(f"status of {jobid} still {seen!r} after {timeout}s")


def submit_job(cluster: SlurmCluster, cwd: Path, body: str, props: dict | None = None) -> str:
    script = cwd / f"js-{time.monotonic_ns()}.sh"
    props = props or {
        "type": "single",
        "rule": "t",
        "threads": 1,
        "resources": {"mem_mb": 100, "runtime": 5},
        "jobid": 1,
    }
    script.write_text(jobscript(props, body))
    proc = run_script(SUBMIT, str(script), cwd=cwd, env=cluster.client_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.splitlines()[0]


@needs_torque
@pytest.mark.scheduler
@pytest.mark.full
def test_submit_then_status_success(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    out = tmp_path / "result.txt"
    jobid = submit_job(slurm_cluster, tmp_path, f"echo hello > {out}")
    assert jobid.isdigit()
    assert poll_status(slurm_cluster, jobid, tmp_path, {"success", "failed"}) == "success"
    assert out.read_text().strip() == "hello"
    assert f"{jobid} success" in (tmp_path / "logs/pbs/status.log").read_text()


@needs_torque
@pytest.mark.scheduler
@pytest.mark.full
def test_failing_job_reports_failed(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    jobid = submit_job(slurm_cluster, tmp_path, "exit 3")
    assert poll_status(slurm_cluster, jobid, tmp_path, {"success", "failed"}) == "failed"
    assert "exit code 3" in (tmp_path / "logs/pbs/status.log").read_text()


@needs_torque
@pytest.mark.scheduler
@pytest.mark.full
def test_qdel_running_job_reports_failed(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    jobid = submit_job(slurm_cluster, tmp_path, "sleep 300")
    # cancelled once its script runs (the wrapper's start file), not once squeue says R: a
    # cancel that reaches Slurm while it still launches the job can be lost, and the job
    # would then sleep on (test_profiles, s60b)
    record = json.loads((tmp_path / "logs/pbs/jobs" / f"{jobid}.json").read_text())
    wait_for(lambda: Path(record["start_file"]).exists(), "the job's script to start")
    assert poll_status(slurm_cluster, jobid, tmp_path, {"running"}) == "running"
    cancel = run_script(CANCEL, jobid, "99999999", cwd=tmp_path, env=slurm_cluster.client_env())
    assert cancel.returncode == 0
    assert poll_status(slurm_cluster, jobid, tmp_path, {"success", "failed"}, 60) == "failed"


@needs_torque
@pytest.mark.scheduler
@pytest.mark.full
def test_snakemake_cluster_generic_end_to_end(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """The real calling conventions of snakemake-executor-plugin-cluster-generic."""
    pytest.importorskip("snakemake_executor_plugin_cluster_generic")
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent("""\
        rule all:
            input: expand("out/{i}.txt", i=range(2))
        rule make:
            output: "out/{i}.txt"
            threads: 1
            resources: mem_mb=100, runtime=5
            shell: "echo {wildcards.i} > {output}"
        """)
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--executor",
            "cluster-generic",
            "--cluster-generic-submit-cmd",
            str(SUBMIT),
            "--cluster-generic-status-cmd",
            str(STATUS),
            "--cluster-generic-cancel-cmd",
            str(CANCEL),
            "--jobs",
            "4",
            "--latency-wait",
            "10",
            "--seconds-between-status-checks",  # a test's: the job takes a second, not 10
            "1",
        ],
        cwd=tmp_path,
        env=slurm_cluster.client_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [(tmp_path / f"out/{i}.txt").read_text().strip() for i in range(2)] == ["0", "1"]


@pytest.mark.unit
def test_status_main_success_from_exit_status_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(status, "run_qstat", lambda jobid: V("finished", 0))
    assert status.main(["5.srv"]) == 0  # no submit record at all: still success
    assert capsys.readouterr().out == "success\n"
    jobs = tmp_path / "logs/pbs/jobs"
    jobs.mkdir(parents=True)
    copy = jobs / "t.jobscript"
    copy.write_text("x")
    status.record_path(jobs, "6.srv").write_text(json.dumps({"jobscript": str(copy)}))
    assert status.main(["6.srv"]) == 0
    assert capsys.readouterr().out == "success\n"
    assert not copy.exists()


@pytest.mark.unit
def test_a_pbs_site_refuses_several_clients_without_a_launcher():
    """PBS has no srun: without CLOUDBENCH_LAUNCHER every client of a measurement would run
    on the job's first node. The run stops before submitting, saying what to set."""
    from cloudbench.site.jobenv import launcher_problem

    said = launcher_problem("true", {"tesseract": 4, "tursa": 1}, {})
    assert said is not None and said.startswith("site tesseract measures with up to 4 clients")
    assert "CLOUDBENCH_LAUNCHER" in said
    assert launcher_problem(True, {"tesseract": 4}, {"CLOUDBENCH_LAUNCHER": "mpiexec"}) is None
    assert launcher_problem("true", {"tesseract": 1}, {}) is None  # one client: nothing to place
    assert launcher_problem(None, {"tursa": 8}, {}) is None  # Slurm sites have srun


@pytest.mark.quick
def test_run_qstat_asks_pbs_pro_for_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wiring from ``qstat --version`` to ``qstat -x -f -F json``. No PBS Pro runs here:
    the ``qstat`` on PATH is a stand-in script answering as PBS Pro's documented output
    (PBSPRO_JSON above), and logging its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "answer.json").write_text(PBSPRO_JSON)
    fake = bin_dir / "qstat"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {tmp_path}/args.log\n'
        'if [ "$1" = --version ]; then echo "pbs_version = 2022.1.3"; exit 0; fi\n'
        f'[ "$1 $2 $3 $4" = "-x -f -F json" ] && exec cat {tmp_path}/answer.json\n'
        "exit 2\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    assert status.run_qstat("4713.tesseract-pbs") == status.QstatVerdict(
        "finished", 271, reason="job_state=F"
    )
    assert status.run_qstat("4714").kind == "running"
    # asked once, then kept
    args = (tmp_path / "args.log").read_text().splitlines()
    assert args == ["--version", "-x -f -F json 4713.tesseract-pbs", "-x -f -F json 4714"]
    kept = json.loads((tmp_path / "logs/pbs" / status.FLAVOUR_FILE).read_text())
    assert kept == {"qstat": str(fake), "flavour": "pbspro"}
