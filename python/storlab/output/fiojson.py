"""fio's JSON output layout (`fio --output-format=json`, fio 3.x) computed from a storlab run document,
so fio-JSON consumers (fio-plot, dashboards, scripts) read storlab runs.

One fio job per storlab phase (each pass of a phase with --passes), as fio reports a job section run
with `group_reporting`: the phase's threads are one job, its groupid is the phase's position. Every
key fio 3.33 writes per job is present with fio's type; the values come from the document:
counts, bytes and rates from the phase's directions, latencies and their percentiles (fio's default
list) from storlab's exact loglinear6 histograms, bw_*/iops_* from the phase's time series, the
latency_ns/us/ms buckets from the completion-latency histogram. What storlab does not measure is
stated in docs/fio.md (JSON output): ctx, majf, minf are 0, iodepth_level/submit/complete follow the
configured queue depth, disk_util is empty. The top-level "fio version" is "storlab-<version>", so a
reader can tell these files from fio's own.
"""
from __future__ import annotations

import datetime as _dt
import math
import re
import time
from typing import Any, Iterable, Sequence

from .. import __version__
from ..measure import stats

__all__ = ["fio_json", "fio_error_number", "steadystate_data", "mixed_direction", "fio_mixed", "job_name",
           "FIO_PERCENTILES", "FIO_VERSION"]

FIO_VERSION = f"storlab-{__version__}"
# fio's default percentile_list (stat.c: fio_def_percentile_list)
FIO_PERCENTILES = (1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0,
                   99.5, 99.9, 99.95, 99.99)
DIRECTIONS = ("read", "write", "trim")

# fio's latency buckets (stat.c io_u_mark_lat_*): each label is the exclusive upper bound of its
# range in that unit; the ms scale ends with 2000 and >=2000.
_LAT_LABELS = ("2", "4", "10", "20", "50", "100", "250", "500", "750", "1000")
_LAT_BOUNDS = (2, 4, 10, 20, 50, 100, 250, 500, 750, 1000)
_LAT_MS_LABELS = _LAT_LABELS + ("2000", ">=2000")
# queue-depth buckets: iodepth_level by lower bound, iodepth_submit/complete by upper bound
_DEPTH_LEVEL = ((1, "1"), (2, "2"), (4, "4"), (8, "8"), (16, "16"), (32, "32"), (64, ">=64"))
_DEPTH_BATCH = ((0, "0"), (4, "4"), (8, "8"), (16, "16"), (32, "32"), (64, "64"))


def fio_json(doc: dict[str, Any]) -> dict[str, Any]:
    """fio's JSON layout of a storlab.run/1 document (kind run). Phases without I/O (metadata
    phases) have no fio job and are left out."""
    if doc.get("schema") != "storlab.run/1" or doc.get("kind") != "run":
        raise ValueError(f"fio JSON: needs a storlab.run/1 document of kind run, got schema "
                         f"{doc.get('schema')!r} kind {doc.get('kind')!r}")
    started = _unix_time(doc.get("started_at"))
    phase_specs = {p.get("name"): p for p in (doc.get("job") or {}).get("phases") or []}
    jobs = []
    for phase in doc.get("phases") or []:
        if "rw" not in phase:
            continue
        spec = phase_specs.get(phase["name"]) or {}
        jobs.append(_job(phase, spec, doc, groupid=len(jobs)))
    job_options = [j["job options"] for j in jobs]
    common = {k: v for k, v in job_options[0].items() if k != "name"
              and all(o.get(k) == v for o in job_options)} if job_options else {}
    return {
        "fio version": FIO_VERSION,
        "timestamp": int(started),
        "timestamp_ms": int(started * 1000),
        "time": time.ctime(started),
        "global options": common,
        "jobs": jobs,
        "disk_util": list((doc.get("environment") or {}).get("disk_util") or []),
        "storlab": {"run_id": doc.get("run_id"), "complete": doc.get("complete"),
                    "stop_reason": doc.get("stop_reason")},
    }


def _unix_time(iso: str | None) -> float:
    if not iso:
        return time.time()
    return _dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def fio_error_number(error: str | None) -> int:
    """fio's `error` of a job: 0 when it ran clean, else the errno its failure carries (the
    engine's "(os error N)", e.g. 28 for ENOSPC on /dev/full, as fio reports), else 1."""
    if not error:
        return 0
    found = re.search(r"\(os error (\d+)\)", error)
    return int(found.group(1)) if found else 1


def job_name(phase: dict[str, Any]) -> str:
    """The fio job name of a result phase: its name, with `.passN` for a pass of a repeated phase."""
    return phase["name"] if phase.get("pass") is None else f"{phase['name']}.pass{phase['pass']}"


