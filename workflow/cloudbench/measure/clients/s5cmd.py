"""s5cmd (parallel S3 transfers, in Go) as a client: S3 remotes only, its credentials
handed over from the rclone remote in the AWS variables it reads (never on its command
line)."""

from __future__ import annotations

from cloudbench.measure.clients.base import ExternalClient


class S5cmd(ExternalClient):
    name = "s5cmd"


CLIENT = S5cmd()
