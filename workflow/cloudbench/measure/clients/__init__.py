"""The clients' code, by name: each client is one module here (a ``CLIENT`` that follows
:class:`.base.Client`), named by its line in the campaign's catalogue
(:mod:`cloudbench.campaign.clients`), and imported only by the job that measures with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from cloudbench.campaign.clients import info_of

if TYPE_CHECKING:
    from cloudbench.measure.clients.base import Client


def load(name: str) -> Client:
    """The client called ``name``, its code imported now."""
    return importlib.import_module(info_of(name).module).CLIENT
