"""The AWS CLI (``aws s3 cp``) as a client: S3 remotes only, its credentials handed over
from the rclone remote in the AWS variables it reads (never on its command line)."""

from __future__ import annotations

from cloudbench.measure.clients.base import ExternalClient


class Aws(ExternalClient):
    name = "aws"


CLIENT = Aws()
