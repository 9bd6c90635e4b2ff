"""What one job needs to know, cut from the campaign: small, explicit and JSON-serialisable.

Each rule passes only its own slice of the config (as a Snakemake param), so changing one
part of a campaign, say adding a repeat, re-runs only the jobs it concerns and never throws
away measurements that are still valid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from cloudbench.campaign.jobspec import JobSpec
from cloudbench.campaign.labels import Layout, Setting
from cloudbench.campaign.rclone_options import (
    RCLONE_MULTI_THREAD_CHUNK,
    RCLONE_MULTI_THREAD_CUTOFF,
)
from cloudbench.campaign.remote import Remote

if TYPE_CHECKING:  # a job reads its spec without the model: only the workflow makes specs
    from cloudbench.campaign.model import Campaign, Measurement


@dataclass(frozen=True)
class TransferSpec(JobSpec):
    SORTED: ClassVar[bool] = True
    COMPACT: ClassVar[bool] = True

    campaign: str
    bucket: str
    site: str
    upload_site: str
    remote: str
    remote_url: str
    direction: str
    layout_label: str
    repeat: int
    files: tuple[str, ...]
    file_bytes: int
    chunk_width: int
    scratch: str
    seed: str
    setting_label: str = Setting().label  # tool, clients x concurrency (rclone-4x32)
    copy_label: str = Setting().label  # the setting of the upload whose copy it moves
    flags: tuple[str, ...] = ()
    multi_thread_cutoff: int = RCLONE_MULTI_THREAD_CUTOFF
    multi_thread_chunk_size: int = RCLONE_MULTI_THREAD_CHUNK
    min_rclone_version: str = "1.65.0"
    start_tolerance_s: float = 1.0
    command_template: str | None = None  # the command tool's template (that tool only)
    extra: dict[str, Any] = field(default_factory=dict)
    # the upload repeat whose copy a download reads, where it is not its own (repeats: auto)
    copy_repeat: int | None = None

    @property
    def layout(self) -> Layout:
        return Layout.from_label(self.layout_label)

    @property
    def setting(self) -> Setting:
        return Setting.from_label(self.setting_label)

    @property
    def remote_obj(self) -> Remote:
        return Remote(self.remote, self.remote_url, None)

    def campaign_prefix(self, *parts: str) -> str:
        return self.remote_obj.path(self.bucket, self.campaign, *parts)

    @property
    def data_prefix(self) -> str:
        """This copy of the dataset on the remote: one per (layout, repeat).

        Every setting and repeat gets its own prefix, so a repeat really moves the data
        again, and download repeat r reads upload repeat r's copy (with ``repeats: auto``,
        beyond the first rounds, one of theirs: ``copy_repeat``).
        """
        copy = self.copy_repeat or self.repeat
        return self.campaign_prefix("data", self.layout_label, self.copy_label, f"r{copy}")

    @property
    def local_dir(self) -> Path:
        """Where a download measurement puts its data in this site's scratch (sites that
        share a scratch path, or ``site: all`` on one machine, never share a directory)."""
        return (
            Path(self.scratch)
            / self.campaign
            / "download"
            / self.site
            / self.remote
            / self.layout_label
            / self.setting_label
            / f"r{self.repeat}"
        )

    def row_keys(self) -> dict[str, Any]:
        layout, setting = self.layout, self.setting
        return {
            "campaign": self.campaign,
            "site": self.site,
            "remote": self.remote,
            "direction": self.direction,
            "strategy": layout.strategy,
            "layout": layout.label,
            "chunk_bytes": layout.chunk_bytes,
            "setting": self.setting_label,
            "tool": setting.tool,
            "clients": setting.clients,
            "repeat": self.repeat,
        }

    def _fields(self) -> dict[str, Any]:
        # shallow: every field is JSON already (asdict deep-copies each file name, and a
        # large sweep plans thousands of these)
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.copy_repeat is None:  # as before it existed: params unchanged, nothing re-run
            del data["copy_repeat"]
        return data

    @classmethod
    def from_json(cls, text: str) -> TransferSpec:
        data = json.loads(text)
        data["files"] = tuple(data["files"])
        data["flags"] = tuple(data["flags"])
        return cls(**data)


def transfer_spec(campaign: Campaign, m: Measurement) -> TransferSpec:
    chunk = m.layout.chunk_bytes
    return TransferSpec(
        campaign=campaign.name,
        bucket=campaign.bucket,
        site=m.site,
        upload_site=campaign.upload_site.name,
        remote=m.remote,
        remote_url=campaign.remote_named(m.remote).url,
        direction=m.direction,
        layout_label=m.layout.label,
        repeat=m.repeat,
        setting_label=m.setting.label,
        copy_label=campaign.copy_setting(m).label,
        files=tuple(campaign.file_names),
        file_bytes=campaign.file_bytes,
        chunk_width=campaign.chunk_index_width(chunk) if chunk else 0,
        scratch=str(campaign.site_named(m.site).scratch),
        seed=campaign.seed,
        flags=campaign.rclone_flags,
        multi_thread_cutoff=campaign.multi_thread_cutoff,
        multi_thread_chunk_size=campaign.multi_thread_chunk_size,
        min_rclone_version=campaign.min_rclone_version,
        start_tolerance_s=campaign.start_tolerance_s,
        command_template=campaign.template_for(m.setting.tool),
        copy_repeat=copy if (copy := campaign.copy_repeat(m)) != m.repeat else None,
    )
