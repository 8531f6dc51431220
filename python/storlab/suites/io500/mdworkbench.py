"""io500's md-workbench phases (src/phase_mdworkbench*.c, running IOR's src/md-workbench.c with
io500's arguments): mdworkbench-create (precreate, -1), mdworkbench-bench (two benchmark
iterations, -2 -R=2 -X) and mdworkbench-delete (cleanup, -3), with md-workbench's names, order,
rank offsets, counts, rates and latency figures.

Every rank owns D = 10 sets (folders `DATADIR/mdworkbench/<rank>_<set>`). precreate makes them and
P files `file-<i>` of 3901 bytes in each, file by file across the sets. Each benchmark iteration
visits I files per set as a FIFO: for file f and set d it stats, reads (and verifies), removes
file `start + f` of set d of rank r - (d + 1) and creates file `P + start + f` in set d of rank
r + (d + 1) (modulo the ranks; -O=1); the next iteration starts I files further. cleanup removes
the P files each of the rank's sets holds then and the sets. A phase's time is the slowest
rank's; its rate is md-workbench's: precreate (sets + files made) / time, benchmark files read x 4
/ time, cleanup (files + sets removed) / time; io500 scores the second iteration's.

The operations are md-workbench's system calls made from Python (os.*), one at a time as
md-workbench makes them: storlab's metadata engine runs one kind of operation over a whole tree
per phase and cannot interleave stat, read, remove and create per file across other ranks' folders.
"""
from __future__ import annotations

import array
import os
import random
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from ...errors import TargetError
from ...jobs.io500.ini import io500_hash
from ...jobs.io500.translator import MDW_ITERATIONS, MDW_OFFSET, MDW_SETS, mdworkbench_command
from .state import Io500Run, PhaseOutcome

__all__ = ["DSETS", "OFFSET", "ITERATIONS", "FILE_SIZE", "Workbench", "sizes", "describe", "create_phase",
           "bench_phase", "delete_phase", "quantiles", "gathered"]

DSETS = MDW_SETS      # io500's -D: sets per rank
OFFSET = MDW_OFFSET   # io500's -O: the rank offset between writer and reader
ITERATIONS = MDW_ITERATIONS   # the benchmark's -R
FILE_SIZE = 3901      # md-workbench's object size (-S default)
DIR_MODE = 0o775      # md-workbench's DIRMODE
DEFAULT_RATE = 10.0   # io500's rate when mdtest-easy-write did not run (kIOPS)
OP_KINDS = ("dset_create", "dset_delete", "obj_create", "obj_read", "obj_stat", "obj_delete")
_ITEM = struct.Struct("<QQ")     # (owning rank, item number) at the head of each file's bytes


def quantiles(times: list[float]) -> dict[str, float]:
    """md-workbench's latency figures of one operation (compute_histogram): min, q1, median, q3,
    q90, q99, max, each quantile at position round(q (n - 1) + 0.49) of the sorted times."""
    if not times:
        return {}
    t = sorted(times)
    n = len(t)

    def at(q: float) -> float:
        return t[int(round(q * (n - 1) + 0.49))]

    median = (t[n // 2] + t[n // 2 - 1]) / 2 if n % 2 == 0 else t[n // 2]
    return {"min": t[0], "q1": at(0.25), "median": median, "q3": at(0.75), "q90": at(0.90), "q99": at(0.99),
            "max": t[-1]}


@dataclass
class PhaseStats:
    """One md-workbench phase on this rank: successes and errors of each operation, each
    operation's latencies (seconds), the longest one, and the rank's time."""
    suc: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OP_KINDS, 0))
    err: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OP_KINDS, 0))
    times: dict[str, array.array] = field(default_factory=dict)
    max_op_s: float = 0.0
    seconds: float = 0.0

    def timed(self, kind: str, started: float) -> float:
        """Record one operation of `kind` (create, read, stat, delete) started at `started`."""
        op = time.perf_counter() - started
        self.times.setdefault(kind, array.array("d")).append(op)
        if op > self.max_op_s:
            self.max_op_s = op
        return op


