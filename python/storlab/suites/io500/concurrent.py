"""io500's proposed concurrent phase (jobs/io500/phases.py `PROPOSALS`, from io500's branch
phase-concurrent): ior-easy writes, random 1 MiB reads of the ior-rnd1MB file and md-workbench's
benchmark run at the same time, each on its share of the ranks (`Ranks.split`), all started by one
barrier of the whole and stopped by one deadline (the stonewall); each part is reported on its own
and the parts together by the proposal's process-weighted score. ior-rnd1MB-write (the same
branch's phase) writes the file the random reads read.

One rank (no MPI, or mpiexec -n 1): the parts run on threads of this process (`run_on_threads`),
the smallest team in which every part with a share gets a thread (5 for the default 0.2/0.4/0.4),
each thread one "process" of the proposal. Proposals are reported apart from io500's phases and
score (the document's `proposals`), so result.txt and its hashes stay io500 02091cf's.
"""
from __future__ import annotations

import copy
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ...errors import TargetError
from ...jobs.io500.ini import io500_hash
from ...jobs.io500.phases import PROPOSAL_SOURCE, Proposal
from ...measure.ranks import Ranks, run_on_threads, share_blocks
from . import mdworkbench
from .engine import RankWatch, io_run, run_io
from .folders import emptied
from .ior import NO_ENGINE_FSYNC, fsync_file, make_sparse, room_per_rank, score_bandwidth
from .phases import drop_caches
from .state import GIB, Io500Run, stamp

__all__ = ["RND1MB", "PARTS", "FOLDERS", "ProposalOutcome", "shares_of", "thread_team_size", "weighted_score",
           "rnd1mb_write_phase", "concurrent_phase", "PROPOSAL_CODE"]

RND1MB = 1 << 20          # the proposal's transfer size (IOR -t=1048576)
PARTS = ("ior-easy-write", "ior-rnd1MB-read", "mdworkbench")     # in the proposal's colour order
UNITS = {"ior-easy-write": "GiB/s", "ior-rnd1MB-read": "GiB/s", "mdworkbench": "kIOPS"}
FOLDERS = ("ior-rnd1MB", "ior-easy-concurrent", "mdworkbench-concurrent")
MAX_THREADS = 64          # one rank: the largest team of threads tried for the shares
TWO_EMPTY = "The concurrent phase doesn't make sense with two benchmarks using 0 processes"


@dataclass
class ProposalOutcome:
    """One proposed phase as the document's `proposals` reports it."""
    proposal: Proposal
    score: float = 0.0
    seconds: float = 0.0
    ran: bool = True
    invalid: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    t_start: str = ""
    t_end: str = ""
    complete: bool = True
    error: str | None = None
    reason: str | None = None       # why it did not run

    @property
    def name(self) -> str:
        return self.proposal.name

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "proposal": True, "unit": self.proposal.unit, "score": self.score,
                "seconds": self.seconds, "ran": self.ran, "reason": self.reason, "valid": not self.invalid,
                "invalid": list(self.invalid), "details": self.details, "t_start": self.t_start,
                "t_end": self.t_end, "complete": self.complete, "error": self.error}


# -- ior-rnd1MB-write --------------------------------------------------------------------------------
def rnd1mb_write_phase(run: Io500Run, out: ProposalOutcome) -> None:
    """ior-rnd1MB-write: 1 MiB writes at random offsets of one shared file (ior-rnd1MB/file), each
    rank within its own region (IOR -z over the rank's blocks), until the stonewall, then one
    fsync per rank (IOR -e). The region is blockSize x segmentCount, or the rank's share of the
    free space if less; the file is sparse at its full size first."""
    cfg, ranks = run.cfg, run.ranks
    folder = os.path.join(run.datadir, "ior-rnd1MB")
    path = os.path.join(folder, "file")
    room = room_per_rank(run, run.size, RND1MB) if run.rank == 0 else None
    region = min(cfg.rnd1mb_block * cfg.rnd1mb_segments, ranks.bcast(room)) // RND1MB * RND1MB
    if region == 0:
        raise TargetError(f"{out.name}: {run.datadir} has no room for one 1 MiB transfer per rank")
    if run.rank == 0:
        os.makedirs(folder, exist_ok=True)
        make_sparse(run, path, region * run.size)
    ranks.barrier()
    engine = io_run({"name": out.name, "target": [path], "rw": "randwrite", "bs": RND1MB, "offset": run.rank * region,
                     "size": region, "time": f"{cfg.stonewall_s}s", **NO_ENGINE_FSYNC})
    ranks.barrier()
    t0 = time.monotonic()
    res = run_io(engine, out.name, run.hooks)
    t_sync = time.monotonic()
    fsync_file(path)
    fsync_s = time.monotonic() - t_sync
    got = ranks.allgather((res["workers"][0]["write_bytes"], 0 if res["complete"] else 1, res.get("error"), fsync_s))
    out.seconds = run.end(t0)
    total = sum(g[0] for g in got)
    score_bandwidth(out, total, sum(g[1] for g in got), next((g[2] for g in got if g[2]), ""))
    run.rnd1mb = (path, region, run.size)
    out.details = {"bytes": total, "transfer_bytes": RND1MB, "ops": total // RND1MB, "region_bytes": region,
                   "bytes_per_rank": [g[0] for g in got], "fsync_s": [g[3] for g in got], "file": path}


