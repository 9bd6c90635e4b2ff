"""The checkout as a new user has it: a fresh copy of it, and the README's campaign file
and commands as written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def fresh_copy(dest: Path) -> Path:
    """The checkout as a clone would have it (plus files not yet committed), no venv/results."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for rel in filter(None, listed.split("\0")):
        src, dst = ROOT / rel, dest / rel
        if not src.is_symlink() and not src.exists():
            continue  # deleted in the working tree
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)
    return dest


def readme_campaign() -> tuple[str, dict]:
    """The campaign file of the README's step 2: its path as the README names it, and its
    contents."""
    text = README.read_text()
    name = re.search(r"Write a campaign file\*\*, e\.g\. `([^`]+)`", text).group(1)
    block = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)
    return name, yaml.safe_load(textwrap.dedent(block))


def readme_commands() -> list[str]:
    """Every ``snakemake ...`` command of the README's campaign section and its cleanup."""
    text = README.read_text()
    section = text[text.index("## A real campaign") : text.index("## Documentation")]
    found = re.findall(r"`(snakemake [^`]+)`", section.replace("\n   ", " "))
    return [c for c in found if "--profile profiles/" in c or c.startswith("snakemake cleanup")]
