"""The labels that name a measurement's layout (``chunked-64MiB``) and setting
(``rclone-4x32``) in paths and tables, and reading them back: below the campaign model and the
identity, which both read them (the identity takes a record's tool and strategy from them)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from cloudbench.sizes import parse_size, size_label

STRATEGIES = ("plain", "chunked", "multithread")
AUTO = "auto"  # concurrency: the job's threads (the cores of one node), as without a sweep


class ConfigError(ValueError):
    """A campaign config that asks for something impossible; the message names key and value."""


@dataclass(frozen=True)
class Layout:
    """How the dataset is laid out on the remote for one strategy: whole files or chunks."""

    strategy: str
    chunk_bytes: int  # 0 for whole files

    @property
    def label(self) -> str:
        if self.strategy == "chunked":
            return f"chunked-{size_label(self.chunk_bytes)}"
        return self.strategy

    @property
    def chunk_label(self) -> str:
        return size_label(self.chunk_bytes)

    @classmethod
    def from_label(cls, label: str) -> Layout:
        if label.startswith("chunked-"):
            return cls("chunked", parse_size(label.removeprefix("chunked-")))
        if label not in STRATEGIES:
            raise ConfigError(f"unknown layout label {label!r}")
        return cls(label, 0)


@dataclass(frozen=True)
class Setting:
    """How many clients move a copy at once, and with what parallelism each.

    ``clients`` processes (each on its own node in batch mode) each move their own share of
    the files, started together; ``concurrency`` is each client's rclone parallelism
    (``--transfers`` for plain and chunked, ``--multi-thread-streams`` for multithread),
    None for the job's threads. The label names a measurement's folder: ``rclone-4x32``.
    """

    tool: str = "rclone"
    clients: int = 1
    concurrency: int | None = None

    @property
    def label(self) -> str:
        return f"{self.tool}-{self.clients}x{self.concurrency or AUTO}"

    @classmethod
    @functools.cache
    def from_label(cls, label: str) -> Setting:
        m = _SETTING_RE.match(label)
        if not m:
            raise ConfigError(f"unknown setting label {label!r} (expected e.g. rclone-4x32)")
        conc = m.group(3)
        return cls(m.group(1), int(m.group(2)), None if conc == AUTO else int(conc))


SETTING_PATTERN = r"([a-z0-9]+)-([0-9]+)x([0-9]+|auto)"
_SETTING_RE = re.compile(f"^{SETTING_PATTERN}$")
