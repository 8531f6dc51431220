"""What MPI orchestration costs, from 1 to 64 ranks (oversubscribed on a small machine): the gap
between phases (null backend) against a plain single-process run, the per-phase exchange alone
and its cost per tree hop, the start-up to the first I/O, and the aggregate null-engine IOPS; then
the throughput of 4 ranks against 4 threads of one process on the same /dev/shm workload.

    python benchmarks/mpi_overhead.py [--ranks 1,2,4,8,16,32,64] [--phases 30] [--repeat 3]
                                      [--dir /dev/shm] [--size 256m] [--json OUT] [--skip-threads]

Gap between phases k-1 and k = start of k - (start of k-1 + its last worker's finish): the runner's
bookkeeping, the next plan's build, and under MPI the one barrier before phase k starts, whose
reduction merges phase k-1's time bases and worker spans up the tree (a few numbers per message,
whatever the ranks below) and whose broadcast brings its de-skew window down (each rank keeps its
bytes in the window for the final gather). Each phase does one 4 KiB null
request, so the gap is nearly all of a phase's wall time. Overhead = median MPI gap - median plain
gap. The collectives run along a binomial tree (measure/mpi/tree.py): a boundary is one gather and
one broadcast, 2 x ceil(log2 N) hops deep, so the cost per hop measured here gives the expected
boundary at 10,000 ranks (28 hops). The counts (tree sweeps and messages per phase, heartbeat
peers) are taken on every rank and the busiest reported.
Medians of --repeat rounds; on a loaded or small machine the
ranks share the cores, so the figures are upper bounds.
Needs mpi4py and mpiexec (pip install 'storlab[mpi]').
"""
from __future__ import annotations

import argparse
import json
import math
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


def process_start_unix_s() -> float:
    """When this process started (from /proc), on the wall clock."""
    ticks = os.sysconf("SC_CLK_TCK")
    start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime"))
    return btime + start_ticks / ticks


def worker(args) -> None:
    """Runs under mpiexec: the overhead job through the MPI orchestrator, JSON of rank 0 to --out."""
    from storlab.measure.aggregate import merge_window_summaries, window_of_summary, window_summary
    from storlab.measure.mpi.orchestrator import Session

    launched = args.launched if args.launched is not None else process_start_unix_s()
    session = Session.start(60.0)
    job = overhead_job(f"{args.dir}/ovh{{rank}}", args.phases)
    comm = session.world
    sweeps0, sent0 = comm.collectives, comm.messages_sent
    t0 = time.perf_counter()
    doc = session.run(job, comm, ["mpi_overhead"])
    wall = time.perf_counter() - t0
    # Counted on each rank over the run, then the largest over the ranks: tree sweeps (a gather or
    # a broadcast) per phase, data messages one rank sent per phase (both with the run's start-up
    # check of the job's shape, one allgather), and the ranks one rank sends heartbeats to.
    counts = comm.gather({"sweeps": comm.collectives - sweeps0, "sent": comm.messages_sent - sent0,
                          "watched": session.liveness.watched()})
    # The messages of one phase boundary alone, with the ranks already in step: the barrier that
    # merges the finished phase's window up the tree (reduce) and brings it down (broadcast).
    report = {"start_unix_s": time.time(), "offset_s": 0.0, "complete": True, "stop_reason": "done",
              "workers": [{"start_s": 0.0, "end_s": 1.0, "read_bytes": 4096}]}
    comm.barrier()
    per_phase = []
    for _ in range(200):
        t = time.perf_counter()
        summary = comm.reduce(window_summary(comm.rank, report), merge_window_summaries)
        comm.bcast(None if summary is None else window_of_summary(summary))
        per_phase.append(time.perf_counter() - t)
        comm.barrier()   # only so the next round starts in step; not part of a phase, not timed
    # One message's latency: ping-pong between ranks 0 and 1 through the same polling sends and
    # receives the collectives use (half the median round trip).
    rtts = []
    for _ in range(200 if comm.size > 1 else 0):
        if comm.rank == 0:
            t = time.perf_counter()
            comm.send(None, 1)
            comm.recv(1)
            rtts.append(time.perf_counter() - t)
        elif comm.rank == 1:
            comm.recv(0)
            comm.send(None, 0)
    if session.rank == 0:
        Path(args.out).write_text(json.dumps({
            "gaps_s": gaps_s(doc), "wall_s": wall, "complete": doc["complete"],
            "messages_s": statistics.median(per_phase),
            "message_s": statistics.median(rtts) / 2 if rtts else None,
            "sweeps_per_phase": max(c["sweeps"] for c in counts) / args.phases,
            "sent_per_phase": max(c["sent"] for c in counts) / args.phases,
            "heartbeat_peers": max(c["watched"] for c in counts),
            "first_io_s": doc["phases"][0]["start_unix_s"] - launched}))


