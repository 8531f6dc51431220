#!/usr/bin/env python3
"""storlab's nbd and nfs engines vs fio 3.42's on the same servers (issue 35: >= 1.0 of fio on
every row, client CPU per GiB no more than fio's).

The servers are the tests' own (tests/testbed/servers.py): nbdkit's memory plugin on a Unix
socket, and nfs-ganesha (VFS backend, the export on tmpfs, NFSv3) in a network namespace of its
own, where both tools then run. Each row runs storlab and fio alternately, round by round, for
--seconds each: sequential 1 MiB reads (qd 4) and random 4 KiB reads (qd 16), with 1 and 4 clients
(storlab threads, fio numjobs; each a connection of its own in both tools). The figures are each
tool's read bandwidth (fio: `read.bw_bytes` summed over jobs with group_reporting; storlab:
`read.bw_bytes`) and the CPU each used per GiB read (fio: its whole process, user + system, as the
kernel accounted it once it ended, fio starting in milliseconds; storlab: the phase's
`cpu.self_user_s` + `self_system_s`, which leaves Python's start-up out). The table gives each
tool's median and the median of the per-round ratios storlab/fio. fio comes from
../shared/peers/build-fio.sh (its nbd and nfs engines need libnbd and libnfs). Needs root for the
NFS server's namespaces.

    sudo python3 benchmarks/vs_fio_network.py [--rounds 3] [--seconds 5] [--fio PATH] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "python")]
from testbed.servers import GaneshaServer, NbdServer, nbd_unavailable, nfs_unavailable  # noqa: E402

GiB = 1 << 30
ROWS = [  # (name, rw, bs, qd)
    ("seq 1 MiB", "read", "1m", 4),
    ("rand 4 KiB", "randread", "4k", 16),
]
CLIENTS = (1, 4)


def run(cmd: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    """Run cmd; the CPU seconds (user + system) the kernel accounted to it once it ended."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{cmd[0]} did not finish within 120 s") from None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{cmd[0]}: {(r.stderr or r.stdout).strip()[-500:]}")
    return r, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_storlab(place, target: str, rw: str, bs: str, qd: int, clients: int, seconds: float, work: Path) -> tuple[float, float, int]:
    out = work / "storlab.json"
    run(place([sys.executable, "-m", "storlab", "run", "--target", target, "--rw", rw, "--bs", bs,
               "--qd", str(qd), "--threads", str(clients), "--time", f"{seconds}s", "--no-store", "-q",
               "--json", str(out)]))
    phase = json.loads(out.read_text())["phases"][0]
    read, cpu = phase["read"], phase["cpu"]
    return read["bw_bytes"], cpu["self_user_s"] + cpu["self_system_s"], read["bytes"]


def run_fio(place, fio: str, engine_opts: list[str], rw: str, bs: str, qd: int, clients: int, seconds: float) -> tuple[float, float, int]:
    r, cpu = run(place([fio, "--name=net", *engine_opts, f"--rw={rw}", f"--bs={bs}", f"--iodepth={qd}",
                   f"--numjobs={clients}", "--group_reporting", "--time_based", f"--runtime={seconds:g}",
                          "--output-format=json"]))
    job = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]
    return job["read"]["bw_bytes"], cpu, job["read"]["io_bytes"]


def compare(label: str, storlab_run, fio_run, rounds: int) -> dict:
    pairs = []
    for i in range(rounds):
        # alternate which tool goes first, so a slow spell does not always land on one of them
        runs = (storlab_run, fio_run) if i % 2 == 0 else (fio_run, storlab_run)
        try:
            got = {f: f() for f in runs}
        except RuntimeError as e:     # one tool hung or failed: the row says so instead of a figure
            print(f"{label:34s} no figure: {e}", flush=True)
            return {"figure": label, "ratio": None, "error": str(e)}
        pairs.append((got[storlab_run], got[fio_run]))
    s_bw = statistics.median(s[0] for s, _ in pairs)
    f_bw = statistics.median(f[0] for _, f in pairs)
    ratio = statistics.median(s[0] / f[0] for s, f in pairs)
    s_cpu = statistics.median(s[1] / (s[2] / GiB) for s, _ in pairs)
    f_cpu = statistics.median(f[1] / (f[2] / GiB) for _, f in pairs)
    row = {"figure": label, "storlab_bw_bytes": s_bw, "fio_bw_bytes": f_bw, "ratio": ratio,
           "storlab_cpu_s_per_gib": s_cpu, "fio_cpu_s_per_gib": f_cpu}
    print(f"{label:34s} storlab {s_bw / 1e6:9.1f} MB/s  fio {f_bw / 1e6:9.1f} MB/s  ratio {ratio:5.3f}  "
          f"CPU s/GiB {s_cpu:6.2f} vs {f_cpu:6.2f}", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--fio", default=str(Path.home() / ".cache/storlab-peers/fio/bin/fio"),
                    help="fio 3.42 with the nbd and nfs engines (../shared/peers/build-fio.sh)")
    ap.add_argument("--only", default="nbd,nfs")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    if not os.access(args.fio, os.X_OK):
        print(f"vs_fio_network: no fio at {args.fio} (../shared/peers/build-fio.sh)", file=sys.stderr)
        return 2
    rows = []

    def grid(kind: str, place, target: str, fio_opts: list[str], work: Path) -> None:
        for name, rw, bs, qd in ROWS:
            for n in CLIENTS:
                def ours(rw=rw, bs=bs, qd=qd, n=n):
                    return run_storlab(place, target, rw, bs, qd, n, args.seconds, work)

                def theirs(rw=rw, bs=bs, qd=qd, n=n):
                    return run_fio(place, args.fio, fio_opts, rw, bs, qd, n, args.seconds)

                rows.append(compare(f"{kind} {name} qd {qd}, {n} client(s)", ours, theirs, args.rounds))

    only = args.only.split(",")
    with tempfile.TemporaryDirectory(prefix="storlab-vs-fio-net-") as tmp:
        work = Path(tmp)
        if "nbd" in only and not nbd_unavailable():
            with NbdServer(work, "1G", log=False) as srv:
                # nbdkit's memory plugin is sparse: written once, so reads return data, not holes
                subprocess.run([sys.executable, "-m", "storlab", "run", "--target", srv.url, "--rw", "write",
                                "--bs", "1m", "--qd", "4", "--no-store", "-q"], check=True, cwd=REPO)
                grid("nbd", lambda argv: argv, srv.url, ["--ioengine=nbd", f"--uri={srv.url}"], work)
        if "nfs" in only and not nfs_unavailable():
            export = Path(tempfile.mkdtemp(prefix="storlab-vs-fio-nfs-", dir="/dev/shm"))
            try:
                (export / "data").write_bytes(os.urandom(1 << 20) * 512)     # 512 MiB, in the server's memory
                with GaneshaServer(work, export) as srv:
                    grid("nfs", srv.run_here, srv.url("data"), ["--ioengine=nfs", f"--nfs_url=nfs://127.0.0.1{export}?version=3",
                                                                 "--filename=data", "--size=512m"], work)
            finally:
                shutil.rmtree(export, ignore_errors=True)
    doc = {"rows": [{"figure": f"vs_fio_network: {r['figure']}", "value": r["ratio"], "goal": ">= 1.0",
                     "met": None if r["ratio"] is None else r["ratio"] >= 1.0} for r in rows], "detail": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
