#!/usr/bin/env python3
"""storlab meta vs mdtest (or fio's file engines), side by side on identical metadata workloads
(issue 4, "Performance").

If an `mdtest` binary is on PATH the peer is mdtest (`-F -C -T -E -r`, files of --file-size bytes
written at create and read back, one directory shared by all ranks; more than one rank needs
`mpiexec`: the one beside this Python first (the mpich wheel's, which mdtest was built with by
/work/shared/peers/build-ior.sh), with --oversubscribe only for Open MPI, which needs it). Otherwise the peer is Debian's fio with its
`filecreate`, `filestat` and `filedelete` engines, one fio run per operation over the same files
(fio keeps each job's files in the target directory: the shared-directory case). Installs
nothing.

For each directory (default /dev/shm, tmpfs, and /tmp, the local file system) and thread count,
storlab and the peer run alternately (A B, then B A ...) for --rounds rounds; the table shows
the medians of create, stat and remove rates (files/s, summed over threads), the median of the
per-round ratios storlab/peer, and the mean per-operation latencies where the peer reports them.

Against mdtest a third contestant runs in the same rotation: the floor, meta_floor.c (built here
with cc), which makes the same system calls per file and nothing else (no timing, names or
statistics per call), from forked processes in one shared directory as mdtest's ranks. Its
columns say how close storlab is to what the kernel allows (storlab/floor) and the highest ratio
any tool making those calls could reach over mdtest (floor/mdtest): a goal above that is a goal
on the kernel, not on the tool. --no-floor leaves it out.

Fairness notes:
- create makes empty files in both (fio's filecreate never writes; mdtest runs without -w).
- fio's filestat job first lays out every file to its `filesize` (4 KiB) and fsyncs it
  (create_fsync, on by default), untimed, so fio stats and deletes 4 KiB files whose blocks are
  allocated on disk. storlab's stat and remove rates therefore come from a second run with
  --file-size 4k --fsync-files (its create rate, which then includes writing and fsync, is not
  used from that run).
  mdtest has no such step; against mdtest both storlab rates come from the empty-file run.
- fio runs with file_service_type=sequential: its default (roundrobin) rescans the file list for
  every open and gets slower quadratically with the file count, which would measure fio, not the
  file system.
- fio's latency is the open() / stat() / unlink() call alone; storlab's create latency also
  includes the close, so its mean create latency is expected to be a little higher.

    python3 benchmarks/vs_mdtest.py [--rounds 3] [--files 20000] [--threads 1,2,4] [--dirs /dev/shm,/tmp]
                                    [--file-size 0] [--json OUT] [--no-floor]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid

OPS = ("create", "stat", "read", "remove")
FIO_OPS = ("create", "stat", "remove")     # fio has no read-back of its file engines


def _storlab(directory: str, threads: int, files: int, *extra: str) -> dict[str, dict[str, float]]:
    cmd = [sys.executable, "-m", "storlab", "meta", "--target", directory, "--threads", str(threads),
           "--files", str(files), "--dir", "shared", "--phases", "create,stat,read,remove,rmdir",
           "--json", "-", "-q", "--no-store", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"storlab meta failed: {out.stderr.strip()}")
    doc = json.loads(out.stdout)
    phases = {p["name"]: p for p in doc["phases"]}
    return {op: {"ops_per_s": phases[op]["ops_per_s"], "lat_mean_ns": phases[op]["lat_ns"]["mean"]}
            for op in OPS}


def run_storlab(directory: str, threads: int, files: int, peer: str, file_size: int = 0) -> dict[str, dict[str, float]]:
    empty = _storlab(directory, threads, files, "--file-size", str(file_size))
    if peer != "fio":
        return empty
    # what fio's stat and delete see: 4 KiB files, fsynced when laid out
    laid_out = _storlab(directory, threads, files, "--file-size", "4k", "--fsync-files")
    return {"create": empty["create"], "stat": laid_out["stat"], "remove": laid_out["remove"]}


# -- fio ------------------------------------------------------------------------------------------
def _fio(engine: str, directory: str, threads: int, files: int, extra: list[str]) -> dict[str, float]:
    cmd = ["fio", "--name=meta", f"--ioengine={engine}", f"--directory={directory}",
           f"--nrfiles={files}", f"--numjobs={threads}", "--thread", "--group_reporting",
           "--filesize=4k", "--bs=4k", "--openfiles=1", "--file_service_type=sequential",
           "--output-format=json", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"fio {engine} failed: {out.stderr.strip() or out.stdout[-500:]}")
    job = json.loads(out.stdout[out.stdout.index("{"):])["jobs"][0]
    d = job["write"] if job["write"]["total_ios"] else job["read"]
    if d["total_ios"] != files * threads:
        raise RuntimeError(f"fio {engine}: {d['total_ios']} operations, expected {files * threads}")
    return {"ops_per_s": d["iops"], "lat_mean_ns": d["clat_ns"]["mean"]}


def run_fio(directory: str, threads: int, files: int, file_size: int = 0, attempts: int = 2) -> dict[str, dict[str, float]]:
    for attempt in range(1, attempts + 1):
        work = os.path.join(directory, f"fio-meta-{uuid.uuid4().hex[:8]}")
        os.mkdir(work)
        try:
            return {
                "create": _fio("filecreate", work, threads, files,
                               ["--rw=write", "--create_on_open=1", "--fallocate=none"]),
                "stat": _fio("filestat", work, threads, files, ["--rw=read"]),
                "remove": _fio("filedelete", work, threads, files, ["--rw=read"]),
            }
        except RuntimeError as e:
            # fio 3.33's layout with numjobs > 1 now and then fails to open a file it just made
            if attempt == attempts:
                raise
            print(f"fio failed, once more: {e}", file=sys.stderr)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    raise AssertionError("unreachable")


# -- mdtest ---------------------------------------------------------------------------------------
# mdtest 3.x writes "File creation : max min mean sd", 4.x the same without the colon
_MDTEST_ROW = re.compile(r"^\s*File (creation|stat|read|removal)\s*:?\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", re.M)


def parse_mdtest(text: str) -> dict[str, float]:
    """Mean rates (files/s) from mdtest's SUMMARY rate table (rows of phases that ran: a phase
    mdtest skipped shows 0 and is left out).

    >>> parse_mdtest("   File creation             :      10.000      8.000      9.000      1.000\\n"
    ...              "   File removal              :       4.000      4.000      4.000      0.000")
    {'create': 9.0, 'remove': 4.0}
    >>> parse_mdtest("   File creation               33485.719      33485.719      33485.719          0.000\\n"
    ...              "   File read                       0.000          0.000          0.000          0.000\\n"
    ...              "   File removal               107792.244     107792.244     107792.244          0.000")
    {'create': 33485.719, 'remove': 107792.244}
    """
    names = {"creation": "create", "stat": "stat", "read": "read", "removal": "remove"}
    return {names[m.group(1)]: float(m.group(4)) for m in _MDTEST_ROW.finditer(text) if float(m.group(4)) > 0}


def mpiexec_command(ranks: int) -> list[str]:
    """`mpiexec -n RANKS`: the launcher beside this Python first (the mpich wheel's), else PATH's;
    Open MPI's needs --oversubscribe to start more ranks than cores, MPICH's refuses the flag."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    launcher = here if os.access(here, os.X_OK) else (shutil.which("mpiexec") or shutil.which("mpirun"))
    if launcher is None:
        raise RuntimeError("mdtest with more than one rank needs mpiexec")
    version = subprocess.run([launcher, "--version"], capture_output=True, text=True).stdout
    extra = ["--oversubscribe"] if "Open MPI" in version or "OpenRTE" in version else []
    return [launcher, *extra, "-n", str(ranks)]


def run_mdtest(directory: str, threads: int, files: int, file_size: int = 0) -> dict[str, dict[str, float]]:
    work = tempfile.mkdtemp(prefix="mdtest-", dir=directory)
    cmd = ["mdtest", "-F", "-C", "-T", "-E", "-r", "-n", str(files), "-w", str(file_size), "-e", str(file_size),
           "-d", work]
    if threads > 1:
        cmd = [*mpiexec_command(threads), *cmd]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"mdtest failed: {out.stderr.strip()}")
        rates = parse_mdtest(out.stdout)
        missing = [op for op in OPS if op not in rates]
        if missing:
            raise RuntimeError(f"mdtest printed no rate for {', '.join(missing)}: {out.stdout[-800:]}")
        return {op: {"ops_per_s": rates[op], "lat_mean_ns": float("nan")} for op in OPS}
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- the floor: the same system calls and nothing else ---------------------------------------------
FLOOR_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "meta_floor.c")


