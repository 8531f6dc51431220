"""The KV-cache job of `storlab kvcache`: MLPerf Storage v3.0's KV-cache benchmark as its README,
code and Rules.md (section 6) define it. The models' KV bytes per token, the three CLOSED options
(Rules Table KVCache-1) and the sequence locks (seed 42, 3 trials, 90 s between options), and
`resolve_options`, which turns the command's values into one `KvOption` per option to run.
Plain data; suites/kvcache/ runs it.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..errors import UserError

__all__ = ["ModelShape", "MODELS", "KvOption", "BUILTINS", "CLOSED_SEED", "CLOSED_TRIALS",
           "CLOSED_DELAY_S", "OVERRIDES", "resolve_options", "GIB"]

GIB = 1 << 30            # the benchmark's "GB" of --gpu-mem-gb and --cpu-mem-gb is 1024**3 bytes


@dataclass(frozen=True)
class ModelShape:
    """What sizes a model's KV cache (kv-cache.py's ModelConfig for MHA/GQA models)."""
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    dtype_bytes: int = 2                # float16

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_bytes_per_token(self) -> int:
        """layers x kv_heads x head_dim x 2 (K and V) x bytes per element."""
        return self.layers * self.kv_heads * self.head_dim * 2 * self.dtype_bytes

    def object_shape(self, tokens: int) -> tuple[int, int, int, int, int]:
        """The shape of one KV object of `tokens` tokens: (layers, K/V, tokens, kv_heads, head_dim)."""
        return (self.layers, 2, tokens, self.kv_heads, self.head_dim)


# The two models the CLOSED options use (kv-cache.py's _DEFAULT_MODEL_CONFIGS).
MODELS: dict[str, ModelShape] = {
    "llama3.1-8b": ModelShape("Llama 3.1 8B", layers=32, hidden=4096, heads=32, kv_heads=8),
    "llama3.1-70b-instruct": ModelShape("Llama 3.1 70B Instruct", layers=80, hidden=8192, heads=64, kv_heads=8),
}


@dataclass(frozen=True)
class KvOption:
    """One option of the benchmark: the per-client workload every rank runs in full."""
    number: int                         # 1, 2, 3 (Table KVCache-1); the option it was derived from
    name: str
    model: str
    users: int                          # simulated users per client (rank)
    duration_s: float
    gpu_mem_bytes: int
    cpu_mem_bytes: int
    max_concurrent_allocs: int          # 0: no bound
    generation_mode: str = "none"       # per-token sleep: none 0, fast 2 ms, realistic 30 ms

    def record(self) -> dict[str, Any]:
        return {"option": self.number, "name": self.name, "model": self.model, "users": self.users,
                "duration_s": self.duration_s, "gpu_mem_bytes": self.gpu_mem_bytes,
                "cpu_mem_bytes": self.cpu_mem_bytes, "max_concurrent_allocs": self.max_concurrent_allocs,
                "generation_mode": self.generation_mode,
                "kv_bytes_per_token": MODELS[self.model].kv_bytes_per_token}


# Rules.md Table KVCache-1 (and mlperf_wrapper.py's WORKLOAD_PARAMS).
BUILTINS: dict[int, KvOption] = {
    1: KvOption(1, "Max Storage Stress", "llama3.1-8b", 200, 300.0, 0, 0, 16),
    2: KvOption(2, "Storage Throughput", "llama3.1-8b", 100, 300.0, 0, 4 * GIB, 16),
    3: KvOption(3, "Large Model (70B)", "llama3.1-70b-instruct", 70, 300.0, 0, 0, 4),
}
CLOSED_SEED, CLOSED_TRIALS, CLOSED_DELAY_S = 42, 3, 90.0      # Rules 6.3.2.1, the sequence locks

# command value -> the KvOption field it overrides (an OPEN run)
OVERRIDES = {"model": "model", "users": "users", "duration": "duration_s", "gpu_mem": "gpu_mem_bytes",
             "cpu_mem": "cpu_mem_bytes", "max_concurrent_allocs": "max_concurrent_allocs",
             "generation_mode": "generation_mode"}


def resolve_options(numbers: tuple[int, ...], values: dict[str, Any]) -> list[KvOption]:
    """The options to run, in the order given, each with the overrides in `values` (None: the
    option's own value) applied."""
    if not numbers:
        raise UserError("--option: name at least one of 1, 2, 3")
    changes = {field: values[key] for key, field in OVERRIDES.items() if values.get(key) is not None}
    if "model" in changes and changes["model"] not in MODELS:
        raise UserError(f"--model: {changes['model']!r} is not a model; allowed: {', '.join(MODELS)}")
    return [replace(BUILTINS[n], **changes) for n in numbers]
