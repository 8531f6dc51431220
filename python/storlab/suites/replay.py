"""Replaying a Darshan log: the target folder checked, the files made (only the bytes the log
reads before writing them laid out: jobs/darshan/layout.py), the translated job run, then the
fidelity table (each counter, the log against what the replay did) and the what-if ratio. The
replay's own request logs live in a private folder outside the target, removed at the end.
Under mpiexec (`run` with MPI ranks) each replay rank runs on its own MPI rank, and rank 0 merges.

What the replay did is read back from the engine's own iolog of each worker (write_iolog) and
counted with Darshan's definitions (jobs/darshan/counters.py), so the table compares the log with
the requests that reached the file system here, not with what was planned.
"""
from __future__ import annotations

import os
import random
import shutil
import socket
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..document import header
from ..errors import StorlabError, TargetError
from ..jobs.darshan.counters import BINS, COUNT_KEYS, READ, SYNC, WRITE, count_ops
from ..jobs.darshan.layout import extents, read_before_written
from ..jobs.darshan.stdio import STDIO_BUFFERING
from ..jobs.darshan.translator import IOLOG_DIR, DarshanTranslation, rank_job, write_iologs
from ..measure.aggregate import merge_phase
from ..measure.ranks import Ranks

if TYPE_CHECKING:
    from ..measure.runner import ProgressFn

__all__ = ["run", "merged_document", "rank_figures", "check_target", "check_target_folder", "prepare",
           "lay_out", "fidelity", "what_if", "read_replayed", "TOLERANCE",
           "MARKER", "finish_replay", "remove_replay_files"]

TOLERANCE = 0.05     # the log determines a value: the replay agrees within 5 %
MARKER = "MARKER"    # TARGET/.storlab-replay/MARKER: the folder holds a replay's files

# STDIO counters against the requests replayed (each stream call one request), counted as POSIX's
STDIO_ROWS = {"STDIO_READS": "POSIX_READS", "STDIO_WRITES": "POSIX_WRITES", "STDIO_BYTES_READ": "POSIX_BYTES_READ",
              "STDIO_BYTES_WRITTEN": "POSIX_BYTES_WRITTEN", "STDIO_MAX_BYTE_READ": "POSIX_MAX_BYTE_READ",
              "STDIO_MAX_BYTE_WRITTEN": "POSIX_MAX_BYTE_WRITTEN"}
STDIO_NOT_REPRODUCED = {
    "STDIO_OPENS": "the engine opens each file once per worker; the log's further fopens are not replayed",
    "STDIO_SEEKS": "the engine uses pread/pwrite: a seek shows only as the next request's offset",
    "STDIO_FLUSHES": "fflush moves the C library's buffer to the kernel; the replay has no such buffer",
}

NOT_REPRODUCED = {
    "POSIX_OPENS": "the engine opens each file once per worker; the log's further opens are not replayed",
    "POSIX_STATS": "stat calls are not replayed (the engine issues reads, writes and fsyncs)",
    "POSIX_SEEKS": "the engine uses pread/pwrite, which need no lseek",
    "POSIX_MMAPS": "memory-mapped I/O is not replayed",
}


def check_target_folder(target: str, log_paths: list[str], mapped: dict[str, str]) -> None:
    """Refuse a target that would put the replay at or among the log's own files: a log path under
    the target, a mapped path equal to a log path, or a folder holding files of anything but an
    earlier replay."""
    real_target = os.path.realpath(target)
    for p in log_paths:
        rp = os.path.realpath(p)
        if os.path.exists(rp) and (rp == real_target or rp.startswith(real_target.rstrip("/") + "/")):
            raise TargetError(f"target {target}: holds {p}, a file the log names; a replay never writes "
                              "among the log's own files: give an empty folder")
    for src, dst in mapped.items():
        if os.path.realpath(dst) == os.path.realpath(src):
            raise TargetError(f"target {target}: the replay of {src} would write at that very path; give another folder")
    if os.path.exists(target):
        if not os.path.isdir(target):
            raise TargetError(f"target {target}: is not a folder (a replay writes its files under a folder)")
        entries = [e for e in os.listdir(target) if e != IOLOG_DIR]
        if entries and not os.path.exists(os.path.join(target, IOLOG_DIR, MARKER)):
            raise TargetError(f"target {target}: is not empty ({len(entries)} entries, e.g. {sorted(entries)[0]}) "
                              "and holds no earlier replay; give an empty or new folder")


def check_target(tr: DarshanTranslation) -> None:
    """The target folder checked against the log's files and the workers' (nothing written)."""
    log_paths = sorted({w.log_path for w in tr.workers})
    check_target_folder(tr.details["replay"]["target"], log_paths, {w.log_path: w.target for w in tr.workers})


