#!/usr/bin/env python3
"""Link this checkout's site profiles where Snakemake looks up a bare ``--profile NAME``.

``snakemake --profile tursa`` searches ``$XDG_CONFIG_HOME/snakemake`` (default
``~/.config/snakemake``) and ``/etc/xdg/snakemake``, never ``profiles/``. This links
``profiles/<site>`` to ``<config dir>/snakemake/<site>`` for every site profile (every
directory under ``profiles/`` with a config.yaml, except the workflow profile ``default``,
``local`` and the templates ``slurm`` and ``pbs``), or for the names given.

One line per profile says what was done. A profile of that name that is not a link into
this checkout (a directory of your own, or a link to another checkout) is never touched:
it is reported as refused and the exit status is 1. Running it again changes nothing.

Usage: scripts/link-profiles.py [--dest DIR] [NAME ...]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "profiles"
# Profiles under profiles/ that are not sites, and why.
NOT_SITES = {
    "default": "the workflow profile, applied automatically",
    "local": "no scheduler",
    "slurm": "template",
    "pbs": "template",
}
PROFILE_FILES = ("config.yaml", "profile.yaml")


def snakemake_config_dir() -> Path:
    """Where Snakemake looks up profile names for this user (its own rule, platformdirs)."""
    try:
        from platformdirs import user_config_dir
    except ImportError:  # system python without platformdirs: the same rule on Linux
        if sys.platform == "darwin":
            return Path.home() / "Library" / "Application Support" / "snakemake"
        xdg = os.environ.get("XDG_CONFIG_HOME", "").strip()
        return Path(xdg or Path.home() / ".config") / "snakemake"
    return Path(user_config_dir("snakemake", "snakemake"))


def site_profiles() -> list[str]:
    return sorted(
        d.name
        for d in PROFILES.iterdir()
        if d.is_dir() and d.name not in NOT_SITES and any((d / f).is_file() for f in PROFILE_FILES)
    )


def link_one(name: str, dest_dir: Path) -> tuple[bool, str]:
    """(ok, the line to print) for linking profiles/<name> as dest_dir/<name>."""
    source = PROFILES / name
    dest = dest_dir / name
    if not source.is_dir():
        return False, f"refused  {name}: no profile {source}"
    if dest.is_symlink():
        target = Path(os.path.join(dest.parent, os.readlink(dest)))
        if target.resolve() == source.resolve():
            return True, f"ok       {name}: {dest} already links to {source}"
        try:  # a stale link of ours (into this checkout's profiles/): point it here
            target.resolve().relative_to(PROFILES.resolve())
        except ValueError:
            return False, (
                f"refused  {name}: {dest} links to {target}, not to this checkout; left as it is"
                f" (remove it and run make profiles again to use {source})"
            )
        dest.unlink()
        dest.symlink_to(source, target_is_directory=True)
        return True, f"relinked {name}: {dest} -> {source} (was -> {target})"
    if dest.exists():
        kind = "a directory" if dest.is_dir() else "a file"
        return False, (
            f"refused  {name}: {dest} is {kind} that is not ours; left as it is"
            f" (rename it and run make profiles again to use {source})"
        )
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest.symlink_to(source, target_is_directory=True)
    return True, f"linked   {name}: {dest} -> {source}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="profiles to link (default: every site)")
    parser.add_argument("--dest", type=Path, help="directory to link into (default: Snakemake's)")
    args = parser.parse_args(argv)
    dest_dir = (args.dest or snakemake_config_dir()).expanduser()
    names = args.names or site_profiles()
    ok = True
    for name in names:
        done, line = link_one(name, dest_dir)
        print(line, flush=True)
        ok &= done
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
