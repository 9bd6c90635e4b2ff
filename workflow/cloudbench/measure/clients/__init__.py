"""Every client that can move a copy, by name: what it can do, and where its code lives.

The campaign model validates a campaign against this table alone; the code that runs a
client is imported only by the job that measures with it (:func:`load`). Adding a client
is one module in this package (a ``CLIENT`` that follows :class:`.base.Client`) and one
line here.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cloudbench.measure.clients.base import Client


@dataclass(frozen=True)
class ClientInfo:
    name: str
    module: str  # the module whose CLIENT runs it
    s3_only: bool = False  # speaks S3 only: needs a named rclone remote of type s3
    multithread: bool = False  # can split one file into parallel streams (strategy multithread)
    needs_template: bool = False  # the campaign's command_template is its command line


REGISTRY: dict[str, ClientInfo] = {
    info.name: info
    for info in (
        ClientInfo("rclone", "cloudbench.measure.clients.rclone", multithread=True),
        ClientInfo("s5cmd", "cloudbench.measure.clients.s5cmd", s3_only=True),
        ClientInfo("aws", "cloudbench.measure.clients.aws", s3_only=True),
        ClientInfo("command", "cloudbench.measure.clients.command", needs_template=True),
    )
}
NAMES = tuple(REGISTRY)
S3_ONLY = tuple(n for n, info in REGISTRY.items() if info.s3_only)
_REMOTE_RE = re.compile(r"^([A-Za-z0-9_.][A-Za-z0-9_. -]*?):(.*)$")


def load(name: str) -> Client:
    """The client called ``name``, its code imported now."""
    try:
        info = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown client {name!r}: use one of {', '.join(NAMES)}") from None
    return importlib.import_module(info.module).CLIENT


def is_remote(path: str) -> bool:
    """``name:bucket/prefix`` (a named rclone remote), not a local path (``C:\\`` is one)."""
    m = _REMOTE_RE.match(path)
    return bool(m) and len(m.group(1)) > 1
