"""DLIO workload YAML (dlio_benchmark/configs/workload/*.yaml, MLPerf Storage's configs) as a
storlab workload job.

Every key DLIO 2.0 reads from a workload file is in KEYS with what it becomes: a storlab workload
key (`translated`), nothing that changes a byte storlab reads (`accepted`, the note says why),
or a refusal (a `Refusal` naming the file, line, key and value). A key DLIO does not know is
refused too. MLPerf Storage v2.0's renamed keys (record_length_bytes, ...) and its `model:`
mapping are read as well, and v3.0's: JPEG and parquet datasets (`dataset.parquet`: row groups,
columns and which of them are read). v3.0's object-storage keys (storage_type s3 or object,
storage_root = the bucket, storage_options.endpoint_url, endpoint_uris, storage_library s3dlio,
minio or s3torchconnector; under `storage:` or `reader:`) become s3://BUCKET/PREFIX folders and a
[storage] table (`_object_storage`): the dataset folder and a relative checkpoint folder are
prefixes under the root; what storlab cannot reach (az://, gs://, other protocols, credentials
written in the file) is refused in one line naming the key. The vector-database benchmark's
configs are refused whole (they need a Milvus server). A file named WORKLOAD_ACCELERATOR.yaml (unet3d_b200.yaml) names the
accelerator it is written for (`workload.accelerator`). `++workload.KEY=VALUE` overrides
(DLIO's Hydra syntax) are applied before translation with `overrides`.
"""
from __future__ import annotations

import math
import os
import re
from typing import Any, Callable

from ..mlperf_v3 import accelerator_of_name
from ..translation import Mapped, Refusal, Translation, sha256_of
from ..workload import FORMATS, OBJECT_LIBRARIES, PARQUET_DTYPES, WorkloadError, spec_from_table

FORMAT = "dlio"
MAX_YAML_BYTES = 1 << 20

__all__ = ["FORMAT", "translate", "translate_text", "KEYS", "WorkloadTranslation", "transformer_note", "world_given"]


class WorkloadTranslation(Translation):
    """A translation whose job is a workload job: its TOML runs with `storlab workload`."""

    def resolve(self, cli_values=None):
        """storlab's validated workload (a WorkloadSpec; `storlab workload` flags apply on top)."""
        return spec_from_table(self.job, source=os.path.basename(self.source))

    def to_toml(self) -> str:
        return super().to_toml().replace("# run it with: storlab run THIS_FILE",
                                         "# run it with: storlab workload THIS_FILE", 1)

_DLIO_IGNORES = "DLIO 2.0 does not read this key (ignored, as DLIO ignores it)"

# DLIO value -> storlab value converters
_SHUFFLE = {"off": "off", "seed": "seed", "random": "random", False: "off", True: "seed"}
_CKPT_TYPE = {"all_ranks": "all", "rank_zero": "zero"}
_DLIO_FORMATS_REFUSED = {"csv", "png", "synthetic", "hdf5_opt"}
# the storage keys of MLPerf Storage v3.0's configs, under `storage:` or `reader:` (s3dlio, minio,
# s3torchconnector): read by _object_storage before the other keys
_OBJECT_NAMES = ("storage_type", "storage_root", "storage_library", "protocol", "storage_options", "endpoint_uris",
                 "load_balance_strategy", "use_mpi_endpoint_distribution", "data_loader_root")
_OBJECT_TYPES = ("s3", "object", "s3dlio")          # storage_type values that mean objects (s3dlio: by its root)
_LOCAL_TYPES = ("local_fs", "file", "posix")
_NOT_REACHED = "storlab reaches S3 and S3-compatible object stores (s3://) and local file systems only"
# top-level keys of MLPerf Storage's vector-database benchmark configs (vdb_benchmark)
_VDB_KEYS = ("database", "index", "backend", "search", "ground_truth", "query")
_VDB_REFUSAL = ("a vector-database benchmark config: it needs a Milvus server (with etcd and MinIO), which storlab "
                "does not run; see docs/workloads.md")
_MMAP_REFUSAL = ("not emulated: DLIO 2.0's mmap reader slices a memory map without reading it (no data reads "
                 "to emulate); indexed_binary reads the same files with read calls")


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("a number")
    if not math.isfinite(v):
        raise ValueError("a finite number")
    return int(round(v))


