"""Cross-rank aggregation: one phase result of the `storlab.run/1` layout from every rank's
(merge_phase for `storlab run`, merge_meta_phase for `storlab meta`, which counts operations where
the other counts bytes; docs/mpi.md states both).

Time base. Rank r's phase started at `start_unix_s` on its own clock; `offset_s` (clock.py)
turns that into rank 0's clock: base_r = start_unix_s + offset_s. The merged phase starts at
T0 = min over ranks of base_r, and every time in it (workers, aggregate, per-rank records) is in
seconds after T0: a rank's own times are shifted by base_r - T0.

What the aggregates mean (the same keys as the engine's single-process `aggregate`, over every
worker of every rank; docs/mpi.md repeats this):
- `bytes`: all bytes of all ranks (summed).
- `bw_bytes`: bytes / (latest finish - earliest start) over all workers of all ranks (IOR).
- `deskew_window_s`: [latest worker start, earliest worker finish], the window in which every
  worker of every rank was active; `deskew_bytes` is what all of them moved in it (each rank
  counts its own from its progress logs, `bytes_in_window`, and they are summed);
  `deskew_bw_bytes` = deskew_bytes / window length (Xdd's de-skewed rate). None if no overlap.
- `first_done_s` / `last_done_s`: the first and last worker to finish; `straggler_s` their gap.
- `slowest_worker` (index into the merged `workers`), `slowest_rank`: lowest own bandwidth.
- `read`/`write`: bytes and ops summed; rates over the merged measured `seconds`; latency
  histograms merged exactly by adding buckets (stats.merge); min/max exact; mean and stddev
  exact by the parallel (pooled) formula; percentiles from the merged histogram, clamped to the
  exact merged min/max (as the engine clamps its own).
- `timeseries`: interval k summed over ranks, each rank's intervals counted from its own phase
  start (ranks start within the barrier skew recorded as `mpi.start_skew_s`); its mean latencies
  are the ranks' means weighted by their requests in the interval.
- `mpi.ranks` / `mpi.nodes`: per rank and per node; `mpi.links` (I/O): per node and target it
  used; `mpi.stragglers`: the ranks that finished last, latest first; `mpi.slowest_ranks`: the
  lowest own bandwidths, against the median.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from ..document import DIRECTIONS
from . import stats
from .opmix import merge_mix

__all__ = ["time_bases", "deskew_window", "window_summary", "merge_window_summaries", "window_of_summary",
           "count_in_window", "pooled_latency", "merge_direction",
           "merge_sync", "merge_phase", "merge_meta_phase", "REPORTED_RANKS"]

REPORTED_RANKS = 3   # ranks named in the straggler and slowest-rank lists


def time_bases(reports: Sequence[dict[str, Any] | None]) -> tuple[float, list[float | None]]:
    """(T0, shift per rank): T0 on rank 0's clock, shift_r = base_r - T0 (None: no report)."""
    bases = [None if r is None else r["start_unix_s"] + r["offset_s"] for r in reports]
    known = [b for b in bases if b is not None]
    if not known:
        raise ValueError("merge: no rank reported a result")
    t0 = min(known)
    return t0, [None if b is None else b - t0 for b in bases]


def _worker_times(reports, shifts) -> list[tuple[float, float]]:
    return [(w["start_s"] + s, w["end_s"] + s)
            for r, s in zip(reports, shifts) if r is not None for w in r["workers"]]


def deskew_window(reports: Sequence[dict[str, Any] | None]) -> tuple[float, list[float | None], list[float] | None]:
    """(T0, shifts, [t0, t1]): the window (seconds after T0) in which every worker of every
    reporting rank was active, or None when some worker finished before another started.

    Each report needs `start_unix_s`, `offset_s` and `workers` (start_s/end_s per worker).
    """
    t0, shifts = time_bases(reports)
    times = _worker_times(reports, shifts)
    if not times:
        return t0, shifts, None
    last_start = max(s for s, _ in times)
    first_done = min(e for _, e in times)
    return t0, shifts, ([last_start, first_done] if first_done > last_start else None)