def _job(phase: dict[str, Any], spec: dict[str, Any], doc: dict[str, Any], groupid: int) -> dict[str, Any]:
    groups = spec.get("groups") or [doc.get("job") or {}]
    first = groups[0]
    seconds = float(phase.get("seconds") or 0.0)
    name = job_name(phase)
    job: dict[str, Any] = {
        "jobname": name,
        "groupid": groupid,
        "error": fio_error_number(phase.get("error")),
        "eta": 0,
        "elapsed": int(round(seconds + float(phase.get("ramp_s") or 0.0))),
        "job options": _job_options(phase, groups),
    }
    for d in DIRECTIONS:
        job[d] = _direction(phase.get(d))
    job["sync"] = _sync(phase.get("sync"))
    cpu = phase.get("cpu") or {}
    cpu_s = float(cpu.get("seconds") or seconds or 0.0)
    job.update({
        "job_runtime": int(round(seconds * 1000)),
        "usr_cpu": _pct(cpu.get("self_user_s"), cpu_s),
        "sys_cpu": _pct(cpu.get("self_system_s"), cpu_s),
        "ctx": 0, "majf": 0, "minf": 0,
    })
    qd = int(first.get("qd") or 1) if first.get("engine") == "io_uring" else 1
    batch = int(first.get("uring.batch") or 0) or qd
    job["iodepth_level"] = _one_bucket(_DEPTH_LEVEL, qd, lower=True)
    job["iodepth_submit"] = _one_bucket(_DEPTH_BATCH, batch, lower=False)
    job["iodepth_complete"] = _one_bucket(_DEPTH_BATCH, batch, lower=False)
    job.update(_latency_buckets([_hist(phase.get(d), "clat") for d in DIRECTIONS]))
    job.update({"latency_depth": qd, "latency_target": 0, "latency_percentile": 100.0, "latency_window": 0})
    lt = phase.get("latency_target")
    if lt:   # fio's units: microseconds
        job.update({"latency_depth": lt["qd"] or 1, "latency_target": int(round(lt["target_s"] * 1e6)),
                    "latency_percentile": float(lt["percentile"]), "latency_window": int(round(lt["window_s"] * 1e6))})
    ss = phase.get("steadystate")
    if ss:
        job["steadystate"] = _steadystate(ss)
    return job


def _steadystate(ss: dict[str, Any]) -> dict[str, Any]:
    """fio's steadystate object of the phase's own check: its criterion text, and the window's
    samples (steadystate_data)."""
    pct = "%" if ss["limit_is_pct"] else ""
    return {"ss": f"{ss['metric']}:{ss['limit']:f}{pct}", "duration": int(round(ss["duration_s"])),
            "attained": int(bool(ss["attained"])),
            "criterion": f"{(ss.get('criterion') or 0.0):f}{pct}",
            "max_deviation": float(ss.get("max_deviation") or 0.0), "slope": float(ss.get("slope") or 0.0),
            "data": steadystate_data(ss)}


def steadystate_data(ss: dict[str, Any]) -> dict[str, Any]:
    """fio's steadystate `data` of a phase's `steadystate` record: the window's samples of each
    metric (bytes/s, IOPS and, for a lat criterion, mean clat in ns) with their integer means; a
    document from before storlab kept every metric has only the judged one, the others empty."""
    base = ss["metric"].partition("_")[0]
    judged = [int(round(v)) for v in ss["samples"]]
    series = {m: [int(round(v)) for v in ss[key]] if key in ss else (judged if base == m else [])
              for m, key in (("iops", "iops"), ("bw", "bw_bytes"), ("lat", "clat_mean_ns"))}
    data: dict[str, Any] = {"bw_mean": _mean(series["bw"]), "iops_mean": _mean(series["iops"])}
    if base == "lat":
        data.update(lat_mean=_mean(series["lat"]), lat_ns=series["lat"])
    data.update(iops=series["iops"], bw=series["bw"])
    return data


def _mean(values: list[int]) -> int:
    """fio's steadystate_data_mean: the integer mean of a window's samples (0 for none)."""
    return sum(values) // len(values) if values else 0


def _job_options(phase: dict[str, Any], groups: Sequence[dict[str, Any]]) -> dict[str, str]:
    """The job's options as fio names them (strings, as fio writes "job options")."""
    g = groups[0]
    targets: list[str] = []
    for group in groups:
        for t in group.get("target") or []:
            if t not in targets:
                targets.append(t)
    rw = phase.get("rw") or g.get("rw") or "read"
    opts = {"name": phase["name"], "filename": ":".join(targets), "rw": rw,
            "bs": str(g.get("bs", "")), "ioengine": str(g.get("engine", "psync")),
            "iodepth": str(g.get("qd", 1)), "numjobs": str(sum(int(x.get("threads") or 1) for x in groups)),
            "direct": "1" if g.get("direct") else "0", "group_reporting": "1"}
    if g.get("size"):
        opts["size"] = str(g["size"])
    if g.get("offset"):
        opts["offset"] = str(g["offset"])
    if rw in ("rw", "randrw"):
        opts["rwmixread"] = str(g.get("rwmix_read", 50))
    if rw.startswith("rand") and g.get("random_map") is False:
        opts["norandommap"] = "1"
    if g.get("seed") is not None:
        opts["randseed"] = str(g["seed"])
    if g.get("time"):
        opts["runtime"] = _seconds_text(g["time"])
        opts["time_based"] = "1"
    if g.get("ramp"):
        opts["ramp_time"] = _seconds_text(g["ramp"])
    if g.get("fsync_every"):
        opts["fsync"] = str(g["fsync_every"])
    if g.get("open_sync") in ("sync", "dsync"):
        opts["sync"] = g["open_sync"]
    return opts


