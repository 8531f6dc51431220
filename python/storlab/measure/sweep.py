"""Sweeps: one `storlab run` job per point of a matrix of option values, and what the results say
about the knee, the latency climb and where a series stopped rising (docs/sweep.md).

Work is split as everywhere in storlab: parsing (lists of option values -> axes) validates only;
`run_sweep` runs the points one after the other through `runner.run_job`; `analyse` works out the
findings from plain numbers; output/sweep_table.py prints the result document. The document
(`storlab.sweep/1`) holds every point's full run document under `runs`, so the report and the
exporters, which expand `runs`, see a sweep as the runs it is made of.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..document import SWEEP_SCHEMA, header, now_iso
from ..jobs.job import resolve_job
from ..jobs.options import BY_NAME, Option, OptionError, parse_option, parse_value, suggest
from ..jobs.tables.sweep import LIST_KINDS, SWEEP_BY_NAME, SWEEP_OPTIONS, sweepable
from ..units import format_duration, format_size
from . import stats
from .environment import host_environment
from .runner import run_job as run_job_in_this_process
from .scratch import SCRATCH_SIZE_BYTES, Scratch

__all__ = [
    "SCHEMA", "SWEEP_OPTIONS", "SWEEP_BY_NAME", "LIST_KINDS", "sweepable", "Axis", "Settings",
    "parse_settings", "split_values", "parse_sweep_spec", "build_axes", "expand", "check_early_stop",
    "knee", "latency_climb", "climb_basis", "compared_latency", "EarlyStop", "measure", "analyse",
    "summarise_warnings", "SweepMatrix", "SweepHooks", "build_matrix", "run_sweep", "point_label",
    "fmt_value", "render_reference",
]

SCHEMA = SWEEP_SCHEMA

# The settings of `storlab sweep` itself are its option table, jobs/tables/sweep.py (SWEEP_OPTIONS), with
# which run options a comma-separated list sweeps (LIST_KINDS, sweepable).

# --- parsing ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Settings:
    """How a sweep judges its results (the SWEEP_OPTIONS other than axes and output)."""
    metric: str = "bw"
    knee_pct: int = 95
    climb_pct: int = 50
    climb_gain_pct: int = 5
    climb_latency: str = "mean"
    stop_flat_pct: int = 0
    stop_count: int = 2
    phase: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "knee_pct": self.knee_pct, "climb_pct": self.climb_pct,
                "climb_gain_pct": self.climb_gain_pct, "climb_latency": self.climb_latency,
                "stop_flat_pct": self.stop_flat_pct, "stop_count": self.stop_count,
                "phase": self.phase}


def _parse_setting(name: str, raw: Any) -> Any:
    opt = SWEEP_BY_NAME[name]
    if raw is None:
        return opt.default
    # the same parsers (and one-line messages) as the run options
    return parse_option(opt, raw)


def parse_settings(raw: Mapping[str, Any]) -> Settings:
    """Settings from raw values (command-line text or numbers); unset ones take their default."""
    v = {name: _parse_setting(name, raw.get(name)) for name in
         ("metric", "knee", "climb", "climb_gain", "climb_latency", "stop_flat", "stop_count", "phase")}
    return Settings(metric=v["metric"], knee_pct=v["knee"], climb_pct=v["climb"],
                    climb_gain_pct=v["climb_gain"], climb_latency=v["climb_latency"],
                    stop_flat_pct=v["stop_flat"], stop_count=v["stop_count"], phase=v["phase"])


@dataclass(frozen=True)
class Axis:
    """One swept option and its values in canonical units, in the order they are run."""
    name: str
    values: tuple

    @property
    def numeric(self) -> bool:
        """Knee, climb and early stop need ordered numbers (bs, threads, qd, ...), not choices."""
        return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in self.values)

    @property
    def ascending(self) -> bool:
        return all(a < b for a, b in zip(self.values, self.values[1:]))

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "values": [list(v) if isinstance(v, tuple) else v for v in self.values],
                "numeric": self.numeric}


def _sweepable(name: str) -> Option:
    opt = BY_NAME.get(name)
    if opt is None:
        raise OptionError(f"sweep: unknown option {name!r}{suggest(name)}; "
                          f"see `storlab run --help` for the list")
    if not sweepable(opt):
        raise OptionError(f"sweep: {name} applies to the whole sweep and cannot be swept")
    return opt


def split_values(name: str, raw: Any) -> list[Any]:
    """The canonical values of one option given as 'V1,V2,...' (one value: a list of one).

    Every item is validated by the option table; an empty item or a value given twice is an
    error naming the option."""
    opt = _sweepable(name)
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    values: list[Any] = []
    for item in items:
        if isinstance(item, str):
            item = item.strip()
            if not item:
                raise OptionError(f"{name}: empty value in {raw!r}; separate values with single commas")
        if opt.kind == "paths":
            item = (item,)   # one sweep value = one target
        value = parse_value(name, item)
        if value in values:
            raise OptionError(f"{name}: {item!r} is given twice in {raw!r}; give each value once")
        values.append(value)
    return values


def parse_sweep_spec(spec: str) -> tuple[str, list[Any]]:
    """'OPTION=V1,V2' (from --sweep) -> (option name, canonical values)."""
    name, sep, rest = spec.partition("=")
    name = name.strip().replace("-", "_")
    if name.startswith("uring_"):
        name = "uring." + name[len("uring_"):]
    if not sep or not name or not rest.strip():
        raise OptionError(f"sweep: {spec!r} is not OPTION=V1,V2,...; e.g. --sweep direct=false,true")
    return name, split_values(name, rest)


def build_axes(given: Sequence[tuple[str, Any]], sweep_specs: Sequence[str] = (),
               series: str | None = None) -> tuple[list[Axis], dict[str, Any]]:
    """Split command-line options into swept axes and fixed values.

    given: (option name, raw value) pairs in command-line order, where ('sweep', 'OPTION=LIST')
    stands for a --sweep entry; a value of a LIST_KINDS option with a comma is a list to sweep.
    sweep_specs: more --sweep entries, taken after `given`. The axis order is the command-line
    order, outermost first; `series` moves that axis to the innermost place.
    Returns (axes, fixed raw values for resolve_job)."""
    axes: dict[str, Axis] = {}
    fixed: dict[str, Any] = {}
    flags: set[str] = set()
    specced: set[str] = set()
    for name, raw in [*given, *(("sweep", s) for s in sweep_specs)]:
        if name == "sweep":
            name, values = parse_sweep_spec(raw)
            if name in flags or name in specced:
                raise OptionError(f"{name}: given both as {BY_NAME[name].flag} and in --sweep; use one")
            specced.add(name)
        else:
            if name in specced:
                raise OptionError(f"{name}: given both as {BY_NAME[name].flag} and in --sweep; use one")
            flags.add(name)
            opt = BY_NAME.get(name)
            if not (opt is not None and sweepable(opt) and opt.kind in LIST_KINDS
                    and isinstance(raw, str) and "," in raw):
                fixed[name] = raw
                continue
            values = split_values(name, raw)
        if len(values) == 1:
            fixed[name] = values[0]
        else:
            axes[name] = Axis(name, tuple(values))
    ordered = list(axes.values())
    if series is not None:
        key = series.replace("-", "_")
        match = [a for a in ordered if a.name == key]
        if not match:
            swept = ", ".join(a.name for a in ordered) or "none"
            raise OptionError(f"series: {series!r} is not a swept option; swept: {swept}")
        ordered = [a for a in ordered if a.name != key] + match
    return ordered, fixed


def expand(axes: Sequence[Axis]) -> list[dict[str, Any]]:
    """Every point of the matrix as {option: value}: the cartesian product with the first axis
    outermost and the last innermost, each axis in the order its values were given."""
    return [dict(zip([a.name for a in axes], combo))
            for combo in itertools.product(*[a.values for a in axes])]


def check_early_stop(axes: Sequence[Axis], settings: Settings) -> None:
    """Early stop looks for throughput that stopped rising: the series axis must go upwards."""
    if not settings.stop_flat_pct or not axes:
        return
    inner = axes[-1]
    if not inner.numeric:
        raise OptionError(f"stop_flat: the series axis {inner.name} is not numeric; early stop needs "
                          f"numbers in ascending order (bs, threads, qd ...); choose one with --series")
    if not inner.ascending:
        raise OptionError(f"stop_flat: {inner.name} values {', '.join(fmt_value(inner.name, v) for v in inner.values)} "
                          f"are not in ascending order; give them smallest first")


# --- findings on plain numbers ---------------------------------------------------------------

def knee(throughput: Sequence[float | None], pct: float) -> int | None:
    """Index of the knee of a series ordered by ascending setting: the first (smallest) setting
    whose throughput is at least pct % of the series' best. None without a positive best."""
    known = [t for t in throughput if t is not None]
    best = max(known, default=0.0)
    if best <= 0:
        return None
    threshold = best * pct / 100.0
    return next(i for i, t in enumerate(throughput) if t is not None and t >= threshold)


