"""A training or checkpoint workload (the workload job of `storlab workload`: jobs/workload_job.py)
as the model's plain loads, and what the model forecasts for it on a stack: the accelerators fed,
the evaluation apart, a checkpoint's seconds (`plan perf --workload`, `plan recommend --workload`).
The loads mirror what the emulation does (suites/training/: the reader loop, the evaluation, the
checkpoint shards), so the forecast and a measured run describe the same I/O."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from ..jobs.kvcache_job import BUILTINS as KV_BUILTINS
from ..jobs.sample_bytes import jpeg_file_bytes, parquet_call_bytes, parquet_read_row_bytes
from ..jobs.workload import WorkloadSpec
from ..jobs.workload_job import builtins, load_workload
from .kvcache import WORKLOAD_PREFIX
from .predict import Device
from .stack import Stack
from .training import (
    AcceleratorPoint,
    CheckpointForecast,
    CheckpointLoad,
    EvaluationForecast,
    TrainingForecast,
    TrainingLoad,
    accelerators_fed,
    checkpoint_shard_bytes,
    checkpoint_writers,
    evaluation_load,
    predict_checkpoint,
    predict_evaluation,
    predict_training,
)

__all__ = ["workload_spec", "sample_read", "training_load", "workload_evaluation", "checkpoint_load", "WorkloadForecast",
           "forecast_workload", "DEFAULT_MAX_ACCELERATORS"]

# The bound of the accelerators-fed search when --max-accelerators is not given.
DEFAULT_MAX_ACCELERATORS = 4096


def workload_spec(name: str) -> tuple[WorkloadSpec, str]:
    """(spec, source) of the workload `storlab workload NAME|FILE` would run (its own loader and
    translator), for --workload."""
    if name not in builtins() and not name.endswith((".yaml", ".yml", ".toml")):
        raise UserError(f"--workload: {name!r} is not a built-in workload or a DLIO .yaml / storlab .toml file; "
                        f"built-ins: {', '.join(builtins())}; KV cache: "
                        + ", ".join(f"{WORKLOAD_PREFIX}{n}" for n in KV_BUILTINS))
    spec, _, source = load_workload(name)
    return spec, source


def sample_read(spec: WorkloadSpec) -> tuple[int, int]:
    """(bytes a sample costs the reader, bytes of a call carrying several samples or 0), as the
    emulation reads each format: a JPEG file whole (the bytes its record length encodes to; the
    record length when Pillow is not installed to encode one), a parquet row's read columns in
    column-chunk calls of a row group (or file), any other sample as its record length."""
    d = spec.dataset
    if d.format == "jpeg":
        return jpeg_file_bytes(d.record_length) or d.record_length, 0
    if d.format == "parquet":
        return parquet_read_row_bytes(d), parquet_call_bytes(d)
    return d.record_length, 0


def training_load(spec: WorkloadSpec, dataset_size: str) -> TrainingLoad:
    """What the workload's emulation reads (suites/training/training.py), as the model's plain figures."""
    d, r, t = spec.dataset, spec.reader, spec.train
    record, call = sample_read(spec)
    return TrainingLoad(spec.name, record, r.batch_size, t.computation_time, r.read_threads, r.prefetch,
                        r.transfer_size, d.samples, spec.au_threshold, file_per_sample=d.samples_per_file == 1,
                        shuffled=d.samples_per_file == 1 or r.sample_shuffle != "off",
                        total_training_steps=t.total_training_steps, rule_sized=dataset_size == "rule",
                        call_bytes=call)


def workload_evaluation(spec: WorkloadSpec, training: TrainingLoad) -> tuple[TrainingLoad, int]:
    """The workload's evaluation as the model's load (the training loop's evaluation: the eval
    files, the eval batch and compute) and the evaluations in a run of its epochs."""
    ev = spec.evaluation
    load = evaluation_load(training, batch=ev.batch_size, computation_s=ev.computation_time,
                           samples=spec.dataset.eval_files * spec.dataset.samples_per_file)
    return load, sum(1 for e in range(1, spec.train.epochs + 1) if spec.evaluates_after(e))


def checkpoint_load(spec: WorkloadSpec, accelerators: int) -> CheckpointLoad:
    """One checkpoint of the workload over `accelerators` ranks, sharded as the emulation's checkpoint does."""
    ck = spec.checkpoint
    writers = checkpoint_writers(ck.ranks, ck.ranks_total, accelerators)
    if ck.is_transformer:       # DLIO's ranks write unequal shares: the model takes their mean
        files = [ck.rank_file_bytes(g, writers) for g in range(writers)]
        return CheckpointLoad(spec.name, writers, max(1, sum(map(sum, files)) // writers),
                              max(1, round(sum(map(len, files)) / writers)), ck.fsync, ck.ranks_total)
    return CheckpointLoad(spec.name, writers, checkpoint_shard_bytes(ck.model_size + ck.optimizer_size, ck.ranks_total),
                          ck.files_per_rank, ck.fsync, ck.ranks_total)


@dataclass(frozen=True)
class WorkloadForecast:
    """What the model forecasts for a workload on a stack (or one bare device)."""
    spec: WorkloadSpec
    dataset_size: str                            # rule | as-written: the steps per epoch assumed
    accelerators: int | None                     # asked for (--accelerators), if any
    training: TrainingLoad | None = None         # a training workload's load
    fed: TrainingForecast | None = None          # the accelerators fed at the AU threshold
    at_accelerators: AcceleratorPoint | None = None   # the training at `accelerators`
    evaluation: TrainingLoad | None = None       # the evaluation's load, apart from training's
    evaluations_per_run: int = 0
    # "at_fed" (and "at_accelerators") -> the evaluation forecast there; one object where both agree
    evaluation_at: dict[str, EvaluationForecast] = field(default_factory=dict)
    checkpoint_ranks: int | None = None          # the ranks a checkpoint is forecast over
    checkpoint: CheckpointForecast | None = None


def forecast_workload(spec: WorkloadSpec, stack: Stack | None, devices: list[Device] | None, *,
                      accelerators: int | None, dataset_size: str, max_accelerators: int | None,
                      mirror_read: str) -> WorkloadForecast:
    """The accelerators the stack feeds (with the evaluation apart), or a checkpoint's write and read."""
    kw: dict[str, Any] = dict(mirror_read=mirror_read)
    load = fc = at = ev_load = None
    count = 0
    evaluation_at: dict[str, EvaluationForecast] = {}
    if spec.train_enabled:
        load = training_load(spec, dataset_size)
        fc = accelerators_fed(stack, load, devices, max_accelerators=max_accelerators or DEFAULT_MAX_ACCELERATORS,
                              **kw)
        if accelerators is not None:
            at = predict_training(stack, load, accelerators, devices, **kw)
        if spec.evaluation.enabled:
            ev_load, count = workload_evaluation(spec, load)
            points = {"at_fed": max(1, fc.fed), **({"at_accelerators": accelerators} if accelerators is not None else {})}
            by_count: dict[int, EvaluationForecast] = {}
            for key, n in points.items():
                if n not in by_count:
                    by_count[n] = predict_evaluation(stack, ev_load, n, count, devices, **kw)
                evaluation_at[key] = by_count[n]
    ranks = ck = None
    if spec.checkpoint.enabled:
        ranks = accelerators or (fc.fed if fc is not None and fc.fed else None) \
            or spec.checkpoint.ranks_total or spec.accelerators
        ck = predict_checkpoint(stack, checkpoint_load(spec, ranks), devices, **kw)
    return WorkloadForecast(spec, dataset_size, accelerators, load, fc, at, ev_load, count, evaluation_at, ranks, ck)
