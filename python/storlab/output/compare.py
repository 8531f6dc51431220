"""Side-by-side comparison of runs: values per phase x direction with ratios to the first run (the
baseline), the job options that differ, and the differences in job or environment that make the
numbers incomparable (another kernel, engine, direct vs buffered, data in RAM vs not, cache mode ...).
"""
from __future__ import annotations

from typing import Any, Sequence

from ..document import DIRECTIONS
from ..jobs.options import BY_NAME
from ..units import format_size
from .base import Column, align, fmt_number, iter_runs, job_parameter, short_id

__all__ = ["compare", "render_compare", "METRICS"]

MiB = 1 << 20

# Compared values: (key in the row, human header, scale, higher is better)
METRICS: tuple[tuple[Column, bool], ...] = (
    (Column("bw_bytes", "bw MiB/s", MiB), True),
    (Column("iops", "IOPS"), True),
    (Column("lat_mean_ns", "lat mean us", 1e3), False),
    (Column("lat_p50_ns", "lat p50 us", 1e3), False),
    (Column("lat_p99_ns", "lat p99 us", 1e3), False),
    (Column("lat_p999_ns", "lat p99.9 us", 1e3), False),
)
# io500 runs (kind io500): each phase's io500 score, then BW, MD and SCORE
IO500_METRICS: tuple[tuple[Column, bool], ...] = (
    (Column("score", "score"), True),
    (Column("seconds", "time s"), False),
)
_LAT = {"lat_mean_ns": "mean", "lat_p50_ns": "p50", "lat_p99_ns": "p99", "lat_p999_ns": "p999"}

# job options that are bookkeeping, not workload: a difference there is not worth a line
_IGNORED_JOB_KEYS = {"json", "fio_json", "quiet", "store", "no_store", "tag", "note", "fio", "allow_destroy"}


def _value(doc: dict[str, Any], phase_index: int, direction: str, key: str) -> float | None:
    phases = doc.get("phases") or []
    if phase_index >= len(phases) or not isinstance(phases[phase_index].get(direction), dict):
        return None
    d = phases[phase_index][direction]
    return (d.get("lat_ns") or {}).get(_LAT[key]) if key in _LAT else d.get(key)


def _working_set_bytes(doc: dict[str, Any]) -> int | None:
    env, job = doc.get("environment") or {}, doc.get("job") or {}
    sizes = [t.get("size_bytes") for t in env.get("targets") or []]
    if sizes and all(isinstance(s, int) for s in sizes):
        return sum(sizes)
    if isinstance(job.get("size"), int):
        return job["size"] * max(1, len(job.get("target") or []))
    return None


def _fits_in_ram(doc: dict[str, Any]) -> bool | None:
    """True when a buffered run's data fits in RAM (reads may come from the page cache)."""
    if (doc.get("job") or {}).get("direct"):
        return None
    ws, mem = _working_set_bytes(doc), (doc.get("environment") or {}).get("memory_bytes")
    if ws is None or not mem:
        return None
    return ws <= mem


