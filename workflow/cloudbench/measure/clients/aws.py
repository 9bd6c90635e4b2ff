"""The AWS CLI (``aws s3 cp``) as a client: S3 remotes only, its credentials handed over
from the rclone remote in the AWS variables it reads (never on its command line)."""

from __future__ import annotations

from cloudbench.measure import tools
from cloudbench.measure.clients.base import CopyJob, ExternalClient


class Aws(ExternalClient):
    name = "aws"

    def command(self, job: CopyJob) -> tools.ToolCommand:
        return tools.copy_command(
            self.name,
            job.src,
            job.dst,
            concurrency=max(1, job.threads),
            files=list(job.objects),
            workdir=job.workdir,
        )


CLIENT = Aws()
