"""The one rank interface every multi-process path talks through: barrier, broadcast, gather,
allgather, allreduce, fail, check and settle, and the last exchange of a run that survives a dead
rank. `LocalRanks` is the one-process implementation (no MPI); the MPI one, over the
failure-aware session whose collectives never wait for a dead rank, is measure/mpi/ranks.py.
Suites and benchmarks take a `Ranks` (the CLI makes it) and never call MPI themselves.

Parts of a job that run at the same time each get a sub-group of the ranks: `split_by(colour)`
(as MPI_Comm_split: the ranks that give one colour form a group, in their order) or
`split(shares)` (contiguous blocks of ranks by fractions, `share_blocks`). Each group is a
`Ranks` of its own; the whole stays usable, so every part starts after one barrier of the whole
and ends before the next (one clock for all). `ThreadRanks` are the ranks of a team of threads
in one process, for parts run side by side without MPI.

A collective of the MPI implementation raises `RankFailure` (naming the rank) when a rank failed,
was signalled or vanished, within the rank timeout: no rank waits for ever.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..errors import StorlabError, UserError

__all__ = ["Ranks", "LocalRanks", "ThreadRanks", "RankFailure", "RankGroups", "any_rank", "share_blocks",
           "run_on_threads"]


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

    # -- sub-groups ----------------------------------------------------------------------------------
    def split_by(self, colour: str) -> "Ranks":
        """The group of the ranks that give the same `colour` (collective: every rank calls it),
        ranked in their order here, as MPI_Comm_split with the key = rank. One process: itself
        alone."""
        return LocalRanks()

    def split(self, shares: Mapping[str, float]) -> "RankGroups":
        """The ranks divided into named groups by `shares` (fractions of the ranks, in the given
        order, in contiguous blocks: `share_blocks`); this rank's group and every group's ranks
        (collective). A part whose share gives it no rank has an empty group."""
        members = share_blocks(shares, self.size)
        name = next(n for n, rs in members.items() if self.rank in rs)
        return RankGroups(name, self.split_by(name), members)


class LocalRanks(Ranks):
    """One process, no MPI."""


@dataclass
class RankGroups:
    """The result of `Ranks.split`: this rank's part, its group, and each part's ranks (of the
    whole, in order; empty for a part given no rank)."""
    name: str
    ranks: Ranks
    members: dict[str, list[int]]

    @property
    def sizes(self) -> dict[str, int]:
        return {n: len(rs) for n, rs in self.members.items()}


def share_blocks(shares: Mapping[str, float], size: int) -> dict[str, list[int]]:
    """`size` ranks divided by `shares` into contiguous blocks, in the order given: part k ends at
    rank floor(size x (share 0 + ... + share k)) (as io500's concurrent phase divides them:
    integer truncation of the running sum), the last part takes the rest. Shares are fractions
    from 0 to 1 whose sum is at most 1 (the last part's own share is then what is left); a wrong
    share is refused in one line naming it."""
    if not shares:
        raise UserError("split: no parts to divide the ranks among")
    names = list(shares)
    total = 0.0
    bounds = []
    for name in names:
        share = shares[name]
        if not (isinstance(share, (int, float)) and math.isfinite(share) and 0.0 <= share <= 1.0):
            raise UserError(f"split: share of {name} = {share!r}: allowed: a fraction from 0 to 1")
    for name in names[:-1]:
        total += shares[name]
        if total > 1.0 + 1e-9:
            raise UserError(f"split: shares up to {name} add up to {total:g}: allowed: at most 1")
        # a small tolerance: 0.2 + 0.4 is 0.6000000000000001 in binary; 10 x 0.7 is 7.000000000000001
        bounds.append(min(size, int(size * total + 1e-9)))
    bounds.append(size)
    out, start = {}, 0
    for name, end in zip(names, bounds):
        out[name] = list(range(start, max(start, end)))
        start = max(start, end)
    return out


# -- ranks as threads of one process ----------------------------------------------------------------------
class _Team:
    """What the threads of one team share: a barrier, one slot per member for the exchanges, the
    first failure, and the sub-teams made by its splits."""

    def __init__(self, size: int, timeout_s: float) -> None:
        self.size, self.timeout_s = size, timeout_s
        self.barrier = threading.Barrier(size)
        self.slots: list[Any] = [None] * size
        self.failure: RankFailure | None = None
        self.lock = threading.Lock()
        self.subteams: dict[tuple[int, str], _Team] = {}
        self.parent: _Team | None = None

    def set_failure(self, failure: RankFailure) -> None:
        """A member failed: every team of the whole (its root and every group split from it)
        knows it and its barrier breaks, so no member of any part waits for the failed one."""
        root = self
        while root.parent is not None:
            root = root.parent
        teams = [root]
        while teams:
            team = teams.pop()
            with team.lock:
                if team.failure is None:
                    team.failure = failure
                teams += list(team.subteams.values())
            team.barrier.abort()


class ThreadRanks(Ranks):
    """One rank of a team of threads in one process: the collectives meet at the team's barrier
    and exchange through its slots. A member that fails (or does not come within the team's
    timeout) breaks the barrier, so every other member's collective raises a RankFailure naming
    it instead of waiting."""

    def __init__(self, team: _Team, rank: int, world_rank: int | None = None) -> None:
        self.team, self.rank, self.size = team, rank, team.size
        self.world_rank = rank if world_rank is None else world_rank   # its number in the whole team
        self._splits = 0

    def _meet(self) -> None:
        try:
            self.team.barrier.wait(self.team.timeout_s)
        except threading.BrokenBarrierError:
            failure = self.team.failure
            if failure is None:
                failure = RankFailure(self.world_rank, f"thread rank {self.world_rank}: a member of its team did not "
                                      f"come within {self.team.timeout_s:g} s")
                self.team.set_failure(failure)
            raise RankFailure(failure.rank, failure.args[0]) from None

    def _exchange(self, value: Any) -> list[Any]:
        self.check()
        self.team.slots[self.rank] = value
        self._meet()
        got = list(self.team.slots)
        self._meet()              # every member has read the slots before any writes the next
        return got

    def barrier(self) -> None:
        self.check()
        self._meet()

    def bcast(self, value: Any) -> Any:
        return self._exchange(value if self.rank == 0 else None)[0]

    def gather(self, value: Any) -> list[Any] | None:
        got = self._exchange(value)
        return got if self.rank == 0 else None

    def allgather(self, value: Any) -> list[Any]:
        return self._exchange(value)

    def allreduce(self, value: Any, merge: Callable[[Any, Any], Any]) -> Any:
        got = self._exchange(value)
        out = got[0]
        for v in got[1:]:
            out = merge(out, v)
        return out

    def fail(self, message: str) -> None:
        self.team.set_failure(RankFailure(self.world_rank, f"thread rank {self.world_rank} failed: {message}"))

    @property
    def failure(self) -> RankFailure | None:
        """The first failure of any member of the whole (`_Team.set_failure` tells every team)."""
        return self.team.failure

    def gather_surviving(self, value: Any) -> dict[int, Any] | None:
        """Every member's value that came (a failed team still exchanges what it has: the
        members write their slots, and rank 0 reads them after the others are done)."""
        self.team.slots[self.rank] = value
        try:
            self.team.barrier.wait(self.team.timeout_s)
        except threading.BrokenBarrierError:
            pass
        if self.rank != 0:
            return None
        return {r: v for r, v in enumerate(self.team.slots)}

    def split_by(self, colour: str) -> "ThreadRanks":
        colours = self.allgather(colour)
        mine = [r for r, c in enumerate(colours) if c == colour]
        key = (self._splits, colour)
        self._splits += 1
        with self.team.lock:
            sub = self.team.subteams.get(key)
            if sub is None:
                sub = self.team.subteams[key] = _Team(len(mine), self.team.timeout_s)
                sub.parent = self.team
        return ThreadRanks(sub, mine.index(self.rank), self.world_rank)


def run_on_threads(size: int, work: Callable[[ThreadRanks], Any], timeout_s: float = 60.0) -> list[Any]:
    """Run `work(ranks)` on `size` threads, each a rank of one team; every rank's return value in
    rank order. A rank whose work raised has failed (the others' collectives raise a RankFailure);
    the first error is raised here once every thread has ended."""
    team = _Team(size, timeout_s)
    results: list[Any] = [None] * size
    errors: list[BaseException | None] = [None] * size
    # each thread says when it is done; Thread.join is not used to wait, because a join that a
    # signal interrupts can leave that thread reported dead while it still runs
    done = [threading.Event() for _ in range(size)]
    launched = [False] * size

    def one(rank: int) -> None:
        ranks = ThreadRanks(team, rank)
        try:
            results[rank] = work(ranks)
        except BaseException as e:     # noqa: BLE001 - handed to the caller below
            errors[rank] = e
            ranks.fail(" ".join(str(e).split()) or type(e).__name__)
        finally:
            done[rank].set()

    def wait_all() -> None:
        for event in done:
            while not event.wait(0.1):
                pass

    try:
        for r in range(size):
            thread = threading.Thread(target=one, args=(r,), name=f"storlab-rank-{r}", daemon=True)
            launched[r] = True
            thread.start()
        wait_all()
    except BaseException:
        # a signal in this (the main) thread: the team fails, so every member's next look (the
        # engine's poll, md-workbench's loop, a collective) ends its work; wait for them, so
        # nothing they do outlives the run (its clean-up removes their files next). A member
        # never launched is done already.
        team.set_failure(RankFailure(0, "the ranks' team was stopped: interrupted"))
        for r, event in enumerate(done):
            if not launched[r]:
                event.set()
        wait_all()
        raise
    first = _first_error(errors)
    if first is not None:
        raise first
    return results


def _first_error(errors: Sequence[BaseException | None]) -> BaseException | None:
    """The error to raise for a team: a rank's own error before the RankFailures it caused."""
    own = [e for e in errors if e is not None and not isinstance(e, RankFailure)]
    rest = [e for e in errors if e is not None]
    return (own or rest or [None])[0]


def any_rank(ranks: Ranks, flag: bool) -> bool:
    """Whether any rank's flag is set (also every rank's barrier)."""
    return bool(ranks.allreduce(bool(flag), lambda a, b: a or b))
