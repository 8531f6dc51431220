#!/usr/bin/env python3
"""storlab workload vs DLIO (MLPerf Storage's engine), side by side on the same small training
workload (issue 26, "Beside DLIO").

DLIO 2.0.0 runs from its own virtual environment (made on first use, as the issue's recipe:
`pip install dlio-benchmark==2.0.0 --no-deps` plus its light dependencies and tensorflow-cpu;
DLIO's TFRecord generation needs DALI's tfrecord2idx and its PyTorch loader needs torch, neither
installed, so the workload is DLIO's resnet50_h100 with `++workload.dataset.format=npz`, read by
DLIO's TensorFlow loader). Both generate their own dataset of the same shape in their own folder
(storlab does not read DLIO's folder: it has no storlab manifest).

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
Reported: AU and samples/s of each and their ratio storlab/DLIO (target: within 10 %), and
client CPU per emulated accelerator (CPU seconds of the whole process tree / wall / accelerators,
from getrusage of the children) at --accelerators N (DLIO: mpiexec -n N); the goal is storlab
emulating >= 4x DLIO's accelerators per client core.

    python3 benchmarks/vs_dlio.py [--rounds 2] [--accelerators 1,4] [--scenarios tmpfs,throttled]
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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "storlab-peers", "dlio-venv")
LIGHT_DEPS = ["Pillow", "PyYAML", "h5py", "mpi4py", "numpy", "omegaconf", "pandas", "psutil", "pydftracer==1.0.2",
              "hydra-core", "tensorflow-cpu"]

# the workload: resnet50_h100 reshaped small (npz, one 512 KiB sample per file)
FILES, RECORD, BATCH, THREADS, COMPUTE, EPOCHS = 256, 512 << 10, 4, 2, 0.05, 2


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


def dlio_startup(exe: str, folder: str, accelerators: int) -> tuple[float, float]:
    """DLIO's start-up alone (wall, CPU): the same command with training off (TensorFlow's import,
    configuration, the dataset listing), measured once per rank count."""
    if accelerators not in _STARTUP:
        _STARTUP[accelerators] = run_dlio(exe, folder, accelerators, False, None, startup=True)["wall_cpu"]
    return _STARTUP[accelerators]


def run_dlio(exe: str, folder: str, accelerators: int, generate: bool, cgroup: str | None,
             epochs: int = 0, startup: bool = False) -> dict[str, float]:
    epochs = epochs or EPOCHS
    overrides = [f"++workload.dataset.data_folder={folder}", "++workload.dataset.format=npz",
                 f"++workload.dataset.num_files_train={FILES}", "++workload.dataset.num_samples_per_file=1",
                 f"++workload.dataset.record_length={RECORD}", "++workload.dataset.record_length_resize=0",
                 f"++workload.reader.batch_size={BATCH}", f"++workload.reader.read_threads={THREADS}",
                 f"++workload.train.computation_time={COMPUTE}", f"++workload.train.epochs={epochs}",
                 f"++workload.workflow.generate_data={generate}", f"++workload.workflow.train={not generate and not startup}",
                 f"++workload.output.folder={folder}-out"]
    cmd = [exe, "workload=resnet50_h100", *overrides]
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
    w0, c0 = dlio_startup(exe, folder, accelerators)
    train_cores = max(0.0, cpu - c0) / max(1e-3, wall - w0) / accelerators
    return {"au": au, "samples_per_s": sps, "cpu_per_accel": cpu / wall / accelerators,
            "train_cpu_per_accel": train_cores}


def run_storlab(folder: str, accelerators: int, cgroup: str | None, drop: str, epochs: int = 0) -> dict[str, float]:
    epochs = epochs or EPOCHS
    out = folder + f"-r{accelerators}.json"
    sets = [f"dataset.folder={folder}", "dataset.format=npz", f"dataset.files={FILES}", "dataset.samples_per_file=1",
            f"dataset.record_length={RECORD}", "dataset.record_length_stdev=0", f"reader.batch_size={BATCH}",
            f"reader.read_threads={THREADS}", f"train.computation_time={COMPUTE}", f"train.drop_cache=\"{drop}\"",
            "reader.file_shuffle=\"off\"", "reader.sample_shuffle=\"off\""]
    cmd = [sys.executable, "-m", "storlab", "workload", "resnet50_h100", "--epochs", str(epochs),
           "--accelerators", str(accelerators), "--json", out, "--no-store", "--quiet"]
    for s in sets:
        cmd += ["--set", s]
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    _, wall, cpu = _timed(cmd, env, cgroup)
    with open(out) as f:
        doc = json.load(f)
    return {"au": doc["au"], "samples_per_s": doc["samples_per_s"], "cpu_per_accel": cpu / wall / accelerators,
            "train_cpu_per_accel": doc["cpu"]["cores_per_accelerator"]}


def scenario_dirs(name: str, mib_s: int):
    """(folder for storlab, folder for DLIO, cgroup or None, cleanup)."""
    if name == "tmpfs":
        base = tempfile.mkdtemp(prefix="storlab-vs-dlio-", dir="/dev/shm")
        return os.path.join(base, "storlab"), os.path.join(base, "dlio"), None, lambda: shutil.rmtree(base, True)
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from testbed import Limits, Testbed

    bed = Testbed().__enter__()
    (dev,) = bed.add_devices(1, (2 * FILES * RECORD * 3) // 2 + (256 << 20), Limits(read_bps=mib_s << 20))
    bed.mkfs_ext4(dev)
    mnt = bed.mount(dev, "ext4")
    return os.path.join(mnt, "storlab"), os.path.join(mnt, "dlio"), str(bed.throttle.path), bed.teardown


def main() -> int:
    global FILES, RECORD, EPOCHS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--accelerators", default="1,4")
    ap.add_argument("--scenarios", default="tmpfs,throttled")
    ap.add_argument("--mib-s", type=int, default=24, help="read cap of the throttled scenario")
    ap.add_argument("--venv", default=VENV)
    ap.add_argument("--files", type=int, default=256)
    ap.add_argument("--record", type=int, default=512 << 10, help="record length in bytes")
    ap.add_argument("--epochs", type=int, default=2, help="epochs of the tmpfs scenario")
    a = ap.parse_args()
    FILES, RECORD, EPOCHS = a.files, a.record, a.epochs
    exe = dlio_bin(a.venv)
    counts = [int(x) for x in a.accelerators.split(",")]
    rows = []
    for name in a.scenarios.split(","):
        if name == "throttled" and os.geteuid() != 0:
            print("throttled: skipped (needs root for loop devices and cgroups)", file=sys.stderr)
            continue
        s_dir, d_dir, cgroup, cleanup = scenario_dirs(name, a.mib_s)
        try:
            run_dlio(exe, d_dir, 1, True, None)                       # DLIO's own generation
            drop = "always" if cgroup else "never"
            # throttled: one epoch, both cold (DLIO cannot drop the cache between epochs, and the
            # dataset fits in memory, so its second epoch would be read from the page cache)
            epochs = 1 if cgroup else EPOCHS
            for n in counts:
                res: dict[str, list[dict[str, float]]] = {"storlab": [], "dlio": []}
                for r in range(a.rounds):
                    order = ("storlab", "dlio") if r % 2 == 0 else ("dlio", "storlab")
                    for who in order:
                        if cgroup:      # both start cold: DLIO has no cache drop of its own
                            subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"], check=False)
                        res[who].append(run_storlab(s_dir, n, cgroup, drop, epochs) if who == "storlab"
                                        else run_dlio(exe, d_dir, n, False, cgroup, epochs))
                med = {w: {k: statistics.median(x[k] for x in v) for k in v[0]} for w, v in res.items()}
                rows.append((name, n, med))
        finally:
            cleanup()
    expected = min(1.0, COMPUTE * (a.mib_s << 20) / (BATCH * RECORD))
    print(f"workload: {FILES} npz files x {RECORD} B, batch {BATCH}, {THREADS} read threads, compute {COMPUTE} s, "
          f"{EPOCHS} epoch(s) on tmpfs, 1 throttled; throttled expected AU {expected:.3f} at {a.mib_s} MiB/s")
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
