"""An S3 store that throttles: an HTTP proxy on 127.0.0.1 in front of a real S3 server that
answers some requests with 503 SlowDown, as AWS and Ceph do under load, and forwards the
rest untouched (headers as sent, so signatures still check).

Which requests: every ``every``-th request whose method is in ``methods`` (by default the
ones that write data: PUT and POST) and whose path holds ``within`` (e.g. a timed copy's
objects, not the bookkeeping beside them), at most ``limit`` in all, so a client's retries
succeed and the count is known. A refusal may come ``answer_after_s`` late, as from a store
too busy to answer at once: a copy then lasts at least that long per refusal per connection,
whatever the machine's speed. Runs in a thread of the calling process for the ``with``
block.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


@dataclass
class Throttle:
    port: int
    every: int
    limit: int
    methods: frozenset[str]
    within: str = ""
    answer_after_s: float = 0.0
    refused: list[str] = field(default_factory=list)  # "PUT /bucket/key?partNumber=2", ...
    forwarded: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    seen: int = 0

    def refuse(self, method: str, path: str) -> bool:
        with self.lock:
            if method not in self.methods or self.within not in path:
                return False
            self.seen += 1
            if len(self.refused) < self.limit and self.seen % self.every == 0:
                self.refused.append(f"{method} {path}")
                return True
            self.forwarded += 1
            return False


def _handler(throttle: Throttle, target: int) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet: a test reads ``refused``
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                parts = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
                self.rfile.readline()
                return b"".join(parts)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _any(self) -> None:
            body = self._body()
            if throttle.refuse(self.command, self.path):
                time.sleep(throttle.answer_after_s)
                self.send_response(503, "Slow Down")
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(SLOW_DOWN)))
                self.end_headers()
                self.wfile.write(SLOW_DOWN)
                return
            conn = http.client.HTTPConnection("127.0.0.1", target, timeout=120)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                if body or self.command in ("PUT", "POST"):
                    headers["Content-Length"] = str(len(body))
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status, resp.reason)
                head = self.command == "HEAD"  # its Content-Length is the object's: kept
                for k, v in resp.getheaders():
                    if k.lower() not in HOP_BY_HOP and (head or k.lower() != "content-length"):
                        self.send_header(k, v)
                if not head:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

    return Handler


@contextmanager
def throttling_proxy(
    target_port: int,
    every: int = 3,
    limit: int = 4,
    methods: tuple[str, ...] = ("PUT", "POST"),
    within: str = "",
    answer_after_s: float = 0.0,
) -> Iterator[Throttle]:
    """503 SlowDown for every ``every``-th ``methods`` request under ``within``, ``limit``
    times, each ``answer_after_s`` after the request (module doc)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    throttle = Throttle(
        server.server_address[1], every, limit, frozenset(methods), within, answer_after_s
    )
    server.RequestHandlerClass = _handler(throttle, target_port)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield throttle
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