def latency_climb(throughput: Sequence[float | None], latency: Sequence[float | None],
                  climb_pct: float, gain_pct: float) -> int | None:
    """Index where latency starts to climb, in a series ordered by ascending setting: the first
    point i >= 1 whose latency exceeds (1 + climb_pct/100) x the lowest latency of the points
    before it, while its throughput is less than gain_pct % above the previous point's. Rising
    latency that buys throughput is not a climb; latency that buys nothing is. None if none."""
    lowest: float | None = None
    for i, (t, lat) in enumerate(zip(throughput, latency)):
        if i > 0 and lat is not None and lowest is not None and t is not None:
            prev = throughput[i - 1]
            gain = (t / prev - 1.0) * 100.0 if prev else float("inf")
            if lat > lowest * (1.0 + climb_pct / 100.0) and gain < gain_pct:
                return i
        if lat is not None:
            lowest = lat if lowest is None else min(lowest, lat)
    return None


@dataclass
class EarlyStop:
    """Decides, point by point along a series, when throughput has stopped rising: a point is
    flat when its throughput is less than flat_pct % above the best of the points before it;
    `count` flat points in a row end the series. flat_pct = 0 never stops."""
    flat_pct: float
    count: int
    best: float | None = None
    flat_run: int = 0

    def add(self, throughput: float) -> bool:
        """Record the next point's throughput; True when the series should stop here."""
        if self.best is not None:
            flat = throughput < self.best * (1.0 + self.flat_pct / 100.0)
            self.flat_run = self.flat_run + 1 if flat else 0
        self.best = throughput if self.best is None else max(self.best, throughput)
        return self.flat_pct > 0 and self.flat_run >= self.count