class Workbench:
    """md-workbench on this rank of an io500 run: its folder, sizes, data and where the next
    benchmark iteration starts (md-workbench's run-info-file position)."""

    def __init__(self, run: Io500Run, precreate: int, files: int, seed: int) -> None:
        self.run = run
        self.prefix = os.path.join(run.datadir, "mdworkbench")
        self.precreate, self.files = precreate, files
        self.waiting = run.cfg.mdw_waiting
        self.position = 0
        # every file's bytes after its (owner, item) head: one seeded fill, the same on every rank
        self.fill_tail = random.Random(seed).randbytes(FILE_SIZE)[_ITEM.size:]
        self.made_prefix = False

    def dset(self, rank: int, d: int) -> str:
        return f"{self.prefix}/{rank}_{d}"

    def obj(self, rank: int, d: int, i: int) -> str:
        return f"{self.prefix}/{rank}_{d}/file-{i}"

    def data(self, owner: int, item: int) -> bytes:
        """The bytes of item `item` (file index x sets + set) of `owner`'s sets."""
        return _ITEM.pack(owner, item) + self.fill_tail

    def _rank_lost(self) -> bool:
        """Another rank failed: stop here (the phase's next collective then names it)."""
        return self.run.ranks.failure is not None

    def _wait(self, op_s: float) -> None:
        """md-workbench -t: wait the operation's time times the factor (spinning below 10 ms)."""
        if self.waiting <= 1e-9:
            return
        wait_s = op_s * self.waiting
        if wait_s < 0.01:
            end = time.perf_counter() + wait_s
            while time.perf_counter() < end:
                pass
        else:
            time.sleep(wait_s)

    def _create(self, s: PhaseStats, path: str, owner: int, item: int) -> float:
        """Create `path` (never one that exists: O_EXCL) with its 3901 bytes; timed as create."""
        started = time.perf_counter()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o664)
        except OSError:
            s.err["obj_create"] += 1
            return s.timed("create", started)
        try:
            ok = os.write(fd, self.data(owner, item)) == FILE_SIZE
        except OSError:
            ok = False
        finally:
            os.close(fd)
        s.suc["obj_create"] += ok
        s.err["obj_create"] += not ok
        return s.timed("create", started)

    # -- the three phases, as md-workbench.c's run_precreate, run_benchmark and run_cleanup --------
    def precreate_phase(self) -> PhaseStats:
        s = PhaseStats()
        rank = self.run.rank
        if rank == 0:
            os.mkdir(self.prefix, DIR_MODE)      # the run's own data folder: it cannot exist yet
            self.made_prefix = True
        self.run.ranks.barrier()
        started = time.perf_counter()
        for d in range(DSETS):
            try:
                os.mkdir(self.dset(rank, d), DIR_MODE)
                s.suc["dset_create"] += 1
            except OSError:
                s.err["dset_create"] += 1
        for f in range(self.position, self.precreate):
            if self._rank_lost():
                break
            for d in range(DSETS):
                self._create(s, self.obj(rank, d, f), rank, f * DSETS + d)
        s.seconds = time.perf_counter() - started
        return s

    def benchmark_iteration(self, deadline: float | None = None) -> PhaseStats:
        """One iteration; `deadline` (a perf_counter time) stops it early, as md-workbench -w
        (its stonewall timer; the concurrent phase's parts share one)."""
        s = PhaseStats()
        rank, size = self.run.rank, self.run.size
        start = self.position
        self.run.ranks.barrier()
        started = time.perf_counter()
        for f in range(self.files):
            if self._rank_lost() or (deadline is not None and time.perf_counter() > deadline):
                break
            for d in range(DSETS):
                prev = f + start
                read_rank = (rank - OFFSET * (d + 1)) % size
                path = self.obj(read_rank, d, prev)
                t = time.perf_counter()
                try:
                    os.stat(path)
                    ok = True
                except OSError:
                    ok = False
                self._wait(s.timed("stat", t))
                if not ok:
                    s.err["obj_stat"] += 1
                    continue
                s.suc["obj_stat"] += 1
                t = time.perf_counter()
                try:
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        got = os.pread(fd, FILE_SIZE, 0)
                    finally:
                        os.close(fd)
                except OSError:
                    got = b""
                ok = len(got) == FILE_SIZE and got == self.data(read_rank, prev * DSETS + d)    # -X
                s.suc["obj_read"] += ok
                s.err["obj_read"] += not ok
                self._wait(s.timed("read", t))
                t = time.perf_counter()
                try:
                    os.unlink(path)
                except OSError:
                    pass            # md-workbench counts the remove done whatever it returns
                self._wait(s.timed("delete", t))
                s.suc["obj_delete"] += 1
                write_rank = (rank + OFFSET * (d + 1)) % size
                new = self.precreate + prev
                self._wait(self._create(s, self.obj(write_rank, d, new), write_rank, new * DSETS + d))
        s.seconds = time.perf_counter() - started
        self.position += self.files
        return s

    def cleanup_phase(self) -> PhaseStats:
        s = PhaseStats()
        rank = self.run.rank
        started = time.perf_counter()
        for d in range(DSETS):
            if self._rank_lost():
                break
            for f in range(self.precreate):
                t = time.perf_counter()
                try:
                    os.unlink(self.obj(rank, d, f + self.position))
                except OSError:
                    pass            # md-workbench counts the remove done whatever it returns
                s.timed("delete", t)
                s.suc["obj_delete"] += 1
            try:
                os.rmdir(self.dset(rank, d))
                s.suc["dset_delete"] += 1
            except OSError:
                pass
        s.seconds = time.perf_counter() - started
        return s

    def remove_prefix(self) -> None:
        """Rank 0 removes md-workbench's folder after cleanup (md-workbench's final rmdir)."""
        self.run.ranks.barrier()
        if self.run.rank == 0 and self.made_prefix:
            try:
                os.rmdir(self.prefix)
                self.made_prefix = False
            except OSError:
                pass


