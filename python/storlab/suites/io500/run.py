"""The IO500 benchmark on storlab's engine: io500's phases in its order, its stonewall with
wear-out, its parallel find, its score and its validity rules (io500 02091cf, src/main.c and
src/phase_*.c).

Every rank (one process; `mpiexec -n N storlab io500 cfg.ini`, or one rank without MPI) runs each
phase between two barriers; the phase time is rank 0's clock between them, as IOR and mdtest time
a phase between their barriers. The I/O goes through the engine (`_core.PhaseRun`) and the
metadata phases through the metadata benchmark (`_core.MetaRun`):

- ior-easy-write / ior-hard-write: time-limited by the stonewall; then every rank writes on until
  it has done as many transfers as the rank that did most (IOR's stoneWallingWearOut), then
  fsyncs (IOR -e). Files are made sparse at their full size first so nothing is preallocated.
- ior-easy-read / ior-hard-read: each rank reads what rank + offset wrote, exactly the transfers
  written; the offset is IOR's -C -Q 1 (a whole node: on one node every rank reads its own data).
- mdtest-easy / mdtest-hard: one MetaRun per rank and kind, kept open across the phases so they
  interleave in io500's order (create, later stat, later read and delete); the stonewall ends
  create only (mdtest -W), then every rank creates as many files as the rank that made most (a
  second MetaRun for the extra files) and syncs (mdtest -Y); later phases visit every file, of
  another rank as mdtest -N 1 shifts them (stat r+1, read r+2, remove r+3): the creating rank's
  state is adopted by the visiting rank's run and handed back after the phase.
- Under MPI the ranks meet through `Ranks` (measure/ranks.py; under MPI measure/mpi/ranks.py: the session's communicator,
  which names a failed or vanished rank instead of waiting for it).
- find: the data folder walked level by level, each level's folders spread over the ranks; a
  file is found when its name holds "01", its size is 3901 bytes and it is newer than the
  timestamp file; the rate counts every file looked at (pfind's total-files).

Score: each bandwidth phase in GiB/s (bytes / time / 2^30), each metadata phase in kIOPS; BW and
MD are geometric means of the scored phases, skipping a score <= 0 (io500's quirk); SCORE =
sqrt(BW x MD). Validity: stonewall-time must equal 300 s (30 s with scc), each write phase must
last at least the stonewall, a score of 0 and errors invalidate; the reasons are io500's words.
"""
from __future__ import annotations

import fnmatch
import json
import math
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ...errors import StorlabError, TargetError, UserError
from ...measure.ranks import LocalRanks, Ranks

__all__ = ["GIB", "calc_score", "score_groups", "Ranks", "LocalRanks", "PhaseOutcome",
           "Io500Run", "check_datadir", "find_files", "node_layout", "ior_rank_offset", "mdtest_stride"]

GIB = float(1 << 30)
FIND_NAME = "*01*"


# -- the score, exactly as io500's calc_score -------------------------------------------------------
def score_groups(phases: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{"MD": {...}, "BW": {...}}: each group's geometric mean over its scores > 0 (io500 skips a
    score <= 0), with the scores used and those skipped."""
    out: dict[str, dict[str, Any]] = {}
    for group in ("MD", "BW"):
        used = [p["score"] for p in phases if p.get("group") == group and p["score"] > 0]
        skipped = [p["name"] for p in phases if p.get("group") == group and not p["score"] > 0]
        mean = math.prod(used) ** (1.0 / len(used)) if used else 0.0
        out[group] = {"score": mean, "used": len(used), "skipped": skipped}
    return out


def calc_score(phases: Sequence[dict[str, Any]], extended: bool = False) -> tuple[float, float, float]:
    """(BW, MD, SCORE) of phase results [{name, group, score}] as io500 computes them; the extended
    mode's optional phases count only in the extended score ([SCOREX])."""
    g = score_groups([p for p in phases if extended or not p.get("optional")])
    bw, md = g["BW"]["score"], g["MD"]["score"]
    return bw, md, math.sqrt(bw * md)


# -- the data folder ---------------------------------------------------------------------------------
def check_datadir(datadir: str, timestamped: bool) -> str | None:
    """Why the data folder cannot be used (None when it can), checked before anything is written:
    it must exist and be a writable folder; without a timestamp suffix it must be empty (storlab
    never writes among files it did not make)."""
    if not os.path.exists(datadir):
        return f"datadir {datadir}: does not exist (make it first; storlab writes only into a folder you made)"
    if not os.path.isdir(datadir):
        return f"datadir {datadir}: not a directory"
    if not os.access(datadir, os.W_OK | os.X_OK):
        return f"datadir {datadir}: not writable"
    if not timestamped:
        try:
            entries = sorted(os.listdir(datadir))
        except OSError as e:
            return f"datadir {datadir}: cannot be read: {e.strerror}"
        if entries:
            shown = ", ".join(entries[:3]) + (f" (+{len(entries) - 3} more)" if len(entries) > 3 else "")
            return (f"datadir {datadir}: holds files storlab did not make ({shown}); give an empty folder "
                    "or set timestamp-datadir = TRUE")
    return None


