"""The clients' old front door, kept for callers that name a tool by a string: every fact
about a client now lives in its module under :mod:`cloudbench.measure.clients` (its binary,
its command line, its environment), the S3 plumbing they share in
:mod:`cloudbench.measure.clients.s3`. Nothing here branches on a client's name."""

from __future__ import annotations

import sys  # noqa: F401  (tests point sys.executable elsewhere through this module)
from typing import Any

from cloudbench.binaries import version_number
from cloudbench.campaign import clients as catalogue
from cloudbench.campaign.clients import is_remote
from cloudbench.campaign.rclone_options import remote_env_prefix
from cloudbench.measure import clients
from cloudbench.measure.clients.aws import AWSCLI_VENV
from cloudbench.measure.clients.base import ClientError, CopyRequest, ToolCommand
from cloudbench.measure.clients.s3 import (
    DEFAULT_REGION,
    S3Access,
    not_configured,
    remote_name,
    remote_options,
    s3_access,
    s3_access_from,
    s3_url,
)

TOOLS = catalogue.NAMES
S3_TOOLS = catalogue.S3_ONLY  # tools that speak S3 only, so need an S3 remote
ToolError = (
    ClientError  # a tool is missing, cannot be used with this remote, or a template is wrong
)


def _client(tool: str):
    try:
        return clients.load(tool)
    except ValueError as err:
        raise ToolError(str(err)) from None


def find_tool(tool: str) -> str:
    """The binary of ``tool``: $CLOUDBENCH_<TOOL>, the copy this Python installed, or PATH."""
    return _client(tool).find()


def tool_version(tool: str, binary: str) -> str | None:
    """The version ``tool`` says, kept in every record; None when it says nothing usable."""
    return _client(tool).version(binary)


def copy_command(tool: str, src: str, dst: str, **how: Any) -> ToolCommand:
    """``tool``'s timed copy (``how``: the rest of a :class:`.clients.base.CopyRequest`)."""
    return _client(tool).command(CopyRequest(src, dst, **how))


__all__ = [
    "AWSCLI_VENV", "DEFAULT_REGION", "S3_TOOLS", "TOOLS", "S3Access", "ToolCommand", "ToolError",
    "copy_command", "find_tool", "is_remote", "not_configured", "remote_env_prefix",
    "remote_name", "remote_options", "s3_access", "s3_access_from", "s3_url", "tool_version",
    "version_number",
]  # fmt: skip
