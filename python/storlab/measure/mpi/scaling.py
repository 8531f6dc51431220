"""The scaling curve of `storlab scale`: the same job at 1, 2, 4 ... N ranks, its aggregate rate
at each count, and the parallel efficiency against the smallest count.

Every rank runs the whole job (weak scaling: the work grows with the ranks), so the ideal rate at
n ranks is n / base times the rate at the base count. speedup(n) = bw(n) / bw(base);
efficiency(n) = speedup(n) / (n / base), 1.0 being perfect scaling. Computed for the plain
aggregate (all bytes over first start to last finish) and for the de-skewed one. Pure functions.
"""
from __future__ import annotations

from typing import Any, Sequence

from ...errors import UserError

__all__ = ["rank_counts", "scaling_curve"]


def rank_counts(size: int, wanted: Sequence[int] | None = None) -> list[int]:
    """1, 2, 4 ... up to `size`, and `size` itself; or the `wanted` counts, checked."""
    if wanted:
        counts = sorted(set(int(n) for n in wanted))
        bad = [n for n in counts if n < 1 or n > size]
        if bad:
            raise UserError(f"ranks: {bad[0]} is not between 1 and the {size} ranks of this launch")
        return counts
    counts, n = [], 1
    while n < size:
        counts.append(n)
        n *= 2
    return counts + [size]


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def scaling_curve(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per phase name, one point per run (runs are merged MPI documents, fewest ranks first)."""
    names: list[str] = []
    for doc in runs:
        for p in doc["phases"]:
            if p["name"] not in names:
                names.append(p["name"])
    curve = []
    for name in names:
        points = []
        for doc in runs:
            p = next((x for x in doc["phases"] if x["name"] == name), None)
            if p is None:
                continue
            a = p["aggregate"]
            points.append({"ranks": doc["mpi"]["size"], "nodes": len(doc["mpi"]["nodes"]),
                           "complete": p["complete"], "bytes": a["bytes"], "seconds": p["seconds"],
                           "bw_bytes": a["bw_bytes"], "deskew_bw_bytes": a["deskew_bw_bytes"]})
        if not points:
            continue
        base = points[0]
        for pt in points:
            ideal = pt["ranks"] / base["ranks"]
            for key, prefix in (("bw_bytes", ""), ("deskew_bw_bytes", "deskew_")):
                speedup = _ratio(pt[key], base[key])
                pt[f"{prefix}speedup"] = speedup
                pt[f"{prefix}efficiency"] = None if speedup is None else speedup / ideal
        curve.append({"phase": name, "base_ranks": base["ranks"], "points": points})
    return curve
