"""What one rank's io500 run carries from phase to phase (`Io500Run`: the config, the ranks, the
folders, the counts the writes hand to the reads, the open mdtest runs, the files it made), and
the outcome of one phase as io500 reports it (`PhaseOutcome`)."""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ...jobs.io500.phases import Phase
from ...jobs.io500.translator import Io500Config
from ...measure.ranks import Ranks
from .engine import RankWatch

__all__ = ["GIB", "Io500Run", "PhaseOutcome", "stamp"]

GIB = float(1 << 30)


def stamp() -> str:
    """A time as io500 prints it in result.txt (t_start, t_end, `; END`)."""
    return time.strftime("%Y-%m-%d %H:%M:%S")


@dataclass
class PhaseOutcome:
    """One io500 phase as io500 reports it, plus what storlab saw."""
    phase: Phase
    score: float = 0.0
    seconds: float = 0.0
    ran: bool = True
    invalid: list[str] = field(default_factory=list)    # io500's INVALID messages of the phase itself
    judged: list[str] = field(default_factory=list)     # those io500's main loop adds after it
    pairs: dict[str, Any] = field(default_factory=dict)  # the extra key = value lines of result.txt
    head: dict[str, Any] = field(default_factory=dict)   # those io500 prints before the exe line
    details: dict[str, Any] = field(default_factory=dict)
    t_start: str = ""
    t_end: str = ""
    exe: str | None = None          # the command io500 runs for this phase (result.txt's exe)
    complete: bool = True
    error: str | None = None

    @property
    def name(self) -> str:
        return self.phase.name

    @property
    def valid(self) -> bool:
        return not self.invalid and not self.judged

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "group": self.phase.group, "score": self.score, "seconds": self.seconds,
                "unit": self.phase.unit, "ran": self.ran,
                "valid": self.valid, "invalid": list(self.invalid), "judged": list(self.judged),
                "pairs": dict(self.pairs), "head": dict(self.head),
                "details": self.details, "t_start": self.t_start, "t_end": self.t_end, "exe": self.exe,
                "optional": self.phase.optional,
                "complete": self.complete, "error": self.error}


class Io500Run:
    """One io500 run on this rank: what every phase's code (ior.py, mdtest.py, find.py) reads
    and leaves for the phases after it."""

    def __init__(self, cfg: Io500Config, ranks: Ranks, datadir: str, resultdir: str,
                 progress: Callable[[str], None] | None = None, timestamp: str = "") -> None:
        self.cfg, self.ranks, self.datadir, self.resultdir = cfg, ranks, datadir, resultdir
        self.timestamp = timestamp
        self.progress = progress
        self.rank, self.size = ranks.rank, ranks.size
        # what every engine run's wait calls at its ticks (measure/benchmark.py:wait_for_phase):
        # another rank's failure interrupts this rank's phase
        self.hooks = RankWatch(ranks)
        self.easy_pairs = 0            # transfers each rank wrote in ior-easy-write (after wear-out)
        self.hard_pairs = 0
        self.meta: dict[str, list[Any]] = {}   # "easy"/"hard" -> this rank's MetaRuns (then wear-out's)
        self.meta_made: dict[str, list[dict[str, Any]]] = {}   # how each of them was made (for visitors)
        self.hosts: list[str] = [socket.gethostname()]
        self.timestamp_mtime: float | None = None
        self.made: list[str] = []          # files this rank made (removed at the end)
        self.easy_write_rate: float | None = None   # mdtest-easy-write's score (md-workbench's sizes)
        self.mdworkbench: Any = None       # md-workbench's state between its phases (mdworkbench.py)
        self.made_datadir = False          # rank 0 made the .ini's datadir (removed at the end)
        self.rnd1mb: tuple[str, int, int] | None = None   # ior-rnd1MB-write's (file, region per rank, ranks)

    def easy_file(self, rank: int) -> str:
        base = os.path.join(self.datadir, "ior-easy")
        if self.cfg.easy_unique_dir:
            base = os.path.join(base, str(rank))
        return os.path.join(base, f"ior_file_easy.{rank:08d}")

    @property
    def hard_file(self) -> str:
        return os.path.join(self.datadir, "ior-hard", "file")

    def end(self, t0: float) -> float:
        """The phase's time: the barrier every rank meets at its end, then rank 0's clock."""
        self.ranks.barrier()
        return time.monotonic() - t0
