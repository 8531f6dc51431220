#!/usr/bin/env python3
"""storlab workload vs DLIO (MLPerf Storage's engine), side by side on the same small training
workload (issues 26 and 37, "Beside DLIO").

DLIO 2.0.0 runs from its own virtual environment (made on first use, as the issue's recipe:
`pip install dlio-benchmark==2.0.0 --no-deps` plus its light dependencies and tensorflow-cpu;
DLIO's TFRecord generation needs DALI's tfrecord2idx and its PyTorch loader needs torch, neither
installed, so every workload is npz read by DLIO's TensorFlow loader). Both generate their own
dataset of the same shape in their own folder (storlab does not read DLIO's folder: it has no
storlab manifest).

--workload picks the built-in, scaled down the same way for both tools (`WORKLOADS` below):
- resnet50: DLIO's resnet50_h100 and storlab's, with `++workload.dataset.format=npz`; 256 files
  of one 512 KiB sample, batch 4, 2 read threads, 0.05 s compute (the YAML: 1024 TFRecord files
  of 1251 samples, batch 400, 8 threads, 0.224 s), no shuffling in either.
- unet3d: DLIO's unet3d_h100 and storlab's; the YAML's 168 npz files of one sample, batch 7,
  4 read threads and 0.323 s compute are kept; the record is 1448 x 1448 = 2,096,704 B
  (about 2 MiB; the YAML: 146.6 MB mean) with no spread (the YAML's stdev of 68.3 MB would draw
  different sizes in each tool), so an epoch lasts about 14 s at 24 MiB/s (expected AU 0.554).
  Differences from the YAML: DLIO runs its TensorFlow framework and loader (the YAML says
  pytorch; torch is not installed), and neither tool writes the checkpoint
  (`workflow.checkpoint=False`, `checkpoint.enabled=false`: after_epoch 5 is never reached
  here anyway). Both shuffle files and samples with a seed as the YAML says (DLIO 2.0.0
  shuffles its file list whenever the YAML names file_shuffle at all: it keeps the value as a
  string and compares it with its enum, so "off" cannot be asked of it here); the orders
  differ, the files read do not. Its 24 steps an epoch make the first step (DLIO starts its
  input pipeline inside it) weigh on samples/s; --files 672 gives 96 steps (docs/workloads.md).
The record is a perfect square in both because DLIO writes int(sqrt(record_length))^2 bytes a
sample and storlab record_length bytes: 512 KiB gives DLIO 524,176 B against storlab's 524,288.
Both read with the workload's batch, read threads, compute time and epochs; DLIO reads the whole
npz file (np.load), storlab the sample's byte range in it (the file's zip headers, a few hundred
bytes, are the difference).

Scenarios (each: storlab and DLIO alternately, --rounds rounds, medians):
- tmpfs: /dev/shm, compute-bound (AU near 1 for a reader that keeps up);
- throttled (root, cgroup blkio): ext4 on a loop device capped at --mib-s, storage-bound
  (expected AU = t x X / (B x R) for one accelerator); one epoch, every run starting with the
  page cache dropped (DLIO cannot drop it between epochs and the dataset fits in memory).
"train CPU/acc" leaves start-up out: storlab's is measured inside the run (getrusage over the
epochs, every thread), DLIO's is the run's CPU and wall time less those of the same launch with
training off. Client CPU ("CPU/acc") is that of the whole process tree, start-up included (TensorFlow's import for DLIO,
the interpreter for both), over the run's wall time: on short runs it favours neither much,
since both start a Python interpreter, but DLIO's start-up is the larger.
Reported: AU and samples/s of each and their ratio storlab/DLIO (issue 37's target: AU within 3
points, samples/s within 5 %), and client CPU per emulated accelerator (CPU seconds of the whole
process tree / wall / accelerators, from getrusage of the children) at --accelerators N (DLIO:
mpiexec -n N); the goal is storlab emulating >= 4x DLIO's accelerators per client core.

    python3 benchmarks/vs_dlio.py [--workload resnet50|unet3d] [--rounds 2] [--accelerators 1,4]
                                  [--scenarios tmpfs,throttled]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "storlab-peers", "dlio-venv")
LIGHT_DEPS = ["Pillow", "PyYAML", "h5py", "mpi4py", "numpy", "omegaconf", "pandas", "psutil", "pydftracer==1.0.2",
              "hydra-core", "tensorflow-cpu"]


@dataclass(frozen=True)
class Workload:
    """One built-in as both tools run it here: the same dataset, batch, read threads and compute
    time, and the settings that make their runs the same work."""
    builtin: str                    # storlab's built-in and DLIO's workload YAML of the same name
    files: int
    record: int                     # bytes of the one sample per file
    batch: int
    threads: int
    compute: float                  # seconds a step
    mib_s: int                      # read cap of the throttled scenario unless --mib-s says
    dlio_sets: tuple[str, ...] = ()
    storlab_sets: tuple[str, ...] = ()
    epochs: int = 2                 # tmpfs scenario (throttled: always 1)


WORKLOADS = {
    "resnet50": Workload("resnet50_h100", 256, 512 << 10, 4, 2, 0.05, 24,
                         storlab_sets=('reader.file_shuffle="off"', 'reader.sample_shuffle="off"')),
    "unet3d": Workload("unet3d_h100", 168, 1448 * 1448, 7, 4, 0.323, 24,
                       dlio_sets=("++workload.framework=tensorflow", "++workload.reader.data_loader=tensorflow",
                                  "++workload.workflow.checkpoint=False", "++workload.reader.file_shuffle=seed",
                                  "++workload.reader.sample_shuffle=seed"),
                       storlab_sets=("checkpoint.enabled=false", 'reader.file_shuffle="seed"',
                                     'reader.sample_shuffle="seed"')),
}


def dlio_bin(venv: str) -> str:
    exe = os.path.join(venv, "bin", "dlio_benchmark")
    if os.path.exists(exe):
        return exe
    print(f"== making DLIO's environment in {venv} (once)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    pip = [os.path.join(venv, "bin", "pip"), "install", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + ["dlio-benchmark==2.0.0", "--no-deps"], check=True)
    subprocess.run(pip + LIGHT_DEPS, check=True)
    return exe


def _timed(cmd: list[str], env: dict[str, str] | None = None, cgroup: str | None = None) -> tuple[str, float, float]:
    """Run; (output, wall seconds, CPU seconds of the process tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)

    def join() -> None:
        if cgroup:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, preexec_fn=join if cgroup else None)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}...: exit {r.returncode}: {(r.stderr or r.stdout)[-600:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r.stdout + r.stderr, wall, cpu


_STARTUP: dict[int, tuple[float, float]] = {}


def dlio_startup(w: Workload, exe: str, folder: str, accelerators: int) -> tuple[float, float]:
    """DLIO's start-up alone (wall, CPU): the same command with training off (TensorFlow's import,
    configuration, the dataset listing), measured once per rank count."""
    if accelerators not in _STARTUP:
        _STARTUP[accelerators] = run_dlio(w, exe, folder, accelerators, False, None, startup=True)["wall_cpu"]
    return _STARTUP[accelerators]


def run_dlio(w: Workload, exe: str, folder: str, accelerators: int, generate: bool, cgroup: str | None,
             epochs: int = 0, startup: bool = False) -> dict[str, float]:
    epochs = epochs or w.epochs
    overrides = [f"++workload.dataset.data_folder={folder}", "++workload.dataset.format=npz",
                 f"++workload.dataset.num_files_train={w.files}", "++workload.dataset.num_samples_per_file=1",
                 f"++workload.dataset.record_length={w.record}", "++workload.dataset.record_length_stdev=0",
                 "++workload.dataset.record_length_resize=0",
                 f"++workload.reader.batch_size={w.batch}", f"++workload.reader.read_threads={w.threads}",
                 f"++workload.train.computation_time={w.compute}", f"++workload.train.epochs={epochs}",
                 f"++workload.workflow.generate_data={generate}", f"++workload.workflow.train={not generate and not startup}",
                 f"++workload.output.folder={folder}-out", *w.dlio_sets]
    cmd = [exe, f"workload={w.builtin}", *overrides]
    if accelerators > 1 or generate:   # the same launch with or without training
        mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
        cmd = [mpiexec, "-n", str(accelerators if not generate else 2), *cmd]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    cmd.append(f"hydra.run.dir={folder}-hydra")       # DLIO's Hydra logs beside its data, not in the cwd
    out, wall, cpu = _timed(cmd, env, None if generate else cgroup)
    if generate:
        return {}
    if startup:
        return {"wall_cpu": (wall, cpu)}
    au = float(re.search(r"\[AU\] \(%\): ([0-9.]+)", out).group(1)) / 100
    sps = float(re.search(r"Training Throughput \(samples/second\): ([0-9.]+)", out).group(1))
    w0, c0 = dlio_startup(w, exe, folder, accelerators)
    train_cores = max(0.0, cpu - c0) / max(1e-3, wall - w0) / accelerators
    return {"au": au, "samples_per_s": sps, "cpu_per_accel": cpu / wall / accelerators,
            "train_cpu_per_accel": train_cores}


def run_storlab(w: Workload, folder: str, accelerators: int, cgroup: str | None, drop: str,
                epochs: int = 0) -> dict[str, float]:
    epochs = epochs or w.epochs
    out = folder + f"-r{accelerators}.json"
    sets = [f"dataset.folder={folder}", "dataset.format=npz", f"dataset.files={w.files}", "dataset.samples_per_file=1",
            f"dataset.record_length={w.record}", "dataset.record_length_stdev=0", f"reader.batch_size={w.batch}",
            f"reader.read_threads={w.threads}", f"train.computation_time={w.compute}", f"train.drop_cache=\"{drop}\"",
            *w.storlab_sets]
    cmd = [sys.executable, "-m", "storlab", "workload", w.builtin, "--epochs", str(epochs),
           "--accelerators", str(accelerators), "--json", out, "--no-store", "--quiet"]
    for s in sets:
        cmd += ["--set", s]
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    _, wall, cpu = _timed(cmd, env, cgroup)
    with open(out) as f:
        doc = json.load(f)
    return {"au": doc["au"], "samples_per_s": doc["samples_per_s"], "cpu_per_accel": cpu / wall / accelerators,
            "train_cpu_per_accel": doc["cpu"]["cores_per_accelerator"]}


def scenario_dirs(w: Workload, name: str, mib_s: int):
    """(folder for storlab, folder for DLIO, cgroup or None, cleanup)."""
    if name == "tmpfs":
        base = tempfile.mkdtemp(prefix="storlab-vs-dlio-", dir="/dev/shm")
        return os.path.join(base, "storlab"), os.path.join(base, "dlio"), None, lambda: shutil.rmtree(base, True)
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from testbed import Limits, Testbed

    bed = Testbed().__enter__()
    (dev,) = bed.add_devices(1, (2 * w.files * w.record * 3) // 2 + (256 << 20), Limits(read_bps=mib_s << 20))
    bed.mkfs_ext4(dev)
    mnt = bed.mount(dev, "ext4")
    return os.path.join(mnt, "storlab"), os.path.join(mnt, "dlio"), str(bed.throttle.path), bed.teardown


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="resnet50",
                    help="the built-in both tools run, scaled down (see WORKLOADS)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--accelerators", default="1,4")
    ap.add_argument("--scenarios", default="tmpfs,throttled")
    ap.add_argument("--mib-s", type=int, help="read cap of the throttled scenario (default: the workload's)")
    ap.add_argument("--venv", default=VENV)
    ap.add_argument("--files", type=int, help="files (default: the workload's)")
    ap.add_argument("--record", type=int, help="record length in bytes (default: the workload's)")
    ap.add_argument("--epochs", type=int, help="epochs of the tmpfs scenario (default: 2)")
    a = ap.parse_args()
    w = WORKLOADS[a.workload]
    w = replace(w, files=a.files or w.files, record=a.record or w.record, epochs=a.epochs or w.epochs,
                mib_s=a.mib_s or w.mib_s)
    exe = dlio_bin(a.venv)
    counts = [int(x) for x in a.accelerators.split(",")]
    rows = []
    for name in a.scenarios.split(","):
        if name == "throttled" and os.geteuid() != 0:
            print("throttled: skipped (needs root for loop devices and cgroups)", file=sys.stderr)
            continue
        s_dir, d_dir, cgroup, cleanup = scenario_dirs(w, name, w.mib_s)
        try:
            run_dlio(w, exe, d_dir, 1, True, None)                     # DLIO's own generation
            drop = "always" if cgroup else "never"
            # throttled: one epoch, both cold (DLIO cannot drop the cache between epochs, and the
            # dataset fits in memory, so its second epoch would be read from the page cache)
            epochs = 1 if cgroup else w.epochs
            for n in counts:
                res: dict[str, list[dict[str, float]]] = {"storlab": [], "dlio": []}
                for r in range(a.rounds):
                    order = ("storlab", "dlio") if r % 2 == 0 else ("dlio", "storlab")
                    for who in order:
                        if cgroup:      # both start cold: DLIO has no cache drop of its own
                            subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"], check=False)
                        res[who].append(run_storlab(w, s_dir, n, cgroup, drop, epochs) if who == "storlab"
                                        else run_dlio(w, exe, d_dir, n, False, cgroup, epochs))
                med = {who: {k: statistics.median(x[k] for x in v) for k in v[0]} for who, v in res.items()}
                rows.append((name, n, med))
        finally:
            cleanup()
    expected = min(1.0, w.compute * (w.mib_s << 20) / (w.batch * w.record))
    print(f"workload: {w.builtin}, {w.files} npz files x {w.record} B, batch {w.batch}, {w.threads} read threads, "
          f"compute {w.compute} s, {w.epochs} epoch(s) on tmpfs, 1 throttled; throttled expected AU {expected:.3f} "
          f"at {w.mib_s} MiB/s")
    print(f"{'scenario':10} {'accel':>5} {'AU storlab':>10} {'AU DLIO':>8} {'AU ratio':>8} {'sps storlab':>11} "
          f"{'sps DLIO':>9} {'sps ratio':>9} {'CPU/acc storlab':>15} {'CPU/acc DLIO':>12} {'acc/core ratio':>14} "
          f"{'train CPU/acc storlab':>21} {'train CPU/acc DLIO':>18} {'train ratio':>11}")
    for name, n, m in rows:
        s, d = m["storlab"], m["dlio"]
        print(f"{name:10} {n:5d} {s['au']:10.3f} {d['au']:8.3f} {s['au'] / d['au']:8.3f} {s['samples_per_s']:11.2f} "
              f"{d['samples_per_s']:9.2f} {s['samples_per_s'] / d['samples_per_s']:9.3f} {s['cpu_per_accel']:15.4f} "
              f"{d['cpu_per_accel']:12.4f} {d['cpu_per_accel'] / s['cpu_per_accel']:14.1f} "
              f"{s['train_cpu_per_accel']:21.4f} {d['train_cpu_per_accel']:18.4f} "
              f"{d['train_cpu_per_accel'] / s['train_cpu_per_accel']:11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
