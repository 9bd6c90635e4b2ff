"""Real S3 endpoints for tests, on 127.0.0.1 over a temp directory: ``rclone serve s3``, and
versitygw (an independent S3 gateway that checks signatures and implements multipart
listing), so a behaviour seen against only one of them is the store's, not ours.

Credentials reach clients only through ``RCLONE_CONFIG_<NAME>_*`` environment variables, and
the servers through theirs, never through a command line, as users are told to do.

versitygw is a Go program built once by ``make versitygw`` into a cache outside the
checkout (``$CLOUDBENCH_CACHE``, default ``~/.cache/cloudbench``); tests against it are
skipped, with that command as the reason, where it was not built.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cloudbench.processes import die_with_parent

START_TIMEOUT = 30.0
SERVE_S3, VERSITYGW = "serve-s3", "versitygw"
STORES = (SERVE_S3, VERSITYGW)
VERSITYGW_VERSION = "v1.8.0"  # also in the Makefile's versitygw target


def versitygw_binary() -> Path:
    """Where ``make versitygw`` puts the binary (it may not be there)."""
    cache = os.environ.get("CLOUDBENCH_CACHE") or str(Path.home() / ".cache/cloudbench")
    return Path(cache) / f"versitygw-{VERSITYGW_VERSION}" / "versitygw"


def store_param(store: str):
    """``pytest.param`` for a store, skipped (with how to get it) where it is not built."""
    import pytest

    built = store != VERSITYGW or versitygw_binary().exists()
    reason = f"versitygw not built: run `make versitygw` (needs Go; {versitygw_binary()})"
    return pytest.param(store, id=store, marks=() if built else pytest.mark.skip(reason=reason))


def store_params() -> list:
    """Both stores, for ``@pytest.mark.parametrize("store", store_params())``."""
    return [store_param(s) for s in STORES]


def object_on_disk(path: Path) -> dict | None:
    """A JSON object read from a store's own directory, as the store holds it now (None when
    it holds none). rclone serve s3 replaces an object by removing it and writing it anew, so
    a poll can fall between the two (1150 of 120807 reads during 30 rewrites found nothing;
    CI at stop 45 failed on it); such a poll reads nothing and the next one reads it whole."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class S3Server:
    rclone: str
    root: Path
    port: int
    key: str
    secret: str
    proc: subprocess.Popen | None = None
    store: str = SERVE_S3
    #: more environment for the server's process from its next start (e.g. RCLONE_BWLIMIT:
    #: a rate the server sends at, which no socket buffer on the way can run ahead of)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def own_dir(self) -> Path:
        """The server's own files (its logs), beside its root: the access log names the
        key id of every request, as a store's logs do, so it is the store's, not ours."""
        return self.root.with_name(f"{self.root.name}.server")

    @property
    def access_log(self) -> Path:
        """versitygw's log of every request (one line each, with its S3 action)."""
        return self.own_dir / f"{self.store}-{self.port}.access.log"

    def _command(self) -> tuple[list[str], dict[str, str]]:
        if self.store == VERSITYGW:
            env = {"ROOT_ACCESS_KEY_ID": self.key, "ROOT_SECRET_ACCESS_KEY": self.secret}
            return [
                str(versitygw_binary()), "--port", f"127.0.0.1:{self.port}", "--quiet",
                "--access-log", str(self.access_log), "posix", str(self.root),
            ], env  # fmt: skip
        # rclone reads list flags from the environment as CSV: quote the pair.
        env = {"RCLONE_AUTH_KEY": f'"{self.key},{self.secret}"'}
        return [self.rclone, "serve", "s3", "--addr", f"127.0.0.1:{self.port}", str(self.root)], env

    def client_env(self, name: str = "S3T") -> dict[str, str]:
        """Environment that defines the rclone remote ``<name>:`` for this server."""
        p = f"RCLONE_CONFIG_{name.upper()}_"
        return {
            p + "TYPE": "s3",
            p + "PROVIDER": "Rclone" if self.store == SERVE_S3 else "Other",
            p + "ENDPOINT": f"http://127.0.0.1:{self.port}",
            p + "ACCESS_KEY_ID": self.key,
            p + "SECRET_ACCESS_KEY": self.secret,
            p + "FORCE_PATH_STYLE": "true",
        }

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.own_dir.mkdir(exist_ok=True)
        command, env = self._command()
        self.proc = subprocess.Popen(
            command,
            env={**os.environ, **env, **self.env},
            stdout=subprocess.DEVNULL,
            stderr=open(self.own_dir / f"{self.store}-{self.port}.log", "ab"),  # noqa: SIM115
            preexec_fn=die_with_parent,  # a pytest that crashes, no teardown run, ends it too
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.store} exited with {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.store} did not start listening in time")

    def kill(self) -> None:
        """SIGKILL: a crash, not a graceful shutdown (which lets open requests finish)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None


@contextmanager
def serve_s3(
    rclone: str,
    root: Path,
    key: str = "cbtestkey",
    secret: str = "cbtestsecret",
    port: int | None = None,
    store: str = SERVE_S3,
    env: dict[str, str] | None = None,
) -> Iterator[S3Server]:
    """An S3 server (``store``: serve-s3 or versitygw) for the ``with`` block, with ``env``
    added to its process's environment."""
    server = S3Server(rclone, root, port or free_port(), key, secret, store=store, env=env or {})
    server.start()
    try:
        yield server
    finally:
        server.stop()


#: The rclone remote each store is reached by in a campaign that measures both side by side.
REMOTE_OF = {SERVE_S3: "s3serve", VERSITYGW: "s3versity"}


def built_stores() -> tuple[str, ...]:
    """The stores a test can start here: versitygw only where ``make versitygw`` built it."""
    return tuple(s for s in STORES if s != VERSITYGW or versitygw_binary().exists())


@contextmanager
def both_stores(
    rclone: str, root: Path, key: str = "cbtestkey", secret: str = "cbtestsecret"
) -> Iterator[dict[str, S3Server]]:
    """Every built store at once (``{store: server}``), each over its own directory under
    ``root``: one campaign measures them side by side as two remotes (:func:`remotes_of`),
    where a parametrization would run the whole campaign once per store."""
    servers: dict[str, S3Server] = {}
    try:
        for store in built_stores():
            servers[store] = S3Server(rclone, root / store, free_port(), key, secret, store=store)
            servers[store].start()
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def remotes_of(servers: dict[str, S3Server]) -> dict[str, dict[str, str]]:
    """A campaign's ``remotes``: one per store, named after it."""
    return {store: {"url": f"{REMOTE_OF[store]}:"} for store in servers}


def env_of(servers: dict[str, S3Server]) -> dict[str, str]:
    """The environment that defines every store's remote (:data:`REMOTE_OF`)."""
    env: dict[str, str] = {}
    for store, server in servers.items():
        env |= server.client_env(REMOTE_OF[store])
    return env
