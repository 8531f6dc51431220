"""io500's mdtest phases on the metadata benchmark (src/phase_mdtest*.c): mdtest-easy-write/-stat/
-delete and mdtest-hard-write/-stat/-read/-delete.

One MetaRun per rank and kind (easy: a folder per rank; hard: one shared folder), kept open
across the phases so they interleave in io500's order (create, later stat, later read and
delete). The stonewall ends create only (mdtest -W); then every rank creates as many files as
the rank that made most (a second MetaRun for the extra files) and syncs (mdtest -Y). Later
phases visit the files of another rank, as mdtest -N 1 shifts them (stat r+1, read r+2, remove
r+3): the creating rank's state is adopted by the visiting rank's run and handed back after the
phase.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Sequence

from ... import _core
from ...errors import UserError
from ...jobs.io500.translator import HARD_FILE_SIZE
from ...jobs.meta_options import resolve_meta_options
from ...measure.meta import meta_spec
from .engine import core_failure, meta_run, wait
from .ior import node_layout
from .state import Io500Run, PhaseOutcome

__all__ = ["mdtest_stride", "meta_phase", "MDTEST_SHIFTS"]

# which of mdtest's shifts each later step takes (mdtest.c: stat_name, read_name, rm_name)
MDTEST_SHIFTS = {"stat": 1, "read": 2, "remove": 3}


def mdtest_stride(hosts: Sequence[str], n: int = 1) -> int:
    """mdtest -N n: the stride between the rank that made a file and the one visiting it; times
    the ranks on rank 0's node when there are several nodes and a block mapping. Each of mdtest's
    phases shifts once more: rank r stats the files of rank r + stride, reads those of r + 2
    stride and removes those of r + 3 stride (modulo the ranks)."""
    nodes, on_node0, block = node_layout(hosts)
    return n * on_node0 if nodes > 1 and block else n


# -- this rank's metadata runs --------------------------------------------------------------------------
def _build(run: Io500Run, kind: str, files: int, prefix: str, stonewall: bool, owner: bool) -> Any:
    """A MetaRun of this rank for mdtest-`kind` (easy: a folder per rank; hard: the shared one)."""
    section = {"threads": 1, "files": files, "dir": "unique" if kind == "easy" else "shared",
               "phases": "create,stat,remove,rmdir" if kind == "easy" else "create,stat,read,remove,rmdir",
               "name_prefix": prefix, "keep": False}
    if stonewall:      # mdtest -W: the stonewall ends create only
        section.update(stonewall=f"{run.cfg.stonewall_s}s", stonewall_create_only=True)
    if kind == "hard":
        section["file_size"] = HARD_FILE_SIZE
        section["verify_read"] = run.cfg.verify_reads      # mdtest -X on mdtest-hard-read
    values = resolve_meta_options(None, section, "io500")
    spec = meta_spec(values, os.path.join(run.datadir, f"mdtest-{kind}"), rank=run.rank, shared_tree_owner=owner)
    return meta_run(spec, f"mdtest-{kind}")


def _new(run: Io500Run, kind: str, files: int, prefix: str, stonewall: bool, owner: bool) -> Any:
    """A MetaRun of this rank for mdtest-`kind`, kept (and cleaned up) by this rank."""
    meta = _build(run, kind, files, prefix, stonewall, owner)
    run.meta.setdefault(kind, []).append(meta)
    run.meta_made.setdefault(kind, []).append({"files": files, "prefix": prefix, "stonewall": stonewall})
    return meta


def _open(run: Io500Run, kind: str) -> Any:
    """This rank's first MetaRun of `kind` with its tree made (rank 0 makes the shared one first)."""
    cfg = run.cfg
    meta = _new(run, kind, cfg.md_easy_n if kind == "easy" else cfg.md_hard_n, f"r{run.rank}.",
                stonewall=True, owner=run.rank == 0)
    # the tree (one per rank, or the shared one rank 0 makes) before the clock starts
    if kind == "hard" and run.rank != 0:
        run.ranks.barrier()
    _step(run, meta, "mkdir")
    if kind == "hard" and run.rank == 0:
        run.ranks.barrier()
    return meta


def _step(run: Io500Run, meta, expect: str) -> dict[str, Any]:
    """Run the metadata run's next step, `expect`, and return its result."""
    if meta.next_phase != expect:
        raise UserError(f"mdtest phase {expect}: the metadata run is at {meta.next_phase!r}")
    meta.start()
    try:
        wait(meta, expect, run.hooks)
    except _core.CoreError as e:
        return {"ops": 0, "complete": False, "error": e.args[1], "stonewalled": False}
    return json.loads(meta.result_json())


