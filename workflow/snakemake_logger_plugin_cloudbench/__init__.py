"""cloudbench's terminal as a Snakemake logger plugin (``logger: [cloudbench]`` in
profiles/default): Snakemake finds it by its module name and shows its output instead of
its own terminal. The module is only the plugin interface's two classes; what the terminal
says is cloudbench.site.terminal.

``--logger-cloudbench-full`` shows Snakemake's own output as it would without the plugin,
and a dry run (``-n``) always does: the plan of jobs is what a dry run asks for.
"""

# No ``from __future__ import annotations``: Snakemake reads the settings' field types
# (a bool becomes a flag without a value) from the dataclass, as types, not strings.
import logging
import sys
from dataclasses import dataclass, field
from typing import TextIO

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase

from cloudbench.site.terminal import CampaignTerminal


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    full: bool = field(
        default=False,
        metadata={
            "help": "Show Snakemake's own terminal output (every job's banner, its "
            "inputs and outputs, Snakemake's report of each failed job), not cloudbench's "
            "campaign view."
        },
    )


class LogHandler(LogHandlerBase):
    """Writes the terminal (stderr; stdout where Snakemake writes there, a dry run)."""

    settings: LogHandlerSettings | None

    def __post_init__(self) -> None:
        self.full = bool(self.settings and self.settings.full) or bool(self.common_settings.dryrun)
        self.terminal = CampaignTerminal()
        self.closed = False

    @property
    def stream(self) -> TextIO:
        return sys.stdout if self.common_settings.stdout else sys.stderr

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.full:
                said = self.format(record)  # Snakemake's own formatter (has_formatter)
                lines = [said] if said and said != "None" else []
            else:
                lines = self.terminal.lines(record)
            self._write(lines)
        except Exception:
            self.handleError(record)

    def close(self) -> None:
        """The run ended (Snakemake stops its loggers): the terminal's last lines."""
        if not self.full and not self.closed:
            self.closed = True
            self._write(self.terminal.closing())
        super().close()

    def _write(self, lines: list[str]) -> None:
        if lines:
            self.stream.write("".join(f"{line}\n" for line in lines))
            self.stream.flush()

    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        # full: Snakemake's own filter (quietness, shell commands as its flags say)
        return not self.full

    @property
    def has_formatter(self) -> bool:
        return not self.full

    @property
    def needs_rulegraph(self) -> bool:
        return False
