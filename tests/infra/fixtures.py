"""pytest fixtures for scheduler tests.

Usage in a test module (binding the fixture to a module global is what makes
pytest see it; ``from tests.infra.fixtures import slurm_cluster`` works too
but ruff then reports F811 on every test parameter)::

    from tests.infra import fixtures

    slurm_cluster = fixtures.slurm_cluster

    @pytest.mark.scheduler
    def test_something(slurm_cluster):
        out = slurm_cluster.run(["sbatch", "-o", "/dev/null", "--wrap", "true"])
        env = slurm_cluster.client_env()  # os.environ + SLURM_CONF

Or once for all modules, in the root ``tests/conftest.py``:
``pytest_plugins = ["tests.infra.fixtures"]``.

The cluster is session-scoped: started once (about 1 s), shared by all tests,
stopped (jobs cancelled, daemons killed) at the end of the session.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.infra.slurm import SlurmCluster, missing_binaries, start_slurm

SKIP_REASON = "slurm-wlm/munge not installed: run `make sysdeps` (apt-get)"


# pytest makes a separate session fixture per module that imports it, so the
# cluster itself is shared here: started by the first, stopped by the last.
_shared: dict[str, object] = {"cluster": None, "users": 0}


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A running single-node Slurm cluster; skipped only if binaries are missing.

    Any other problem (not root, daemons failing to start) is a test *error*
    with the daemon log tails in the message, never a silent skip.
    """
    if missing_binaries():
        pytest.skip(SKIP_REASON)
    if _shared["cluster"] is None:
        _shared["cluster"] = start_slurm(tmp_path_factory.mktemp("slurm"))
    cluster = _shared["cluster"]
    assert isinstance(cluster, SlurmCluster)
    _shared["users"] = int(_shared["users"]) + 1
    try:
        yield cluster
    finally:
        _shared["users"] = int(_shared["users"]) - 1
        if _shared["users"] == 0:
            _shared["cluster"] = None
            cluster.stop()
