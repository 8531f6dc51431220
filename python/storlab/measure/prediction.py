"""Predicted vs measured: the storage stack model (storlab.model) evaluated for the workload of one
run, stored in the run document as its `model` section (`storlab run --stack FILE`, docs/report.md).

Mapping of a run's workload onto the model (per phase, from the phase's first group):
- rw read / write     -> sequential read / write bandwidth (bytes/s) at request size bs;
- randread / randwrite -> random read / write IOPS at bs (offsets aligned to bs, as storlab issues them);
- rw / randrw          -> the read/write mix at rwmix_read: each host byte (or I/O) takes 1/rate of
  the back end, so the mix is the harmonic mean 1 / (r / R + w / W) (model.performance.mixed_iops).
Writes carry the geometry's partial-stripe penalty at bs: sequential requests smaller than (or not
aligned to) the full stripe are costed as read-modify-write / reconstruct-write stripe writes, unless
a write-back cache gathers them into full stripes (a stated one, or a RAID controller's by default:
Stack.gathers_sequential_writes).

The rate of each direction is `model.predict` for the run's requests in flight (threads x targets,
each with qd outstanding; psync keeps one): the closed queueing network over the drives and the
hardware path (docs/model.md, "Expected rates"), which names the limiting component or the queue
depth. The stack's ceiling at the request size (`performance_of`) is kept beside it as
`model_value`, with every component's headroom. Everything else the model does not include (the
file system on top, the kernel's merging) is listed in `notes`, so a reader can judge the comparison.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from ..errors import SpecError
from ..model import StackError, analyse_alignment, capacity_of, geometry_of, load_stack, mixed_iops, performance_of
from ..model.performance import MetricResult, PerfReport
from ..model.predict import Workload, predict
from ..model.stack import Stack

__all__ = ["predict_for_run", "METRICS", "measured_value"]

# metric -> (unit, quantity measured, directions summed), the names carrying their units
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "seq_read_bw_bytes": ("bytes/s", "bw_bytes", ("read",)),
    "seq_write_bw_bytes": ("bytes/s", "bw_bytes", ("write",)),
    "seq_mixed_bw_bytes": ("bytes/s", "bw_bytes", ("read", "write")),
    "rand_read_iops": ("IOPS", "iops", ("read",)),
    "rand_write_iops": ("IOPS", "iops", ("write",)),
    "rand_mixed_iops": ("IOPS", "iops", ("read", "write")),
}

# storlab rw value -> (model metric of reads, of writes); None where the direction is absent
_RW = {
    "read": ("seq_read", None), "write": (None, "seq_write"), "rw": ("seq_read", "seq_write"),
    "randread": ("random_read", None), "randwrite": (None, "random_write"),
    "randrw": ("random_read", "random_write"),
}
_MODEL_NAME = {"seq_read": "seq_read_bw_bytes", "seq_write": "seq_write_bw_bytes",
               "random_read": "rand_read_iops", "random_write": "rand_write_iops"}


def _load(stack_path: str) -> Stack:
    """The stack, or a one-line SpecError naming the file and what is wrong with it."""
    name = os.fspath(stack_path)
    try:
        return load_stack(name)
    except StackError as e:
        text = str(e)
        # load_stack names the file itself; keep that one line as is
        raise SpecError(f"stack: {text}" if text.startswith(name) else f"stack: {name}: {text}") from None
    except OSError as e:
        raise SpecError(f"stack: {name}: {e.strerror or e}") from None


def _stack_summary(stack: Stack) -> dict[str, Any]:
    geometry = geometry_of(stack)
    capacity = capacity_of(stack)
    drive = stack.drive
    components = []
    root = stack.instances()
    if root is not None:
        seen: list[str] = []
        for inst in root.walk():
            t = inst.template
            if t.name in seen:
                continue
            seen.append(t.name)
            components.append({"name": t.name, "kind": t.kind, "read_bw_bytes": t.read_bw_bytes,
                               "write_bw_bytes": t.write_bw_bytes, "iops": t.iops,
                               "raid_engine": t.raid_engine, "mirror_writes": t.mirror_writes})
    return {
        "name": stack.name, "description": stack.description, "layout": stack.raid.layout.text,
        "count": stack.raid.count, "chunk_bytes": stack.raid.chunk_bytes, "engine": stack.raid.engine,
        "drives": stack.raid.drives, "groups": stack.raid.groups,
        "data_drives": stack.raid.groups * stack.raid.layout.data_drives_per_span,
        "devices": stack.raid.devices, "aggregate": stack.volume.aggregate,
        "group_stripe_width_bytes": geometry.group_stripe_width_bytes,
        "full_stripe_bytes": geometry.full_stripe_bytes,
        "usable_bytes": capacity.usable_bytes,
        "drive": {"name": drive.name, "seq_read_bw_bytes": drive.seq_read_bw_bytes,
                  "seq_write_bw_bytes": drive.seq_write_bw_bytes,
                  "random_read_iops": drive.random_read_iops,
                  "random_write_iops": drive.random_write_iops, "rotational": drive.rotational,
                  "read_latency_s": drive.read_latency_s, "write_latency_s": drive.write_latency_s,
                  "write_cache": drive.write_cache},
        "components": components,
    }


def _outstanding(group: Mapping[str, Any]) -> int:
    """Requests in flight on the stack from one group: threads per target x targets x qd."""
    targets = max(1, len(group.get("target") or ()))
    qd = 1 if group.get("engine") == "psync" else int(group.get("qd") or 1)
    return int(group.get("threads") or 1) * targets * max(1, qd)


def _headroom(result: MetricResult, scale: float) -> list[dict[str, Any]]:
    """Every component's capacity, load and headroom at the predicted rate (loads scaled by
    `scale` when something outside the path, e.g. concurrency, holds the rate lower)."""
    rows = []
    for c in result.components:
        if c.capacity is None:
            continue    # no limit given: nothing to run out of
        load = c.load * scale
        rows.append({"component": c.name, "kind": c.kind, "instances": c.instances,
                     "unit": "bytes/s" if result.unit == "bytes/s" else "IOPS",
                     "capacity": c.capacity, "load": load,
                     "headroom_fraction": (c.capacity - load) / c.capacity})
    return rows


# model metric -> the model.predict pattern of one direction
_PATTERN = {"seq_read": "read", "seq_write": "write", "random_read": "randread", "random_write": "randwrite"}


def _one_direction(stack: Stack, perf: PerfReport, metric: str, group: Mapping[str, Any], bs: int) -> dict[str, Any]:
    """The rate `model.predict` expects for the run's requests in flight (threads x targets, each
    with qd outstanding; psync keeps one), and the stack's ceiling beside it (performance_of)."""
    result = perf.metrics[metric]
    targets = max(1, len(group.get("target") or ()))
    qd = 1 if group.get("engine") == "psync" else max(1, int(group.get("qd") or 1))
    streams = int(group.get("threads") or 1) * targets
    # the bytes the run touches, against a controller cache the stack file states ([cache])
    size = group.get("size")
    working_set = int(size) * targets if isinstance(size, int) and size > 0 else None
    prediction = predict(stack, Workload(_PATTERN[metric], bs, qd=qd, threads=streams,
                                         working_set_bytes=working_set))
    value = prediction.bw_bytes if metric.startswith("seq") else prediction.iops
    limiting = prediction.limiting
    if limiting == "queue depth":
        limiting = f"concurrency ({streams * qd} request(s) in flight)"
    return {"value": value, "drives_value": result.drives_value, "model_value": result.value,
            "limiting_component": limiting, "latency_mean_s": prediction.latency_mean_s,
            "headroom": _headroom(result, value / result.value if result.value else 1.0)}


