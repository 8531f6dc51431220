"""Run fio and storlab on one target and read what they did into one shape.

Each tool's JSON result becomes a `ToolRun` (bytes, operations, bandwidth and latency per direction,
fsync count). With the psync engine a tool can run under `strace -ff`, and the positioned reads and
writes its workers issued on the target become a `Trace`: per thread, in issue order, with offset
and length, plus the fsync calls that thread made once its I/O had begun.

Both tools do a job's I/O in threads or processes they clone for it (storlab's engine workers, fio's
job processes). A thread that called execve is the tool's own main thread or a helper program, and
its reads of the target are preparation (storlab's device-signature probe), not the job's.
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

DIRECTIONS = ("read", "write")
LATENCIES = ("slat", "clat", "lat")
STRACE_CALLS = "execve,pread64,pwrite64,fsync,fdatasync"
RUN_TIMEOUT_S = 120


@dataclass(frozen=True)
class Io:
    """One positioned read or write on the target, as strace saw it."""
    write: bool
    offset: int
    length: int


@dataclass
class Trace:
    """The target's I/O system calls: one list per thread that did I/O on it (issue order)."""
    threads: list[list[Io]]
    fsyncs: int          # fsync/fdatasync on the target by those threads after their first I/O

    def ios(self, write: bool | None = None) -> list[Io]:
        return [io for t in self.threads for io in t if write is None or io.write == write]


@dataclass
class Direction:
    """One direction's figures: counts, rate, and latency statistics keyed slat/clat/lat."""
    bytes: int
    ops: int
    bw_bytes: float
    lat_ns: dict[str, dict]          # kind -> {"mean": .., "min": .., "max": .., percentiles...}


@dataclass
class ToolRun:
    tool: str
    directions: dict[str, Direction]
    sync_ops: int                    # what the tool's JSON reports as fsync operations
    document: dict = field(repr=False)
    trace: Trace | None = None

    def direction(self, name: str) -> Direction:
        return self.directions.get(name) or Direction(0, 0, 0.0, {})


class ToolFailed(RuntimeError):
    """A tool exited with an error or wrote no result; the message carries its stderr."""


# -- strace ---------------------------------------------------------------------------------------
# With -s0 -y every data call reads `pread64(5</path>, ""..., 4096, 8192) = 4096`; the fd's path
# is in angle brackets (it cannot contain '>' for our targets) and length and offset end the list.
_DATA_CALL = re.compile(r"^(pread64|pwrite64)\(\d+<([^>]*)>, .*, (\d+), (\d+)\)\s+=\s+(-?\d+)")
_EXECVE = re.compile(r"^execve\(", re.MULTILINE)
_SYNC_CALL = re.compile(r"^(fsync|fdatasync)\(\d+<([^>]*)>\)\s+=\s+(-?\d+)")


def strace_prefix(out_prefix: str) -> list[str]:
    """The command prefix that traces every thread into OUT_PREFIX.<tid>, one file per thread."""
    return ["strace", "-ff", "-qq", "-s0", "-y", "-e", f"trace={STRACE_CALLS}", "-o", out_prefix]


def parse_strace_thread(text: str, target: str) -> tuple[list[Io], int]:
    """One thread's trace: its I/O on TARGET in order, and its fsyncs of TARGET after the first I/O.

    A thread that called execve did no job I/O (see the module comment): nothing is returned.
    fsyncs before the first I/O (a cache-invalidating flush before the phase) are not the job's.
    A call that failed or moved a different number of bytes than asked is an error of the run."""
    ios: list[Io] = []
    fsyncs = 0
    if _EXECVE.search(text):
        return ios, fsyncs
    for line in text.splitlines():
        m = _DATA_CALL.match(line)
        if m:
            if m.group(2) != target:
                continue
            length, offset, ret = int(m.group(3)), int(m.group(4)), int(m.group(5))
            if ret != length:
                raise ValueError(f"short or failed I/O on {target}: {line.strip()}")
            ios.append(Io(m.group(1) == "pwrite64", offset, length))
            continue
        m = _SYNC_CALL.match(line)
        if m and m.group(2) == target and ios:
            if int(m.group(3)) != 0:
                raise ValueError(f"failed sync on {target}: {line.strip()}")
            fsyncs += 1
    return ios, fsyncs


def read_trace(out_prefix: str, target: str) -> Trace:
    """The threads' traces written by strace_prefix(OUT_PREFIX), keeping threads that did I/O."""
    threads: list[list[Io]] = []
    fsyncs = 0
    for path in sorted(glob.glob(out_prefix + ".*"), key=lambda p: int(p.rsplit(".", 1)[1])):
        with open(path) as f:
            ios, n = parse_strace_thread(f.read(), target)
        if ios:
            threads.append(ios)
            fsyncs += n
    return Trace(threads, fsyncs)


# -- reading the results --------------------------------------------------------------------------
def _fio_latency(stats: dict) -> dict:
    # Kept when N is 0: fio takes no slat sample for a synchronous engine at iodepth 1 and reports
    # zeros, which is its definition (the call itself is clat).
    out = {k: stats[k] for k in ("mean", "min", "max", "N") if k in stats}
    median = (stats.get("percentile") or {}).get("50.000000")
    if median is not None:
        out["p50"] = median
    return out


