"""A site's native client (uplink, azcopy, globus-url-copy) as the campaign's command
template: ``{src}``, ``{dst}``, ``{threads}`` and ``{files_from}`` filled in per copy."""

from __future__ import annotations

from cloudbench.measure.clients.base import ExternalClient


class Command(ExternalClient):
    name = "command"

    def version(self, binary: str) -> str | None:
        return None  # a template's tool has no known way to say its version


CLIENT = Command()