# -- find ---------------------------------------------------------------------------------------------
def find_files(dirs: Sequence[str], newer_than: float | None, size: int | None,
               pattern: str = FIND_NAME) -> tuple[list[str], int, int, int]:
    """Look at the entries of `dirs` (not below): (sub-folders, files looked at, files found, errors).
    A file is found when its name matches `pattern`, its size is `size` and its mtime is later
    than `newer_than` (None: any); the name is tested first, so only matching names are stat'ed
    (find -O1), and none when neither size nor time is asked for."""
    subdirs: list[str] = []
    total = found = errors = 0
    needle = pattern.strip("*") if pattern.startswith("*") and pattern.endswith("*") and "*" not in pattern[1:-1] \
        and "?" not in pattern and "[" not in pattern else None
    for d in dirs:
        try:
            with os.scandir(d) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            subdirs.append(e.path)
                            continue
                    except OSError:
                        errors += 1
                        continue
                    total += 1
                    name = e.name
                    if (needle in name) if needle is not None else fnmatch.fnmatchcase(name, pattern):
                        if size is None and newer_than is None:
                            found += 1
                            continue
                        try:
                            st = e.stat(follow_symlinks=False)
                        except OSError:
                            errors += 1
                            continue
                        if (size is None or st.st_size == size) and (newer_than is None or st.st_mtime > newer_than):
                            found += 1
        except OSError:
            errors += 1
    return subdirs, total, found, errors


# -- which rank reads or visits what another rank wrote ------------------------------------------------
def node_layout(hosts: Sequence[str]) -> tuple[int, int, bool]:
    """(nodes, ranks on rank 0's node, block mapping) of the ranks' host names, as IOR and mdtest
    find them (GetNumNodes, GetNumTasksOnNode0, QueryNodeMapping: block when rank 1 shares rank 0's
    node, or with one rank)."""
    on_node0 = sum(1 for h in hosts if h == hosts[0])
    return len(set(hosts)), on_node0, len(hosts) < 2 or hosts[1] == hosts[0]


def ior_rank_offset(hosts: Sequence[str], q: int) -> int:
    """IOR -C -Q q: a rank reads what rank (rank + offset) % size wrote. The shift is the ranks on
    rank 0's node with a block mapping (by-slot), else 1; on one node that makes the offset
    q * size % size = 0: every rank reads back its own data, as the real IOR does."""
    _, on_node0, block = node_layout(hosts)
    return q * (on_node0 if block else 1) % len(hosts)


def mdtest_stride(hosts: Sequence[str], n: int = 1) -> int:
    """mdtest -N n: the stride between the rank that made a file and the one visiting it; times
    the ranks on rank 0's node when there are several nodes and a block mapping. Each of mdtest's
    phases shifts once more: rank r stats the files of rank r + stride, reads those of r + 2
    stride and removes those of r + 3 stride (modulo the ranks)."""
    nodes, on_node0, block = node_layout(hosts)
    return n * on_node0 if nodes > 1 and block else n


# IOR -R as io500 asks for it: writes carry one seeded fill, reads compare every byte with it
VERIFY_FILL = {"verify": "fill", "verify_readback": False}
# IOR -e: one fsync per rank at the end of a write phase, after the wear-out (`_fsync`); the
# engine's own end-of-phase fsync would add one per engine run (two or three per rank)
NO_ENGINE_FSYNC = {"fsync_end": False}

# which of mdtest's shifts each later step takes (mdtest.c: stat_name, read_name, rm_name)
MDTEST_SHIFTS = {"stat": 1, "read": 2, "remove": 3}


# -- phases -------------------------------------------------------------------------------------------
@dataclass
class PhaseOutcome:
    """One io500 phase as io500 reports it, plus what storlab saw."""
    name: str
    group: str                      # "BW", "MD" or "" (not scored)
    score: float = 0.0
    seconds: float = 0.0
    ran: bool = True
    invalid: list[str] = field(default_factory=list)    # io500's INVALID messages of the phase itself
    judged: list[str] = field(default_factory=list)     # those io500's main loop adds after it
    pairs: dict[str, Any] = field(default_factory=dict)  # the extra key = value lines of result.txt
    details: dict[str, Any] = field(default_factory=dict)
    t_start: str = ""
    t_end: str = ""
    exe: str | None = None          # the command io500 runs for this phase (result.txt's exe)
    optional: bool = False          # a phase of the extended mode only, scored in [SCOREX]
    complete: bool = True
    error: str | None = None

    @property
    def valid(self) -> bool:
        return not self.invalid and not self.judged

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "group": self.group, "score": self.score, "seconds": self.seconds,
                "unit": "GiB/s" if self.name.startswith("i") else "kIOPS", "ran": self.ran,
                "valid": self.valid, "invalid": list(self.invalid), "judged": list(self.judged),
                "pairs": dict(self.pairs),
                "details": self.details, "t_start": self.t_start, "t_end": self.t_end, "exe": self.exe,
                "optional": self.optional,
                "complete": self.complete, "error": self.error}


def _stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def _wait(run, interrupt_on_stop: bool = True) -> None:
    """Wait for an engine run; a Ctrl-C/SIGTERM interrupts it, waits for its end, and re-raises."""
    try:
        while not run.wait(0.2):
            pass
    except KeyboardInterrupt:
        run.interrupt()
        while True:
            try:
                if run.wait(0.2):
                    break
            except Exception:   # noqa: BLE001 - the phase ends with its own error
                break
        raise


def _core_error(e: Exception) -> str:
    args = getattr(e, "args", ())
    return args[1] if len(args) == 2 else str(e)