def prepare(tr: DarshanTranslation, rank: int | None = None) -> None:
    """What a replay needs before it starts, once its target is checked (`check_target`): the
    workers' iologs written in a private folder outside the target (`tr.iolog_dir`, removed by
    `remove_replay_files`), and the data files made (`lay_out`). `rank` given (under MPI): that
    replay rank's iologs only; rank 0 also makes every file (the target is on a file system all
    ranks share)."""
    tr.move_iologs(tempfile.mkdtemp(prefix="storlab-replay-"))
    write_iologs(tr, rank)
    if rank in (None, 0):
        lay_out(tr)


LAYOUT_CHUNK = 1 << 20   # laid-out data goes this many bytes at a time
LAYOUT_SEED = 0xFEED     # of the laid-out data (as the engine's own layout)


def lay_out(tr: DarshanTranslation) -> None:
    """The workers' files made afresh: sized to their extent (holes), then the ranges the log
    reads before it writes them written with seeded random data (no two chunks alike, so no
    compression or deduplication shortens them), and flushed. The bytes laid out are recorded
    in the replay's details (`laid_out_bytes`, `laid_out_files`)."""
    all_extents = extents(tr.workers)
    ranges = read_before_written(tr.workers)
    files = sorted({w.target for w in tr.workers})
    rng = random.Random(LAYOUT_SEED)
    laid_out = 0
    for path in files:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, max(all_extents.get(path, 0), 1))   # the engine's size: never 0
            for start, end in ranges.get(path, []):
                for at in range(start, end, LAYOUT_CHUNK):
                    n = min(LAYOUT_CHUNK, end - at)
                    os.pwrite(fd, rng.randbytes(n), at)
                    laid_out += n
            if path in ranges:
                os.fsync(fd)
        finally:
            os.close(fd)
    tr.details["replay"]["laid_out_bytes"] = laid_out
    tr.details["replay"]["laid_out_files"] = sum(1 for p in files if p in ranges)


def read_replayed(path: str) -> list[tuple]:
    """The requests an engine iolog (v3) records: (direction, offset, length, time s)."""
    ops: list[tuple] = []
    try:
        with open(path, encoding="utf-8") as f:
            next(f, None)
            for line in f:
                # TIME FILE ACTION [OFFSET LENGTH]: read from the right, the file name may hold spaces
                words = line.split()
                if len(words) >= 5 and words[-3] in (READ, WRITE):
                    ops.append((words[-3], int(words[-2]), int(words[-1]), int(words[0]) / 1e6))
                elif len(words) >= 5 and words[-3] in ("sync", "datasync"):
                    ops.append((SYNC, 0, 0, int(words[0]) / 1e6))
    except FileNotFoundError:
        return []
    return ops


def _status(log_v: float, rep_v: float) -> str:
    if log_v == rep_v:
        return "ok"
    if log_v and abs(rep_v - log_v) <= TOLERANCE * abs(log_v):
        return "ok"
    return "differs"


CLASS_KEYS = ("POSIX_READS", "POSIX_WRITES", "POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN")


@dataclass
class _Tally:
    """What the fidelity table sums over the records: the log's counters beside the replay's."""
    totals_log: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    totals_rep: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    classes: dict[str, dict[str, Any]] = field(default_factory=dict)     # by file class (shared, per-rank ...)
    records_ok: int = 0
    differing: list[dict[str, Any]] = field(default_factory=list)
    files_done: set[str] = field(default_factory=set)
    workers_done: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # by module: workers that did requests
    stdio_log: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    stdio_rep: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    stdio_plan: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # planned (--stdio-buffer: system calls)
    stdio_files: set[str] = field(default_factory=set)


class _Rows(list):
    """The fidelity table's rows: a counter, the log's value, the replay's, and their status."""

    def add(self, name: str, log_v: float, rep_v: float, determined: bool = True, reason: str = "",
            status: str = "") -> None:
        status = status or (_status(log_v, rep_v) if determined else ("not reproduced" if reason else "approximate"))
        self.append({"counter": name, "log": log_v, "replay": rep_v, "status": status,
                     **({"reason": reason} if reason else {})})


