"""The AWS CLI (``aws s3 cp``) as a client: S3 remotes only, its credentials handed over
from the rclone remote in the AWS variables it reads (never on its command line)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from cloudbench.binaries import Binary, beside_python
from cloudbench.measure.clients.s3 import S3Access, S3Client, S3Copy, endpoint_args

# awscli pins docutils<=0.19 and snakemake needs >=0.20, so `make` installs the AWS CLI
# in its own venv inside the main one (<venv>/awscli); a copy beside Python works too.
AWSCLI_VENV = "awscli"


def _candidates() -> list[Path | None]:
    return [*beside_python("aws"), Path(sys.prefix) / AWSCLI_VENV / "bin" / "aws"]


def aws_config_text(access: S3Access, concurrency: int) -> str:
    """The AWS CLI's config file: its s3 transfer settings can only be given here.

    ``max_concurrent_requests`` is how many requests (parts or whole objects) run at
    once, the CLI's counterpart of rclone's transfers x streams.
    """
    lines = [
        "[default]",
        f"region = {access.region}",
        "s3 =",
        f"    max_concurrent_requests = {max(1, concurrency)}",
        f"    max_queue_size = {max(1000, 10 * concurrency)}",
        f"    addressing_style = {'path' if access.path_style else 'virtual'}",
    ]
    return "\n".join(lines) + "\n"


class Aws(S3Client):
    name = "aws"
    binary = Binary("aws", "CLOUDBENCH_AWS", "run `make` (installs it)", candidates=_candidates)
    # botocore's words for a store that does not answer (EndpointConnectionError, its
    # timeouts, a connection closed mid-request); a store that answers is an HTTP error
    network_words = re.compile(
        r"(?:Could not connect to the endpoint URL|(?:Connect|Read) timeout on endpoint URL"
        r'|Connection was closed before we received a valid response from endpoint URL): "[^"]*"'
    )

    def s3_command(self, copy: S3Copy) -> tuple[list[str], dict[str, str], dict[Path, str]]:
        """``aws s3 cp --recursive``; an exact object list as --exclude '*' --include NAME
        (the CLI has no list-file option: fine for hundreds, slow filtering for 10,000s)."""
        pair = [copy.local, copy.url] if copy.direction == "upload" else [copy.url, copy.local]
        cmd = [copy.binary, *endpoint_args(copy.access), "s3", "cp", *pair, "--recursive"]
        cmd += ["--no-progress", "--only-show-errors"]
        if copy.files is not None:
            cmd += ["--exclude", "*"]
            for name in copy.files:
                cmd += ["--include", name]
        config = copy.workdir / "aws.config"
        env = {"AWS_CONFIG_FILE": str(config)}
        if copy.access.endpoint:
            # Non-AWS stores may reject the CRC trailers botocore sends by default since
            # 2025; asking only when required behaves like the older CLIs users compare
            # against.
            env["AWS_REQUEST_CHECKSUM_CALCULATION"] = "when_required"
            env["AWS_RESPONSE_CHECKSUM_VALIDATION"] = "when_required"
        return cmd, env, {config: aws_config_text(copy.access, copy.concurrency)}


CLIENT = Aws()
