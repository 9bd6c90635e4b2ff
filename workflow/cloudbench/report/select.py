"""Rows of a table picked by a view of the measurement's identity (campaign.identity): the
one selector every section uses, below them all so that none imports another to get it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd


def same_keys(table: pd.DataFrame, key: Mapping[str, Any], keys: Sequence[str]) -> pd.Series:
    """Rows of ``table`` whose ``keys`` (a view of the identity) have ``key``'s values."""
    hit = pd.Series(True, index=table.index)
    for k in keys:
        hit &= table[k] == key[k]
    return hit
