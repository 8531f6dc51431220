"""The rank interface (measure/ranks.py) under MPI: a suite's phases talk to the other ranks
through the session's communicator (comm.py), whose collectives never wait for a dead rank:
a rank that raised, was signalled or vanished ends every rank's next barrier or gather with a
RankFailure naming it, within the rank timeout, and the run is kept and scored as far as it got.

`open_ranks` is where a command gets its ranks: `LocalRanks` as one plain process, `CommRanks`
under an MPI launcher. This module imports without mpi4py (MPI is loaded only under a launcher),
so a command calls it whether or not MPI is installed.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ...errors import UserError
from ..launch import Launch, detect
from ..ranks import LocalRanks, RankFailure, Ranks

if TYPE_CHECKING:
    from .comm import Comm
    from .orchestrator import Session

__all__ = ["CommRanks", "open_ranks", "start_ranks"]


class CommRanks(Ranks):
    """Barriers, gathers and broadcasts over a failure-aware communicator of the session (its
    world by default)."""

    def __init__(self, session: Session, comm: Comm | None = None) -> None:
        self.session = session
        self.comm = comm if comm is not None else session.world
        self.rank, self.size = self.comm.rank, self.comm.size
        self.clock_offset_s = session.offsets[session.rank].offset_s   # measured when MPI started

    def barrier(self) -> None:
        self.comm.barrier()

    def gather(self, value: Any) -> list[Any] | None:
        return self.comm.gather(value)

    def allgather(self, value: Any) -> list[Any]:
        return self.comm.allgather(value)

    def allreduce(self, value: Any, merge: Callable[[Any, Any], Any]) -> Any:
        """Merged up the tree (one message of the value's size per rank), then broadcast."""
        return self.comm.bcast(self.comm.reduce(value, merge))

    def bcast(self, value: Any) -> Any:
        return self.comm.bcast(value)

    def fail(self, message: str) -> None:
        """This rank failed: the others' next collective raises a RankFailure naming it."""
        if self.comm.failure is None:
            self.comm.liveness.report(message)
        self.session.exit_code = self.session.exit_code or 1

    @property
    def failure(self) -> RankFailure | None:
        return self.comm.failure

    def settle(self, step: int) -> None:
        """The clean-up's meeting points: rank 0 waits until every rank still alive got here
        (a dead rank drops out through the heartbeats); works after a failure too."""
        from .comm import TAG_CLEANUP, TAG_FINAL

        self.comm.gather_surviving(None, self.comm.liveness.timeout_s, tag=TAG_CLEANUP if step == 1 else TAG_FINAL)

    def split_by(self, colour: str) -> "CommRanks":
        """The group of the ranks that give `colour`, over the communicator's failure-aware
        group (comm.py's Comm.split: no MPI collective, the world's liveness)."""
        return CommRanks(self.session, self.comm.split(colour))

    def gather_surviving(self, value: Any) -> dict[int, Any] | None:
        """The session's final gather: a failure known by then sets every rank's exit code, and
        a failure of rank 0 is said by the others (rank 0 cannot)."""
        got, _ = self.session.final_gather(self.comm, value, self.comm.liveness.timeout_s, None)
        return got if self.rank == 0 else None


def start_ranks(rank_timeout_s: float, launch: Launch | None) -> CommRanks:
    """MPI started for this command (every rank calls this together)."""
    from .orchestrator import Session

    return CommRanks(Session.start(rank_timeout_s, launch))


def open_ranks(rank_timeout_s: float, command: str) -> Ranks:
    """This command's ranks: one plain process without an MPI launcher, else MPI's (one line
    naming what is missing when mpi4py is not installed)."""
    launch = detect()
    if launch is None:
        return LocalRanks()
    try:
        from . import comm  # noqa: F401 - loads mpi4py, which starts MPI
    except ImportError:
        raise UserError(f"storlab {command} under {launch.launcher} needs mpi4py and an MPI: "
                        "pip install 'storlab[mpi]' (see docs/mpi.md)") from None
    return start_ranks(rank_timeout_s, launch)