# --- one point's figures ---------------------------------------------------------------------

def _measured_phase(doc: dict[str, Any], phase: str | None) -> dict[str, Any] | None:
    phases = doc.get("phases") or []
    if phase is not None:
        named = [p for p in phases if p.get("name") == phase]
        if not named and phases:
            names = ", ".join(str(p.get("name")) for p in phases)
            raise OptionError(f"phase: the job has no phase {phase!r}; its phases: {names}")
        return named[0] if named else None
    with_io = [p for p in phases if any(isinstance(p.get(d), dict) and p[d].get("ops") for d in ("read", "write"))]
    return with_io[-1] if with_io else (phases[-1] if phases else None)


def measure(doc: dict[str, Any], phase: str | None = None) -> dict[str, Any]:
    """The figures of one point from its run document, for the measured phase: bandwidth and
    IOPS summed over reads and writes (with several passes, the mean over the passes); latency of
    all its I/Os (for reads and writes, or several passes, the histograms are merged, so the
    percentiles are exact to the bucket width, and the mean is the ops-weighted mean of the
    exact means)."""

    p = _measured_phase(doc, phase)
    out: dict[str, Any] = {"phase": p.get("name") if p else None, "passes": 1,
                           "bw_bytes": None, "iops": None, "lat_mean_ns": None,
                           "lat_p50_ns": None, "lat_p99_ns": None, "lat_p999_ns": None}
    if p is None:
        return out
    # `storlab run --passes N` repeats every phase; each repeat carries its pass number
    repeats = [q for q in doc.get("phases") or [] if q.get("name") == p.get("name") and "pass" in q] or [p]
    per_pass = [[q[d] for d in ("read", "write") if isinstance(q.get(d), dict)] for q in repeats]
    per_pass = [dirs for dirs in per_pass if dirs]
    if not per_pass:
        return out
    out["passes"] = len(per_pass)
    out["bw_bytes"] = sum(sum(d.get("bw_bytes") or 0.0 for d in dirs) for dirs in per_pass) / len(per_pass)
    out["iops"] = sum(sum(d.get("iops") or 0.0 for d in dirs) for dirs in per_pass) / len(per_pass)
    every = [d for dirs in per_pass for d in dirs]
    if len(every) == 1:
        lat = every[0].get("lat_ns") or {}
    else:
        exact = [d.get("lat_ns") or {} for d in every if d.get("ops")]
        lows = [e["min"] for e in exact if e.get("min") is not None]
        highs = [e["max"] for e in exact if e.get("max") is not None]
        lat = stats.summary(stats.merge(*[(d.get("lat_hist") or {}).get("buckets") or [] for d in every]),
                            min_ns=min(lows) if lows and len(lows) == len(exact) else None,
                            max_ns=max(highs) if highs and len(highs) == len(exact) else None)
        ops = [d.get("ops") or 0 for d in every]
        means = [(d.get("lat_ns") or {}).get("mean") for d in every]
        if sum(ops) and all(m is not None for m in means):
            lat["mean"] = sum(m * n for m, n in zip(means, ops)) / sum(ops)
    for key in ("mean", "p50", "p99", "p999"):
        out[f"lat_{key}_ns"] = lat.get(key)
    return out


