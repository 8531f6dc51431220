#!/usr/bin/env python3
"""Predicted vs measured on emulated stacks (docs/model.md, "Validation on the testbed").

Each stack is built on the testbed (throttled loop devices on tmpfs, tests/testbed), storlab measures
four workloads inside the throttle, and `storlab.model.predict` predicts them from the members' limits
and their measured unloaded latency, the btrfs geometry (64 KiB stripe) and the workload. Nothing is
fitted: the limits are the ones the throttle is given, the latency is measured once on an
unthrottled member.

    python3 benchmarks/model_validation.py [--write-doc docs/model.md] [--seconds 8] [--only single,raid0x2]
Needs root, loop devices and a cgroup I/O throttle.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "python")]
from storlab.diagnose.probes import counter_delta, member_counters  # noqa: E402
from storlab.model.predict import Device, Workload, predict  # noqa: E402
from storlab.model.stack import Component, DriveType, stack_from_notation  # noqa: E402

from tests.testbed import Limits, Testbed, testbed_unavailable  # noqa: E402
from tests.testbed.report import markdown_table, replace_generated  # noqa: E402
from tests.testbed.stacks import build_stack  # noqa: E402

MiB = 1 << 20
KiB = 1 << 10
BTRFS_STRIPE = 64 * KiB          # btrfs RAID 0/10 stripe length (fixed)
MEMBER_BYTES = 512 * MiB
BPS = 20 * MiB
IOPS = 500
SLOW = Limits.both(bps=10 * MiB, iops=250)
FAST = Limits.both(bps=BPS, iops=IOPS)
TOLERANCE = 0.15


@dataclass(frozen=True)
class StackCase:
    key: str
    label: str
    members: int
    btrfs: str | None = None
    layout: str | None = None            # the model's notation for it
    slow_last: bool = False
    fs: str | None = None
    su: int | None = None
    sw: int | None = None
    mirror_read: str = "balanced"
    shared_bps: int | None = None        # one shared limit over all members (a bus)


CASES = [
    StackCase("single", "single device", 1),
    StackCase("raid0x2", "btrfs RAID 0 over 2", 2, "raid0", "R0/2"),
    StackCase("raid0x4", "btrfs RAID 0 over 4", 4, "raid0", "R0/4"),
    StackCase("raid1x2", "btrfs RAID 1 over 2", 2, "raid1", "R1/2", mirror_read="per-thread"),
    StackCase("raid10x4", "btrfs RAID 10 over 4", 4, "raid10", "R10/4", mirror_read="per-thread"),
    StackCase("raid0slow", "btrfs RAID 0 over 2, one member at half speed", 2, "raid0", "R0/2", slow_last=True),
    StackCase("raid0x4-bus", "btrfs RAID 0 over 4 behind a shared 40 MiB/s limit", 4, "raid0", "R0/4",
              shared_bps=40 * MiB),
    StackCase("xfs-right", "xfs su=64k sw=2 on btrfs RAID 0 over 2", 2, "raid0", "R0/2", fs="xfs",
              su=64 * KiB, sw=2),
    StackCase("xfs-wrong", "xfs su=32k sw=3 on btrfs RAID 0 over 2", 2, "raid0", "R0/2", fs="xfs",
              su=32 * KiB, sw=3),
]


@dataclass(frozen=True)
class WorkloadCase:
    label: str
    rw: str
    bs: int
    qd: int
    threads: int = 1

    def args(self) -> list[str]:
        # depth 1 with the synchronous engine: io_uring on a bare throttled device gets half the cap
        # at 1 MiB (docs/testbed.md); deeper queues need io_uring
        engine = "psync" if self.qd == 1 else "io_uring"
        return ["--rw", self.rw, "--bs", str(self.bs), "--qd", str(self.qd), "--threads", str(self.threads),
                "--engine", engine, "--direct"]


def _label(rw: str, bs: int, qd: int, threads: int = 1) -> str:
    kind = {"read": "seq read", "write": "seq write", "randread": "rand read", "randwrite": "rand write"}[rw]
    size = f"{bs // MiB} MiB" if bs >= MiB else f"{bs // KiB} KiB"
    return f"{kind} {size} QD{qd}" + (f" x{threads} threads" if threads > 1 else "")


# request sizes 4 KiB - 1 MiB, queue depths 1 - 32, 1 - 4 threads; bandwidth- and IOPS-bound points
WORKLOADS = [WorkloadCase(_label(*w), *w) for w in (
    ("read", MiB, 1), ("write", MiB, 1), ("randread", 4 * KiB, 1), ("randread", 4 * KiB, 16),
    ("randread", 4 * KiB, 32, 2), ("randread", 64 * KiB, 4), ("read", 256 * KiB, 8, 4), ("randwrite", 4 * KiB, 8))]
# the original four, for the stacks that only need them (a slow member, a shared bus, xfs on top)
BASIC = WORKLOADS[:4]


@dataclass
class Row:
    stack: str
    workload: str
    unit: str
    measured: float
    predicted: float
    limiting: str
    extra: list[str] = field(default_factory=list)

    @property
    def error(self) -> float:
        return self.measured / self.predicted - 1.0


FULL_MATRIX = ("single", "raid0x2", "raid0x4", "raid1x2", "raid10x4")
READ_SHARE = 0.10      # a member with less than this share of the busiest member's reads was not read


def _members_read(delta: dict[str, dict[str, int]], names: list[str]) -> dict[int, int] | None:
    """Bytes each member read during the run (member index -> bytes), the members below
    READ_SHARE of the busiest left out (metadata, not the workload)."""
    moved = [delta.get(n, {}).get("read_bytes", 0) for n in names]
    top = max(moved, default=0)
    return {i: b for i, b in enumerate(moved) if b >= READ_SHARE * top} if top > 0 else None


def measure_latency_s(bed: Testbed) -> float:
    """Mean latency of 4 KiB random reads at QD 1 on an unthrottled member (inside the cgroup)."""
    (dev,) = bed.add_devices(1, 64 * MiB)
    bed.fill(dev, 64 * MiB)
    doc = bed.run_storlab(["--target", dev, "--allow-destroy", dev, "--rw", "randread", "--bs", "4KiB",
                           "--engine", "io_uring", "--direct", "--time", "2s"])
    return doc["phases"][0]["read"]["lat_ns"]["mean"] / 1e9


def model_for(case: StackCase, latency_s: float):
    # the blkio throttle is a rate limiter (a token bucket per slice), not a queue: queues=False
    fast = Device(BPS, BPS, IOPS, IOPS, latency_s, "20 MiB/s 500 IOPS", shared_time=False,
                  counts_every_request=True, queues=False)
    slow = Device(SLOW.read_bps, SLOW.write_bps, SLOW.read_iops, SLOW.write_iops, latency_s,
                  "10 MiB/s 250 IOPS", shared_time=False, counts_every_request=True, queues=False)
    devices = [fast] * case.members
    if case.slow_last:
        devices[-1] = slow
    if case.layout is None:
        return None, devices
    drive = DriveType("loop", MEMBER_BYTES, 1e6, seq_read_bw_bytes=BPS, seq_write_bw_bytes=BPS,
                      random_read_iops=IOPS, random_write_iops=IOPS, rotational=False)
    path = None
    if case.shared_bps is not None:
        path = Component("bus", kind="link", read_bw_bytes=case.shared_bps, write_bw_bytes=case.shared_bps, groups=1)
    # btrfs computes its RAID in the kernel, as md does: no controller, no controller cache
    return stack_from_notation(case.layout, BTRFS_STRIPE, drive=drive, path=path, engine="md"), devices


def run_case(case: StackCase, seconds: float, latency_s: float) -> list[Row]:
    limits = [FAST] * case.members
    if case.slow_last:
        limits[-1] = SLOW
    rows = []
    with Testbed(name=f"storlab-validation-{os.getpid()}-{case.key}") as bed:
        stack = build_stack(bed, limits, MEMBER_BYTES, btrfs=case.btrfs, fs=case.fs, su=case.su, sw=case.sw,
                            shared_bps=case.shared_bps)
        model, devices = model_for(case, latency_s)
        names = [os.path.basename(m) for m in stack.members]
        workloads = WORKLOADS if case.key in FULL_MATRIX else BASIC
        for w in workloads:
            before = member_counters(names)
            # no ramp on a btrfs mirror: the ramp runs in a thread of its own, whose pid picks its own
            # copies, and its reads would blur which copies the measured phase read
            ramp = "0s" if case.mirror_read == "per-thread" else "1s"
            doc = bed.run_storlab(["--target", stack.target, *stack.run_args, *w.args(), "--ramp", ramp,
                                  "--time", f"{seconds}s"])
            read_by = _members_read(counter_delta(before, member_counters(names)), names)
            phase = doc["phases"][0]
            side = phase["write" if w.rw.endswith("write") else "read"]
            # a btrfs mirror reads one copy per thread, chosen by the thread's pid: the copies read are
            # recorded from the members' counters (as diagnose does) and the prediction follows them
            read_members = read_by if case.mirror_read == "per-thread" and not w.rw.endswith("write") else None
            p = predict(model, Workload(w.rw, w.bs, w.qd, w.threads), devices, mirror_read=case.mirror_read,
                        read_members=read_members)
            if not w.rw.startswith("rand"):
                row = Row(case.label, w.label, "MiB/s", side["bw_bytes"] / MiB, p.bw_bytes / MiB, p.limiting)
            else:
                row = Row(case.label, w.label, "IOPS", side["iops"], p.iops, p.limiting)
            rows.append(row)
            print(f"{row.stack} | {row.workload} | {row.measured:.1f} | {row.predicted:.1f} {row.unit} | "
                  f"{row.error:+.1%} | {row.limiting}", flush=True)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write-doc", help="replace the generated table in this page")
    p.add_argument("--seconds", type=float, default=8.0, help="run time of each measurement (default 8)")
    p.add_argument("--only", help="comma-separated stack keys: " + ",".join(c.key for c in CASES))
    args = p.parse_args()
    why = testbed_unavailable()
    if why:
        print(f"model_validation: {why}", file=sys.stderr)
        return 2
    chosen = CASES if not args.only else [c for c in CASES if c.key in args.only.split(",")]
    started = time.monotonic()
    with Testbed(name=f"storlab-validation-{os.getpid()}-latency") as bed:
        latency_s = measure_latency_s(bed)
    print(f"unthrottled 4 KiB read latency: {latency_s * 1e6:.0f} us", flush=True)
    rows: list[Row] = []
    for case in chosen:
        rows += run_case(case, args.seconds, latency_s)
    elapsed = time.monotonic() - started
    within = sum(abs(r.error) <= TOLERANCE for r in rows)
    table = markdown_table(
        ["stack", "workload", "measured", "predicted", "error", "limiting (model)"],
        [[r.stack, r.workload, f"{r.measured:.1f} {r.unit}", f"{r.predicted:.1f} {r.unit}", f"{r.error:+.1%}",
          r.limiting] for r in rows])
    note = (f"Generated by `benchmarks/model_validation.py --seconds {args.seconds:g}` on {time.strftime('%Y-%m-%d')} "
            f"({os.uname().release}; {elapsed:.0f} s wall time on a 2-CPU machine shared with other jobs). "
            f"Members: {MEMBER_BYTES // MiB} MiB loop devices on tmpfs, {BPS // MiB} MiB/s and {IOPS} IOPS each "
            f"(the slow member {SLOW.read_bps // MiB} MiB/s and {SLOW.read_iops} IOPS); unloaded 4 KiB latency "
            f"measured {latency_s * 1e6:.0f} us; each run {args.seconds:g} s after a 1 s ramp (none on btrfs mirrors), "
            f"QD 1 with psync, deeper queues with io_uring; btrfs mirrors predicted from the copies each run was seen "
            f"to read (the members' kernel counters). "
            f"{within} of {len(rows)} rows within {TOLERANCE:.0%} ({within / len(rows):.0%}).\n\n")
    if args.write_doc:
        replace_generated(args.write_doc, "testbed-validation", note + table)
    print(note + table)
    return 0 if within >= 0.9 * len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