def _seconds_text(s: float) -> str:
    return f"{int(s)}" if float(s).is_integer() else f"{int(round(s * 1000))}ms"


def _pct(part: Any, whole: float) -> float:
    return float(part) * 100.0 / whole if part is not None and whole > 0 else 0.0


def _hist(direction: dict[str, Any] | None, kind: str) -> list[list[int]]:
    """The buckets of `kind` (clat, lat, slat) of a direction; clat falls back to lat (documents
    from before clat_ns, and psync, where they are the same)."""
    if not direction:
        return []
    h = direction.get(f"{kind}_hist") or (direction.get("lat_hist") if kind == "clat" else None)
    return list((h or {}).get("buckets") or [])


def _lat_stats(summary: dict[str, Any] | None, buckets: Sequence[Sequence[int]],
               percentiles: bool) -> dict[str, Any]:
    """fio's {min, max, mean, stddev, N[, percentile]} of one latency, in ns."""
    n = stats.count(buckets) if buckets else 0
    if not summary or not n or summary.get("max") in (None, 0):
        return {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}
    lo, hi = summary.get("min"), summary.get("max")
    out = {"min": int(lo), "max": int(hi), "mean": float(summary.get("mean") or 0.0),
           "stddev": float(summary.get("stddev") or 0.0), "N": n}
    if percentiles:
        out["percentile"] = {f"{q:f}": int(stats.percentile(buckets, q, lo, hi)) for q in FIO_PERCENTILES}
    return out


