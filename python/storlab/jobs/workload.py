"""storlab's own AI-training and checkpoint workload job: the TOML shape, its validation, and the
MLPerf Storage dataset-size rule.

A training workload does not fit the I/O job's `[[phase]]` shape (it has a dataset, a reader
pipeline, a compute time per batch and checkpoints), so it has its own tables, which
`storlab workload FILE.toml` reads and which a DLIO YAML translates into (jobs/dlio/):

    [workload]    name, au_threshold, accelerator (the profile emulated: b200, mi355, h100, a100),
                  accelerators (per process), seed, train (run the epochs),
                  generate (DLIO's generate_data: with train and checkpoint off, only generate
                  the dataset, as `mlpstorage training datagen`)
    [dataset]     folder, format, files, samples_per_file, record_length, record_length_stdev,
                  record_length_resize, file_size, subfolders, file_prefix, eval_files, eval_subfolders
    [dataset.parquet]  a parquet dataset's row_group_size, read_mode and columns (name, dtype,
                  size = values per row, read = whether the reader reads the column); a row's bytes
                  are the record_length
    [reader]      batch_size, read_threads, prefetch, file_shuffle, sample_shuffle, transfer_size
    [train]       epochs, computation_time, computation_time_stdev, total_training_steps,
                  seed_change_epoch, drop_cache
    [evaluation]  enabled, batch_size, computation_time, computation_time_stdev, after_epoch,
                  epochs_between (DLIO's evaluation: the eval files read after training epochs)
    [checkpoint]  enabled, folder, model_size, optimizer_size, ranks ("all" | "zero"), ...
    [checkpoint.transformer]  a transformer's shape and parallelism (DLIO's `model:` section):
                  the checkpoint's files and bytes per rank follow DLIO's rules
                  (jobs/checkpoint_layout.py) instead of model_size + optimizer_size
    [storage]     how an object store is reached when dataset.folder or checkpoint.folder is an
                  s3://BUCKET/PREFIX URL: endpoint (comma-separated for several), insecure,
                  virtual_host, library (the client library a DLIO config named; recorded only).
                  Credentials are never here: they are found as the AWS CLI finds them.

Every value is checked here; a bad one is a `WorkloadError` naming the field (`dataset.files`)
and what is allowed. Nothing here touches the disk.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from ..errors import UserError
from . import mlperf_v3
from .checkpoint_layout import TransformerSpec, check_transformer, rank_files

__all__ = ["WorkloadError", "StorageSpec", "is_object_url", "ParquetSpec", "ParquetColumn", "DatasetSpec",
           "ReaderSpec", "TrainSpec", "EvalSpec", "CheckpointSpec", "WorkloadSpec", "FORMATS", "PARQUET_DTYPES",
           "SHUFFLES", "spec_from_table", "dataset_size_rule", "TABLES", "OBJECT_LIBRARIES"]

FORMATS = ("npz", "npy", "hdf5", "tfrecord", "indexed_binary", "jpeg", "parquet")
# a parquet column's value types and their bytes (MLPerf Storage v3.0's dlrm and flux columns)
PARQUET_DTYPES = {"int8": 1, "uint8": 1, "int16": 2, "float16": 2, "int32": 4, "float32": 4, "int64": 8,
                  "float64": 8}
# row_group: a sample's row group is read (then kept); default: the whole file's read columns at once
PARQUET_READ_MODES = ("row_group", "default")
PARQUET_COMPRESSIONS = ("none", "snappy", "gzip", "zstd", "lz4")
SHUFFLES = ("off", "seed", "random")
CHECKPOINT_RANKS = ("all", "zero")
TABLES = ("workload", "dataset", "reader", "train", "evaluation", "checkpoint", "storage")
OBJECT_SCHEME = "s3://"
# the client libraries MLPerf Storage v3.0's object configs name; storlab's own S3 client does the requests
OBJECT_LIBRARIES = ("s3dlio", "minio", "s3torchconnector")

# MLPerf Storage's dataset rule (Rules §3.1.2)
HOST_MEMORY_MULTIPLIER = mlperf_v3.HOST_MEMORY_MULTIPLIER
RULE_STEPS_PER_EPOCH = mlperf_v3.STEPS_PER_EPOCH


class WorkloadError(UserError):
    """A workload value storlab cannot use; one line naming the field and what is allowed."""


@dataclass
class ParquetColumn:
    """One column of a parquet dataset: `size` values of `dtype` per row; `read` says whether the
    reader reads it (DLIO's selective column read)."""
    name: str = "data"
    dtype: str = "uint8"
    size: int = 1
    read: bool = True

    @property
    def row_bytes(self) -> int:
        return self.size * PARQUET_DTYPES[self.dtype]


@dataclass
class ParquetSpec:
    """A parquet dataset's shape: rows (samples) grouped row_group_size at a time, read a row
    group at a time (read_mode row_group), of these columns. No columns: one uint8 column of
    record_length values per row."""
    row_group_size: int = 1024
    read_mode: str = "row_group"
    compression: str = "none"
    columns: list[ParquetColumn] = field(default_factory=list)

    def columns_for(self, record_length: int) -> list[ParquetColumn]:
        return self.columns or [ParquetColumn("data", "uint8", record_length, True)]


@dataclass
class DatasetSpec:
    folder: str = "data/default"
    format: str = "npz"
    files: int = 8
    samples_per_file: int = 1
    record_length: int = 65536           # bytes, mean
    record_length_stdev: int = 0
    record_length_resize: int = 0        # DLIO's decoded size: recorded, changes no byte read
    file_size: int = 0                   # bytes of samples a file holds at most (0 = no bound); given
                                         # without samples_per_file, it sets samples_per_file
    subfolders: int = 0
    file_prefix: str = "img"
    seed: int = 10                       # content and size seed of the generator (DLIO: 10)
    eval_files: int = 0                  # files of the evaluation set (FOLDER/valid/), as the training files
    eval_subfolders: int = 0
    parquet: ParquetSpec = field(default_factory=ParquetSpec)   # format parquet only

    @property
    def samples(self) -> int:
        return self.files * self.samples_per_file

    @property
    def nominal_bytes(self) -> int:
        return self.samples * self.record_length


@dataclass
class ReaderSpec:
    batch_size: int = 1
    read_threads: int = 1                # per accelerator; 0 = the accelerator reads itself
    prefetch: int = 2                    # batches read ahead of the consumer (DLIO's prefetch_size)
    file_shuffle: str = "off"
    sample_shuffle: str = "off"
    transfer_size: int = 0               # bytes per read call; 0 = one call per sample


@dataclass
class TrainSpec:
    epochs: int = 1
    computation_time: float = 0.0        # seconds per batch
    computation_time_stdev: float = 0.0
    total_training_steps: int = 0        # 0 = every sample once per epoch
    seed_change_epoch: bool = True
    drop_cache: str = "auto"             # auto (when the dataset is below the rule) | always | never


@dataclass
class EvalSpec:
    """DLIO's evaluation: after epoch after_epoch and every epochs_between epochs, each
    accelerator reads its share of the eval files in batches of batch_size and sleeps
    computation_time per batch (DLIO's eval_time), with no barrier between steps."""
    enabled: bool = False
    batch_size: int = 1
    computation_time: float = 0.0
    computation_time_stdev: float = 0.0
    after_epoch: int = 1
    epochs_between: int = 1


@dataclass
class CheckpointSpec:
    enabled: bool = False
    folder: str = "checkpoints"
    model_size: int = 0                  # bytes of model state in total
    optimizer_size: int = 0              # bytes of optimizer state in total
    ranks: str = "all"                   # all = every rank writes its shard; zero = rank 0 only
    ranks_total: int = 0                 # ranks the checkpoint is sharded over (0 = the writers);
                                         # fewer writers write their share only (MLPerf's subset mode)
    after_epoch: int = 0                 # first checkpoint after this epoch (0 = only steps_between)
    epochs_between: int = 1
    steps_between: int = 0               # a checkpoint every N steps (0 = off)
    count_write: int = 1                 # `storlab workload --checkpoint-only`: writes
    count_read: int = 1                  # and read-backs (after a cache drop)
    files_per_rank: int = 1
    fsync: bool = True
    scale: float = 1.0                   # a transformer checkpoint's bytes x this (--scale, a trial)
    transformer: TransformerSpec = field(default_factory=TransformerSpec)   # num_layers 0: none

    @property
    def is_transformer(self) -> bool:
        return self.transformer.num_layers > 0

    def world(self, writers: int) -> int:
        """The ranks the checkpoint is laid out over: ranks_total, or the writers of this run (a
        transformer's world must hold whole TP x PP groups, as DLIO requires of its processes)."""
        world = self.ranks_total or writers
        mp = self.transformer.model_parallelism
        if self.is_transformer and world % mp:
            raise WorkloadError(f"checkpoint.ranks_total: 0 makes the world this run's {writers} writer(s), not a "
                                f"multiple of tensor x pipeline parallelism = {mp}; set checkpoint.ranks_total to a "
                                f"multiple of {mp} (or run a multiple of {mp} accelerators)")
        return world

    def rank_file_bytes(self, rank: int, writers: int) -> list[int]:
        """Bytes of each file rank `rank` writes: a transformer's DLIO files (scaled), or its
        even share of model_size + optimizer_size in files_per_rank files."""
        if self.is_transformer:
            return [max(1, round(b * self.scale)) for _, b in rank_files(self.transformer, rank, self.world(writers))]
        total = self.model_size + self.optimizer_size
        share = total // self.ranks_total if self.ranks_total else total
        base, extra = divmod(share, self.files_per_rank)
        return [base + (1 if j < extra else 0) for j in range(self.files_per_rank)]


@dataclass
class StorageSpec:
    """How the object store of an s3:// dataset or checkpoint folder is reached (no credentials:
    those come from the environment, as the AWS CLI finds them)."""
    endpoint: str = ""                   # http(s)://HOST[:PORT], comma-separated; "" = AWS_ENDPOINT_URL(_S3) or AWS's
    insecure: bool = False               # no TLS certificate check (a self-signed test server)
    virtual_host: bool = False           # BUCKET.HOST addressing instead of HOST/BUCKET
    library: str = ""                    # the library a DLIO config named (recorded; storlab's client runs)

    @property
    def is_default(self) -> bool:
        return self == StorageSpec()


def is_object_url(folder: str) -> bool:
    """Whether a dataset or checkpoint folder names objects (s3://BUCKET/PREFIX) rather than a path."""
    return folder.startswith(OBJECT_SCHEME)


@dataclass
class WorkloadSpec:
    name: str = "workload"
    au_threshold: float = 0.9
    accelerator: str = ""                # the accelerator profile emulated (b200, mi355, h100, a100; "" unnamed)
    accelerators: int = 1                # emulated per process (MPI ranks multiply it)
    seed: int = 123                      # shuffle seed
    dataset: DatasetSpec = field(default_factory=DatasetSpec)
    reader: ReaderSpec = field(default_factory=ReaderSpec)
    train: TrainSpec = field(default_factory=TrainSpec)
    evaluation: EvalSpec = field(default_factory=EvalSpec)
    checkpoint: CheckpointSpec = field(default_factory=CheckpointSpec)
    storage: StorageSpec = field(default_factory=StorageSpec)
    train_enabled: bool = True
    generate: bool = False               # DLIO's workflow.generate_data (alone: a datagen run)
    scaled: dict[str, Any] = field(default_factory=dict)  # what --scale changed, from what

    def to_table(self) -> dict[str, Any]:
        """The TOML job shape (reads back with spec_from_table)."""
        d = asdict(self)
        top = {k: d[k] for k in ("name", "au_threshold", "accelerators", "seed")}
        if self.accelerator:
            top["accelerator"] = self.accelerator
        top["train"] = self.train_enabled
        if self.generate:
            top["generate"] = True
        if not self.checkpoint.is_transformer:
            del d["checkpoint"]["transformer"]
        if self.dataset.format != "parquet":
            del d["dataset"]["parquet"]
        out = {"workload": top, "dataset": d["dataset"], "reader": d["reader"], "train": d["train"],
               "evaluation": d["evaluation"], "checkpoint": d["checkpoint"]}
        if not self.storage.is_default:
            out["storage"] = d["storage"]
        return out

    @property
    def mode(self) -> str:
        """What a run does: training (epochs, checkpoints among them), checkpoint (writes and
        read-backs only), or generate (the dataset only)."""
        if self.train_enabled:
            return "training"
        return "checkpoint" if self.checkpoint.enabled else "generate"

    def steps_per_epoch(self, accelerators_total: int) -> int:
        """DLIO's steps per epoch: floor(samples / batch / accelerators), capped by
        total_training_steps when that is set."""
        steps = self.dataset.samples // self.reader.batch_size // max(1, accelerators_total)
        if self.train.total_training_steps > 0:
            steps = min(steps, self.train.total_training_steps)
        return steps

    def eval_steps(self, accelerators_total: int) -> int:
        """DLIO's steps per evaluation: floor(eval files x samples per file / eval batch / accelerators)."""
        samples = self.dataset.eval_files * self.dataset.samples_per_file
        return samples // self.evaluation.batch_size // max(1, accelerators_total)

    def evaluates_after(self, epoch: int) -> bool:
        """Whether an evaluation follows this training epoch (DLIO: epoch >= eval_after_epoch,
        then every epochs_between_evals)."""
        e = self.evaluation
        return e.enabled and epoch >= e.after_epoch and (epoch - e.after_epoch) % e.epochs_between == 0


_SECTIONS = {"dataset": DatasetSpec, "reader": ReaderSpec, "train": TrainSpec, "evaluation": EvalSpec,
             "checkpoint": CheckpointSpec, "storage": StorageSpec}
_TOP = {"name": str, "au_threshold": float, "accelerator": str, "accelerators": int, "seed": int, "train": bool, "generate": bool}


def _typed(where: str, value: Any, want: type) -> Any:
    if want is bool:
        if isinstance(value, bool):
            return value
        raise WorkloadError(f"{where}: {value!r} is not allowed; use true or false")
    if want is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or isinstance(value, float) and not value.is_integer():
            raise WorkloadError(f"{where}: {value!r} is not allowed; use a whole number")
        return int(value)
    if want is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise WorkloadError(f"{where}: {value!r} is not allowed; use a number")
        return float(value)
    if not isinstance(value, str):
        raise WorkloadError(f"{where}: {value!r} is not allowed; use a string")
    return value


def spec_from_table(table: Mapping[str, Any], source: str = "workload") -> WorkloadSpec:
    """A validated WorkloadSpec from the TOML job shape; unknown tables or keys are refused."""
    spec = WorkloadSpec()
    for key in table:
        if key not in TABLES:
            raise WorkloadError(f"{source}: [{key}] is not a workload table; allowed: {', '.join(TABLES)}")
    for key, value in (table.get("workload") or {}).items():
        if key not in _TOP:
            raise WorkloadError(f"{source}: workload.{key} is not a key; allowed: {', '.join(_TOP)}")
        v = _typed(f"workload.{key}", value, _TOP[key])
        if key == "train":
            spec.train_enabled = v
        else:
            setattr(spec, key, v)
    for section, cls in _SECTIONS.items():
        target = getattr(spec, section)
        fields = cls.__dataclass_fields__
        for key, value in (table.get(section) or {}).items():
            if key not in fields:
                raise WorkloadError(f"{source}: {section}.{key} is not a key; allowed: {', '.join(fields)}")
            if section == "checkpoint" and key == "transformer":
                target.transformer = _transformer(value, source)
                continue
            if section == "dataset" and key == "parquet":
                target.parquet = _parquet(value, source)
                continue
            want = {"int": int, "float": float, "str": str, "bool": bool}[str(fields[key].type)]
            setattr(target, key, _typed(f"{section}.{key}", value, want))
    d = spec.dataset
    if d.file_size > 0 and "samples_per_file" not in (table.get("dataset") or {}) and 0 < d.record_length <= d.file_size:
        d.samples_per_file = d.file_size // d.record_length
    validate(spec)
    return spec


def _transformer(table: Any, source: str) -> TransformerSpec:
    """[checkpoint.transformer] as a TransformerSpec (keys typed; checked in validate)."""
    if not isinstance(table, Mapping):
        raise WorkloadError(f"checkpoint.transformer: {table!r} is not allowed; use a table of "
                            f"{', '.join(TransformerSpec.__dataclass_fields__)}")
    t = TransformerSpec()
    fields = TransformerSpec.__dataclass_fields__
    for key, value in table.items():
        if key not in fields:
            raise WorkloadError(f"{source}: checkpoint.transformer.{key} is not a key; allowed: {', '.join(fields)}")
        want = {"int": int, "str": str}[str(fields[key].type)]
        setattr(t, key, _typed(f"checkpoint.transformer.{key}", value, want))
    return t


def _parquet(table: Any, source: str) -> ParquetSpec:
    """[dataset.parquet] as a ParquetSpec (keys typed; values checked in validate)."""
    if not isinstance(table, Mapping):
        raise WorkloadError(f"dataset.parquet: {table!r} is not allowed; use a table of "
                            f"{', '.join(ParquetSpec.__dataclass_fields__)}")
    p = ParquetSpec()
    for key, value in table.items():
        if key == "columns":
            if not isinstance(value, list):
                raise WorkloadError("dataset.parquet.columns: use a list of tables of "
                                    f"{', '.join(ParquetColumn.__dataclass_fields__)}")
            p.columns = [_parquet_column(i, c, source) for i, c in enumerate(value)]
        elif key == "row_group_size":
            p.row_group_size = _typed("dataset.parquet.row_group_size", value, int)
        elif key in ("read_mode", "compression"):
            setattr(p, key, _typed(f"dataset.parquet.{key}", value, str))
        else:
            raise WorkloadError(f"{source}: dataset.parquet.{key} is not a key; allowed: "
                                f"{', '.join(ParquetSpec.__dataclass_fields__)}")
    return p


def _parquet_column(i: int, table: Any, source: str) -> ParquetColumn:
    where = f"dataset.parquet.columns[{i}]"
    fields = ParquetColumn.__dataclass_fields__
    if not isinstance(table, Mapping):
        raise WorkloadError(f"{where}: {table!r} is not allowed; use a table of {', '.join(fields)}")
    c = ParquetColumn()
    for key, value in table.items():
        if key not in fields:
            raise WorkloadError(f"{source}: {where}.{key} is not a key; allowed: {', '.join(fields)}")
        want = {"int": int, "str": str, "bool": bool}[str(fields[key].type)]
        setattr(c, key, _typed(f"{where}.{key}", value, want))
    return c


def _check_parquet(d: DatasetSpec) -> None:
    """A parquet dataset's columns and row groups; its rows must be record_length bytes."""
    p = d.parquet
    _positive("dataset.parquet.row_group_size", p.row_group_size)
    if p.read_mode not in PARQUET_READ_MODES:
        raise WorkloadError(f"dataset.parquet.read_mode: {p.read_mode!r} is not allowed; use one of: "
                            f"{', '.join(PARQUET_READ_MODES)}")
    if p.compression not in PARQUET_COMPRESSIONS:
        raise WorkloadError(f"dataset.parquet.compression: {p.compression!r} is not allowed; use one of: "
                            f"{', '.join(PARQUET_COMPRESSIONS)}")
    names = set()
    for i, c in enumerate(p.columns):
        where = f"dataset.parquet.columns[{i}]"
        if not c.name or c.name in names:
            raise WorkloadError(f"{where}.name: {c.name!r} is not allowed; use a name no other column has")
        names.add(c.name)
        if c.dtype not in PARQUET_DTYPES:
            raise WorkloadError(f"{where}.dtype: {c.dtype!r} is not allowed; use one of: {', '.join(PARQUET_DTYPES)}")
        _positive(f"{where}.size", c.size)
    if d.record_length_stdev:
        raise WorkloadError(f"dataset.record_length_stdev: {d.record_length_stdev} is not allowed with format parquet; "
                            "use 0 (a parquet row is its columns' bytes)")
    if p.columns:
        row = sum(c.row_bytes for c in p.columns)
        if row != d.record_length:
            raise WorkloadError(f"dataset.record_length: {d.record_length} is not the {row} bytes a row of "
                                "dataset.parquet.columns holds (size x dtype bytes summed); use "
                                f"{row}, or change the columns")
        if not any(c.read for c in p.columns):
            raise WorkloadError("dataset.parquet.columns: no column has read = true; the reader would read nothing")


def _positive(where: str, value: float, allow_zero: bool = False) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        raise WorkloadError(f"{where}: {value!r} is not allowed; use a number {'>= 0' if allow_zero else '> 0'}")


def validate(spec: WorkloadSpec) -> WorkloadSpec:
    """Refuse what cannot run, naming the field."""
    d, r, t, c = spec.dataset, spec.reader, spec.train, spec.checkpoint
    if not spec.name or not all(ch.isalnum() or ch in "_-." for ch in spec.name):
        raise WorkloadError(f"workload.name: {spec.name!r} is not allowed; use letters, digits, '_', '-', '.'")
    if not 0 < spec.au_threshold <= 1:
        raise WorkloadError(f"workload.au_threshold: {spec.au_threshold!r} is not allowed; use a fraction in (0, 1]")
    _positive("workload.accelerators", spec.accelerators)
    if spec.accelerator and spec.accelerator not in mlperf_v3.ACCELERATORS:
        raise WorkloadError(f"workload.accelerator: {spec.accelerator!r} is not allowed; use one of: "
                            f"{', '.join(mlperf_v3.ACCELERATORS)} (or leave it out)")
    if d.format not in FORMATS:
        raise WorkloadError(f"dataset.format: {d.format!r} is not allowed; use one of: {', '.join(FORMATS)}")
    _positive("dataset.files", d.files)
    _positive("dataset.samples_per_file", d.samples_per_file)
    _positive("dataset.record_length", d.record_length)
    _positive("dataset.record_length_stdev", d.record_length_stdev, allow_zero=True)
    _positive("dataset.record_length_resize", d.record_length_resize, allow_zero=True)
    _positive("dataset.subfolders", d.subfolders, allow_zero=True)
    _positive("dataset.file_size", d.file_size, allow_zero=True)
    _fits_file(d)
    if d.format == "parquet":
        _check_parquet(d)
    if d.format == "jpeg" and d.samples_per_file != 1:
        raise WorkloadError(f"dataset.samples_per_file: {d.samples_per_file} is not allowed with format jpeg; use 1 "
                            "(a JPEG file holds one image, as DLIO writes it)")
    if not d.folder:
        raise WorkloadError("dataset.folder: an empty path is not allowed; name a folder")
    _check_place("dataset.folder", d.folder)
    if not d.file_prefix or "/" in d.file_prefix or d.file_prefix.startswith("."):
        raise WorkloadError(f"dataset.file_prefix: {d.file_prefix!r} is not allowed; use a plain file-name prefix")
    _positive("reader.batch_size", r.batch_size)
    _positive("reader.read_threads", r.read_threads, allow_zero=True)
    _positive("reader.prefetch", r.prefetch)
    _positive("reader.transfer_size", r.transfer_size, allow_zero=True)
    for key in ("file_shuffle", "sample_shuffle"):
        if getattr(r, key) not in SHUFFLES:
            raise WorkloadError(f"reader.{key}: {getattr(r, key)!r} is not allowed; use one of: {', '.join(SHUFFLES)}")
    _positive("train.epochs", t.epochs)
    _positive("train.computation_time", t.computation_time, allow_zero=True)
    _positive("train.computation_time_stdev", t.computation_time_stdev, allow_zero=True)
    _positive("train.total_training_steps", t.total_training_steps, allow_zero=True)
    _positive("dataset.eval_files", d.eval_files, allow_zero=True)
    _positive("dataset.eval_subfolders", d.eval_subfolders, allow_zero=True)
    ev = spec.evaluation
    if ev.enabled and spec.train_enabled:
        if d.eval_files <= 0:
            raise WorkloadError("dataset.eval_files: 0 is not allowed with evaluation on; use a number of files > 0")
        _positive("evaluation.batch_size", ev.batch_size)
        _positive("evaluation.computation_time", ev.computation_time, allow_zero=True)
        _positive("evaluation.computation_time_stdev", ev.computation_time_stdev, allow_zero=True)
        _positive("evaluation.after_epoch", ev.after_epoch)
        _positive("evaluation.epochs_between", ev.epochs_between)
        if spec.eval_steps(spec.accelerators) < 1:
            raise WorkloadError(
                f"evaluation.batch_size: {ev.batch_size} x {spec.accelerators} accelerator(s) needs more samples than "
                f"the {d.eval_files * d.samples_per_file} of the eval files (dataset.eval_files x "
                "dataset.samples_per_file); not one evaluation step")
    if t.drop_cache not in ("auto", "always", "never"):
        raise WorkloadError(f"train.drop_cache: {t.drop_cache!r} is not allowed; use one of: auto, always, never")
    if not spec.train_enabled and not c.enabled and not spec.generate:
        raise WorkloadError("workload.train: false runs nothing with checkpoint and generate off; use true, "
                            "or checkpoint.enabled or workload.generate")
    if c.enabled:
        if c.is_transformer:
            _check_transformer_checkpoint(c)
        elif c.model_size + c.optimizer_size <= 0:
            raise WorkloadError("checkpoint.model_size: 0 is not allowed with checkpointing on; use a size in bytes > 0")
        _positive("checkpoint.model_size", c.model_size, allow_zero=True)
        _positive("checkpoint.optimizer_size", c.optimizer_size, allow_zero=True)
        if c.ranks not in CHECKPOINT_RANKS:
            raise WorkloadError(f"checkpoint.ranks: {c.ranks!r} is not allowed; use one of: {', '.join(CHECKPOINT_RANKS)}")
        _positive("checkpoint.files_per_rank", c.files_per_rank)
        _positive("checkpoint.ranks_total", c.ranks_total, allow_zero=True)
        _positive("checkpoint.count_write", c.count_write, allow_zero=True)
        _positive("checkpoint.count_read", c.count_read, allow_zero=True)
        _positive("checkpoint.epochs_between", c.epochs_between)
        _positive("checkpoint.steps_between", c.steps_between, allow_zero=True)
        if not c.folder:
            raise WorkloadError("checkpoint.folder: an empty path is not allowed; name a folder")
        _check_place("checkpoint.folder", c.folder)
    _check_storage(spec)
    if spec.train_enabled and spec.steps_per_epoch(spec.accelerators) < 1:
        raise WorkloadError(
            f"reader.batch_size: {r.batch_size} x {spec.accelerators} accelerator(s) needs more samples than the "
            f"dataset's {d.samples} (dataset.files x dataset.samples_per_file); not one step per epoch")
    return spec


_BUCKET = re.compile(r"^[a-z0-9._-]{3,63}$")


def _check_place(where: str, folder: str) -> None:
    """A folder is a local path or s3://BUCKET[/PREFIX] (the engine's URL rule, remote/s3_config.rs);
    another scheme (az://, gs://, file://) is refused."""
    scheme = folder.split("://", 1)[0] if "://" in folder else ""
    if scheme and not is_object_url(folder):
        raise WorkloadError(f"{where}: {folder!r} is not allowed; use a local path or s3://BUCKET/PREFIX "
                            f"(storlab reaches S3 and S3-compatible object stores only)")
    if not scheme:
        return
    bucket, _, prefix = folder[len(OBJECT_SCHEME):].partition("/")
    if not _BUCKET.match(bucket):
        raise WorkloadError(f"{where}: {folder!r} names bucket {bucket!r}; a bucket name is 3 to 63 lowercase letters, "
                            "digits, '.', '-' (form s3://BUCKET/PREFIX)")
    parts = prefix.rstrip("/").split("/") if prefix.rstrip("/") else []
    if any(p in ("", ".", "..") for p in parts) or any(c in prefix for c in "?#"):
        raise WorkloadError(f"{where}: {folder!r} has an empty, '.' or '..' part or a query; the form is "
                            "s3://BUCKET/PREFIX")


def _check_storage(spec: WorkloadSpec) -> None:
    s = spec.storage
    for endpoint in filter(None, (e.strip() for e in s.endpoint.split(","))):
        rest = endpoint.split("://", 1)[1] if endpoint.startswith(("http://", "https://")) else None
        if rest is None or not rest.rstrip("/") or any(c in rest.rstrip("/") for c in "/?#@ "):
            shown = endpoint.split("@")[-1] if "@" in endpoint else endpoint
            raise WorkloadError(f"storage.endpoint: {shown!r} is not allowed; use http://HOST[:PORT] or "
                                "https://HOST[:PORT], several separated by commas")
    if s.library and s.library not in OBJECT_LIBRARIES:
        raise WorkloadError(f"storage.library: {s.library!r} is not allowed; use one of: {', '.join(OBJECT_LIBRARIES)} "
                            "(recorded only: storlab's own S3 client makes the requests)")


def _check_transformer_checkpoint(c: CheckpointSpec) -> None:
    """A transformer's checkpoint: its shape as DLIO accepts it, sizes from the shape only, and a
    world of whole model-parallel groups (DLIO: processes a multiple of TP x PP)."""
    check_transformer(c.transformer, WorkloadError)
    for key in ("model_size", "optimizer_size"):
        if getattr(c, key):
            raise WorkloadError(f"checkpoint.{key}: {getattr(c, key)} is not allowed with [checkpoint.transformer]; "
                                "use 0 (the transformer's shape gives the sizes)")
    if c.ranks != "all":
        raise WorkloadError(f"checkpoint.ranks: {c.ranks!r} is not allowed with [checkpoint.transformer]; use all "
                            "(DLIO's ZeRO rules decide which ranks write)")
    if c.files_per_rank != 1:
        raise WorkloadError(f"checkpoint.files_per_rank: {c.files_per_rank} is not allowed with [checkpoint.transformer]; "
                            "use 1 (DLIO's layout decides each rank's files)")
    if not 0 < c.scale <= 1:
        raise WorkloadError(f"checkpoint.scale: {c.scale!r} is not allowed; use a fraction in (0, 1]")
    mp = c.transformer.model_parallelism
    if c.ranks_total % mp:
        raise WorkloadError(f"checkpoint.ranks_total: {c.ranks_total} is not allowed; use a multiple of tensor x "
                            f"pipeline parallelism = {mp} (DP = ranks_total / {mp})")


def _fits_file(d: DatasetSpec) -> None:
    """A record longer than the file that holds it, or more records than fit, is refused (with
    dataset.file_size set; without it a file is exactly samples_per_file records)."""
    if d.file_size <= 0:
        return
    if d.record_length > d.file_size:
        raise WorkloadError(f"dataset.record_length: {d.record_length} is over dataset.file_size {d.file_size}; "
                            f"use 1..{d.file_size} bytes (or a larger dataset.file_size)")
    most = d.file_size // d.record_length
    if d.samples_per_file > most:
        raise WorkloadError(f"dataset.samples_per_file: {d.samples_per_file} records of {d.record_length} B are "
                            f"over dataset.file_size {d.file_size}; use 1..{most}")


def dataset_size_rule(spec: WorkloadSpec, accelerators_total: int, client_memory_bytes: int) -> dict[str, Any]:
    """MLPerf Storage's minimum dataset: max(5 x client memory, 500 steps x batch x accelerators
    samples), in files of samples_per_file; with whether this dataset meets it."""
    d = spec.dataset
    min_samples_steps = RULE_STEPS_PER_EPOCH * spec.reader.batch_size * accelerators_total
    min_samples_memory = math.ceil(HOST_MEMORY_MULTIPLIER * client_memory_bytes / d.record_length)
    min_samples = max(min_samples_steps, min_samples_memory)
    min_files = math.ceil(min_samples / d.samples_per_file)
    return {"rule": "files >= max(5 x client memory / record_length, 500 x batch x accelerators) / samples_per_file",
            "client_memory_bytes": client_memory_bytes, "accelerators": accelerators_total,
            "min_samples_steps": min_samples_steps, "min_samples_memory": min_samples_memory,
            "min_files": min_files, "min_bytes": min_samples * d.record_length,
            "files": d.files, "compliant": d.files >= min_files}
