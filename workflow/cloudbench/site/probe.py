"""The latency probe of one S3 remote: how far away is the store, in time, from this node?

Throughput follows round-trip time, so before and after a site's transfers the probe
measures each remote: TCP connect time to the endpoint, the TLS handshake where the
endpoint is https (an http endpoint has none, and the record says so rather than inventing
one), and the time to first byte of K small PUTs and K small GETs, each one signed S3
request on one kept-alive connection, so request latency is not mixed with connection
set-up (measured separately). Everything is done here with the standard library (http.client
and AWS Signature V4), so what is timed is the request and nothing a client adds.

The record names the endpoint host and port, never a credential.
"""

from __future__ import annotations

import http.client
import math
import os
import socket
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudbench.campaign.secrets import redact, secret_values
from cloudbench.measure.clients.base import ClientError as ToolError
from cloudbench.measure.clients.s3 import S3Access, remote_name, s3_access
from cloudbench.records import host_info, utc_now, write_json

DEFAULT_COUNT = 16
DEFAULT_OBJECT_BYTES = 4096
TIMEOUT_S = 30.0
PERCENTILES = (50, 90, 99)
VISIBILITY_POLL_S = 0.02  # how often a just-written object is looked for
VISIBILITY_TIMEOUT_S = 30.0  # an object not seen by then is an error, not a number
_UNRESERVED = "-_.~"


class ProbeError(RuntimeError):
    """The probe cannot run (not an S3 remote, no endpoint, bad arguments)."""


# --- pure parts ----------------------------------------------------------------------


GIVE_UP_AFTER = 3  # requests in a row that met a network error: the store is not answering


class _GaveUp(Exception):
    """The probe stops: GIVE_UP_AFTER requests in a row got no answer."""


class _Patience:
    """Counts requests in a row that got no answer; past GIVE_UP_AFTER the probe gives up
    (an endpoint that drops packets cost 64 requests at 30 s each, half an hour of a node
    holding the site's network slot, to record that it does not answer)."""

    def __init__(self, errors: list[str]) -> None:
        self.errors, self.in_a_row = errors, 0

    def failed(self, what: str) -> None:
        self.errors.append(what)
        self.in_a_row += 1
        if self.in_a_row >= GIVE_UP_AFTER:
            self.errors.append(
                f"gave up after {self.in_a_row} requests in a row without an answer: the "
                "store is not answering"
            )
            raise _GaveUp

    def answered(self) -> None:
        self.in_a_row = 0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile with linear interpolation between order statistics (numpy's
    default), so P50 <= P90 <= P99 always holds and every value lies within min..max."""
    if not values:
        raise ValueError("percentile of no values")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summary(values: Sequence[float]) -> dict[str, Any] | None:
    """n, min, P50, P90, P99 and max of a set of times in seconds (None for none), and
    the times themselves (``samples``).

    With K=16 the P99 is close to the maximum: reported, but the maximum says as much.
    """
    if not values:
        return None
    out: dict[str, float | int] = {"n": len(values), "min": min(values)}
    for q in PERCENTILES:
        out[f"p{q}"] = percentile(values, q)
    out["max"] = max(values)
    rounded = {k: (round(v, 9) if isinstance(v, float) else v) for k, v in out.items()}
    # every request's own time, in order: the percentiles can be checked from the record
    return rounded | {"samples": [round(v, 9) for v in values]}


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str
    port: int

    @property
    def netloc(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"


def endpoint_of(access: S3Access) -> Endpoint:
    """Scheme, host and port of the remote's endpoint (AWS's regional one when it has none)."""
    url = access.endpoint or f"https://s3.{access.region}.amazonaws.com"
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProbeError(f"remote {access.remote!r}: cannot probe endpoint {url!r}")
    return Endpoint(
        parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    )


def object_target(access: S3Access, ep: Endpoint, bucket: str, key: str) -> tuple[str, str]:
    """(Host header, path) of one object, path-style or virtual-hosted as the remote says."""
    quoted = urllib.parse.quote(key, safe="/" + _UNRESERVED)
    if access.path_style:
        return ep.netloc, f"/{bucket}/{quoted}"
    return f"{bucket}.{ep.netloc}", f"/{quoted}"


def signed_headers(
    access: S3Access,
    url: str,
    method: str,
    body: bytes = b"",
) -> dict[str, str]:
    """The headers of one SigV4-signed S3 request to ``url`` (already URI-encoded), from
    botocore's own signer: the secret only ever enters its HMAC, never a header."""
    from botocore.auth import S3SigV4Auth  # imported here: only the probe job needs it
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    creds = Credentials(access.access_key or "", access.secret_key or "", access.session_token)
    request = AWSRequest(method=method, url=url, data=body)
    S3SigV4Auth(creds, "s3", access.region).add_auth(request)
    return dict(request.headers.items())


