"""What a report can show, worked out from the documents alone (no plotting here): the runs, the
job options that differ between them, series of runs along one swept option, and the measured
points of each run (one per phase x direction), predicted-vs-measured rows of runs with a stack
model, and the sweep, scale and meta documents that have charts of their own.

Sweep-like documents (`runs: [...]`) contribute their runs; a swept option is any job option whose
value differs between runs, so runs saved one by one and a future `storlab sweep` document group
the same way.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ...jobs.options import BY_NAME
from ...units import format_size
from ..base import iter_runs, job_parameter

__all__ = ["Point", "points", "split_runs", "of_kind", "varying_options", "series_along", "param",
           "fmt_param", "SWEEP_AXES", "worker_rates", "ModelRow", "model_rows"]

# Options a chart can put on its x axis, in the order charts are drawn.
SWEEP_AXES = ("bs", "threads", "qd", "ranks")

# Job options that are bookkeeping or follow from others; they never split runs into series.
_NOT_PARAMETERS = {"json", "fio_json", "quiet", "store", "no_store", "tag", "note", "fio", "seed", "argv",
                   "allow_destroy", "phases"}


@dataclass
class Point:
    """One measured phase x direction of one run."""
    run: dict[str, Any]
    phase: str
    direction: str
    data: dict[str, Any] = field(repr=False)

    @property
    def bw_bytes(self) -> float | None:
        return self.data.get("bw_bytes")

    @property
    def iops(self) -> float | None:
        return self.data.get("iops")

    @property
    def lat_ns(self) -> dict[str, Any]:
        return self.data.get("lat_ns") or {}

    @property
    def buckets(self) -> list:
        return (self.data.get("lat_hist") or {}).get("buckets") or []

    @property
    def timeseries(self) -> dict[str, Any]:
        return self.data.get("timeseries") or {}


def points(run: dict[str, Any]) -> list[Point]:
    out = []
    for pi, phase in enumerate(run.get("phases") or []):
        for direction in ("read", "write"):
            d = phase.get(direction)
            if isinstance(d, dict):
                out.append(Point(run, str(phase.get("name", pi)), direction, d))
    return out


def split_runs(docs: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(run documents with I/O phases, other documents the report can only list). Metadata runs
    (kind "meta") are neither: they have sections of their own (`of_kind`)."""
    runs, others = [], []
    for doc in iter_runs(docs):
        if doc.get("kind") == "meta":
            continue
        (runs if isinstance(doc.get("phases"), list) else others).append(doc)
    return runs, others


def of_kind(docs: Iterable[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The documents of one kind: sweep and scale documents as given (not expanded into their
    runs), meta documents also from inside them."""
    out = []
    for doc in docs:
        if doc.get("kind") == kind:
            out.append(doc)
        elif isinstance(doc.get("runs"), list):
            out += of_kind(doc["runs"], kind)
    return out


@dataclass
class ModelRow:
    """One phase of a run with a stack model attached: predicted against measured, in the
    prediction's unit (bytes/s for sequential metrics, IOPS for random ones)."""
    run: dict[str, Any]
    phase: str
    metric: str
    unit: str
    predicted: float
    measured: float | None
    limiting: str
    stack: str

    @property
    def ratio(self) -> float | None:
        """measured / predicted."""
        return None if self.measured is None or not self.predicted else self.measured / self.predicted


def model_rows(runs: Sequence[dict[str, Any]]) -> list[ModelRow]:
    """Predicted vs measured for every phase of the runs that carry a `model` section. With
    several passes a phase repeats; its measured figure is the mean over the repeats."""
    from ...measure.prediction import measured_value

    rows = []
    for run in runs:
        model = run.get("model")
        if not isinstance(model, dict):
            continue
        stack = (model.get("stack") or {}).get("name") or str(model.get("stack_file", "stack"))
        for pred in model.get("phases") or []:
            results = [p for p in run.get("phases") or [] if str(p.get("name")) == str(pred.get("phase"))]
            values = [v for v in (measured_value(p, pred) for p in results) if v is not None]
            rows.append(ModelRow(run, str(pred.get("phase")), str(pred.get("metric")), str(pred.get("unit")),
                                 float(pred.get("value") or 0.0),
                                 sum(values) / len(values) if values else None,
                                 str(pred.get("limiting_component")), stack))
    return rows


def param(run: dict[str, Any], name: str) -> Any:
    """A job option of a run; `ranks` also falls back to the ranks seen in the workers."""
    job = run.get("job") or {}
    if name == "ranks":
        if job.get("ranks") is not None:
            return job["ranks"]
        ranks = {w.get("rank") for p in run.get("phases") or [] for w in p.get("workers") or []
                 if w.get("rank") is not None}
        return len(ranks) or None
    return job_parameter(job, name)


def varying_options(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Job options (plus ranks) whose value differs between the runs, in option-table order."""
    if len(runs) < 2:
        return []
    names: list[str] = []
    for r in runs:
        for k in (r.get("job") or {}):
            if k not in names and k not in _NOT_PARAMETERS:
                names.append(k)
    if "ranks" not in names:
        names.append("ranks")
    return [n for n in names if len({repr(param(r, n)) for r in runs}) > 1
            and any(param(r, n) is not None for r in runs)]


def fmt_param(name: str, value: Any) -> str:
    opt = BY_NAME.get(name)
    if opt is not None and opt.kind == "size" and isinstance(value, int):
        return format_size(value).replace(" ", "")
    if isinstance(value, tuple):
        return ",".join(str(v).rsplit("/", 1)[-1] for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def series_along(runs: Sequence[dict[str, Any]], axis: str) -> dict[str, list[dict[str, Any]]]:
    """Runs grouped into series along `axis`: one series per combination of the other options
    that differ, each sorted by the axis value. Empty unless the axis takes 2+ values."""
    usable = [r for r in runs if isinstance(param(r, axis), (int, float))]
    if len({param(r, axis) for r in usable}) < 2:
        return {}
    others = [n for n in varying_options(usable) if n != axis]
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in usable:
        label = ", ".join(f"{n}={fmt_param(n, param(r, n))}" for n in others)
        groups.setdefault(label, []).append(r)
    for label in groups:
        groups[label].sort(key=lambda r: param(r, axis))
    return {k: v for k, v in groups.items() if len(v) >= 2}


def worker_rates(phase: dict[str, Any]) -> tuple[str, list[tuple[str, float]]]:
    """Per-rank (when workers carry a rank) or per-worker bandwidth of a phase, bytes per second.

    A rank's rate is its bytes over the span from its first worker's start to its last one's end.
    """
    workers = phase.get("workers") or []
    by_rank = all(w.get("rank") is not None for w in workers) and workers
    groups: dict[Any, list[dict[str, Any]]] = {}
    for w in workers:
        groups.setdefault(w.get("rank") if by_rank else w.get("id"), []).append(w)
    out = []
    for key in sorted(groups, key=lambda k: (k is None, k)):
        ws = groups[key]
        nbytes = sum((w.get("read_bytes") or 0) + (w.get("write_bytes") or 0) for w in ws)
        span = max(w.get("end_s") or 0.0 for w in ws) - min(w.get("start_s") or 0.0 for w in ws)
        if span > 0:
            out.append((str(key), nbytes / span))
    return ("rank" if by_rank else "worker"), out