# -- the concurrent phase ----------------------------------------------------------------------------
def shares_of(run: Io500Run) -> dict[str, float]:
    """The parts' shares of the ranks, in the proposal's order: ratio-write, ratio-read, the rest."""
    w, r = run.cfg.concurrent_ratio_write, run.cfg.concurrent_ratio_read
    return {"ior-easy-write": w, "ior-rnd1MB-read": r, "mdworkbench": max(0.0, 1.0 - w - r)}


def thread_team_size(shares: Mapping[str, float]) -> int | None:
    """One rank: the smallest team of threads in which every part with a share gets one (None
    when no team up to MAX_THREADS does)."""
    wanted = [k for k, v in shares.items() if v > 1e-9]
    for n in range(2, MAX_THREADS + 1):
        blocks = share_blocks(shares, n)
        if all(blocks[k] for k in wanted):
            return n
    return None


def weighted_score(parts: Mapping[str, Mapping[str, Any]], processes: int) -> tuple[float, float]:
    """(the proposal's score, the score as the branch's code computes it) from each part's score
    and processes. The proposal: the geometric mean, over the parts given processes, of each
    part's score per process, times all processes. The branch's code (phase_concurrent.c at
    2cd466f) multiplies in the parts from the second on only (its loop starts at 1) but takes the
    root over every part given processes; storlab reports that figure too, for comparison."""
    used = [(name, parts[name]["score"] / parts[name]["procs"]) for name in PARTS if parts[name]["procs"] > 0]
    if not used:
        return 0.0, 0.0
    score = math.prod(v for _, v in used) ** (1.0 / len(used)) * processes
    branch = math.prod(v for name, v in used if name != PARTS[0]) ** (1.0 / len(used)) * processes
    return score, branch


class _Part:
    """One part on one rank: its group, and the run as the part's code sees it (the group's ranks)."""

    def __init__(self, run: Io500Run, name: str, ranks: Ranks, whole_size: int) -> None:
        self.name = name
        self.whole_size = whole_size      # the processes of the phase (MPI ranks, or threads of one)
        self.run = copy.copy(run)        # the same config, folders and list of files made
        self.run.ranks, self.run.rank, self.run.size = ranks, ranks.rank, ranks.size
        self.run.hooks = RankWatch(ranks)
        self.whole_run = run
        self.engine: Any = None
        self.bench: mdworkbench.Workbench | None = None
        self.problem: str | None = None    # why the part cannot run (it still meets the others)