def fidelity(tr: DarshanTranslation, replayed: dict[int, list[tuple]] | None = None) -> dict[str, Any]:
    """Each counter, the log against the replay; per record and in total. The steps: each record's
    workers' replayed requests counted (`_replayed`) and compared with the record (`_compare_posix`,
    `_compare_stdio`), then the table's rows (`_stdio_rows`, `_posix_rows`) and what the replay
    cannot reproduce (`_fidelity_result`). `replayed` (under MPI): each worker's replayed requests
    as its rank read them from its iolog, by worker index; otherwise read here."""
    buffer = tr.details["replay"].get("stdio_buffer", 0)
    by_record: dict[tuple[str, int, int], list] = defaultdict(list)
    for w in tr.workers:
        by_record[(w.module, w.record_id, w.log_rank if w.source == "counters" else _record_rank(tr, w))].append(w)
    tally = _Tally()
    for rec in tr.records:
        ws = by_record.get((rec.module, rec.id, rec.rank), [])
        rep = _replayed(ws, tally, replayed)
        log = {k: rec.c(k) for k in COUNT_KEYS}
        log["POSIX_FSYNCS"] = rec.c("POSIX_FSYNCS") + rec.c("POSIX_FDSYNCS")
        cls = tally.classes.setdefault(tr.file_classes.get(rec.id, "per-rank"),
                                       {"records": 0, "log": dict.fromkeys(CLASS_KEYS, 0),
                                        "replay": dict.fromkeys(CLASS_KEYS, 0)})
        cls["records"] += 1
        for k in CLASS_KEYS:
            cls["log"][k] += log[k]
            cls["replay"][k] += rep[k]
        if rec.module == "STDIO":
            _compare_stdio(tally, rec, ws, rep, buffer)
        else:
            _compare_posix(tally, rec, log, rep)
    rows = _Rows()
    rows.add("files", len({r.path for r in tr.records}), len(tally.files_done))
    if tally.stdio_files:
        _stdio_rows(rows, tally, tr, buffer)
    if any(r.module != "STDIO" for r in tr.records):
        _posix_rows(rows, tally, tr)
    return _fidelity_result(tr, list(rows), tally.classes, tally.records_ok, tally.differing)


def _replayed(ws: list, tally: _Tally, replayed: dict[int, list[tuple]] | None) -> dict[str, int]:
    """A record's counters as its workers' replayed requests give them (read back from the
    engine's iologs, counted as Darshan counts); the files and workers that did requests tallied."""
    rep: dict[str, int] = defaultdict(int)
    for w in ws:
        ops = [tuple(op[:3]) for op in (replayed.get(w.index, []) if replayed is not None
                                        else read_replayed(w.replayed_iolog))]
        if ops:
            tally.files_done.add(w.target)
            tally.workers_done[w.module] += 1
        for k, v in count_ops(ops).items():
            if k in COUNT_KEYS:
                rep[k] = max(rep[k], v) if k.startswith("POSIX_MAX_BYTE") else rep[k] + v
    return rep


def _compare_posix(tally: _Tally, rec, log: dict[str, int], rep: dict[str, int]) -> None:
    """A POSIX (or MPI-IO) record: within tolerance or differing, and its counters into the totals
    (an extent counts as its bytes: MAX_BYTE + 1)."""
    bad = [k for k in COUNT_KEYS if not k.startswith("POSIX_MAX_BYTE") and _status(log[k], rep[k]) != "ok"]
    if bad:
        tally.differing.append({"file": rec.path, "rank": rec.rank, "counters": {k: [log[k], rep[k]] for k in bad}})
    else:
        tally.records_ok += 1
    for k in COUNT_KEYS:
        if k.startswith("POSIX_MAX_BYTE"):
            tally.totals_log[k] += log[k] + 1 if log[k] else 0
            tally.totals_rep[k] += rep[k] + 1 if rep[k] else 0
        else:
            tally.totals_log[k] += log[k]
            tally.totals_rep[k] += rep[k]


def _compare_stdio(tally: _Tally, rec, ws: list, rep: dict[str, int], buffer: int) -> None:
    """A STDIO record: the log's stream calls against the requests replayed. One request per call:
    against the log's calls; through a stream buffer: against the system calls planned."""
    tally.stdio_files.add(rec.path)
    for k, posix in STDIO_ROWS.items():
        tally.stdio_log[k] += rec.c(k) + (1 if k.startswith("STDIO_MAX_BYTE") and rec.c(k) else 0)
        tally.stdio_rep[k] += rep[posix] + (1 if posix.startswith("POSIX_MAX_BYTE") and rep[posix] else 0)
    plan: dict[str, int] = defaultdict(int)
    for w in ws:
        for k, v in count_ops([op[:3] for op in w.ops]).items():
            if k in CLASS_KEYS:
                plan[k] += v
                tally.stdio_plan[k] += v
    want = {k: rec.c(k) if not buffer else plan[STDIO_ROWS[k]] for k in STDIO_ROWS}
    bad = [k for k in STDIO_ROWS if not k.startswith("STDIO_MAX_BYTE") and _status(want[k], rep[STDIO_ROWS[k]]) != "ok"]
    if bad:
        tally.differing.append({"file": rec.path, "rank": rec.rank, "module": "STDIO",
                                "counters": {k: [want[k], rep[STDIO_ROWS[k]]] for k in bad}})
    else:
        tally.records_ok += 1


