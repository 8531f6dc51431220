"""OpenMetrics text (the format Prometheus scrapes, and `promtool tsdb create-blocks-from
openmetrics` backfills) of stored runs: `storlab results export --format openmetrics`. The live
endpoint of a running command (output/live.py) writes its figures with the same `Family` and
`render`.

One sample per run x phase x direction (the rows every exporter renders, output/base.py), each
labelled with run_id, host, target, job, phase and direction (and pass, in a run of several
passes), stamped with the phase's end (Unix seconds): bandwidth, IOPS, bytes and the latency
quantiles as a summary in seconds; an MPI run adds each node's bytes and rate. docs/store.md
lists the families.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ..document import DIRECTIONS
from .base import iter_runs

__all__ = ["Family", "render", "to_openmetrics", "job_name", "phase_targets", "LATENCY_QUANTILES"]

# Latency quantiles exported: quantile -> the document's key in lat_ns (1: the largest latency).
LATENCY_QUANTILES: dict[str, str] = {"0.5": "p50", "0.9": "p90", "0.99": "p99", "0.999": "p999", "1": "max"}


@dataclass
class Family:
    """One metric family: its name (with its unit as the last word), type, unit, help and samples.
    A sample is (name suffix, labels, value, timestamp in Unix seconds or None)."""
    name: str
    type: str        # gauge | counter | summary | info
    unit: str
    help: str
    samples: list[tuple[str, dict[str, str], float, float | None]] = field(default_factory=list)

    def add(self, labels: dict[str, str], value: float, timestamp: float | None = None, suffix: str = "") -> None:
        self.samples.append((suffix, labels, value, timestamp))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() or abs(value) >= 1e15 else str(int(value))


def render(families: Iterable[Family]) -> str:
    """The families as OpenMetrics text, ending in `# EOF`; families without samples are left out."""
    lines: list[str] = []
    for f in families:
        if not f.samples:
            continue
        lines.append(f"# TYPE {f.name} {f.type}")
        if f.unit:
            lines.append(f"# UNIT {f.name} {f.unit}")
        lines.append(f"# HELP {f.name} {_escape(f.help)}")
        for suffix, labels, value, timestamp in f.samples:
            text = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
            stamp = "" if timestamp is None else f" {timestamp:.3f}"
            lines.append(f"{f.name}{suffix}{{{text}}} {_number(value)}{stamp}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def job_name(doc: dict[str, Any]) -> str:
    """The `job` label: the job file's name without its extension where the command named one
    (TOML, fio, io500 .ini, DLIO YAML), else the command that ran (`run`, `scale` ...)."""
    argv = [str(a) for a in doc.get("argv") or []]
    for word in argv[2:]:
        if not word.startswith("-") and word.endswith((".toml", ".fio", ".ini", ".yaml", ".yml")):
            return os.path.splitext(os.path.basename(word))[0]
    return argv[1] if len(argv) > 1 else str(doc.get("kind") or "run")


def phase_targets(phase: dict[str, Any], doc: dict[str, Any]) -> str:
    """The `target` label: the paths the phase's workers used (comma-separated), else the job's."""
    paths = sorted({str(w["target"]) for w in phase.get("workers") or [] if w.get("target")})
    if not paths:
        job_target = (doc.get("job") or {}).get("target")
        paths = [str(t) for t in job_target] if isinstance(job_target, list) else [str(job_target or "")]
    return ",".join(paths)


def _phase_end(phase: dict[str, Any]) -> float | None:
    """When the phase ended, in Unix seconds: its start plus its last worker's finish."""
    start = phase.get("start_unix_s")
    if not isinstance(start, (int, float)):
        return None
    ends = [w["end_s"] for w in phase.get("workers") or [] if isinstance(w.get("end_s"), (int, float))]
    return start + (max(ends) if ends else float(phase.get("seconds") or 0.0))


def _families() -> dict[str, Family]:
    fams = [
        Family("storlab_bandwidth_bytes_per_second", "gauge", "bytes_per_second",
               "bytes per second over the phase's measured time, per direction"),
        Family("storlab_iops", "gauge", "", "requests per second over the phase's measured time, per direction"),
        Family("storlab_io_bytes", "counter", "bytes", "bytes moved in the phase, per direction"),
        Family("storlab_latency_seconds", "summary", "seconds",
               "request latency (submission to completion) per direction: quantiles from the merged "
               "histogram, quantile 1 the largest"),
        Family("storlab_node_bandwidth_bytes_per_second", "gauge", "bytes_per_second",
               "an MPI run: one node's bytes (all directions) over its ranks' span"),
        Family("storlab_node_io_bytes", "counter", "bytes", "an MPI run: bytes one node's ranks moved"),
    ]
    return {f.name: f for f in fams}


def to_openmetrics(docs: Sequence[dict[str, Any]]) -> str:
    """Every run in `docs` (a sweep's or scale's runs expanded) as OpenMetrics text."""
    fams = _families()
    for doc in iter_runs(docs):
        env = doc.get("environment") or {}
        run = {"run_id": str(doc.get("run_id") or ""), "host": str(env.get("host") or ""), "job": job_name(doc)}
        for phase in doc.get("phases") or []:
            labels = {**run, "target": phase_targets(phase, doc), "phase": str(phase.get("name") or "")}
            if phase.get("pass") is not None:
                labels["pass"] = str(phase["pass"])
            stamp = _phase_end(phase)
            for direction in DIRECTIONS:
                d = phase.get(direction)
                if not isinstance(d, dict):
                    continue
                _add_direction(fams, {**labels, "direction": direction}, d, stamp)
            for node in (phase.get("mpi") or {}).get("nodes") or []:
                if "bytes" not in node:
                    continue
                node_labels = {**labels, "host": str(node["node"])}
                fams["storlab_node_io_bytes"].add(node_labels, node["bytes"], stamp, "_total")
                fams["storlab_node_bandwidth_bytes_per_second"].add(node_labels, node["bw_bytes"], stamp)
    return render(fams.values())


def _add_direction(fams: dict[str, Family], labels: dict[str, str], d: dict[str, Any], stamp: float | None) -> None:
    fams["storlab_bandwidth_bytes_per_second"].add(labels, d.get("bw_bytes") or 0.0, stamp)
    fams["storlab_iops"].add(labels, d.get("iops") or 0.0, stamp)
    fams["storlab_io_bytes"].add(labels, d.get("bytes") or 0, stamp, "_total")
    lat = d.get("lat_ns") or {}
    ops = d.get("ops") or 0
    if not ops:
        return
    latency = fams["storlab_latency_seconds"]
    for quantile, key in LATENCY_QUANTILES.items():
        if isinstance(lat.get(key), (int, float)):
            latency.add({**labels, "quantile": quantile}, lat[key] / 1e9, stamp)
    latency.add(labels, ops, stamp, "_count")
    latency.add(labels, float(lat.get("mean") or 0.0) * ops / 1e9, stamp, "_sum")