class Io500Run:
    """One io500 run on this rank: call `run_phase(name)` in io500's order, then `clean_up()`."""

    def __init__(self, cfg, ranks: Ranks, datadir: str, resultdir: str,
                 progress: Callable[[str], None] | None = None, timestamp: str = "") -> None:
        self.cfg, self.ranks, self.datadir, self.resultdir = cfg, ranks, datadir, resultdir
        self.timestamp = timestamp
        self.progress = progress
        self.rank, self.size = ranks.rank, ranks.size
        self.easy_pairs = 0            # transfers each rank wrote in ior-easy-write (after wear-out)
        self.hard_pairs = 0
        self.meta: dict[str, list[Any]] = {}   # "easy"/"hard" -> this rank's MetaRuns (then wear-out's)
        self.meta_made: dict[str, list[dict[str, Any]]] = {}   # how each of them was made (for visitors)
        self.hosts: list[str] = [socket.gethostname()]
        self.timestamp_mtime: float | None = None
        self.made: list[str] = []          # files and folders this rank made (removed at the end)

    # -- paths ----------------------------------------------------------------------------------
    def easy_file(self, rank: int) -> str:
        base = os.path.join(self.datadir, "ior-easy")
        if self.cfg.easy_unique_dir:
            base = os.path.join(base, str(rank))
        return os.path.join(base, f"ior_file_easy.{rank:08d}")

    @property
    def hard_file(self) -> str:
        return os.path.join(self.datadir, "ior-hard", "file")

    def prepare(self) -> None:
        """Learn every rank's node (for IOR's -C -Q and mdtest's -N shifts); make the phase
        folders (rank 0) and each rank's own ones; then a barrier."""
        self.hosts = list(self.ranks.allgather(socket.gethostname()))
        if self.rank == 0:
            for sub in ("ior-easy", "ior-hard", "mdtest-easy", "mdtest-hard"):
                os.makedirs(os.path.join(self.datadir, sub), exist_ok=True)
        self.ranks.barrier()
        if self.cfg.easy_unique_dir:
            os.makedirs(os.path.dirname(self.easy_file(self.rank)), exist_ok=True)

    # -- the phase driver -------------------------------------------------------------------------
    def run_phase(self, name: str, group: str) -> PhaseOutcome:
        from ...jobs.io500.translator import OPTIONAL, io500_command

        out = PhaseOutcome(name, group, exe=io500_command(self.cfg, name, self.datadir, self.resultdir, self.timestamp),
                           optional=name in OPTIONAL)
        if not self.cfg.runs(name):
            out.ran = False
            return out
        self._drop_caches(name)
        self.ranks.barrier()
        out.t_start = _stamp()
        if self.progress and self.rank == 0:
            self.progress(name)
        t0 = time.monotonic()
        try:
            getattr(self, "_" + name.replace("-", "_").lower())(out, t0)
        except KeyboardInterrupt:
            out.complete, out.error = False, "interrupted"
            out.seconds = time.monotonic() - t0
            out.t_end = _stamp()
            raise
        out.t_end = _stamp()
        return out

    def _end(self, t0: float) -> float:
        self.ranks.barrier()
        return time.monotonic() - t0

    def _drop_caches(self, name: str) -> None:
        if not self.cfg.drop_caches or name == "timestamp":
            return
        os.sync()
        try:     # every rank drops its node's cache, as io500 runs the command on every rank
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        except OSError:
            pass     # not root: the document's warnings say so

    # -- IOR-like phases ------------------------------------------------------------------------
    def _io(self, phase: dict[str, Any]):
        from ... import _core
        from ...jobs.job import core_spec, resolve_job

        job = resolve_job({}, {"phase": [{"threads": 1, "engine": "psync", **phase}]}, jobfile_name="io500")
        spec = core_spec(job.phases[0])
        try:
            return _core.PhaseRun(json.dumps(spec))
        except _core.CoreError as e:
            raise TargetError(f"{phase['name']}: {_core_error(e)}") from None

    def _run_io(self, run) -> dict[str, Any]:
        run.start()
        _wait(run)
        return json.loads(run.result_json())

    def _sparse(self, path: str, size: int) -> None:
        try:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
        except OSError as e:
            raise TargetError(f"{path}: cannot be made: {e.strerror}") from None
        self.made.append(path)
        try:
            os.ftruncate(fd, size)
        except OSError as e:
            raise TargetError(f"{path}: cannot be sized to {size} bytes: {e.strerror}") from None
        finally:
            os.close(fd)

    def _room(self, share: int, unit: int) -> int:
        """The bytes a rank can write at most: its `share` of the file system's free space,
        rounded down to `unit` (no write can go beyond it; IOR would end with ENOSPC)."""
        try:
            st = os.statvfs(self.datadir)
        except OSError:
            return 1 << 62
        return st.f_bavail * st.f_frsize // share // unit * unit

    def _fsync(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _write_phase(self, out: PhaseOutcome, t0: float, hard: bool) -> None:
        cfg = self.cfg
        from ...jobs.io500.translator import HARD_XFER

        sw = cfg.stonewall_s
        # the file is sized (sparse) to what the phase can write at most: blockSize or the
        # segments, or the file system's free space if that is less
        if hard:
            xfer, per, path = HARD_XFER, self.size, self.hard_file
            room = self._room(self.size, HARD_XFER) if self.rank == 0 else None
            max_pairs = min(cfg.hard_segments, self.ranks.bcast(room) // HARD_XFER)   # one layout for all
            cap = HARD_XFER * self.size * max_pairs
            layout = {"thread_layout": "strided", "participants": self.size, "participant_base": self.rank}
        else:
            xfer, per, path = cfg.easy_xfer, 1, self.easy_file(self.rank)
            max_pairs = min(cfg.easy_block, self._room(self.size, cfg.easy_xfer)) // cfg.easy_xfer
            cap = max_pairs * xfer
            layout = {}
        if max_pairs == 0:
            raise TargetError(f"{out.name}: {self.datadir} has no room for one transfer per rank")
        # the plan is built before the clock starts (IOR opens inside it; a few microseconds)
        t_prep = time.monotonic()
        if hard:
            if self.rank == 0:
                self._sparse(path, cap)
            self.ranks.barrier()
        else:
            self._sparse(path, cap)
        run = self._io({"name": out.name, "target": [path], "rw": "write", "bs": xfer, "size": cap,
                        "io_size": max_pairs * xfer, "time": f"{sw}s", **VERIFY_FILL, **NO_ENGINE_FSYNC, **layout})
        t0 += time.monotonic() - t_prep        # the preparation is not the phase's time
        res = self._run_io(run)
        errors = 0 if res["complete"] or res["stop_reason"] != "error" else 1
        mine = res["workers"][0]["write_bytes"] // xfer
        t_stonewall = time.monotonic() - t0
        counts = self.ranks.allgather((mine, t_stonewall, errors, res.get("error")))
        top = max(c[0] for c in counts)
        extra = top - mine
        extra_bytes = 0
        if extra > 0 and not errors:
            more = self._io({"name": out.name + "-wearout", "target": [path], "rw": "write", "bs": xfer,
                             "offset": mine * per * xfer, "size": extra * per * xfer, "io_size": extra * xfer,
                             **VERIFY_FILL, **NO_ENGINE_FSYNC, **layout})
            res2 = self._run_io(more)
            extra_bytes = res2["workers"][0]["write_bytes"]
            if not res2["complete"]:
                errors += 1
        t_sync = time.monotonic()
        self._fsync(path)
        fsync_s = time.monotonic() - t_sync
        written = mine * xfer + extra_bytes
        totals = self.ranks.allgather((written, errors, extra, fsync_s))
        out.seconds = self._end(t0)
        if hard:
            self.hard_pairs = top
        else:
            self.easy_pairs = top
        total_bytes = sum(t[0] for t in totals)
        n_errors = sum(t[1] for t in totals) + sum(c[2] for c in counts)
        stonewall_time = max(c[1] for c in counts)
        stonewall_bytes = sum(c[0] for c in counts) * xfer
        out.score = total_bytes / out.seconds / GIB
        if n_errors:
            msg = next((c[3] for c in counts if c[3]), "")
            out.invalid.append(f"Errors ({n_errors}) occured during phase in IOR. This invalidates your run.")
            out.error = msg or "I/O error"
        if out.seconds < sw:
            out.invalid.append(f"Write phase needed {out.seconds:f}s instead of stonewall {sw}s. "
                               f"Stonewall was hit at {stonewall_time:.1f}s")
        out.pairs["throughput-stonewall"] = f"{stonewall_bytes / stonewall_time / GIB:.2f}"
        out.details = {"bytes": total_bytes, "transfer_bytes": xfer, "pairs_per_rank": top,
                       "pairs_at_stonewall": [c[0] for c in counts], "wearout_pairs": [t[2] for t in totals],
                       "fsync_s": [t[3] for t in totals],   # each rank's IOR -e fsync (in the phase's time)
                       "stonewall_s": stonewall_time}

    def _read_phase(self, out: PhaseOutcome, t0: float, hard: bool) -> None:
        from ...jobs.io500.translator import HARD_XFER

        offset = ior_rank_offset(self.hosts, 1)         # IOR -C -Q 1
        neighbour = (self.rank + offset) % self.size
        if hard:
            pairs, xfer = self.hard_pairs, HARD_XFER
            spec = {"target": [self.hard_file], "thread_layout": "strided", "participants": self.size,
                    "participant_base": neighbour, "size": pairs * self.size * xfer}
        else:
            pairs, xfer = self.easy_pairs, self.cfg.easy_xfer
            spec = {"target": [self.easy_file(neighbour)], "size": pairs * xfer}
        if pairs == 0:
            out.seconds = self._end(t0)
            out.invalid.append("Resulting score shouldn't be 0.0")
            out.error = "nothing was written to read back"
            return
        t_prep = time.monotonic()
        run = self._io({"name": out.name, "rw": "read", "bs": xfer, **(VERIFY_FILL if self.cfg.verify_reads else {}),
                        **spec})
        t0 += time.monotonic() - t_prep
        res = self._run_io(run)
        checked = res.get("verify") or {}
        bad = checked.get("mismatches", 0)
        first_bad = (checked.get("first") or [{}])[0].get("message") if bad else None
        got = self.ranks.allgather((res["workers"][0]["read_bytes"], (0 if res["complete"] else 1) + bad,
                                    res.get("error") or first_bad, checked.get("checked_blocks", 0), bad))
        out.seconds = self._end(t0)
        total = sum(g[0] for g in got)
        out.score = total / out.seconds / GIB
        errors = sum(g[1] for g in got)
        if errors:
            out.invalid.append(f"Errors ({errors}) occured during phase in IOR. This invalidates your run.")
            out.error = next((g[2] for g in got if g[2]), "I/O error")
        out.details = {"bytes": total, "transfer_bytes": xfer, "pairs_per_rank": pairs,
                       "verified_transfers": sum(g[3] for g in got), "mismatched_transfers": sum(g[4] for g in got),
                       "rank_offset": offset, "read_from": [(r + offset) % self.size for r in range(self.size)]}

    def _ior_easy_write(self, out, t0):
        self._write_phase(out, t0, hard=False)

    def _ior_hard_write(self, out, t0):
        self._write_phase(out, t0, hard=True)

    def _ior_easy_read(self, out, t0):
        self._read_phase(out, t0, hard=False)

    def _ior_hard_read(self, out, t0):
        self._read_phase(out, t0, hard=True)

    def _ior_rnd4k_easy_read(self, out: PhaseOutcome, t0: float) -> None:
        offset = ior_rank_offset(self.hosts, 2)         # IOR -C -Q 2
        src = (self.rank + offset) % self.size
        size = self.easy_pairs * self.cfg.easy_xfer // 4096 * 4096
        if size == 0:
            out.seconds = self._end(t0)
            return
        t_prep = time.monotonic()
        run = self._io({"name": out.name, "target": [self.easy_file(src)], "rw": "randread", "bs": 4096,
                        "size": size, "time": f"{self.cfg.stonewall_s}s"})
        t0 += time.monotonic() - t_prep
        res = self._run_io(run)
        got = self.ranks.allgather(res["workers"][0]["read_bytes"])
        out.seconds = self._end(t0)
        out.score = sum(got) / out.seconds / GIB
        out.details = {"bytes": sum(got), "rank_offset": offset,
                       "read_from": [(r + offset) % self.size for r in range(self.size)]}

    # -- mdtest-like phases ------------------------------------------------------------------------
    def _meta_new(self, kind: str, files: int, prefix: str, stonewall: bool, owner: bool) -> Any:
        """A MetaRun of this rank for mdtest-`kind` (easy: a folder per rank; hard: the shared one),
        kept (and cleaned up) by this rank."""
        run = self._meta_build(kind, files, prefix, stonewall, owner)
        self.meta.setdefault(kind, []).append(run)
        self.meta_made.setdefault(kind, []).append({"files": files, "prefix": prefix, "stonewall": stonewall})
        return run

    def _meta_build(self, kind: str, files: int, prefix: str, stonewall: bool, owner: bool) -> Any:
        from ... import _core
        from ...jobs.io500.translator import HARD_FILE_SIZE
        from ...jobs.meta_options import resolve_meta_options
        from ...measure.meta import meta_spec

        section = {"threads": 1, "files": files, "dir": "unique" if kind == "easy" else "shared",
                   "phases": "create,stat,remove,rmdir" if kind == "easy" else "create,stat,read,remove,rmdir",
                   "name_prefix": prefix, "keep": False}
        if stonewall:      # mdtest -W: the stonewall ends create only
            section.update(stonewall=f"{self.cfg.stonewall_s}s", stonewall_create_only=True)
        if kind == "hard":
            section["file_size"] = HARD_FILE_SIZE
            section["verify_read"] = self.cfg.verify_reads      # mdtest -X on mdtest-hard-read
        values = resolve_meta_options(None, section, "io500")
        spec = meta_spec(values, os.path.join(self.datadir, f"mdtest-{kind}"), rank=self.rank, shared_tree_owner=owner)
        try:
            return _core.MetaRun(json.dumps(spec))
        except _core.CoreError as e:
            raise TargetError(f"mdtest-{kind}: {_core_error(e)}") from None

    def _meta_visitors(self, kind: str, step: str) -> tuple[int, list[Any]]:
        """mdtest -N 1: the rank whose files this rank visits in `step` (stat: the next rank,
        read: two ahead, remove: three ahead, times the node stride) and runs that take over that
        rank's files (its own runs when it is this rank). Collective."""
        mine = [{**made, "states": run.states_json(), "next": run.next_phase}
                for made, run in zip(self.meta_made[kind], self.meta[kind])]
        everyone = self.ranks.allgather(mine)
        src = (self.rank + MDTEST_SHIFTS[step] * mdtest_stride(self.hosts)) % self.size
        if src == self.rank:
            for run in self.meta[kind]:
                if run.next_phase != step:      # a step in between was switched off (run = FALSE)
                    run.adopt(run.states_json(), step)
            return src, self.meta[kind]
        from ... import _core
        visitors = []
        for made in everyone[src]:
            run = self._meta_build(kind, made["files"], made["prefix"], made["stonewall"], owner=False)
            try:
                run.adopt(made["states"], step)
            except _core.CoreError as e:
                raise TargetError(f"mdtest-{kind}-{step}: the files of rank {src}: {_core_error(e)}") from None
            visitors.append(run)
        return src, visitors

    def _meta_hand_back(self, kind: str, step: str, src: int, runs: list[Any]) -> None:
        """After a visited step: every rank takes back the state of its own files from the rank
        that visited them (so its clean-up and later steps see what is left). Collective."""
        back = self.ranks.allgather((src, [run.states_json() for run in runs]))
        visitor = next(r for r, (s, _) in enumerate(back) if s == self.rank)
        if visitor == self.rank:
            return
        from ... import _core
        for run, states in zip(self.meta[kind], back[visitor][1]):
            phases = run.phases
            after = phases[phases.index(step) + 1]
            try:
                run.adopt(states, after)
            except _core.CoreError as e:
                raise TargetError(f"mdtest-{kind}-{step}: taking back the files from rank {visitor}: "
                                  f"{_core_error(e)}") from None

    def _meta_open(self, kind: str) -> Any:
        cfg = self.cfg
        run = self._meta_new(kind, cfg.md_easy_n if kind == "easy" else cfg.md_hard_n, f"r{self.rank}.",
                             stonewall=True, owner=self.rank == 0)
        # the tree (one per rank, or the shared one rank 0 makes) before the clock starts
        if kind == "hard" and self.rank != 0:
            self.ranks.barrier()
        self._meta_step(run, "mkdir")
        if kind == "hard" and self.rank == 0:
            self.ranks.barrier()
        return run

    def _meta_step(self, run, expect: str) -> dict[str, Any]:
        from ... import _core

        if run.next_phase != expect:
            raise UserError(f"mdtest phase {expect}: the metadata run is at {run.next_phase!r}")
        run.start()
        try:
            _wait(run)
        except _core.CoreError as e:
            return {"ops": 0, "complete": False, "error": _core_error(e), "stonewalled": False}
        return json.loads(run.result_json())

    def _meta_phase(self, out: PhaseOutcome, t0: float, kind: str, step: str, sync: bool = False) -> None:
        runs = self.meta.get(kind)
        if runs is None and step != "create":
            out.seconds = self._end(t0)
            out.error = f"mdtest-{kind}-write did not run: no files to {step}"
            return
        if runs is None:
            t_prep = time.monotonic()
            self.ranks.barrier()
            self._meta_open(kind)
            self.ranks.barrier()
            t0 += time.monotonic() - t_prep
            runs = self.meta[kind]
        src = self.rank
        if step != "create":     # io500 runs mdtest -N 1: another rank's files are visited
            t_prep = time.monotonic()
            src, runs = self._meta_visitors(kind, step)
            self.ranks.barrier()
            t0 += time.monotonic() - t_prep
        results = [self._meta_step(run, step) for run in runs]
        first = results[0]
        wearout = 0
        if step == "create":
            # mdtest's stonewall wear-out: every rank creates as many files as the rank that made most
            counts = self.ranks.allgather((first["ops"], first.get("seconds", 0.0), first["complete"]))
            top = max(c[0] for c in counts)
            wearout = top - first["ops"] if all(c[2] for c in counts) else 0
            if wearout > 0:
                more = self._meta_new(kind, wearout, f"r{self.rank}w.", stonewall=False, owner=False)
                self._meta_step(more, "mkdir")
                results.append(self._meta_step(more, "create"))
            sw_time = max(c[1] for c in counts)
            stonewall_items = sum(c[0] for c in counts)
        if sync:
            os.sync()                                  # mdtest -Y
        ops = sum(r["ops"] for r in results)
        bad = next((r for r in results if not r["complete"]), None)
        got = self.ranks.allgather((ops, bool(first.get("stonewalled")), 0 if bad is None else 1,
                                    None if bad is None else bad.get("error"), wearout))
        out.seconds = self._end(t0)
        if step != "create":
            self._meta_hand_back(kind, step, src, runs)     # after the clock, as mdtest's own set-up
        items = sum(g[0] for g in got)
        out.score = items / out.seconds / 1000
        errors = sum(g[2] for g in got)
        if errors:
            out.invalid.append(f"Errors ({errors}) occured during phase in mdtest. This invalidates your run.")
            out.error = next((g[3] for g in got if g[3]), "error")
        if step == "create":
            out.pairs["rate-stonewall"] = f"{stonewall_items / sw_time / 1000 if sw_time > 0 else 0.0:f}"
        out.details = {"items": items, "items_per_rank": [g[0] for g in got],
                       "files_of_rank": [(r + MDTEST_SHIFTS[step] * mdtest_stride(self.hosts)) % self.size
                                         for r in range(self.size)] if step != "create" else list(range(self.size)),
                       "stonewalled_ranks": sum(1 for g in got if g[1]),
                       **({"wearout_items": [g[4] for g in got]} if step == "create" else {})}

    def _mdtest_easy_write(self, out, t0):
        self._meta_phase(out, t0, "easy", "create", sync=True)

    def _mdtest_hard_write(self, out, t0):
        self._meta_phase(out, t0, "hard", "create", sync=True)

    def _mdtest_easy_stat(self, out, t0):
        self._meta_phase(out, t0, "easy", "stat")

    def _mdtest_hard_stat(self, out, t0):
        self._meta_phase(out, t0, "hard", "stat")

    def _mdtest_hard_read(self, out, t0):
        self._meta_phase(out, t0, "hard", "read")

    def _mdtest_easy_delete(self, out, t0):
        self._meta_phase(out, t0, "easy", "remove")

    def _mdtest_hard_delete(self, out, t0):
        self._meta_phase(out, t0, "hard", "remove")

    # -- timestamp and find ------------------------------------------------------------------------
    def _timestamp(self, out: PhaseOutcome, t0: float) -> None:
        path = os.path.join(self.resultdir, "timestampfile")
        if self.rank == 0:
            with open(path, "w"):
                pass
        out.seconds = self._end(t0)
        self.timestamp_mtime = self.ranks.bcast(os.stat(path).st_mtime if self.rank == 0 else None)

    def _find(self, out: PhaseOutcome, t0: float) -> None:
        self._find_in(out, t0, "find", self.datadir, hard=True)

    def _find_easy(self, out: PhaseOutcome, t0: float) -> None:
        """The extended mode's find-easy: names matching *01* in mdtest-easy (no size, no time)."""
        self._find_in(out, t0, "find-easy", os.path.join(self.datadir, "mdtest-easy"), hard=False)

    def _find_hard(self, out: PhaseOutcome, t0: float) -> None:
        """The extended mode's find-hard: find's criteria in mdtest-hard only."""
        self._find_in(out, t0, "find-hard", os.path.join(self.datadir, "mdtest-hard"), hard=True)

    def _find_in(self, out: PhaseOutcome, t0: float, section: str, root: str, hard: bool) -> None:
        """pfind ROOT [-newer timestampfile -size 3901c] -name *01*, spread over the ranks."""
        from ...jobs.io500.translator import HARD_FILE_SIZE

        nproc = min(self.cfg.ini.get(section, "nproc") or self.size, self.size)
        newer = (self.timestamp_mtime if self.timestamp_mtime is not None else 0.0) if hard else None
        size = HARD_FILE_SIZE if hard else None
        frontier = [root]
        total = found = errors = 0
        while frontier:
            mine = frontier[self.rank::nproc] if self.rank < nproc else []
            subdirs, t, f, e = find_files(mine, newer, size)
            total, found, errors = total + t, found + f, errors + e
            frontier = sorted(d for part in self.ranks.allgather(subdirs) for d in part)
        got = self.ranks.allgather((total, found, errors))
        out.seconds = self._end(t0)
        total = sum(g[0] for g in got)
        found = sum(g[1] for g in got)
        out.score = total / out.seconds / 1000
        out.pairs["nproc"] = str(nproc)
        out.pairs["found"] = str(found)
        out.pairs["total-files"] = str(total)
        if found == 0:
            out.invalid.append("Find didn't find anything, this is likely invalid.")
        out.details = {"found": found, "total_files": total, "errors": sum(g[2] for g in got), "nproc": nproc}

    # -- the end ----------------------------------------------------------------------------------------
    def clean_up(self, rank_lost: bool = False) -> dict[str, Any]:
        """Remove what the run made on this rank (the metadata runs' files, the I/O files), then
        rank 0 the phase folders and the data folder when empty. When a rank died (`rank_lost`)
        rank 0 also removes what that rank left in the phase folders: this run made those
        folders, so everything in them is the run's. Returns what was removed."""
        files = dirs = 0
        errors: list[str] = []
        def clean(kind: str, run) -> None:
            nonlocal files, dirs
            try:
                rep = json.loads(run.cleanup())
                files += rep.get("files_removed", 0)
                dirs += rep.get("dirs_removed", 0)
            except Exception as e:     # noqa: BLE001 - reported, the rest is still removed
                errors.append(f"mdtest-{kind}: {_core_error(e)}")

        owner = None     # rank 0's first mdtest-hard run owns the shared folder: it goes last
        for kind, runs in list(self.meta.items()):
            for i in reversed(range(len(runs))):
                if kind == "hard" and i == 0 and self.rank == 0:
                    owner = runs[0]
                    continue
                clean(kind, runs[i])
        self.ranks.settle(1)
        if owner is not None:
            clean("hard", owner)
        files += sum(_removed(os.unlink, path, errors) for path in self.made)
        self.ranks.settle(2)
        if self.rank == 0:
            for sub in ("ior-easy", "ior-hard", "mdtest-easy", "mdtest-hard"):
                d = os.path.join(self.datadir, sub)
                if self.cfg.easy_unique_dir and sub == "ior-easy" and os.path.isdir(d):
                    for r in range(self.size):
                        try:
                            os.rmdir(os.path.join(d, str(r)))
                        except OSError:
                            pass
                if rank_lost and os.path.isdir(d):
                    for top, subdirs, names in os.walk(d, topdown=False):
                        files += sum(_removed(os.unlink, os.path.join(top, n), errors) for n in names)
                        dirs += sum(_removed(os.rmdir, os.path.join(top, n), errors) for n in subdirs)
                dirs += _removed(os.rmdir, d, errors)
        return {"files_removed": files, "dirs_removed": dirs, "errors": errors}


def _removed(remove, path: str, errors: list[str]) -> bool:
    """`remove(path)` (unlink or rmdir): True when it removed it; already gone is no error, any
    other failure is added to `errors` and the clean-up goes on."""
    try:
        remove(path)
        return True
    except FileNotFoundError:
        return False
    except OSError as e:
        errors.append(f"{path}: {e.strerror}")
        return False


# -- the whole run -------------------------------------------------------------------------------------
def judge(out: PhaseOutcome, cfg, dry: bool = False) -> None:
    """io500's main-loop checks after a phase (src/main.c), in its words and order."""
    from ...jobs.io500.translator import WRITE_PHASES

    if out.name == "timestamp":
        return
    verify_stonewall = out.name in WRITE_PHASES
    if not dry:
        if verify_stonewall and out.seconds < cfg.stonewall_s:
            out.judged.append(f"Runtime of phase ({out.seconds:f}) is below stonewall time. This shouldn't happen!")
        elif out.score == 0.0:
            out.judged.append("Resulting score shouldn't be 0.0")
    if verify_stonewall and out.seconds < cfg.min_write_s:
        out.judged.append("Runtime is smaller than expected minimum runtime")


def run_io500(translation, ranks: Ranks, argv: Sequence[str], timestamp: str | None = None,
              progress: Callable[[str], None] | None = None, keep: bool = False,
              mode: str = "standard") -> dict[str, Any] | None:
    """Run io500 as `translation` (jobs/io500) describes on every rank of `ranks`; rank 0 returns
    the result document (kind io500), the others None. `mode` is io500's --mode: extended adds
    its optional phases (find-easy, find-hard; md-workbench is refused unless switched off).
    Refuses an unusable data folder before writing anything; a signal stops the run between or
    inside a phase: the phases done are kept, the run is scored as incomplete and what it made is
    removed."""
    from ... import __version__
    from ...document import header, now_iso
    from ...jobs.io500.translator import MODES, OPTIONAL, config_from_ini, extended_refusal, phases_of
    from ...measure.environment import host_environment
    from ...signals import STOP

    with open(translation.source, encoding="utf-8", errors="replace") as f:
        text = ranks.bcast(f.read() if ranks.rank == 0 else None)
    cfg = config_from_ini(text, translation.source)
    if mode not in MODES:
        raise UserError(f"io500 --mode {mode}: io500 has {' and '.join(MODES)}")
    if mode == "extended" and extended_refusal(cfg):
        raise UserError(extended_refusal(cfg))
    PHASES = phases_of(mode)    # noqa: N806 - io500's phase table of this mode
    stamp = ranks.bcast(timestamp or time.strftime("%Y.%m.%d-%H.%M.%S") if ranks.rank == 0 else None)
    datadir = os.path.join(cfg.datadir, stamp) if cfg.timestamp_datadir else cfg.datadir
    resultdir = os.path.join(cfg.resultdir, stamp) if cfg.timestamp_resultdir else cfg.resultdir
    problem = None
    if ranks.rank == 0:
        problem = check_datadir(os.path.abspath(cfg.datadir), cfg.timestamp_datadir)
        if problem is None and cfg.timestamp_datadir and os.path.exists(datadir):
            problem = f"datadir {datadir}: already exists (another run with timestamp {stamp}?)"
        if problem is None:
            try:
                os.makedirs(resultdir, exist_ok=True)
                if not os.access(resultdir, os.W_OK):
                    problem = f"resultdir {resultdir}: not writable"
            except OSError as e:
                problem = f"resultdir {resultdir}: cannot be made: {e.strerror}"
        if problem is None and cfg.timestamp_datadir:
            try:
                os.mkdir(datadir, 0o755)
            except OSError as e:
                problem = f"datadir {datadir}: cannot be made: {e.strerror}"
    problem = ranks.bcast(problem)
    if problem:
        raise TargetError(problem)

    doc: dict[str, Any] = {**header("io500", argv=argv),
                           "io500": {"version": f"storlab-{__version__}", "rules": "io500-02091cf",
                                     "mode": mode, "procs": ranks.size, "timestamp": stamp,
                                     "datadir": datadir, "resultdir": resultdir,
                                     "config_hash": cfg.config_hash, "stonewall_s": cfg.stonewall_s,
                                     "min_write_s": cfg.min_write_s, "run_invalid": [], "valid": True},
                           "job": translation.job, "translation": translation.record(),
                           "environment": host_environment() if ranks.rank == 0 else {},
                           "warnings": [], "phases": [], "score": {}, "cleanup": None}
    if cfg.stonewall_s != cfg.min_write_s:
        doc["io500"]["run_invalid"].append(f"stonewall-time {cfg.stonewall_s}s != {cfg.min_write_s}s")
    if cfg.drop_caches and os.geteuid() != 0:
        doc["warnings"].append({"code": "drop_caches", "message": "drop-caches = TRUE but storlab is not root: "
                                "the page cache was not dropped"})
    bench = Io500Run(cfg, ranks, datadir, resultdir, progress, timestamp=stamp)
    stopped: str | None = None
    failed_rank: str | None = None     # another rank's failure, as the communicator names it
    try:
        bench.prepare()
        for name, group in PHASES:
            try:
                out = bench.run_phase(name, group)
            except KeyboardInterrupt:
                stopped = STOP.signal_name or "a signal"
                ranks.fail(f"interrupted by {stopped}")
                out = PhaseOutcome(name, group, complete=False, error=f"interrupted by {stopped}",
                                   invalid=[f"phase stopped: interrupted by {stopped}"])
                doc["phases"].append(out.as_dict())
                break
            except StorlabError as e:     # this rank's phase failed, or another rank did (RankFailure)
                message = " ".join(str(e).split())
                if getattr(e, "rank", None) is None:
                    ranks.fail(f"{name}: {message}")
                else:
                    failed_rank = message
                out = PhaseOutcome(name, group, complete=False, error=message, invalid=[f"phase stopped: {message}"])
                doc["phases"].append(out.as_dict())
                break
            judge(out, cfg)
            doc["phases"].append(out.as_dict())
            if out.error and not out.complete:
                break
    finally:
        with STOP.held():
            if keep:
                doc["cleanup"] = {"kept": True, "files_removed": 0, "dirs_removed": 0, "errors": []}
            else:
                try:
                    doc["cleanup"] = {"kept": False, **bench.clean_up(rank_lost=failed_rank is not None)}
                except Exception as e:   # noqa: BLE001 - reported in the document
                    doc["cleanup"] = {"kept": False, "files_removed": None, "dirs_removed": None, "errors": [str(e)]}
                if ranks.rank == 0 and cfg.timestamp_datadir:
                    try:
                        os.rmdir(datadir)
                    except OSError:
                        pass
    if ranks.rank != 0:
        return None
    phases = doc["phases"]
    done = {p["name"] for p in phases}
    if stopped is not None:
        doc.update(complete=False, stop_reason="interrupted", error=f"interrupted by {stopped}")
        doc["io500"]["run_invalid"].append(f"run interrupted by {stopped}; phases not run: "
                                           + ", ".join(n for n, _ in PHASES if n not in done))
    failed = next((p for p in phases if not p["complete"] and p["error"] and stopped is None), None)
    if failed is not None:
        doc.update(complete=False, stop_reason="interrupted" if failed_rank and "interrupted by" in failed_rank else "error",
                   error=failed["error"] if failed_rank else f"{failed['name']}: {failed['error']}")
        doc["io500"]["run_invalid"].append(f"run stopped in {failed['name']}: {doc['error']}")
    # io500: an optional phase's failure invalidates the extended score only
    valid = not doc["io500"]["run_invalid"] and all(p["valid"] for p in phases if not p["optional"]) \
        and all(n in done for n, _ in PHASES if n not in OPTIONAL)
    bw, md, total = calc_score([p for p in phases if p["group"]])
    doc["score"] = {"BW": bw, "MD": md, "SCORE": total, "valid": valid,
                    "groups": score_groups([p for p in phases if not p["optional"]])}
    if mode == "extended":
        xbw, xmd, xtotal = calc_score([p for p in phases if p["group"]], extended=True)
        doc["score"]["extended"] = {"BW": xbw, "MD": xmd, "SCORE": xtotal,
                                    "valid": valid and all(p["valid"] for p in phases) and len(done) == len(PHASES)}
    doc["io500"]["valid"] = valid
    doc["finished_at"] = now_iso()
    doc["io500"]["end"] = _stamp()
    return doc
