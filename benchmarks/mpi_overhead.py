"""What MPI orchestration costs: the gap between phases at 1, 2 and 4 ranks (null backend) against
a plain single-process run, and the throughput of 4 ranks against 4 threads of one process on the
same /dev/shm workload (files f.0 .. f.3 either way).

    python benchmarks/mpi_overhead.py [--phases 30] [--repeat 3] [--dir /dev/shm] [--size 256m]

Gap between phases k-1 and k = start of k - (start of k-1 + its last worker's finish): the runner's
bookkeeping, the next plan's build, and under MPI the after-phase exchange (gather, window,
bytes in window) and the barrier before the next start. Each phase does one 4 KiB null request,
so the gap is nearly all of a phase's wall time. Overhead = median MPI gap - median plain gap.
Needs mpi4py and mpiexec (pip install 'storlab[mpi]').
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
from pathlib import Path


def overhead_job(target: str, phases: int):
    from storlab.jobs.job import resolve_job

    return resolve_job({"target": [target], "size": "1m", "engine": "null", "rw": "read",
                        "io_size": "4k", "no_store": True},
                       phases=[{"name": f"p{k}", "options": {}} for k in range(phases)])


def gaps_s(doc: dict) -> list[float]:
    ph = doc["phases"]
    return [ph[k]["start_unix_s"] - (ph[k - 1]["start_unix_s"] + ph[k - 1]["aggregate"]["last_done_s"])
            for k in range(1, len(ph))]


def worker(args) -> None:
    """Runs under mpiexec: the overhead job through the MPI orchestrator, JSON of rank 0 to --out."""
    from storlab.measure.mpi.orchestrator import Session

    session = Session.start(30.0)
    job = overhead_job(f"{args.dir}/ovh{{rank}}", args.phases)
    t0 = time.perf_counter()
    doc = session.run(job, session.world, ["mpi_overhead"])
    wall = time.perf_counter() - t0
    # The messages of one phase alone, with the ranks already in step: barrier before the start,
    # gather of the reports, broadcast of the window, gather of the bytes in it.
    comm = session.world
    report = {"start_unix_s": 0.0, "workers": [{"start_s": 0.0, "end_s": 1.0, "read_bytes": 4096}]}
    comm.barrier()
    per_phase = []
    for _ in range(200):
        t = time.perf_counter()
        comm.barrier()
        comm.gather(report)
        comm.bcast({"window": [0.0, 1.0], "shifts": [0.0] * comm.size})
        comm.gather(4096.0)
        per_phase.append(time.perf_counter() - t)
        comm.barrier()   # only so the next round starts in step; not part of a phase, not timed
    if session.rank == 0:
        Path(args.out).write_text(json.dumps({"gaps_s": gaps_s(doc), "wall_s": wall, "complete": doc["complete"],
                                              "messages_s": statistics.median(per_phase)}))


def mpiexec() -> str:
    here = Path(sys.executable).parent / "mpiexec"
    found = str(here) if here.exists() else shutil.which("mpiexec")
    if not found:
        sys.exit("mpi_overhead: no mpiexec (pip install 'storlab[mpi]')")
    return found


def measure_overhead(args, work: str) -> None:
    from storlab.measure.runner import run_job

    print(f"orchestration overhead per phase (null backend, {args.phases} phases, median of {args.repeat} runs)")
    rows = []
    plain = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        doc = run_job(overhead_job(f"{work}/ovh-plain", args.phases))
        plain.append((statistics.median(gaps_s(doc)), (time.perf_counter() - t0) / args.phases))
    base_gap = statistics.median(g for g, _ in plain)
    rows.append(("plain (no MPI)", base_gap, statistics.median(w for _, w in plain)))
    for n in (1, 2, 4):
        gs, ws, ms = [], [], []
        for _ in range(args.repeat):
            out = Path(work) / f"ovh-{n}.json"
            subprocess.run([mpiexec(), "-n", str(n), sys.executable, __file__, "--worker", "--phases",
                            str(args.phases), "--dir", work, "--out", str(out)], check=True, timeout=300)
            r = json.loads(out.read_text())
            gs.append(statistics.median(r["gaps_s"]))
            ws.append(r["wall_s"] / args.phases)
            ms.append(r["messages_s"])
        rows.append((f"{n} rank(s)", statistics.median(gs), statistics.median(ws), statistics.median(ms)))
    print(f"{'':16} {'gap ms':>8} {'overhead ms':>12} {'wall/phase ms':>14} {'messages ms':>12}")
    for name, gap, wall, *msg in rows:
        print(f"{name:16} {gap * 1e3:8.2f} {(gap - base_gap) * 1e3:12.2f} {wall * 1e3:14.2f} "
              f"{msg[0] * 1e3 if msg else 0:12.3f}")
    print("(overhead: the MPI gap minus the plain one, including waiting for the slowest rank's phase to "
          "end; messages: the per-phase exchange alone, ranks already in step)")


def storlab_json(cmd: list[str], out: Path) -> dict:
    subprocess.run(cmd + ["--json", str(out), "--no-store", "-q"], check=True, timeout=600,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(out.read_text())


def measure_ranks_vs_threads(args, work: str) -> None:
    st = [sys.executable, "-m", "storlab", "run"]
    workloads = [
        ("write 1m seq", ["--rw", "write", "--bs", "1m", "--size", args.size]),
        ("read 1m seq", ["--rw", "read", "--bs", "1m", "--size", args.size]),
        ("randread 4k 3s", ["--rw", "randread", "--bs", "4k", "--size", args.size, "--time", "3s"]),
    ]
    print(f"\n4 ranks x 1 thread vs 1 process x 4 threads, psync on {args.dir}, {args.size} per file, "
          f"median of {args.repeat} alternating runs")
    print(f"{'workload':16} {'ranks MiB/s':>12} {'threads MiB/s':>14} {'ranks/threads':>14} {'de-skewed ratio':>16}")
    for name, opts in workloads:
        ranks, threads, dranks, dthreads = [], [], [], []
        for _ in range(args.repeat):   # alternate, so drift in the machine hits both alike
            d = storlab_json([mpiexec(), "-n", "4", *st, "--target", f"{work}/rk.{{rank}}", *opts], Path(work) / "r.json")
            a = d["phases"][0]["aggregate"]
            ranks.append(a["bw_bytes"])
            dranks.append(a["deskew_bw_bytes"] or a["bw_bytes"])
            d = storlab_json([*st, "--target", f"{work}/th", "--files", "per_thread", "--threads", "4", *opts],
                             Path(work) / "t.json")
            a = d["phases"][0]["aggregate"]
            threads.append(a["bw_bytes"])
            dthreads.append(a["deskew_bw_bytes"] or a["bw_bytes"])
        r, t = statistics.median(ranks), statistics.median(threads)
        dr, dt = statistics.median(dranks), statistics.median(dthreads)
        print(f"{name:16} {r / 2**20:12.0f} {t / 2**20:14.0f} {r / t:14.2f} {dr / dt:16.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phases", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--size", default="256m", help="bytes per file in the ranks-vs-threads comparison")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    work = tempfile.mkdtemp(prefix="storlab-mpi-bench-", dir=args.dir)
    try:
        print(f"cpus {os.cpu_count()}, python {sys.version.split()[0]}")
        measure_overhead(args, work)
        measure_ranks_vs_threads(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
