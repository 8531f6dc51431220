"""Repeated passes of a job: per-pass numbers summarised with mean, standard deviation, min/max and
a 95 % confidence interval of the mean (Student's t), latency histograms of all passes merged
exactly, and a warning when the passes disagree.
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Iterable

from . import stats

# Two-sided 95 % Student's t critical values by degrees of freedom (1..30); normal beyond.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)


def t95(dof: int) -> float:
    return _T95[dof - 1] if 1 <= dof <= len(_T95) else 1.960


def describe(values: Iterable[float]) -> dict[str, Any]:
    """mean, stddev (n-1), min, max, 95 % CI of the mean, and the values themselves."""
    v = [float(x) for x in values]
    n = len(v)
    mean = statistics.fmean(v) if v else 0.0
    sd = statistics.stdev(v) if n > 1 else 0.0
    half = t95(n - 1) * sd / math.sqrt(n) if n > 1 else 0.0
    return {"n": n, "mean": mean, "stddev": sd, "min": min(v, default=0.0), "max": max(v, default=0.0),
            "ci95": [mean - half, mean + half], "spread_pct": 100.0 * (max(v) - min(v)) / mean if n and mean else 0.0,
            "values": v}


def summarise(phases: list[dict[str, Any]], spread_warn_pct: float) -> tuple[list[dict], list[dict]]:
    """Summaries per phase name over passes, and warnings for phases whose passes disagree."""
    by_name: dict[str, list[dict]] = {}
    for p in phases:
        by_name.setdefault(p["name"], []).append(p)
    summaries, warnings = [], []
    for name, runs in by_name.items():
        entry: dict[str, Any] = {"name": name, "passes": len(runs)}
        for d in ("read", "write"):
            sides = [r[d] for r in runs if d in r]
            if not sides:
                continue
            merged = stats.merge(*[s["lat_hist"]["buckets"] for s in sides])
            ops = sum(s["ops"] for s in sides)
            if ops:  # the engine's exact figures beat the histogram's estimates where they combine
                lat = stats.summary(merged, min_ns=min(s["lat_ns"]["min"] for s in sides if s["ops"]),
                                    max_ns=max(s["lat_ns"]["max"] for s in sides if s["ops"]))
                lat["mean"] = sum(s["lat_ns"]["mean"] * s["ops"] for s in sides) / ops
            else:
                lat = stats.summary(merged)
            entry[d] = {
                "bw_bytes": describe(s["bw_bytes"] for s in sides),
                "iops": describe(s["iops"] for s in sides),
                "lat_ns": lat,
                "lat_hist": {"scheme": sides[0]["lat_hist"]["scheme"], "buckets": merged},
                "bytes": sum(s["bytes"] for s in sides),
                "ops": ops,
            }
            spread = entry[d]["bw_bytes"]["spread_pct"]
            if len(sides) > 1 and spread > spread_warn_pct:
                warnings.append({"code": "pass_spread",
                                 "message": f"{name} {d}: passes differ by {spread:.0f} % in bandwidth "
                                            f"(more than {spread_warn_pct:g} %): look for caching, "
                                            f"background load or a device that slows as it fills"})
        summaries.append(entry)
    return summaries, warnings