# -- another rank's files ---------------------------------------------------------------------------------
def _visitors(run: Io500Run, kind: str, step: str) -> tuple[int, list[Any]]:
    """mdtest -N 1: the rank whose files this rank visits in `step` (stat: the next rank,
    read: two ahead, remove: three ahead, times the node stride) and runs that take over that
    rank's files (its own runs when it is this rank). Collective."""
    mine = [{**made, "states": meta.states_json(), "next": meta.next_phase}
            for made, meta in zip(run.meta_made[kind], run.meta[kind])]
    everyone = run.ranks.allgather(mine)
    src = (run.rank + MDTEST_SHIFTS[step] * mdtest_stride(run.hosts)) % run.size
    if src == run.rank:
        for meta in run.meta[kind]:
            if meta.next_phase != step:      # a step in between was switched off (run = FALSE)
                meta.adopt(meta.states_json(), step)
        return src, run.meta[kind]
    visitors = []
    for made in everyone[src]:
        meta = _build(run, kind, made["files"], made["prefix"], made["stonewall"], owner=False)
        try:
            meta.adopt(made["states"], step)
        except _core.CoreError as e:
            raise core_failure(e, f"mdtest-{kind}-{step}: the files of rank {src}") from None
        visitors.append(meta)
    return src, visitors


def _hand_back(run: Io500Run, kind: str, step: str, src: int, visited: list[Any]) -> None:
    """After a visited step: every rank takes back the state of its own files from the rank
    that visited them (so its clean-up and later steps see what is left). Collective."""
    back = run.ranks.allgather((src, [meta.states_json() for meta in visited]))
    visitor = next(r for r, (s, _) in enumerate(back) if s == run.rank)
    if visitor == run.rank:
        return
    for meta, states in zip(run.meta[kind], back[visitor][1]):
        phases = meta.phases
        after = phases[phases.index(step) + 1]
        try:
            meta.adopt(states, after)
        except _core.CoreError as e:
            raise core_failure(e, f"mdtest-{kind}-{step}: taking back the files from rank {visitor}") from None


# -- a phase ------------------------------------------------------------------------------------------------
def meta_phase(run: Io500Run, out: PhaseOutcome, t0: float, kind: str, step: str, sync: bool = False) -> None:
    """mdtest-`kind` doing `step` (create, stat, read, remove) on every rank; `sync`: mdtest -Y."""
    runs = run.meta.get(kind)
    if runs is None and step != "create":
        out.seconds = run.end(t0)
        out.error = f"mdtest-{kind}-write did not run: no files to {step}"
        return
    if runs is None:
        t_prep = time.monotonic()
        run.ranks.barrier()
        _open(run, kind)
        run.ranks.barrier()
        t0 += time.monotonic() - t_prep
        runs = run.meta[kind]
    src = run.rank
    if step != "create":     # io500 runs mdtest -N 1: another rank's files are visited
        t_prep = time.monotonic()
        src, runs = _visitors(run, kind, step)
        run.ranks.barrier()
        t0 += time.monotonic() - t_prep
    results = [_step(run, meta, step) for meta in runs]
    first = results[0]
    wearout = 0
    if step == "create":
        # mdtest's stonewall wear-out: every rank creates as many files as the rank that made most
        counts = run.ranks.allgather((first["ops"], first.get("seconds", 0.0), first["complete"]))
        top = max(c[0] for c in counts)
        wearout = top - first["ops"] if all(c[2] for c in counts) else 0
        if wearout > 0:
            more = _new(run, kind, wearout, f"r{run.rank}w.", stonewall=False, owner=False)
            _step(run, more, "mkdir")
            results.append(_step(run, more, "create"))
        sw_time = max(c[1] for c in counts)
        stonewall_items = sum(c[0] for c in counts)
    sync_s = 0.0
    if sync:
        t_sync = time.monotonic()
        os.sync()                                  # mdtest -Y (inside the phase's time, as in mdtest)
        sync_s = time.monotonic() - t_sync
    ops = sum(r["ops"] for r in results)
    bad = next((r for r in results if not r["complete"]), None)
    got = run.ranks.allgather((ops, bool(first.get("stonewalled")), 0 if bad is None else 1,
                               None if bad is None else bad.get("error"), wearout, sync_s))
    out.seconds = run.end(t0)
    if step != "create":
        _hand_back(run, kind, step, src, runs)     # after the clock, as mdtest's own set-up
    items = sum(g[0] for g in got)
    out.score = items / out.seconds / 1000
    errors = sum(g[2] for g in got)
    if errors:
        out.invalid.append(f"Errors ({errors}) occured during phase in mdtest. This invalidates your run.")
        out.error = next((g[3] for g in got if g[3]), "error")
    if step == "create" and kind == "easy":
        run.easy_write_rate = run.ranks.bcast(out.score if run.rank == 0 else None)   # md-workbench's sizes
    if step == "create":
        out.pairs["rate-stonewall"] = f"{stonewall_items / sw_time / 1000 if sw_time > 0 else 0.0:f}"
    out.details = {"items": items, "items_per_rank": [g[0] for g in got],
                   "files_of_rank": [(r + MDTEST_SHIFTS[step] * mdtest_stride(run.hosts)) % run.size
                                     for r in range(run.size)] if step != "create" else list(range(run.size)),
                   "stonewalled_ranks": sum(1 for g in got if g[1]),
                   **({"wearout_items": [g[4] for g in got]} if step == "create" else {}),
                   **({"sync_s": [g[5] for g in got]} if sync else {})}
