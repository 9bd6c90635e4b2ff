"""A campaign's command template, read as its words: the ``command`` client's command
line, checked when the campaign is loaded and filled in for every copy.

Pure text work (no process is started), so the campaign model can check a template
without importing the code that runs it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from cloudbench.campaign.secrets import credential_in_value

PLACEHOLDERS = ("src", "dst", "threads", "files_from")


class TemplateError(ValueError):
    """A template that cannot be a command line: one line says why."""


def template_argv(template: str, values: Mapping[str, str]) -> list[str]:
    """A campaign's command template as argv: split like a shell would (quotes respected),
    then each word filled in, so a path with spaces stays one argument.

    Refused with one line: an unknown placeholder, no {src} or {dst}, or a credential in
    the template (it would be visible in ``ps`` and kept in every record).
    """
    try:
        words = shlex.split(template)
    except ValueError as err:
        raise TemplateError(f"command template {template!r}: {err}") from None
    if not words:
        raise TemplateError("command template is empty")
    used = set(re.findall(r"{(\w*)}", template))
    unknown = sorted(used - set(PLACEHOLDERS))
    if unknown:
        raise TemplateError(
            f"command template: unknown placeholder {{{unknown[0]}}}; use "
            + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
        )
    missing = [p for p in ("src", "dst") if p not in used]
    if missing:
        raise TemplateError(f"command template {template!r} lacks {{{missing[0]}}}")
    secret = credential_in_value(template)
    if secret:
        raise TemplateError(
            f"command template holds a credential ({secret}): give it to the tool "
            "through its environment or config file"
        )
    return [w.format_map(dict(values)) for w in words]
