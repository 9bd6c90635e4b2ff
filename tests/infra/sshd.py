"""A real OpenSSH server on 127.0.0.1 for the launcher's tests, with a key made here.

It runs as a child in the foreground (-D) with its own config, host key and authorized
key in a temp directory, so nothing in /etc/ssh is touched; it is stopped after the test.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cloudbench.processes import die_with_parent
from tests.infra.s3 import free_port

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
START_TIMEOUT = 20.0


@dataclass
class SshServer:
    port: int
    key: Path
    user: str
    workdir: Path | None = None
    proc: subprocess.Popen[bytes] | None = None

    def restart(self) -> None:
        """Stop the server and start it again on the same port, as a host's sshd restart
        (or a reboot of the login node's daemon) does: every connection it held drops."""
        assert self.workdir is not None and self.proc is not None
        _stop(self.proc)
        self.proc = _start(self.workdir, self.port)

    @property
    def host(self) -> str:
        return f"{self.user}@127.0.0.1"

    def client_options(self) -> list[str]:
        return [
            "-i",
            str(self.key),
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "SendEnv=RCLONE_CONFIG_*",
        ]


def available() -> bool:
    return os.path.exists(SSHD) and shutil.which("ssh") is not None and os.geteuid() == 0


@contextmanager
def serve_ssh(workdir: Path) -> Iterator[SshServer]:
    workdir.mkdir(parents=True, exist_ok=True)
    host_key, user_key = workdir / "host_ed25519", workdir / "user_ed25519"
    for key in (host_key, user_key):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    auth = workdir / "authorized_keys"
    auth.write_text(user_key.with_suffix(".pub").read_text())
    auth.chmod(0o600)
    Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory
    port = free_port()
    conf = workdir / "sshd_config"
    conf.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
        f"AuthorizedKeysFile {auth}\nPidFile {workdir / 'sshd.pid'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        "AcceptEnv RCLONE_CONFIG RCLONE_CONFIG_*\nSubsystem sftp internal-sftp\n"
    )
    server = SshServer(port, user_key, os.environ.get("USER", "root") or "root", workdir)
    server.proc = _start(workdir, port)
    try:
        yield server
    finally:
        _stop(server.proc)


def _start(workdir: Path, port: int) -> subprocess.Popen[bytes]:
    """sshd in the foreground with the config in ``workdir``, once it listens on ``port``."""
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(workdir / "sshd_config")],
        stderr=open(workdir / "sshd.log", "ab"),  # noqa: SIM115
        preexec_fn=die_with_parent,  # a pytest that crashes, no teardown run, ends it too
    )
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {(workdir / 'sshd.log').read_text()[-500:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            if time.monotonic() > deadline:
                _stop(proc)
                raise RuntimeError("sshd did not start listening") from None
            time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
