"""What arrived: the objects a copy should have left at its destination against what is there.

A client's exit status says what the client believes; the destination says what happened.
Every upload is checked by one untimed listing of its prefix before its manifest is
published, whatever client moved it, so a client that exits 0 having moved nothing (a
template that only echoes, a wrong prefix) is a failed measurement, never a huge rate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MOVED_FROM_LISTING = "destination listing after the copy"


def object_sizes(files: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each object of these manifest entries with its size: a plain file is one object;
    a chunked file's chunks are whole ``chunk_bytes`` but the last, which holds the rest."""
    out: dict[str, int] = {}
    for f in files:
        chunks = f.get("chunks")
        if not chunks:
            out[f["object"]] = int(f["bytes"])
            continue
        size, left = int(f["chunk_bytes"]), int(f["bytes"])
        for c in chunks:
            out[c["object"]] = min(size, left)
            left -= out[c["object"]]
    return out


@dataclass(frozen=True)
class Arrival:
    """How much of what was expected is at the destination, object by object."""

    objects_expected: int
    bytes_expected: int
    objects_found: int  # present with the expected size
    bytes_found: int  # bytes of expected objects that are present (any size, capped)
    missing: tuple[str, ...] = field(default=())
    wrong_size: tuple[str, ...] = field(default=())

    @property
    def whole(self) -> bool:
        return not self.missing and not self.wrong_size

    def problem(self, who: str = "the copy") -> str | None:
        """One sentence for a record's error, naming a few of the objects; None if whole."""
        if self.whole:
            return None
        named = [*self.missing[:3], *self.wrong_size[:3]][:3]
        return (
            f"{who} exited without error but {self.objects_found} of {self.objects_expected} "
            f"objects ({self.bytes_found} of {self.bytes_expected} bytes) are at the "
            f"destination (e.g. {', '.join(named)})"
        )


def compare(expected: Mapping[str, int], found: Mapping[str, int]) -> Arrival:
    """``expected`` and ``found`` map object names (relative to the copy's prefix) to sizes;
    objects found that were not expected are ignored (they belong to no measurement)."""
    missing = tuple(sorted(n for n in expected if n not in found))
    wrong = tuple(sorted(n for n in expected if n in found and found[n] != expected[n]))
    return Arrival(
        objects_expected=len(expected),
        bytes_expected=sum(expected.values()),
        objects_found=len(expected) - len(missing) - len(wrong),
        bytes_found=sum(min(found[n], expected[n]) for n in expected if n in found),
        missing=missing,
        wrong_size=wrong,
    )


# --- the listing kept beside a record ------------------------------------------------------

LISTING_HEADER = ("object", "bytes", "modified_epoch")


def write_listing(path: Path, entries: Mapping[str, tuple[int, float | None]]) -> None:
    """What a copy left at its destination (object, bytes, when it was last written), kept
    beside the record: a client without a timed log of its own is traced by it (its bytes,
    and when its last object landed). Names, sizes and times only: nothing secret."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["\t".join(LISTING_HEADER)]
    for name in sorted(entries):
        size, modified = entries[name]
        lines.append(f"{name}\t{size}\t{'' if modified is None else f'{modified:.3f}'}")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def read_listing(path: Path) -> dict[str, tuple[int, float | None]]:
    """A listing :func:`write_listing` kept."""
    out: dict[str, tuple[int, float | None]] = {}
    for line in path.read_text().splitlines()[1:]:
        name, size, modified = line.rsplit("\t", 2)
        out[name] = (int(size), float(modified) if modified else None)
    return out
