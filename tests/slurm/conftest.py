"""The session's Slurm cluster: started on first use by a test marked `slurm`, stopped at the end of
the session. Where it cannot start (not root, packages missing, a daemon failing) every Slurm test
skips with that reason, which includes the daemon's log tail."""
from __future__ import annotations

import pytest

from .cluster import SlurmCluster, SlurmUnavailable, start_cluster


@pytest.fixture(scope="session")
def slurm_cluster() -> SlurmCluster:
    try:
        cluster = start_cluster(cpus=2)
    except SlurmUnavailable as e:
        pytest.skip(f"Slurm cannot start here: {e}")
    yield cluster
    cluster.stop()
