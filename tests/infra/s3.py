"""A real S3 endpoint for tests: ``rclone serve s3`` over a temp directory on 127.0.0.1.

Credentials reach rclone clients only through ``RCLONE_CONFIG_<NAME>_*`` environment
variables, never through a command line, exactly as users are told to do.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT = 30.0


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

    def client_env(self, name: str = "S3T") -> dict[str, str]:
        """Environment that defines the rclone remote ``<name>:`` for this server."""
        p = f"RCLONE_CONFIG_{name.upper()}_"
        return {
            p + "TYPE": "s3",
            p + "PROVIDER": "Rclone",
            p + "ENDPOINT": f"http://127.0.0.1:{self.port}",
            p + "ACCESS_KEY_ID": self.key,
            p + "SECRET_ACCESS_KEY": self.secret,
            p + "FORCE_PATH_STYLE": "true",
        }

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        # rclone reads list flags from the environment as CSV: quote the pair.
        env = {**os.environ, "RCLONE_AUTH_KEY": f'"{self.key},{self.secret}"'}
        self.proc = subprocess.Popen(
            [self.rclone, "serve", "s3", "--addr", f"127.0.0.1:{self.port}", str(self.root)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.root.parent / f"serve-s3-{self.port}.log", "ab"),  # noqa: SIM115
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rclone serve s3 exited with {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("rclone serve s3 did not start listening in time")

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
) -> Iterator[S3Server]:
    server = S3Server(rclone, root, port or free_port(), key, secret)
    server.start()
    try:
        yield server
    finally:
        server.stop()