# --- measuring -----------------------------------------------------------------------


def tcp_connect_s(ep: Endpoint, timeout: float = TIMEOUT_S) -> float:
    """Seconds to open (and then close) one TCP connection: one round trip plus the
    server's accept; name resolution is done before the clock starts."""
    addr = socket.getaddrinfo(ep.host, ep.port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(addr[0], addr[1], addr[2])
    sock.settimeout(timeout)
    try:
        t0 = time.perf_counter()
        sock.connect(addr[4])
        return time.perf_counter() - t0
    finally:
        sock.close()


def tls_handshake_s(ep: Endpoint, timeout: float = TIMEOUT_S) -> float:
    """Seconds of the TLS handshake on a fresh connection (the connect itself excluded)."""
    context = ssl.create_default_context()
    with socket.create_connection((ep.host, ep.port), timeout=timeout) as raw:
        t0 = time.perf_counter()
        with context.wrap_socket(raw, server_hostname=ep.host):
            return time.perf_counter() - t0


CLOCK_NOTE = (
    "clock_ahead_of_store_s: this node's clock minus the store's, in seconds (positive: this "
    "node ahead), between low and high: every PUT and GET response's Date header (whole "
    "seconds) bounds it by when the request left and the answer came; the intersection of "
    "all bounds. It puts two sites' times on the store's one clock (cross-site visibility)"
)


class _Timed(http.client.HTTPResponse):
    """A response that notes when its first byte arrived (its status line was read)."""

    first_byte_at = 0.0

    def begin(self) -> None:  # reads the status line and headers
        self.fp.peek(1)
        self.first_byte_at = time.perf_counter()
        super().begin()


def _connection(ep: Endpoint, timeout: float) -> http.client.HTTPConnection:
    cls = http.client.HTTPSConnection if ep.scheme == "https" else http.client.HTTPConnection
    conn = cls(ep.host, ep.port, timeout=timeout)
    conn.response_class = _Timed
    return conn


def connected(conn: http.client.HTTPConnection) -> bool:
    """Open ``conn`` if it is not (TCP and, for https, TLS) and say whether it had to:
    http.client would otherwise connect lazily inside the first request, on the clock."""
    if conn.sock is not None:
        return False
    conn.connect()
    return True


def signed_request(
    conn: http.client.HTTPConnection,
    access: S3Access,
    ep: Endpoint,
    method: str,
    bucket: str,
    key: str,
    body: bytes = b"",
    query: str = "",
    clock: list[tuple[float, float]] | None = None,
) -> tuple[int, float, bytes]:
    """(status, seconds from the request's first byte sent to the response's first byte
    received, body) of one signed request (to the bucket itself when ``key`` is empty, e.g.
    a listing with its ``query``); the connection is opened before the clock. ``clock``
    collects what the response's Date says of this node's clock (:func:`clock_bound`)."""
    host, path = object_target(access, ep, bucket, key)
    if not key:
        path = path.rstrip("/") or "/"
    path += f"?{query}" if query else ""
    headers = signed_headers(access, f"{ep.scheme}://{host}{path}", method, body)
    headers["Content-Length"] = str(len(body))
    headers.setdefault("Host", host)  # signed by botocore from the URL; sent by us
    connected(conn)
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for name, value in headers.items():
        conn.putheader(name, value)
    sent_epoch = time.time()
    t0 = time.perf_counter()
    conn.endheaders(body if body else None)
    resp = conn.getresponse()
    received_epoch = sent_epoch + (resp.first_byte_at - t0)  # type: ignore[attr-defined]
    data = resp.read()
    if clock is not None:
        bound = clock_bound(sent_epoch, received_epoch, resp.getheader("Date"))
        if bound is not None:
            clock.append(bound)
    return resp.status, resp.first_byte_at - t0, data  # type: ignore[attr-defined]


def clock_bound(sent: float, received: float, date: str | None) -> tuple[float, float] | None:
    """What one response says of this node's clock minus the store's (seconds; positive:
    this node is ahead): the store stamped its ``Date`` (whole seconds, cut down) between
    our request leaving and its answer arriving, so the difference lies in
    (sent - Date - 1, received - Date]. None without a readable Date."""
    from email.utils import parsedate_to_datetime

    try:
        stamped = parsedate_to_datetime(date).timestamp() if date else None
    except (TypeError, ValueError):
        return None
    return None if stamped is None else (sent - stamped - 1.0, received - stamped)


def clock_ahead(bounds: Sequence[tuple[float, float]]) -> dict[str, Any] | None:
    """This node's clock minus the store's, from every response's bound: they all hold, so
    the difference lies in their intersection, narrower than a second once the requests
    fall at different fractions of a second. None without a bound, or when they do not
    meet (a clock stepped during the probe): no number is better than a wrong one."""
    if not bounds:
        return None
    low, high = max(b[0] for b in bounds), min(b[1] for b in bounds)
    if low > high:
        return None
    return {"low": round(low, 4), "high": round(high, 4), "responses": len(bounds)}


def split_bucket_path(bucket_path: str) -> tuple[str, str]:
    """``bucket/a/b`` -> (``bucket``, ``a/b``)."""
    parts = bucket_path.strip("/").split("/", 1)
    if not parts[0]:
        raise ProbeError("--bucket-path names no bucket: use bucket/prefix")
    return parts[0], parts[1] if len(parts) > 1 else ""


def listing_query(prefix: str) -> str:
    """The query of a ListObjectsV2 request for ``prefix`` (URI-encoded as SigV4 signs it)."""
    return "list-type=2&prefix=" + urllib.parse.quote(prefix, safe=_UNRESERVED)


def seconds_until(found: Callable[[], bool], poll: float, timeout: float) -> float | None:
    """Seconds until ``found()`` is true, asking every ``poll`` seconds (None: not within
    ``timeout``). The first ask is at once: on a strongly consistent store the answer is
    one request's time."""
    t0 = time.perf_counter()
    while True:
        if found():
            return time.perf_counter() - t0
        if time.perf_counter() - t0 > timeout:
            return None
        time.sleep(poll)


def visibility_sample(
    conn: http.client.HTTPConnection,
    access: S3Access,
    ep: Endpoint,
    bucket: str,
    key: str,
    body: bytes,
    list_first: bool,
) -> tuple[float | None, float | None]:
    """PUT a new object, then (seconds until a listing shows it, seconds until a GET returns
    it whole), both from the PUT's answer; None where it was not seen in time."""
    status, _, data = signed_request(conn, access, ep, "PUT", bucket, key, body)
    if status // 100 != 2:
        raise http.client.HTTPException(f"PUT: HTTP {status}: {data[:200]!r}")
    t_put = time.perf_counter()
    checks = {
        "list": lambda: _listed(conn, access, ep, bucket, key),
        "read": lambda: _readable(conn, access, ep, bucket, key, body),
    }
    seen: dict[str, float | None] = {}
    for name in ("list", "read") if list_first else ("read", "list"):
        waited = seconds_until(checks[name], VISIBILITY_POLL_S, VISIBILITY_TIMEOUT_S)
        seen[name] = None if waited is None else time.perf_counter() - t_put
    return seen["list"], seen["read"]


def _listed(conn, access: S3Access, ep: Endpoint, bucket: str, key: str) -> bool:
    status, _, data = signed_request(conn, access, ep, "GET", bucket, "", query=listing_query(key))
    return status == 200 and f"<Key>{_xml_text(key)}</Key>".encode() in data


def _readable(conn, access: S3Access, ep: Endpoint, bucket: str, key: str, body: bytes) -> bool:
    status, _, data = signed_request(conn, access, ep, "GET", bucket, key)
    return status == 200 and data == body


def _xml_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def probe(
    access: S3Access,
    bucket_path: str,
    *,
    count: int = DEFAULT_COUNT,
    object_bytes: int = DEFAULT_OBJECT_BYTES,
    timeout: float = TIMEOUT_S,
) -> dict[str, Any]:
    """Measure one remote; return the record (problems are listed in ``errors``, and a
    measure with no successful sample is None: never a made-up number)."""
    if count < 1 or object_bytes < 0:
        raise ProbeError(f"count must be >= 1 and object size >= 0 (got {count}, {object_bytes})")
    if not (access.access_key and access.secret_key):
        raise ProbeError(
            f"remote {access.remote!r} has no access key in rclone's config or environment: "
            "the probe signs its own requests"
        )
    ep = endpoint_of(access)
    bucket, prefix = split_bucket_path(bucket_path)
    started = utc_now()
    errors: list[str] = []
    patience = _Patience(errors)
    connects: list[float] = []
    handshakes: list[float] = []
    puts: list[float] = []
    gets: list[float] = []
    lists: list[float] = []
    reads: list[float] = []
    clock: list[tuple[float, float]] = []
    try:
        for _ in range(count):
            try:
                connects.append(tcp_connect_s(ep, timeout))
                if ep.scheme == "https":
                    handshakes.append(tls_handshake_s(ep, timeout))
                patience.answered()
            except OSError as err:
                patience.failed(f"connect: {type(err).__name__}: {err}")
        _requests(access, ep, bucket, prefix, count, object_bytes, timeout, patience,
                  (puts, gets, lists, reads), clock)  # fmt: skip
    except _GaveUp:
        pass
    record = _probe_record(access, ep, started, count, object_bytes, errors,
                           (connects, handshakes, puts, gets, lists, reads))  # fmt: skip
    return record | {"clock_ahead_of_store_s": clock_ahead(clock), "clock": CLOCK_NOTE}


def _requests(
    access: S3Access,
    ep: Endpoint,
    bucket: str,
    prefix: str,
    count: int,
    object_bytes: int,
    timeout: float,
    patience: _Patience,
    times_of: tuple[list[float], list[float], list[float], list[float]],
    clock: list[tuple[float, float]] | None = None,
) -> None:
    """The timed requests of one probe (PUT, GET, list and read after write), then the
    untimed clean-up; each sample goes to its list in ``times_of``."""
    errors = patience.errors
    puts, gets, lists, reads = times_of
    stem = f"{prefix}/probe/{host_info()['host']}-{os.getpid()}-{time.time_ns()}".lstrip("/")
    keys = [f"{stem}-{i}" for i in range(count)]
    body = os.urandom(object_bytes)
    conn = _connection(ep, timeout)
    try:
        for method, times in (("PUT", puts), ("GET", gets)):
            for key in keys:
                try:
                    status, seconds, data = signed_request(
                        conn,
                        access,
                        ep,
                        method,
                        bucket,
                        key,
                        body if method == "PUT" else b"",
                        clock=clock,
                    )
                except (OSError, http.client.HTTPException) as err:
                    conn.close()
                    conn = _connection(ep, timeout)
                    patience.failed(f"{method}: {type(err).__name__}: {err}")
                    continue
                patience.answered()
                if status // 100 != 2:
                    errors.append(f"{method}: HTTP {status}: {data[:200]!r}")
                elif method == "GET" and data != body:
                    errors.append("GET: object read back differs from what was written")
                else:
                    times.append(seconds)
        # list- and read-after-write: a new object per sample (half look in the listing
        # first, half read first, so neither is always asked after the other has waited)
        for i in range(count):
            key = f"{stem}-visible-{i}"
            keys.append(key)
            try:
                seen = visibility_sample(conn, access, ep, bucket, key, body, i % 2 == 0)
            except (OSError, http.client.HTTPException) as err:
                conn.close()
                conn = _connection(ep, timeout)
                patience.failed(f"visibility: {type(err).__name__}: {err}")
                continue
            patience.answered()
            for name, seconds, times in (("list", seen[0], lists), ("read", seen[1], reads)):
                if seconds is None:
                    errors.append(f"{name} after write: not seen in {VISIBILITY_TIMEOUT_S:.0f} s")
                else:
                    times.append(seconds)
        for key in keys:  # untimed clean-up
            try:
                signed_request(conn, access, ep, "DELETE", bucket, key)
            except (OSError, http.client.HTTPException) as err:
                errors.append(f"DELETE: {type(err).__name__}: {err}")
                break
    finally:
        conn.close()


def _probe_record(
    access: S3Access,
    ep: Endpoint,
    started: str,
    count: int,
    object_bytes: int,
    errors: list[str],
    samples: tuple[list[float], ...],
) -> dict[str, Any]:
    """The probe's record: a summary per measure (None without a sample), and its errors."""
    connects, handshakes, puts, gets, lists, reads = samples
    secrets = [s for s in (access.secret_key, access.access_key, access.session_token) if s]
    errors = [redact(e, secrets + secret_values()) for e in dict.fromkeys(errors)]
    return {
        "remote": access.remote,
        "endpoint_host": ep.host,
        "endpoint_port": ep.port,
        "scheme": ep.scheme,
        "path_style": access.path_style,
        "started_utc": started,
        "time_of_day_utc": started[11:19],
        "count": count,
        "object_bytes": object_bytes,
        "tcp_connect_s": summary(connects),
        "tls_handshake_s": summary(handshakes),
        "tls": "measured" if ep.scheme == "https" else "none: http endpoint, no TLS handshake",
        "put_ttfb_s": summary(puts),
        "get_ttfb_s": summary(gets),
        "list_after_write_s": summary(lists),
        "read_after_write_s": summary(reads),
        "visibility": (
            f"per new object: seconds from its PUT's answer until a listing of its name shows "
            f"it (list) and until a GET returns it whole (read), asked every "
            f"{VISIBILITY_POLL_S} s; strongly consistent stores answer in one request's time"
        ),
        "requests": (
            "one kept-alive connection opened before the clock (reopened untimed after an "
            "error); time from request sent to first response byte; signed by botocore"
        ),
        "errors": errors,
        "status": "ok" if not errors else "failed",
        **host_info(),
    }


KERNEL_WINDOWS = {  # record key: the Linux setting whose third value caps the window
    "tcp_rmem_max_bytes": "/proc/sys/net/ipv4/tcp_rmem",
    "tcp_wmem_max_bytes": "/proc/sys/net/ipv4/tcp_wmem",
}


def kernel_windows(settings: Mapping[str, str] = KERNEL_WINDOWS) -> dict[str, int | None]:
    """This node's largest TCP receive and send buffers (the third value of tcp_rmem and
    tcp_wmem): auto-tuning never grows a connection's window beyond them, so they bound
    one stream's rate at window / RTT. None where the node does not say (not Linux)."""
    out: dict[str, int | None] = {}
    for key, path in settings.items():
        try:
            out[key] = int(Path(path).read_text().split()[2])
        except (OSError, ValueError, IndexError):
            out[key] = None
    return out


def run_probe(
    remote_url: str,
    bucket_path: str | None,
    out: Path,
    *,
    count: int = DEFAULT_COUNT,
    object_bytes: int = DEFAULT_OBJECT_BYTES,
    extra: Mapping[str, Any] | None = None,
    skip_non_s3: bool = False,
) -> dict[str, Any]:
    """Probe ``remote_url`` (``name:`` or ``name:bucket/prefix``) and write the record.

    ``bucket_path`` defaults to the path in ``remote_url``. With ``skip_non_s3`` a remote
    the probe cannot speak to (a local directory, a non-S3 backend) gets a record saying
    why, status ``skipped``, so a campaign mixing stores still runs; otherwise that is an
    error.
    """
    try:
        access = s3_access(remote_url, tool="the latency probe")
    except ToolError as err:
        if not skip_non_s3:
            raise ProbeError(str(err)) from None
        record = {
            "remote": remote_url,
            "status": "skipped",
            "reason": str(err),
            "started_utc": utc_now(),
            **(extra or {}),
            **host_info(),
        }
        write_json(out, record)
        return record
    path = bucket_path or remote_url.split(":", 1)[1]
    record = probe(access, path, count=count, object_bytes=object_bytes)
    record = {**record, "remote": remote_name(remote_url), **kernel_windows(), **(extra or {})}
    write_json(out, record)
    return record
