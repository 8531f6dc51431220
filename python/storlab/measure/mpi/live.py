"""Live figures of an MPI run, gathered on rank 0 while its phases run (`--live`, `--metrics-listen`).

At its progress ticks (the benchmark's wait loop calls the hooks' `poll`) every rank sends rank 0
its phase's counters: bytes, operations, the seconds since the phase started on its own clock,
and whether it has ended, at most every REPORT_EVERY_S and never while its last report is still
on its way (a slow rank 0 gets fewer reports, not a queue of them); the end of a phase always
goes. Rank 0 takes what has arrived at each of its own ticks, and while it waits for the others
(its phase ended first), and hands every report to the sink (the CLI's live figures,
output/live.py). Only counters and durations travel: rank 0 never
compares its wall clock with another host's. The messages are one-way (Comm.post), outside any
collective, so no rank ever waits for them.
"""
from __future__ import annotations

import time
from typing import Any, Protocol, Sequence

from .comm import TAG_LIVE, Comm

__all__ = ["LiveSink", "LiveReports", "REPORT_EVERY_S", "CLOSE_WAIT_S"]

REPORT_EVERY_S = 0.5   # a rank's reports are this far apart at least (the live line: once a second)
CLOSE_WAIT_S = 1.0     # at the end, how long a rank waits for its last reports to leave


class LiveSink(Protocol):
    """Where rank 0's live figures go (output/live.py:LiveFigures)."""

    def start(self, nodes: Sequence[str]) -> None: ...

    def report(self, rank: int, phase_index: int, phase: str, nbytes: int, ops: int, elapsed_s: float,
               done: bool) -> None: ...

    def refresh(self) -> None: ...


class LiveReports:
    """One rank's side of the live figures of one run on `comm` (see the module doc); `wanted`:
    rank 0 keeps figures (every rank knows it from the session's start, orchestrator.Session)."""

    def __init__(self, comm: Comm, sink: LiveSink | None, nodes: Sequence[str], wanted: bool) -> None:
        self.comm = comm
        self.sink = sink if comm.rank == 0 else None
        self.wanted = wanted
        self._last = float("-inf")
        self._sending: list[Any] = []
        if self.sink is not None:
            self.sink.start(nodes)
            comm.while_waiting = self._while_waiting   # rank 0 done first: the others' figures go on

    def tick(self, phase_index: int, phase: str, run: Any, done: bool = False) -> None:
        """This rank's counters now (at a progress tick, or `done` as its phase ends)."""
        if not self.wanted:
            return
        nbytes, ops, elapsed, _finished, _clat_ns = run.progress()
        report = (phase_index, phase, nbytes, ops, elapsed, done)
        if self.sink is not None:
            self.sink.report(0, *report)
            self.take()
            self.sink.refresh()
            self._last = time.monotonic()
            return
        self._sending = [req for req in self._sending if not req.test()[0]]
        now = time.monotonic()
        if not done and (self._sending or now - self._last < REPORT_EVERY_S):
            return
        self._last = now
        self._sending.append(self.comm.post(report, 0, TAG_LIVE))

    def take(self) -> None:
        """Rank 0: hand every report that has arrived to the sink."""
        if self.sink is None:
            return
        for rank, report in self.comm.take_all(TAG_LIVE):
            self.sink.report(rank, *report)

    def _while_waiting(self) -> None:
        """Rank 0 waits for the others (a barrier): take their reports, every REPORT_EVERY_S."""
        now = time.monotonic()
        if now - self._last >= REPORT_EVERY_S:
            self._last = now
            self.take()
            self.sink.refresh()

    def close(self) -> None:
        """The run's phases are over: a rank waits (a little) for its last reports to leave."""
        if self.comm.while_waiting == self._while_waiting:
            self.comm.while_waiting = None
        deadline = time.monotonic() + CLOSE_WAIT_S
        while self._sending and time.monotonic() < deadline:
            self._sending = [req for req in self._sending if not req.test()[0]]
            time.sleep(0.001)
