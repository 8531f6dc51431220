"""A transformer's checkpoint as DLIO writes it (MLPerf Storage v2.0's llama3 workloads): the
parameter count of a model given by its shape, and the files each rank of a TP x PP x DP world
writes, with their bytes.

The rules are DLIO's checkpointing (dlio_benchmark's BaseCheckpointing, the same in DLIO 2.0 and
in the mlperf_storage_v2.0 branch MLPerf Storage v2.0 runs):
- parameters: embedding (vocab x h) + lm_head (vocab x h) + a final norm (h) + per layer
  input norm (h), Q/K/V (h x (h + 2 x kv)), dense (h x h), layer norm (h) and the gated MLP
  (3 x h x ffn), with kv = h / heads x kv_heads (`get_num_parameters`);
- layers 0 (embedding) .. L + 2 (the final norm) are split over the pipeline stages: the L
  transformer layers evenly (the first L mod PP stages one more), layer 0 on the first stage,
  L + 1 and L + 2 on the last (`get_layer_index`); a layer's tensors are divided by TP (the
  norms are not) and, under ZeRO 3, by DP (`get_layer_parameters`), in model_datatype;
- the optimizer state of a rank is [n, 5h, n, 5h, n, 5h] elements of optimizer_datatype with
  n = parameters / (DP x TP x PP) under ZeRO 1-3, parameters / (TP x PP) without ZeRO
  (`get_optimization_groups`);
- who writes (`__init__`, `save_checkpoint`): without ZeRO only the first TP x PP ranks write;
  under ZeRO 1 and 2 every rank writes its optimizer state and only data-parallel rank 0 the
  model, one file per layer when PP > 1 (one file of all its layers otherwise); under ZeRO 3
  every rank writes its DP shard of its layers in one file.
DP = world // (TP x PP), as DLIO derives it from the number of processes (or from
model.parallelism.data in its subset mode, where the processes are the world's first ranks).
Bytes are the tensors' bytes; torch.save adds a small container (a few KiB per file) that is not
counted, as DLIO's printed sizes do not count it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TransformerSpec", "DATATYPE_BYTES", "num_parameters", "layer_parameters", "layer_range",
           "optimizer_elements", "rank_files", "checkpoint_sizes", "default_world", "check_transformer",
           "MLPERF_MIN_PROCESSES"]

DATATYPE_BYTES = {"int8": 1, "uint8": 1, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}
MLPERF_MIN_PROCESSES = 8      # mlpstorage's LLM_SUBSET_PROCS: the fewest processes a checkpoint run has
GIB = 1 << 30                 # DLIO prints checkpoint sizes in "GB" of 1024^3 bytes


@dataclass
class TransformerSpec:
    """DLIO's `model:` shape (model.num_layers, model.transformer.*, model.parallelism.*,
    model.*_datatype); the defaults are DLIO's. num_layers 0: no transformer."""
    num_layers: int = 0
    hidden_size: int = 2048
    ffn_hidden_size: int = 8192
    num_attention_heads: int = 32
    num_kv_heads: int = 8
    vocab_size: int = 32000
    tensor_parallelism: int = 1
    pipeline_parallelism: int = 1
    zero_stage: int = 0
    model_datatype: str = "fp16"
    optimizer_datatype: str = "fp32"

    @property
    def model_parallelism(self) -> int:
        return self.tensor_parallelism * self.pipeline_parallelism


def check_transformer(t: TransformerSpec, error: type[Exception]) -> None:
    """Refuse a shape DLIO refuses or cannot size, naming the field (checkpoint.transformer.KEY)."""
    where = "checkpoint.transformer"
    for key in ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_kv_heads",
                "vocab_size", "tensor_parallelism", "pipeline_parallelism"):
        if getattr(t, key) < 1:
            raise error(f"{where}.{key}: {getattr(t, key)!r} is not allowed; use a whole number > 0")
    if t.zero_stage not in (0, 1, 2, 3):
        raise error(f"{where}.zero_stage: {t.zero_stage!r} is not allowed; use one of: 0, 1, 2, 3")
    for key in ("model_datatype", "optimizer_datatype"):
        if getattr(t, key) not in DATATYPE_BYTES:
            raise error(f"{where}.{key}: {getattr(t, key)!r} is not allowed; use one of: {', '.join(DATATYPE_BYTES)}")
    if t.num_layers < t.pipeline_parallelism:
        raise error(f"{where}.num_layers: {t.num_layers} is below pipeline_parallelism {t.pipeline_parallelism}; "
                    f"use at least {t.pipeline_parallelism} (DLIO refuses fewer)")
    if t.zero_stage == 3 and t.pipeline_parallelism > 1:
        raise error(f"{where}.zero_stage: 3 is not allowed with pipeline_parallelism {t.pipeline_parallelism}; "
                    "use 0, 1 or 2, or pipeline_parallelism 1 (DLIO refuses ZeRO 3 with pipelining)")


def num_parameters(t: TransformerSpec) -> int:
    h = t.hidden_size
    dim_kv = h // t.num_attention_heads * t.num_kv_heads
    embedding = t.vocab_size * h
    per_layer = h + h * (h + 2 * dim_kv) + h * h + h + 2 * t.ffn_hidden_size * h + t.ffn_hidden_size * h
    return embedding + per_layer * t.num_layers + h + embedding


