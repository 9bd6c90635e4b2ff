"""Every client that can move a copy, by name: what it can do, and where its code lives.

The campaign's catalogue of clients: the campaign model, the rules and the report ask this
table what a client can do (its capabilities), never its name; the code that runs a client
(``cloudbench.measure.clients.<name>``) is imported only by the job that measures with it
(:func:`cloudbench.measure.clients.load`). Adding a client is one module in
``measure/clients/`` (a ``CLIENT`` that follows :class:`cloudbench.measure.clients.base.Client`)
and one line here. Here, below the measuring stage, so that the campaign can check a
campaign file against it without importing any client's code.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ClientInfo:
    name: str
    module: str  # the module whose CLIENT runs it
    s3_only: bool = False  # speaks S3 only: needs a named rclone remote of type s3
    multithread: bool = False  # can split one file into parallel streams (strategy multithread)
    needs_template: bool = False  # the campaign's command_template is its command line
    # counts what it moved itself (rclone's stats): an upload's bytes_moved is its count,
    # not the listing's after the copy
    counts_own_bytes: bool = False
    # runs under the campaign's rclone.flags, so a --bwlimit there caps each of its
    # processes (the report says a clients sweep then shows the cap, not the store)
    capped_by_rclone_flags: bool = False
    # How many objects it moves at once, whatever concurrency it is asked: (fewest, most),
    # most None for no limit; a setting is named by what the client does, never by a knob
    # value it does not honour. s3cmd moves one at a time (1, 1): a sweep would run the same
    # command again under another label. s5cmd moves at least 2 (its parallel manager's
    # floor, minNumWorkers): --numworkers 1 moved 2 objects at once through a link capped
    # per connection, both at their cap, as --numworkers 2 did (2026-11-28).
    objects_at_once: tuple[int, int | None] = (1, None)


REGISTRY: dict[str, ClientInfo] = {
    info.name: info
    for info in (
        ClientInfo(
            "rclone",
            "cloudbench.measure.clients.rclone",
            multithread=True,
            counts_own_bytes=True,
            capped_by_rclone_flags=True,
        ),
        ClientInfo(
            "s5cmd", "cloudbench.measure.clients.s5cmd", s3_only=True, objects_at_once=(2, None)
        ),
        ClientInfo("aws", "cloudbench.measure.clients.aws", s3_only=True),
        ClientInfo(
            "s3cmd", "cloudbench.measure.clients.s3cmd", s3_only=True, objects_at_once=(1, 1)
        ),
        ClientInfo("command", "cloudbench.measure.clients.command", needs_template=True),
    )
}
NAMES = tuple(REGISTRY)
S3_ONLY = tuple(n for n, info in REGISTRY.items() if info.s3_only)
TEMPLATED = tuple(n for n, info in REGISTRY.items() if info.needs_template)

# The one pattern of an rclone remote's name (rclone allows letters, digits, ``_``, ``.``,
# ``-`` and spaces inside, as in ``my store:``), for every module that tells a remote from
# a path: ``name:bucket/prefix``; ``C:\`` is a path (a one-letter name is a drive).
REMOTE_NAME = r"[A-Za-z0-9_.][A-Za-z0-9_. -]*?"
_REMOTE_RE = re.compile(rf"^({REMOTE_NAME}):(.*)$", re.DOTALL)


def info_of(name: str) -> ClientInfo:
    """The registry's line for ``name``; one line naming the known clients if none."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown client {name!r}: use one of {', '.join(NAMES)}") from None


def objects_at_once(name: str, asked: int) -> int:
    """The objects ``name`` moves at once when asked for ``asked`` (its registry's range;
    a client the registry does not know: what it is asked)."""
    fewest, most = REGISTRY[name].objects_at_once if name in REGISTRY else (1, None)
    return max(fewest, asked if most is None else min(most, asked))


def concurrency_values(name: str, asked: Iterable[int | None]) -> tuple[int | None, ...]:
    """A sweep's concurrency values as ``name`` honours them, each once, in the order asked;
    None (the job's threads, "auto") is kept where the client has a range: the job applies
    it when it knows its threads."""
    fewest, most = REGISTRY[name].objects_at_once if name in REGISTRY else (1, None)
    out: list[int | None] = []
    for value in asked:
        if value is None:  # "auto", unless the client has one value only (s3cmd: 1)
            done = fewest if fewest == most else None
        else:
            done = objects_at_once(name, value)
        if done not in out:
            out.append(done)
    return tuple(out)


def capped_by_rclone_flags(name: str) -> bool:
    """Whether ``name``'s rates ran under the campaign's rclone flags (an unknown name, a
    client of an older table: no)."""
    info = REGISTRY.get(str(name))
    return bool(info and info.capped_by_rclone_flags)


def split_remote(path: str) -> tuple[str, str] | None:
    """``(name, bucket/prefix)`` of ``name:bucket/prefix``; None for a local path (``C:\\``
    is one) or a connection string (``:s3,...:``)."""
    m = _REMOTE_RE.match(path)
    if not m or len(m.group(1)) < 2:
        return None
    return m.group(1), m.group(2)


def is_remote(path: str) -> bool:
    """``name:bucket/prefix`` (a named rclone remote), not a local path (``C:\\`` is one)."""
    return split_remote(path) is not None