def window_summary(rank: int, report: dict[str, Any]) -> dict[str, Any]:
    """What `deskew_window` needs of one rank's report, in a form that merges pairwise (so ranks
    can combine it along a tree): its time base on rank 0's clock, its workers' latest start and
    earliest finish (each kept as [base, seconds after it], so the window comes out to the last
    bit as `deskew_window` computes it), and its stop when its phase did not complete."""
    base = report["start_unix_s"] + report["offset_s"]
    starts = [w["start_s"] for w in report["workers"]]
    ends = [w["end_s"] for w in report["workers"]]
    stop = None if report["complete"] else {"rank": rank, "stop_reason": report["stop_reason"],
                                            "error": report.get("error")}
    return {"t0": base, "last_start": [base, max(starts)] if starts else None,
            "first_done": [base, min(ends)] if ends else None, "stop": stop}


def merge_window_summaries(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two summaries (of disjoint sets of ranks) as one: earliest base, latest start, earliest
    finish, and the stop of the lowest rank that did not complete."""
    def pick(x, y, f):
        return y if x is None else x if y is None else f(x, y, key=lambda t: t[0] + t[1])

    stops = [x for x in (a["stop"], b["stop"]) if x is not None]
    return {"t0": min(a["t0"], b["t0"]), "last_start": pick(a["last_start"], b["last_start"], max),
            "first_done": pick(a["first_done"], b["first_done"], min),
            "stop": min(stops, key=lambda x: x["rank"]) if stops else None}


def window_of_summary(summary: dict[str, Any]) -> tuple[float, list[float] | None]:
    """(T0, [t0, t1]) from the merged summary of every rank, as `deskew_window` finds them from
    the reports; a rank's shift is then its own base minus T0."""
    t0 = summary["t0"]
    if summary["last_start"] is None or summary["first_done"] is None:
        return t0, None
    last = summary["last_start"][1] + (summary["last_start"][0] - t0)
    first = summary["first_done"][1] + (summary["first_done"][0] - t0)
    return t0, ([last, first] if first > last else None)


def pooled_latency(dirs: Sequence[dict[str, Any]], key: str = "lat") -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Merged summary and histogram of latency `key` (lat / clat / slat) over directions with ops."""
    parts = [d for d in dirs if d.get(f"{key}_hist") and d.get(f"{key}_ns") and d.get("ops")]
    if not parts:
        return None
    hist = stats.merge(*(d[f"{key}_hist"]["buckets"] for d in parts))
    n_i = [stats.count(d[f"{key}_hist"]["buckets"]) for d in parts]
    lat = [d[f"{key}_ns"] for d in parts]
    n = sum(n_i)
    if n == 0:
        return None
    mean = sum(c * s["mean"] for c, s in zip(n_i, lat)) / n
    # Pooled variance: within-part sums of squares plus between-part spread (n - 1 denominators,
    # as the engine computes stddev).
    m2 = sum((c - 1) * (s.get("stddev") or 0.0) ** 2 + c * (s["mean"] - mean) ** 2 for c, s in zip(n_i, lat) if c)
    # Percentiles from the merged buckets, clamped to the exact merged min and max as the engine
    # clamps its own: a bucket's midpoint can lie above the largest sample in it.
    summary = stats.summary(hist, min_ns=min(s["min"] for s in lat), max_ns=max(s["max"] for s in lat))
    summary["mean"] = mean
    summary["stddev"] = math.sqrt(m2 / (n - 1)) if n > 1 else 0.0
    return summary, {"scheme": stats.SCHEME, "buckets": hist}


def _sum_series(series: Sequence[Sequence[float]]) -> list[float]:
    out: list[float] = []
    for s in series:
        for i, v in enumerate(s):
            if i < len(out):
                out[i] += v
            else:
                out.append(v)
    return out


def _mean_series(ts: Sequence[dict[str, Any]], key: str, iops: Sequence[float]) -> list[float]:
    """Interval k's mean latency over the ranks: their means weighted by their requests (IOPS)."""
    weighted = _sum_series([[m * r for m, r in zip(t[key], t["iops"])] for t in ts])
    return [w / n if n > 0 else 0.0 for w, n in zip(weighted, iops)]


def merge_direction(dirs: Sequence[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """One `read` or `write` section from the ranks' sections of it (see the module doc)."""
    b = sum(d["bytes"] for d in dirs)
    ops = sum(d["ops"] for d in dirs)
    out: dict[str, Any] = {
        "bytes": b, "ops": ops, "seconds": seconds,
        "iops": ops / seconds if seconds > 0 else 0.0,
        "bw_bytes": b / seconds if seconds > 0 else 0.0,
    }
    for key in ("lat", "clat", "slat"):
        pooled = pooled_latency(dirs, key)
        if pooled is not None:
            out[f"{key}_ns"], out[f"{key}_hist"] = pooled
        elif key == "lat":   # no samples: zeros, as the engine reports an empty histogram
            out["lat_ns"] = {"min": 0, "mean": 0.0, "stddev": 0.0, "p50": 0, "p90": 0, "p99": 0, "p999": 0, "max": 0}
            out["lat_hist"] = {"scheme": stats.SCHEME, "buckets": []}
    ts = [d["timeseries"] for d in dirs if d.get("timeseries")]
    if ts:
        out["timeseries"] = {"interval_s": ts[0]["interval_s"],
                             "bw_bytes": _sum_series([t["bw_bytes"] for t in ts]),
                             "iops": _sum_series([t["iops"] for t in ts])}
        for key in ("lat_mean_ns", "clat_mean_ns", "slat_mean_ns"):
            if all(key in t for t in ts):
                out["timeseries"][key] = _mean_series(ts, key, out["timeseries"]["iops"])
    return out


def merge_sync(parts: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    parts = [p for p in parts if p]
    if not parts:
        return None
    pooled = pooled_latency(parts, "lat")
    out = {"ops": sum(p["ops"] for p in parts)}
    if pooled:
        out["lat_ns"], out["lat_hist"] = pooled
    return out


def _merge_verify(parts: Sequence[tuple[int, dict[str, Any]]]) -> dict[str, Any] | None:
    """Verification counts summed; the first mismatches of every rank kept, each naming its rank."""
    if not parts:
        return None
    out = dict(parts[0][1])
    for key in ("mismatches", "checked_blocks", "readback_blocks", "bs_mismatches"):
        if all(isinstance(p.get(key), int) for _, p in parts):
            out[key] = sum(p[key] for _, p in parts)
    if all(isinstance(p.get("readback_s"), (int, float)) for _, p in parts):
        out["readback_s"] = max(p["readback_s"] for _, p in parts)
    out["first"] = [{**m, "rank": rank} for rank, p in parts for m in p.get("first") or []]
    first_bs = next(({**p["first_bs_mismatch"], "rank": rank} for rank, p in parts if p.get("first_bs_mismatch")), None)
    if "first_bs_mismatch" in out:
        out["first_bs_mismatch"] = first_bs
    return out


def _own_bw(amount: float, start: float, end: float) -> float:
    """An amount (bytes or operations) over its own span."""
    return amount / (end - start) if end > start else 0.0


def _worker_bytes(w: dict[str, Any]) -> int:
    """All bytes a worker moved: reads, writes and (present only for a worker that trimmed) trims."""
    return w["read_bytes"] + w["write_bytes"] + w.get("trim_bytes", 0)


def _shifted_workers(rank: int, res: dict[str, Any], shift: float, first_id: int) -> list[dict[str, Any]]:
    """A rank's workers in the merged time base, numbered on from `first_id`."""
    return [{**w, "id": first_id + i, "rank": rank, "local_id": w["id"],
             "start_s": w["start_s"] + shift, "end_s": w["end_s"] + shift}
            for i, w in enumerate(res["workers"])]


def _outcome(present: Sequence[tuple[int, dict[str, Any]]], missing: Sequence[int]) -> dict[str, Any]:
    """complete / stop_reason / error / error_kind of a merged phase: the first rank's error wins,
    then a missing rank, then an interrupt."""
    errors = [res for _, res in present if res["stop_reason"] == "error"]
    interrupted = any(res["stop_reason"] == "interrupted" for _, res in present)
    if errors:
        stop_reason, error = "error", errors[0].get("error")
    elif missing:
        stop_reason, error = "error", f"no result from rank {', '.join(map(str, missing))}"
    else:
        stop_reason, error = ("interrupted" if interrupted else "done"), None
    return {"complete": not missing and all(res["complete"] for _, res in present),
            "stop_reason": stop_reason, "error": error,
            "error_kind": errors[0].get("error_kind") if errors else None}


def merge_phase(results: Sequence[dict[str, Any] | None], window_bytes: Sequence[float | None] | None = None,
                nodes: Sequence[str] | None = None) -> dict[str, Any]:
    """The merged phase from each rank's phase result (None: the rank sent none).

    Each result is the runner's phase dict plus `offset_s` (clock offset of its rank) and
    optionally `data_rank` and `targets`. `window_bytes[r]` is what rank r moved inside the
    de-skew window (from `bytes_in_window`), None when unknown.
    """
    size = len(results)
    nodes = list(nodes) if nodes is not None else ["?"] * size
    present = [(r, res) for r, res in enumerate(results) if res is not None]
    t0, shifts, window = deskew_window(results)
    first = present[0][1]
    ramp = first.get("ramp_s", 0.0)

    workers: list[dict[str, Any]] = []
    per_rank: list[dict[str, Any]] = []
    for r, res in present:
        s = shifts[r]
        ws = _shifted_workers(r, res, s, len(workers))
        workers.extend(ws)
        nbytes = sum(_worker_bytes(w) for w in res["workers"])
        start = min((w["start_s"] for w in ws), default=s)
        end = max((w["end_s"] for w in ws), default=s)
        rec: dict[str, Any] = {
            "rank": r, "node": nodes[r], "data_rank": res.get("data_rank", r),
            "targets": res.get("targets") or sorted({w["target"] for w in res["workers"]}),
            "offset_s": res["offset_s"], "start_unix_s": res["start_unix_s"], "shift_s": s,
            "start_s": start, "end_s": end, "bytes": nbytes, "bw_bytes": _own_bw(nbytes, start, end),
            "deskew_bytes": None if window_bytes is None else window_bytes[r],
            "complete": res["complete"], "stop_reason": res["stop_reason"], "error": res.get("error"),
        }
        for d in DIRECTIONS:
            if isinstance(res.get(d), dict):
                rec[d] = {k: res[d][k] for k in ("bytes", "ops", "bw_bytes", "lat_ns", "lat_hist") if k in res[d]}
        if res.get("verify"):
            rec["verify"] = res["verify"]
        per_rank.append(rec)

    nbytes = sum(_worker_bytes(w) for w in workers)
    if workers:
        first_start = min(w["start_s"] for w in workers)
        last_start = max(w["start_s"] for w in workers)
        first_done = min(w["end_s"] for w in workers)
        last_done = max(w["end_s"] for w in workers)
    else:
        first_start = last_start = first_done = last_done = 0.0
    # Measured window as the engine defines it, over all ranks: from the earliest moment any rank
    # measured (its first start, not before its own ramp ended) to the last finish.
    starts = [shifts[r] + max(min((w["start_s"] for w in res["workers"]), default=0.0), ramp)
              for r, res in present if res["workers"]]
    seconds = max(0.0, last_done - min(starts)) if starts else 0.0
    span = last_done - first_start

    dbytes = None
    if window is not None and window_bytes is not None and all(window_bytes[r] is not None for r, _ in present):
        dbytes = float(sum(window_bytes[r] for r, _ in present))
    slowest = min(workers, key=lambda w: _own_bw(w["read_bytes"] + w["write_bytes"], w["start_s"], w["end_s"]),
                  default=None)
    slow_rank = min(per_rank, key=lambda x: x["bw_bytes"], default=None)
    aggregate = {
        "workers": len(workers), "ranks": len(present), "bytes": nbytes,
        "first_start_s": first_start, "last_start_s": last_start,
        "first_done_s": first_done, "last_done_s": last_done,
        "bw_bytes": nbytes / span if span > 0 else 0.0,
        "deskew_window_s": window,
        "deskew_bytes": dbytes if window is not None else None,
        "deskew_bw_bytes": dbytes / (window[1] - window[0]) if window is not None and dbytes is not None else None,
        "straggler_s": last_done - first_done,
        "slowest_worker": slowest["id"] if slowest else None,
        "slowest_bw_bytes": (_own_bw(slowest["read_bytes"] + slowest["write_bytes"], slowest["start_s"], slowest["end_s"])
                             if slowest else None),
        "slowest_rank": slow_rank["rank"] if slow_rank else None,
    }

    missing = [r for r, res in enumerate(results) if res is None]
    out: dict[str, Any] = {
        "name": first["name"], **_outcome(present, missing),
        "seconds": seconds, "ramp_s": ramp, "start_unix_s": t0, "aggregate": aggregate,
    }
    for d in DIRECTIONS:
        parts = [res[d] for _, res in present if isinstance(res.get(d), dict)]
        if parts:
            out[d] = merge_direction(parts, seconds)
    sync = merge_sync([res.get("sync") for _, res in present])
    if sync:
        out["sync"] = sync
    verify = _merge_verify([(r, res["verify"]) for r, res in present if res.get("verify")])
    if verify:
        out["verify"] = verify
    out["workers"] = workers
    for key in ("rw", "groups"):
        if key in first:
            out[key] = first[key]
    out["mpi"] = _mpi_section(per_rank, nodes, missing)
    out["mpi"]["links"] = _links(workers, nodes)
    return out


def _links(workers: Sequence[dict[str, Any]], nodes: Sequence[str]) -> list[dict[str, Any]]:
    """Per link (a node and a target it used): the ranks, bytes (all directions), the span of its
    workers in the merged time base and the rate over that span, in order of first use."""
    by_link: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for w in workers:
        by_link.setdefault((nodes[w["rank"]], str(w["target"])), []).append(w)
    out = []
    for (node, target), ws in by_link.items():
        start, end = min(w["start_s"] for w in ws), max(w["end_s"] for w in ws)
        total = sum(_worker_bytes(w) for w in ws)
        out.append({"node": node, "target": target, "ranks": sorted({w["rank"] for w in ws}), "bytes": total,
                    "start_s": start, "end_s": end, "bw_bytes": _own_bw(total, start, end)})
    return out


def _mpi_section(per_rank: list[dict[str, Any]], nodes: Sequence[str], missing: list[int],
                 amount: str = "bytes", rate: str = "bw_bytes", deskew: str = "deskew_bytes") -> dict[str, Any]:
    """Per node, first/last done, stragglers and slowest ranks; `amount`/`rate`/`deskew` name what
    is counted (bytes for I/O runs, ops for metadata runs)."""
    by_node: dict[str, list[dict[str, Any]]] = {}
    for rec in per_rank:
        by_node.setdefault(rec["node"], []).append(rec)
    node_recs = []
    for node, recs in by_node.items():
        start, end = min(x["start_s"] for x in recs), max(x["end_s"] for x in recs)
        total = sum(x[amount] for x in recs)
        dparts = [x[deskew] for x in recs]
        node_recs.append({"node": node, "ranks": [x["rank"] for x in recs], amount: total,
                          "start_s": start, "end_s": end, rate: _own_bw(total, start, end),
                          deskew: None if None in dparts else sum(dparts)})
    section: dict[str, Any] = {"ranks": per_rank, "nodes": node_recs, "missing_ranks": missing}
    if per_rank:
        by_end = sorted(per_rank, key=lambda x: x["end_s"])
        first_done = by_end[0]
        section["first_done"] = {"rank": first_done["rank"], "node": first_done["node"], "s": first_done["end_s"]}
        section["last_done"] = {"rank": by_end[-1]["rank"], "node": by_end[-1]["node"], "s": by_end[-1]["end_s"]}
        section["start_skew_s"] = max(x["shift_s"] for x in per_rank) - min(x["shift_s"] for x in per_rank)
        section["stragglers"] = [
            {"rank": x["rank"], "node": x["node"], "start_s": x["start_s"], "end_s": x["end_s"],
             "behind_s": x["end_s"] - first_done["end_s"], rate: x[rate]}
            for x in reversed(by_end[-REPORTED_RANKS:]) if len(per_rank) > 1]
        import statistics  # only where ranks are merged

        median = statistics.median(x[rate] for x in per_rank)
        section["slowest_ranks"] = [
            {"rank": x["rank"], "node": x["node"], rate: x[rate],
             "vs_median": x[rate] / median if median > 0 else None}
            for x in sorted(per_rank, key=lambda x: x[rate])[:REPORTED_RANKS] if len(per_rank) > 1]
    return section


# -- metadata phases (storlab meta) ------------------------------------------------------------
def count_in_window(samples: Sequence[tuple[float, float]], t0: float, t1: float) -> float:
    """How much a counter grew between t0 and t1, from (time, count) samples in time order,
    interpolated linearly between samples (so exact to within the counts of one sampling interval
    at each end) and held constant outside them."""
    if not samples or t1 <= t0:
        return 0.0

    def at(t: float) -> float:
        if t <= samples[0][0]:
            return samples[0][1]
        for (ta, ca), (tb, cb) in zip(samples, samples[1:]):
            if t <= tb:
                return ca if tb <= ta else ca + (cb - ca) * (t - ta) / (tb - ta)
        return samples[-1][1]
    return at(t1) - at(t0)


def merge_meta_phase(results: Sequence[dict[str, Any] | None], window_ops: Sequence[float | None] | None = None,
                     nodes: Sequence[str] | None = None) -> dict[str, Any]:
    """One metadata phase (the keys of a single-process `storlab meta` phase) from every rank's.

    Each result is the engine's meta phase result plus `offset_s`. Operations and bytes are summed;
    `seconds` runs from the earliest rank's phase start (T0) to the last worker's finish on rank 0's
    clock, and `ops_per_s` = ops / seconds. `window_ops[r]` is what rank r did inside the de-skew
    window (count_in_window over its progress samples), None when unknown. Latency and sync
    histograms are merged exactly (bucket addition); `items_per_worker` lists every worker of
    every rank in rank order, as `workers` does.
    """
    size = len(results)
    nodes = list(nodes) if nodes is not None else ["?"] * size
    present = [(r, res) for r, res in enumerate(results) if res is not None]
    _, shifts, window = deskew_window(results)
    first = present[0][1]
    workers: list[dict[str, Any]] = []
    per_rank: list[dict[str, Any]] = []
    for r, res in present:
        ws = _shifted_workers(r, res, shifts[r], len(workers))
        workers.extend(ws)
        start = min((w["start_s"] for w in ws), default=shifts[r])
        end = max((w["end_s"] for w in ws), default=shifts[r])
        per_rank.append({
            "rank": r, "node": nodes[r], "targets": sorted({w["target"] for w in res["workers"]}),
            "offset_s": res["offset_s"], "start_unix_s": res["start_unix_s"], "shift_s": shifts[r],
            "start_s": start, "end_s": end, "ops": res["ops"], "ops_per_s": _own_bw(res["ops"], start, end),
            "bytes": res["bytes"], "items_per_worker": res["items_per_worker"],
            "stonewalled": res["stonewalled"],
            "deskew_ops": None if window_ops is None else window_ops[r],
            "lat_ns": res["lat_ns"], "lat_hist": res["lat_hist"],
            "complete": res["complete"], "stop_reason": res["stop_reason"], "error": res.get("error"),
        })
    last_done = max((w["end_s"] for w in workers), default=0.0)
    first_done = min((w["end_s"] for w in workers), default=0.0)
    seconds = last_done   # T0 is 0 in the merged time base
    parts = [res for _, res in present]
    lat = merge_direction(parts, seconds)
    ops, nbytes = lat["ops"], lat["bytes"]
    dops = None
    if window is not None and window_ops is not None and all(window_ops[r] is not None for r, _ in present):
        dops = float(sum(window_ops[r] for r, _ in present))
    slow_rank = min(per_rank, key=lambda x: x["ops_per_s"], default=None)
    missing = [r for r, res in enumerate(results) if res is None]
    out: dict[str, Any] = {
        "name": first["name"], **_outcome(present, missing),
        "ops": ops, "seconds": seconds, "ops_per_s": ops / seconds if seconds > 0 else 0.0,
        "lat_ns": lat["lat_ns"], "lat_hist": lat["lat_hist"],
        "items_per_worker": [n for res in parts for n in res["items_per_worker"]],
        "stonewalled": any(res["stonewalled"] for res in parts), "stonewall_s": first.get("stonewall_s"),
        "bytes": nbytes, "bw_bytes": nbytes / seconds if seconds > 0 else 0.0,
    }
    for key in ("file_sync", "dir_sync"):
        sync = merge_sync([res.get(key) for res in parts])
        if sync:
            out[key] = sync
    if "mix" in first:     # the operation-mix phase: each operation's figures over every rank
        out["mix"] = merge_mix([res["mix"] for res in parts], seconds)
    out["start_unix_s"] = min(res["start_unix_s"] + res["offset_s"] for res in parts)
    out["aggregate"] = {
        "workers": len(workers), "ranks": len(present), "ops": ops, "bytes": nbytes,
        "first_start_s": min((w["start_s"] for w in workers), default=0.0),
        "last_start_s": max((w["start_s"] for w in workers), default=0.0),
        "first_done_s": first_done, "last_done_s": last_done,
        "ops_per_s": out["ops_per_s"],
        "deskew_window_s": window,
        "deskew_ops": dops if window is not None else None,
        "deskew_ops_per_s": dops / (window[1] - window[0]) if window is not None and dops is not None else None,
        "straggler_s": last_done - first_done,
        "slowest_rank": slow_rank["rank"] if slow_rank else None,
    }
    out["workers"] = workers
    out["mpi"] = _mpi_section(per_rank, nodes, missing, amount="ops", rate="ops_per_s", deskew="deskew_ops")
    return out
