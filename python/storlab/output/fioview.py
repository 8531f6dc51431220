"""fio's views of a run made by `storlab fio`: the report in fio's normal layout (a block per job,
each reporting group's run status), fio's terse lines (version 3), fio's JSON layout, and the log
files of write_bw_log/write_iops_log/write_lat_log. Each takes the result document and the fio
plan it ran (jobs/fio/map.py: the jobs, their groups and reporting). `fio_view` gives them as one
view of the emit step (output/emit.py)."""
from __future__ import annotations

import json
from typing import Any

from ..jobs.fio.map import FioJob, FioPlan
from ..measure.stats import percentile
from .fiojson import fio_error_number, fio_json, fio_mixed, job_name, mixed_direction, steadystate_data

__all__ = ["FIO_DEFAULT_PERCENTILES", "RENDERERS", "render_json", "render_terse", "render_normal", "log_files"]

FIO_DEFAULT_PERCENTILES = (1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99)


def _fio_layout(doc: dict[str, Any], tr: FioPlan) -> dict[str, Any]:
    """fio's JSON layout of the run (output/fiojson.py), without the layout phase of overwrite=1,
    which fio does not report as a job."""
    fio_doc = fio_json(doc)
    job_phases = {tr.phases[j.phase]["name"] for j in tr.jobs}
    fio_doc["jobs"] = [j for j in fio_doc["jobs"] if j["jobname"].split(".pass")[0] in job_phases]
    # unified_rw_reporting: the phase's directions as fio's `mixed` one, instead of them or beside them
    unified = {tr.phases[j.phase]["name"]: j.unified for j in tr.jobs if j.unified != "none"}
    results = {job_name(p): p for p in doc["phases"]}     # a repeated phase's passes apart
    for job in fio_doc["jobs"]:
        mode = unified.get(job["jobname"].split(".pass")[0])
        phase = results.get(job["jobname"])
        if mode and phase:
            if mode == "mixed":     # fio then writes no other direction, sync included
                for d in ("read", "write", "trim", "sync"):
                    job.pop(d, None)
            job["mixed"] = fio_mixed(phase)
    return fio_doc


def render_json(doc: dict[str, Any], tr: FioPlan) -> str:
    """`--output-format=json`: fio's JSON layout of the run."""
    return json.dumps(_fio_layout(doc, tr), indent=2) + "\n"


# -- fio's terse output (version 3, fio's default) -------------------------------------------------
_TERSE_PERCENTILE_FIELDS = 20     # fio's FIO_IO_U_LIST_MAX_LEN
_DEPTHS = ("1", "2", "4", "8", "16", "32", ">=64")
_LAT_US = ("2", "4", "10", "20", "50", "100", "250", "500", "750", "1000")
_LAT_MS = _LAT_US + ("2000", ">=2000")


def _terse_lat(lat: dict[str, Any]) -> str:
    if not lat.get("N"):
        return ";0;0;0.000000;0.000000"
    return f";{int(lat['min']) // 1000};{int(lat['max']) // 1000};{lat['mean'] / 1000:f};{lat['stddev'] / 1000:f}"


