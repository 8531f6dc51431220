"""The one rank interface every multi-process path talks through: barrier, broadcast, gather,
allgather, allreduce, fail, check and settle, and the last exchange of a run that survives a dead
rank. `LocalRanks` is the one-process implementation (no MPI); the MPI one, over the
failure-aware session whose collectives never wait for a dead rank, is measure/mpi/ranks.py.
Suites and benchmarks take a `Ranks` (the CLI makes it) and never call MPI themselves.

A collective of the MPI implementation raises `RankFailure` (naming the rank) when a rank failed,
was signalled or vanished, within the rank timeout: no rank waits for ever.
"""
from __future__ import annotations

from typing import Any, Callable

from ..errors import StorlabError

__all__ = ["Ranks", "LocalRanks", "RankFailure", "any_rank"]


class RankFailure(StorlabError):
    """A rank failed or vanished; the message names it (`rank 2 (node n17) failed: ...`)."""

    def __init__(self, rank: int, message: str) -> None:
        super().__init__(message)
        self.rank = rank


class Ranks:
    """What a multi-process run needs of the other processes. The base class is one process: every
    collective returns at once with this process's own value."""
    rank = 0
    size = 1
    clock_offset_s = 0.0   # this rank's clock against rank 0's: its unix times + this are rank 0's

    def barrier(self) -> None:
        pass

    def bcast(self, value: Any) -> Any:
        """Rank 0's value on every rank."""
        return value

    def gather(self, value: Any) -> list[Any] | None:
        """Every rank's value at rank 0 (in rank order); None on the other ranks."""
        return [value]

    def allgather(self, value: Any) -> list[Any]:
        return [value]

    def allreduce(self, value: Any, merge: Callable[[Any, Any], Any]) -> Any:
        """Every rank's value combined with `merge` (associative and commutative), on every rank."""
        return value

    def fail(self, message: str) -> None:
        """This rank failed: tell the others (their next collective raises a RankFailure)."""

    @property
    def failure(self) -> RankFailure | None:
        """The first failure this rank knows of (its own or another rank's); None in one process."""
        return None

    def check(self) -> None:
        """Raise the failure of a rank, if one is known: for a rank's long local work (an engine
        phase) to stop when another rank failed, without waiting for a collective."""
        failure = self.failure
        if failure is not None:
            raise RankFailure(failure.rank, failure.args[0])

    def settle(self, step: int) -> None:
        """A meeting point of the clean-up that also works after a rank failed."""

    def gather_surviving(self, value: Any) -> dict[int, Any] | None:
        """The last exchange of a run, failed or not: {rank: value} of every rank still alive at
        rank 0 (a gone rank is waited for at most the rank timeout); None on the other ranks."""
        return {self.rank: value}


class LocalRanks(Ranks):
    """One process, no MPI."""


def any_rank(ranks: Ranks, flag: bool) -> bool:
    """Whether any rank's flag is set (also every rank's barrier)."""
    return bool(ranks.allreduce(bool(flag), lambda a, b: a or b))