def _incomparable(base: dict[str, Any], other: dict[str, Any]) -> list[dict[str, str]]:
    """Reasons why `other`'s numbers cannot be read against `base`'s like for like."""
    out = []
    b_env, o_env = base.get("environment") or {}, other.get("environment") or {}
    b_job, o_job = base.get("job") or {}, other.get("job") or {}
    a, b = short_id(base.get("run_id")), short_id(other.get("run_id"))

    def differs(code: str, what: str, bv: Any, ov: Any, why: str) -> None:
        if bv != ov:
            out.append({"code": code, "run": other.get("run_id"),
                        "message": f"{what} differs: {bv} ({a}) vs {ov} ({b}); {why}"})

    differs("kernel", "kernel", b_env.get("kernel"), o_env.get("kernel"),
            "block layer, file system and page cache behaviour change between kernels")
    differs("engine", "engine", b_env.get("engine") or b_job.get("engine"),
            o_env.get("engine") or o_job.get("engine"), "the I/O path and its overhead differ")
    differs("direct", "direct I/O",
            "direct" if b_job.get("direct") else "buffered",
            "direct" if o_job.get("direct") else "buffered",
            "buffered I/O goes through the page cache")
    if "cache" in b_job or "cache" in o_job:
        differs("cache", "cache mode", b_job.get("cache"), o_job.get("cache"),
                "in-cache and out-of-cache runs measure different things")
    fb, fo = _fits_in_ram(base), _fits_in_ram(other)
    if fb is not None and fo is not None and fb != fo:
        desc = {True: "fits in RAM", False: "is larger than RAM"}
        out.append({"code": "size_vs_ram", "run": other.get("run_id"),
                    "message": f"data size relative to RAM differs: the data {desc[fb]} in {a} but "
                               f"{desc[fo]} in {b}; buffered reads of the smaller one may come "
                               f"from the page cache"})
    b_types = sorted({t.get("type") for t in b_env.get("targets") or []} - {None})
    o_types = sorted({t.get("type") for t in o_env.get("targets") or []} - {None})
    if b_types and o_types:
        differs("target_type", "target type", ",".join(b_types), ",".join(o_types),
                "a file system adds its own layer over the device")
    b_fs = sorted({t.get("fs_type") for t in b_env.get("targets") or []} - {None})
    o_fs = sorted({t.get("fs_type") for t in o_env.get("targets") or []} - {None})
    if b_fs and o_fs:
        differs("fs_type", "file system", ",".join(b_fs), ",".join(o_fs),
                "file systems differ in allocation, caching and locking")
    for doc, rid in ((base, a), (other, b)):
        src = (doc.get("imported") or {}).get("imported_from")
        if src and not any(r["code"] == "imported" and r["run"] == doc.get("run_id") for r in out):
            out.append({"code": "imported", "run": doc.get("run_id"),
                        "message": f"run {rid} was imported from {src.get('tool')} {src.get('version') or ''}: "
                                   f"its figures are that tool's own (definitions in docs/fio.md); latency: "
                                   f"{doc['imported'].get('latency')}"})
        if doc.get("complete") is False and not any(
                r["code"] == "incomplete" and r["run"] == doc.get("run_id") for r in out):
            out.append({"code": "incomplete", "run": doc.get("run_id"),
                        "message": f"run {rid} is incomplete ({doc.get('stop_reason')}); "
                                   f"its figures cover only the time until the stop"})
    return out


