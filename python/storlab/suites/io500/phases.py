"""io500's phases with their code: each record of io500's phase table (jobs/io500/phases.py: name,
score group, what it writes, reads or removes, optional or not, its .ini section) joined with the
function that runs it on one rank (ior.py, mdtest.py, mdworkbench.py, find.py), and `run_phase`, which runs one
between io500's barriers: the phase time is rank 0's clock between them, as IOR and mdtest time a
phase between theirs.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from functools import partial
from typing import Callable

from ...jobs.io500.phases import Phase, phases_of
from ...jobs.io500.translator import io500_command
from . import find, ior, mdtest, mdworkbench
from .state import Io500Run, PhaseOutcome, stamp

__all__ = ["PhaseCode", "CODE", "SuitePhase", "suite_phases", "run_phase", "drop_caches"]

# A phase's code: (this rank's run, the phase's outcome to fill, the monotonic time its clock
# started); it ends with every rank at `run.end(t0)`, which times the phase.
PhaseCode = Callable[[Io500Run, PhaseOutcome, float], None]

# The code of each of io500's phases, by its name.
CODE: dict[str, PhaseCode] = {
    "ior-easy-write": partial(ior.write_phase, hard=False),
    "mdtest-easy-write": partial(mdtest.meta_phase, kind="easy", step="create", sync=True),
    "mdworkbench-create": mdworkbench.create_phase,
    "timestamp": find.timestamp_phase,
    "find-easy": partial(find.find_phase, under="mdtest-easy", hard=False),
    "ior-hard-write": partial(ior.write_phase, hard=True),
    "mdtest-hard-write": partial(mdtest.meta_phase, kind="hard", step="create", sync=True),
    "find": partial(find.find_phase, under="", hard=True),
    "find-hard": partial(find.find_phase, under="mdtest-hard", hard=True),
    "mdworkbench-bench": mdworkbench.bench_phase,
    "ior-easy-read": partial(ior.read_phase, hard=False),
    "mdtest-easy-stat": partial(mdtest.meta_phase, kind="easy", step="stat"),
    "ior-hard-read": partial(ior.read_phase, hard=True),
    "mdtest-hard-stat": partial(mdtest.meta_phase, kind="hard", step="stat"),
    "mdworkbench-delete": mdworkbench.delete_phase,
    "mdtest-easy-delete": partial(mdtest.meta_phase, kind="easy", step="remove"),
    "mdtest-hard-read": partial(mdtest.meta_phase, kind="hard", step="read"),
    "mdtest-hard-delete": partial(mdtest.meta_phase, kind="hard", step="remove"),
    "ior-rnd4K-easy-read": ior.rnd4k_read_phase,
}


@dataclass(frozen=True)
class SuitePhase:
    """One of io500's phases and the code that runs it."""
    phase: Phase
    code: PhaseCode


def suite_phases(mode: str) -> tuple[SuitePhase, ...]:
    """The phases io500 runs in `mode`, in its order, each with its code."""
    return tuple(SuitePhase(p, CODE[p.name]) for p in phases_of(mode))


def _drop_caches(run: Io500Run, phase: Phase) -> None:
    if phase.family != "timestamp":
        drop_caches(run)


def drop_caches(run: Io500Run) -> None:
    """With `drop-caches = TRUE`: sync, then drop this node's page cache (before a phase)."""
    if not run.cfg.drop_caches:
        return
    os.sync()
    try:     # every rank drops its node's cache, as io500 runs the command on every rank
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass     # not root: the document's warnings say so


def run_phase(run: Io500Run, step: SuitePhase) -> PhaseOutcome:
    """Run one phase on this rank (collective): a phase switched off (`run = FALSE`) is reported
    as not run; otherwise every rank meets at a barrier, the clock starts, and the phase's code
    runs. A signal inside it marks the outcome interrupted and propagates."""
    phase = step.phase
    out = PhaseOutcome(phase, exe=io500_command(run.cfg, phase.name, run.datadir, run.resultdir, run.timestamp))
    if phase.family == "mdworkbench":
        mdworkbench.describe(run, out)      # io500 prints its sizes and command even when it is off
    if not run.cfg.runs(phase.name):
        out.ran = False
        return out
    _drop_caches(run, phase)
    run.ranks.barrier()
    out.t_start = stamp()
    if run.progress and run.rank == 0:
        run.progress(phase.name)
    t0 = time.monotonic()
    try:
        step.code(run, out, t0)
    except KeyboardInterrupt:
        out.complete, out.error = False, "interrupted"
        out.seconds = time.monotonic() - t0
        out.t_end = stamp()
        raise
    out.t_end = stamp()
    return out