def _stdio_rows(rows: _Rows, tally: _Tally, tr: DarshanTranslation, buffer: int) -> None:
    """The STDIO rows: calls and bytes (through a stream buffer: the application's calls, then
    the system calls the buffer makes of them), mean sizes, extents, and what is not replayed."""
    stdio_log, stdio_rep = tally.stdio_log, tally.stdio_rep
    if buffer:
        for k, tag in (("STDIO_READS", "read"), ("STDIO_WRITES", "write")):
            if not (stdio_log[k] or stdio_rep[k]):
                continue
            rows.add(k, stdio_log[k], stdio_rep[k], status="buffered",
                     reason=f"{stdio_log[k]:,} {tag} calls replayed as {stdio_rep[k]:,} system calls "
                            f"through a {buffer}-byte stream buffer (--stdio-buffer)")
            rows.add(f"{tag} system calls, {buffer}-byte buffer (planned from {k})", tally.stdio_plan[STDIO_ROWS[k]],
                     stdio_rep[k])
        rows.add("STDIO_BYTES_WRITTEN", stdio_log["STDIO_BYTES_WRITTEN"], stdio_rep["STDIO_BYTES_WRITTEN"])
        rows.add("STDIO_BYTES_READ", stdio_log["STDIO_BYTES_READ"], stdio_rep["STDIO_BYTES_READ"],
                 determined=stdio_log["STDIO_BYTES_READ"] == stdio_rep["STDIO_BYTES_READ"])
    else:
        for k in ("STDIO_READS", "STDIO_WRITES", "STDIO_BYTES_READ", "STDIO_BYTES_WRITTEN"):
            rows.add(k, stdio_log[k], stdio_rep[k])
    for tag, calls, size in (("read", "STDIO_READS", "STDIO_BYTES_READ"),
                             ("write", "STDIO_WRITES", "STDIO_BYTES_WRITTEN")):
        if (stdio_log[calls] or stdio_rep[calls]) and not buffer:
            rows.add(f"STDIO mean {tag} size (bytes / calls)",
                     round(stdio_log[size] / stdio_log[calls], 1) if stdio_log[calls] else 0.0,
                     round(stdio_rep[size] / stdio_rep[calls], 1) if stdio_rep[calls] else 0.0)
    for k in ("STDIO_MAX_BYTE_READ", "STDIO_MAX_BYTE_WRITTEN"):
        if stdio_log[k] or stdio_rep[k]:
            rows.add(f"{k} (extent, summed over files)", stdio_log[k], stdio_rep[k], determined=False)
    stdio_meta = {k: sum(max(0, r.c(k)) for r in tr.records if r.module == "STDIO") for k in STDIO_NOT_REPRODUCED}
    for k, why in STDIO_NOT_REPRODUCED.items():
        if k == "STDIO_FLUSHES" and buffer and stdio_meta[k]:
            rows.add(k, stdio_meta[k], 0, status="buffered", reason="spread evenly over the writes, each writing out "
                     "what the buffer holds (in the system calls above)")
        elif stdio_meta[k] or k == "STDIO_OPENS":
            rows.add(k, stdio_meta[k], tally.workers_done["STDIO"] if k == "STDIO_OPENS" else 0,
                     determined=False, reason=why)


