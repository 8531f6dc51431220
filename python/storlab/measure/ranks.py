"""The one rank interface every multi-process path talks through: barrier, broadcast, gather,
allgather, fail and settle. `LocalRanks` is the one-process implementation (no MPI); the MPI one,
over the failure-aware session whose collectives never wait for a dead rank, is
measure/mpi/ranks.py. Suites and benchmarks take a `Ranks` and never call MPI themselves.
"""
from __future__ import annotations

from typing import Any

__all__ = ["Ranks", "LocalRanks"]


class Ranks:
    """What a multi-process run needs of the other processes. The base class is one process: every
    collective returns at once with this process's own value."""
    rank = 0
    size = 1

    def barrier(self) -> None:
        pass

    def bcast(self, value: Any) -> Any:
        return value

    def gather(self, value: Any) -> list[Any] | None:
        """Every rank's value at rank 0 (in rank order); None on the other ranks."""
        return [value]

    def allgather(self, value: Any) -> list[Any]:
        return [value]

    def fail(self, message: str) -> None:
        """This rank failed: tell the others (their next collective raises)."""

    def settle(self, step: int) -> None:
        """A meeting point of the clean-up that also works after a rank failed."""


class LocalRanks(Ranks):
    """One process, no MPI."""
