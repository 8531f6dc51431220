#!/usr/bin/env python3
"""Predicted against measured accelerators of a training workload on the testbed (docs/model.md,
"Training workloads"; docs/workloads.md, "Sizing storage with the model").

For each stack (a single throttled loop device with ext4, btrfs RAID 0 over 2, btrfs RAID 1 over 2)
a member is profiled with `storlab plan profile` inside the throttle (the model's description of
it: nothing is fitted to the workload), `storlab plan perf STACK --workload JOB --profile MEMBER`
predicts the accelerators the stack feeds at the AU threshold, and `storlab workload JOB --search`
measures them inside the throttle. Reported: both counts, their ratio, the predicted and measured
AU at the measured count n and at n + 1 (a trial the search made), and the limiting component.
Then a checkpoint (128 MiB over 4 writers, fsync, read back after a cache drop) on a btrfs RAID 0
over 2 members capped both ways: predicted against measured seconds per write and read.

    python3 benchmarks/workload_model.py [--only single,raid0x2,raid1x2] [--cap-mib 32] [--no-checkpoint]
Needs root, loop devices and a cgroup I/O throttle. The figures are wall-clock AU on whatever else
the machine runs: on a loaded machine the emulation's threads are late now and then.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "python")]

from tests.testbed import Limits, Testbed, testbed_unavailable  # noqa: E402
from tests.testbed.report import markdown_table  # noqa: E402
from tests.testbed.training import SmallTraining, agree, measure_fed, predict_fed, prepare_dataset  # noqa: E402

MiB = 1 << 20
MEMBER_BYTES = 512 * MiB
TOLERANCE = 0.15


@dataclass(frozen=True)
class Case:
    key: str
    label: str
    members: int
    btrfs: str | None        # None: ext4 on the single member
    stack: str               # plan perf's STACK
    extra: tuple[str, ...] = ()


CASES = [
    Case("single", "ext4 on one throttled loop", 1, None, "device"),
    Case("raid0x2", "btrfs RAID 0 over 2", 2, "raid0", "R0/2", ("--chunk", "64k")),
    Case("raid1x2", "btrfs RAID 1 over 2", 2, "raid1", "R1/2", ("--chunk", "64k", "--mirror-read", "per-thread")),
]


def profile_member(bed: Testbed, device: str, out: Path) -> dict:
    """`storlab plan profile DEVICE` inside the throttle (reads only): the member as the model sees it."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    child = bed.popen([sys.executable, "-m", "storlab", "plan", "profile", device, "--rw", "randread,read",
                       "--request", "64k,1m", "--qd", "1,4", "--time", "1s", "--size", "64MiB", "--output", str(out)],
                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = child.communicate(timeout=300)
    if child.returncode != 0:
        raise RuntimeError(f"plan profile {device}: exit {child.returncode}: {err.strip()[-400:]}")
    return json.loads(out.read_text())


def run_case(case: Case, work: SmallTraining, cap: int, tmp: Path) -> dict:
    with Testbed(name=f"storlab-wlmodel-{os.getpid()}-{case.key}") as bed:
        members = bed.add_devices(case.members, MEMBER_BYTES, Limits(read_bps=cap))
        bed.fill(members[0], 64 * MiB)          # profiled region: written, so reads reach the device
        profile_path = tmp / f"{case.key}-member.json"
        profile = profile_member(bed, members[0], profile_path)
        if case.btrfs is None:
            bed.mkfs_ext4(members[0])
            top = bed.mount(members[0], "ext4")
        else:
            top = bed.btrfs(members, case.btrfs)
        folder = os.path.join(top, "data")
        prepare_dataset(work, folder)
        job = work.write(folder, tmp / f"{case.key}.toml")
        predicted = predict_fed(job, case.stack, str(profile_path), work.max_accelerators, *case.extra)
        measured = measure_fed(bed, job, work.max_accelerators)
    trials = {t["accelerators"]: t["au"] for t in measured["search"]["trials"]}
    fed = measured["search"]["max_accelerators"]

    def predicted_au(n: int) -> float | None:
        """The model's AU at the count the measurement reached (and one beyond)."""
        if n < 1:
            return None
        at = predict_fed(job, case.stack, str(profile_path), work.max_accelerators, *case.extra,
                         "--accelerators", str(n))
        return at["at_accelerators"]["au"]
    return {"case": case, "profile_read_mib": profile["read_bw_bytes"] / MiB,
            "predicted": predicted["accelerators_fed"], "measured": fed,
            "p_au": predicted_au(fed), "p_au_next": predicted_au(fed + 1),
            "m_au": trials.get(fed), "m_au_next": trials.get(fed + 1),
            "limiting": (predicted["at_fed"] or predicted["beyond"])["limiting"], "trials": trials}


CHECKPOINT_JOB = """[workload]
name = "small_checkpoint"
train = false
accelerators = {writers}
[checkpoint]
enabled = true
folder = "{folder}"
model_size = {size}
ranks_total = {writers}
count_write = 2
count_read = 2
"""


