"""The latency probe: percentile summaries, AWS Signature V4, and a real probe of
``rclone serve s3`` through ``python -m cloudbench probe``."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time

import pytest

from cloudbench.measure.rclone import find_rclone
from cloudbench.measure.tools import S3Access
from cloudbench.site import probe
from tests.infra.s3 import serve_s3, store_params
from tests.infra.skewclock import faked_clock_env, libfaketime
from tests.infra.workflow import ROOT

SECRET = "h13-probe-Secret-77aa"
OPENING = 0.1  # seconds a slow connection takes to open (a probe that counted it fails by it)
KEY = "h13probekey1"


@pytest.mark.unit
def test_percentiles_interpolate_like_numpy():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert probe.percentile(values, 50) == 3.0
    assert probe.percentile(values, 90) == pytest.approx(4.6)
    assert probe.percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        probe.percentile([], 50)


@pytest.mark.unit
@pytest.mark.parametrize("values", [[0.002] * 3, [0.01, 0.5, 0.02, 0.03], list(range(1, 101))])
def test_summary_is_ordered_and_bounded(values):
    s = probe.summary([float(v) for v in values])
    assert s["n"] == len(values)
    assert 0 < s["min"] <= s["p50"] <= s["p90"] <= s["p99"] <= s["max"]
    # the record keeps every request's time, in order, so each percentile can be re-derived
    assert s["samples"] == [float(v) for v in values]
    assert s["p90"] == round(probe.percentile(s["samples"], 90), 9)
    assert probe.summary([]) is None


@pytest.mark.unit
def test_requests_are_signed_by_botocore_and_carry_no_secret():
    acc = S3Access("m", "http://127.0.0.1:9000", "eu-west-2", True, "AKIDEXAMPLE", SECRET)
    headers = probe.signed_headers(acc, "http://127.0.0.1:9000/bkt/k", "PUT", b"abc")
    auth = headers["Authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-2/s3/aws4_request" in auth and "host" in auth
    # http: the payload is signed (its SHA-256), as botocore does for plain-text endpoints
    assert headers["X-Amz-Content-SHA256"] == hashlib.sha256(b"abc").hexdigest()
    assert not any(SECRET in v for v in headers.values())


@pytest.mark.unit
def test_time_to_first_byte_never_holds_the_connection_set_up(tmp_path):
    """http.client connects lazily inside the first request; the probe opens the connection
    before the clock. A connection that takes OPENING s to open must not show in any TTFB: each
    request's TTFB is at most its call's own seconds less the opening it paid (bounded by
    the fault injected, not by a constant the machine must beat)."""
    import http.client
    import http.server
    import threading

    class Ok(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_PUT(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # ends at once
    try:
        acc = S3Access("m", f"http://127.0.0.1:{server.server_port}", "us-east-1", True, "k", "s")
        ep = probe.endpoint_of(acc)

        class SlowToOpen(http.client.HTTPConnection):
            opened = 0

            def connect(self):
                time.sleep(OPENING)  # the fault: a slow connection set-up
                SlowToOpen.opened += 1
                super().connect()

        conn = SlowToOpen(ep.host, ep.port, timeout=10)
        conn.response_class = probe._Timed
        times, calls, opened = [], [], []
        for i in range(3):
            before, t0 = SlowToOpen.opened, time.monotonic()
            status, seconds, _ = probe.signed_request(conn, acc, ep, "PUT", "b", f"k{i}", b"x")
            calls.append(time.monotonic() - t0)
            opened.append(SlowToOpen.opened - before)
            assert status == 200
            times.append(seconds)
            if i == 1:
                conn.close()  # as after an error: the next request reopens, off the clock
        conn.close()
    finally:
        server.shutdown()
    assert SlowToOpen.opened == 2 and opened == [1, 0, 1]
    for ttfb, call, paid in zip(times, calls, opened, strict=True):
        assert 0 < ttfb <= call - paid * OPENING, (times, calls)


@pytest.mark.unit
def test_endpoints_and_addressing():
    acc = S3Access("m", "http://127.0.0.1:9000", "us-east-1", True)
    ep = probe.endpoint_of(acc)
    assert (ep.scheme, ep.host, ep.port) == ("http", "127.0.0.1", 9000)
    assert probe.object_target(acc, ep, "bkt", "a b/c") == ("127.0.0.1:9000", "/bkt/a%20b/c")
    aws = S3Access("m", None, "eu-west-2", False)
    ep = probe.endpoint_of(aws)
    assert (ep.host, ep.port) == ("s3.eu-west-2.amazonaws.com", 443)
    assert probe.object_target(aws, ep, "bkt", "k") == ("bkt.s3.eu-west-2.amazonaws.com", "/k")
    assert probe.split_bucket_path("/b/x/y/") == ("b", "x/y")
    with pytest.raises(probe.ProbeError, match="names no bucket"):
        probe.split_bucket_path("/")


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    import os

    full = {**os.environ, **env, "PYTHONPATH": str(ROOT / "workflow")}
    return subprocess.run(
        [sys.executable, "-m", "cloudbench", "probe", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
    )


@pytest.mark.quick
def test_probe_of_a_real_s3_server(tmp_path):
    with serve_s3(find_rclone(), tmp_path / "srv", key=KEY, secret=SECRET) as srv:
        (srv.root / "bkt").mkdir()
        env = srv.client_env("MYS3")
        out = tmp_path / "probe" / "before.json"
        run = _cli(
            "--remote-url", "mys3:", "--bucket-path", "bkt/campaign", "--count", "8",
            "--when", "before", "--out", str(out), env=env,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        leftover = [p for p in (srv.root / "bkt").rglob("*") if p.is_file()]
    rec = json.loads(out.read_text())
    assert rec["status"] == "ok" and rec["errors"] == [], rec["errors"]
    assert (rec["remote"], rec["endpoint_host"], rec["endpoint_port"]) == (
        "mys3",
        "127.0.0.1",
        srv.port,
    )
    assert rec["count"] == 8 and rec["object_bytes"] == 4096 and rec["when"] == "before"
    assert rec["tls_handshake_s"] is None and rec["tls"].startswith("none: http")
    assert rec["tcp_connect_s"]["min"] > 0
    for what in (
        "tcp_connect_s", "put_ttfb_s", "get_ttfb_s", "list_after_write_s", "read_after_write_s"
    ):  # fmt: skip
        s = rec[what]
        assert s["n"] == 8, what
        assert 0 < s["min"] <= s["p50"] <= s["p90"] <= s["p99"] <= s["max"] < 30, (what, s)
    assert len(rec["time_of_day_utc"]) == 8 and rec["started_utc"].endswith("Z")
    assert leftover == [], leftover  # the probe deletes its objects
    text = out.read_text() + run.stdout + run.stderr
    assert SECRET not in text and KEY not in text


@pytest.mark.quick
@pytest.mark.skipif(libfaketime() is None, reason="libfaketime not installed: run `make sysdeps`")
def test_probe_measures_its_clock_against_the_stores(tmp_path):
    """A probe whose clock is 7 s behind (libfaketime; the store, rclone in Go, keeps the
    real clock) finds it behind by 7 s, to within the Date headers' narrowing."""
    with serve_s3(find_rclone(), tmp_path / "srv", key=KEY, secret=SECRET) as srv:
        (srv.root / "bkt").mkdir()
        out = tmp_path / "probe.json"
        run = _cli(
            "--remote-url", "mys3:", "--bucket-path", "bkt/c", "--count", "16",
            "--when", "before", "--out", str(out),
            env={**srv.client_env("MYS3"), **faked_clock_env("7")},
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
    ahead = json.loads(out.read_text())["clock_ahead_of_store_s"]
    assert ahead["low"] <= -7.0 <= ahead["high"], ahead
    assert ahead["high"] - ahead["low"] < 1.0 and ahead["responses"] == 32


@pytest.mark.quick
def test_probe_reports_a_wrong_secret_instead_of_numbers(tmp_path):
    with serve_s3(find_rclone(), tmp_path / "srv", key=KEY, secret=SECRET) as srv:
        (srv.root / "bkt").mkdir()
        env = {**srv.client_env("MYS3"), "RCLONE_CONFIG_MYS3_SECRET_ACCESS_KEY": "wrong-secret-1"}
        out = tmp_path / "p.json"
        run = _cli("--remote-url", "mys3:bkt", "--count", "2", "--out", str(out), env=env)
    assert run.returncode == 0, run.stderr
    rec = json.loads(out.read_text())
    assert rec["status"] == "failed" and rec["put_ttfb_s"] is None and rec["get_ttfb_s"] is None
    assert any("HTTP 403" in e for e in rec["errors"]), rec["errors"]
    assert "wrong-secret-1" not in out.read_text()


@pytest.mark.quick
def test_probe_refuses_a_non_s3_remote_in_one_line(tmp_path):
    run = _cli(
        "--remote-url", "loc:", "--out", str(tmp_path / "p.json"),
        env={"RCLONE_CONFIG_LOC_TYPE": "local"},
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0
    assert "'loc'" in run.stderr and "only S3 remotes can use the latency probe" in run.stderr
    assert not (tmp_path / "p.json").exists()


@pytest.mark.quick
def test_probe_rule_writes_before_records_for_s3_and_says_why_not_for_a_directory(
    tmp_path, demo_config
):
    """`snakemake .../probe/<remote>/before.json`: the preflight first, then one record per
    remote; a local-directory remote gets a skipped record naming why (no made-up numbers)."""
    from cloudbench.campaign import paths
    from tests.infra.workflow import snakemake, write_config

    with serve_s3(find_rclone(), tmp_path / "srv", key=KEY, secret=SECRET) as srv:
        (srv.root / demo_config["bucket"]).mkdir()
        cfg = {k: v for k, v in demo_config.items() if k not in ("remote", "remote_location")}
        cfg["remotes"] = {"s3": {"url": "s3t:"}, "dir": {"url": str(tmp_path / "dirremote")}}
        cfg["probe"] = {"count": 4, "object_size": "1KiB"}
        for site in cfg["sites"].values():
            site["scratch"] = str(tmp_path / "scratch" / site["scratch"])
        results = f"results/{cfg['campaign']}"
        targets = [paths.probe_record(results, "tursa", r, "before") for r in ("s3", "dir")]
        run = snakemake(
            tmp_path / "wd", write_config(tmp_path / "wd", cfg), *targets, env=srv.client_env()
        )
        assert run.returncode == 0, run.stderr[-3000:]
    wd = tmp_path / "wd"
    assert (wd / paths.preflight(results, "tursa")).exists()
    s3 = json.loads((wd / targets[0]).read_text())
    assert s3["status"] == "ok", s3["errors"]
    assert (s3["site"], s3["when"], s3["count"], s3["object_bytes"]) == ("tursa", "before", 4, 1024)
    assert 0 < s3["get_ttfb_s"]["p50"] <= s3["get_ttfb_s"]["p99"]
    local = json.loads((wd / targets[1]).read_text())
    assert local["status"] == "skipped" and "not an rclone remote" in local["reason"]
    for path in [*(wd / "results").rglob("*.json"), *(wd / "results").rglob("*.log")]:
        assert SECRET not in path.read_text(), path


def _self_signed(tmp_path):
    """A certificate for 127.0.0.1 and its key (the `cryptography` package is a dependency)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.mark.quick
def test_probe_over_https_measures_the_tls_handshake(tmp_path):
    """rclone serve s3 with a certificate: the handshake is measured, the requests are
    signed over TLS (the client trusts the certificate through SSL_CERT_FILE)."""
    import os
    import socket
    import time

    from tests.infra.s3 import free_port

    cert, key = _self_signed(tmp_path)
    port = free_port()
    (tmp_path / "srv" / "bkt").mkdir(parents=True)
    server = subprocess.Popen(
        [
            find_rclone(), "serve", "s3", "--addr", f"127.0.0.1:{port}",
            "--cert", str(cert), "--key", str(key), str(tmp_path / "srv"),
        ],
        env={**os.environ, "RCLONE_AUTH_KEY": f'"{KEY},{SECRET}"'},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        env = {
            "RCLONE_CONFIG_TLS_TYPE": "s3",
            "RCLONE_CONFIG_TLS_ENDPOINT": f"https://127.0.0.1:{port}",
            "RCLONE_CONFIG_TLS_ACCESS_KEY_ID": KEY,
            "RCLONE_CONFIG_TLS_SECRET_ACCESS_KEY": SECRET,
            "SSL_CERT_FILE": str(cert),
        }
        out = tmp_path / "tls.json"
        run = _cli("--remote-url", "tls:bkt/c", "--count", "4", "--out", str(out), env=env)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert run.returncode == 0, run.stderr
    rec = json.loads(out.read_text())
    assert rec["scheme"] == "https" and rec["tls"] == "measured"
    assert rec["status"] == "ok", rec["errors"]
    hs = rec["tls_handshake_s"]
    assert hs["n"] == 4 and 0 < hs["min"] <= hs["p50"] <= hs["p99"] <= hs["max"]
    assert rec["get_ttfb_s"]["n"] == 4 and rec["put_ttfb_s"]["n"] == 4
    assert SECRET not in out.read_text()


@pytest.mark.quick
@pytest.mark.parametrize("store", store_params())
def test_visibility_probe_lists_and_reads_what_it_wrote_on_both_servers(tmp_path, store):
    """The listing request is signed and parsed right on a server that checks signatures
    (versitygw) and on serve s3: every new object is seen, at ordered percentiles."""
    with serve_s3(find_rclone(), tmp_path / "srv", key=KEY, secret=SECRET, store=store) as srv:
        (srv.root / "bkt").mkdir()
        out = tmp_path / "p.json"
        run = _cli(
            "--remote-url", "mys3:bkt/c", "--count", "4", "--out", str(out),
            env=srv.client_env("MYS3"),
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        leftover = [p for p in (srv.root / "bkt").rglob("*") if p.is_file()]
    rec = json.loads(out.read_text())
    assert rec["errors"] == [] and leftover == [], (rec["errors"], leftover)
    for what in ("list_after_write_s", "read_after_write_s"):
        s = rec[what]
        assert s["n"] == 4 and 0 < s["min"] <= s["p50"] <= s["p90"] <= s["p99"] <= s["max"] < 30
    assert "asked every" in rec["visibility"]


@pytest.mark.unit
def test_seconds_until_asks_at_once_then_every_poll_and_gives_up():
    from cloudbench.site.probe import seconds_until

    asked = []

    def third_time():
        asked.append(1)
        return len(asked) == 3

    waited = seconds_until(third_time, poll=0.01, timeout=5)
    assert len(asked) == 3 and 0.02 <= waited < 1
    assert seconds_until(lambda: False, poll=0.01, timeout=0.05) is None


@pytest.mark.unit
def test_a_store_that_does_not_answer_is_given_up_on_after_three_requests():
    """Nothing listens on the port: the probe stops after 3 failed requests in a row and
    says why, instead of spending every one of its requests (64 at 30 s each, on an
    endpoint that drops packets)."""
    import socket

    with socket.socket() as s:  # a port nothing listens on (bound, never listening)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        acc = S3Access("m", f"http://127.0.0.1:{port}", "us-east-1", True, KEY, SECRET)
        rec = probe.probe(acc, "bucket/prefix", count=64, object_bytes=1, timeout=2)
    assert rec["status"] == "failed" and rec["tcp_connect_s"] is None
    # three refused connects (one error, said once), then the verdict; no PUT was tried
    assert rec["errors"][0].startswith("connect: ConnectionRefusedError"), rec["errors"]
    assert len(rec["errors"]) == 2 and rec["put_ttfb_s"] is None
    assert rec["errors"][-1].startswith("gave up after 3 requests in a row without an answer")
