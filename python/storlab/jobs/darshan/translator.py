"""Darshan logs as storlab jobs: each file a rank touched becomes one worker replaying a request
sequence (fio iolog v3) on a file of the same name under the target folder.

Where the log has a DXT trace of a file on a rank (DXT_POSIX), the worker replays its exact
offsets and lengths; elsewhere the sequence is made from the record's counters (synth.py), so it
has the record's request counts, bytes, size bins, SEQ and CONSEC counts, switches and fsyncs.
A STDIO record (fopen/fread/fwrite... on a file) replays its stream calls, one request each, or
through a glibc stream buffer (stdio.py); the standard streams are not files and are left out.
The log's ranks become replay ranks (one engine worker each, in one process; `ranks` folds
rank r onto r mod ranks; under mpiexec, `mpi_ranks`: one MPI rank each, running `rank_job`);
a file shared by all ranks (a rank -1 record) is dealt to every rank.
Each rank does its files one after another, in the order the log first opened them: the job's
phase k holds every rank's k-th file ("steps"), so ranks run side by side and a rank never works
on two files at once. With `timed`, the job is one phase and each request keeps its recorded
start time (think time kept).

Writes go only under the target folder; the log's paths are never opened.
"""
from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ...errors import UserError
from ..translation import Mapped, Translation, sha256_of
from .counters import BINS, READ, SYNC, WRITE
from .layout import extents as file_extents
from .log import DarshanLog, Record, load
from .stdio import STDIO_BUFFERING, STDIO_CHOICES, stdio_as_posix, stdio_requests, stdio_scaled, stream_name
from .synth import MAX_REQUEST, STATED_CHOICES, synthesize

__all__ = ["FORMAT", "translate", "DarshanTranslation", "Worker", "MAX_RANKS", "MAX_WORKERS_PER_PHASE",
           "file_classes", "scaled_counters", "rank_job", "default_ranks", "fold_line", "replay_ranks", "fold", "choose_records",
           "choose_stdio", "sequences", "trailing_syncs", "job_phases", "mapping"]

FORMAT = "darshan"
MAX_RANKS = 256                 # replay ranks in one process (threads); --ranks folds more onto fewer
MAX_WORKERS_PER_PHASE = 1024    # a timed replay runs every file of every rank at once
IOLOG_DIR = ".storlab-replay"   # under the target: `--emit -`'s iologs, and the marker of kept files
RANKS_IN_PROCESS = "one worker each, in one process"
RANKS_UNDER_MPI = "one MPI rank each, under mpiexec"

COUNT_COUNTERS = ("POSIX_READS", "POSIX_WRITES", "POSIX_SEQ_READS", "POSIX_SEQ_WRITES", "POSIX_CONSEC_READS",
                  "POSIX_CONSEC_WRITES", "POSIX_RW_SWITCHES", "POSIX_FSYNCS", "POSIX_FDSYNCS", "POSIX_OPENS",
                  "POSIX_STATS", "POSIX_SEEKS", "POSIX_MMAPS", *(f"POSIX_SIZE_READ_{b}" for b in BINS),
                  *(f"POSIX_SIZE_WRITE_{b}" for b in BINS), *(f"POSIX_ACCESS{i}_COUNT" for i in range(1, 5)),
                  *(f"POSIX_STRIDE{i}_COUNT" for i in range(1, 5)))
BYTE_COUNTERS = ("POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN", "POSIX_MAX_BYTE_READ", "POSIX_MAX_BYTE_WRITTEN")
STREAM_COUNTERS = ("STDIO_READS", "STDIO_WRITES", "STDIO_BYTES_READ", "STDIO_BYTES_WRITTEN")  # of streams left out


@dataclass
class Worker:
    """One engine worker: one rank doing one file's requests."""
    index: int
    rank: int                # replay rank
    log_rank: int            # the log's rank (-1: a share of a shared record)
    record_id: int
    log_path: str            # the file as the log names it (never opened)
    target: str              # where the replay does it, under the target folder
    source: str              # "dxt" or "counters"
    ops: list[tuple]         # (direction, offset, length[, start s])
    first_s: float           # the log's time of its first request (s after the job's start)
    sync_end: bool = False   # an fsync after its last request (the group's fsync_end)
    iolog: str = ""          # the generated log it replays
    replayed_iolog: str = ""  # the log the engine writes of what it did
    module: str = "POSIX"    # the record's module: POSIX, MPI-IO (no POSIX beneath) or STDIO


