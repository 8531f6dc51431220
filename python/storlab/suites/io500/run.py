"""The entry of the IO500 suite: `run(translation, ranks, progress)`, the io500 .ini as translated
by jobs/io500/ run on every rank, rank 0 returning the result document (kind io500).

Every rank (one process; `mpiexec -n N storlab io500 cfg.ini`, or one rank without MPI) runs the
same steps: the config read (rank 0 reads the file, every rank parses it), the folders checked
and made before anything is written, the document begun, each phase of io500's table run in its
order (phases.py), everything made removed (always, signals held), then rank 0 records how the
run ended and scores it (score.py). The ranks meet only through `Ranks` (measure/ranks.py; under
MPI measure/mpi/ranks.py, whose collectives name a failed or vanished rank instead of waiting).
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ...document import header, now_iso
from ...errors import StorlabError, UserError
from ...jobs.io500.phases import MODES, PROPOSALS, Phase, Proposal
from ...jobs.io500.translator import IO500_VERSION, Io500Config, config_from_ini
from ...jobs.translation import Translation
from ...measure.environment import host_environment
from ...measure.ranks import Ranks
from ...signals import STOP
from . import concurrent
from .folders import clean_up, make_phase_folders, open_folders
from .phases import SuitePhase, run_phase, suite_phases
from .score import judge, score_run
from .state import Io500Run, PhaseOutcome, stamp

__all__ = ["run"]


@dataclass
class Ending:
    """How the phases ended on this rank, when not all ran: a signal, or another rank's failure."""
    stopped: str | None = None        # the signal's name
    failed_rank: str | None = None    # another rank's failure, as the communicator names it


def run(translation: Translation, ranks: Ranks, progress: Callable[[str], None] | None = None, *,
        argv: Sequence[str] = (), timestamp: str | None = None, keep: bool = False,
        mode: str = "standard") -> dict[str, Any] | None:
    """Run io500 as `translation` describes on every rank of `ranks`; rank 0 returns the result
    document, the others None. `progress` hears each phase's name as it starts (rank 0).
    `timestamp` names the timestamp folders (default: the start time); `keep` leaves what the
    run made; `mode` is io500's --mode: extended adds its optional phases (md-workbench's
    three, find-easy, find-hard). Refuses an unusable data folder before writing
    anything; a signal stops the run between or inside a phase: the phases done are kept, the
    run is scored as incomplete and what it made is removed. Extended mode also runs io500's
    proposed concurrent phase (concurrent.py), reported apart: the document's `proposals`."""
    cfg = _config(translation, ranks, mode)
    stamp_name = ranks.bcast(timestamp or time.strftime("%Y.%m.%d-%H.%M.%S") if ranks.rank == 0 else None)
    datadir, resultdir, made_datadir = open_folders(cfg, ranks, stamp_name)
    doc = _new_document(translation, cfg, ranks, argv, mode, stamp_name, datadir, resultdir)
    doc["io500"]["datadir_made"] = made_datadir
    state = Io500Run(cfg, ranks, datadir, resultdir, progress, timestamp=stamp_name)
    state.made_datadir = made_datadir
    steps = suite_phases(mode)
    ending = Ending()
    try:
        _prepare(state)
        _run_phases(state, steps, doc, ending, PROPOSALS if mode == "extended" else ())
    finally:
        with STOP.held():
            doc["cleanup"] = _clean_up(state, keep, rank_lost=ending.failed_rank is not None)
    if ranks.rank != 0:
        return None
    planned = [step.phase for step in steps]
    _record_ending(doc, ending, planned)
    score_run(doc, planned, mode)
    doc["finished_at"] = now_iso()
    doc["io500"]["end"] = stamp()
    return doc


# -- the steps, in order --------------------------------------------------------------------------
def _config(translation: Translation, ranks: Ranks, mode: str) -> Io500Config:
    """The run's config: rank 0 reads the .ini, every rank parses the same text. Refuses a mode
    io500 does not have, in one line."""
    with open(translation.source, encoding="utf-8", errors="replace") as f:
        text = ranks.bcast(f.read() if ranks.rank == 0 else None)
    cfg = config_from_ini(text, translation.source)
    if mode not in MODES:
        raise UserError(f"io500 --mode {mode}: io500 has {' and '.join(MODES)}")
    return cfg


def _new_document(translation: Translation, cfg: Io500Config, ranks: Ranks, argv: Sequence[str], mode: str,
                  stamp_name: str, datadir: str, resultdir: str) -> dict[str, Any]:
    """The document before any phase: the header, the io500 section, the job and its translation;
    a stonewall other than io500's rule invalidates the run from the start."""
    doc: dict[str, Any] = {**header("io500", argv=argv),
                           "io500": {"version": IO500_VERSION, "rules": IO500_VERSION,
                                     "mode": mode, "procs": ranks.size, "timestamp": stamp_name,
                                     "datadir": datadir, "resultdir": resultdir,
                                     "config_hash": cfg.config_hash, "stonewall_s": cfg.stonewall_s,
                                     "min_write_s": cfg.min_write_s, "run_invalid": [], "valid": True},
                           "job": translation.job, "translation": translation.record(),
                           "environment": host_environment() if ranks.rank == 0 else {},
                           "warnings": [], "phases": [], "score": {}, "cleanup": None}
    if mode == "extended":
        doc["proposals"] = concurrent.new_section()
    if cfg.stonewall_s != cfg.min_write_s:
        doc["io500"]["run_invalid"].append(f"stonewall-time {cfg.stonewall_s}s != {cfg.min_write_s}s")
    if cfg.drop_caches and os.geteuid() != 0:
        doc["warnings"].append({"code": "drop_caches", "message": "drop-caches = TRUE but storlab is not root: "
                                "the page cache was not dropped"})
    return doc


