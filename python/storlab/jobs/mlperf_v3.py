"""MLPerf Storage v3.0's facts a workload is judged by: which workloads and accelerators its
divisions take, each training workload's AU threshold, the simulated accelerators' memory, the
checkpoint models' process counts, and the rule constants (MLPerf Storage Rules, the v3.0
edition: sections 2.1.11, 3.1.2, 3.3.2, 4.3.1, 4.3.4, 4.3.5, 4.6.1; Table 2 and Table 3).

Plain data, no I/O: `storlab workload --list` (division per built-in), the translator (the
accelerator a YAML is written for) and the rule checks (suites/training/rules.py) read it.
"""
from __future__ import annotations

__all__ = ["RULES_EDITION", "ACCELERATORS", "ACCELERATOR_MEMORY_GB", "CLOSED_ACCELERATORS", "CLOSED_TRAINING",
           "AU_THRESHOLDS", "CHECKPOINT_PROCESSES", "SUBSET_MODEL", "SUBSET_PROCESSES", "HOST_MEMORY_MULTIPLIER",
           "STEPS_PER_EPOCH", "CHECKPOINT_MEMORY_MULTIPLIER", "WARMUP_RUNS", "MEASURED_RUNS", "RUN_SPREAD",
           "model_of", "division", "accelerator_of_name"]

RULES_EDITION = "3.0"

# Table 3: simulated accelerator memory (GB) and where it counts; v100 appears only in older configs
ACCELERATOR_MEMORY_GB = {"b200": 180, "mi355": 288, "h100": 80, "a100": 80}
ACCELERATORS = (*ACCELERATOR_MEMORY_GB, "v100")
CLOSED_ACCELERATORS = ("b200", "mi355")
# §2.1.11: the training workloads of the closed and open divisions
CLOSED_TRAINING = ("unet3d", "retinanet")
# the closed training workloads' AU thresholds (their v3.0 YAMLs' metric.au, alike on every
# accelerator; §3.3.2 is the check). The exploration workloads' differ by accelerator (flux: 0.80 on
# a100/h100, 0.90 on b200): their own file's metric.au is their threshold
AU_THRESHOLDS = {"unet3d": 0.90, "retinanet": 0.85}
# Table 2 and §4.6.1: processes of each checkpoint model in CLOSED
CHECKPOINT_PROCESSES = {"llama3_8b": 8, "llama3_70b": 64, "llama3_405b": 512, "llama3_1t": 1024}
# §4.3.5: a subset run is the 8B model with exactly 8 processes
SUBSET_MODEL, SUBSET_PROCESSES = "llama3_8b", 8
# §3.1.2: the dataset is at least 5 x the clients' memory and 500 steps x batch x accelerators
HOST_MEMORY_MULTIPLIER = 5
STEPS_PER_EPOCH = 500
# §4.3.1: checkpoint data per client more than 3 x its memory, or the cache cleared between write and read
CHECKPOINT_MEMORY_MULTIPLIER = 3
# §2.1.17: one warm-up run and five measured runs; storlab asks the measured runs' samples/s to lie
# within 5 % of their mean (issue 37; MLPerf's checker compares the runs' timestamps, not their spread)
WARMUP_RUNS, MEASURED_RUNS, RUN_SPREAD = 1, 5, 0.05


def model_of(name: str) -> str:
    """The model a workload name is of: unet3d_b200 -> unet3d, llama3_8b -> llama3_8b."""
    if name.startswith("llama3_"):
        return name if name in CHECKPOINT_PROCESSES else "llama3"
    base = name.rsplit("_", 1)
    return base[0] if len(base) == 2 and base[1] in ACCELERATORS else name


def accelerator_of_name(name: str) -> str:
    """The accelerator a workload or file name ends with (unet3d_b200 -> b200), or ""."""
    tail = name.rsplit("_", 1)[-1]
    return tail if "_" in name and tail in ACCELERATORS else ""


def division(name: str, accelerator: str) -> str:
    """Where MLPerf Storage v3.0 takes this workload: "closed, open" (training: unet3d and
    retinanet on b200 or mi355; checkpointing: the llama3 models) or "exploration" (the rest)."""
    model = model_of(name)
    if model in CHECKPOINT_PROCESSES:
        return "closed, open"
    if model in CLOSED_TRAINING and accelerator in CLOSED_ACCELERATORS:
        return "closed, open"
    return "exploration"