def _direction(d: dict[str, Any] | None) -> dict[str, Any]:
    d = d or {}
    nbytes = int(d.get("bytes") or 0)
    bw_bytes = float(d.get("bw_bytes") or 0.0)
    out: dict[str, Any] = {
        "io_bytes": nbytes,
        "io_kbytes": nbytes >> 10,
        "bw_bytes": int(round(bw_bytes)),
        "bw": int(bw_bytes // 1024),
        "iops": float(d.get("iops") or 0.0),
        "runtime": int(round(float(d.get("seconds") or 0.0) * 1000)),
        "total_ios": int(d.get("ops") or 0),
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": _lat_stats(d.get("slat_ns"), _hist(d, "slat"), percentiles=False),
        "clat_ns": _lat_stats(d.get("clat_ns") or d.get("lat_ns"), _hist(d, "clat"), percentiles=True),
        "lat_ns": _lat_stats(d.get("lat_ns"), _hist(d, "lat"), percentiles=False),
    }
    series = d.get("timeseries") or {}
    bw_kib = [float(v) / 1024 for v in series.get("bw_bytes") or []]
    iops = [float(v) for v in series.get("iops") or []]
    bw_min, bw_max, bw_mean, bw_dev = _series_stats(bw_kib)
    out.update({"bw_min": int(bw_min), "bw_max": int(bw_max),
                # the job's share of its group's bandwidth in this direction: the group is this job
                "bw_agg": bw_mean * 1024 * 100.0 / bw_bytes if bw_bytes > 0 and bw_kib else 0.0,
                "bw_mean": bw_mean, "bw_dev": bw_dev, "bw_samples": len(bw_kib)})
    i_min, i_max, i_mean, i_dev = _series_stats(iops)
    out.update({"iops_min": int(i_min), "iops_max": int(i_max), "iops_mean": i_mean,
                "iops_stddev": i_dev, "iops_samples": len(iops)})
    return out


def mixed_direction(directions: Iterable[dict[str, Any] | None]) -> dict[str, Any]:
    """Reads, writes and trims as one direction, in the result's shape (fio's unified_rw_reporting,
    sum_thread_stats with UNIFIED_MIXED): requests and bytes summed, the longest runtime, each
    latency's histograms merged and its summary pooled (count-weighted mean and variance, the
    extreme min and max), time series summed sample by sample."""
    parts = [d for d in directions if d and d.get("ops")]
    out: dict[str, Any] = {"bytes": sum(int(d.get("bytes") or 0) for d in parts),
                           "ops": sum(int(d.get("ops") or 0) for d in parts),
                           "seconds": max((float(d.get("seconds") or 0.0) for d in parts), default=0.0)}
    secs = out["seconds"]
    out["bw_bytes"] = out["bytes"] / secs if secs > 0 else 0.0
    out["iops"] = out["ops"] / secs if secs > 0 else 0.0
    for kind in ("slat", "clat", "lat"):
        pieces = []
        for d in parts:
            summary = d.get(f"{kind}_ns") or (d.get("lat_ns") if kind == "clat" else None)
            buckets = _hist(d, kind)
            if summary and buckets and summary.get("max"):
                pieces.append((summary, buckets, stats.count(buckets)))
        n = sum(k for _, _, k in pieces)
        if not n:
            continue
        mean = sum(float(sm.get("mean") or 0.0) * k for sm, _, k in pieces) / n
        square = sum((float(sm.get("stddev") or 0.0) ** 2 + float(sm.get("mean") or 0.0) ** 2) * k for sm, _, k in pieces) / n
        out[f"{kind}_ns"] = {"min": min(int(sm["min"]) for sm, _, _ in pieces), "max": max(int(sm["max"]) for sm, _, _ in pieces),
                             "mean": mean, "stddev": math.sqrt(max(0.0, square - mean * mean))}
        out[f"{kind}_hist"] = {"buckets": stats.merge(*(b for _, b, _ in pieces))}
    series: dict[str, list[float]] = {}
    for d in parts:
        for key in ("bw_bytes", "iops"):
            values = (d.get("timeseries") or {}).get(key) or []
            acc = series.setdefault(key, [])
            acc.extend([0.0] * (len(values) - len(acc)))
            for i, v in enumerate(values):
                acc[i] += float(v)
    if series:
        out["timeseries"] = series
    return out


def fio_mixed(phase: dict[str, Any]) -> dict[str, Any]:
    """A phase's reads, writes and trims as fio's `mixed` direction object."""
    return _direction(mixed_direction(phase.get(d) for d in DIRECTIONS))


def _series_stats(values: Sequence[float]) -> tuple[float, float, float, float]:
    """min, max, mean and sample standard deviation of a time series (zeros when empty)."""
    if not values:
        return 0.0, 0.0, 0.0, 0.0
    mean = sum(values) / len(values)
    dev = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return min(values), max(values), mean, dev


def _sync(sync: dict[str, Any] | None) -> dict[str, Any]:
    sync = sync or {}
    buckets = list((sync.get("lat_hist") or {}).get("buckets") or [])
    return {"total_ios": int(sync.get("ops") or 0),
            "lat_ns": _lat_stats(sync.get("lat_ns"), buckets, percentiles=True)}


def _one_bucket(buckets: Sequence[tuple[int, str]], value: int, lower: bool) -> dict[str, float]:
    """A depth distribution with all of it in the bucket holding `value`: by lower bound
    (iodepth_level: 1, 2-3, 4-7 …, >=64) or by upper bound (submit/complete: 0, 1-4, 5-8 …, >64)."""
    out = {label: 0.0 for _, label in buckets}
    out[">=64"] = 0.0
    if lower:
        label = next((lab for bound, lab in reversed(buckets) if value >= bound), buckets[0][1])
    else:
        label = next((lab for bound, lab in buckets if value <= bound), ">=64")
    out[label] = 100.0
    return out


def _latency_buckets(histograms: Iterable[Sequence[Sequence[int]]]) -> dict[str, dict[str, float]]:
    """fio's latency_ns/us/ms: percent of all completions whose completion latency falls in each
    range; a storlab bucket counts where its lower bound falls (its width is under 1 % of it)."""
    ns = [0] * len(_LAT_LABELS)
    us = [0] * len(_LAT_LABELS)
    ms = [0] * len(_LAT_MS_LABELS)
    total = 0
    for buckets in histograms:
        for i, c in buckets:
            lower, _ = stats.bucket_bounds(int(i))
            total += c
            if lower < 1000:
                ns[_bound_index(lower)] += c
            elif lower < 1_000_000:
                us[_bound_index(lower // 1000)] += c
            else:
                msec = lower // 1_000_000
                ms[_bound_index(msec) if msec < 1000 else (10 if msec < 2000 else 11)] += c

    def pct(counts: list[int], labels: Sequence[str]) -> dict[str, float]:
        return {lab: (c * 100.0 / total if total else 0.0) for lab, c in zip(labels, counts)}
    return {"latency_ns": pct(ns, _LAT_LABELS), "latency_us": pct(us, _LAT_LABELS),
            "latency_ms": pct(ms, _LAT_MS_LABELS)}


def _bound_index(v: int) -> int:
    """Index of the first bound above v (v below 1000)."""
    return next(k for k, bound in enumerate(_LAT_BOUNDS) if v < bound)