def _terse_direction(d: dict[str, Any]) -> str:
    """One direction as fio's stat.c show_ddir_status_terse writes it (latencies in usec)."""
    runtime = int(d.get("runtime") or 0)
    bw = (1000 * int(d["io_bytes"]) // runtime) // 1024 if runtime else 0
    iops = 1000 * int(d["total_ios"]) // runtime if runtime else 0
    out = f";{int(d['io_bytes']) >> 10};{bw};{iops};{runtime}"
    out += _terse_lat(d["slat_ns"]) + _terse_lat(d["clat_ns"])
    points = sorted((d["clat_ns"].get("percentile") or {}).items(), key=lambda kv: float(kv[0]))
    if not d["clat_ns"].get("N"):
        points = []
    for i in range(_TERSE_PERCENTILE_FIELDS):
        out += f";{float(points[i][0]):f}%={int(points[i][1]) // 1000}" if i < len(points) else ";0%=0"
    out += _terse_lat(d["lat_ns"])
    if d.get("bw_samples"):
        out += f";{int(d['bw_min'])};{int(d['bw_max'])};{d['bw_agg']:f}%;{d['bw_mean']:f};{d['bw_dev']:f}"
    else:
        out += ";0;0;0.000000%;0.000000;0.000000"
    return out


def render_terse(doc: dict[str, Any], tr: FioPlan) -> str:
    """fio's terse output, version 3 (`--output-format=terse`, `--minimal`): one line per job of
    fio's JSON layout, read and write status, CPU, depths and latency distribution; no disk
    utilisation (storlab does not sample it)."""
    fio_doc = _fio_layout(doc, tr)
    lines = []
    for j in fio_doc["jobs"]:
        line = f"3;{fio_doc['fio version']};{j['jobname']};{j['groupid']};{j['error']}"
        if "read" in j:     # fio's terse: read and write, then mixed with unified_rw_reporting=both
            line += _terse_direction(j["read"]) + _terse_direction(j["write"])
        if "mixed" in j:    # ... or mixed alone, in read's place, with mixed
            line += _terse_direction(j["mixed"])
        line += f";{j['usr_cpu']:f}%;{j['sys_cpu']:f}%;{j['ctx']};{j['majf']};{j['minf']}"
        line += "".join(f";{j['iodepth_level'].get(k, 0):3.1f}%" for k in _DEPTHS)
        below_us = sum((j.get("latency_ns") or {}).values())
        line += "".join(f";{j['latency_us'].get(k, 0) + (below_us if k == '2' else 0):3.2f}%" for k in _LAT_US)
        line += "".join(f";{j['latency_ms'].get(k, 0):3.2f}%" for k in _LAT_MS)
        lines.append(line)
    return "\n".join(lines) + "\n"


# -- fio's normal output -----------------------------------------------------------------------
def _num2str(value: float, pow2: bool = True, unit: str = "B", maxlen: int = 4) -> str:
    """A number as fio prints it (its lib/num2str.c): divided by 1024 (or 1000) while it has more
    than `maxlen` digits, then the digits left filled with decimals of the remainder."""
    num = int(value)
    thousand = 1024 if pow2 else 1000
    prefixes = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei") if pow2 else ("", "k", "M", "G", "T", "P", "E")
    post, modulo, carry = 0, None, False
    while post < len(prefixes) - 1 and len(str(num)) > maxlen:
        modulo, num = num % thousand, num // thousand
        carry = modulo >= thousand // 2
        post += 1
    if modulo is None:
        return f"{num}{prefixes[post]}{unit}"
    room = maxlen - len(str(num))
    if room <= 1:
        return f"{num + carry}{prefixes[post]}{unit}"
    frac = f"{modulo / thousand:.{room - 1}f}"
    if frac[0] == "1":
        num += 1
    return f"{num}.{frac[2:]}{prefixes[post]}{unit}"


def _lat_unit(*ns: float) -> tuple[str, float]:
    """fio's rule: a figure set moves to the next unit when all its values exceed 1000."""
    if all(v > 1e6 for v in ns):
        return "msec", 1e6
    if all(v > 1e3 for v in ns):
        return "usec", 1e3
    return "nsec", 1.0


def _direction_block(name: str, d: dict[str, Any], seconds: float, percentiles: tuple[float, ...],
                     own_latency: bool) -> list[str]:
    bw = d["bytes"] / seconds if seconds > 0 else 0.0
    iops = d["ops"] / seconds if seconds > 0 else 0.0
    lines = [f"  {name}: IOPS={_num2str(iops, pow2=False, unit='')}, BW={_num2str(bw)}/s "
             f"({_num2str(bw, pow2=False)}/s)({_num2str(d['bytes'])}/{seconds * 1000:.0f}msec)"]
    if not own_latency:
        lines.append(f"    (latency below: every {name} of the phase, this job's and the jobs beside it)")
    for key, label in (("slat_ns", "slat"), ("clat_ns", "clat"), ("lat_ns", " lat")):
        lat = d.get(key)
        if not lat or not d.get("ops"):
            continue
        unit, div = _lat_unit(lat["min"], lat["max"], lat["mean"], lat["stddev"])
        lines.append(f"    {label} ({unit}): min={lat['min'] / div:.0f}, max={lat['max'] / div:.0f}, "
                     f"avg={lat['mean'] / div:.2f}, stdev={lat['stddev'] / div:.2f}")
    hist = (d.get("lat_hist") or {}).get("buckets")
    if hist and d.get("ops"):
        unit, div = _lat_unit(d["lat_ns"]["min"], d["lat_ns"]["max"])
        lines.append(f"     lat percentiles ({unit}):")
        lat = d["lat_ns"]
        cells = [f"{p:5.2f}th=[{percentile(hist, p, lat['min'], lat['max']) / div:.0f}]" for p in percentiles]
        for i in range(0, len(cells), 4):
            lines.append("     | " + ", ".join(cells[i:i + 4]) + ("," if i + 4 < len(cells) else ""))
    return lines


def render_normal(doc: dict[str, Any], tr: FioPlan) -> str:
    """A report close to fio's: a block per job (per reporting group with group_reporting), then
    each group's run status. Latency figures are the phase's, which a job alone in its phase owns."""
    out: list[str] = []
    for note in tr.notes:
        out.append(f"storlab: {note}")
    phases = doc["phases"]
    by_group: dict[int, list[FioJob]] = {}
    for j in tr.jobs:
        by_group.setdefault(j.report_group, []).append(j)
    for gid, jobs in by_group.items():
        blocks = [jobs] if any(j.group_reporting for j in jobs) else [[j] for j in jobs]
        for block in blocks:
            out += _job_block(block, gid, phases, tr)
        out += _run_status(gid, jobs, phases, tr)
    return "\n".join(out) + "\n"


def _phase_of(job: FioJob, phases: list[dict[str, Any]], tr: FioPlan) -> list[dict[str, Any]]:
    """The result entries of a job's phase (a meta phase has several: NAME:create ...)."""
    name = tr.phases[job.phase]["name"]
    return [p for p in phases if p["name"] == name or p["name"].startswith(name + ":")]


def _job_block(block: list[FioJob], gid: int, phases: list[dict[str, Any]], tr: FioPlan) -> list[str]:
    first = block[0]
    entries = _phase_of(first, phases, tr)
    err = max((fio_error_number(e.get("error")) for e in entries), default=0)
    head = f"{first.name}: (groupid={gid}, jobs={sum(j.clones for j in block)}): err={err:2d}"
    if not entries:
        return [head, "  (not run)"]
    lines = [head]
    if tr.phases[first.phase].get("type") == "meta":
        for e in entries:
            lat = e.get("lat_ns") or {}
            unit, div = _lat_unit(lat.get("min") or 0, lat.get("mean") or 0)
            lines.append(f"  {e['name']}: {e['ops']} ops, {e['ops_per_s']:,.0f} ops/s, lat ({unit}): "
                         f"avg={(lat.get('mean') or 0) / div:.2f}, max={(lat.get('max') or 0) / div:.0f}")
        return lines
    phase = entries[0]
    groups = {g for j in block for g in j.groups}
    mine = [w for w in phase["workers"] if w["group"] in groups]
    others = [w for w in phase["workers"] if w["group"] not in groups]
    seconds = phase.get("seconds") or 0.0
    if others and mine:     # the job's own window, as fio's per-job runtime
        seconds = max(w["end_s"] for w in mine) - min(w["start_s"] for w in mine)
    mine_dirs: dict[str, dict[str, Any]] = {}
    for direction in ("read", "write", "trim"):
        d = phase.get(direction)
        if not d or not d.get("ops"):
            continue
        d = dict(d)
        d["bytes"] = sum(w.get(f"{direction}_bytes", 0) for w in mine)
        d["ops"] = sum(w.get(f"{direction}_ops", 0) for w in mine)
        if not d["ops"]:
            continue
        mine_dirs[direction] = d
    percentiles = first.percentiles or FIO_DEFAULT_PERCENTILES
    if first.unified != "mixed":
        for direction, d in mine_dirs.items():
            # the phase's latency of a direction is this job's when no other job did that direction
            own = not any(w.get(f"{direction}_ops") for w in others)
            lines += _direction_block(direction, d, seconds, percentiles, own)
    if first.unified != "none" and mine_dirs:
        own = not any(w.get(f"{d}_ops") for w in others for d in mine_dirs)
        lines += _direction_block("mixed", mixed_direction(mine_dirs.values()), seconds, percentiles, own)
    sync = phase.get("sync")
    if sync and sync.get("ops"):
        lines.append(f"  sync: {sync['ops']} calls")
    if phase.get("steadystate"):
        lines.append(_steadystate_line(phase["steadystate"]))
    return lines


def _steadystate_line(ss: dict[str, Any]) -> str:
    """fio's steadystate line (stat.c show_ss_normal) of the phase's own check: attained, the
    window's mean bandwidth, IOPS (and clat for a lat criterion), and the criterion's last value."""
    data = steadystate_data(ss)
    lat = ""
    if "lat_mean" in data:
        unit, div = _lat_unit(data["lat_mean"])
        lat = f", lat={_num2str(data['lat_mean'] / div, pow2=False, unit='')}{unit}"
    base, _, slope = ss["metric"].partition("_")
    pct = "%" if ss["limit_is_pct"] else ""
    return (f"  steadystate  : attained={'yes' if ss['attained'] else 'no'}, bw={_num2str(data['bw_mean'])}/s "
            f"({_num2str(data['bw_mean'], pow2=False)}/s), iops={_num2str(data['iops_mean'], pow2=False, unit='')}"
            f"{lat}, {base}{' slope' if slope else ' mean dev'}={ss.get('criterion') or 0.0:.3f}{pct}")


def _run_status(gid: int, jobs: list[FioJob], phases: list[dict[str, Any]], tr: FioPlan) -> list[str]:
    lines = [f"\nRun status group {gid} (all jobs):"]
    for direction, label in (("read", "READ"), ("write", "WRITE"), ("trim", "TRIM")):
        total, seconds = 0, 0.0
        for j in jobs:
            for e in _phase_of(j, phases, tr)[:1]:
                if tr.phases[j.phase].get("type") == "meta":
                    continue
                total += sum(w.get(f"{direction}_bytes", 0) for w in e.get("workers", ())
                             if w["group"] in j.groups)
                seconds = max(seconds, e.get("seconds") or 0.0)
        if total:
            bw = total / seconds if seconds else 0.0
            lines.append(f"  {label:>5}: bw={_num2str(bw)}/s ({_num2str(bw, pow2=False)}/s), "
                         f"io={_num2str(total)} ({_num2str(total, pow2=False)}), "
                         f"run={seconds * 1000:.0f}msec")
    return lines


# log kind of a job -> (file kind, series key): write_lat_log makes three files
_LOG_FILES = {"bw": (("bw", "bw_bytes"),), "iops": (("iops", "iops"),),
              "lat": (("lat", "lat_mean_ns"), ("clat", "clat_mean_ns"), ("slat", "slat_mean_ns"))}


def log_files(doc: dict[str, Any], tr: FioPlan) -> list[tuple[str, str]]:
    """fio's write_bw_log/write_iops_log/write_lat_log files (`PREFIX_bw.N.log`, `PREFIX_lat.N.log`
    …: time in ms, value, direction, block size (0: an average), offset) from storlab's per-interval time series of
    the job's phase: bandwidth in KiB/s, IOPS, and the interval's mean latencies in ns, as fio
    writes them with log_avg_msec. A latency log has no row for an interval without requests (fio
    has no sample to average), and psync's slat log is empty, as fio's (no submission samples).
    Returns (path, text) of each file, for the emit step to write."""
    files: list[tuple[str, str]] = []
    for number, job in enumerate(tr.jobs, 1):
        if not job.logs:
            continue
        entries = [p for p in doc["phases"] if p["name"] == tr.phases[job.phase]["name"]]
        if not entries:
            continue
        phase = entries[0]
        for log_kind, prefix in job.logs.items():
            for kind, key in _LOG_FILES[log_kind]:
                rows = []
                for ddir, direction in enumerate(("read", "write", "trim")):
                    series = (phase.get(direction) or {}).get("timeseries")
                    if not series or not (phase.get(direction) or {}).get("ops"):
                        continue
                    step = series["interval_s"]
                    for i, (v, iops) in enumerate(zip(series[key], series["iops"])):
                        if log_kind == "lat" and (iops <= 0 or v <= 0):
                            continue
                        value = v / 1024 if kind == "bw" else v     # fio logs bandwidth in KiB/s
                        rows.append((round((i + 1) * step * 1000), round(value), ddir))
                rows.sort()
                # fio writes block size 0 in an averaged (log_avg_msec) entry
                text = "".join(f"{t}, {v}, {d}, 0, 0\n" for t, v, d in rows)
                files.append((f"{prefix}_{kind}.{number}.log", text))
    return files


# fio's --output-format -> the renderer of that view (fio's default: normal)
RENDERERS = {"normal": render_normal, "terse": render_terse, "json": render_json}
