"""Rank-aware rewriting of a resolved job: what each rank runs.

Target paths may name `{rank}`, `{node}` and `{size}`; they are substituted per rank. Ranks whose
paths come out equal share the target, and the engine's layout is told so: `participants` =
sharing ranks x threads and `participant_base` = the rank's place among them x threads, so the
region, segmented and strided layouts (and `files = per_thread`, PATH.N) spread over every thread
of every rank. With `reorder N`, each rank plays rank (rank + N) mod size in read-only phases:
its `{rank}`/`{node}` and its place in a shared layout are that rank's, so it reads what another
rank wrote (IOR's -C/-Q). `io_total` is split evenly over the ranks.

Stonewalling with wear-out: a read-only phase that follows a time-limited write phase on the same
targets (and sets neither `time`, `io_size` nor `io_total`) reads exactly as much per thread as
the writing thread finished; `wearout_pairs` finds such pairs and `wearout_io_size` turns the
counts into the reading rank's `io_size`. Pure functions: nothing here talks to MPI.
"""
from __future__ import annotations

import copy
import re
from typing import Any, Sequence

from ...errors import TargetError
from ...jobs.job import Job

__all__ = ["PLACEHOLDERS", "substitute", "read_only", "data_rank", "rewrite_job", "rewrite_warnings",
           "wearout_pairs", "wearout_io_size", "private_targets"]

PLACEHOLDERS = ("rank", "node", "size")
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def substitute(path: str, rank: int, node: str, size: int) -> str:
    """`path` with {rank}, {node} and {size} replaced; any other {name} is an error (a typo)."""
    values = {"rank": str(rank), "node": node, "size": str(size)}

    def one(m: re.Match) -> str:
        name = m.group(1)
        if name not in values:
            raise TargetError(f"target {path}: unknown placeholder {{{name}}}; use {{rank}}, {{node}} or {{size}}")
        return values[name]
    return _FIELD.sub(one, path)


def read_only(values: dict[str, Any]) -> bool:
    return values["rw"] in ("read", "randread")


def data_rank(rank: int, size: int, reorder: int, is_read_only: bool) -> int:
    """Whose data a rank works on: its own, or in a read-only phase (rank + reorder) mod size."""
    return (rank + reorder) % size if is_read_only and reorder else rank


def _paths(templates: Sequence[str], role: int, nodes: Sequence[str]) -> tuple[str, ...]:
    return tuple(substitute(t, role, nodes[role], len(nodes)) for t in templates)


def _sharing(templates: Sequence[str], role: int, nodes: Sequence[str]) -> Sequence[int]:
    """The roles whose paths equal `role`'s, in order, without substituting every rank's paths
    where the placeholders decide it: a template naming {rank} (and not {node}) gives each rank a
    path of its own (text around one number, so two numbers give two paths), one naming {node}
    (and not {rank}) is shared by the ranks of a node, one naming neither by all. A template
    naming both could collide across ranks ("{node}{rank}": n1 and 23, n12 and 3), so it is
    compared rank by rank."""
    named = [set(_FIELD.findall(t)) for t in templates]
    if any("rank" in f and "node" not in f for f in named):
        return [role]
    if not any("rank" in f or "node" in f for f in named):
        return range(len(nodes))
    if not any("rank" in f for f in named):
        return [r for r in range(len(nodes)) if nodes[r] == nodes[role]]
    mine = _paths(templates, role, nodes)
    return [r for r in range(len(nodes)) if _paths(templates, r, nodes) == mine]


def rewrite_job(job: Job, rank: int, nodes: Sequence[str], reorder: int = 0) -> Job:
    """The job rank `rank` runs, of `len(nodes)` ranks (`nodes[r]` is rank r's node name)."""
    size = len(nodes)
    out = copy.deepcopy(job)
    for phase in out.phases:
        for g in phase.groups:
            v = g.values
            role = data_rank(rank, size, reorder, read_only(v))
            templates = tuple(v["target"])
            if templates:  # no target: each rank makes its own scratch file, nothing to share
                v["target"] = _paths(templates, role, nodes)
                sharing = _sharing(templates, role, nodes)
                if len(sharing) > 1:
                    v["participants"] = len(sharing) * v["threads"]
                    v["participant_base"] = sharing.index(role) * v["threads"]
                else:
                    v["participants"] = 0
                    v["participant_base"] = 0
            if v["io_total"] is not None:
                v["io_total"] = max(1, v["io_total"] // size)
    return out


def rewrite_warnings(job: Job, nodes: Sequence[str], reorder: int) -> list[dict[str, str]]:
    """Typed warnings about the reorder setting (empty when it does what the user wants)."""
    size = len(nodes)
    if not reorder:
        return []
    reads = [p for p in job.phases if any(read_only(g.values) for g in p.groups)]
    if not reads:
        return [{"code": "reorder_unused", "message": f"reorder {reorder}: no phase only reads, so "
                 "nothing is reordered; reorder applies to read and randread phases"}]
    if reorder % size == 0:
        return [{"code": "reorder_own_data", "message": f"reorder {reorder} is a multiple of the "
                 f"{size} ranks: every rank reads its own data; use 1 to {size - 1}"}]
    if len(set(nodes)) > 1:
        same = [r for r in range(size) if nodes[(r + reorder) % size] == nodes[r]]
        if same:
            per_node = size // len(set(nodes))
            return [{"code": "reorder_same_node", "message": f"reorder {reorder}: {len(same)} of "
                     f"{size} ranks read data written on their own node, which its client cache may "
                     f"serve; use --reorder {per_node} (the ranks per node)"}]
    return []


def private_targets(job: Job, reorder: int) -> bool:
    """Whether no rank touches another rank's files: every target names {rank} (or there is
    none: each rank makes its own scratch file), and no phase reads another rank's data through
    `reorder`. Then a rank may build its next phase (open, create, lay out its files) while
    another is still in the last one."""
    for phase in job.phases:
        for g in phase.groups:
            v = g.values
            if any("{rank}" not in t for t in v["target"]):
                return False
            if reorder and read_only(v) and v["target"]:
                return False
    return True


def _same_targets(a, b) -> bool:
    keys = ("target", "threads", "files", "thread_layout", "segments", "block", "size", "offset", "bs")
    return len(a.groups) == len(b.groups) and all(
        all(ga.values[k] == gb.values[k] for k in keys) for ga, gb in zip(a.groups, b.groups))


def wearout_pairs(job: Job) -> dict[int, int]:
    """{read phase index: index of the time-limited write phase whose counts it reads back}."""
    pairs: dict[int, int] = {}
    for k, phase in enumerate(job.phases):
        if not all(read_only(g.values) and g.values["time"] is None and g.values["io_size"] is None
                   and g.values["io_total"] is None for g in phase.groups):
            continue
        for j in range(k - 1, -1, -1):
            w = job.phases[j]
            if _same_targets(w, phase):
                if all(g.values["rw"] in ("write", "randwrite") and g.values["time"] is not None
                       for g in w.groups):
                    pairs[k] = j
                break
    return pairs


def wearout_io_size(thread_bytes: Sequence[int], bs: int) -> int:
    """io_size (bytes per thread) that reads back what the writing threads finished: the
    smallest thread's count in whole transfers of bs (at least one transfer: the engine's minimum).

    Threads of one rank finish within a transfer of each other in a time-limited phase, so the
    smallest count is what every thread wrote; none reads a block its writer did not write.
    """
    if not thread_bytes:
        raise ValueError("wear-out: the writing phase reported no threads")
    return max(bs, min(thread_bytes) // bs * bs)