def sizes(run: Io500Run) -> tuple[int, int, str | None]:
    """(precreatePerSet, filesPerProc, warning) as io500 sets them: the .ini's pair, else from
    mdtest-easy-write's rate, so precreate runs for about min(stonewall, 60) s: rate (kIOPS) x
    time x 1000 / ranks / 10 sets per set, both alike (10 kIOPS when mdtest-easy-write did not run)."""
    cfg = run.cfg
    if cfg.mdw_precreate is not None and cfg.mdw_files is not None:
        return cfg.mdw_precreate, cfg.mdw_files, None
    rate, warning = run.easy_write_rate or 0.0, None
    if rate <= 0.0:
        rate = DEFAULT_RATE
        warning = ("MDWorkbench uses the MDTest rates to determine suitable options but MDTest didn't run, "
                   "will use a low (and sane) default instead")
    seconds = min(cfg.stonewall_s, 60)
    per_set = int(rate * seconds * 1000 / run.size) // 10
    return per_set, per_set, warning


def gathered(run: Io500Run, s: PhaseStats, name: str) -> dict[str, Any]:
    """md-workbench's end_phase: the phase over every rank (counts summed, the slowest rank's
    time, the longest operation, latency figures over every rank's operations) and its rate."""
    mine = (s.suc, s.err, s.seconds, s.max_op_s, {k: v.tobytes() for k, v in s.times.items()})
    everyone = run.ranks.allgather(mine)
    suc = {k: sum(e[0][k] for e in everyone) for k in OP_KINDS}
    err = {k: sum(e[1][k] for e in everyone) for k in OP_KINDS}
    seconds = max(e[2] for e in everyone)
    latency: dict[str, dict[str, float]] = {}
    for kind in ("read", "stat", "create", "delete"):
        times: list[float] = []
        for e in everyone:
            if kind in e[4]:
                times += array.array("d", e[4][kind]).tolist()
        if times:
            latency[kind] = quantiles(times)
    if name == "benchmark":
        rate = suc["obj_read"] * 4 / seconds if seconds > 0 else 0.0
    elif name == "precreate":
        rate = (suc["dset_create"] + suc["obj_create"]) / seconds if seconds > 0 else 0.0
    else:
        rate = (suc["obj_delete"] + suc["dset_delete"]) / seconds if seconds > 0 else 0.0
    return {"phase": name, "rate_iops": rate, "seconds": seconds, "seconds_per_rank": [e[2] for e in everyone],
            "max_op_s": max(e[3] for e in everyone), "ops": suc, "errors": err, "error_count": sum(err.values()),
            "latency_s": latency}