def mpiexec() -> str:
    here = Path(sys.executable).parent / "mpiexec"
    found = str(here) if here.exists() else shutil.which("mpiexec")
    if not found:
        sys.exit("mpi_overhead: no mpiexec (pip install 'storlab[mpi]')")
    return found


def hops(n: int) -> int:
    """Tree hops of one phase boundary at n ranks: a gather and a broadcast of depth ceil(log2 n)."""
    return 2 * max(1, math.ceil(math.log2(n))) if n > 1 else 0


def null_iops(n: int, work: str, seconds: float) -> float:
    """Aggregate IOPS of n ranks, each one null-engine thread at qd 1 for `seconds` (de-skewed)."""
    out = Path(work) / f"iops-{n}.json"
    cmd = [mpiexec(), "-n", str(n), sys.executable, "-m", "storlab", "run", "--engine", "null", "--rw", "randread",
           "--bs", "4k", "--time", str(seconds), "--json", str(out), "--no-store", "-q"]
    subprocess.run(cmd, check=True, timeout=600, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    phase = json.loads(out.read_text())["phases"][0]
    a = phase["aggregate"]
    return (a.get("deskew_bw_bytes") or a["bw_bytes"]) / 4096


def precompile() -> None:
    """Compile storlab's modules to bytecode once, as installing it does (pip writes the .pyc files).
    Run from a source tree with PYTHONDONTWRITEBYTECODE set, each rank would otherwise compile
    every module it imports (about 0.2 s of CPU per rank here: at 64 ranks on 2 cores, 6 s of
    the start-up)."""
    import compileall

    import storlab

    compileall.compile_dir(str(Path(storlab.__file__).parent), quiet=1)


def measure_overhead(args, work: str) -> dict:
    from storlab.measure.runner import run_job

    print(f"orchestration cost per phase (null backend, {args.phases} phases, median of {args.repeat} rounds; "
          f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f})")
    plain = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        doc = run_job(overhead_job(f"{work}/ovh-plain", args.phases))
        plain.append((statistics.median(gaps_s(doc)), (time.perf_counter() - t0) / args.phases))
    base_gap = statistics.median(g for g, _ in plain)
    rows = [{"ranks": 0, "gap_s": base_gap, "wall_per_phase_s": statistics.median(w for _, w in plain)}]
    for n in args.ranks:
        gs, ws, ms, fs, io, one = [], [], [], [], [], []
        for _ in range(args.repeat):
            out = Path(work) / f"ovh-{n}.json"
            launched = time.time()
            subprocess.run([mpiexec(), "-n", str(n), sys.executable, __file__, "--worker", "--phases",
                            str(args.phases), "--dir", work, "--out", str(out), "--launched", repr(launched)],
                           check=True, timeout=900)
            r = json.loads(out.read_text())
            gs.append(statistics.median(r["gaps_s"]))
            ws.append(r["wall_s"] / args.phases)
            ms.append(r["messages_s"])
            fs.append(r["first_io_s"])
            if r["message_s"] is not None:
                one.append(r["message_s"])
            io.append(null_iops(n, work, args.iops_seconds))
        rows.append({"ranks": n, "gap_s": statistics.median(gs), "wall_per_phase_s": statistics.median(ws),
                     "messages_s": statistics.median(ms), "first_io_s": statistics.median(fs),
                     "null_iops": statistics.median(io), "message_s": statistics.median(one) if one else None,
                     "sweeps_per_phase": r["sweeps_per_phase"], "sent_per_phase": r["sent_per_phase"],
                     "heartbeat_peers": r["heartbeat_peers"]})
    print(f"{'ranks':>6} {'gap ms':>8} {'overhead ms':>12} {'wall/phase ms':>14} {'exchange ms':>12} "
          f"{'us/hop':>8} {'us/msg':>7} {'sweeps':>7} {'sent':>5} {'peers':>6} {'first I/O s':>12} {'null IOPS':>12}")
    for r in rows:
        n = r["ranks"]
        per_hop = r.get("messages_s", 0) / hops(n) if hops(n) else 0.0
        r["per_hop_s"] = per_hop
        print(f"{n or 'plain':>6} {r['gap_s'] * 1e3:8.2f} {(r['gap_s'] - base_gap) * 1e3:12.2f} "
              f"{r['wall_per_phase_s'] * 1e3:14.2f} {r.get('messages_s', 0) * 1e3:12.3f} {per_hop * 1e6:8.1f} "
              f"{(r.get('message_s') or 0) * 1e6:7.1f} {r.get('sweeps_per_phase', 0):7.1f} "
              f"{r.get('sent_per_phase', 0):5.1f} {r.get('heartbeat_peers', 0):6d} "
              f"{r.get('first_io_s', 0):12.2f} {r.get('null_iops', 0):12.0f}")
    # One message's cost where every rank has a core (as on a cluster): half the ping-pong's round
    # trip. A boundary at N ranks is hops(N) messages deep, so 10,000 ranks cost hops(10,000) such
    # messages. Oversubscribed counts measure the scheduler handing the cores round, so they only
    # bound it from above.
    cores = os.cpu_count() or 1
    own_core = [r["message_s"] for r in rows if 1 < r["ranks"] <= cores and r.get("message_s")]
    shared = [r["message_s"] for r in rows if r["ranks"] > cores and r.get("message_s")]
    estimate = None
    if own_core or shared:
        msg = statistics.median(own_core or shared)
        estimate = {"ranks": 10_000, "hops": hops(10_000), "message_s": msg, "boundary_s": msg * hops(10_000),
                    "rank0_messages": hops(10_000), "flat_rank0_messages": 2 * (10_000 - 1),
                    "message_from": "ranks <= cores" if own_core else "oversubscribed ranks (an upper bound)",
                    "oversubscribed_message_s": statistics.median(shared) if shared else None}
        print(f"expected phase boundary at 10,000 ranks: {hops(10_000)} messages deep x {msg * 1e6:.1f} us "
              f"= {estimate['boundary_s'] * 1e3:.2f} ms; rank 0 handles {hops(10_000)} messages (a flat "
              f"gather and broadcast: {2 * (10_000 - 1)}) (message cost from {estimate['message_from']}"
              + (f"; oversubscribed here: {estimate['oversubscribed_message_s'] * 1e6:.0f} us)"
                 if shared and own_core else ")"))
    iops = [r["null_iops"] for r in rows if r["ranks"] >= 2]
    if iops:
        print(f"aggregate null IOPS from 2 to {rows[-1]['ranks']} ranks: {min(iops) / max(iops):.2f} of the highest "
              "(flat = 1; ranks beyond the cores share them)")
    print("(overhead: the MPI gap minus the plain one, including waiting for the slowest rank's phase to "
          "end; exchange: the per-phase messages alone, ranks already in step; us/msg: half a ping-pong "
          "between ranks 0 and 1; sweeps, sent: tree sweeps and data messages of the busiest rank per "
          "phase (the run's one start-up allgather included); peers: ranks the busiest rank sends "
          "heartbeats to)")
    return {"plain_gap_s": base_gap, "rows": rows, "at_10000": estimate, "load": os.getloadavg()[0]}


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
    ap.add_argument("--ranks", default="1,2,4,8,16,32,64",
                    type=lambda t: [int(x) for x in t.split(",")], help="rank counts to measure")
    ap.add_argument("--iops-seconds", type=float, default=2.0, help="length of each null IOPS run")
    ap.add_argument("--json", help="write the figures as JSON to this file")
    ap.add_argument("--skip-threads", action="store_true", help="leave out the ranks-vs-threads comparison")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--launched", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    work = tempfile.mkdtemp(prefix="storlab-mpi-bench-", dir=args.dir)
    try:
        print(f"cpus {os.cpu_count()}, python {sys.version.split()[0]}")
        precompile()
        figures = measure_overhead(args, work)
        if not args.skip_threads:
            measure_ranks_vs_threads(args, work)
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