def _float(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("a number")
    return float(v)


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError("True or False")
    return v


def _str(v: Any) -> str:
    if not isinstance(v, (str, int, float)) or isinstance(v, bool):
        raise ValueError("a string")
    return str(v)


def _shuffle(v: Any) -> str:
    if v not in _SHUFFLE:
        raise ValueError("off, seed or random")
    return _SHUFFLE[v]


def _format(v: Any) -> str:
    v = str(v)
    if v == "mmap_indexed_binary":
        raise _Unsupported(_MMAP_REFUSAL)
    if v in _DLIO_FORMATS_REFUSED:
        raise _Unsupported(f"format {v} is not generated or read by storlab; use one of: {', '.join(FORMATS)}")
    if v not in FORMATS:
        raise ValueError(f"one of {', '.join(FORMATS)}")
    return v


_PARQUET_KEYS = ("row_group_size", "read_mode", "compression", "columns", "generation_batch_size", "use_s3dlio_gen")
_PARQUET_COLUMN_KEYS = ("name", "dtype", "size", "read")


def _parquet(v: Any) -> dict[str, Any]:
    """DLIO's `dataset.parquet` mapping as [dataset.parquet] (values checked by the workload job)."""
    if not isinstance(v, dict):
        raise ValueError(f"a mapping of {', '.join(_PARQUET_KEYS)}")
    out: dict[str, Any] = {}
    for key, value in v.items():
        if key not in _PARQUET_KEYS:
            raise ValueError(f"only the keys {', '.join(_PARQUET_KEYS)} (not {key})")
        if key in ("generation_batch_size", "use_s3dlio_gen"):   # how DLIO generates: the files are the same
            continue
        if key == "columns":
            if not isinstance(value, list) or not all(isinstance(c, dict) for c in value):
                raise ValueError(f"columns as a list of mappings of {', '.join(_PARQUET_COLUMN_KEYS)}")
            for c in value:
                extra = set(c) - set(_PARQUET_COLUMN_KEYS)
                if extra:
                    raise ValueError(f"columns of the keys {', '.join(_PARQUET_COLUMN_KEYS)} (not {sorted(extra)[0]})")
            value = [dict(c) for c in value]
        out[key] = value
    return out


class _Unsupported(Exception):
    """A valid DLIO value storlab does not emulate (refused with this reason)."""


# DLIO YAML key -> (storlab "section.key" or "", converter, how, note)
ACCEPT = "accepted"
KEYS: dict[str, tuple[str, Callable[[Any], Any] | None, str, str]] = {
    "model": ("workload.name", None, "translated", ""),
    "model.name": ("workload.name", _str, "translated", ""),
    "model.type": ("", None, ACCEPT, "a label; no I/O depends on it"),
    "model.model_size": ("checkpoint.model_size", _int, "translated",
                         "MLPerf v2.0's unet3d key; DLIO (2.0 and the mlperf_storage_v2.0 branch) reads "
                         "model.model_size_bytes and ignores this one, writing its default 10240 B: storlab writes "
                         "the size the file states (a deliberate difference)"),
    "model.model_size_bytes": ("checkpoint.model_size", _int, "translated", "DLIO's key for the model tensor's bytes"),
    "model.num_layers": ("checkpoint.transformer.num_layers", _int, "transformer", ""),
    "model.model_datatype": ("checkpoint.transformer.model_datatype", _str, "transformer", ""),
    "model.optimizer_datatype": ("checkpoint.transformer.optimizer_datatype", _str, "transformer", ""),
    "model.parallelism.tensor": ("checkpoint.transformer.tensor_parallelism", _int, "transformer", ""),
    "model.parallelism.pipeline": ("checkpoint.transformer.pipeline_parallelism", _int, "transformer", ""),
    "model.parallelism.zero_stage": ("checkpoint.transformer.zero_stage", _int, "transformer", ""),
    "model.parallelism.data": ("checkpoint.ranks_total", _int, "transformer",
                               "DLIO's subset mode: the world is data x tensor x pipeline ranks"),
    "model.transformer.vocab_size": ("checkpoint.transformer.vocab_size", _int, "transformer", ""),
    "model.transformer.hidden_size": ("checkpoint.transformer.hidden_size", _int, "transformer", ""),
    "model.transformer.ffn_hidden_size": ("checkpoint.transformer.ffn_hidden_size", _int, "transformer", ""),
    "model.transformer.num_attention_heads": ("checkpoint.transformer.num_attention_heads", _int, "transformer", ""),
    "model.transformer.num_kv_heads": ("checkpoint.transformer.num_kv_heads", _int, "transformer", ""),
    "model.optimization_groups": ("", None, "refuse", "predefined optimizer groups (DLIO's older int8 form) are not "
                                  "emulated; describe the model with model.num_layers and model.transformer"),
    "model.layer_parameters": ("", None, "refuse", "predefined layer sizes (DLIO's older int8 form) are not "
                               "emulated; describe the model with model.num_layers and model.transformer"),
    "framework": ("", None, ACCEPT, "storlab reads the bytes itself; the framework's decoding is not emulated "
                  "(DLIO's compute is a sleep either way)"),
    "workflow.generate_data": ("workload.generate", _bool, "translated", "storlab generates the dataset when it is "
                               "missing or incomplete; with train and checkpoint off, a run only generates it"),
    "workflow.train": ("workload.train", _bool, "translated", ""),
    "workflow.checkpoint": ("checkpoint.enabled", _bool, "translated", ""),
    "workflow.debug": ("", None, ACCEPT, "logging only"),
    "workflow.profiling": ("", None, ACCEPT, "DLIO's profiler (iostat, darshan) is not run; storlab records its own figures"),
    "workflow.evaluation": ("evaluation.enabled", _bool, "translated", "eval AU and samples/s are reported apart, "
                            "as DLIO does"),
    "workflow.do_eval": ("", None, ACCEPT, _DLIO_IGNORES + "; workflow.evaluation turns evaluation on"),
    "dataset.data_folder": ("dataset.folder", _str, "translated", ""),
    "dataset.format": ("dataset.format", _format, "translated", ""),
    "dataset.num_files_train": ("dataset.files", _int, "translated", ""),
    "dataset.num_samples_per_file": ("dataset.samples_per_file", _int, "translated", ""),
    "dataset.record_length": ("dataset.record_length", _int, "translated", "rounded to whole bytes"),
    "dataset.record_length_bytes": ("dataset.record_length", _int, "translated", "rounded to whole bytes"),
    "dataset.record_length_stdev": ("dataset.record_length_stdev", _int, "translated", ""),
    "dataset.record_length_bytes_stdev": ("dataset.record_length_stdev", _int, "translated", ""),
    "dataset.record_length_resize": ("dataset.record_length_resize", _int, "translated", "recorded: the decoded size, no byte read"),
    "dataset.record_length_bytes_resize": ("dataset.record_length_resize", _int, "translated", "recorded only"),
    "dataset.num_subfolders_train": ("dataset.subfolders", _int, "translated", ""),
    "dataset.file_prefix": ("dataset.file_prefix", _str, "translated", ""),
    "dataset.num_files_eval": ("dataset.eval_files", _int, "translated", "generated under FOLDER/valid/ as DLIO does"),
    "dataset.num_subfolders_eval": ("dataset.eval_subfolders", _int, "translated", ""),
    "dataset.eval_num_samples_per_file": ("", None, ACCEPT, _DLIO_IGNORES + "; eval files hold num_samples_per_file "
                                          "samples, as DLIO's"),
    "dataset.keep_files": ("", None, ACCEPT, "storlab always keeps the dataset for reuse"),
    "dataset.generation_buffer_size": ("", None, ACCEPT, "generation detail; the files are the same"),
    "dataset.compression": ("", None, "refuse-unless:none", "compressed datasets are not generated (parquet's "
                            "compression is dataset.parquet.compression)"),
    "dataset.parquet": ("dataset.parquet", _parquet, "translated", "MLPerf Storage v3.0's parquet layout: row "
                        "groups, columns (size x dtype bytes per row) and the columns the reader reads"),
    "dataset.compression_level": ("", None, ACCEPT, "only with compression"),
    "dataset.enable_chunking": ("", None, "refuse-unless:False", "chunked HDF5 is not generated"),
    "dataset.chunk_size": ("", None, ACCEPT, "only with chunking"),
    "reader.data_loader": ("", None, ACCEPT, "storlab's reader: read threads and a bounded prefetch queue per "
                           "accelerator, like PyTorch's DataLoader workers"),
    "reader.read_threads": ("reader.read_threads", _int, "translated", ""),
    "reader.computation_threads": ("", None, ACCEPT, "decoding threads; no I/O"),
    "reader.transfer_size": ("reader.transfer_size", _int, "translated", ""),
    "reader.batch_size": ("reader.batch_size", _int, "translated", ""),
    "reader.batch_size_eval": ("evaluation.batch_size", _int, "translated", ""),
    "reader.file_shuffle": ("reader.file_shuffle", _shuffle, "translated", ""),
    "reader.sample_shuffle": ("reader.sample_shuffle", _shuffle, "translated", ""),
    "reader.shuffle_size": ("", None, ACCEPT, "TensorFlow's shuffle buffer reorders samples in memory; sample_shuffle "
                            "decides the read order"),
    "reader.prefetch_size": ("reader.prefetch", _int, "translated", ""),
    "reader.dont_use_mmap": ("", None, ACCEPT, "storlab reads with pread, never mmap"),
    "reader.read_type": ("", None, ACCEPT, "storlab reads on demand"),
    "reader.file_access": ("", None, ACCEPT, "each accelerator opens the files it reads"),
    "reader.preprocess_time": ("", None, "refuse-unless:0", "a preprocess sleep per sample is not emulated"),
    "reader.preprocess_time_stdev": ("", None, ACCEPT, "only with preprocess_time"),
    "reader.multiprocessing_context": ("", None, ACCEPT, "storlab's readers are threads"),
    "train.epochs": ("train.epochs", _int, "translated", ""),
    "train.computation_time": ("train.computation_time", _float, "translated", ""),
    "train.computation_time_stdev": ("train.computation_time_stdev", _float, "translated", ""),
    "train.total_training_steps": ("train.total_training_steps", _int, "translated", "-1 (all) becomes 0"),
    "train.seed_change_epoch": ("train.seed_change_epoch", _bool, "translated", ""),
    "train.seed": ("workload.seed", _int, "translated", ""),
    "train.total_eval_steps": ("", None, ACCEPT, _DLIO_IGNORES + "; an evaluation reads every eval sample once"),
    "evaluation.eval_time": ("evaluation.computation_time", _float, "translated", ""),
    "evaluation.eval_time_stdev": ("evaluation.computation_time_stdev", _float, "translated", ""),
    "evaluation.epochs_between_evals": ("evaluation.epochs_between", _int, "translated", ""),
    "evaluation.steps_between_evals": ("", None, ACCEPT, _DLIO_IGNORES + "; evaluations follow training epochs"),
    "evaluation.eval_after_epoch": ("evaluation.after_epoch", _int, "translated", ""),
    "checkpoint.checkpoint_folder": ("checkpoint.folder", _str, "translated", ""),
    "checkpoint.checkpoint_after_epoch": ("checkpoint.after_epoch", _int, "translated", ""),
    "checkpoint.epochs_between_checkpoints": ("checkpoint.epochs_between", _int, "translated", ""),
    "checkpoint.steps_between_checkpoints": ("checkpoint.steps_between", _int, "translated", "-1 (off) becomes 0"),
    "checkpoint.type": ("checkpoint.ranks", None, "translated", ""),
    "checkpoint.model_size": ("checkpoint.model_size", _int, "translated", ""),
    "checkpoint.optimization_groups": ("checkpoint.optimizer_size", None, "derived", ""),
    "checkpoint.num_layers": ("checkpoint.model_size", None, "derived", ""),
    "checkpoint.layer_parameters": ("checkpoint.model_size", None, "derived", ""),
    "checkpoint.tensor_parallelism": ("checkpoint.model_size", None, "derived", ""),
    "checkpoint.pipeline_parallelism": ("", None, ACCEPT, "layers are written by every writer (DLIO: ranks with "
                                        "rank % pipeline_parallelism == 0)"),
    "checkpoint.checkpoint_mechanism_classname": ("", None, "refuse", "a custom checkpoint class is not emulated"),
    "checkpoint.fsync": ("checkpoint.fsync", _bool, "translated", ""),
    "checkpoint.num_checkpoints_write": ("checkpoint.count_write", _int, "translated", ""),
    "checkpoint.num_checkpoints_read": ("checkpoint.count_read", _int, "translated", ""),
    "checkpoint.time_between_checkpoints": ("", None, ACCEPT, "DLIO's compute sleep before each checkpoint write or "
                                            "read is not slept; each checkpoint is timed alone, as DLIO times it"),
    "checkpoint.mode": ("", None, ACCEPT, "default or subset: storlab writes as the world's first ranks when it "
                        "runs fewer writers than checkpoint.ranks_total (subset)"),
    "checkpoint.randomize_tensor": ("", None, ACCEPT, "storlab writes random bytes"),
    "checkpoint.rank_sync": ("", None, ACCEPT, "every writer of a checkpoint starts together and the checkpoint "
                             "ends when the last one has"),
    "metric.au": ("workload.au_threshold", _float, "translated", ""),
    "output.folder": ("", None, ACCEPT, "storlab keeps results in its store and --json"),
    "output.log_file": ("", None, ACCEPT, "storlab keeps results in its store and --json"),
    "profiling.profiler": ("", None, ACCEPT, "DLIO's profiler is not run"),
    "profiling.iostat_devices": ("", None, ACCEPT, "DLIO's profiler is not run"),
    "storage.storage_root": ("", None, "root", "prefixes dataset.folder and checkpoint.folder"),
    "hydra": ("", None, ACCEPT, "Hydra's own settings"),
    "generator.num_workers": ("", None, ACCEPT, "MLPerf Storage v3.0's generation threads; storlab generates with "
                              "its own pool (the files and objects are the same)"),
    "generator.buffer_size": ("", None, ACCEPT, "generation detail; the files and objects are the same"),
}
_MAPPINGS = {"workflow", "dataset", "reader", "train", "evaluation", "checkpoint", "metric", "output",
             "profiling", "storage", "generator"}


def _load(text: str, source: str):
    """The YAML as {dotted key: (value, line)}; a malformed file is one Refusal-shaped error."""
    import yaml

    try:
        node = yaml.compose(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else None
        raise Refusal(FORMAT, source, line, "(file)", "", f"not valid YAML: {getattr(e, 'problem', e)}") from None
    flat: dict[str, tuple[Any, int]] = {}
    if node is None:
        return flat
    if not isinstance(node, yaml.MappingNode):
        raise Refusal(FORMAT, source, node.start_mark.line + 1, "(file)", "", "a DLIO workload is a YAML mapping")
    loader = yaml.SafeLoader("")

    def value_of(n):
        return loader.construct_object(n, deep=True)

    for key_node, value_node in node.value:
        key = str(value_of(key_node))
        line = key_node.start_mark.line + 1
        if key in _MAPPINGS or (key == "model" and isinstance(value_node, yaml.MappingNode)):
            if value_node.tag.endswith(":null"):
                continue
            if not isinstance(value_node, yaml.MappingNode):
                raise Refusal(FORMAT, source, line, key, value_of(value_node), "must be a mapping of keys")
            for k2, v2 in value_node.value:
                if key == "model" and isinstance(v2, yaml.MappingNode):   # model.parallelism, model.transformer
                    for k3, v3 in v2.value:
                        flat[f"{key}.{value_of(k2)}.{value_of(k3)}"] = (value_of(v3), k3.start_mark.line + 1)
                    continue
                flat[f"{key}.{value_of(k2)}"] = (value_of(v2), k2.start_mark.line + 1)
        else:
            flat[key] = (value_of(value_node), line)
    return flat


def apply_overrides(flat: dict[str, tuple[Any, int]], overrides: list[str], source: str) -> None:
    """`++workload.dataset.format=npz` (or `dataset.format=npz`): DLIO's Hydra overrides."""
    import yaml

    for item in overrides:
        key, sep, text = item.lstrip("+").partition("=")
        if key.startswith("workload."):
            key = key[len("workload."):]
        if not sep or not key:
            raise Refusal(FORMAT, source, None, item, "", "an override is ++workload.SECTION.KEY=VALUE")
        flat[key] = (yaml.safe_load(text), 0)


def translate(path: str, overrides: list[str] | None = None) -> Translation:
    """A DLIO workload YAML file as a storlab workload Translation."""
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise Refusal(FORMAT, path, None, "(file)", "", f"cannot be read: {e.strerror or e}") from None
    if size > MAX_YAML_BYTES:
        raise Refusal(FORMAT, path, None, "(file)", "", f"{size} bytes is not a workload file (at most {MAX_YAML_BYTES})")
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal(FORMAT, path, None, "(file)", "", "not UTF-8 text") from None
    return translate_text(text, path, sha256_of(raw), overrides or [])


def translate_text(text: str, source: str = "<text>", sha: str | None = None,
                   overrides: list[str] | None = None) -> Translation:
    flat = _load(text, source)
    apply_overrides(flat, overrides or [], source)
    if not flat:   # DLIO itself has no workload without a model, a dataset and a workflow
        raise Refusal(FORMAT, source, None, "(file)", "", "holds no workload keys (empty, or comments only); "
                      "a DLIO workload sets at least its model, dataset and workflow")
    _refuse_other_benchmarks(flat, source)
    notes_early: list[str] = []
    mapped_early: list[Mapped] = []
    object_root, storage = _object_storage(flat, source, mapped_early, notes_early)
    _parquet_compression(flat)
    _parquet_record_length(flat)
    table: dict[str, dict[str, Any]] = {"workload": {}, "dataset": {}, "reader": {}, "train": {}, "evaluation": {},
                                        "checkpoint": {}, "storage": {}}
    mapped: list[Mapped] = mapped_early
    notes: list[str] = notes_early
    refused: list[tuple[str, Any, int, str]] = []
    root = ""
    ckpt: dict[str, Any] = {}
    ckpt_lines: dict[str, int] = {}
    model: dict[str, tuple[str, Any, Any, int]] = {}
    for key, (value, line) in flat.items():
        entry = KEYS.get(key)
        if entry is None:
            section = key.split(".")[0]
            reason = "not a DLIO workload key" if section in _MAPPINGS or "." not in key else "not a DLIO workload section"
            refused.append((key, value, line, reason))
            continue
        target, convert, how, note = entry
        if how == "refuse":
            refused.append((key, value, line, note))
            continue
        if how.startswith("refuse-unless:"):
            allowed = how.split(":", 1)[1]
            if str(value).lower() not in (allowed.lower(), "none", "0", "false") or \
                    (allowed == "local_fs" and str(value) != "local_fs"):
                refused.append((key, value, line, note))
                continue
            mapped.append(Mapped(key, value, "", ACCEPT, line or None, f"the default: {allowed}"))
            continue
        if how == "root":
            root = str(value)
            mapped.append(Mapped(key, value, "dataset.folder, checkpoint.folder", "derived", line or None, note))
            continue
        if how == ACCEPT:
            mapped.append(Mapped(key, value, "", ACCEPT, line or None, note))
            continue
        if how == "derived" and target.startswith("checkpoint."):
            ckpt[key.split(".", 1)[1]] = value
            ckpt_lines[key] = line
            continue
        if how == "transformer":
            try:
                model[key] = (target, convert(value), value, line)
            except ValueError as e:
                refused.append((key, value, line, f"is not allowed; use {e}"))
            continue
        section, name = target.split(".", 1)
        try:
            if key == "model":
                v = str(value)
            elif key == "checkpoint.type":
                if value not in _CKPT_TYPE:
                    raise ValueError("all_ranks or rank_zero")
                v = _CKPT_TYPE[value]
            else:
                v = convert(value)
        except _Unsupported as e:
            refused.append((key, value, line, str(e)))
            continue
        except ValueError as e:
            refused.append((key, value, line, f"is not allowed; use {e}"))
            continue
        if key in ("train.total_training_steps", "checkpoint.steps_between_checkpoints") and v < 0:
            v = 0
        table[section][name] = v
        shown = _parquet_summary(v) if key == "dataset.parquet" else repr(v)
        mapped.append(Mapped(key, "(mapping)" if key == "dataset.parquet" else value, f"{target} = {shown}", how,
                             line or None, note))
    if refused:
        key, value, line, reason = refused[0]
        raise Refusal(FORMAT, source, line or None, key, value, reason,
                      more=[f"{k} (line {ln})" if ln else k for k, _, ln, _ in refused[1:]])
    if flat.get("workflow.train", (True,))[0] is False and flat.get("workflow.checkpoint", (False,))[0] is not True \
            and flat.get("workflow.generate_data", (False,))[0] is not True:
        value, line = flat["workflow.train"]
        raise Refusal(FORMAT, source, line or None, "workflow.train", value,
                      "with workflow.checkpoint and workflow.generate_data off nothing runs; set one of the three True")
    _checkpoint_sizes(ckpt, ckpt_lines, table, mapped, notes)
    if model:
        _transformer(model, flat, table, mapped, notes, source)
    for section, name in (("dataset", "folder"), ("checkpoint", "folder")):
        folder = table[section].get(name)
        key = {"dataset": "dataset.data_folder", "checkpoint": "checkpoint.checkpoint_folder"}[section]
        if isinstance(folder, str) and folder.startswith("file://"):
            table[section][name] = folder = folder[len("file://"):]
        if isinstance(folder, str) and ("${" in folder or ("://" in folder and not folder.startswith("s3://"))):
            value, line = flat.get(key, (folder, 0))
            raise Refusal(FORMAT, source, line or None, key, value,
                          "a Hydra interpolation is not resolved; write the path" if "${" in folder else _NOT_REACHED)
    if object_root:
        for section, name in (("dataset", "folder"), ("checkpoint", "folder")):
            folder = table[section].get(name, {"dataset": "./data/", "checkpoint": "./checkpoints/"}[section])
            if section == "checkpoint" and name not in table[section] and not table["checkpoint"].get("enabled"):
                continue
            table[section][name] = _under_root(object_root, folder)
        table["storage"] = storage
    elif root:
        for section, name in (("dataset", "folder"), ("checkpoint", "folder")):
            folder = table[section].get(name, {"dataset": "./data/", "checkpoint": "./checkpoints/"}[section])
            table[section][name] = os.path.join(root, folder)
    elif storage:
        table["storage"] = storage
    # DLIO's defaults where storlab's differ
    table["checkpoint"].setdefault("ranks", "zero")
    table["checkpoint"].setdefault("after_epoch", 1)
    table["dataset"].setdefault("folder", "./data/")
    table["checkpoint"].setdefault("folder", "./checkpoints/")
    if table["checkpoint"].get("enabled") and "model_size" not in table["checkpoint"] and \
            "transformer" not in table["checkpoint"]:
        table["checkpoint"]["model_size"] = 10240   # DLIO's default model_size
    accelerator = accelerator_of_name(os.path.splitext(os.path.basename(source))[0])
    if accelerator:
        table["workload"]["accelerator"] = accelerator
        mapped.append(Mapped("(file name)", os.path.basename(source), f"workload.accelerator = {accelerator!r}",
                             "derived", None, "the accelerator the file is written for, from its name "
                                              "(MLPerf's WORKLOAD_ACCELERATOR.yaml)"))
    if not table["workload"].get("name"):
        table["workload"]["name"] = "default"
    table["workload"]["name"] = "".join(c if c.isalnum() or c in "_-." else "_" for c in table["workload"]["name"])
    notes.append("reads: each sample is one read of its bytes at its offset in the file (whole file when "
                 "samples_per_file = 1); DLIO's loaders read through numpy, h5py or tf.data")
    notes.append("AU, samples/s and MB/s follow DLIO 2.0's statscounter: first step left out of AU, "
                 "MB/s = samples/s x record_length / 2^20 (MiB/s of the nominal record length)")
    try:
        spec = spec_from_table({k: v for k, v in table.items() if v}, source=os.path.basename(source))
    except WorkloadError as e:
        raise _refusal_of(e, mapped, source) from None
    return WorkloadTranslation(FORMAT, source, sha or sha256_of(text.encode()), spec.to_table(), mapped, notes,
                               {"kind": "workload"})


def _parquet_summary(table: dict[str, Any]) -> str:
    """[dataset.parquet] in a few words, for the translation record."""
    columns = table.get("columns") or []
    read = sum(1 for c in columns if c.get("read", True))
    rest = ", ".join(f"{k} {table[k]}" for k in ("row_group_size", "read_mode", "compression") if k in table)
    return f"{len(columns)} columns ({read} read)" + (f", {rest}" if rest else "")


def _refuse_other_benchmarks(flat: dict[str, tuple[Any, int]], source: str) -> None:
    """Refuse in one line a vector-database config: not a DLIO workload."""
    vdb = [k for k in _VDB_KEYS if k in flat]
    if "database" in flat or (vdb and "dataset.num_vectors" in flat):
        key = vdb[0]
        raise Refusal(FORMAT, source, flat[key][1] or None, key, "(mapping)" if isinstance(flat[key][0], dict)
                      else flat[key][0], _VDB_REFUSAL)


def _under_root(root: str, folder: str) -> str:
    """A DLIO folder under an object root (s3://BUCKET[/PREFIX]): an s3:// folder as it is, an
    absolute path stays a local path (as os.path.join keeps it), a relative one a prefix under the root."""
    if folder.startswith("s3://") or folder.startswith("/"):
        return folder
    parts = [p for p in folder.split("/") if p not in ("", ".")]
    return "/".join([root.rstrip("/"), *parts])


def _object_storage(flat: dict[str, tuple[Any, int]], source: str, mapped: list[Mapped],
                    notes: list[str]) -> tuple[str, dict[str, Any]]:
    """MLPerf Storage v3.0's storage keys (under `storage:` or `reader:`), taken out of `flat`:
    (the object root s3://BUCKET[/PREFIX], or "" when the data is on a file system, and the
    [storage] table). A file:// root is a local root (left as storage.storage_root). What storlab
    cannot reach is refused in one line naming the key; a credential written in the file is
    refused without its value being shown."""
    got: dict[str, tuple[str, Any, int]] = {}
    for section in ("storage", "reader"):
        for name in _OBJECT_NAMES:
            key = f"{section}.{name}"
            if key in flat:
                value, line = flat.pop(key)
                got.setdefault(name, (key, value, line))
    if not got:
        return "", {}

    def refuse(name: str, reason: str, shown: Any = None) -> Refusal:
        key, value, line = got[name]
        return Refusal(FORMAT, source, line or None, key, value if shown is None else shown, reason)

    def accept(name: str, storlab: str, note: str) -> None:
        key, value, line = got[name]
        mapped.append(Mapped(key, "(mapping)" if isinstance(value, dict) else value, storlab,
                             "translated" if storlab else ACCEPT, line or None, note))

    kind = str(got["storage_type"][1]).lower() if "storage_type" in got else ""
    root_name = "storage_root" if "storage_root" in got else "data_loader_root" if "data_loader_root" in got else ""
    root = str(got[root_name][1]).strip() if root_name else ""
    scheme = root.split("://", 1)[0].lower() if "://" in root else ""
    if kind and kind not in _OBJECT_TYPES + _LOCAL_TYPES:
        raise refuse("storage_type", f"is not allowed; use one of: {', '.join(_LOCAL_TYPES + _OBJECT_TYPES)}")
    if scheme and scheme not in ("s3", "file"):
        raise refuse(root_name, _NOT_REACHED)
    if "protocol" in got and str(got["protocol"][1]).lower() not in ("s3", "file"):
        raise refuse("protocol", f"is not allowed; use s3 or file ({_NOT_REACHED})")
    objects = scheme == "s3" or (not scheme and kind in ("s3", "object")) or         (kind == "s3dlio" and scheme != "file" and bool(root))
    if not objects:
        # a file system: the root (a path, or file://PATH) prefixes the folders as DLIO's storage_root does
        for name in [n for n in got if n != root_name]:
            accept(name, "", "the local file system: storlab reads it with its own calls")
        if root_name:
            _key, value, line = got[root_name]
            flat["storage.storage_root"] = (root[len("file://"):] if scheme == "file" else root, line)
        return "", {}
    if root_name == "data_loader_root" and "storage_root" in got:
        root = str(got["storage_root"][1])
    if not root:
        raise refuse("storage_type", "object storage needs storage.storage_root (the bucket, or s3://BUCKET/PREFIX)")
    url = root if scheme == "s3" else f"s3://{root.strip('/')}"
    bucket = url[len("s3://"):].split("/", 1)[0]
    if not re.match(r"^[a-z0-9._-]{3,63}$", bucket):
        raise refuse(root_name, f"names bucket {bucket!r}; a bucket name is 3 to 63 lowercase letters, digits, '.', '-'")
    storage: dict[str, Any] = {}
    accept(root_name, f"dataset.folder, checkpoint.folder under {url.rstrip('/')}",
           "the bucket (and prefix) the dataset and a relative checkpoint folder are prefixes of")
    if "storage_type" in got:
        accept("storage_type", "", "objects: storlab's S3 client (the engine's) makes the requests")
    if "protocol" in got:
        accept("protocol", "", "S3")
    if "storage_root" in got and root_name != "storage_root":
        accept("storage_root", "", "the root")
    if "data_loader_root" in got and root_name != "data_loader_root":
        accept("data_loader_root", "", "the root is storage_root")
    if kind == "s3dlio" and "storage_library" not in got:
        storage["library"] = "s3dlio"           # v3.0's storage_type: s3dlio names the library
    if "storage_library" in got:
        library = str(got["storage_library"][1])
        if library not in OBJECT_LIBRARIES:
            raise refuse("storage_library", f"is not allowed; use one of: {', '.join(OBJECT_LIBRARIES)}")
        storage["library"] = library
        accept("storage_library", f"storage.library = {library!r}", "recorded: storlab's own S3 client makes the "
                                                                   "same GET and PUT requests")
    endpoints: list[str] = []
    options = got.get("storage_options", ("", None, 0))[1] or {}
    if "storage_options" in got and not isinstance(options, dict):
        raise refuse("storage_options", "must be a mapping")
    for name, value in options.items():
        key = f"{got['storage_options'][0]}.{name}"
        line = got["storage_options"][2]
        text = "" if value is None else str(value).strip()
        if name in ("access_key_id", "secret_access_key", "session_token"):
            if text and not text.startswith("${"):
                raise Refusal(FORMAT, source, line or None, key, "(hidden)",
                              "credentials are not read from a workload file; set AWS_ACCESS_KEY_ID and "
                              "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) in the environment")
            mapped.append(Mapped(key, "(hidden)", "", ACCEPT, line or None, "credentials come from the environment "
                                 "or ~/.aws, as the AWS CLI finds them"))
        elif name == "endpoint_url":
            if text and not text.startswith("${"):
                endpoints.append(text)
            mapped.append(Mapped(key, value, f"storage.endpoint = {text!r}" if text else "", "translated" if text
                                 else ACCEPT, line or None, "" if text else "empty: AWS_ENDPOINT_URL(_S3) or AWS's"))
        elif name == "s3_max_attempts":
            mapped.append(Mapped(key, value, "", ACCEPT, line or None, "storlab's client retries a 503 (SlowDown) up to "
                                 "12 times with back-off and counts the retries; other failures end the run"))
        elif name == "region":
            mapped.append(Mapped(key, value, "", ACCEPT, line or None, "the region signed for is AWS_REGION's (or the "
                                 "profile's, else us-east-1)"))
        elif name in ("s3_force_path_style", "secure"):
            if not isinstance(value, bool):
                raise Refusal(FORMAT, source, line or None, key, value, "is not allowed; use true or false")
            if name == "s3_force_path_style" and not value:
                storage["virtual_host"] = True
            if name == "secure" and not value:
                storage["insecure"] = True
            mapped.append(Mapped(key, value, f"storage.{'virtual_host' if name == 's3_force_path_style' else 'insecure'}"
                                 f" = {not value}", "translated", line or None, "secure false: the server's "
                                 "certificate is not checked" if name == "secure" else ""))
        else:
            raise Refusal(FORMAT, source, line or None, key, value, "not a storage option storlab knows; allowed: "
                          "endpoint_url, region, access_key_id, secret_access_key, s3_force_path_style, secure, "
                          "s3_max_attempts")
    if "endpoint_uris" in got:
        uris = got["endpoint_uris"][1]
        if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
            raise refuse("endpoint_uris", "must be a list of http(s)://HOST[:PORT]")
        endpoints = list(uris)
        accept("endpoint_uris", f"storage.endpoint = {','.join(uris)!r}", "requests are dealt round-robin over "
                                                                          "the endpoints")
    if "load_balance_strategy" in got:
        if str(got["load_balance_strategy"][1]) != "round_robin":
            raise refuse("load_balance_strategy", "is not allowed; use round_robin (storlab deals requests "
                                                  "round-robin over the endpoints)")
        accept("load_balance_strategy", "", "round-robin")
    if "use_mpi_endpoint_distribution" in got:
        accept("use_mpi_endpoint_distribution", "", "every rank deals its requests over every endpoint")
    if endpoints:
        storage["endpoint"] = ",".join(endpoints)
    notes.append(f"objects: the dataset and checkpoints are objects under {url.rstrip('/')} (one object per file, "
                 "GETs to read, PUTs to write; credentials from the environment)")
    return url.rstrip("/"), storage


def _parquet_compression(flat: dict[str, tuple[Any, int]]) -> None:
    """A parquet dataset's dataset.compression is its columns' codec: moved into dataset.parquet."""
    if flat.get("dataset.format", ("",))[0] != "parquet" or "dataset.compression" not in flat:
        return
    value, line = flat.pop("dataset.compression")
    table, at = flat.get("dataset.parquet", ({}, line))
    flat["dataset.parquet"] = ({**(table if isinstance(table, dict) else {}), "compression": str(value).lower()}, at)


def _parquet_record_length(flat: dict[str, tuple[Any, int]]) -> None:
    """A parquet file that lists its columns but no record length: a row's bytes are the
    record length (size x dtype bytes summed), as DLIO sizes the row."""
    table, line = flat.get("dataset.parquet", (None, 0))
    if flat.get("dataset.format", ("",))[0] != "parquet" or not isinstance(table, dict) or \
            any(k in flat for k in ("dataset.record_length", "dataset.record_length_bytes")):
        return
    columns = table.get("columns")
    if isinstance(columns, list) and columns and all(isinstance(c, dict) and c.get("dtype") in PARQUET_DTYPES
                                                     for c in columns):
        flat["dataset.record_length"] = (sum(PARQUET_DTYPES[c["dtype"]] * int(c.get("size", 1)) for c in columns), line)


# a field refused for being unset is refused at the key that made it needed
_ENABLED_BY = {"dataset.eval_files": "evaluation.enabled", "checkpoint.model_size": "checkpoint.enabled",
               "workload.train": "workflow.train"}


def _refusal_of(error: WorkloadError, mapped: list[Mapped], source: str) -> Refusal | WorkloadError:
    """A storlab validation error (`reader.batch_size: 0 is not allowed; ...`) as a Refusal at
    the DLIO key that set the field it names, with that key's line; unchanged when no key did."""
    text = str(error)
    field, _, rest = text.partition(": ")
    by_field = {}
    for m in mapped:
        if m.storlab and " = " in m.storlab:
            by_field.setdefault(m.storlab.split(" = ", 1)[0], m)
    m = by_field.get(field) or by_field.get(_ENABLED_BY.get(field, ""))
    parts = field.split(".")
    while m is None and len(parts) > 2:     # dataset.parquet.columns[3].dtype: the dataset.parquet key
        parts.pop()
        m = by_field.get(".".join(parts).split("[")[0])
    if m is None:
        return error
    return Refusal(FORMAT, source, m.line, m.key, m.value, f"{field}: {rest}")


def _checkpoint_sizes(ckpt: dict[str, Any], lines: dict[str, int], table: dict[str, dict[str, Any]],
                      mapped: list[Mapped], notes: list[str]) -> None:
    """DLIO 2.0's checkpoint bytes per writing rank (int8 tensors): model_size, 3 x the optimizer
    groups (two states per group and one combined), and num_layers (+ tensor_parallelism when > 1)
    x the layer parameters."""
    if not ckpt:
        return
    groups = ckpt.get("optimization_groups") or []
    layers = ckpt.get("layer_parameters", [17371, 24740228])
    num_layers = int(ckpt.get("num_layers", 1))
    tp = int(ckpt.get("tensor_parallelism", 1))
    total_layers = num_layers + (tp if tp > 1 else 0)
    optimizer = 3 * sum(int(g) for g in groups if g > 0)
    layer_bytes = total_layers * sum(int(p) for p in layers if p > 0) if "layer_parameters" in ckpt or \
        "num_layers" in ckpt else 0
    table["checkpoint"]["optimizer_size"] = optimizer
    table["checkpoint"]["model_size"] = int(table["checkpoint"].get("model_size", 10240)) + layer_bytes
    for k in ("optimization_groups", "num_layers", "layer_parameters", "tensor_parallelism"):
        if k in ckpt:
            key = f"checkpoint.{k}"
            mapped.append(Mapped(key, ckpt[k], "checkpoint.model_size/optimizer_size", "derived", lines.get(key) or None,
                                 "DLIO: optimizer = 3 x sum(groups) bytes; layers = (num_layers [+ tp]) x "
                                 "sum(layer_parameters) bytes, added to the model"))
    notes.append(f"checkpoint per writer: model {table['checkpoint']['model_size']} B (layers {layer_bytes} B), "
                 f"optimizer {optimizer} B, as DLIO 2.0 sizes its int8 tensors")


def _transformer(model: dict[str, tuple[str, Any, Any, int]], flat: dict[str, tuple[Any, int]],
                 table: dict[str, dict[str, Any]], mapped: list[Mapped], notes: list[str], source: str) -> None:
    """DLIO's `model:` shape (num_layers, transformer sizes, parallelism, datatypes) as
    [checkpoint.transformer]: each rank's files and bytes follow DLIO's rules
    (jobs/checkpoint_layout.py). The world is data x tensor x pipeline when model.parallelism.data
    is given (DLIO's subset mode); otherwise DLIO takes it from its process count, which a file
    does not carry: storlab's default is the smallest multiple of TP x PP of at least MLPerf's 8
    processes; --set checkpoint.ranks_total=N changes it (the sizes follow)."""
    from ..checkpoint_layout import TransformerSpec, check_transformer, default_world

    kind = flat.get("model.type", ("", 0))[0]
    if "model.num_layers" not in model or kind != "transformer":
        key = "model.num_layers" if "model.num_layers" in model else next(iter(model))
        value, line = flat[key]
        raise Refusal(FORMAT, source, line or None, key, value,
                      "a model's shape is emulated for model.type: transformer with model.num_layers > 0 only "
                      "(DLIO sizes other models' layers from predefined lists)")
    fields: dict[str, Any] = {}
    data = None
    for key, (target, v, value, line) in model.items():
        if target == "checkpoint.ranks_total":
            data = (v, value, line)
            continue
        fields[target.rsplit(".", 1)[1]] = v
        mapped.append(Mapped(key, value, f"{target} = {v!r}", "translated", line or None, ""))
    t = TransformerSpec(**fields)
    from ..workload import WorkloadError

    try:
        check_transformer(t, WorkloadError)
    except WorkloadError as e:
        field = str(e).split(":", 1)[0].rsplit(".", 1)[1]
        key = next((k for k, (tg, *_rest) in model.items() if tg.endswith("." + field)), "model.num_layers")
        value, line = flat[key]
        raise Refusal(FORMAT, source, line or None, key, value, str(e)) from None
    mp = t.model_parallelism
    if data is not None:
        world = data[0] * mp
        mapped.append(Mapped("model.parallelism.data", data[1], f"checkpoint.ranks_total = {world}", "derived",
                             data[2] or None, f"DLIO's subset mode: the world is data x tensor x pipeline = "
                                              f"{data[0]} x {mp}"))
    else:
        world = default_world(t)
        line = min((ln for k, (_, _, _, ln) in model.items() if k.startswith("model.parallelism.") and ln),
                   default=model["model.num_layers"][3]) or None
        mapped.append(Mapped("model.parallelism", None, f"checkpoint.ranks_total = {world}", "chosen", line,
                             f"DLIO's world is its process count (DP = processes / (TP x PP)); the file has none: the "
                             f"smallest multiple of TP x PP = {mp} of at least 8 processes (MLPerf's fewest); "
                             f"--set checkpoint.ranks_total=N changes it (MLPerf CLOSED: 8, 64, 512, 1024 ranks for "
                             f"llama3 8b, 70b, 405b, 1t)"))
    table["checkpoint"]["transformer"] = {k: v for k, v in fields.items()}
    table["checkpoint"]["ranks_total"] = world
    table["checkpoint"]["ranks"] = "all"
    table["checkpoint"].pop("model_size", None)
    notes.append(transformer_note(t, world))
    for m in mapped:
        if m.key == "model.num_layers":
            m.note = _sizes_line(t, world)
    if t.zero_stage == 2:
        notes.append("ZeRO 2: DLIO prints a model size counting every data-parallel rank's copy, but only "
                     "data-parallel rank 0 writes it; storlab writes (and reports) what DLIO writes")


def transformer_note(t, world: int) -> str:
    """The translation's note on a transformer checkpoint: its parameters and bytes over `world`
    ranks, with the figures DLIO prints."""
    from ..checkpoint_layout import checkpoint_sizes

    sizes = checkpoint_sizes(t, world)
    return (f"checkpoint of a {sizes['parameters']:,}-parameter transformer over {world} ranks "
            f"(TP {t.tensor_parallelism} x PP {t.pipeline_parallelism} x DP {sizes['data']}, ZeRO {t.zero_stage}): "
            f"Model size {sizes['model_gib']:.6f} GB, Optimizer state size {sizes['optimizer_gib']:.6f} GB, "
            f"Total checkpoint size {sizes['total_gib']:.6f} GB as DLIO prints them (GB = 1024^3 bytes): "
            f"{sizes['model_bytes']:,} + {sizes['optimizer_bytes']:,} = {sizes['total_bytes']:,} bytes in "
            f"{sizes['files']} files of {sizes['writers']} writing ranks")


def _sizes_line(t, world: int) -> str:
    from ..checkpoint_layout import checkpoint_sizes

    sizes = checkpoint_sizes(t, world)
    return (f"DLIO's sizes over {world} ranks: {sizes['parameters']} parameters; model {sizes['model_bytes']} B, "
            f"optimizer {sizes['optimizer_bytes']} B, total {sizes['total_bytes']} B")


def world_given(translation: Translation, world: int) -> None:
    """checkpoint.ranks_total set beside the file (--set): the note and record say the world run."""
    from ..checkpoint_layout import TransformerSpec

    t = TransformerSpec(**translation.job["checkpoint"]["transformer"])
    note = transformer_note(t, world) if world else ("checkpoint.ranks_total = 0 given with --set: the world is the "
                                                     "run's writers (DLIO's default mode); its sizes are in the "
                                                     "result's checkpoint.transformer")
    translation.notes = [note if n.startswith("checkpoint of a ") else n for n in translation.notes]
    for m in translation.mapped:
        if m.storlab.startswith("checkpoint.ranks_total = "):
            m.storlab = f"checkpoint.ranks_total = {world} (given with --set)"
        if m.key == "model.num_layers" and world:
            m.note = _sizes_line(t, world)