def _throughput(point: dict[str, Any], metric: str) -> float | None:
    return point.get("bw_bytes" if metric == "bw" else "iops")


# What a latency climb compares. Along bs the request size differs from point to point, and a 1 MiB
# request taking longer than a 4 KiB one says nothing: there the climb is judged on latency per KiB
# of request. Along every other axis the points share one request size and plain latency is used.
PER_KIB_AXES = frozenset({"bs"})
CLIMB_BASES = {"same_bs": "ns", "per_kib": "ns_per_kib"}   # basis -> unit of the compared figures


def climb_basis(axis: str) -> str:
    """`per_kib` along an axis that changes the request size, else `same_bs`."""
    return "per_kib" if axis in PER_KIB_AXES else "same_bs"


def compared_latency(axis: str, values: Sequence[Any], latency: Sequence[float | None]) -> list[float | None]:
    """The latencies a climb along `axis` compares: ns per KiB of request along bs, else ns."""
    if climb_basis(axis) == "same_bs":
        return list(latency)
    return [None if lat is None else lat / (bs / 1024) for lat, bs in zip(latency, values)]


# --- analysis of a whole sweep ---------------------------------------------------------------

def analyse(axes: Sequence[Axis], points: Sequence[dict[str, Any]], settings: Settings) -> list[dict[str, Any]]:
    """Knee and latency climb of every series: for each numeric axis, the measured points that
    agree on every other axis, ordered by ascending value of that axis (2 points or more)."""
    done = [p for p in points if p.get("status") == "done"]
    series_list: list[dict[str, Any]] = []
    for axis in axes:
        if not axis.numeric:
            continue
        others = [a.name for a in axes if a.name != axis.name]
        groups: dict[tuple, list[dict[str, Any]]] = {}
        for p in done:
            key = tuple(repr(p["params"][n]) for n in others)
            groups.setdefault(key, []).append(p)
        for group in groups.values():
            if len(group) < 2:
                continue
            group.sort(key=lambda p: p["params"][axis.name])
            tput = [_throughput(p, settings.metric) for p in group]
            lat = [p.get(f"lat_{settings.climb_latency}_ns") for p in group]
            values = [p["params"][axis.name] for p in group]
            basis = climb_basis(axis.name)
            entry: dict[str, Any] = {
                "axis": axis.name,
                "fixed": {n: group[0]["params"][n] for n in others},
                "inner": axis is axes[-1],
                "values": values,
                "points": [p["index"] for p in group],
                "climb_basis": basis,
                "best": None, "knee": None, "latency_climb": None,
            }
            k = knee(tput, settings.knee_pct)
            if k is not None:
                best_i = max(range(len(tput)), key=lambda i: tput[i] or 0.0)
                best = tput[best_i]
                entry["best"] = {"value": values[best_i], "point": group[best_i]["index"], "throughput": best}
                entry["knee"] = {"value": values[k], "point": group[k]["index"], "throughput": tput[k],
                                 "share_of_best_pct": 100.0 * tput[k] / best,
                                 # the knee at the largest setting means throughput was still rising
                                 "saturated": k < len(values) - 1}
            compared = compared_latency(axis.name, values, lat)
            c = latency_climb(tput, compared, settings.climb_pct, settings.climb_gain_pct)
            if c is not None:
                low_i = min((i for i in range(c) if compared[i] is not None), key=lambda i: compared[i])
                lowest = compared[low_i]
                entry["latency_climb"] = {
                    "value": values[c], "point": group[c]["index"], "previous_value": values[c - 1],
                    "latency": settings.climb_latency, "basis": basis, "unit": CLIMB_BASES[basis],
                    "compared": compared[c], "lowest": lowest, "lowest_value": values[low_i],
                    "latency_ns": lat[c], "ratio": compared[c] / lowest if lowest else None,
                    "throughput_gain_pct": (tput[c] / tput[c - 1] - 1.0) * 100.0 if tput[c - 1] else None}
            series_list.append(entry)
    return series_list