def _posix_rows(rows: _Rows, tally: _Tally, tr: DarshanTranslation) -> None:
    """The POSIX rows: counts and bytes, size bins, order (SEQ, CONSEC, switches, fsyncs) and its
    fractions, extents, and the metadata calls not replayed."""
    totals_log, totals_rep = tally.totals_log, tally.totals_rep
    for k in ("POSIX_READS", "POSIX_WRITES", "POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN"):
        rows.add(k, totals_log[k], totals_rep[k])
    for tag in ("READ", "WRITE"):
        for b in BINS:
            k = f"POSIX_SIZE_{tag}_{b}"
            if totals_log[k] or totals_rep[k]:
                rows.add(k, totals_log[k], totals_rep[k])
    for k in ("POSIX_SEQ_READS", "POSIX_CONSEC_READS", "POSIX_SEQ_WRITES", "POSIX_CONSEC_WRITES",
              "POSIX_RW_SWITCHES", "POSIX_FSYNCS"):
        rows.add(k, totals_log[k], totals_rep[k])
    for k, d in (("seq fraction of reads", ("POSIX_SEQ_READS", "POSIX_READS")),
                 ("consec fraction of reads", ("POSIX_CONSEC_READS", "POSIX_READS")),
                 ("seq fraction of writes", ("POSIX_SEQ_WRITES", "POSIX_WRITES")),
                 ("consec fraction of writes", ("POSIX_CONSEC_WRITES", "POSIX_WRITES"))):
        lf = totals_log[d[0]] / totals_log[d[1]] if totals_log[d[1]] else 0.0
        rf = totals_rep[d[0]] / totals_rep[d[1]] if totals_rep[d[1]] else 0.0
        if totals_log[d[1]] or totals_rep[d[1]]:
            rows.add(k, round(lf, 4), round(rf, 4))
    from_dxt = tr.details["replay"]["from_dxt"] and not tr.details["replay"]["from_counters"]
    for k in ("POSIX_MAX_BYTE_READ", "POSIX_MAX_BYTE_WRITTEN"):
        if totals_log[k] or totals_rep[k]:
            rows.add(f"{k} (extent, summed over files)", totals_log[k], totals_rep[k], determined=from_dxt)
    # Darshan writes -1 where it did not track a counter (e.g. POSIX_MMAPS on some builds)
    meta = {k: sum(max(0, r.c(k)) for r in tr.records if r.module != "STDIO") for k in NOT_REPRODUCED}
    rows.add("POSIX_OPENS", meta["POSIX_OPENS"], tally.workers_done["POSIX"] + tally.workers_done["MPI-IO"],
             determined=False, reason=NOT_REPRODUCED["POSIX_OPENS"])
    for k in ("POSIX_STATS", "POSIX_SEEKS", "POSIX_MMAPS"):
        if meta[k]:
            rows.add(k, meta[k], 0, determined=False, reason=NOT_REPRODUCED[k])


def _fidelity_result(tr: DarshanTranslation, rows: list[dict[str, Any]], classes: dict[str, Any], records_ok: int,
                     differing: list[dict[str, Any]]) -> dict[str, Any]:
    """The fidelity table's document: its rows, and what the replay cannot reproduce, with why."""
    log = tr.log
    not_reproduced: list[dict[str, str]] = []
    if any(r.module == "STDIO" for r in tr.records) and not tr.details["replay"].get("stdio_buffer"):
        not_reproduced.append({"what": "STDIO buffering", "reason": STDIO_BUFFERING + " (--stdio-buffer SIZE reproduces it)"})
    for name, counts in tr.streams.items():
        not_reproduced.append({"what": f"STDIO {name}", "reason": "a standard stream (or pipe), not a file: "
                               f"{counts['STDIO_WRITES']:,} writes of {counts['STDIO_BYTES_WRITTEN']:,} bytes, "
                               f"{counts['STDIO_READS']:,} reads of {counts['STDIO_BYTES_READ']:,} bytes not replayed"})
    if log is not None:
        for module, reason in (("H5F", "HDF5 library calls: the requests HDF5 made beneath them are replayed"),
                               ("H5D", "HDF5 library calls: the requests HDF5 made beneath them are replayed"),
                               ("LUSTRE", "the file striping of the logged system; the replay uses the target's")):
            if module in log.modules:
                not_reproduced.append({"what": module, "reason": reason})
        for r in log.module_records("POSIX"):
            if not (r.c("POSIX_READS") or r.c("POSIX_WRITES")) and (r.c("POSIX_OPENS") or r.c("POSIX_STATS")):
                not_reproduced.append({"what": "files opened or stat'ed without reads or writes",
                                       "reason": "metadata-only access is not replayed"})
                break
    rep = tr.details["replay"]
    if not rep["timed"]:
        not_reproduced.append({"what": "think time between requests",
                               "reason": "replayed as fast as possible" + (" (--timed keeps DXT's recorded start times)"
                                                                           if rep["from_dxt"] else
                                                                           ": the counters do not record it")})
    elif rep["from_counters"]:
        not_reproduced.append({"what": "think time of files without a DXT trace",
                               "reason": "only DXT records start times: their requests follow one another at once"})
    return {"tolerance": TOLERANCE, "rows": rows, "classes": classes, "records": len(tr.records),
            "records_within_tolerance": records_ok,
            "differing_records": differing[:50], "not_reproduced": not_reproduced}


def _record_rank(tr: DarshanTranslation, w) -> int:
    """The record a DXT-traced worker belongs to: its file's shared record or its own rank's."""
    return -1 if tr.file_classes.get(w.record_id) == "shared" else w.log_rank