# -- the io500 phases ------------------------------------------------------------------------------------
def describe(run: Io500Run, out: PhaseOutcome) -> tuple[int, int]:
    """The phase's sizes and command, which io500 prints before it runs (also when md-workbench
    is switched off); returns (precreatePerSet, filesPerProc)."""
    precreate, files, warning = sizes(run)
    out.head = {"filesPerProc": str(files), "precreatePerSet": str(precreate)}
    out.exe = mdworkbench_command(run.cfg, out.name, run.datadir, run.resultdir, run.timestamp, precreate, files)
    if warning:
        out.details["warnings"] = [warning]
    return precreate, files


def _begin(run: Io500Run, out: PhaseOutcome, create: bool) -> Workbench:
    """md-workbench's state: made by create, kept from it by the later phases (sizes as create's)."""
    bench = run.mdworkbench
    if create or bench is None:
        precreate, files, _ = sizes(run)
        # the same data on every rank: seeded with io500's md-workbench number of this run (-G)
        bench = Workbench(run, precreate, files, seed=io500_hash(run.timestamp, io500_hash("md-workbench")))
        run.mdworkbench = bench
    return bench


def _report(out: PhaseOutcome, results: list[dict[str, Any]], bench: Workbench) -> None:
    errors = sum(r["error_count"] for r in results)
    if errors:
        out.invalid.append(f"Errors ({errors}) occured during the md-workbench phase. This invalidates your run.")
    out.details.update({"precreate_per_set": bench.precreate, "files_per_proc": bench.files, "dsets": DSETS,
                        "offset": OFFSET, "object_bytes": FILE_SIZE, "results": results})


def create_phase(run: Io500Run, out: PhaseOutcome, t0: float) -> None:
    """mdworkbench-create: md-workbench -1 (precreate); not scored, its rate in kIOPS."""
    bench = _begin(run, out, create=True)
    result = gathered(run, bench.precreate_phase(), "precreate")
    out.seconds = run.end(t0)
    out.pairs["maxOpTime"] = f"{result['max_op_s']:f}"
    out.score = result["rate_iops"] / 1000
    _report(out, [result], bench)


def bench_phase(run: Io500Run, out: PhaseOutcome, t0: float) -> None:
    """mdworkbench-bench: md-workbench -2 -R=2 -X (two benchmark iterations, reads verified);
    scored with the second iteration's rate."""
    bench = _begin(run, out, create=False)
    if not bench.made_prefix and run.rank == 0 and not os.path.isdir(bench.prefix):
        raise TargetError(f"mdworkbench-bench: {bench.prefix}: mdworkbench-create did not run")
    results = [gathered(run, bench.benchmark_iteration(), "benchmark") for _ in range(ITERATIONS)]
    out.seconds = run.end(t0)
    first, second = results
    if first["rate_iops"] < second["rate_iops"] * 0.5 or first["rate_iops"] * 0.5 > second["rate_iops"]:
        out.details.setdefault("warnings", []).append("The results of both md-workbench differs by 2x.")
    out.pairs["maxOpTime"] = f"{second['max_op_s']:f}"
    out.pairs["scoreIteration0"] = f"{first['rate_iops'] / 1000:f}"
    out.pairs["maxOpTime0"] = f"{first['max_op_s']:f}"
    out.score = second["rate_iops"] / 1000
    _report(out, results, bench)


def delete_phase(run: Io500Run, out: PhaseOutcome, t0: float) -> None:
    """mdworkbench-delete: md-workbench -3 (cleanup of what the benchmark left); not scored."""
    bench = _begin(run, out, create=False)
    result = gathered(run, bench.cleanup_phase(), "cleanup")
    bench.remove_prefix()
    out.seconds = run.end(t0)
    out.pairs["maxOpTime"] = f"{result['max_op_s']:f}"
    out.score = result["rate_iops"] / 1000
    _report(out, [result], bench)
