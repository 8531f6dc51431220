"""io500's IOR phases on the engine (src/phase_ior*.c): ior-easy-write, ior-hard-write (the
stonewall, then IOR's wear-out, then one fsync per rank), ior-easy-read, ior-hard-read (the
transfers written, read back by the rank IOR -C -Q 1 places, every byte verified) and
ior-rnd4K-easy-read (4 KiB random reads, IOR -C -Q 2).

- Write: files are made sparse at their full size first, so nothing is preallocated; every rank
  writes until the stonewall, then on until it has done as many transfers as the rank that did
  most (IOR's stoneWallingWearOut), then fsyncs (IOR -e).
- Read: each rank reads what rank + offset wrote, exactly the transfers written; the offset is
  IOR's -C -Q 1 (a whole node: on one node every rank reads its own data).
"""
from __future__ import annotations

import os
import time
from typing import Any, NamedTuple, Sequence

from ...errors import TargetError
from ...jobs.io500.translator import HARD_XFER, RND4K
from .engine import io_run, run_io
from .state import GIB, Io500Run, PhaseOutcome

__all__ = ["node_layout", "ior_rank_offset", "write_phase", "read_phase", "rnd4k_read_phase", "make_sparse",
           "room_per_rank", "fsync_file", "score_bandwidth", "NO_ENGINE_FSYNC"]

# IOR -R as io500 asks for it: writes carry one seeded fill, reads compare every byte with it
VERIFY_FILL = {"verify": "fill", "verify_readback": False}
# IOR -e: one fsync per rank at the end of a write phase, after the wear-out (`fsync_file`); the
# engine's own end-of-phase fsync would add one per engine run (two or three per rank)
NO_ENGINE_FSYNC = {"fsync_end": False}


# -- which rank reads what another rank wrote ------------------------------------------------------

def score_bandwidth(out: PhaseOutcome, total_bytes: int, errors: int, first_error: str) -> None:
    """An IOR phase's score as io500 gives it: the bytes of every rank over the phase's seconds,
    in GiB/s; any error invalidates the phase, with io500's words, and names the first."""
    out.score = total_bytes / out.seconds / GIB
    if errors:
        out.invalid.append(f"Errors ({errors}) occured during phase in IOR. This invalidates your run.")
        out.error = first_error or "I/O error"

def node_layout(hosts: Sequence[str]) -> tuple[int, int, bool]:
    """(nodes, ranks on rank 0's node, block mapping) of the ranks' host names, as IOR and mdtest
    find them (GetNumNodes, GetNumTasksOnNode0, QueryNodeMapping: block when rank 1 shares rank 0's
    node, or with one rank)."""
    on_node0 = sum(1 for h in hosts if h == hosts[0])
    return len(set(hosts)), on_node0, len(hosts) < 2 or hosts[1] == hosts[0]


def ior_rank_offset(hosts: Sequence[str], q: int) -> int:
    """IOR -C -Q q: a rank reads what rank (rank + offset) % size wrote. The shift is the ranks on
    rank 0's node with a block mapping (by-slot), else 1; on one node that makes the offset
    q * size % size = 0: every rank reads back its own data, as the real IOR does."""
    _, on_node0, block = node_layout(hosts)
    return q * (on_node0 if block else 1) % len(hosts)


# -- the files ---------------------------------------------------------------------------------------
def make_sparse(run: Io500Run, path: str, size: int) -> None:
    try:
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    except OSError as e:
        raise TargetError(f"{path}: cannot be made: {e.strerror}") from None
    run.made.append(path)
    try:
        os.ftruncate(fd, size)
    except OSError as e:
        raise TargetError(f"{path}: cannot be sized to {size} bytes: {e.strerror}") from None
    finally:
        os.close(fd)


def room_per_rank(run: Io500Run, share: int, unit: int) -> int:
    """The bytes a rank can write at most: its `share` of the file system's free space,
    rounded down to `unit` (no write can go beyond it; IOR would end with ENOSPC)."""
    try:
        st = os.statvfs(run.datadir)
    except OSError:
        return 1 << 62
    return st.f_bavail * st.f_frsize // share // unit * unit


def fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- the phases ----------------------------------------------------------------------------------------
class _WriteTarget(NamedTuple):
    """Where and how much a write phase writes on this rank."""
    path: str
    xfer: int                  # bytes per transfer
    per: int                   # transfers of all ranks per segment (ior-hard interleaves the ranks)
    max_pairs: int             # transfers this rank can write at most
    cap: int                   # the file's size
    layout: dict[str, Any]     # the engine's layout of the ranks in a shared file


def _write_target(run: Io500Run, name: str, hard: bool) -> _WriteTarget:
    """The file is sized (sparse) to what the phase can write at most: blockSize or the
    segments, or the file system's free space if that is less. Collective for ior-hard."""
    cfg = run.cfg
    if hard:
        room = room_per_rank(run, run.size, HARD_XFER) if run.rank == 0 else None
        max_pairs = min(cfg.hard_segments, run.ranks.bcast(room) // HARD_XFER)   # one layout for all
        target = _WriteTarget(run.hard_file, HARD_XFER, run.size, max_pairs, HARD_XFER * run.size * max_pairs,
                              {"thread_layout": "strided", "participants": run.size, "participant_base": run.rank})
    else:
        max_pairs = min(cfg.easy_block, room_per_rank(run, run.size, cfg.easy_xfer)) // cfg.easy_xfer
        target = _WriteTarget(run.easy_file(run.rank), cfg.easy_xfer, 1, max_pairs, max_pairs * cfg.easy_xfer, {})
    if max_pairs == 0:
        raise TargetError(f"{name}: {run.datadir} has no room for one transfer per rank")
    return target


def write_phase(run: Io500Run, out: PhaseOutcome, t0: float, hard: bool) -> None:
    """ior-easy-write or ior-hard-write."""
    ranks, sw = run.ranks, run.cfg.stonewall_s
    path, xfer, per, max_pairs, cap, layout = _write_target(run, out.name, hard)
    # the plan is built before the clock starts (IOR opens inside it; a few microseconds)
    t_prep = time.monotonic()
    if hard:
        if run.rank == 0:
            make_sparse(run, path, cap)
        ranks.barrier()
    else:
        make_sparse(run, path, cap)
    engine = io_run({"name": out.name, "target": [path], "rw": "write", "bs": xfer, "size": cap,
                     "io_size": max_pairs * xfer, "time": f"{sw}s", **VERIFY_FILL, **NO_ENGINE_FSYNC, **layout})
    t0 += time.monotonic() - t_prep        # the preparation is not the phase's time
    res = run_io(engine, out.name, run.hooks)
    errors = 0 if res["complete"] or res["stop_reason"] != "error" else 1
    mine = res["workers"][0]["write_bytes"] // xfer
    t_stonewall = time.monotonic() - t0
    counts = ranks.allgather((mine, t_stonewall, errors, res.get("error")))
    top = max(c[0] for c in counts)
    extra = top - mine
    extra_bytes = 0
    if extra > 0 and not errors:
        more = io_run({"name": out.name + "-wearout", "target": [path], "rw": "write", "bs": xfer,
                       "offset": mine * per * xfer, "size": extra * per * xfer, "io_size": extra * xfer,
                       **VERIFY_FILL, **NO_ENGINE_FSYNC, **layout})
        res2 = run_io(more, out.name, run.hooks)
        extra_bytes = res2["workers"][0]["write_bytes"]
        if not res2["complete"]:
            errors += 1
    t_sync = time.monotonic()
    fsync_file(path)
    fsync_s = time.monotonic() - t_sync
    written = mine * xfer + extra_bytes
    totals = ranks.allgather((written, errors, extra, fsync_s))
    out.seconds = run.end(t0)
    if hard:
        run.hard_pairs = top
    else:
        run.easy_pairs = top
    total_bytes = sum(t[0] for t in totals)
    stonewall_time = max(c[1] for c in counts)
    stonewall_bytes = sum(c[0] for c in counts) * xfer
    score_bandwidth(out, total_bytes, sum(t[1] for t in totals) + sum(c[2] for c in counts),
                    next((c[3] for c in counts if c[3]), ""))
    if out.seconds < sw:
        out.invalid.append(f"Write phase needed {out.seconds:f}s instead of stonewall {sw}s. "
                           f"Stonewall was hit at {stonewall_time:.1f}s")
    out.pairs["throughput-stonewall"] = f"{stonewall_bytes / stonewall_time / GIB:.2f}"
    out.details = {"bytes": total_bytes, "transfer_bytes": xfer, "pairs_per_rank": top,
                   "pairs_at_stonewall": [c[0] for c in counts], "wearout_pairs": [t[2] for t in totals],
                   "fsync_s": [t[3] for t in totals],   # each rank's IOR -e fsync (in the phase's time)
                   "stonewall_s": stonewall_time}


def read_phase(run: Io500Run, out: PhaseOutcome, t0: float, hard: bool) -> None:
    """ior-easy-read or ior-hard-read."""
    offset = ior_rank_offset(run.hosts, 1)         # IOR -C -Q 1
    neighbour = (run.rank + offset) % run.size
    if hard:
        pairs, xfer = run.hard_pairs, HARD_XFER
        spec = {"target": [run.hard_file], "thread_layout": "strided", "participants": run.size,
                "participant_base": neighbour, "size": pairs * run.size * xfer}
    else:
        pairs, xfer = run.easy_pairs, run.cfg.easy_xfer
        spec = {"target": [run.easy_file(neighbour)], "size": pairs * xfer}
    if pairs == 0:
        out.seconds = run.end(t0)
        out.invalid.append("Resulting score shouldn't be 0.0")
        out.error = "nothing was written to read back"
        return
    t_prep = time.monotonic()
    engine = io_run({"name": out.name, "rw": "read", "bs": xfer, **(VERIFY_FILL if run.cfg.verify_reads else {}),
                     **spec})
    t0 += time.monotonic() - t_prep
    res = run_io(engine, out.name, run.hooks)
    checked = res.get("verify") or {}
    bad = checked.get("mismatches", 0)
    first_bad = (checked.get("first") or [{}])[0].get("message") if bad else None
    got = run.ranks.allgather((res["workers"][0]["read_bytes"], (0 if res["complete"] else 1) + bad,
                               res.get("error") or first_bad, checked.get("checked_blocks", 0), bad))
    out.seconds = run.end(t0)
    total = sum(g[0] for g in got)
    score_bandwidth(out, total, sum(g[1] for g in got), next((g[2] for g in got if g[2]), ""))
    out.details = {"bytes": total, "transfer_bytes": xfer, "pairs_per_rank": pairs,
                   "verified_transfers": sum(g[3] for g in got), "mismatched_transfers": sum(g[4] for g in got),
                   "rank_offset": offset, "read_from": [(r + offset) % run.size for r in range(run.size)]}


def rnd4k_read_phase(run: Io500Run, out: PhaseOutcome, t0: float) -> None:
    """ior-rnd4K-easy-read: 4 KiB random reads of another rank's ior-easy file until the stonewall."""
    offset = ior_rank_offset(run.hosts, 2)         # IOR -C -Q 2
    src = (run.rank + offset) % run.size
    size = run.easy_pairs * run.cfg.easy_xfer // RND4K * RND4K
    if size == 0:
        out.seconds = run.end(t0)
        return
    t_prep = time.monotonic()
    engine = io_run({"name": out.name, "target": [run.easy_file(src)], "rw": "randread", "bs": RND4K,
                     "size": size, "time": f"{run.cfg.stonewall_s}s"})
    t0 += time.monotonic() - t_prep
    res = run_io(engine, out.name, run.hooks)
    got = run.ranks.allgather(res["workers"][0]["read_bytes"])
    out.seconds = run.end(t0)
    out.score = sum(got) / out.seconds / GIB
    out.details = {"bytes": sum(got), "rank_offset": offset,
                   "read_from": [(r + offset) % run.size for r in range(run.size)]}
