"""A site's native client (uplink, azcopy, globus-url-copy) as the campaign's command
template: ``{src}``, ``{dst}``, ``{threads}`` and ``{files_from}`` filled in per copy."""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from cloudbench.campaign.template import TemplateError, template_argv
from cloudbench.measure.clients.base import ClientError, CopyRequest, ExternalClient, ToolCommand


class Command(ExternalClient):
    name = "command"

    def command(self, copy: CopyRequest) -> ToolCommand:
        if not copy.template:
            raise ClientError("tool command needs a template (tools.command)")
        listing = copy.workdir / "files-from.txt"
        out_files = {listing: "".join(f"{n}\n" for n in copy.files or ())}
        values = {"src": copy.src, "dst": copy.dst, "threads": str(copy.concurrency)}
        try:
            argv = template_argv(copy.template, values | {"files_from": str(listing)})
        except TemplateError as err:
            raise ClientError(str(err)) from None
        return ToolCommand(self.name, argv, {}, out_files, whole_environment=True)

    def user_command(self, copy: CopyRequest) -> list[str]:
        """The template filled in for the whole directory, as it ran; a ``{files_from}``
        in it names a list the user writes (the measurement wrote its share's objects)."""
        cmd = self.command(replace(copy, files=None, instrumented=False))
        notes = ["# credentials: wherever your own client reads them (the template holds none)"]
        if "{files_from}" in (copy.template or ""):
            listing = next(iter(cmd.files))
            notes.append(
                f"# {shlex.quote(str(listing))}: the names of the files to copy, one per line, "
                "relative to the source directory"
            )
        return [*notes, shlex.join(cmd.argv)]

    def version(self, binary: str) -> str | None:
        return None  # a template's tool has no known way to say its version

    def check(self, remote_prefixes: Sequence[str], template: str | None) -> list[str]:
        """The template's executable is on this site's PATH (or a file)."""
        if not template:
            return []
        exe = shlex.split(template)[0]
        if shutil.which(exe) or Path(exe).is_file():
            return []
        return [f"command_template: {exe} not found on this site's PATH"]


CLIENT = Command()