def summarise_warnings(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs' warnings once per code: the first message, and which points raised it (the
    point index a sweep recorded in the run, else the run's position)."""
    by_code: dict[str, dict[str, Any]] = {}
    for n, run in enumerate(runs):
        i = (run.get("sweep") or {}).get("point", n)
        for w in run.get("warnings") or []:
            code = str(w.get("code"))
            entry = by_code.setdefault(code, {"code": code, "message": w.get("message"), "points": []})
            if i not in entry["points"]:
                entry["points"].append(i)
    return list(by_code.values())


# --- running ---------------------------------------------------------------------------------

def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def point_label(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={fmt_value(k, v)}" for k, v in params.items())


@dataclass
class SweepMatrix:
    """A validated sweep: the axes, the jobs of every point (resolved before anything runs, so a
    bad combination fails at once) and the settings."""
    axes: list[Axis]
    points: list[dict[str, Any]]          # params of every point, in run order
    jobs: list[Any]                       # storlab.jobs.job.Job per point
    settings: Settings
    run_options: dict[str, Any] = field(default_factory=dict)


def build_matrix(axes: list[Axis], fixed: Mapping[str, Any], settings: Settings,
                 jobfile: Mapping[str, Any] | None = None, jobfile_name: str = "job file",
                 phases: list[dict] | None = None) -> SweepMatrix:
    """Resolve the job of every point; errors name the point."""
    check_early_stop(axes, settings)
    params = expand(axes)
    jobs = []
    for p in params:
        try:
            jobs.append(resolve_job({**fixed, **p}, jobfile, jobfile_name=jobfile_name, phases=phases))
        except OptionError as e:
            raise OptionError(f"point {point_label(p)}: {e}" if p else str(e)) from None
    if settings.phase is not None and jobs:
        names = [ph.name for ph in jobs[0].phases]
        if settings.phase not in names:
            raise OptionError(f"phase: the job has no phase {settings.phase!r}; its phases: {', '.join(names)}")
    run_options = jobs[0].run if jobs else {}
    return SweepMatrix(axes=axes, points=params, jobs=jobs, settings=settings, run_options=run_options)


@dataclass
class SweepHooks:
    """What the caller does around each point (all optional): `before(i, n, params)` before a point
    runs, and returns a progress function for runner.run_job (or None); `after(i, n, params, point,
    run_doc)` once the point's run document exists (e.g. to store it); `skipped(params, reason)`."""
    before: Callable[[int, int, dict], Any] | None = None
    after: Callable[[int, int, dict, dict, dict], None] | None = None
    skipped: Callable[[dict, str], None] | None = None


def _series_key(params: Mapping[str, Any], axes: Sequence[Axis]) -> tuple:
    return tuple(repr(params[a.name]) for a in axes[:-1])


def run_sweep(matrix: SweepMatrix, argv: Sequence[str] = (), hooks: SweepHooks | None = None,
              sweep_id: str | None = None,
              run_job: Callable[..., dict[str, Any]] | None = None) -> dict[str, Any]:
    """Run every point of the matrix (skipping the rest of a series that early stop ended) and
    return the sweep document. Ctrl-C (during a point or between points) ends the sweep; the
    points done are kept and the document says `complete: false`."""
    run_job = run_job or run_job_in_this_process
    hooks = hooks or SweepHooks()
    settings, axes = matrix.settings, matrix.axes
    doc: dict[str, Any] = {
        **header("sweep", argv=argv, run_id=sweep_id),
        "axes": [a.as_dict() for a in axes], "settings": settings.as_dict(),
        "job": {}, "environment": {**host_environment()},
        "points": [], "series": [], "early_stops": [], "warnings": [], "runs": [],
    }
    scratch = Scratch()
    stops: dict[tuple, EarlyStop] = {}
    stopped: dict[tuple, dict[str, Any]] = {}
    n = len(matrix.points)
    try:
        for i, (params, job) in enumerate(zip(matrix.points, matrix.jobs)):
            key = _series_key(params, axes)
            if key in stopped:
                stopped[key]["skipped"].append(params[axes[-1].name])
                doc["points"].append({"index": i, "params": params, "status": "skipped",
                                      "run_id": None, "reason": "early_stop"})
                if hooks.skipped:
                    hooks.skipped(params, "early_stop")
                continue
            if job.uses_default_target:
                # one scratch file for the whole sweep, laid out once, instead of one per point
                path = scratch.path()
                for ph in job.phases:
                    for g in ph.groups:
                        # a replay without a target replays onto the file its log names (runner)
                        if not g.values["target"] and not g.values.get("read_iolog"):
                            g.values["target"] = (path,)
                            if g.values["size"] is None:
                                g.values["size"] = SCRATCH_SIZE_BYTES
            progress = hooks.before(i, n, params) if hooks.before else None
            try:
                run = run_job(job, argv=list(argv), progress=progress)
            except KeyboardInterrupt:
                doc["complete"], doc["stop_reason"] = False, "interrupted"
                doc["points"].append({"index": i, "params": params, "status": "interrupted", "run_id": None})
                break
            run["sweep"] = {"run_id": doc["run_id"], "point": i, "params": {k: _plain(v) for k, v in params.items()}}
            point = {"index": i, "params": params, "run_id": run["run_id"],
                     "status": "done" if run.get("complete") else run.get("stop_reason", "error"),
                     **measure(run, settings.phase)}
            doc["points"].append(point)
            doc["runs"].append(run)
            if hooks.after:
                hooks.after(i, n, params, point, run)
            if not run.get("complete"):
                doc["complete"], doc["stop_reason"] = False, run.get("stop_reason") or "error"
                doc["error"] = run.get("error")
                if doc["error"]:
                    doc["error"] = f"point {point_label(params)}: {doc['error']}"
                break
            t = _throughput(point, settings.metric)
            if axes and settings.stop_flat_pct:
                es = stops.setdefault(key, EarlyStop(settings.stop_flat_pct, settings.stop_count))
                if t is not None and es.add(t) and params[axes[-1].name] != axes[-1].values[-1]:
                    stopped[key] = {"fixed": {a.name: _plain(params[a.name]) for a in axes[:-1]},
                                    "axis": axes[-1].name, "last_run": params[axes[-1].name],
                                    "flat_points": es.flat_run, "skipped": []}
    except KeyboardInterrupt:
        doc["complete"], doc["stop_reason"] = False, "interrupted"
    finally:
        doc["finished_at"] = now_iso()
        scratch.remove()
    doc["early_stops"] = list(stopped.values())
    doc["series"] = analyse(axes, doc["points"], settings)
    doc["warnings"] = summarise_warnings(doc["runs"])
    _fill_shared(doc, axes)
    doc["points"] = [{**p, "params": {k: _plain(v) for k, v in p["params"].items()}} for p in doc["points"]]
    for s in doc["series"]:
        s["values"] = [_plain(v) for v in s["values"]]
        s["fixed"] = {k: _plain(v) for k, v in s["fixed"].items()}
    return doc


def _fill_shared(doc: dict[str, Any], axes: Sequence[Axis]) -> None:
    """`job`: the resolved options every point shares (swept ones left out, they are in `axes`);
    `environment`: the host, and the engine and targets when every run used the same."""
    runs = doc["runs"]
    if not runs:
        return
    swept = {a.name for a in axes}
    first = runs[0].get("job") or {}
    doc["job"] = {k: v for k, v in first.items() if k not in swept and k != "phases"
                  and all((r.get("job") or {}).get(k) == v for r in runs)}
    env0 = runs[0].get("environment") or {}
    for key in ("engine", "io_uring", "targets"):
        if all((r.get("environment") or {}).get(key) == env0.get(key) for r in runs):
            doc["environment"][key] = env0.get(key)


# --- labels ----------------------------------------------------------------------------------

def fmt_value(name: str, value: Any) -> str:
    """A parameter value as a human reads it: sizes in binary units, durations with a unit."""
    opt = BY_NAME.get(name)
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return "on" if value else "off"
    if opt is not None and opt.kind == "size" and isinstance(value, int):
        return format_size(value).replace(" ", "")
    if opt is not None and opt.kind == "duration" and isinstance(value, (int, float)):
        return format_duration(value).replace(" ", "")
    return str(value)


def render_reference() -> str:
    """The Markdown table of the sweep options for docs/sweep.md, generated from SWEEP_OPTIONS
    (a test checks the page holds exactly this table)."""
    lines = ["| option | type | default | help |", "|---|---|---|---|"]
    for o in SWEEP_OPTIONS:
        default = "—" if o.default in (None, ()) else f"{o.default}{o.unit if o.unit == '%' else ''}"
        text = o.help.replace("|", "\\|")
        if o.choices:
            text += "<br>" + "<br>".join(f"`{k}`: {v}" for k, v in o.choices.items())
        lines.append(f"| `{o.flag}` | {o.kind} | {default} | {text} |")
    return "\n".join(lines)