def layer_parameters(t: TransformerSpec, layer: int, dp: int) -> list[int]:
    """Elements of layer `layer`'s tensors on one rank (0 embedding, 1..L transformer layers,
    L + 1 lm_head, L + 2 the final norm)."""
    shard = dp if t.zero_stage == 3 else 1
    h, tp = t.hidden_size, t.tensor_parallelism
    if layer in (0, t.num_layers + 1):
        return [h * t.vocab_size // tp // shard]
    if layer == t.num_layers + 2:
        return [h // shard]
    dim_kv = h // t.num_attention_heads * t.num_kv_heads
    return [h // shard, h * (h + 2 * dim_kv) // tp // shard, h * h // tp // shard, h // shard,
            h * 2 * t.ffn_hidden_size // tp // shard, h * t.ffn_hidden_size // tp // shard]


def layer_range(t: TransformerSpec, pipeline_rank: int) -> tuple[int, int]:
    """First and last layer (inclusive) of a pipeline stage."""
    pp = t.pipeline_parallelism
    per, extra = divmod(t.num_layers, pp)
    if pipeline_rank < extra:
        start = pipeline_rank * (per + 1) + 1
        end = start + per
    else:
        start = extra * (per + 1) + (pipeline_rank - extra) * per + 1
        end = start + per - 1
    if pipeline_rank == pp - 1:
        end = t.num_layers + 2
    if pipeline_rank == 0:
        start = 0
    return start, end


def optimizer_elements(t: TransformerSpec, dp: int) -> list[int]:
    """One rank's optimizer groups: [n, 5h, n, 5h, n, 5h] ([] when n is 0)."""
    n = num_parameters(t) // (dp * t.model_parallelism if t.zero_stage > 0 else t.model_parallelism)
    return [n, 5 * t.hidden_size] * 3 if n > 0 else []


def rank_files(t: TransformerSpec, rank: int, world: int) -> list[tuple[str, int]]:
    """The files DLIO's rank `rank` of a world of `world` ranks writes for one checkpoint, as
    (DLIO's file name, bytes); [] for a rank that writes nothing."""
    mp, tp = t.model_parallelism, t.tensor_parallelism
    dp = max(1, world // mp)
    pp_rank, mp_rank, dp_rank = (rank // tp) % t.pipeline_parallelism, rank % mp, rank // mp
    if t.zero_stage == 0 and rank >= mp:
        return []
    mbytes, obytes = DATATYPE_BYTES[t.model_datatype], DATATYPE_BYTES[t.optimizer_datatype]
    files: list[tuple[str, int]] = []
    start, end = layer_range(t, pp_rank)
    layers = [(i, sum(p for p in layer_parameters(t, i, dp) if p > 0) * mbytes) for i in range(start, end + 1)]
    if 0 < t.zero_stage < 3:
        if dp_rank == 0:
            if t.pipeline_parallelism > 1:
                files += [(f"layer_{i}-model_{mp_rank}_model_states", b) for i, b in layers]
            else:
                files.append((f"model_{mp_rank}_model_states", sum(b for _, b in layers)))
    else:
        files.append((f"zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_model_states", sum(b for _, b in layers)))
    groups = optimizer_elements(t, dp)
    if groups:
        files.append((f"zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_optim_states", sum(groups) * obytes))
    return files


def checkpoint_sizes(t: TransformerSpec, world: int) -> dict[str, Any]:
    """A checkpoint over `world` ranks: parameters, the model and optimizer bytes all ranks write
    (what DLIO prints as "Model size", "Optimizer state size" and "Total checkpoint size", in GiB),
    the writers and files. Ranks of a stage share their sizes, so each stage is sized once."""
    mp, tp = t.model_parallelism, t.tensor_parallelism
    dp = max(1, world // mp)
    model = optimizer = writers = files = 0
    for pp_rank in range(t.pipeline_parallelism):
        for dp_rank, count in ((0, tp), (1, tp * (dp - 1))):
            if count == 0:
                continue
            out = rank_files(t, dp_rank * mp + pp_rank * tp, world)
            model += count * sum(b for name, b in out if name.endswith("_model_states"))
            optimizer += count * sum(b for name, b in out if name.endswith("_optim_states"))
            writers += count if out else 0
            files += count * len(out)
    return {"parameters": num_parameters(t), "world": world, "tensor": tp, "pipeline": t.pipeline_parallelism,
            "data": dp, "zero_stage": t.zero_stage, "writers": writers, "files": files,
            "model_bytes": model, "optimizer_bytes": optimizer, "total_bytes": model + optimizer,
            "model_gib": model / GIB, "optimizer_gib": optimizer / GIB, "total_gib": (model + optimizer) / GIB}


def default_world(t: TransformerSpec) -> int:
    """The world a DLIO file without a data-parallel size runs as here: the smallest multiple of
    TP x PP (DLIO's default mode needs one) of at least MLPerf's 8 processes."""
    mp = t.model_parallelism
    return mp * max(1, -(-MLPERF_MIN_PROCESSES // mp))
