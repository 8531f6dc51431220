"""The `storlab plan` documents (schema storlab.plan.<command>/1): the common header, the model's
result objects as plain JSON values, and the payloads of a curve, a workload forecast and a
recommendation. output/plan_text.py prints the same results as text."""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from ..document import header, plan_schema
from ..model.advice import PlanWarning
from ..model.kvcache import KvForecast
from ..model.network import ClusterPrediction
from ..model.predict import Prediction
from ..model.training import AcceleratorPoint, CheckpointForecast, EvaluationForecast, TrainingLoad
from ..model.training_load import WorkloadForecast

__all__ = ["plan_document", "plain", "curve_point", "cluster_point", "workload_payload", "kvcache_payload",
           "recommend_payload"]


def plan_document(command: str, payload: Any, warnings: Sequence[PlanWarning]) -> dict[str, Any]:
    """The document of one plan subcommand: header, the payload's fields, the warnings."""
    return {**header("plan", schema=plan_schema(command)), **plain(payload),
            "warnings": [dataclasses.asdict(w) for w in warnings]}


def plain(value: Any) -> Any:
    """A result object as JSON values: dataclasses as objects (with their derived figures), infinity
    as null; the stack each result refers to is left out (the document names it)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name != "stack"}
        for name in ("efficiency", "write_penalty", "disk_ops_per_write", "mttdl_years", "headroom",
                     "headroom_fraction"):
            if hasattr(type(value), name) and isinstance(getattr(type(value), name), property):
                out[name] = getattr(value, name)
        return out
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, float) and value == float("inf"):
        return None
    return value


def curve_point(p: Prediction) -> dict[str, Any]:
    """One point of plan perf's curve."""
    w = p.workload
    return {"rw": w.rw, "request_bytes": w.request_bytes, "qd": w.qd, "threads": w.threads,
            "working_set_bytes": w.working_set_bytes, "iops": p.iops, "bw_bytes": p.bw_bytes,
            "latency_mean_s": p.latency_mean_s, "latency_p99_s": p.latency_tail_s, "limiting": p.limiting,
            "components": [plain(c) for c in p.components], "assumptions": list(p.assumptions)}


def cluster_point(p: ClusterPrediction) -> dict[str, Any]:
    """One point of plan perf on a cluster file."""
    load = p.load
    return {"rw": load.rw, "request_bytes": load.request_bytes, "clients": p.clients, "threads_per_client": load.threads,
            "qd": load.qd, "iops": p.iops, "bw_bytes": p.bw_bytes, "latency_mean_s": p.latency_mean_s,
            "limiting": p.limiting, "single_stream_bw_bytes": p.single_stream_bw_bytes,
            "single_stream_limiting": p.single_stream_limiting, "components": [plain(c) for c in p.components]}


def _accelerator_point(point: AcceleratorPoint | None, load: TrainingLoad) -> dict[str, Any] | None:
    if point is None:
        return None
    return {"accelerators": point.accelerators, "au": point.au, "passed": point.passed,
            "samples_per_s": point.samples_per_s, "mib_per_s": point.samples_per_s * load.record_bytes / 2**20,
            "steps_per_epoch": point.steps, "epoch_s": point.epoch_s,
            "demand_bytes_per_s": point.demand_bytes_per_s, "delivered_bytes_per_s": point.delivered_bytes_per_s,
            "outstanding_reads": point.concurrency, "request_bytes": point.prediction.workload.request_bytes,
            "rw": point.prediction.workload.rw, "limiting": point.limiting}


def _evaluation_payload(fc: EvaluationForecast) -> dict[str, Any]:
    point = {k: v for k, v in (_accelerator_point(fc.point, fc.load) or {}).items()
             if k not in ("steps_per_epoch", "epoch_s")}     # an evaluation's: seconds_per_evaluation, steps_per_evaluation
    return {**point, "seconds_per_evaluation": fc.point.epoch_s,
            "steps_per_evaluation": fc.point.steps, "evaluations_per_run": fc.evaluations,
            "seconds_per_run": fc.seconds_per_run, "note": fc.note or None}


def _checkpoint_payload(fc: CheckpointForecast) -> dict[str, Any]:
    return {"writers": fc.load.writers, "bytes_per_writer": fc.load.bytes_per_writer,
            "bytes_per_checkpoint": fc.load.bytes_total, "ranks_total": fc.load.ranks_total or fc.load.writers,
            "files_per_writer": fc.load.files_per_writer,
            **{f"{ph.kind}_{k}": v for ph in (fc.write, fc.read)
               for k, v in (("seconds", ph.seconds), ("gb_per_s", ph.gb_per_s), ("limiting", ph.limiting))},
            "assumptions": list(fc.assumptions)}


