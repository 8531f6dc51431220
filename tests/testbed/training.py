"""A small training workload on a testbed stack, for the model's validation (tests and benchmarks):
its TOML, its dataset generated outside the throttle, the accelerators `storlab workload --search`
measures inside the throttle, and those `storlab plan perf --workload` predicts from the members'
description (a device profile) and the stack's layout."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .bed import REPO_ROOT, Testbed, TestbedError

__all__ = ["SmallTraining", "prepare_dataset", "measure_fed", "predict_fed", "agree"]


@dataclass(frozen=True)
class SmallTraining:
    """A training workload a handful of accelerators saturate a throttle with in seconds."""
    record_bytes: int = 1 << 20
    batch: int = 1
    computation_s: float = 0.1
    read_threads: int = 2
    prefetch: int = 2
    steps: int = 16                  # per epoch (total_training_steps), every accelerator count
    max_accelerators: int = 8        # the search's bound; the dataset holds `steps` for each
    au_threshold: float = 0.9

    @property
    def files(self) -> int:
        return self.steps * self.batch * self.max_accelerators

    def toml(self, folder: str) -> str:
        return f"""[workload]
name = "small_training"
au_threshold = {self.au_threshold}
[dataset]
folder = "{folder}"
format = "npz"
files = {self.files}
record_length = {self.record_bytes}
[reader]
batch_size = {self.batch}
read_threads = {self.read_threads}
prefetch = {self.prefetch}
[train]
epochs = 1
computation_time = {self.computation_s}
total_training_steps = {self.steps}
drop_cache = "always"
"""

    def write(self, folder: str, path: Path) -> str:
        path.write_text(self.toml(folder))
        return str(path)


def prepare_dataset(work: SmallTraining, folder: str) -> None:
    """Generate the dataset from this (unthrottled) process, so no trial pays for it."""
    from storlab.jobs.workload import DatasetSpec
    from storlab.suites.training.dataset import prepare

    prepare(DatasetSpec(folder=folder, format="npz", files=work.files, record_length=work.record_bytes))


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python"))


def measure_fed(bed: Testbed, job: str, max_accelerators: int, timeout_s: float = 600) -> dict:
    """`storlab workload JOB --search` inside the throttle; the result document (its `search`)."""
    return bed.storlab_command(["workload", job, "--search", "--max-accelerators", str(max_accelerators)], timeout_s)


def predict_fed(job: str, stack: str, profile: str, max_accelerators: int, *extra: str) -> dict:
    """`storlab plan perf STACK --workload JOB --profile PROFILE --dataset-size as-written`; its
    `workload` object (STACK 'device' for one bare member)."""
    cmd = [sys.executable, "-m", "storlab", "plan", "perf", stack, "--workload", job, "--profile", profile,
           "--dataset-size", "as-written", "--max-accelerators", str(max_accelerators), *extra, "--json"]
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise TestbedError(f"{' '.join(cmd[2:])}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    return json.loads(r.stdout)["workload"]


def agree(predicted: int, measured: int, rel: float = 0.15) -> bool:
    """Accelerator counts agree within rel, or by one for small counts (one accelerator of 4 is 25 %)."""
    return abs(predicted - measured) <= max(1.0, rel * measured)
