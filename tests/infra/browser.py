"""One headless Chromium, driven over the DevTools protocol on a pipe, for the browser tests.

Starting Chromium costs seconds of CPU; the report tests once started it for every view (about
a hundred starts in a suite run on two cores). Here a test starts it once, opens pages, runs
scripts in them, and takes screenshots, as a researcher clicking through the report would.
The protocol runs over ``--remote-debugging-pipe`` (commands on fd 3, replies on fd 4, each
message JSON ended by a NUL byte): no port, no client library.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--remote-debugging-pipe", "--allow-file-access-from-files",
]  # fmt: skip
COMMAND_TIMEOUT = 60.0  # a command that takes longer has hung (seen once in ~100 starts)
START_TRIES = 2


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


class BrowserError(AssertionError):
    """Chromium did not answer, or a page's script threw."""


class Browser:
    """A headless Chromium with one page. ``open`` a URL, ``evaluate`` JavaScript in it,
    ``screenshot`` it; ``errors`` are the console errors and uncaught exceptions of the page
    since it was opened."""

    def __init__(self, binary: str, workdir: Path, size: tuple[int, int] = (1600, 1000)):
        self.binary, self.workdir, self.size = binary, workdir, size
        self.errors: list[str] = []
        self._proc: subprocess.Popen | None = None

    # --- lifetime ------------------------------------------------------------------------

    def __enter__(self) -> Browser:
        for attempt in range(START_TRIES):
            try:
                self._start()
                return self
            except BrowserError:
                self._stop()
                if attempt + 1 == START_TRIES:
                    raise
        raise AssertionError("unreachable")

    def __exit__(self, *exc) -> None:
        self._stop()

    def _start(self) -> None:
        self._profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=self.workdir)
        to_child, from_us = os.pipe()  # commands: we write, Chromium reads fd 3
        to_us, from_child = os.pipe()  # replies: Chromium writes fd 4, we read

        def fds() -> None:  # in the child: the pipe ends where Chromium looks for them
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child, from_child)]
            os.dup2(high[0], 3)  # dup2 leaves 3 and 4 inheritable: they survive the exec
            os.dup2(high[1], 4)

        self._stderr = open(Path(self._profile) / "stderr.log", "w+")  # noqa: SIM115
        self._proc = subprocess.Popen(
            [self.binary, *FLAGS, f"--user-data-dir={self._profile}",
             f"--window-size={self.size[0]},{self.size[1]}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
            close_fds=False, preexec_fn=fds, cwd=self.workdir,  # fds of ours are CLOEXEC
        )  # fmt: skip
        os.close(to_child)
        os.close(from_child)
        self._out = os.fdopen(from_us, "wb", buffering=0)
        self._replies: dict[int, queue.Queue] = {}
        self._events: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._next = 0
        self._reader = threading.Thread(target=self._read, args=(to_us,), daemon=True)
        self._reader.start()
        targets = self._send("Target.getTargets", timeout=30)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self._session = self._send(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}
        )["sessionId"]
        for domain in ("Page", "Runtime"):
            self.send(f"{domain}.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.size[0], "height": self.size[1], "deviceScaleFactor": 1,
             "mobile": False},
        )  # fmt: skip

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(timeout=30)
            self._proc = None
            self._stderr.close()
            shutil.rmtree(self._profile, ignore_errors=True)

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()[-3000:]

    # --- the protocol ------------------------------------------------------------------

    def _read(self, fd: int) -> None:
        buf = b""
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 16):
                buf += chunk
                *messages, buf = buf.split(b"\0")
                for raw in messages:
                    msg = json.loads(raw)
                    if "id" in msg and msg["id"] in self._replies:
                        self._replies[msg["id"]].put(msg)
                    else:
                        self._events.put(msg)

    def _send(
        self, method: str, params: dict | None = None, session: str | None = None,
        timeout: float = COMMAND_TIMEOUT,
    ) -> dict:  # fmt: skip
        with self._lock:
            self._next += 1
            ident = self._next
            box = self._replies[ident] = queue.Queue()
        msg: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._out.write(json.dumps(msg).encode() + b"\0")
        try:
            reply = box.get(timeout=timeout)
        except queue.Empty:
            raise BrowserError(f"Chromium did not answer {method} in {timeout:.0f} s") from None
        finally:
            self._replies.pop(ident, None)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply["result"]

    def send(self, method: str, params: dict | None = None) -> dict:
        """A command to the page."""
        return self._send(method, params, self._session)

    def _drain(self, until: str | None = None, timeout: float = COMMAND_TIMEOUT) -> None:
        """Take the page's events (console errors, exceptions) until ``until`` arrives."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if until:
                    event = self._events.get(timeout=max(deadline - time.monotonic(), 0))
                else:
                    event = self._events.get_nowait()
            except queue.Empty:
                if until:
                    raise BrowserError(f"no {until} in {timeout:.0f} s") from None
                return
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                self.errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                            for a in params.get("args", [])))  # fmt: skip
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                what = details.get("exception", {}).get("description", details.get("text"))
                self.errors.append(f"Uncaught {what}")
            elif method == until:
                return

    # --- what a test does ------------------------------------------------------------------

    def open(self, url: str) -> None:
        """Load ``url`` and wait for its load event; the error list starts afresh."""
        self._drain()
        self.errors = []
        self.send("Page.navigate", {"url": url})
        self._drain(until="Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` (a promise is awaited), as JSON."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
        )
        self._drain()
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def settle(self, ms: int = 300) -> None:
        """Let timers, layout and image decoding run (two frames and ``ms`` milliseconds)."""
        self.evaluate(
            "new Promise(r => setTimeout(() => requestAnimationFrame(() => "
            f"requestAnimationFrame(() => r(true))), {ms}))"
        )

    def dom(self) -> str:
        return self.evaluate("document.documentElement.outerHTML")

    def screenshot(self, out: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        out.write_bytes(base64.b64decode(data))
        self._drain()
        return out
