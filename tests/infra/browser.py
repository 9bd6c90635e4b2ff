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
import html
import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from cloudbench.report.outputs import REPORT_OUTPUTS, TABLES

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


# --- the campaign report, as a reader opens it ------------------------------------------------
# Shared by the report's browser tests and every test that opens a campaign's report or its
# figures (tests/test_report_browser.py describes the checks).

WINDOW = (1600, 1000)
# every file the report shows as an entry of its own (summary.tsv is checked apart)
REPORT_FIGURES = {
    Path(o.path).name
    for o in REPORT_OUTPUTS.values()
    if o.caption and o.path.startswith("figures/")
}
# every table the report lists (steps.tsv once went missing when a figure took its name)
REPORT_TABLES = {o.path for o in TABLES.values() if o.caption} | {
    o.path for o in REPORT_OUTPUTS.values() if o.caption and o.path.endswith(".tsv")
}  # summary.tsv, scaling.tsv, tools.tsv, latency.tsv: what the pages show, as TSV
CATEGORIES = sorted({o.category for o in REPORT_OUTPUTS.values() if o.category} | {"Tables"})


CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed: `make sysdeps` installs Debian's chromium"
)

# Select one result as the menu's button would (one setView: React batches state updates, a
# second call would undo the first), then wait until its image decoded or its frame is there.
SELECT = """(async (key) => {
  const r = results[key];
  const kind = r.mime_type.startsWith("image/") ? "img" : "html";
  app.setView({navbarMode: "resultinfo", content: kind, contentPath: r.data_uri,
               resultPath: key});
  let img = null, frame = null;
  for (let waited = 0; waited < 10000; waited += 100) {
    await new Promise((done) => setTimeout(done, 100));
    img = Array.from(document.images).find((i) => i.src === r.data_uri) || null;
    frame = Array.from(document.querySelectorAll("iframe")).find((f) => f.src === r.data_uri);
    if ((img && img.complete && img.naturalWidth > 0) || frame) break;
  }
  await new Promise((done) => setTimeout(done, 300));  // the frame's table lays out
  return {img_width: img ? img.naturalWidth : null, iframe: Boolean(frame)};
})(%s)"""


def browser(workdir: Path, size: tuple[int, int] = WINDOW) -> Browser:
    """One Chromium for a test: every page and view it opens shares it."""
    return Browser(CHROMIUM, workdir, size)


def open_page(b: Browser, url: str) -> str:
    """Load ``url`` in ``b``, let it settle; its rendered DOM."""
    b.open(url)
    b.settle()
    return b.dom()


def select_view(b: Browser, key: str) -> dict:
    """Show result ``key`` of the open report, as a click in its menu would."""
    return b.evaluate(SELECT % json.dumps(key))


def ink(png: Path, box: tuple[int, int, int, int] | None = None) -> tuple[float, float]:
    """(grey-level standard deviation, fraction of pixels that differ from the most common
    colour) of a PNG or a region of it: a blank page has both near 0."""
    img = Image.open(png).convert("L")
    if box is not None:
        img = img.crop(box)
    a = np.asarray(img, dtype=float)
    values, counts = np.unique(a.round(), return_counts=True)
    background = values[counts.argmax()]
    return float(a.std()), float((np.abs(a - background) > 8).mean())


def assert_not_blank(png: Path, box=None, min_std: float = 8.0, min_ink: float = 0.01) -> None:
    std, frac = ink(png, box)
    assert std > min_std and frac > min_ink, (
        f"{png.name} looks blank: std {std:.1f}, ink {frac:.3f}"
    )


def keep_screenshots(shots: Path, tag: str) -> None:
    target = os.environ.get("CLOUDBENCH_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for p in shots.glob("*.png"):
            shutil.copy(p, Path(target) / f"{tag}-{p.name}")


def report_results(report: Path) -> dict[str, dict]:
    """The report's embedded ``results`` object: path -> name, caption, mime type, data URI."""
    text = report.read_text()
    m = re.search(r"^\s*var results = (\{.*\});\s*$", text, re.MULTILINE)
    assert m, "no results object in the report"
    return json.loads(m.group(1))


def check_report_in_browser(report: Path, workdir: Path, expected: set[str]) -> dict[str, dict]:
    """Every check on one report; returns its results object. Screenshots go to workdir/shots."""
    shots = workdir / "shots"
    shots.mkdir(exist_ok=True)
    results = report_results(report)
    names = {r["name"] for r in results.values()}
    assert expected <= names, f"missing from the report: {sorted(expected - names)}"

    with browser(workdir) as b:
        # the landing page: the menu lists every category, the page renders, no errors
        dom = open_page(b, report.as_uri())
        for cat in CATEGORIES:
            assert cat in dom, f"category {cat!r} not in the rendered menu"
        assert b.errors == [], b.errors
        assert_not_blank(b.screenshot(shots / "report.png"))

        # each figure and table, selected one after the other as clicks in the menu would
        for key, r in sorted(results.items()):
            if r["mime_type"] not in ("image/png", "text/html"):
                continue
            shown = select_view(b, key)
            shot = shots / f"view-{Path(r['name']).stem}-{r['mime_type'].split('/')[1]}.png"
            b.screenshot(shot)
            assert b.errors == [], (key, b.errors)
            text = html.unescape(re.sub(r"<[^>]+>", " ", b.dom()))
            for word in html.unescape(re.sub(r"<[^>]+>", " ", r["caption"])).split()[:6]:
                assert word in text, f"caption of {key} not shown ({word!r} missing)"
            if r["mime_type"] == "image/png":
                width = shown["img_width"]
                assert width is not None and width > 300, f"{key} did not decode: {width}"
            else:
                assert shown["iframe"], f"{key} not shown in a frame"
            # the content area is the right half (the left half holds the menu and caption)
            assert_not_blank(shot, box=(WINDOW[0] // 2 + 10, 0, WINDOW[0], WINDOW[1]))
    keep_screenshots(shots, "report")
    return results


def check_outputs_in_browser(paths: list[Path], workdir: Path, tag: str) -> dict[str, str]:
    """Open each figure PNG and HTML table on its own: not blank, no errors; returns the DOMs
    of the HTML files."""
    shots = workdir / f"shots-{tag}"
    shots.mkdir(exist_ok=True)
    doms = {}
    pages = []
    for p in paths:
        assert p.stat().st_size > 0, p
        if p.suffix == ".json":  # data for monitoring (routes.json): it parses
            json.loads(p.read_text())
            continue
        if p.suffix == ".prom":  # Prometheus' text format: a sample on every other line
            assert all(line.startswith("#") or line.rsplit(" ", 1)[1].replace(".", "").isdigit()
                       for line in p.read_text().splitlines()), p  # fmt: skip
            continue
        if p.suffix != ".png":
            pages.append(p)
            continue
        # a PNG decodes whole and is not blank (a browser adds nothing a decoder does
        # not check: each figure is also shown in the report, in Chromium, above)
        with Image.open(p) as img:
            img.load()
            assert min(img.size) > 100, (p.name, img.size)
        assert_not_blank(p)
    if pages:
        with browser(workdir) as b:
            for p in pages:
                doms[p.name] = open_page(b, p.as_uri())
                shot = b.screenshot(shots / f"file-{p.stem}-{p.suffix[1:]}.png")
                assert "<table" in doms[p.name], p.name
                assert b.errors == [], (p.name, b.errors)
                assert_not_blank(shot)
    keep_screenshots(shots, tag)
    return doms
