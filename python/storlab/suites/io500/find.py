"""io500's timestamp and find phases (src/phase_timestamp.c, src/phase_find*.c): the timestamp
file that find's -newer compares with, and pfind spread over the ranks.

find walks the data folder level by level, each level's folders spread over the ranks; a file
is found when its name holds "01", its size is 3901 bytes and it is newer than the timestamp
file; the rate counts every file looked at (pfind's total-files). The extended mode's find-easy
looks in mdtest-easy by name only, find-hard in mdtest-hard with find's criteria.
"""
from __future__ import annotations

import os
from typing import Sequence

from ..._core import scan_dirs
from ...jobs.io500.translator import HARD_FILE_SIZE
from .state import Io500Run, PhaseOutcome

__all__ = ["FIND_NAME", "find_files", "timestamp_phase", "find_phase"]

# find's -name: io500's *01*, a name holding "01"
FIND_NAME = "*01*"
FIND_NAME_CONTAINS = FIND_NAME.strip("*")


def find_files(dirs: Sequence[str], newer_than: float | None, size: int | None) -> tuple[list[str], int, int, int]:
    """Look at the entries of `dirs` (not below): (sub-folders, files looked at, files found, errors).
    A file is found when its name holds "01" (FIND_NAME), its size is `size` and its mtime is later
    than `newer_than` (None: any); the name is tested first, so only matching names are stat'ed
    (find -O1). The engine scans (meta/scan.rs: readdir's entry types, no stat for the rest), with
    the GIL released."""
    return scan_dirs(list(dirs), FIND_NAME_CONTAINS, size, newer_than)


def timestamp_phase(run: Io500Run, out: PhaseOutcome, t0: float) -> None:
    """Rank 0 makes the timestamp file in the result folder; every rank learns its mtime."""
    path = os.path.join(run.resultdir, "timestampfile")
    if run.rank == 0:
        with open(path, "w"):
            pass
    out.seconds = run.end(t0)
    run.timestamp_mtime = run.ranks.bcast(os.stat(path).st_mtime if run.rank == 0 else None)


def find_phase(run: Io500Run, out: PhaseOutcome, t0: float, under: str, hard: bool) -> None:
    """pfind DATADIR/UNDER [-newer timestampfile -size 3901c] -name *01*, spread over the ranks
    (the first `nproc` of the phase's section); `hard`: with the size and time criteria."""
    nproc = min(run.cfg.ini.get(out.phase.section, "nproc") or run.size, run.size)
    newer = (run.timestamp_mtime if run.timestamp_mtime is not None else 0.0) if hard else None
    size = HARD_FILE_SIZE if hard else None
    frontier = [os.path.join(run.datadir, under) if under else run.datadir]
    total = found = errors = 0
    while frontier:
        mine = frontier[run.rank::nproc] if run.rank < nproc else []
        subdirs, t, f, e = find_files(mine, newer, size)
        total, found, errors = total + t, found + f, errors + e
        frontier = sorted(d for part in run.ranks.allgather(subdirs) for d in part)
    got = run.ranks.allgather((total, found, errors))
    out.seconds = run.end(t0)
    total = sum(g[0] for g in got)
    found = sum(g[1] for g in got)
    out.score = total / out.seconds / 1000
    out.pairs["nproc"] = str(nproc)
    out.pairs["found"] = str(found)
    out.pairs["total-files"] = str(total)
    if found == 0:
        out.invalid.append("Find didn't find anything, this is likely invalid.")
    out.details = {"found": found, "total_files": total, "errors": sum(g[2] for g in got), "nproc": nproc}