def _alignment(perf: PerfReport, metric: str) -> dict[str, Any]:
    a = perf.drives.seq_write if metric == "seq_write" else perf.drives.random_write
    return {"request_bytes": a.request_bytes, "pattern": a.pattern,
            "full_stripe_fraction": a.full_stripe_fraction,
            "partial_stripe_fraction": a.partial_stripe_fraction,
            "rmw_fraction": a.rmw_fraction, "rcw_fraction": a.rcw_fraction,
            "write_penalty": a.write_penalty, "write_amplification": a.write_amplification,
            "disk_ops_per_write": a.disk_ops_per_write}


def _phase_prediction(stack: Stack, phase_name: str, group: Mapping[str, Any]) -> dict[str, Any]:
    rw = str(group.get("rw"))
    if rw not in _RW:
        raise SpecError(f"stack: cannot predict rw={rw!r}; the model knows {', '.join(_RW)}")
    bs = int(group.get("bs") or 4096)
    read_metric, write_metric = _RW[rw]
    outstanding = _outstanding(group)
    perf = performance_of(stack, seq_request_bytes=bs, random_request_bytes=bs)
    entry: dict[str, Any] = {"phase": phase_name, "rw": rw, "bs": bs, "outstanding": outstanding}
    if read_metric and write_metric:
        read_pct = float(group.get("rwmix_read", 50))
        r = _one_direction(stack, perf, read_metric, group, bs)
        w = _one_direction(stack, perf, write_metric, group, bs)
        f = read_pct / 100.0
        metric = "seq_mixed_bw_bytes" if rw == "rw" else "rand_mixed_iops"
        # the same harmonic mix holds for bytes/s: each host byte takes 1/rate of the back end
        value = mixed_iops(r["value"], w["value"], f)
        # the direction that takes more of the back end's time sets the pace of the mix
        dominant = r if f / r["value"] >= (1 - f) / w["value"] else w
        entry.update(metric=metric, value=value, rwmix_read_pct=read_pct,
                     limiting_component=dominant["limiting_component"],
                     limiting_by_direction={"read": r["limiting_component"], "write": w["limiting_component"]},
                     by_direction={"read": {"metric": _MODEL_NAME[read_metric], **r},
                                   "write": {"metric": _MODEL_NAME[write_metric], **w}},
                     headroom=dominant["headroom"])
        entry["alignment"] = _alignment(perf, write_metric)
    else:
        model_metric = read_metric or write_metric
        d = _one_direction(stack, perf, model_metric, group, bs)
        entry.update(metric=_MODEL_NAME[model_metric], **d)
        if write_metric:
            entry["alignment"] = _alignment(perf, write_metric)
    unit, quantity, directions = METRICS[entry["metric"]]
    entry.update(unit=unit, measured_as={"quantity": quantity, "directions": list(directions)})
    value = entry["value"]
    # the same figure in the other unit, for reading next to the measured table
    entry["value_bw_bytes" if unit == "IOPS" else "value_iops"] = value * bs if unit == "IOPS" else value / bs
    return entry