@dataclass
class DarshanTranslation(Translation):
    """A Darshan translation with its workers (kept out of `record()`: one per file and rank)."""
    workers: list[Worker] = field(default_factory=list)
    log: DarshanLog | None = None
    records: list[Record] = field(default_factory=list)   # the POSIX records replayed (scaled)
    file_classes: dict[int, str] = field(default_factory=dict)
    group_workers: list[list[int]] = field(default_factory=list)   # per phase, per group: its worker
    streams: dict[str, dict[str, int]] = field(default_factory=dict)  # standard streams left out: their counts
    iolog_dir: str = ""      # where the request logs are (a replay's: a private folder outside the target)

    def emit(self, path: str) -> None:
        """--emit FILE: the job, and the request logs it replays in FILE.iologs/ (the job names
        them there), and the empty folders its files go in under the target. `-`: the job only,
        its logs under the target's .storlab-replay/."""
        if path != "-":
            self.move_iologs(os.path.abspath(path) + ".iologs")
        write_iologs(self)
        for folder in sorted({os.path.dirname(w.target) for w in self.workers}):
            os.makedirs(folder, exist_ok=True)   # the engine creates files, not folders
        super().emit(path)

    def move_iologs(self, iolog_dir: str) -> None:
        """Name the workers' request logs (and the replay's own) under `iolog_dir`."""
        self.iolog_dir = iolog_dir
        for w in self.workers:
            w.iolog = os.path.join(iolog_dir, "logs", f"w{w.index}.iolog")
            w.replayed_iolog = os.path.join(iolog_dir, "replayed", f"w{w.index}.iolog")
        for phase, indices in zip(self.job["phase"], self.group_workers):
            for g, wi in zip(phase["group"], indices):
                g["read_iolog"], g["write_iolog"] = self.workers[wi].iolog, self.workers[wi].replayed_iolog


def scaled_counters(c: dict[str, int], scale: float) -> dict[str, int]:
    """A record's counters with its request counts and bytes times `scale` (sizes kept)."""
    if scale == 1.0:
        return dict(c)
    out = dict(c)
    for k in COUNT_COUNTERS + BYTE_COUNTERS:
        if k in c:
            out[k] = int(round(c[k] * scale))
    return out


def file_classes(log: DarshanLog) -> dict[int, str]:
    """record id -> "shared" (one rank -1 record: every rank opened it), "rank0-only" (only rank 0
    of several), or "per-rank" (each rank its own record)."""
    ranks: dict[int, set[int]] = defaultdict(set)
    for r in log.module_records("POSIX") + log.module_records("STDIO"):
        ranks[r.id].add(r.rank)
    out = {}
    for rid, rs in ranks.items():
        out[rid] = "shared" if -1 in rs else "rank0-only" if rs == {0} and log.nprocs > 1 else "per-rank"
    return out


def _mpiio_as_posix(r: Record) -> dict[str, int]:
    """An MPI-IO record without a POSIX one beneath: its counts, bytes and (aggregate) size bins
    as POSIX counters; the order is chosen consecutive (MPI-IO keeps no SEQ/CONSEC counters)."""
    reads = sum(r.c(f"MPIIO_{k}_READS") for k in ("INDEP", "COLL", "SPLIT", "NB"))
    writes = sum(r.c(f"MPIIO_{k}_WRITES") for k in ("INDEP", "COLL", "SPLIT", "NB"))
    c = {"POSIX_READS": reads, "POSIX_WRITES": writes, "POSIX_BYTES_READ": r.c("MPIIO_BYTES_READ"),
         "POSIX_BYTES_WRITTEN": r.c("MPIIO_BYTES_WRITTEN"), "POSIX_RW_SWITCHES": r.c("MPIIO_RW_SWITCHES"),
         "POSIX_FSYNCS": r.c("MPIIO_SYNCS"), "POSIX_SEQ_READS": max(0, reads - 1), "POSIX_CONSEC_READS": max(0, reads - 1),
         "POSIX_SEQ_WRITES": max(0, writes - 1), "POSIX_CONSEC_WRITES": max(0, writes - 1),
         "POSIX_MAX_BYTE_READ": max(0, r.c("MPIIO_BYTES_READ") - 1), "POSIX_MAX_BYTE_WRITTEN": max(0, r.c("MPIIO_BYTES_WRITTEN") - 1),
         "POSIX_OPENS": r.c("MPIIO_INDEP_OPENS") + r.c("MPIIO_COLL_OPENS")}
    for b in BINS:
        c[f"POSIX_SIZE_READ_{b}"] = r.c(f"MPIIO_SIZE_READ_AGG_{b}")
        c[f"POSIX_SIZE_WRITE_{b}"] = r.c(f"MPIIO_SIZE_WRITE_AGG_{b}")
    for i in range(1, 5):
        c[f"POSIX_ACCESS{i}_ACCESS"] = r.c(f"MPIIO_ACCESS{i}_ACCESS")
        c[f"POSIX_ACCESS{i}_COUNT"] = r.c(f"MPIIO_ACCESS{i}_COUNT")
    return c


def _first_time(r: Record) -> float:
    """The record's first open, read or write (STDIO names its timestamps as POSIX does)."""
    prefix = "STDIO" if r.module == "STDIO" else "POSIX"
    times = [r.f(f"{prefix}_F_{k}_START_TIMESTAMP") for k in ("OPEN", "READ", "WRITE")]
    times = [t for t in times if t > 0]
    return min(times) if times else 0.0