def checkpoint_case(cap: int, tmp: Path, writers: int = 4, size: int = 128 * MiB) -> dict:
    """A checkpoint of `size` bytes over `writers` ranks on a btrfs RAID 0 over 2 members capped at
    `cap` both ways: `storlab workload` measures its write (to fsync) and read-back seconds,
    `plan perf R0/2 --workload` predicts them from the members' caps (described, as a profile)."""
    from storlab.model.profile import DeviceProfile, save_profile

    profile = tmp / "checkpoint-member.json"
    save_profile(DeviceProfile("loop", cap, cap, 1e6, 1e6, 20e-6, 20e-6, 1, False), str(profile))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    with Testbed(name=f"storlab-wlmodel-{os.getpid()}-checkpoint") as bed:
        members = bed.add_devices(2, MEMBER_BYTES, Limits.both(bps=cap))
        top = bed.btrfs(members, "raid0")
        job = tmp / "checkpoint.toml"
        job.write_text(CHECKPOINT_JOB.format(writers=writers, folder=os.path.join(top, "ck"), size=size))
        out = tmp / "checkpoint.json"
        child = bed.popen([sys.executable, "-m", "storlab", "workload", str(job), "--json", str(out), "--no-store",
                           "--quiet"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, err = child.communicate(timeout=600)
        if child.returncode != 0:
            raise RuntimeError(f"storlab workload {job}: exit {child.returncode}: {err.strip()[-400:]}")
        measured = json.loads(out.read_text())["checkpoint"]
    r = subprocess.run([sys.executable, "-m", "storlab", "plan", "perf", "R0/2", "--chunk", "64k", "--workload", str(job),
                        "--profile", str(profile), "--json"], env=env, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"plan perf --workload {job}: {r.stderr.strip()[-400:]}")
    predicted = json.loads(r.stdout)["workload"]["checkpoint"]
    return {"measured": measured, "predicted": predicted, "writers": writers, "size": size}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="comma-separated cases: " + ",".join(c.key for c in CASES))
    p.add_argument("--cap-mib", type=int, default=32, help="each member's read cap in MiB/s (default 32)")
    p.add_argument("--no-checkpoint", action="store_true", help="leave out the checkpoint write and read-back")
    args = p.parse_args()
    why = testbed_unavailable()
    if why:
        print(f"workload_model: {why}", file=sys.stderr)
        return 2
    chosen = CASES if not args.only else [c for c in CASES if c.key in args.only.split(",")]
    work = SmallTraining(max_accelerators=16)
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="storlab-wlmodel-") as tmp:
        for case in chosen:
            r = run_case(case, work, args.cap_mib * MiB, Path(tmp))
            print(f"{case.label}: member profiled at {r['profile_read_mib']:.1f} MiB/s; predicted {r['predicted']}, "
                  f"measured {r['measured']} (trials {r['trials']})", flush=True)
            rows.append(r)

    def au(x):
        return "-" if x is None else f"{x:.3f}"
    table = markdown_table(
        ["stack", "predicted", "measured", "predicted / measured", "AU at n (pred / meas)", "AU at n+1 (pred / meas)",
         "limiting (model)"],
        [[r["case"].label, str(r["predicted"]), str(r["measured"]),
          f"{r['predicted'] / r['measured']:.2f}" if r["measured"] else "-",
          f"{au(r['p_au'])} / {au(r['m_au'])}", f"{au(r['p_au_next'])} / {au(r['m_au_next'])}", r["limiting"]]
         for r in rows])
    within = sum(agree(r["predicted"], r["measured"], TOLERANCE) for r in rows)
    print(f"\nGenerated by `benchmarks/workload_model.py --cap-mib {args.cap_mib}` on {time.strftime('%Y-%m-%d')} "
          f"({os.uname().release}; {time.monotonic() - started:.0f} s on a 2-CPU machine shared with other jobs: "
          f"loaded-machine figures). Workload: {work.record_bytes // MiB} MiB samples, batch {work.batch}, "
          f"{work.computation_s:g} s compute, {work.read_threads} read threads, {work.steps} steps per epoch, AU "
          f"threshold {work.au_threshold:g}; members {args.cap_mib} MiB/s read caps. {within} of {len(rows)} within "
          f"{TOLERANCE:.0%} (or one accelerator).\n")
    print(table)
    if not args.no_checkpoint:
        with tempfile.TemporaryDirectory(prefix="storlab-wlmodel-") as tmp:
            ck = checkpoint_case(args.cap_mib * MiB, Path(tmp))
        m, pr = ck["measured"], ck["predicted"]
        print(f"\nCheckpoint of {ck['size'] // MiB} MiB over {ck['writers']} writers (fsync), btrfs RAID 0 over 2, "
              f"members capped at {args.cap_mib} MiB/s both ways; seconds per checkpoint (mean of 2):\n")
        print(markdown_table(["phase", "predicted s", "measured s", "predicted / measured", "limiting (model)"],
                             [[kind, f"{pr[kind + '_seconds']:.2f}", f"{m[kind + '_seconds']:.2f}",
                               f"{pr[kind + '_seconds'] / m[kind + '_seconds']:.2f}", pr[kind + "_limiting"]]
                              for kind in ("write", "read")]))
    return 0 if within == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
