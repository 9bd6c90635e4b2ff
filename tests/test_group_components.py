"""transfers_on=one_allocation needs group-components naming the transfers' group: the run
reads it where Snakemake documents it (the command line and the profiles it names), not
from the running Snakemake's settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudbench.site.jobenv import declared_group_components, group_problem

pytestmark = pytest.mark.unit


def _profile(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(text)
    return folder


def test_a_profile_named_by_path_or_name_declares_the_group(tmp_path):
    site = _profile(tmp_path / "site", "executor: slurm\ngroup-components: [transfers=100000]\n")
    user = tmp_path / "xdg"
    _profile(user / "mine", "group-components: transfers=50\n")
    plain = _profile(tmp_path / "plain", "executor: slurm\n")
    argv = ["--cores", "2", "--profile", str(site), "--configfile", "c.yaml"]
    assert declared_group_components(argv, {}, tmp_path, [user]) == {"transfers": 100000}
    # by name, from the user's config folder
    assert declared_group_components(["--profile", "mine"], {}, tmp_path, [user]) == {
        "transfers": 50
    }
    # $SNAKEMAKE_PROFILE, then the workflow profile; the command line last, and it wins
    env = {"SNAKEMAKE_PROFILE": str(site)}
    argv = ["--workflow-profile", str(plain), "--group-components", "transfers=2", "data=10"]
    assert declared_group_components(argv, env, tmp_path, []) == {"transfers": 2, "data": 10}
    # a name relative to where the command was typed ($PWD), not to --directory's
    typed = {"PWD": str(tmp_path)}
    assert declared_group_components(["--profile", "site"], typed, user, []) == {
        "transfers": 100000
    }
    # a profile without it: nothing declared, and the run stops with the line to add
    declared = declared_group_components(["--profile", str(plain)], {}, tmp_path, [])
    said = group_problem(True, "transfers", declared)
    assert said is not None and "group-components: [transfers=100000]" in said
    assert group_problem(False, "transfers", {}) is None
    # one Snakemake found where this cannot: nothing can be told (no run is refused for it)
    assert declared_group_components(["--profile", "nowhere"], {}, tmp_path, []) is None
    assert declared_group_components(["--workflow-profile", "none"], {}, tmp_path, []) == {}