def fold_line(nprocs: int, n_ranks: int, chosen: bool, under_mpi: bool = False) -> str:
    """One line saying what was folded onto what (printed by `storlab replay`, kept in the notes)."""
    per = -(-nprocs // n_ranks)
    each = f"{per} log ranks each" if nprocs % n_ranks == 0 else f"{per - 1} or {per} log ranks each"
    how = ("the MPI ranks" if under_mpi else f"--ranks {n_ranks}" if chosen
           else f"default: at most {MAX_RANKS} ranks in one process")
    return (f"folded the log's {nprocs} ranks onto {n_ranks} replay ranks ({each}: log rank r replays as rank "
            f"r mod {n_ranks}; {how})"
            + ("" if chosen or under_mpi else f"; choose another count with --ranks N (1..{MAX_RANKS})"))


def default_ranks(nprocs: int) -> int:
    """Replay ranks for a log of `nprocs` ranks when --ranks is not given: all of them up to
    MAX_RANKS; beyond, the fewest ranks that still give each at most ceil(nprocs / MAX_RANKS) log
    ranks (2048 -> 256 of 8 each, 1000 -> 250 of 4, 257 -> 129 of 2 or 1): the slowest replay rank
    carries no more than with MAX_RANKS, and the ranks' loads differ by one log rank at most."""
    if nprocs <= MAX_RANKS:
        return max(1, nprocs)
    per = -(-nprocs // MAX_RANKS)
    return -(-nprocs // per)


def _does_io(c: dict[str, int]) -> bool:
    return bool(c.get("POSIX_READS", 0) or c.get("POSIX_WRITES", 0))


def map_paths(paths: list[str], target: str) -> dict[str, str]:
    """Each log path -> the same name under the target folder (their common folder left out)."""
    absolute = [p for p in paths if p]
    if not absolute:
        return {}
    common = os.path.commonpath([os.path.dirname(p) or "/" for p in absolute]) if len(absolute) > 1 \
        else os.path.dirname(absolute[0])
    out = {}
    for p in absolute:
        rel = os.path.relpath(p, common) if common and common != "." else p.lstrip("/")
        rel = os.path.normpath(rel).lstrip("/")
        while rel.startswith("../"):
            rel = rel[3:]
        out[p] = os.path.join(target, rel or os.path.basename(p))
    return out


@dataclass
class _Chosen:
    """The records a replay does (record choice and STDIO), and what was left out of it."""
    records: list[Record]                    # POSIX, then MPI-IO-only, then STDIO: counters scaled
    stdio_files: list[Record]                # the STDIO records among them (as POSIX counters)
    mpiio_only: list[Record]                 # MPI-IO records with no POSIX record beneath
    streams: dict[str, list[Record]]         # standard streams (or pipes) left out, by name


def translate(path: str, *, target: str = "storlab-replay", iolog_dir: str | None = None, ranks: int | None = None,
              scale: float = 1.0, dxt: bool = True, timed: bool = False, seed: int = 1,
              log: DarshanLog | None = None, stdio_buffer: int = 0, mpi_ranks: int | None = None) -> DarshanTranslation:
    """The log at `path` as a storlab job replaying it under `target` (see the module's docstring).
    The workers' iologs go to IOLOG_DIR/logs, the replay's own to IOLOG_DIR/replayed (IOLOG_DIR:
    `iolog_dir`, default TARGET/.storlab-replay). `stdio_buffer` > 0: STDIO calls go through a
    fully buffered stream of that many bytes, as glibc's (stdio.py's `buffered`); 0: one request
    per call. `mpi_ranks` (under mpiexec): the replay ranks are that many MPI ranks, log rank r on
    MPI rank r mod mpi_ranks (no limit of one process; `ranks` is not given then).

    The steps: the records chosen (`choose_records`, `choose_stdio`), the log's ranks folded onto
    the replay's (`replay_ranks`), each record's request sequences (`sequences`), the job's phases
    (`job_phases`), and the record of what became of each counter (`mapping`)."""
    log = log or load(path)
    if stdio_buffer < 0:
        raise UserError(f"stdio_buffer: {stdio_buffer} is not allowed; use 0 (one request per call) or a size in bytes")
    if not 0 < scale <= 1:
        raise UserError(f"scale: {scale} is not allowed; use a fraction in (0, 1] of the log's requests")
    n_ranks = mpi_ranks or replay_ranks(log.nprocs, ranks)
    target = os.path.abspath(target)
    iolog_dir = os.path.abspath(iolog_dir or os.path.join(target, IOLOG_DIR))
    classes = file_classes(log)
    notes: list[str] = []

    chosen = choose_records(log, scale, classes, notes)
    choose_stdio(log, scale, stdio_buffer, classes, chosen, notes)
    if not chosen.records:
        raise UserError(f"darshan {os.path.basename(path)}: no POSIX, MPI-IO or STDIO record reads or writes any "
                        "byte of a file"
                        + (f" at scale {scale}" if scale != 1 else "") + "; nothing to replay")
    workers, sources = sequences(log, chosen.records, map_paths(sorted({r.path for r in chosen.records}), target),
                                 n_ranks, scale=scale, dxt=dxt, seed=seed, stdio_buffer=stdio_buffer, notes=notes)
    trailing_syncs(workers, notes)
    phases, group_workers = job_phases(workers, timed, iolog_dir)
    job: dict[str, Any] = {"engine": "psync", "direct": False, "fsync_end": False, "invalidate": False,
                           "replay_no_stall": not timed, "phase": phases}
    mapped = mapping(log, chosen, workers, sources, classes, notes, target=target, n_ranks=n_ranks,
                     ranks_chosen=ranks is not None, under_mpi=mpi_ranks is not None, scale=scale, timed=timed, stdio_buffer=stdio_buffer)

    tr = DarshanTranslation(format=FORMAT, source=path, sha256=sha256_of(path), job=job, mapped=mapped,
                            notes=_dedupe(notes), workers=workers, log=log, records=chosen.records,
                            file_classes=classes, group_workers=group_workers, iolog_dir=iolog_dir,
                            streams={name: _totals(rs, STREAM_COUNTERS, at_least=0)
                                     for name, rs in chosen.streams.items()})
    tr.details = {"log": {"version": log.version, "nprocs": log.nprocs, "jobid": log.jobid, "exe": log.exe[:200],
                          "run_time_s": log.run_time_s, "modules": sorted(log.modules)},
                  "replay": {"ranks": n_ranks, "scale": scale, "stdio_buffer": stdio_buffer,
                             **({"folded": fold_line(log.nprocs, n_ranks, ranks is not None, mpi_ranks is not None)}
                                if n_ranks < log.nprocs or (n_ranks != log.nprocs and mpi_ranks is None) else {}),
                             "timed": timed, "workers": len(workers),
                             "phases": len(phases), "from_dxt": sources["dxt"], "from_counters": sources["counters"],
                             "files": len({w.target for w in workers}), "target": target,
                             "in_process": mpi_ranks is None}}
    return tr


# -- rank folding ----------------------------------------------------------------------------------
def replay_ranks(nprocs: int, ranks: int | None) -> int:
    """The replay's ranks: `ranks` (--ranks) when given, checked, else `default_ranks`. Log rank r
    replays as rank r mod the result (`fold`)."""
    n_ranks = default_ranks(nprocs) if ranks is None else ranks
    if n_ranks < 1:
        raise UserError(f"ranks: {n_ranks} is not allowed; use 1 to {MAX_RANKS}")
    if n_ranks > MAX_RANKS:
        raise UserError(f"ranks: {n_ranks} is more than {MAX_RANKS} workers in one process; give --ranks N "
                        f"(1 <= N <= {MAX_RANKS}) to fold the log's {nprocs} ranks onto N")
    return n_ranks


def fold(log_rank: int, n_ranks: int) -> int:
    """The replay rank of a log rank."""
    return log_rank % n_ranks


# -- record choice ---------------------------------------------------------------------------------
def choose_records(log: DarshanLog, scale: float, classes: dict[int, str], notes: list[str]) -> _Chosen:
    """The POSIX records to replay (files that were read or written, counters scaled); MPI-IO
    records with no POSIX record beneath stand in for them (their counters as POSIX's)."""
    posix = log.module_records("POSIX")
    posix_ids = {r.id for r in posix}
    records: list[Record] = []
    not_files: set[str] = set()
    for r in posix:
        c = scaled_counters(r.counters, scale)
        if not _does_io(c):
            continue
        if not r.path.startswith("/"):   # Darshan's names for pipes, sockets, standard streams
            not_files.add(r.path)
            continue
        records.append(Record("POSIX", r.id, r.rank, r.path, c, dict(r.fcounters)))
    if not_files:
        shown = ", ".join(sorted(not_files)[:3]) + (", ..." if len(not_files) > 3 else "")
        notes.append(f"{len(not_files)} records are not files ({shown}: pipes, sockets or standard streams): "
                     "not replayed")
    mpiio_only = [r for r in log.module_records("MPI-IO") if r.id not in posix_ids]
    for r in mpiio_only:
        c = scaled_counters(_mpiio_as_posix(r), scale)
        if _does_io(c):
            records.append(Record("MPI-IO", r.id, r.rank, r.path, c, {}))
            classes.setdefault(r.id, "shared" if r.rank == -1 else "per-rank")
    if mpiio_only:
        notes.append(f"{len(mpiio_only)} MPI-IO files have no POSIX record beneath: replayed from their MPI-IO "
                     "counters (aggregate sizes), consecutive requests (MPI-IO keeps no SEQ/CONSEC counters)")
    return _Chosen(records, [], mpiio_only, {})


# -- STDIO -----------------------------------------------------------------------------------------
def choose_stdio(log: DarshanLog, scale: float, stdio_buffer: int, classes: dict[int, str], chosen: _Chosen,
                 notes: list[str]) -> None:
    """The STDIO records of files, added to `chosen`: the stream calls the application made.
    Darshan's POSIX module does not see the read/write system calls the C library makes beneath a
    stream (glibc calls them internally, not through the symbols Darshan intercepts), so a file with
    both records had both kinds of calls. (Before Darshan 3.1.0 the POSIX module itself wrapped
    fopen/fread/fwrite: no STDIO records then.) Standard streams and pipes are left out, counted."""
    for r in log.module_records("STDIO"):
        s = stdio_scaled(r.counters, scale)
        if not (s["STDIO_READS"] or s["STDIO_WRITES"]) or not (s["STDIO_BYTES_READ"] or s["STDIO_BYTES_WRITTEN"]):
            continue
        stream = stream_name(r.path)
        if stream or not r.path.startswith("/"):
            chosen.streams.setdefault(stream or r.path, []).append(r)
            continue
        chosen.stdio_files.append(Record("STDIO", r.id, r.rank, r.path, stdio_as_posix(s), dict(r.fcounters)))
        classes.setdefault(r.id, "shared" if r.rank == -1 else "per-rank")
    chosen.records += chosen.stdio_files
    streams = chosen.streams
    if streams:
        shown = ", ".join(name + (f" ({rs[0].path})" if rs[0].path != name else "")
                          for name, rs in sorted(streams.items()))
        left_out = [r for rs in streams.values() for r in rs]
        notes.append(f"STDIO: {shown} not replayed: standard streams (or pipes), not files; "
                     f"{sum(r.c('STDIO_WRITES') for r in left_out):,} writes of "
                     f"{sum(r.c('STDIO_BYTES_WRITTEN') for r in left_out):,} bytes, "
                     f"{sum(r.c('STDIO_READS') for r in left_out):,} reads of "
                     f"{sum(r.c('STDIO_BYTES_READ') for r in left_out):,} bytes")
    both = {r.path for r in chosen.stdio_files} & {r.path for r in chosen.records if r.module == "POSIX"}
    if both:
        notes.append(f"{len(both)} files have POSIX and STDIO records: both replayed (the POSIX module does not "
                     "see the system calls the C library makes beneath a stream: nothing is counted twice)")
    if chosen.stdio_files:
        notes.append(f"STDIO: {STDIO_BUFFERING}" if not stdio_buffer else
                     f"STDIO: the calls go through a fully buffered stream of {stdio_buffer} bytes, as glibc's "
                     "(--stdio-buffer): the replay issues the system calls the C library would make; the "
                     "fidelity table keeps the application's calls beside them")


# -- sequences -------------------------------------------------------------------------------------
def sequences(log: DarshanLog, records: list[Record], paths: dict[str, str], n_ranks: int, *, scale: float,
              dxt: bool, seed: int, stdio_buffer: int, notes: list[str]) -> tuple[list[Worker], dict[str, int]]:
    """The workers: each record's request sequences, from its DXT trace where every rank of it has
    one (and the log is not scaled), else made from its counters (synth.py; STDIO: stdio.py);
    and how many came from each source."""
    dxt_by_key: dict[tuple[int, int], Any] = {}
    if dxt:
        for d in log.dxt.get("DXT_POSIX", []):
            dxt_by_key[(d.id, d.rank)] = d
    if dxt_by_key and scale != 1.0:
        notes.append(f"DXT traces not used at --scale {scale:g}: every file replays from its counters")
    workers: list[Worker] = []
    sources: dict[str, int] = defaultdict(int)
    for rec in records:
        log_ranks = [rec.rank] if rec.rank >= 0 else list(range(log.nprocs))
        traced = [dxt_by_key.get((rec.id, lr)) for lr in log_ranks]
        if dxt and scale == 1.0 and all(traced) and rec.module == "POSIX":
            made = _traced_workers(rec, log_ranks, traced, paths[rec.path], n_ranks, len(workers), notes)
            sources["dxt"] += len(made)
        else:
            made = _counted_workers(rec, log.nprocs, paths[rec.path], n_ranks, len(workers), seed=seed,
                                    stdio_buffer=stdio_buffer, notes=notes)
            sources["counters"] += len(made)
        workers += made
    return workers, sources


def _traced_workers(rec: Record, log_ranks: list[int], traced: list[Any], target: str, n_ranks: int, first: int,
                    notes: list[str]) -> list[Worker]:
    """One worker per log rank of a record, replaying its DXT segments (exact offsets and lengths,
    in the order they started; requests above MAX_REQUEST split)."""
    segments = sum(len(d.reads) + len(d.writes) for d in traced)
    if segments < rec.c("POSIX_READS") + rec.c("POSIX_WRITES"):
        notes.append(f"{os.path.basename(rec.path)}: the DXT trace holds {segments} of "
                     f"{rec.c('POSIX_READS') + rec.c('POSIX_WRITES')} requests (DXT's trace buffer filled up); "
                     "the traced ones are replayed")
    out: list[Worker] = []
    for lr, d in zip(log_ranks, traced):
        ops = [(READ, int(o), int(n), float(t), float(e)) for o, n, t, e in d.reads] + \
              [(WRITE, int(o), int(n), float(t), float(e)) for o, n, t, e in d.writes]
        ops.sort(key=lambda op: op[3])
        dropped = sum(1 for op in ops if op[2] <= 0)
        ops = [p for op in ops if op[2] > 0 for p in _split_timed(op)]
        if dropped:
            notes.append(f"{os.path.basename(rec.path)} rank {lr}: {dropped} zero-length requests "
                         "(reads at end of file) cannot be replayed")
        if not ops:
            continue
        out.append(Worker(first + len(out), fold(lr, n_ranks), lr, rec.id, rec.path, target, "dxt", ops, ops[0][3]))
    return out


def _counted_workers(rec: Record, nprocs: int, target: str, n_ranks: int, first: int, *, seed: int,
                     stdio_buffer: int, notes: list[str]) -> list[Worker]:
    """The workers of a record replayed from its counters: one, or for a shared record (rank -1)
    one per replay rank (at most the log's ranks), each a part of the record's requests."""
    parts = min(n_ranks, nprocs) if rec.rank == -1 else 1
    if rec.module == "STDIO":
        per_part = stdio_requests(rec.counters, rec.fcounters, parts, stdio_buffer)
    else:
        syn = synthesize(rec.counters, rec.fcounters, parts, seed + (rec.id % 100003), log_ranks=nprocs)
        notes += [f"{os.path.basename(rec.path)}: {n}" for n in syn.notes]
        per_part = syn.parts
    out: list[Worker] = []
    for p, ops in enumerate(per_part):
        if not any(op[0] != SYNC for op in ops):
            continue
        rank = p if rec.rank == -1 else fold(rec.rank, n_ranks)
        out.append(Worker(first + len(out), rank, rec.rank, rec.id, rec.path, target, "counters", ops,
                          _first_time(rec), module=rec.module))
    return out


def trailing_syncs(workers: list[Worker], notes: list[str]) -> None:
    """The engine's replay drops an fsync that ends a log (it syncs only before a next request):
    a trailing fsync is the group's fsync_end instead, which the engine does and logs."""
    for w in workers:
        trailing = 0
        while w.ops and w.ops[-1][0] == SYNC:
            w.ops.pop()
            trailing += 1
        w.sync_end = trailing > 0
        if trailing > 1:
            notes.append(f"{os.path.basename(w.log_path)}: {trailing} fsyncs in a row after the last write "
                         "replay as one")


# -- the job ---------------------------------------------------------------------------------------
def job_phases(workers: list[Worker], timed: bool, iolog_dir: str) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """The job's phases: steps (each rank's files in the order first opened, step k holding every
    rank's k-th file), or one timed phase; and per phase, per group, its worker. Each worker's
    iologs are named under `iolog_dir` and set on its group."""
    extents = file_extents(workers)
    phases: list[dict[str, Any]] = []
    if timed:
        if len(workers) > MAX_WORKERS_PER_PHASE:
            raise UserError(f"timed: {len(workers)} files x ranks would run at once, more than "
                            f"{MAX_WORKERS_PER_PHASE} workers; replay untimed (steps) or with --ranks")
        t0 = min(w.first_s for w in workers)
        phases.append({"name": "replay", "group": [_group(w, extents, start_delay=w.first_s - t0) for w in workers]})
    else:
        by_rank: dict[int, list[Worker]] = defaultdict(list)
        for w in workers:
            by_rank[w.rank].append(w)
        for ws in by_rank.values():
            ws.sort(key=lambda w: (w.first_s, w.index))
        steps = max(len(ws) for ws in by_rank.values())
        for k in range(steps):
            group = [_group(ws[k], extents) for _, ws in sorted(by_rank.items()) if k < len(ws)]
            phases.append({"name": f"step{k + 1}", "group": group})
    for w in workers:
        w.iolog = os.path.join(iolog_dir, "logs", f"w{w.index}.iolog")
        w.replayed_iolog = os.path.join(iolog_dir, "replayed", f"w{w.index}.iolog")
    # Group dicts were built before the paths were set: fill them in now.
    worker_of_group: list[list[int]] = []
    for phase in phases:
        worker_of_group.append([g.pop("_worker") for g in phase["group"]])
        for g, wi in zip(phase["group"], worker_of_group[-1]):
            g["read_iolog"], g["write_iolog"] = workers[wi].iolog, workers[wi].replayed_iolog
    return phases, worker_of_group


def rank_job(tr: DarshanTranslation, rank: int) -> dict[str, Any]:
    """The job one replay rank runs under MPI: each phase with only the groups of that rank's
    workers, phases left with none dropped (a rank with fewer files is done sooner)."""
    phases = []
    for phase, indices in zip(tr.job["phase"], tr.group_workers):
        groups = [g for g, wi in zip(phase["group"], indices) if tr.workers[wi].rank == rank]
        if groups:
            phases.append({**phase, "group": groups})
    return {**tr.job, "phase": phases}


# -- the record ------------------------------------------------------------------------------------
def mapping(log: DarshanLog, chosen: _Chosen, workers: list[Worker], sources: dict[str, int],
            classes: dict[int, str], notes: list[str], *, target: str, n_ranks: int, ranks_chosen: bool,
            under_mpi: bool = False, scale: float, timed: bool, stdio_buffer: int) -> list[Mapped]:
    """What became of each counter group of the log (one Mapped each), the choices made, and every
    module not replayed with why; the notes follow the same order."""
    records, stdio_files = chosen.records, chosen.stdio_files
    n_shared = sum(1 for r in records if classes.get(r.id) == "shared")
    n_rank0 = sum(1 for r in records if classes.get(r.id) == "rank0-only")
    n_per = len(records) - n_shared - n_rank0
    posix_like = [r for r in records if r.module != "STDIO"]
    posix_counters = any(w.source == "counters" for w in workers if w.module != "STDIO")
    modules_replayed = " and ".join(m for m in ("POSIX", "MPI-IO", "STDIO") if any(r.module == m for r in records))
    folded = f"log rank r replays as rank r mod {n_ranks}"
    how = RANKS_UNDER_MPI if under_mpi else RANKS_IN_PROCESS
    mapped = [
        Mapped("job.nprocs", log.nprocs, f"{n_ranks} replay ranks ({how})",
               "translated" if n_ranks == log.nprocs else "chosen",
               note="" if n_ranks == log.nprocs else f"the MPI ranks: {folded}" if under_mpi
               else f"--ranks {n_ranks}: {folded}" if ranks_chosen
               else f"folded by default (at most {MAX_RANKS} in one process): {folded}"),
        Mapped(f"{modules_replayed} records (file classes)", len(records),
               f"{len({r.path for r in records})} files under {target}",
               "derived", note=f"{n_shared} shared (rank -1), {n_per} per-rank, {n_rank0} rank-0-only; "
                               "each path mapped to the same name under the target folder"),
    ]
    if posix_like:
        mapped.append(Mapped("POSIX_READS, POSIX_WRITES, POSIX_BYTES_*", _totals(posix_like, ("POSIX_READS", "POSIX_WRITES")),
                             "iolog read/write lines", "translated" if scale == 1 else "derived",
                             note="" if scale == 1 else f"scaled by {scale}: counts and bytes, sizes kept"))
    mapped.append(Mapped("POSIX_F_*_START_TIMESTAMP" + (", STDIO_F_*_START_TIMESTAMP" if stdio_files else ""),
                         "first open/read/write", "order of a rank's files (steps)" if not timed
                         else "start_delay of each file's worker", "chosen",
                         note="files of one rank one after another, in the order first opened; ranks side by side"
                         if not timed else "each file's first request at its recorded time"))
    if posix_counters:
        mapped += [
            Mapped("POSIX_SIZE_READ_*, POSIX_SIZE_WRITE_*, POSIX_ACCESS1..4", "size bins", "request lengths", "derived",
                   note=STATED_CHOICES[0]),
            Mapped("POSIX_SEQ_*, POSIX_CONSEC_*, POSIX_STRIDE1..4, POSIX_MAX_BYTE_*", "offsets", "request offsets",
                   "derived", note=STATED_CHOICES[1]),
            Mapped("POSIX_RW_SWITCHES, POSIX_FSYNCS, POSIX_FDSYNCS",
                   _totals(posix_like, ("POSIX_RW_SWITCHES", "POSIX_FSYNCS")),
                   "order of reads and writes; iolog sync lines", "derived", note=STATED_CHOICES[2])]
    if stdio_files:
        mapped += _stdio_mapping(stdio_files, scale, stdio_buffer)
    if chosen.streams:
        mapped.append(Mapped("STDIO standard streams", sorted(chosen.streams), "", "accepted",
                             note="not replayed: <STDIN>, <STDOUT>, <STDERR> (or pipes) are not files"))
    if sources["dxt"]:
        mapped.append(Mapped("DXT_POSIX segments", sum(len(w.ops) for w in workers if w.source == "dxt"),
                             "exact offsets and lengths" + (" at their recorded start times" if timed else ""),
                             "translated"))
    mpiio = log.module_records("MPI-IO")
    if mpiio:
        coll = sum(r.c("MPIIO_COLL_READS") + r.c("MPIIO_COLL_WRITES") for r in mpiio)
        indep = sum(r.c("MPIIO_INDEP_READS") + r.c("MPIIO_INDEP_WRITES") for r in mpiio)
        mapped.append(Mapped("MPIIO_COLL_*, MPIIO_INDEP_*", {"collective": coll, "independent": indep},
                             "the POSIX requests beneath them" if not chosen.mpiio_only
                             else "requests from MPI-IO counters",
                             "derived", note="replayed at the POSIX layer, where the MPI-IO library's requests "
                                             "(collective buffering included) reached the file system"))
    # the first three choices are about POSIX's own counters (size bins, SEQ/CONSEC, switches)
    notes += [f"chosen: {c}" for i, c in enumerate(STATED_CHOICES) if (posix_counters if i < 3 else sources["counters"])]
    notes += [f"chosen: {c}" for c in STDIO_CHOICES if stdio_files]
    if n_ranks < log.nprocs or (n_ranks != log.nprocs and not under_mpi):
        notes.insert(0, fold_line(log.nprocs, n_ranks, chosen=ranks_chosen, under_mpi=under_mpi))
    if n_ranks > log.nprocs and under_mpi:
        idle = f"rank {log.nprocs}" if n_ranks - log.nprocs == 1 else f"ranks {log.nprocs} to {n_ranks - 1}"
        notes.append(f"the log has {log.nprocs} ranks: MPI {idle} replay nothing (a shared file's requests are "
                     "dealt to as many ranks as the log had)")
    notes.append(f"ranks run as {n_ranks} MPI ranks, one engine worker each" if under_mpi
                 else f"ranks run as {n_ranks} workers in one process (not under MPI)")
    notes += [f"{module}: {why}" for module, why in log.skipped.items()]
    for module in log.modules:      # every other module of the log is named in the record, with why
        if module in log.skipped or any(covers(module, m.key) for m in mapped):
            continue
        notes.append(f"{module}: not replayed ({_not_replayed(module)})")
        mapped.append(Mapped(module, "module records", "", "accepted", note=f"not replayed: {_not_replayed(module)}"))
    return mapped


def _stdio_mapping(stdio_files: list[Record], scale: float, stdio_buffer: int) -> list[Mapped]:
    """What became of the STDIO counters: calls as requests (or a stream buffer's system calls)."""
    return [
        Mapped("STDIO_READS, STDIO_WRITES, STDIO_BYTES_*",
               _totals(stdio_files, ("STDIO_READS", "STDIO_WRITES", "STDIO_BYTES_READ", "STDIO_BYTES_WRITTEN")),
               "iolog read/write lines: one request per fread/fwrite call" if not stdio_buffer else
               f"iolog read/write lines: the system calls of a {stdio_buffer}-byte stream buffer",
               "translated" if scale == 1 and not stdio_buffer else "derived",
               note=(STDIO_BUFFERING if not stdio_buffer else "glibc's fully buffered stream: small calls "
                     "gathered into buffer-sized system calls, large ones straight through, reads ahead a "
                     "buffer at a time") + ("" if scale == 1 else f"; scaled by {scale}: calls and bytes")),
        Mapped("STDIO request size (STDIO_BYTES_* / STDIO_READS, STDIO_WRITES)", "bytes / calls", "request lengths",
               "derived", note=STDIO_CHOICES[0]),
        Mapped("STDIO_MAX_BYTE_*, STDIO_SEEKS", _totals(stdio_files, ("STDIO_SEEKS",)), "request offsets",
               "derived", note=STDIO_CHOICES[1]),
        Mapped("STDIO_OPENS, STDIO_FLUSHES", _totals(stdio_files, ("STDIO_OPENS", "STDIO_FLUSHES")), "", "accepted",
               note="not replayed: one open per worker; fflush hands the C library's buffer to the kernel "
                    "(not an fsync), and each call here is already a system call")]


def write_iologs(tr: DarshanTranslation, rank: int | None = None) -> None:
    """Each worker's request sequence as an fio iolog v3 (times in microseconds from the start);
    `rank` given: only that replay rank's workers."""
    workers = [w for w in tr.workers if rank is None or w.rank == rank]
    dirs = {os.path.dirname(w.iolog) for w in workers} | {os.path.dirname(w.replayed_iolog) for w in workers}
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    timed = tr.details["replay"]["timed"]
    for w in workers:
        name = "_".join(w.target.split())   # the log's file names a word; the group's target is the real path
        lines = ["fio version 3 iolog", f"0 {name} add", f"0 {name} open"]
        for op in w.ops:
            us = int(round((op[3] - w.first_s) * 1e6)) if timed and len(op) > 3 else 0
            if op[0] == SYNC:
                lines.append(f"{max(0, us)} {name} sync 0 0")
            else:
                lines.append(f"{max(0, us)} {name} {op[0]} {op[1]} {op[2]}")
        lines.append(f"0 {name} close")
        with open(w.iolog, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


def _group(w: Worker, extents: dict[str, int], start_delay: float = 0.0) -> dict[str, Any]:
    # io_size: every byte of the log (the engine otherwise stops a worker after one range's bytes)
    io = sum(op[2] for op in w.ops if op[0] != SYNC)
    g: dict[str, Any] = {"target": [w.target], "size": max(extents[w.target], 1),
                         "io_size": -(-max(io, 1) // 4096) * 4096, "_worker": w.index}
    if start_delay > 0:
        g["start_delay"] = round(start_delay, 6)
    if w.sync_end:
        g["fsync_end"] = True
    return g


def _split_timed(op: tuple) -> list[tuple]:
    d, off, size, t, end = op
    if size <= MAX_REQUEST:
        return [op]
    return [(d, off + k, min(MAX_REQUEST, size - k), t, end) for k in range(0, size, MAX_REQUEST)]


def _totals(records: list[Record], keys: tuple[str, ...], at_least: int | None = None) -> dict[str, int]:
    """Each counter summed over the records (`at_least` 0: Darshan's -1, not tracked, counted as 0)."""
    if at_least is None:
        return {k: sum(r.c(k) for r in records) for k in keys}
    return {k: sum(max(at_least, r.c(k)) for r in records) for k in keys}


def covers(module: str, key: str) -> bool:
    """Whether a Mapped key (a counter or counter group, e.g. "MPIIO_COLL_*") stands for a module
    of the log (pydarshan's name, e.g. "MPI-IO")."""
    name = module.replace("-", "")
    return key == name or key.startswith((name + " ", name + "_"))


def _not_replayed(module: str) -> str:
    return {"LUSTRE": "the file system's striping of the logged files; the replay runs on the target's own layout",
            "DXT_MPIIO": "the MPI-IO calls' trace; the POSIX requests beneath them (DXT_POSIX, or the counters) are "
                         "replayed instead",
            "MPI-IO": "the MPI-IO calls; the POSIX requests beneath them are replayed instead",
            "STDIO": "its requests went through the C library's buffers; their sizes and offsets as they reached "
                     "the file system are not recorded",
            "H5F": "HDF5's own calls; the POSIX (or MPI-IO) requests HDF5 made are replayed instead",
            "H5D": "HDF5's own calls; the POSIX (or MPI-IO) requests HDF5 made are replayed instead",
            }.get(module, "library-level calls; the requests beneath them are replayed instead")


def _dedupe(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(lines))