def what_if(tr: DarshanTranslation, doc: dict[str, Any], busy_s: float | None = None) -> dict[str, Any]:
    """The log's I/O time against the replay's, and their ratio (replay / log). `busy_s` (under
    MPI): the slowest rank's busy time, as its rank measured it; otherwise from the phases."""
    log = tr.log
    scale = tr.details["replay"]["scale"]
    timed_records = (log.module_records("POSIX") + log.module_records("STDIO")) if log else []
    nprocs = log.nprocs if log else 1
    whole_log = _slowest_rank_s(timed_records, nprocs)
    replayed = {(r.module, r.id, r.rank) for r in tr.records}
    mine = [r for r in timed_records if (r.module, r.id, r.rank) in replayed]
    slowest = _slowest_rank_s(mine, nprocs)
    data_s = _slowest_rank_s(mine, nprocs, meta=False) * scale
    dxt_span = None
    if tr.details["replay"]["from_dxt"]:
        starts = [op[3] for w in tr.workers if w.source == "dxt" for op in w.ops]
        ends = [op[4] for w in tr.workers if w.source == "dxt" for op in w.ops]
        if starts and ends:
            dxt_span = max(ends) - min(starts)
    phases = [p for p in doc.get("phases", []) if isinstance(p, dict)]
    wall_s = sum(float(p.get("seconds") or 0.0) for p in phases)
    timed = tr.details["replay"]["timed"]
    busy = busy_s if busy_s is not None else _slowest_replay_rank_s(tr, phases)
    replay_s = wall_s if timed or busy is None else busy
    log_s = (dxt_span if timed and dxt_span else slowest) * scale
    basis = ("DXT span: first request's start to last request's end" if timed and dxt_span else
             "slowest rank's POSIX_F_READ_TIME + POSIX_F_WRITE_TIME + POSIX_F_META_TIME (shared files: "
             "POSIX_F_SLOWEST_RANK_TIME), as darshan-parser --perf, over the files replayed"
             + (" (their STDIO_F_* timers alike for stdio streams)" if any(r.module == "STDIO" for r in mine) else ""))
    if scale != 1:
        basis += f", times {scale} (the replay's scale)"
    ratio = replay_s / log_s if log_s > 0 else None
    return {"log_io_s": log_s, "replay_io_s": replay_s, "ratio": ratio, "log_basis": basis,
            "replay_basis": "the replay's time from the first request to the last (the phase's wall time)" if timed
            else "slowest replay rank: the sum of its workers' times from first request to last completion",
            "replay_wall_s": wall_s,
            **({"dxt_span_s": dxt_span} if dxt_span is not None else {}),
            "log_slowest_rank_s": slowest, "whole_log_slowest_rank_s": whole_log,
            "log_data_io_s": data_s, "data_ratio": replay_s / data_s if data_s > 0 and not timed else None}


def _slowest_replay_rank_s(tr: DarshanTranslation, phases: list[dict[str, Any]]) -> float | None:
    """Per replay rank, the busy time of its workers (first request to last completion) summed
    over the steps; the largest. None when the document has no per-worker times."""
    per_rank: dict[int, float] = defaultdict(float)
    seen = False
    for phase, indices in zip(phases, tr.group_workers):
        for w in phase.get("workers") or []:
            name = str(w.get("group", ""))
            if not name.startswith("g") or not name[1:].isdigit() or int(name[1:]) - 1 >= len(indices):
                continue
            worker = tr.workers[indices[int(name[1:]) - 1]]
            per_rank[worker.rank] += max(0.0, float(w.get("end_s", 0.0)) - float(w.get("start_s", 0.0)))
            seen = True
    return max(per_rank.values()) if seen else None


def _slowest_rank_s(records, nprocs: int, meta: bool = True) -> float:
    """darshan-parser --perf's slowest rank: per rank, the read, write and metadata time of its own
    files (POSIX and STDIO records), plus each shared file's POSIX_F_SLOWEST_RANK_TIME (`meta` False: reads and writes only,
    a shared file's share of them per rank)."""
    per_rank: dict[int, float] = defaultdict(float)
    shared = 0.0
    for r in records:
        m = "STDIO" if r.module == "STDIO" else "POSIX"     # STDIO names its timers as POSIX does
        t = r.f(f"{m}_F_READ_TIME") + r.f(f"{m}_F_WRITE_TIME") + (r.f(f"{m}_F_META_TIME") if meta else 0.0)
        if r.rank == -1:
            shared += (r.f(f"{m}_F_SLOWEST_RANK_TIME") if meta else 0.0) or t / max(1, nprocs)
        else:
            per_rank[r.rank] += t
    return (max(per_rank.values()) if per_rank else 0.0) + shared