def workload_payload(f: WorkloadForecast, source: str) -> dict[str, Any]:
    """The `workload` section of plan perf --workload's document."""
    spec = f.spec
    wl: dict[str, Any] = {"name": spec.name, "source": source, "kind": "training" if spec.train_enabled else "checkpoint",
                          "au_threshold": spec.au_threshold, "dataset_size": f.dataset_size}
    if f.training is not None and f.fed is not None:
        load, fc = f.training, f.fed
        rw = fc.trials[0].prediction.workload.rw if fc.trials else load.pattern
        wl.update({"load": {**plain(load), "request_bytes": load.request_bytes, "calls_per_sample": load.calls_per_sample,
                            "rw": rw}, "accelerators_fed": fc.fed,
                   "at_fed": _accelerator_point(fc.at_fed, load), "beyond": _accelerator_point(fc.beyond, load),
                   "search_bound": fc.bound or None, "trials": [_accelerator_point(p, load) for p in fc.trials],
                   "assumptions": list(fc.assumptions)})
        if f.at_accelerators is not None:
            wl["at_accelerators"] = _accelerator_point(f.at_accelerators, load)
            wl["passed"] = f.at_accelerators.passed
    if f.evaluation is not None:
        ev_wl: dict[str, Any] = {"load": {**plain(f.evaluation), "request_bytes": f.evaluation.request_bytes},
                                 "definition": "DLIO's eval figures, apart from training's: the eval files read after "
                                               "the epochs named, AU with the training formulas on one evaluation"}
        for key, fc_ev in f.evaluation_at.items():
            ev_wl[key] = _evaluation_payload(fc_ev)
        wl["evaluation"] = ev_wl
    if f.checkpoint is not None:
        wl["checkpoint"] = _checkpoint_payload(f.checkpoint)
    return wl


def kvcache_payload(f: KvForecast) -> dict[str, Any]:
    """The `workload` section of plan perf --workload kvcache_N's document: the benchmark's four
    figures for one rank (and the write bandwidth), the load they come from, what limits them."""
    load, option = f.load, f.load.option
    return {
        "name": load.name, "source": f"storlab kvcache --option {option.number}", "kind": "kvcache",
        "option": option.record(),
        "load": {"users": load.concurrency, "mean_object_bytes": load.mean_object_bytes,
                 "memory_bytes": load.memory_bytes, "read_hit_memory": load.read_hit_memory,
                 "write_spill": load.write_spill, "read_objects_per_request": load.read_objects_per_request,
                 "write_objects_per_request": load.write_objects_per_request,
                 "read_bytes_per_request": load.read_bytes_per_request,
                 "write_bytes_per_request": load.write_bytes_per_request,
                 "generation_tokens_per_request": load.generation_tokens_per_request,
                 "sleep_s_per_request": load.sleep_s, "request_bytes": load.request_bytes},
        "read_bw_bytes": f.read_bw_bytes, "write_bw_bytes": f.write_bw_bytes, "read_p95_s": f.read_p95_s,
        "write_p95_s": f.write_p95_s, "tokens_per_s": plain(f.tokens_per_s), "requests_per_s": f.requests_per_s,
        "storage_s_per_request": f.storage_s_per_request, "storage_busy": f.storage_busy, "limiting": f.limiting,
        "assumptions": list(f.assumptions),
        "definition": "per rank, as storlab kvcache reports a rank: read_bw_bytes the storage tier's read bytes per "
                      "second, read_p95_s and write_p95_s one object's device time, tokens_per_s generated tokens "
                      "over the requests' summed storage time (docs/model.md, KV cache)",
    }


def recommend_payload(result: Any, needs: Any, dataset_size: str) -> dict[str, Any]:
    """plan recommend's document payload: the candidates, the Pareto set and the training need."""
    payload = {"candidates_considered": result.candidates_considered, "feasible": result.feasible,
               "note": result.note, "pareto": [dict(plain(c), layout=c.stack.raid.layout.text)
                                               for c in result.pareto]}
    if needs.training is not None:
        payload["workload"] = {"name": needs.training.name, "accelerators": needs.accelerators,
                               "au_threshold": needs.training.au_threshold, "dataset_size": dataset_size}
    if needs.kvcache is not None:
        payload["workload"] = {"name": needs.kvcache.name, "kind": "kvcache", "tokens_per_s": needs.tokens_per_s}
    return payload