def _notes(stack: Stack, job: Mapping[str, Any], phases: Sequence[dict[str, Any]],
           multi_group: Sequence[str]) -> list[str]:
    notes = ["The model gives steady-state rates of the drives and the hardware path; caches, CPU, "
             "the file system and the kernel's merging of requests are not modelled."]
    engine = job.get("engine")
    if engine == "null":
        notes.append("engine null does no I/O: the measured figures come from its synthetic delay "
                     "(null_delay) or its own overhead, not from the stack.")
    if job.get("direct") is False and engine != "null":
        notes.append("buffered I/O (direct = false): reads may be served from the page cache and "
                     "writes absorbed by it, so measured rates can exceed the prediction.")
    geometry = geometry_of(stack)
    if any(p["metric"] in ("seq_write_bw_bytes", "seq_mixed_bw_bytes")
           and analyse_alignment(geometry, p["bs"], "sequential").partial_stripe_fraction > 0 for p in phases):
        if stack.gathers_sequential_writes:
            notes.append("sequential writes that do not fill whole stripes are costed as full stripes: the "
                         "write-back cache gathers them (a RAID controller's, on by default, where the stack "
                         "has no [cache] table; write_back = false says it has none).")
        else:
            notes.append("sequential writes that do not fill whole stripes are costed as separate "
                         "partial-stripe writes; md's stripe cache may merge them into full stripes.")
    notes.append("each rate is model.predict's for the requests in flight (a closed queueing network "
                 "over the drives and the path, docs/model.md \"Expected rates\"); model_value is the "
                 "stack's ceiling at the request size (performance_of).")
    for name in multi_group:
        notes.append(f"phase {name} runs several groups at once; the prediction is for its first "
                     f"group alone.")
    return notes


def predict_for_run(stack_path: str, job_record: Mapping[str, Any]) -> dict[str, Any]:
    """The `model` section of a run document: the stack, its four predicted figures at the run's
    request size, and per phase the figure the run measures, its limiting component and the
    headroom of every component. Raises a one-line SpecError for a bad stack file."""
    stack = _load(stack_path)
    phases_spec = list(job_record.get("phases") or [])
    if not phases_spec:
        phases_spec = [{"name": str(job_record.get("rw", "run")), "groups": [dict(job_record)]}]
    multi_group = [str(p.get("name")) for p in phases_spec if len(p.get("groups") or []) > 1]
    try:
        phases = [_phase_prediction(stack, str(p.get("name")), (p.get("groups") or [job_record])[0])
                  for p in phases_spec]
        bs = int(job_record.get("bs") or phases[0]["bs"])
        perf = performance_of(stack, seq_request_bytes=bs, random_request_bytes=bs)
    except StackError as e:
        raise SpecError(f"stack: {os.fspath(stack_path)}: {e}") from None
    first = phases[0]
    for_this_run = {k: first[k] for k in ("phase", "metric", "unit", "value", "limiting_component",
                                          "headroom") if k in first}
    return {
        "stack_file": os.path.abspath(os.fspath(stack_path)),
        "stack": _stack_summary(stack),
        "mode": perf.mode,
        "request_bytes": bs,
        "predicted": {
            "seq_read_bw_bytes": perf.value("seq_read"),
            "seq_write_bw_bytes": perf.value("seq_write"),
            "rand_read_iops": perf.value("random_read"),
            "rand_write_iops": perf.value("random_write"),
            "limiting": {_MODEL_NAME[m]: r.limiting for m, r in perf.metrics.items()},
            "for_this_run": for_this_run,
        },
        "phases": phases,
        "notes": _notes(stack, job_record, phases, multi_group),
    }


def measured_value(phase_result: Mapping[str, Any], prediction: Mapping[str, Any]) -> float | None:
    """The measured figure of a phase result that matches a phase prediction: bandwidth or IOPS,
    summed over the directions the prediction covers; None when the phase did none of them."""
    how = prediction.get("measured_as") or {}
    quantity = how.get("quantity")
    values = [phase_result[d].get(quantity) for d in how.get("directions") or ()
              if isinstance(phase_result.get(d), dict)]
    values = [v for v in values if v is not None]
    return sum(values) if values else None
