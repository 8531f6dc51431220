"""The rank interface (measure/ranks.py) under MPI: a suite's phases talk to the other ranks
through the session's communicator (comm.py), whose collectives never wait for a dead rank:
a rank that raised, was signalled or vanished ends every rank's next barrier or gather with a
RankFailure naming it, within the rank timeout, and the run is kept and scored as far as it got.
"""
from __future__ import annotations

from typing import Any

from ..ranks import Ranks
from .comm import TAG_CLEANUP, TAG_FINAL
from .orchestrator import Session

__all__ = ["CommRanks", "start_ranks"]


class CommRanks(Ranks):
    """Barriers, gathers and broadcasts over the session's world communicator."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.comm = session.world
        self.rank, self.size = self.comm.rank, self.comm.size

    def barrier(self) -> None:
        self.comm.barrier()

    def gather(self, value: Any) -> list[Any] | None:
        return self.comm.gather(value)

    def allgather(self, value: Any) -> list[Any]:
        return self.comm.allgather(value)

    def bcast(self, value: Any) -> Any:
        return self.comm.bcast(value)

    def fail(self, message: str) -> None:
        """This rank failed: the others' next collective raises a RankFailure naming it."""
        if self.comm.failure is None:
            self.comm.liveness.report(message)
        self.session.exit_code = self.session.exit_code or 1

    def settle(self, step: int) -> None:
        """The clean-up's meeting points: rank 0 waits until every rank still alive got here
        (a dead rank drops out through the heartbeats); works after a failure too."""
        self.comm.gather_surviving(None, self.comm.liveness.timeout_s, tag=TAG_CLEANUP if step == 1 else TAG_FINAL)


def start_ranks(rank_timeout_s: float, launch) -> CommRanks:
    return CommRanks(Session.start(rank_timeout_s, launch))
