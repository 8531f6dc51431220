"""io500's phase table: one record per phase with the facts io500 keeps about it (its `phases[]`
in src/phase-definitions.h and each phase's `u_phase_t` in src/phase_*.c, io500 02091cf).

The translator (translator.py), the suite that runs the phases (suites/io500/, which attaches
each phase's code to its record) and the score all read these records; nothing else lists the
phases. `PHASES`, `PHASES_EXTENDED` and `SCORED` are views of the table, as (name, group) pairs
and names.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Phase", "TABLE", "BY_NAME", "MODES", "phases_of", "PHASES", "PHASES_EXTENDED", "SCORED",
           "extended_sections", "Proposal", "PROPOSALS", "PROPOSAL_SOURCE"]


@dataclass(frozen=True)
class Phase:
    """One of io500's phases. Its .ini section is its name (io500 names both alike)."""
    name: str
    group: str                  # the score group: "BW", "MD", or "" (IO500_NO_SCORE)
    does: str                   # io500's type: "write", "read", "remove"; "" for timestamp (DUMMY)
    family: str                 # what runs it: "ior", "mdtest", "find", "timestamp", "mdworkbench"
    parent: str | None = None   # the family's section: its `run = FALSE` also switches this phase off
    optional: bool = False      # IO500_PHASE_FLAG_OPTIONAL: extended mode only, scored in [SCOREX]
    stonewall: bool = False     # io500's verify_stonewall: the phase must last the stonewall

    @property
    def section(self) -> str:
        return self.name

    @property
    def unit(self) -> str:
        """The unit of its score: bandwidth for IOR, thousands of operations for the rest."""
        return "GiB/s" if self.family == "ior" else "kIOPS"


def _ior(name: str, parent: str, does: str, group: str = "BW", stonewall: bool = False) -> Phase:
    return Phase(name, group, does, "ior", parent, stonewall=stonewall)


def _mdtest(name: str, parent: str, does: str, stonewall: bool = False) -> Phase:
    return Phase(name, "MD", does, "mdtest", parent, stonewall=stonewall)


def _mdworkbench(name: str, group: str, does: str) -> Phase:
    return Phase(name, group, does, "mdworkbench", "mdworkbench", optional=True)


# Every phase in io500's order (the extended mode's; the standard mode leaves the optional out).
TABLE: tuple[Phase, ...] = (
    _ior("ior-easy-write", "ior-easy", "write", stonewall=True),
    _mdtest("mdtest-easy-write", "mdtest-easy", "write", stonewall=True),
    _mdworkbench("mdworkbench-create", "", "write"),
    Phase("timestamp", "", "", "timestamp"),
    Phase("find-easy", "MD", "read", "find", optional=True),
    _ior("ior-hard-write", "ior-hard", "write", stonewall=True),
    _mdtest("mdtest-hard-write", "mdtest-hard", "write", stonewall=True),
    Phase("find", "MD", "read", "find"),
    Phase("find-hard", "MD", "read", "find", optional=True),
    _mdworkbench("mdworkbench-bench", "MD", "write"),
    _ior("ior-easy-read", "ior-easy", "read"),
    _mdtest("mdtest-easy-stat", "mdtest-easy", "read"),
    _ior("ior-hard-read", "ior-hard", "read"),
    _mdtest("mdtest-hard-stat", "mdtest-hard", "read"),
    _mdworkbench("mdworkbench-delete", "", "remove"),
    _mdtest("mdtest-easy-delete", "mdtest-easy", "remove"),
    _mdtest("mdtest-hard-read", "mdtest-hard", "read"),
    _mdtest("mdtest-hard-delete", "mdtest-hard", "remove"),
    _ior("ior-rnd4K-easy-read", "ior-easy", "read", group=""),
)
BY_NAME: dict[str, Phase] = {p.name: p for p in TABLE}
MODES = ("standard", "extended")


def phases_of(mode: str) -> tuple[Phase, ...]:
    """The phases io500 runs in `mode` (standard or extended), in its order."""
    return TABLE if mode == "extended" else tuple(p for p in TABLE if not p.optional)


def extended_sections() -> tuple[str, ...]:
    """The .ini sections of the extended mode only: each optional phase's, after its family's."""
    out: list[str] = []
    for p in TABLE:
        if p.optional:
            out += [s for s in (p.parent, p.section) if s is not None and s not in out]
    return tuple(out)


# views of the table, as io500's result files and the tests read them
PHASES: tuple[tuple[str, str], ...] = tuple((p.name, p.group) for p in phases_of("standard"))
PHASES_EXTENDED: tuple[tuple[str, str], ...] = tuple((p.name, p.group) for p in phases_of("extended"))
SCORED = tuple(name for name, group in PHASES if group)


# -- io500's proposals (not io500 02091cf's phases) ---------------------------------------------------
PROPOSAL_SOURCE = ("github.com/IO500/io500, branch phase-concurrent (commit 2cd466f, 2025-07-05): "
                   "src/phase_concurrent.c, src/phase_ior_rnd1MB.c, src/phase_ior_rnd_write1MB.c")


@dataclass(frozen=True)
class Proposal:
    """A phase io500 proposes but 02091cf does not have: run by storlab in extended mode after the
    phase `after` (its place in the proposal's order), reported apart from io500's phases and
    score (the document's `proposals`), so result.txt and its hashes stay io500 02091cf's."""
    name: str
    after: str                  # the 02091cf phase it follows
    unit: str                   # its score's unit
    does: str


PROPOSALS: tuple[Proposal, ...] = (
    # the file the concurrent phase's random 1 MiB reads read (src/phase_ior_rnd_write1MB.c); the
    # branch runs it after mdtest-easy-write, storlab right before the concurrent phase, so no
    # phase of io500 02091cf (find above all, which would count its file) sees it
    Proposal("ior-rnd1MB-write", after="mdworkbench-bench", unit="GiB/s", does="write"),
    # ior-easy writes, 1 MiB random reads and md-workbench at once on shares of the ranks
    Proposal("concurrent", after="mdworkbench-bench", unit="score", does="write"),
)
