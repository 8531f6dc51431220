"""Repeated passes of a job: per-pass numbers summarised with mean, standard deviation, min/max and
a 95 % confidence interval of the mean (Student's t), latency histograms of all passes merged
exactly, and a warning when the passes disagree.

The interval is kept as computed (`ci95`); for display it is clipped at the quantity's floor
(bandwidth and IOPS cannot be negative: `ci95_shown`), which keeps its 95 % coverage since the
true mean lies above the floor, and the clip is said where it is shown. Under 3 passes the
t-interval rests on one degree of freedom (t = 12.7) or none and says little; `ci95_note` says so.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

from ..document import DIRECTIONS
from . import stats

# Two-sided 95 % Student's t critical values by degrees of freedom (1..30); normal beyond.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)


def t95(dof: int) -> float:
    return _T95[dof - 1] if 1 <= dof <= len(_T95) else 1.960


# Fewer passes than this give an interval too wide to mean much: the output says so.
MIN_PASSES_FOR_INTERVAL = 3


def interval_note(n: int) -> str | None:
    """What to know about a 95 % t-interval of the mean over `n` values (None: nothing)."""
    if n < 2:
        return f"{n} pass: no interval"
    if n < MIN_PASSES_FOR_INTERVAL:
        return (f"only {n} passes, so t = {t95(n - 1):g} on {n - 1} degree of freedom: the interval is very "
                f"wide and says little; use --passes {MIN_PASSES_FOR_INTERVAL} or more")
    return None


def describe(values: Iterable[float], floor: float | None = None) -> dict[str, Any]:
    """mean, stddev (n-1), min, max, the 95 % CI of the mean as computed (`ci95`) and as shown
    (`ci95_shown`: clipped at `floor`, for quantities that cannot go below it), a note on the
    interval under 3 values, and the values themselves."""
    import statistics  # with fractions and decimal: only where passes are summarised

    v = [float(x) for x in values]
    n = len(v)
    mean = statistics.fmean(v) if v else 0.0
    sd = statistics.stdev(v) if n > 1 else 0.0
    half = t95(n - 1) * sd / math.sqrt(n) if n > 1 else 0.0
    lo, hi = mean - half, mean + half
    return {"n": n, "mean": mean, "stddev": sd, "min": min(v, default=0.0), "max": max(v, default=0.0),
            "ci95": [lo, hi], "ci95_shown": [lo if floor is None else max(lo, floor), hi],
            "ci95_note": interval_note(n),
            "spread_pct": 100.0 * (max(v) - min(v)) / mean if n and mean else 0.0,
            "values": v}


def format_interval(d: dict[str, Any], scale: float = 1.0, unit: str = "", what: str = "it") -> str:
    """`95 % CI [lo, hi] unit`, from describe(): the interval as shown, then why it differs from
    the computed one (clipped at the floor) and the note on few passes, in parentheses."""
    lo, hi = d.get("ci95_shown") or d["ci95"]
    text = f"95 % CI [{lo / scale:,.1f}, {hi / scale:,.1f}]" + (f" {unit}" if unit else "")
    notes = []
    if lo != d["ci95"][0]:
        notes.append(f"lower bound {d['ci95'][0] / scale:,.1f} clipped at {lo / scale:,.1f}: {what} cannot be negative")
    if d.get("ci95_note"):
        notes.append(d["ci95_note"])
    return text + (f" ({'; '.join(notes)})" if notes else "")


def summarise(phases: list[dict[str, Any]], spread_warn_pct: float) -> tuple[list[dict], list[dict]]:
    """Summaries per phase name over passes, and warnings for phases whose passes disagree."""
    by_name: dict[str, list[dict]] = {}
    for p in phases:
        by_name.setdefault(p["name"], []).append(p)
    summaries, warnings = [], []
    for name, runs in by_name.items():
        entry: dict[str, Any] = {"name": name, "passes": len(runs)}
        for d in DIRECTIONS:
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
                "bw_bytes": describe((s["bw_bytes"] for s in sides), floor=0.0),
                "iops": describe((s["iops"] for s in sides), floor=0.0),
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
