"""pytest fixtures for scheduler tests.

Usage in a test module::

    from tests.infra.fixtures import slurm_cluster  # noqa: F401  (fixture)

    @pytest.mark.scheduler
    def test_something(slurm_cluster):
        out = slurm_cluster.run(["sbatch", "--wrap", "true"])
        env = slurm_cluster.client_env()  # os.environ + SLURM_CONF

The cluster is session-scoped: started once (about 1 s), shared by all tests,
stopped (jobs cancelled, daemons killed) at the end of the session.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.infra.slurm import SlurmCluster, missing_binaries, start_slurm

SKIP_REASON = "slurm-wlm/munge not installed: run `make sysdeps` (apt-get)"


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A running single-node Slurm cluster; skipped only if binaries are missing.

    Any other problem (not root, daemons failing to start) is a test *error*
    with the daemon log tails in the message, never a silent skip.
    """
    if missing_binaries():
        pytest.skip(SKIP_REASON)
    cluster = start_slurm(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster
    finally:
        cluster.stop()