def build_floor(workdir: str) -> str | None:
    """meta_floor.c compiled into `workdir` (cc -O2), or None (with the reason on stderr) where no
    C compiler is on PATH or the build fails."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        print("no C compiler on PATH: the floor column is left out", file=sys.stderr)
        return None
    binary = os.path.join(workdir, "meta_floor")
    out = subprocess.run([cc, "-O2", "-o", binary, FLOOR_SOURCE], capture_output=True, text=True)
    if out.returncode != 0:
        print(f"meta_floor.c did not build, the floor column is left out: {out.stderr.strip()}", file=sys.stderr)
        return None
    return binary


def run_floor(binary: str, directory: str, threads: int, files: int, file_size: int = 0) -> dict[str, dict[str, float]]:
    """The bare system calls of each phase from `threads` forked processes in one shared directory:
    the rates no tool making the same calls can beat (meta_floor.c)."""
    work = os.path.join(directory, f"meta-floor-{uuid.uuid4().hex[:8]}")
    try:
        out = subprocess.run([binary, work, str(files), str(threads), str(file_size)], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"meta_floor failed: {out.stderr.strip()}")
        rates = json.loads(out.stdout)
        return {op: {"ops_per_s": rates[op], "lat_mean_ns": float("nan")} for op in OPS}
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- the comparison -------------------------------------------------------------------------------
def fs_type(path: str) -> str:
    best, kind = "", "?"
    with open("/proc/self/mounts") as f:
        for line in f:
            _, mnt, fstype, *_ = line.split()
            if os.path.realpath(path).startswith(mnt) and len(mnt) > len(best):
                best, kind = mnt, fstype
    return kind


def fmt_rate(v: float) -> str:
    return f"{v / 1e3:,.1f}k"


def fmt_lat(v: float) -> str:
    return "-" if v != v else f"{v / 1e3:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=20_000, help="files per thread")
    ap.add_argument("--threads", default="1,2,4", help="comma-separated thread (mdtest: rank) counts")
    ap.add_argument("--file-size", type=int, default=0, help="bytes written at create and read back (mdtest -w/-e)")
    ap.add_argument("--json", help="write the medians and ratios as JSON to this file")
    ap.add_argument("--dirs", default="/dev/shm,/tmp", help="comma-separated directories to work in")
    ap.add_argument("--peer", choices=("auto", "mdtest", "fio"), default="auto")
    ap.add_argument("--no-floor", action="store_true", help="leave out the bare system calls (meta_floor.c)")
    args = ap.parse_args()

    peer = args.peer
    if peer == "auto":
        peer = "mdtest" if shutil.which("mdtest") else "fio"
    if shutil.which(peer) is None:
        print(f"{peer} is not on PATH", file=sys.stderr)
        return 2
    run_peer = run_mdtest if peer == "mdtest" else run_fio
    ops = OPS if peer == "mdtest" else FIO_OPS
    # the floor makes mdtest's calls on mdtest's files (fio's stat and delete see 4 KiB fsynced files)
    build_dir = tempfile.mkdtemp(prefix="vs-mdtest-")
    floor = None if args.no_floor or peer != "mdtest" else build_floor(build_dir)
    print(f"peer: {peer}; {args.rounds} rounds, {args.files} files per thread, shared directory; "
          f"create: files of {args.file_size} bytes, stat/remove: "
          f"{'4 KiB fsynced' if peer == 'fio' else f'{args.file_size}-byte'} files; "
          f"rates in files/s summed over threads, latency in us (mean)\n")

    header = ("| directory (fs) | threads | op | storlab files/s | " + peer + " files/s | median ratio | "
              + ("floor files/s | storlab/floor | floor/" + peer + " | " if floor else "")
              + "storlab lat us | " + peer + " lat us |")
    rows = [header, "|" + "---|" * (11 if floor else 8)]
    figures: list[dict] = []
    for directory in args.dirs.split(","):
        for threads in (int(t) for t in args.threads.split(",")):
            results: dict[str, list] = {"storlab": [], peer: [], "floor": []}
            contestants = [("storlab", lambda *a: run_storlab(*a, peer, args.file_size)),
                           (peer, lambda *a: run_peer(*a, args.file_size))]
            if floor:
                contestants.append(("floor", lambda *a: run_floor(floor, *a, args.file_size)))
            for r in range(args.rounds):
                # each round starts with the next contestant: none always gets a warm cache
                order = contestants[r % len(contestants):] + contestants[:r % len(contestants)]
                for name, fn in order:
                    results[name].append(fn(directory, threads, args.files))
            for op in ops:
                ours = [x[op]["ops_per_s"] for x in results["storlab"]]
                theirs = [x[op]["ops_per_s"] for x in results[peer]]
                ratio = statistics.median(a / b for a, b in zip(ours, theirs))
                lat_ours = statistics.median(x[op]["lat_mean_ns"] for x in results["storlab"])
                lat_theirs = statistics.median(x[op]["lat_mean_ns"] for x in results[peer])
                figure = {"dir": directory, "fs": fs_type(directory), "threads": threads, "op": op,
                          "storlab_ops_per_s": statistics.median(ours), "peer_ops_per_s": statistics.median(theirs),
                          "ratio": ratio}
                floor_cells = ""
                if floor:
                    bare = [x[op]["ops_per_s"] for x in results["floor"]]
                    figure.update(floor_ops_per_s=statistics.median(bare),
                                  storlab_to_floor=statistics.median(a / b for a, b in zip(ours, bare)),
                                  floor_to_peer=statistics.median(b / t for b, t in zip(bare, theirs)))
                    floor_cells = (f"{fmt_rate(figure['floor_ops_per_s'])} | {figure['storlab_to_floor']:.2f} | "
                                   f"{figure['floor_to_peer']:.2f} | ")
                figures.append(figure)
                rows.append(f"| {directory} ({fs_type(directory)}) | {threads} | {op} | "
                            f"{fmt_rate(statistics.median(ours))} | {fmt_rate(statistics.median(theirs))} | "
                            f"{ratio:.2f} | {floor_cells}{fmt_lat(lat_ours)} | {fmt_lat(lat_theirs)} |")
            print("\n".join(rows[-len(ops):]), flush=True)
    print("\n" + "\n".join(rows))
    shutil.rmtree(build_dir, ignore_errors=True)
    if floor:
        print(f"\nfloor: the same system calls per file and nothing else, from {peer}'s ranks as processes "
              f"(meta_floor.c); floor/{peer} is the highest ratio any tool making those calls reaches over {peer}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"peer": peer, "files_per_thread": args.files, "file_size": args.file_size,
                       "rounds": args.rounds, "floor": bool(floor), "figures": figures}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