def _prepare(part: _Part) -> None:
    """Before the clock: the part's files sized and its engine run planned, or md-workbench's
    sets made and filled (precreate), as io500's phases prepare before their clock starts."""
    run, sw = part.run, part.run.cfg.stonewall_s
    if part.name == "ior-easy-write":
        xfer = run.cfg.easy_xfer
        cap = min(run.cfg.easy_block, room_per_rank(run, run.size, xfer)) // xfer * xfer
        if cap == 0:
            raise TargetError(f"concurrent: {run.datadir} has no room for one ior-easy transfer per rank")
        path = os.path.join(run.datadir, "ior-easy-concurrent", f"ior_file_easy.{run.rank:08d}")
        make_sparse(run, path, cap)
        part.engine = (io_run({"name": "concurrent-ior-easy-write", "target": [path], "rw": "write", "bs": xfer,
                               "size": cap, "time": f"{sw}s", **NO_ENGINE_FSYNC}), path, xfer)
    elif part.name == "ior-rnd1MB-read":
        if run.rnd1mb is None:
            part.problem = "ior-rnd1MB-write did not run: there is nothing to read"
            return
        path, region, writers = run.rnd1mb
        part.engine = (io_run({"name": "concurrent-ior-rnd1MB-read", "target": [path], "rw": "randread", "bs": RND1MB,
                               "offset": (run.rank % writers) * region, "size": region, "time": f"{sw}s"}),
                       path, RND1MB)
    else:
        whole = copy.copy(part.whole_run)          # io500 sizes md-workbench by all the processes
        whole.size = part.whole_size
        precreate, files, _ = mdworkbench.sizes(whole)
        seed = io500_hash(run.timestamp, io500_hash("md-workbench"))
        bench = mdworkbench.Workbench(run, precreate, files, seed=seed)
        bench.prefix = os.path.join(run.datadir, "mdworkbench-concurrent")
        made = bench.precreate_phase()
        part.bench = bench
        if sum(made.err.values()):
            part.problem = f"md-workbench's precreate failed {sum(made.err.values())} times"


def _run_part(part: _Part, deadline: float) -> dict[str, Any]:
    """The part's work between the whole's barriers; its figures over its group (every member)."""
    run = part.run
    started = time.monotonic()
    if part.name == "mdworkbench":
        assert part.bench is not None
        stats = part.bench.benchmark_iteration(deadline=time.perf_counter() + (deadline - time.monotonic()))
        result = mdworkbench.gathered(run, stats, "benchmark")
        errors = result["error_count"]
        return {"score": result["rate_iops"] / 1000, "seconds": result["seconds"], "ops": result["ops"],
                "rate_iops": result["rate_iops"], "max_op_s": result["max_op_s"], "errors": errors,
                "error": f"{errors} md-workbench operations failed" if errors else part.problem,
                "latency_s": result["latency_s"]}
    done, failed, message = 0, 0, part.problem
    if part.engine is not None:
        engine, path, xfer = part.engine
        res = run_io(engine, f"concurrent-{part.name}", run.hooks)
        if part.name == "ior-easy-write":
            fsync_file(path)            # IOR -e
            done = res["workers"][0]["write_bytes"]
        else:
            done = res["workers"][0]["read_bytes"]
        failed = 0 if res["complete"] else 1
        message = res.get("error")
    got = run.ranks.allgather((done, time.monotonic() - started, failed, message))
    total = sum(g[0] for g in got)
    seconds = max(g[1] for g in got)
    errors = sum(g[2] for g in got) + (1 if part.problem else 0)
    return {"score": total / seconds / GIB if seconds > 0 else 0.0, "seconds": seconds, "bytes": total,
            "ops": total // (run.cfg.easy_xfer if part.name == "ior-easy-write" else RND1MB),
            "transfer_bytes": run.cfg.easy_xfer if part.name == "ior-easy-write" else RND1MB,
            "bytes_per_rank": [g[0] for g in got], "errors": errors,
            "error": next((g[3] for g in got if g[3]), None) or part.problem}


def _finish(part: _Part) -> None:
    """After the clock: what the part made removed (its ior-easy file, md-workbench's folder of
    this phase), so io500's phases after it find the storage as io500 02091cf leaves it."""
    if part.name == "ior-easy-write" and part.engine is not None:
        try:
            os.unlink(part.engine[1])
        except OSError:
            pass            # the clean-up at the end of the run tries again and reports
    if part.bench is None:
        return
    part.run.ranks.barrier()
    if part.run.rank == 0:
        errors: list[str] = []
        emptied(part.bench.prefix, errors, 0, 0)
        try:
            os.rmdir(part.bench.prefix)
        except OSError:
            pass


def _one_rank(run: Io500Run, whole: Ranks, shares: Mapping[str, float]) -> dict[str, Any]:
    """What every rank of the whole (an MPI rank, or a thread of one rank's team) does: split by
    the shares, prepare, meet the whole, run its part to the shared deadline, meet the whole."""
    if whole.rank == 0:
        for sub in ("ior-easy-concurrent",):
            os.makedirs(os.path.join(run.datadir, sub), exist_ok=True)
    groups = whole.split(shares)
    part = _Part(run, groups.name, groups.ranks, whole.size)
    _prepare(part)
    whole.barrier()                           # one clock: every part starts here ...
    t0 = time.monotonic()
    start_unix = time.time() + whole.clock_offset_s
    figures = _run_part(part, t0 + run.cfg.stonewall_s)
    whole.barrier()                           # ... and the phase ends when the last part is done
    phase_s = time.monotonic() - t0
    _finish(part)
    return {"rank": whole.rank, "part": groups.name, "part_rank": part.run.rank, "start_unix": start_unix,
            "phase_s": phase_s, "members": groups.members, "figures": figures if part.run.rank == 0 else None}


