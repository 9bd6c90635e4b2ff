"""A campaign's remote, and how paths on it are written: apart from the campaign model, so
that a transfer job, which writes its copy's paths (campaign.spec.TransferSpec), need not
import the model for it."""

from __future__ import annotations

from dataclasses import dataclass

from cloudbench.campaign import clients


@dataclass(frozen=True)
class Remote:
    """One object store (or one region of one) that the campaign measures."""

    name: str
    url: str
    location: tuple[float, float] | None
    # the tools that measure it (remotes.<name>.tools, else the campaign's tools): an S3-only
    # tool on the S3 remote, rclone on a WebDAV one beside it, in one campaign
    tools: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """How reports name it: the rclone remote (``labstore:``) for a named remote, else
        the campaign's name for it (a path or connection string is an address, not a name)."""
        named = clients.split_remote(self.url)
        return f"{named[0]}:" if named else self.name

    @property
    def is_directory(self) -> bool:
        """A local directory to rclone (no colon: no backend, no endpoint), as a demo's or a
        parallel filesystem's "remote" is: nothing there for the latency probe to time."""
        return ":" not in self.url

    def path(self, *parts: str) -> str:
        """The rclone path of ``parts`` under this remote (``name:bucket/x``, ``dir/bucket/x``)."""
        tail = "/".join(p.strip("/") for p in parts if p)
        if self.url.endswith(":"):
            return f"{self.url}{tail}"
        return f"{self.url.rstrip('/')}/{tail}"
