"""Replaying a Darshan log: the target folder checked, the translated job run, then the fidelity
table (each counter, the log against what the replay did) and the what-if ratio.

What the replay did is read back from the engine's own iolog of each worker (write_iolog) and
counted with Darshan's definitions (jobs/darshan/counters.py), so the table compares the log with
the requests that reached the file system here, not with what was planned.
"""
from __future__ import annotations

import os
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..errors import TargetError
from ..jobs.darshan.counters import BINS, COUNT_KEYS, READ, SYNC, WRITE, count_ops
from ..jobs.darshan.stdio import STDIO_BUFFERING
from ..jobs.darshan.translator import IOLOG_DIR, DarshanTranslation, write_iologs

__all__ = ["check_target_folder", "prepare", "fidelity", "what_if", "read_replayed", "TOLERANCE",
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


def prepare(tr: DarshanTranslation) -> None:
    """The target folder checked and marked, the workers' iologs written (nothing else yet)."""
    target = tr.details["replay"]["target"]
    log_paths = sorted({w.log_path for w in tr.workers})
    check_target_folder(target, log_paths, {w.log_path: w.target for w in tr.workers})
    os.makedirs(os.path.join(target, IOLOG_DIR), exist_ok=True)
    with open(os.path.join(target, IOLOG_DIR, MARKER), "w", encoding="utf-8") as f:
        f.write(f"storlab replay of {tr.source}\n")
    for d in {os.path.dirname(w.target) for w in tr.workers}:
        os.makedirs(d, exist_ok=True)
    write_iologs(tr)


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


def fidelity(tr: DarshanTranslation) -> dict[str, Any]:
    """Each counter, the log against the replay; per record and in total. The steps: each record's
    workers' replayed requests counted (`_replayed`) and compared with the record (`_compare_posix`,
    `_compare_stdio`), then the table's rows (`_stdio_rows`, `_posix_rows`) and what the replay
    cannot reproduce (`_fidelity_result`)."""
    buffer = tr.details["replay"].get("stdio_buffer", 0)
    by_record: dict[tuple[str, int, int], list] = defaultdict(list)
    for w in tr.workers:
        by_record[(w.module, w.record_id, w.log_rank if w.source == "counters" else _record_rank(tr, w))].append(w)
    tally = _Tally()
    for rec in tr.records:
        ws = by_record.get((rec.module, rec.id, rec.rank), [])
        rep = _replayed(ws, tally)
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


def _replayed(ws: list, tally: _Tally) -> dict[str, int]:
    """A record's counters as its workers' replayed requests give them (read back from the
    engine's iologs, counted as Darshan counts); the files and workers that did requests tallied."""
    rep: dict[str, int] = defaultdict(int)
    for w in ws:
        ops = [op[:3] for op in read_replayed(w.replayed_iolog)]
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


def what_if(tr: DarshanTranslation, doc: dict[str, Any]) -> dict[str, Any]:
    """The log's I/O time against the replay's, and their ratio (replay / log)."""
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
    busy = _slowest_replay_rank_s(tr, phases)
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


def finish_replay(tr: DarshanTranslation, doc: dict[str, Any]) -> None:
    """doc["translation"] and doc["replay"] (fidelity and what-if) from what the run did."""
    doc["translation"] = tr.record()
    doc["replay"] = {**tr.details["replay"], "log": tr.details["log"], "fidelity": fidelity(tr),
                     "what_if": what_if(tr, doc)}


def remove_replay_files(tr: DarshanTranslation, keep_data: bool) -> None:
    """The iologs always (they are in the document's figures); the data files unless kept."""
    target = tr.details["replay"]["target"]
    for w in tr.workers:
        for p in (w.iolog, w.replayed_iolog):
            try:
                os.unlink(p)
            except OSError:
                pass
    if keep_data:
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
