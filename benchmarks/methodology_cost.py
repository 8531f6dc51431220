#!/usr/bin/env python3
"""What the methodology features cost: verification on vs off, and the overhead of a pass.

Verification: the same workload with --verify off, crc32c and xxh3, alternating over --rounds
rounds on a /dev/shm file; prints median throughput and the ratio to verification off (writes
generate the payload and checksum; reads checksum every block).
Passes: `--passes N --time T` against N x T: the wall-clock overhead per pass (plan, thread start,
statistics, result assembly).

    python3 benchmarks/methodology_cost.py [--rounds 3] [--seconds 2]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

WORKLOADS = [
    ("1 MiB sequential write", ["--rw", "write", "--bs", "1m"], "write", "bw_bytes"),
    ("1 MiB sequential read", ["--rw", "read", "--bs", "1m"], "read", "bw_bytes"),
    ("4 KiB random read", ["--rw", "randread", "--bs", "4k"], "read", "iops"),
    ("4 KiB random write", ["--rw", "randwrite", "--bs", "4k"], "write", "iops"),
]


def storlab(args: list[str]) -> dict:
    out = subprocess.run(["storlab", "run", *args, "--json", "-", "-q", "--no-store"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--passes", type=int, default=5)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="storlab-cost-", dir="/dev/shm")
    try:
        # one file per checksum kind and block size, laid out with them: a verified read must use
        # the block size the data was written with, and find its own kind of header
        files = {(kind, bs): f"{d}/v-{kind}-{bs}.dat" for kind in ("off", "crc32c", "xxh3") for bs in ("1m", "4k")}
        for (kind, bs), path in files.items():
            storlab(["--target", path, "--size", "512m", "--rw", "write", "--bs", bs, "--verify", kind])
        target = files[("off", "1m")]
        print(f"# verification cost: {args.rounds} rounds of {args.seconds:g} s, psync, 512 MiB /dev/shm files")
        print("| workload | verify off | crc32c (ratio) | xxh3 (ratio) |")
        print("|---|---|---|---|")
        for title, wl, direction, metric in WORKLOADS:
            values: dict[str, list[float]] = {"off": [], "crc32c": [], "xxh3": []}
            for _ in range(args.rounds):
                for kind in values:
                    doc = storlab(["--target", files[(kind, wl[3])], *wl, "--time", f"{args.seconds}s", "--verify", kind,
                                   "--no-fsync-end"])
                    p = doc["phases"][0]
                    assert kind == "off" or p["verify"]["mismatches"] == 0
                    values[kind].append(p[direction][metric])
            med = {k: statistics.median(v) for k, v in values.items()}
            unit = (lambda x: f"{x / 2**20:,.0f} MiB/s") if metric == "bw_bytes" else (lambda x: f"{x:,.0f} IOPS")
            print(f"| {title} | {unit(med['off'])} | {unit(med['crc32c'])} ({med['crc32c'] / med['off']:.2f}) | "
                  f"{unit(med['xxh3'])} ({med['xxh3'] / med['off']:.2f}) |")

        print()
        print(f"# pass overhead: --passes {args.passes} --time 1s (null engine) against {args.passes} x 1 s")
        overheads = []
        for _ in range(args.rounds):
            t0 = time.monotonic()
            storlab(["--target", target, "--engine", "null", "--time", "1s", "--passes", str(args.passes)])
            overheads.append((time.monotonic() - t0 - args.passes * 1.0) / args.passes)
            t0 = time.monotonic()
            storlab(["--target", target, "--engine", "null", "--time", "1s"])
            single = time.monotonic() - t0 - 1.0
        print(f"overhead per pass: median {statistics.median(overheads) * 1000:.0f} ms "
              f"(one-pass process start-up and teardown: {single * 1000:.0f} ms)")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
