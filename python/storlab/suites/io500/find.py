"""io500's timestamp and find phases (src/phase_timestamp.c, src/phase_find*.c): the timestamp
file that find's -newer compares with, and pfind spread over the ranks.

find walks the data folder level by level, each level's folders spread over the ranks; a file
is found when its name holds "01", its size is 3901 bytes and it is newer than the timestamp
file; the rate counts every file looked at (pfind's total-files). The extended mode's find-easy
looks in mdtest-easy by name only, find-hard in mdtest-hard with find's criteria.
"""
from __future__ import annotations

import fnmatch
import os
from typing import Sequence

from ...jobs.io500.translator import HARD_FILE_SIZE
from .state import Io500Run, PhaseOutcome

__all__ = ["FIND_NAME", "find_files", "timestamp_phase", "find_phase"]

FIND_NAME = "*01*"


def find_files(dirs: Sequence[str], newer_than: float | None, size: int | None,
               pattern: str = FIND_NAME) -> tuple[list[str], int, int, int]:
    """Look at the entries of `dirs` (not below): (sub-folders, files looked at, files found, errors).
    A file is found when its name matches `pattern`, its size is `size` and its mtime is later
    than `newer_than` (None: any); the name is tested first, so only matching names are stat'ed
    (find -O1), and none when neither size nor time is asked for."""
    subdirs: list[str] = []
    total = found = errors = 0
    needle = pattern.strip("*") if pattern.startswith("*") and pattern.endswith("*") and "*" not in pattern[1:-1] \
        and "?" not in pattern and "[" not in pattern else None
    for d in dirs:
        try:
            with os.scandir(d) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            subdirs.append(e.path)
                            continue
                    except OSError:
                        errors += 1
                        continue
                    total += 1
                    name = e.name
                    if (needle in name) if needle is not None else fnmatch.fnmatchcase(name, pattern):
                        if size is None and newer_than is None:
                            found += 1
                            continue
                        try:
                            st = e.stat(follow_symlinks=False)
                        except OSError:
                            errors += 1
                            continue
                        if (size is None or st.st_size == size) and (newer_than is None or st.st_mtime > newer_than):
                            found += 1
        except OSError:
            errors += 1
    return subdirs, total, found, errors


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
