"""The one place that reads rclone's JSON logs (``--use-json-log --stats 1s -v``).

Everything cloudbench learns from rclone itself -- the per-second byte counts, errors,
retries -- comes through here, so that a change in rclone's log format breaks one module
and its tests (``tests/test_rclonelog.py``, run on logs captured from real rclone runs by
``tests/data/rclone-logs/capture.sh``) instead of silently skewing results.

What rclone 1.75.2 writes, one JSON object per line::

    {"time": "2026-11-21T03:55:34.368252387Z", "level": "info", "msg": "...",
     "source": "accounting/stats.go:549", "stats": {...}}      # a stats line
    {"time": "...", "level": "error", "msg": "Failed to copy: ...", "object": "f1.bin",
     "objectType": "*local.Object", "source": "operations/copy.go:349"}

Facts about those logs that shape this module (all seen in the captures):

* Stats lines are logged at INFO (rclone's default ``--stats-log-level``), so ``-v``
  suffices.  The last one is written by rclone after its retry loop whenever ``--stats``
  is set and the process exits normally; it is not marked as final.  A process that dies
  by signal, or fails before the transfer starts (e.g. "Failed to create file system"),
  leaves no final line -- or no stats line at all.
* Stats are cumulative over the whole process, *including* failed whole-run attempts:
  after a retry ``bytes`` counts the bytes sent by the failed attempt as well, so it can
  exceed the size of the data.  ``errors`` and ``lastError``, however, are reset at the
  start of each new attempt, so a run that needed a retry can end with ``errors == 0``.
* ``"Attempt N/M failed ..."`` and ``"Attempt N/M succeeded"`` are both logged at ERROR.
* ``"low level retry ..."`` messages (and the ``Version "v1.75.2" starting ...`` line)
  are DEBUG: at ``-v`` they never appear, so ``low_level_retries`` is 0 and ``version``
  is None unless the log was written with ``-vv`` (``version`` says which it was).
* The command's overall verdict, ``"Failed to copy: ..."`` or ``"Failed to copy with 4
  errors: last error was: ..."``, goes through Go's standard logger and is therefore
  logged at NOTICE, not ERROR.
* rclone redirects its stderr into ``--log-file``, so a Go panic or an early flag error
  lands there as plain text: lines that are not JSON must not stop the parse.
* On S3 the timed copy also runs at ``-vv --s3-sdk-log-mode Retries,Response``
  (:data:`cloudbench.measure.rclone.RESPONSE_LOG_FLAGS`): the AWS SDK then logs every HTTP
  response's status line and headers as a DEBUG message ``"Response\nHTTP/1.1 503 Slow
  Down\r\n..."``, and each request it sends again as ``"retrying request S3/UploadPart,
  attempt 2"``. Without them a 503 SlowDown on a part upload is retried inside the SDK and
  logged nowhere, at any level (seen against a proxy answering 503). Secrets in DEBUG
  lines (``Setting secret_access_key=XXX``) are masked by rclone itself.
* rclone 1.70 moved from logrus to slog and changed the ``time`` format (now RFC 3339
  with nanoseconds in UTC, ``...Z``; older releases wrote local time with an offset).
  The time string is only carried along, never parsed, so either format is fine.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cloudbench.measure import series

# Levels that mean "something went wrong".  slog-era rclone (>= 1.70) uses error,
# critical, alert, emergency; logrus-era rclone wrote fatal/panic for the worst ones.
_ERROR_LEVELS = frozenset({"error", "critical", "alert", "emergency", "fatal", "panic"})
# The command's final verdict, logged at NOTICE (Go's log.Printf) by cmd/cmd.go.
VERDICT_RE = re.compile(r"^Failed to \S+(?: with \d+ errors: last error was)?: ")
_ATTEMPT_RE = re.compile(r"^Attempt (\d+)/(\d+) (failed|succeeded)\b")
# the name rclone downloads an object to before renaming it (--partial-suffix, 1.63+)
_PARTIAL_RE = re.compile(r"(\.[0-9a-f]{8})?\.partial$")
# Both the pacer's "low level retry 1/2 (error ...)" and operations' "Received error:
# ... - low level retry 3/10"; older releases capitalised "Low".
_LOW_LEVEL_RE = re.compile(r"low level retry (\d+)/(\d+)", re.IGNORECASE)
MIN_GAP_S = series.MIN_GAP_S  # stats lines closer than this are one sample
_VERSION_RE = re.compile(r'\bVersion "v?([^"]+)" starting\b')
# The AWS SDK's response dump ("Response\nHTTP/1.1 503 Slow Down\r\n...") and retry line
_RESPONSE_RE = re.compile(r"^Response\s+HTTP/[\d.]+ (\d{3})\b")
_SDK_RETRY_RE = re.compile(r"^retrying request \S+, attempt \d+")
# When rclone can read neither an object nor a directory at the destination it gives the
# verdict "Failed to create file system for ...: is a file not a directory" whatever the
# reason; the reason (a 403, a store that is down) is only in this DEBUG line, as the
# listing's error after "): ".
# rclone's words when the hash (or size) of what it delivered differs from the source's
CORRUPTED_RE = re.compile(r": corrupted on transfer: ")
HIDDEN_VERDICT_RE = re.compile(r'Failed to create file system for "([^"]+)": is a file not a dir')
_UNCHECKED_RE = re.compile(
    r"^Couldn't check .* for children after HEAD failed \(.*?\): (.+)$", re.S
)
# Why a request never reached the store, or lost it halfway, in Go's words: a net.OpError
# ("dial tcp 127.0.0.1:9000: connect: connection refused", "dial tcp: lookup s3.example on
# ...: no such host", "set tcp 127.0.0.1:34322: use of closed network connection" when the
# connection died between two writes), or a request the store hung up on ('Put "http://...":
# EOF', 'Put "http://...": http: server closed idle connection', 'net/http: HTTP/1.x transport
# connection broken: ...': Go's words when a server dies between keep-alive requests).
_NETWORK_RE = re.compile(
    r"\b(?:dial|read|write|set|close) tcp[46]?[^\"()]*?(?:connection refused|"
    r"connection reset by peer|i/o timeout|no route to host|network is unreachable|"
    r"broken pipe|no such host|use of closed network connection)"
    r'|\b(?:Put|Get|Head|Post|Delete) "[^"]*": (?:unexpected )?EOF\b'
    r'|\b(?:Put|Get|Head|Post|Delete) "[^"]*": http: server closed idle connection'
    r"|net/http: HTTP/1\.x transport connection broken: [^()]*?(?=\s*\(on |$)"
)
# The S3 SDK's wording of an answer it did not like
_API_ERROR_RE = re.compile(r"StatusCode: (\d+),.*?api error ([^:]+): ([^.]*)", re.S)
# What a store answers when it wants fewer requests: 503 SlowDown (S3, Ceph) or 429
THROTTLE_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class StatsSample:
    """One ``--stats`` line: rclone's cumulative counters at one moment of the run.

    ``elapsed`` (the stats object's ``elapsedTime``, seconds since the stats began) is
    the time axis, because it is monotonic within one rclone process and needs no
    parsing; ``time_utc`` is the line's ``time`` field exactly as written, kept for
    lining runs up with other clocks (UTC with ``Z`` since rclone 1.70, local time with
    an offset before).  ``speed`` is rclone's own rolling average (exponentially
    weighted since 1.56), kept only for reference: use :func:`rate_series` for rates.
    """

    elapsed: float
    time_utc: str
    bytes: int
    total_bytes: int
    transfers: int
    total_transfers: int
    errors: int
    retry_error: bool
    speed: float


@dataclass(frozen=True)
class RcloneLog:
    """Everything cloudbench uses from one rclone log file.

    * ``samples``: every stats line, in file order.
    * ``final``: the last stats line (``samples[-1]``), or None if there was none.  It is
      the summary rclone prints on a normal exit, but a log cut short by a kill ends with
      an ordinary periodic line, and nothing in the line says which it is.
    * ``errors``: each error-or-worse message, in order, as ``"<object>: <msg>"`` when
      rclone names an object (that is how its text log renders them, and the object is
      usually the file that failed), else ``"<msg>"``.  Two deliberate deviations from
      the raw level: ``"Attempt N/M succeeded"`` is left out (rclone logs it at ERROR but
      it reports success), and the command's final verdict ``"Failed to <cmd>: ..."`` is
      included although rclone logs it at NOTICE.
    * ``retries``: how many times rclone started the whole command again, i.e. the number
      of ``"Attempt N/M failed"`` messages with N < M.  rclone's retry loop logs that
      message and then starts attempt N+1 (after ``--retries-sleep``), so N < M is exactly
      "was followed by another attempt"; the message for the last attempt (N == M) is not
      a retry, nor is ``"Attempt N/M succeeded"``.  Hence ``retries`` equals the number of
      ``Attempt`` messages minus the ``N/M failed`` one with N == M (if any) minus the
      ``succeeded`` one (if any).  Runs stopped by ``"Fatal error received"`` or ``"Can't
      retry any of the errors"`` log no Attempt message for that try.
    * ``low_level_retries``: how many times rclone itself sent an API call or an object's
      whole copy again (``--low-level-retries``): the messages ``"low level retry N/M"``
      with N < M, from the pacer (one API call) or from operations (one object copy,
      "Received error: ... - low level retry 3/10").  N == M is followed by giving up, not
      by another try: on S3 a failing PutObject logs the pacer's "1/1" (it cannot rewind
      the body) and then the copy's "N/10", which is the retry.  A user's store, down 8 s
      of an upload, logged 12 such copies again while ``retries`` and ``request_retries``
      said 0.  They are DEBUG-level, so this is 0 for ``-v`` logs (``version`` None).
    * ``last_error``: ``errors[-1]``; if nothing error-level was logged, the last
      non-empty ``lastError`` of a stats line; else None.
    * ``failed_objects``: the objects error-level messages name, each once, in order, with
      rclone's temporary-file suffix taken off (``f2.bin.850c3052.partial`` is ``f2.bin``):
      the command's verdict ("Failed to copy: corrupted on transfer: md5 hashes differ
      ...") names no object, so this says which chunk it was.
    * ``corrupted``: the command's verdict is rclone's own check of what it delivered
      failing ("Failed to copy: corrupted on transfer: md5 hashes differ ..."): every try
      of a whole retry loop got bytes that are not the source's. That is a finding about
      the data in the store, like ``verify``'s ``corrupt``, not a copy that went wrong.
    * ``hidden_cause``: why rclone could not open the destination, when its only verdict is
      the misleading "is a file not a directory" (a refused connection, a 403): from a
      DEBUG line, so None at ``-v``, and None when nothing was hidden.
    * ``version``: from the DEBUG line ``Version "v1.75.2" starting with parameters ...``,
      without the leading ``v`` (``"1.75.2"``, matching cloudbench.measure.rclone.rclone_version);
      None at ``-v``, which does not log it.
    * ``unparsed_lines``: non-blank lines that are not a JSON object (stderr text, a
      truncated last line, ...) or whose stats object has unusable values.
    * ``throttled``: responses with status 503 (SlowDown) or 429 (Too Many Requests),
      from the SDK's response dumps; ``server_errors``: other 5xx responses;
      ``request_retries``: requests the SDK sent again (any cause: throttling, a 5xx, a
      broken connection; a whole-object PUT that rclone retries itself shows as "low level
      retry" instead, counted in ``low_level_retries``). All three None when the SDK logged
      nothing, i.e. the copy did not log them (not S3, or written without the flags): not
      counted is not 0. A store that answers nothing (down) leaves retries, no responses.
    """

    samples: tuple[StatsSample, ...]
    final: StatsSample | None
    errors: tuple[str, ...]
    retries: int
    low_level_retries: int
    last_error: str | None
    version: str | None
    unparsed_lines: int = 0
    throttled: int | None = None
    server_errors: int | None = None
    request_retries: int | None = None
    hidden_cause: str | None = None
    failed_objects: tuple[str, ...] = ()
    corrupted: bool = False


def short_cause(text: str) -> str:
    """The part of an SDK error a person acts on: the network failure, or the status and
    the store's error code and message; else the text itself."""
    if net := _NETWORK_RE.search(text):
        return net.group(0)
    if api := _API_ERROR_RE.search(text):
        return f"HTTP {api.group(1)} {api.group(2)}: {api.group(3).strip()}".rstrip(": ")
    return text.strip()


def network_cause(text: str) -> str | None:
    """The last network failure named in ``text`` (an error, a log), e.g. "dial tcp
    127.0.0.1:9000: connect: connection refused"; None if it names none."""
    found = _NETWORK_RE.findall(text)
    return found[-1] if found else None


def stats_sample(record: Mapping[str, Any], stats: Mapping[str, Any]) -> StatsSample:
    """Build a StatsSample; missing counters read as 0 (older rclones lack a few keys)."""
    return StatsSample(
        elapsed=float(stats.get("elapsedTime") or 0.0),
        time_utc=str(record.get("time", "")),
        bytes=int(stats.get("bytes") or 0),
        total_bytes=int(stats.get("totalBytes") or 0),
        transfers=int(stats.get("transfers") or 0),
        total_transfers=int(stats.get("totalTransfers") or 0),
        errors=int(stats.get("errors") or 0),
        retry_error=bool(stats.get("retryError", False)),
        speed=float(stats.get("speed") or 0.0),
    )


def _is_error(record: Mapping[str, Any], msg: str) -> bool:
    """Whether a non-stats record belongs in RcloneLog.errors (see its docstring)."""
    level = str(record.get("level", "")).lower()
    if level in _ERROR_LEVELS:
        m = _ATTEMPT_RE.match(msg)
        return not (m and m.group(3) == "succeeded")
    # The final verdict: NOTICE (logrus-era: warning), no object, from cmd/.
    return (
        level in ("notice", "warning")
        and "object" not in record
        and str(record.get("source", "cmd/")).startswith("cmd/")
        and VERDICT_RE.match(msg) is not None
    )


def parse_rclone_log(lines: Iterable[str]) -> RcloneLog:
    """Parse one rclone ``--use-json-log`` file, given as an iterable of lines.

    Never raises on content: a line that is not a JSON object, or a stats object whose
    values cannot be read, is counted in ``unparsed_lines`` and skipped, because a
    measurement whose log has one garbled line still has a usable result.  Blank lines
    are ignored without being counted.
    """
    samples: list[StatsSample] = []
    errors: list[str] = []
    failed: list[str] = []
    retries = low_level = unparsed = 0
    statuses: list[int] = []
    sdk_retries = 0
    stats_last_error: str | None = None
    version: str | None = None
    unchecked: str | None = None
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            unparsed += 1
            continue
        if not isinstance(record, dict):
            unparsed += 1
            continue
        stats = record.get("stats")
        if isinstance(stats, dict):
            try:
                samples.append(stats_sample(record, stats))
            except (TypeError, ValueError):
                unparsed += 1
                continue
            if stats.get("lastError"):
                stats_last_error = str(stats["lastError"])
            continue
        msg = str(record.get("msg", ""))
        if response := _RESPONSE_RE.match(msg):
            statuses.append(int(response.group(1)))
            continue
        if hidden := _UNCHECKED_RE.match(msg):
            unchecked = short_cause(hidden.group(1))
            continue
        if _SDK_RETRY_RE.match(msg):
            sdk_retries += 1
            continue
        attempt = _ATTEMPT_RE.match(msg)
        if attempt and attempt.group(3) == "failed":
            if int(attempt.group(1)) < int(attempt.group(2)):
                retries += 1
        if (low := _LOW_LEVEL_RE.search(msg)) and int(low.group(1)) < int(low.group(2)):
            low_level += 1
        if version is None:
            v = _VERSION_RE.search(msg)
            if v:
                version = v.group(1)
        if _is_error(record, msg):
            obj = record.get("object")
            errors.append(f"{obj}: {msg}" if obj not in (None, "") else msg)
            if obj not in (None, ""):
                name = _PARTIAL_RE.sub("", str(obj))
                if name not in failed:
                    failed.append(name)
    counted = bool(statuses) or sdk_retries > 0  # the SDK logged (a dead store answers none)
    return RcloneLog(
        samples=tuple(samples),
        final=samples[-1] if samples else None,
        errors=tuple(errors),
        retries=retries,
        low_level_retries=low_level,
        last_error=errors[-1] if errors else stats_last_error,
        version=version,
        unparsed_lines=unparsed,
        throttled=sum(c in THROTTLE_STATUSES for c in statuses) if counted else None,
        server_errors=(
            sum(c >= 500 and c not in THROTTLE_STATUSES for c in statuses) if counted else None
        ),
        request_retries=sdk_retries if counted else None,
        hidden_cause=unchecked if any(HIDDEN_VERDICT_RE.search(e) for e in errors) else None,
        failed_objects=tuple(failed),
        corrupted=bool(errors and VERDICT_RE.match(errors[-1]) and CORRUPTED_RE.search(errors[-1])),
    )


_FRACTION_RE = re.compile(r"(\.\d{6})\d+")


def stamp_epoch(stamp: str) -> float | None:
    """Seconds since the epoch of a log line's ``time`` (UTC ``...Z`` with nanoseconds since
    rclone 1.70, local time with an offset before); None if it does not parse."""
    from datetime import datetime

    try:
        text = _FRACTION_RE.sub(r"\1", stamp.strip()).replace("Z", "+00:00")
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def on_wall_clock(samples: Sequence[StatsSample], start_epoch: float) -> list[StatsSample]:
    """The samples with ``elapsed`` = their line's time stamp - ``start_epoch``: one clock
    for every client of a measurement, and a stall where it happened. Unchanged when a
    stamp does not parse (an unknown log format keeps rclone's own clock)."""
    epochs = [stamp_epoch(s.time_utc) for s in samples]
    if any(e is None for e in epochs):
        return list(samples)
    return [
        replace(s, elapsed=max(0.0, e - start_epoch)) for s, e in zip(samples, epochs, strict=True)
    ]


def rate_series(samples: Iterable[StatsSample]) -> list[tuple[float, int, float]]:
    """Per-interval transfer rate of rclone's stats lines, ``(elapsed s, cumulative bytes,
    bytes/s)`` per sample, by the one convention of every series
    (:func:`cloudbench.measure.series.rates`): byte deltas, never rclone's smoothed
    ``speed``."""
    return series.rates((s.elapsed, s.bytes) for s in samples)


def longest_stall(elapsed: Sequence[float], moved: Sequence[int], interval: float = 1.0) -> float:
    """Seconds of the longest stretch in which the byte count did not grow, on the copy's
    own clock (0: the client started, with nothing moved).

    A store that goes away mid-copy (rclone waits, retries silently at -v and may still
    finish ``ok``) shows as such a stretch; the rate then includes the outage, and this
    says so. So does one that does not answer at the start: rclone prints its first stats
    line once it has reached the store, so a first line ``interval`` seconds (rclone's
    ``--stats 1s``, a destination sampled every second) after the start is a normal start,
    and any later one is a stretch in which nothing can have moved, less the one interval
    in which the first bytes may have (a user's copy waited 39 s on a store that came back,
    and was recorded with no stall). The stretch after the count reached its total is not
    one (:func:`cloudbench.measure.series.counted_all`).
    """
    if not elapsed:
        return 0.0
    # once everything is counted, the rest is buffers draining (series.counted_all)
    end = series.counted_all(moved) + 1
    elapsed, moved = elapsed[:end], moved[:end]
    longest = max(0.0, elapsed[0] - interval)
    start: float | None = 0.0 if moved[0] <= 0 else None
    if start is not None:
        longest = max(longest, elapsed[0])
    for i in range(1, len(moved)):
        if moved[i] <= moved[i - 1]:
            start = elapsed[i - 1] if start is None else start
            longest = max(longest, elapsed[i] - start)
        else:
            start = None
    return round(longest, 3)