def read_fio(doc: dict) -> ToolRun:
    """fio's JSON (--output-format=json): jobs summed per direction, latencies of the first job."""
    jobs = doc["jobs"]
    directions: dict[str, Direction] = {}
    for d in DIRECTIONS:
        total_ios = sum(j[d]["total_ios"] for j in jobs)
        if not total_ios:
            continue
        directions[d] = Direction(
            bytes=sum(j[d]["io_bytes"] for j in jobs),
            ops=total_ios,
            bw_bytes=sum(j[d]["bw_bytes"] for j in jobs),
            lat_ns={k: _fio_latency(jobs[0][d][f"{k}_ns"]) for k in LATENCIES},
        )
    sync_ops = sum(j.get("sync", {}).get("total_ios", 0) for j in jobs)
    return ToolRun("fio", directions, sync_ops, doc)


def read_storlab(doc: dict) -> ToolRun:
    """storlab's result document (storlab.run/1): counts summed over phases, latencies of the first
    phase with I/O in that direction (the suite's jobs have one phase)."""
    if not doc.get("complete"):
        raise ToolFailed(f"storlab run did not complete: {doc.get('stop_reason')}: {doc.get('error')}")
    directions: dict[str, Direction] = {}
    sync_ops = 0
    for phase in doc["phases"]:
        sync_ops += (phase.get("sync") or {}).get("ops", 0)
        for d in DIRECTIONS:
            s = phase.get(d)
            if not s or not s.get("ops"):
                continue
            prev = directions.get(d)
            lat = {k: s[f"{k}_ns"] for k in LATENCIES if s.get(f"{k}_ns")}
            directions[d] = Direction(
                bytes=s["bytes"] + (prev.bytes if prev else 0),
                ops=s["ops"] + (prev.ops if prev else 0),
                bw_bytes=s["bw_bytes"] + (prev.bw_bytes if prev else 0.0),
                lat_ns=prev.lat_ns if prev else lat,
            )
    return ToolRun("storlab", directions, sync_ops, doc)


# -- running --------------------------------------------------------------------------------------
def in_cgroup(cgroup_dir: str | None, cmd: list[str]) -> list[str]:
    """CMD started inside a cgroup v1 directory (the shell moves itself in, then execs CMD)."""
    if cgroup_dir is None:
        return cmd
    return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup_dir, *cmd]


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if proc.returncode != 0:
        err = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise ToolFailed(f"{what} exited with {proc.returncode}: {' | '.join(err[-3:])}")


def run_fio(fio_args: tuple[str, ...], target: str, workdir: str, *, trace: bool,
            cgroup_dir: str | None = None) -> ToolRun:
    """Run `fio --name=conformance --filename=TARGET ARGS` and read its JSON (and trace)."""
    out = os.path.join(workdir, "fio.json")
    # iomem_align=4096: storlab's buffers are always page-aligned; fio's are only with direct=1 or
    # iomem_align. A cached read copies into the buffer, and a copy into a buffer 16 bytes off the
    # page ran at a third of the rate (fio 3.33 on tmpfs, 1 MiB reads: 1.1 GB/s against 4.2 GB/s
    # aligned), so without it the latency checks compare two different memory copies.
    cmd = ["fio", "--name=conformance", f"--filename={target}", *(f"--{a}" for a in fio_args),
           "--iomem_align=4096", "--output-format=json", f"--output={out}", "--lat_percentiles=1"]
    prefix = os.path.join(workdir, "fio.strace")
    if trace:
        cmd = strace_prefix(prefix) + cmd
    _run(in_cgroup(cgroup_dir, cmd), "fio")
    with open(out) as f:
        text = f.read()
    # fio may print notes before the document; the document is the first '{' on.
    run = read_fio(json.loads(text[text.index("{"):]))
    if trace:
        run.trace = read_trace(prefix, os.path.realpath(target))
    return run


def run_storlab(storlab_args: tuple[str, ...], target: str, workdir: str, *, trace: bool,
                cgroup_dir: str | None = None) -> ToolRun:
    """Run `storlab run --target TARGET ARGS --json FILE` and read its result (and trace)."""
    out = os.path.join(workdir, "storlab.json")
    cmd = [sys.executable, "-m", "storlab", "run", "--target", target, *storlab_args,
           "--json", out, "--quiet", "--no-store"]
    prefix = os.path.join(workdir, "storlab.strace")
    if trace:
        cmd = strace_prefix(prefix) + cmd
    _run(in_cgroup(cgroup_dir, cmd), "storlab")
    with open(out) as f:
        run = read_storlab(json.load(f))
    if trace:
        run.trace = read_trace(prefix, os.path.realpath(target))
    return run


def missing_tools(*, trace: bool) -> str | None:
    """Why the suite cannot run here, or None."""
    if shutil.which("fio") is None:
        return "fio is not installed (scripts/test.sh installs Debian's fio when run as root)"
    if trace and shutil.which("strace") is None:
        return "strace is not installed (scripts/test.sh installs it when run as root)"
    return None
