"""The site's copy slot (cloudbench.measure.slot): real processes holding a real lock.

Each holder is its own Python process (POSIX locks belong to a process: one process cannot
contend with itself), on the test's tmp directory as the site's scratch.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cloudbench.measure import slot

ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 60.0  # every wait here is bounded by this

#: hold the slot, say so on stdout, and keep it until ``release`` exists (or forever); the
#: first time its lock is refused (it found the slot held and waits) it says so too
HOLDER = """
import json, sys, time
from pathlib import Path
from cloudbench.measure import slot
scratch, release, timeout = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
try_lock = slot._try_lock
def noted(fd):
    got = try_lock(fd)
    if not got and not noted.said:
        noted.said = True
        print(json.dumps({"refused": time.time()}), flush=True)
    return got
noted.said = False
slot._try_lock = noted
print(json.dumps({"trying": time.time()}), flush=True)
with slot.held(scratch, timeout, label="holder " + release.name) as took:
    print(json.dumps({"waited_s": took.waited_s, "got": time.time()}), flush=True)
    deadline = time.monotonic() + 120
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    print(json.dumps({"released": time.time()}), flush=True)
"""


def start_holder(scratch: Path, release: Path, timeout: float = WAIT_S) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(scratch), str(release), str(timeout)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT / "workflow",
    )


def first_line(proc: subprocess.Popen) -> dict:
    """The holder's first line after it asked for the slot (it holds the slot once this is
    read)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    # it asked (and perhaps waited): the next line once it holds it; bounded: every holder
    # prints or exits within WAIT_S
    while line and {"trying", "refused"} & set(json.loads(line)):
        line = proc.stdout.readline()
    assert line, f"holder ended without the slot (rc={proc.wait(timeout=WAIT_S)})"
    return json.loads(line)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=WAIT_S)


@pytest.mark.quick
def test_a_second_copy_waits_for_the_first(tmp_path: Path) -> None:
    first = start_holder(tmp_path, tmp_path / "release-1")
    second = None
    try:
        assert first_line(first)["waited_s"] == 0.0  # the first to come does not wait
        # while the first holds it, another job gets it only after the first lets go
        second = start_holder(tmp_path, tmp_path / "release-2")
        # it must have found the slot held before the first lets go, or it would find it
        # free and never wait: it says so the first time its lock is refused
        assert second.stdout is not None
        assert "trying" in json.loads(second.stdout.readline())
        assert "refused" in json.loads(second.stdout.readline())
        with pytest.raises(slot.SlotTimeout, match="held by holder release-1"):
            with slot.held(tmp_path, 0.3, label="third"):
                pass
        (tmp_path / "release-1").write_text("")
        released = json.loads(first.stdout.readline())["released"]
        got = first_line(second)
        assert got["got"] >= released  # never both at once
        assert got["waited_s"] > 0  # and its row says it waited
        (tmp_path / "release-2").write_text("")
        assert first.wait(timeout=WAIT_S) == 0 and second.wait(timeout=WAIT_S) == 0
    finally:
        for p in (first, second):
            if p is not None:
                stop(p)


@pytest.mark.quick
def test_a_killed_holder_never_blocks_the_site(tmp_path: Path) -> None:
    holder = start_holder(tmp_path, tmp_path / "never")
    try:
        first_line(holder)
        with pytest.raises(slot.SlotTimeout):
            with slot.held(tmp_path, 0.3):
                pass
        holder.send_signal(signal.SIGKILL)
        assert holder.wait(timeout=WAIT_S) == -signal.SIGKILL
        with slot.held(tmp_path, WAIT_S, label="after the kill") as took:
            assert took.path == slot.slot_path(tmp_path)
            assert took.waited_s < WAIT_S
            assert "after the kill" in took.path.read_text()  # the holder's note for waiters
    finally:
        stop(holder)


@pytest.mark.unit
def test_remaining_copy_time_after_a_wait() -> None:
    assert slot.remaining(None, 5.0) is None
    assert slot.remaining(100.0, 30.0) == 70.0
    assert slot.remaining(100.0, 100.0) == 1.0  # never 0: the copy still gets its chance


@pytest.mark.unit
def test_acquire_gives_up_at_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wait loop, with a lock that is never free (another process's, as _try_lock says)
    and a clock that advances by the sleeps only."""
    now = [0.0]
    monkeypatch.setattr(slot, "_try_lock", lambda fd: False)
    with pytest.raises(slot.SlotTimeout) as err:
        slot.acquire(-1, 2.0, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert err.value.waited_s == pytest.approx(2.0)
    # a lock that frees after three polls: the seconds waited, not more
    tries = iter([False, False, False, True])
    now[0] = 10.0
    monkeypatch.setattr(slot, "_try_lock", lambda fd: next(tries))
    waited = slot.acquire(
        -1, 5.0, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
    )
    assert waited == pytest.approx(3 * slot.POLL_S)


@pytest.mark.unit
def test_holder_of_names_who_holds_it(tmp_path: Path) -> None:
    path = tmp_path / slot.SLOT_FILE
    path.write_text(json.dumps({"label": "upload s3 plain r1", "host": "n1", "pid": 7,
                                "batch_job": "42", "since": "2026-11-26T09:00:00Z"}))  # fmt: skip
    assert slot.holder_of(path) == (
        "upload s3 plain r1 on n1 pid 7 (batch job 42) since 2026-11-26T09:00:00Z"
    )
    assert slot.holder_of(tmp_path / "absent") == "unknown holder"
