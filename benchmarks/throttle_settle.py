#!/usr/bin/env python3
"""How the blkio throttle delivers a capped rate over short runs (docs/testbed.md, "The throttle").

One loop device on tmpfs, capped in bandwidth (sequential 1 MiB reads) or in IOPS (4 KiB random reads);
storlab reads it at several queue depths and run lengths inside the throttle. For each run: the
rate storlab measured, as a fraction of the cap; the first one-second interval (the burst); and what
the settling rule predicts: cap x (T - QD x service time) / T + one slice of burst / T, i.e. the
requests still in flight at the end are not counted (each waits QD x bs / cap in the throttle) and
the first slice's budget is handed out at once.

    python3 benchmarks/throttle_settle.py [--write-doc docs/testbed.md] [--quick]
Needs root, loop devices and a cgroup I/O throttle.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.testbed import Limits, Testbed, testbed_unavailable  # noqa: E402
from tests.testbed.report import markdown_table, replace_generated  # noqa: E402

MiB = 1 << 20
SLICE_S = 0.1     # blk-throttle slice: HZ / 10 (DFL_THROTL_SLICE_HD); older kernels used HZ / 50 on SSDs


def _engine(qd: int) -> str:
    """psync at depth 1 (io_uring gets the cap or half of it at 1 MiB, run to run), io_uring deeper."""
    return "psync" if qd == 1 else "io_uring"


def settle_rule(cap: float, qd: int, service_s: float, seconds: float) -> float:
    """Expected rate over a run of T s: the last QD requests are in flight (not counted), the
    first slice's budget comes at once."""
    lost = min(seconds, qd * service_s)
    return cap * max(0.0, seconds - lost + SLICE_S) / seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write-doc", help="replace the generated table in this page")
    p.add_argument("--quick", action="store_true", help="fewer cases (one cap)")
    args = p.parse_args()
    why = testbed_unavailable()
    if why:
        print(f"throttle_settle: {why}", file=sys.stderr)
        return 2
    caps = [20] if args.quick else [15, 20, 40]
    rows = []
    started = time.monotonic()
    with Testbed(name=f"storlab-throttle-{os.getpid()}") as bed:
        for cap_mib in caps:
            (dev,) = bed.add_devices(1, 512 * MiB, Limits.both(bps=cap_mib * MiB))
            bed.fill(dev, 512 * MiB)
            for qd in (1, 8, 16):
                for seconds in (2, 5, 10):
                    engine = _engine(qd)
                    doc = bed.run_storlab(["--target", dev, "--allow-destroy", dev, "--rw", "read", "--bs", "1MiB",
                                           "--qd", str(qd), "--engine", engine, "--direct",
                                           "--time", f"{seconds}s"])
                    read = doc["phases"][0]["read"]
                    first = read["timeseries"]["bw_bytes"][0]
                    cap = cap_mib * MiB
                    rule = settle_rule(cap, qd, MiB / cap, seconds)
                    rows.append([f"{cap_mib} MiB/s", "1 MiB seq read", engine, str(qd), str(seconds),
                                 f"{read['bw_bytes'] / MiB:.2f}", f"{read['bw_bytes'] / cap:.0%}",
                                 f"{first / MiB:.1f}", f"{rule / MiB:.2f}"])
                    print(" | ".join(rows[-1]), flush=True)
        (dev,) = bed.add_devices(1, 256 * MiB, Limits.both(iops=500))
        bed.fill(dev, 256 * MiB)
        for qd in (1, 16):
            for seconds in (2, 5, 10):
                doc = bed.run_storlab(["--target", dev, "--allow-destroy", dev, "--rw", "randread", "--bs", "4KiB",
                                       "--qd", str(qd), "--engine", _engine(qd), "--direct",
                                       "--time", f"{seconds}s"])
                read = doc["phases"][0]["read"]
                first = read["timeseries"]["iops"][0]
                rule = settle_rule(500, qd, 1 / 500, seconds)
                rows.append(["500 IOPS", "4 KiB rand read", _engine(qd), str(qd), str(seconds), f"{read['iops']:.0f} IOPS",
                             f"{read['iops'] / 500:.0%}", f"{first:.0f} IOPS", f"{rule:.0f} IOPS"])
                print(" | ".join(rows[-1]), flush=True)
        # the same 1 MiB reads at QD 1 with each engine, three runs each (io_uring is bimodal here)
        (dev,) = bed.add_devices(1, 512 * MiB, Limits.both(bps=20 * MiB))
        bed.fill(dev, 512 * MiB)
        for engine in ("psync", "io_uring"):
            for _ in range(3):
                doc = bed.run_storlab(["--target", dev, "--allow-destroy", dev, "--rw", "read", "--bs", "1MiB",
                                       "--engine", engine, "--direct", "--time", "5s"])
                read = doc["phases"][0]["read"]
                cap = 20 * MiB
                rows.append(["20 MiB/s", "1 MiB seq read", engine, "1", "5", f"{read['bw_bytes'] / MiB:.2f}",
                             f"{read['bw_bytes'] / cap:.0%}", f"{read['timeseries']['bw_bytes'][0] / MiB:.1f}",
                             f"{settle_rule(cap, 1, MiB / cap, 5) / MiB:.2f}"])
                print(" | ".join(rows[-1]), flush=True)
    elapsed = time.monotonic() - started
    table = markdown_table(["cap", "workload", "engine", "QD", "run s", "measured MiB/s", "of cap", "first 1 s",
                            "settle rule"], rows)
    note = (f"Generated by `benchmarks/throttle_settle.py` on {time.strftime('%Y-%m-%d')} "
            f"({os.uname().release}, {elapsed:.0f} s wall time, machine shared with other jobs).\n\n")
    if args.write_doc:
        replace_generated(args.write_doc, "throttle", note + table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