def finish_replay(tr: DarshanTranslation, doc: dict[str, Any], replayed: dict[int, list[tuple]] | None = None,
                  busy_s: float | None = None) -> None:
    """doc["translation"] and doc["replay"] (fidelity and what-if) from what the run did."""
    doc["translation"] = tr.record()
    doc["replay"] = {**tr.details["replay"], "log": tr.details["log"], "fidelity": fidelity(tr, replayed),
                     "what_if": what_if(tr, doc, busy_s)}


def remove_replay_files(tr: DarshanTranslation, keep_data: bool) -> None:
    """The iologs always (their private folder; they are in the document's figures); the data
    files unless kept. Kept files get the marker (TARGET/.storlab-replay/MARKER), written after
    the replay, that lets the next replay take the folder."""
    target = tr.details["replay"]["target"]
    if tr.iolog_dir and os.path.commonpath([tr.iolog_dir, target]) != target:
        shutil.rmtree(tr.iolog_dir, ignore_errors=True)
    if keep_data:
        os.makedirs(os.path.join(target, IOLOG_DIR), exist_ok=True)
        with open(os.path.join(target, IOLOG_DIR, MARKER), "w", encoding="utf-8") as f:
            f.write(f"storlab replay of {tr.source}\n")
        return
    for t in sorted({w.target for w in tr.workers}):
        try:
            os.unlink(t)
        except OSError:
            pass
    for d in sorted({os.path.dirname(w.target) for w in tr.workers}, key=len, reverse=True):
        while d.startswith(target.rstrip("/") + "/"):
            try:
                os.rmdir(d)
            except OSError:
                break
            d = os.path.dirname(d)
    shutil.rmtree(os.path.join(target, IOLOG_DIR), ignore_errors=True)


# -- the run: one process, or one replay rank per MPI rank ------------------------------------------
def run(tr: DarshanTranslation, ranks: Ranks, progress: ProgressFn | None, *, argv: list[str],
        keep_files: bool = False) -> dict[str, Any] | None:
    """The replay of `tr` on `ranks`: the run document (with its fidelity table and what-if) on
    rank 0, None on the other ranks. One process: every replay rank a worker here. Under MPI
    (`tr` translated with `mpi_ranks` = ranks.size): replay rank r runs on MPI rank r, its files
    one after another; rank 0 merges the ranks' phases (per rank and per node, as every MPI run
    reports them) and counts the fidelity table from every rank's replayed requests."""
    from ..measure.runner import run_job

    if ranks.size == 1:
        check_target(tr)
        try:
            prepare(tr)
            doc = run_job(tr.resolve({}), argv=argv, progress=progress, notify=lambda msg: None)
            finish_replay(tr, doc)
        finally:
            remove_replay_files(tr, keep_data=keep_files)
        return doc
    problem = None
    if ranks.rank == 0:
        try:
            check_target(tr)
        except TargetError as e:
            problem = str(e)
    problem = ranks.bcast(problem)
    if problem:
        raise TargetError(problem)     # on every rank, before anything is written
    try:
        payload = _run_rank(tr, ranks, progress, argv, run_job)
    except BaseException:
        if ranks.rank == 0:          # the files rank 0 made (every rank stopped with it)
            remove_replay_files(tr, keep_data=keep_files)
        raise
    finally:
        if tr.iolog_dir:
            shutil.rmtree(tr.iolog_dir, ignore_errors=True)
    got = ranks.gather_surviving(payload)
    if ranks.rank != 0:
        return None
    try:
        return merged_document(tr, ranks, got)
    finally:
        remove_replay_files(tr, keep_data=keep_files)


def _run_rank(tr: DarshanTranslation, ranks: Ranks, progress: ProgressFn | None, argv: list[str],
              run_job) -> dict[str, Any]:
    """One MPI rank's part: rank 0 makes the files, every rank checks it sees its own, then runs
    its replay rank's job; what rank 0 needs back (its phases, replayed requests, busy time)."""
    me = ranks.rank
    error = None
    try:
        prepare(tr, me)
    except StorlabError as e:
        error = f"rank {me}: {e}"
    _raise_first(ranks.allgather(error))       # also the barrier: rank 0's files are made now
    unseen = [w.target for w in tr.workers if w.rank == me and not os.path.exists(w.target)]
    _raise_first(ranks.allgather(
        f"target {tr.details['replay']['target']}: rank {me} on {socket.gethostname()} does not see {unseen[0]}, "
        "which rank 0 made; under mpiexec the target must be on a file system every node shares" if unseen else None))
    job = rank_job(tr, me)
    doc = None
    if job["phase"]:
        try:
            doc = run_job(replace(tr, job=job).resolve({}), argv=argv, progress=progress if me == 0 else None,
                          notify=lambda msg: None)
        except StorlabError as e:
            ranks.fail(f"rank {me} ({socket.gethostname()}): {e}")
            doc = {"phases": [], "error": str(e), "complete": False}
    mine = [w for w in tr.workers if w.rank == me]
    return {"node": socket.gethostname(), "offset_s": ranks.clock_offset_s, "doc": doc,
            "replayed": {w.index: read_replayed(w.replayed_iolog) for w in mine},
            "files": sorted({w.target for w in mine}),
            "busy_s": sum(max(0.0, w["end_s"] - w["start_s"]) for p in (doc or {}).get("phases", [])
                          for w in p.get("workers") or [])}