def concurrent_phase(run: Io500Run, out: ProposalOutcome) -> None:
    """The concurrent phase on every rank (collective over the run's ranks)."""
    shares = shares_of(run)
    if run.size > 1:
        ranks_are, processes = "MPI ranks", run.size
        every = run.ranks.allgather(_one_rank(run, run.ranks, shares))
    else:
        processes = thread_team_size(shares)
        if processes is None:
            out.ran, out.reason = False, (f"no team of up to {MAX_THREADS} threads gives every part with a share "
                                          "a thread")
            return
        ranks_are = "threads of one process"
        # a thread cannot vanish (one that raises breaks the team at once): the timeout only guards
        # against a system call that never returns, and must outlast md-workbench's precreate
        every = run_on_threads(processes, lambda team: _one_rank(run, team, shares),
                               timeout_s=2 * run.cfg.stonewall_s + 3600)
    if run.rnd1mb is not None and run.rank == 0:     # read by no later phase
        try:
            os.unlink(run.rnd1mb[0])
        except OSError:
            pass
    # the phase lasts until the last part is done, by every rank's own clock: a rank let out of
    # the first barrier a little after another still saw every part end (regression: the phase
    # once measured 47 us less than a part, taken from rank 0's clock alone)
    out.seconds = max(e["phase_s"] for e in every)
    members = every[0]["members"]
    procs = {name: len(members[name]) for name in PARTS}
    parts: dict[str, dict[str, Any]] = {}
    for name in PARTS:
        fig = next((e["figures"] for e in every if e["part"] == name and e["part_rank"] == 0), None)
        parts[name] = {"procs": procs[name], "unit": UNITS[name], "score": 0.0, **(fig or {})}
        parts[name]["per_process"] = parts[name]["score"] / procs[name] if procs[name] else None
    out.score, branch = weighted_score(parts, processes)
    if sum(1 for n in PARTS if procs[n] == 0) >= 2:
        out.invalid.append(TWO_EMPTY)
    errors = sum(parts[n].get("errors", 0) for n in PARTS)
    if errors:
        out.invalid.append(f"Errors ({errors}) occured during the concurrent phase. This invalidates it.")
        out.error = next((parts[n]["error"] for n in PARTS if parts[n].get("error")), "error")
    starts = [e["start_unix"] for e in every]
    out.details = {"ranks_are": ranks_are, "processes": processes, "shares": dict(shares), "procs": procs,
                   "members": members, "stonewall_s": run.cfg.stonewall_s, "parts": parts,
                   "score_rule": "geometric mean over the parts with processes of (part score / its processes), "
                                 "times all processes",
                   "score_as_branch_code": branch,
                   "start_unix": starts, "start_spread_s": max(starts) - min(starts),
                   "rank_part": [e["part"] for e in every]}


PROPOSAL_CODE: dict[str, Callable[[Io500Run, ProposalOutcome], None]] = {
    "ior-rnd1MB-write": rnd1mb_write_phase,
    "concurrent": concurrent_phase,
}


def run_proposal(run: Io500Run, proposal: Proposal) -> ProposalOutcome:
    """Run one proposed phase on this rank (collective): switched off in the .ini, it is
    reported as not run, with the reason."""
    out = ProposalOutcome(proposal)
    if not run.cfg.runs(proposal.name):
        out.ran, out.reason = False, "switched off in the .ini (run = FALSE)"
        return out
    drop_caches(run)          # io500's main loop drops them before every phase
    run.ranks.barrier()
    out.t_start = stamp()
    if run.progress and run.rank == 0:
        run.progress(f"{proposal.name} (io500 proposal)")
    PROPOSAL_CODE[proposal.name](run, out)
    out.t_end = stamp()
    return out


def new_section() -> dict[str, Any]:
    """The document's `proposals` (extended mode): where they come from and how they count."""
    return {"source": PROPOSAL_SOURCE, "in_score": False,
            "note": "io500 proposals, not io500 02091cf's phases: reported apart, not in SCORE or [SCOREX], "
                    "not in result.txt", "phases": []}