def _prepare(state: Io500Run) -> None:
    """Learn every rank's node (for IOR's -C -Q and mdtest's -N shifts), then make the folders."""
    state.hosts = list(state.ranks.allgather(socket.gethostname()))
    make_phase_folders(state)


def _run_phases(state: Io500Run, steps: Sequence[SuitePhase], doc: dict[str, Any], ending: Ending,
                proposals: Sequence[Proposal] = ()) -> None:
    """Each phase in io500's order, judged as io500 judges it and added to the document, each
    proposal after the phase it follows (added to the document's proposals); a signal, a phase
    that failed or another rank's failure ends the loop (that phase added as stopped) and tells
    the other ranks."""
    for step in steps:
        out = _guarded(state, step.phase.name, lambda step=step: run_phase(state, step), ending,
                       lambda message, phase=step.phase: doc["phases"].append(_stopped(phase, message)))
        if out is None:
            return
        judge(out, state.cfg)
        doc["phases"].append(out.as_dict())
        if out.error and not out.complete:
            return
        for proposal in (p for p in proposals if p.after == step.phase.name):
            stopped = concurrent.ProposalOutcome(proposal, complete=False)

            def _stop(message: str, stopped=stopped) -> None:
                stopped.error, stopped.invalid = message, [f"phase stopped: {message}"]
                doc["proposals"]["phases"].append(stopped.as_dict())

            got = _guarded(state, proposal.name, lambda proposal=proposal: concurrent.run_proposal(state, proposal),
                           ending, _stop)
            if got is None:
                return
            doc["proposals"]["phases"].append(got.as_dict())


def _guarded(state: Io500Run, name: str, step: Callable[[], Any], ending: Ending,
             stopped: Callable[[str], None]) -> Any:
    """Run one phase (or proposal) on this rank; None when it stopped the run: a signal, this
    rank's error (told to the other ranks) or another rank's failure, which `stopped` records."""
    ranks = state.ranks
    try:
        if STOP.requested:      # a signal that ended an engine wait without raising: no new phase
            raise KeyboardInterrupt
        return step()
    except KeyboardInterrupt:
        ending.stopped = STOP.signal_name or "a signal"
        ranks.fail(f"interrupted by {ending.stopped}")
        stopped(f"interrupted by {ending.stopped}")
        return None
    except StorlabError as e:     # this rank's phase failed, or another rank did (RankFailure)
        message = " ".join(str(e).split())
        if getattr(e, "rank", None) is None:
            ranks.fail(f"{name}: {message}")
        else:
            ending.failed_rank = message
        stopped(message)
        return None


def _stopped(phase: Phase, message: str) -> dict[str, Any]:
    return PhaseOutcome(phase, complete=False, error=message, invalid=[f"phase stopped: {message}"]).as_dict()


def _clean_up(state: Io500Run, keep: bool, rank_lost: bool) -> dict[str, Any]:
    """The document's cleanup section: what the run made removed on every rank (unless `keep`),
    then rank 0 removes the timestamped data folder and the .ini's datadir when it made it."""
    if keep:
        return {"kept": True, "files_removed": 0, "dirs_removed": 0, "errors": []}
    try:
        cleanup = {"kept": False, **clean_up(state, rank_lost=rank_lost)}
    except Exception as e:   # noqa: BLE001 - reported in the document
        cleanup = {"kept": False, "files_removed": None, "dirs_removed": None, "errors": [str(e)]}
    if state.rank == 0:
        made = ([state.datadir] if state.cfg.timestamp_datadir else []) + \
            ([state.cfg.datadir] if state.made_datadir else [])
        for folder in made:      # the timestamped folder, then the .ini's datadir when storlab made it
            try:
                os.rmdir(folder)
            except OSError:
                pass
    return cleanup


def _record_ending(doc: dict[str, Any], ending: Ending, planned: Sequence[Phase]) -> None:
    """Rank 0: the document says how the run ended when not every phase ran: interrupted by a
    signal (with the phases not run), or stopped in a phase (this rank's error or another
    rank's failure); either invalidates the run."""
    phases = doc["phases"]
    done = {p["name"] for p in phases}
    if ending.stopped is not None:
        doc.update(complete=False, stop_reason="interrupted", error=f"interrupted by {ending.stopped}")
        doc["io500"]["run_invalid"].append(f"run interrupted by {ending.stopped}; phases not run: "
                                           + ", ".join(p.name for p in planned if p.name not in done))
        return
    proposed = (doc.get("proposals") or {}).get("phases", [])
    failed = next((p for p in [*phases, *proposed] if not p["complete"] and p["error"]), None)
    if failed is not None:
        by_rank = ending.failed_rank
        doc.update(complete=False, stop_reason="interrupted" if by_rank and "interrupted by" in by_rank else "error",
                   error=failed["error"] if by_rank else f"{failed['name']}: {failed['error']}")
        doc["io500"]["run_invalid"].append(f"run stopped in {failed['name']}: {doc['error']}")
