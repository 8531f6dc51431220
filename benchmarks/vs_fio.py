#!/usr/bin/env python3
"""storlab vs fio, side by side on identical workloads (issue: foundation, "Performance").

Uses Debian's `fio` if present (installs nothing). For each workload it runs storlab and fio
alternately (A B A B ...) for --rounds rounds and prints the median ratio storlab/fio of the
throughput (IOPS for 4 KiB workloads, bandwidth for 1 MiB ones) and of the mean latency.
Workloads 2 and 4 need root (a loop device backed by a /dev/shm file); they are skipped otherwise.

Random offsets: both tools run with their defaults, which agree: every block of the range once per
pass in random order (fio's random map; storlab's full-period permutation). Latency: both report
`lat` (slat + clat) as fio defines it; the ratio compares those means.

    python3 benchmarks/vs_fio.py [--rounds 3] [--seconds 5] [--only 1,5] [--json OUT] [--busiest 3]

--busiest N: in each run, the N threads of the whole host that used the most CPU over the middle
of the run (from /proc, a window from 30 % to 70 % of it), as % of one CPU, so a workload bound
by a kernel thread both tools wait on (a loop device's worker) shows as that thread near 100 % in
both.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field


@dataclass
class Workload:
    number: int
    title: str
    rw: str
    bs: str
    engine: str
    qd: int = 1
    threads: int = 1
    direct: bool = False
    on_loop: bool = False
    metric: str = "iops"          # iops | bw_bytes
    extra_fio: list[str] = field(default_factory=list)


WORKLOADS = [
    Workload(1, "4 KiB randread, psync, 1 thread, buffered, /dev/shm", "randread", "4k", "psync"),
    Workload(2, "4 KiB randread, io_uring QD32, O_DIRECT, loop on /dev/shm", "randread", "4k", "io_uring",
             qd=32, direct=True, on_loop=True),
    Workload(3, "1 MiB read, psync, buffered, /dev/shm", "read", "1m", "psync", metric="bw_bytes"),
    Workload(4, "1 MiB write, io_uring QD8, O_DIRECT, loop on /dev/shm", "write", "1m", "io_uring",
             qd=8, direct=True, on_loop=True, metric="bw_bytes"),
    Workload(5, "4 KiB randread, null engine, QD1, latency on", "randread", "4k", "null"),
    Workload(6, "4 KiB randread, psync, 2 threads, /dev/shm", "randread", "4k", "psync", threads=2),
]

FILE_SIZE = "1g"


def thread_ticks() -> dict[tuple[str, str], tuple[str, int]]:
    """(pid, tid) -> (thread name, user + system clock ticks) of every thread on the host."""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            name = st[st.index("(") + 1:st.rindex(")")]
            fields = st[st.rindex(")") + 2:].split()
            out[(pid, tid)] = (name, int(fields[11]) + int(fields[12]))
    return out


def run_sampled(cmd: list[str], seconds: float, busiest: int) -> tuple[str, list[tuple[str, float]]]:
    """Run `cmd` (a run of `seconds`); its stdout, and with `busiest` the threads that used the
    most CPU from 30 % to 70 % of the run: (name, % of one CPU)."""
    if not busiest:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout, []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3 * seconds)
    before, t0 = thread_ticks(), time.monotonic()
    time.sleep(0.4 * seconds)
    after, t1 = thread_ticks(), time.monotonic()
    out, err = proc.communicate()
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd, out, err)
    hz = os.sysconf("SC_CLK_TCK")
    used = [(name, 100.0 * (ticks - before[key][1]) / hz / (t1 - t0))
            for key, (name, ticks) in after.items() if key in before]
    return out, sorted(used, key=lambda x: -x[1])[:busiest]


def run_storlab(w: Workload, target: str, seconds: float, busiest: int = 0) -> dict:
    cmd = ["storlab", "run", "--target", target, "--rw", w.rw, "--bs", w.bs, "--engine", w.engine,
           "--qd", str(w.qd), "--threads", str(w.threads), "--time", f"{seconds}s", "--thread-layout", "shared",
           "--json", "-", "-q", "--no-store", "--no-fsync-end"]
    if w.direct:
        cmd.append("--direct")
    if w.on_loop:
        cmd += ["--allow-destroy", target]
    else:
        cmd += ["--size", FILE_SIZE]
    out, threads = run_sampled(cmd, seconds, busiest)
    doc = json.loads(out)
    d = doc["phases"][0]["read" if "read" in w.rw else "write"]
    return {"iops": d["iops"], "bw_bytes": d["bw_bytes"], "lat_mean_ns": d["lat_ns"]["mean"],
            "lat_p99_ns": d["lat_ns"]["p99"], "busiest": threads}


def run_fio(w: Workload, target: str, seconds: float, busiest: int = 0) -> dict:
    engine = {"psync": "psync", "io_uring": "io_uring", "null": "null"}[w.engine]
    cmd = ["fio", "--name=bench", f"--filename={target}", f"--rw={w.rw}", f"--bs={w.bs}",
           f"--ioengine={engine}", f"--iodepth={w.qd}", f"--numjobs={w.threads}", "--group_reporting",
           "--time_based", f"--runtime={seconds}", "--randrepeat=0",
           f"--direct={1 if w.direct else 0}", "--output-format=json", "--thread", *w.extra_fio]
    if not w.on_loop:
        cmd.append(f"--size={FILE_SIZE}")
    out, threads = run_sampled(cmd, seconds, busiest)
    job = json.loads(out[out.index("{"):])["jobs"][0]
    d = job["read" if "read" in w.rw else "write"]
    return {"iops": d["iops"], "bw_bytes": d["bw_bytes"], "lat_mean_ns": d["lat_ns"]["mean"],
            "lat_p99_ns": d["clat_ns"]["percentile"].get("99.000000", 0), "busiest": threads}


class LoopDevice:
    """A loop device over a /dev/shm file, filled once so reads hit real data."""

    def __init__(self, size_bytes: int) -> None:
        fd, self.backing = tempfile.mkstemp(prefix="storlab-bench-", suffix=".img", dir="/dev/shm")
        os.close(fd)
        with open(self.backing, "wb") as f:
            chunk = os.urandom(1 << 20)
            for _ in range(size_bytes >> 20):
                f.write(chunk)
        self.device = subprocess.run(["losetup", "-f", "--show", self.backing], capture_output=True,
                                     text=True, check=True).stdout.strip()

    def close(self) -> None:
        subprocess.run(["losetup", "-d", self.device], capture_output=True)
        os.unlink(self.backing)


def fmt_metric(metric: str, value: float) -> str:
    return f"{value / 2**20:,.0f} MiB/s" if metric == "bw_bytes" else f"{value:,.0f} IOPS"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--only", default="", help="comma-separated workload numbers")
    ap.add_argument("--json", help="write the medians and ratios as JSON to this file")
    ap.add_argument("--busiest", type=int, default=0, metavar="N",
                    help="print the N busiest threads on the host during each run (see above)")
    args = ap.parse_args()
    if not shutil.which("fio"):
        print("fio not found: install Debian's fio (apt-get install fio) to run this comparison", file=sys.stderr)
        return 2
    if not shutil.which("storlab"):
        print("storlab not installed: pip install .", file=sys.stderr)
        return 2
    chosen = {int(x) for x in args.only.split(",") if x.strip()}
    fio_version = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"# storlab vs {fio_version}; {args.rounds} rounds of {args.seconds:g} s, alternating; "
          f"{os.cpu_count()} CPUs; kernel {os.uname().release}")
    rows = []
    shm_dir = tempfile.mkdtemp(prefix="storlab-bench-", dir="/dev/shm")
    try:
        for w in WORKLOADS:
            if chosen and w.number not in chosen:
                continue
            loop = None
            if w.on_loop:
                if os.geteuid() != 0 or not shutil.which("losetup"):
                    rows.append((w, None, "skipped: needs root for a loop device"))
                    continue
                loop = LoopDevice(1 << 30)
                target = loop.device
            else:
                target = os.path.join(shm_dir, f"w{w.number}.dat")
            try:
                ratios, lat_ratios, s_vals, f_vals = [], [], [], []
                for r in range(args.rounds):
                    s = run_storlab(w, target, args.seconds, args.busiest)
                    f = run_fio(w, target, args.seconds, args.busiest)
                    s_vals.append(s[w.metric])
                    f_vals.append(f[w.metric])
                    ratios.append(s[w.metric] / f[w.metric])
                    lat_ratios.append(s["lat_mean_ns"] / f["lat_mean_ns"] if f["lat_mean_ns"] else float("nan"))
                    print(f"  [{w.number}] round {r + 1}: storlab {fmt_metric(w.metric, s[w.metric])}, "
                          f"fio {fmt_metric(w.metric, f[w.metric])}", file=sys.stderr)
                    for tool, x in (("storlab", s), ("fio", f)):
                        if x["busiest"]:
                            print(f"      busiest threads during {tool}: " +
                                  ", ".join(f"{name} {pct:.0f} %" for name, pct in x["busiest"]), file=sys.stderr)
                rows.append((w, (statistics.median(s_vals), statistics.median(f_vals),
                                 statistics.median(ratios), min(ratios), max(ratios),
                                 statistics.median(lat_ratios)), ""))
            finally:
                if loop:
                    loop.close()
    finally:
        shutil.rmtree(shm_dir, ignore_errors=True)

    print()
    print("| # | workload | storlab (median) | fio (median) | ratio storlab/fio (median, min–max) | mean-latency ratio |")
    print("|---|---|---|---|---|---|")
    for w, vals, note in rows:
        if vals is None:
            print(f"| {w.number} | {w.title} | — | — | {note} | — |")
            continue
        s, f, ratio, lo, hi, lat = vals
        print(f"| {w.number} | {w.title} | {fmt_metric(w.metric, s)} | {fmt_metric(w.metric, f)} | "
              f"**{ratio:.2f}** ({lo:.2f}–{hi:.2f}) | {lat:.2f} |")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"fio": fio_version, "rounds": args.rounds, "seconds": args.seconds, "workloads": [
                {"number": w.number, "title": w.title, "metric": w.metric, "skipped": note} if vals is None else
                {"number": w.number, "title": w.title, "metric": w.metric, "storlab": vals[0], "fio": vals[1],
                 "ratio": vals[2], "ratio_min": vals[3], "ratio_max": vals[4], "lat_ratio": vals[5]}
                for w, vals, note in rows]}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