def _raise_first(errors: list[str | None]) -> None:
    """Every rank raises the first rank's error, if any rank had one (nothing run yet)."""
    first = next((e for e in errors if e), None)
    if first:
        raise TargetError(first)


def merged_document(tr: DarshanTranslation, ranks: Ranks, got: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Rank 0: one run document of every rank's replay. Each step merged over the ranks that ran
    it (aggregate.merge_phase: per-rank and per-node figures, stragglers), the replay's own
    per-rank and per-node totals in `mpi`, and the fidelity and what-if over all ranks."""
    size = ranks.size
    nodes = [got[r]["node"] if r in got else "?" for r in range(size)]
    docs = {r: p["doc"] for r, p in got.items() if p["doc"] is not None}
    whole = [r for r in sorted(docs) if "schema" in docs[r]]     # a rank whose run failed sent its error only
    base = dict(docs[whole[0]]) if whole else {**header("run", argv=[]), "phases": [], "warnings": []}
    step_names = list(dict.fromkeys(ph["name"] for r in sorted(docs) for ph in docs[r]["phases"]))
    phases = []
    for name in step_names:
        results = [None] * size
        for r, d in docs.items():
            ph = next((ph for ph in d["phases"] if ph["name"] == name), None)
            if ph is not None and ph.get("workers") is not None:
                results[r] = {**ph, "offset_s": got[r]["offset_s"]}
        if not any(results):
            continue
        merged = merge_phase(results, None, nodes)
        merged["mpi"]["missing_ranks"] = [r for r in range(size) if r not in got]   # not an idle rank
        merged["mpi"]["idle_ranks"] = [r for r in got if results[r] is None]
        phases.append(merged)
    base["phases"] = phases
    base["argv"] = base.get("argv") or []
    errors = [f"rank {r}: {d['error']}" for r, d in sorted(docs.items()) if d.get("error")]
    missing = [r for r in range(size) if r not in got]
    failure = ranks.failure
    base["complete"] = not errors and not missing and failure is None and all(d.get("complete") for d in docs.values())
    if not base["complete"]:
        base["error"] = base.get("error") or (errors[0] if errors else str(failure.args[0]) if failure is not None
                                              else f"ranks {missing} sent no result")
        base["stop_reason"] = "error"
    base["mpi"] = rank_figures(got, nodes, size)
    replayed = {int(i): ops for p in got.values() for i, ops in p["replayed"].items()}
    finish_replay(tr, base, replayed, busy_s=max((p["busy_s"] for p in got.values()), default=0.0))
    return base


def rank_figures(got: dict[int, dict[str, Any]], nodes: list[str], size: int) -> dict[str, Any]:
    """The replay's `mpi` section: each rank's files, bytes and busy time (first request to last
    completion of each of its files, summed) and its rate; the same per node; the ranks missing."""
    per_rank = []
    for r in sorted(got):
        p = got[r]
        ph = (p["doc"] or {}).get("phases", [])
        moved = {d: sum(w.get(f"{d}_bytes", 0) for x in ph for w in x.get("workers") or []) for d in ("read", "write")}
        total = moved["read"] + moved["write"]
        per_rank.append({"rank": r, "node": p["node"], "files": len(p["files"]), "read_bytes": moved["read"],
                         "write_bytes": moved["write"], "busy_s": p["busy_s"],
                         "bw_bytes": total / p["busy_s"] if p["busy_s"] > 0 else 0.0})
    per_node = []
    for node in dict.fromkeys(nodes):
        mine = [x for x in per_rank if x["node"] == node]
        files = {f for x in mine for f in got[x["rank"]]["files"]}
        per_node.append({"node": node, "ranks": [x["rank"] for x in mine], "files": len(files),
                         "read_bytes": sum(x["read_bytes"] for x in mine),
                         "write_bytes": sum(x["write_bytes"] for x in mine),
                         "busy_s": max((x["busy_s"] for x in mine), default=0.0)})
    return {"size": size, "ranks": per_rank, "nodes": per_node, "missing_ranks": [r for r in range(size) if r not in got]}