def _job_differences(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    keys: list[str] = []
    for r in runs:
        for k in r.get("job") or {}:
            if k not in keys and k not in _IGNORED_JOB_KEYS:
                keys.append(k)
    diffs = []
    for k in keys:
        compared = [job_parameter(r.get("job") or {}, k) for r in runs]
        if len({repr(v) for v in compared}) > 1:
            diffs.append({"option": k, "values": [(r.get("job") or {}).get(k) for r in runs]})
    return diffs


def _env_differences(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    diffs = []
    for k in ("host", "os", "cpu_model", "cpu_count", "memory_bytes", "python", "io_uring"):
        values = [(r.get("environment") or {}).get(k) for r in runs]
        if len({repr(v) for v in values}) > 1:
            diffs.append({"field": k, "values": values})
    versions = [r.get("storlab_version") for r in runs]
    if len(set(map(str, versions))) > 1:
        diffs.append({"field": "storlab_version", "values": versions})
    return diffs


def compare(docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Compare two or more runs (sweep documents contribute their runs); the first is the baseline."""
    runs = list(iter_runs(docs))
    if len(runs) < 2:
        raise ValueError(f"compare: needs at least two runs, got {len(runs)}")
    # Phases are matched by position (the n-th phase of each run), since runs that differ in rw
    # name their phases differently; the label joins the distinct names.
    keys: list[tuple[int, str]] = []
    names: dict[int, list[str]] = {}
    for r in runs:
        for pi, phase in enumerate(r.get("phases") or []):
            name = str(phase.get("name", pi))
            if name not in names.setdefault(pi, []):
                names[pi].append(name)
            for direction in DIRECTIONS:
                if isinstance(phase.get(direction), dict) and (pi, direction) not in keys:
                    keys.append((pi, direction))
    keys.sort(key=lambda k: (k[0], k[1] != "read"))
    rows = _io500_rows(runs) if all(r.get("kind") == "io500" for r in runs) else []
    for pi, direction in keys:
        for col, higher_better in METRICS:
            values = [_value(r, pi, direction, col.key) for r in runs]
            base = values[0]
            ratios = [None if v is None or not base else v / base for v in values[1:]]
            rows.append({"phase": "/".join(names[pi]), "phase_index": pi, "direction": direction,
                         "metric": col.key,
                         "higher_is_better": higher_better, "values": values, "ratios": ratios})
    incomparable = []
    for other in runs[1:]:
        for item in _incomparable(runs[0], other):
            if item not in incomparable:
                incomparable.append(item)
    return {"runs": [r.get("run_id") for r in runs], "rows": rows,
            "job_differences": _job_differences(runs),
            "environment_differences": _env_differences(runs),
            "incomparable": incomparable}


def _io500_rows(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """io500 runs phase by phase (matched by io500's phase name), then BW, MD and SCORE."""
    names: list[str] = []
    for r in runs:
        for p in r.get("phases") or []:
            if p["name"] not in names:
                names.append(p["name"])
    rows = []

    def row(label: str, unit: str, col: Column, higher: bool, values: list[float | None]) -> None:
        base = values[0]
        rows.append({"phase": label, "phase_index": None, "direction": unit, "metric": col.key,
                     "higher_is_better": higher, "values": values,
                     "ratios": [None if v is None or not base else v / base for v in values[1:]]})
    for name in names:
        found = [next((p for p in r.get("phases") or [] if p["name"] == name), None) for r in runs]
        unit = next((p["unit"] for p in found if p), "")
        for col, higher in IO500_METRICS:
            row(name, unit, col, higher, [None if p is None else p.get(col.key) for p in found])
    for key, unit in (("BW", "GiB/s"), ("MD", "kIOPS"), ("SCORE", "")):
        row(key, unit, IO500_METRICS[0][0], True, [(r.get("score") or {}).get(key) for r in runs])
    return rows


def _show(v: Any, key: str = "") -> str:
    opt = BY_NAME.get(key)
    if opt is not None and opt.kind == "size" and isinstance(v, int):
        return format_size(v)
    if key == "memory_bytes" and isinstance(v, int):
        return format_size(v)
    if isinstance(v, dict):
        return " ".join(f"{k}={_show(x)}" for k, x in v.items() if x not in (None, False, [], ""))
    if isinstance(v, float):
        return fmt_number(v)
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v))
    return str(v)


def render_compare(cmp: dict[str, Any]) -> str:
    """Plain-text comparison: one line per phase x direction x metric, ratios as 'x' factors."""
    ids = [short_id(r) for r in cmp["runs"]]
    cols = {c.key: c for c, _ in (*METRICS, *IO500_METRICS)}
    headers = ["phase", "dir", "metric"] + ids + [f"{i}/{ids[0]}" for i in ids[1:]]
    cells = []
    for row in cmp["rows"]:
        col = cols[row["metric"]]
        if all(v is None for v in row["values"]):
            continue
        cells.append([str(row["phase"]), row["direction"], col.header]
                     + [fmt_number(None if v is None else v / col.scale) for v in row["values"]]
                     + ["-" if r is None else f"{r:.2f}x" for r in row["ratios"]])
    numeric = [False, False, False] + [True] * (len(headers) - 3)
    lines = align(headers, cells, numeric)
    if cmp["job_differences"]:
        lines += ["", "job options that differ:"]
        lines += [f"  {d['option']}: " + " | ".join(_show(v, d["option"]) for v in d["values"])
                  for d in cmp["job_differences"]]
    if cmp["environment_differences"]:
        lines += ["", "environment that differs:"]
        lines += [f"  {d['field']}: " + " | ".join(_show(v, d["field"]) for v in d["values"])
                  for d in cmp["environment_differences"]]
    if cmp["incomparable"]:
        lines += ["", "WARNING: these runs are not comparable like for like:"]
        lines += [f"  - {i['message']}" for i in cmp["incomparable"]]
    return "\n".join(lines)
