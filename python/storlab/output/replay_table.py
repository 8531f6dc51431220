"""Text of `storlab replay`: the log's summary, the fidelity table (each counter, the log against
the replay) with what could not be reproduced, and the what-if ratio. Reads the result document
(doc["translation"], doc["replay"]) only, except `render_translation`, which shows a translation
that was emitted without running."""
from __future__ import annotations

import os
from typing import Any

__all__ = ["render_replay", "render_translation", "render_fidelity", "summary_lines"]


def _num(v: Any) -> str:
    if isinstance(v, float) and not v.is_integer():
        return f"{v:.4f}" if v < 10 else f"{v:,.2f}"
    return f"{int(v):,}"


def summary_lines(source: str, log: dict[str, Any], replay: dict[str, Any]) -> list[str]:
    exe = (log.get("exe") or "").split()[0:1]
    lines = [f"replay of {os.path.basename(source)}: Darshan {log['version']}, {log['nprocs']} ranks, "
             f"jobid {log['jobid']}, run time {log['run_time_s']:g} s" + (f", {os.path.basename(exe[0])}" if exe else ""),
             f"  modules: {', '.join(log['modules'])}",
             f"  replayed as {replay['ranks']} ranks ("
             + ("one worker each, in one process, not under MPI" if replay.get("in_process", True)
                else "one MPI rank each, under mpiexec") + "); "
             f"{replay['files']} files under {replay['target']}; {replay['workers']} file x rank sequences "
             f"({replay['from_dxt']} from DXT traces, {replay['from_counters']} from counters); "
             + (f"{replay['phases']} steps (each rank's files one after another)" if not replay["timed"]
                else "one phase, recorded start times kept")
             + (f"; scale {replay['scale']:g}" if replay["scale"] != 1 else "")]
    return lines


def render_fidelity(fid: dict[str, Any]) -> list[str]:
    rows = fid["rows"]
    w = max(len(r["counter"]) for r in rows) if rows else 10
    out = [f"fidelity: the log against the replay (ok: within {fid['tolerance'] * 100:g} %; "
           f"{fid['records_within_tolerance']} of {fid['records']} file records agree in every counter)",
           f"{'counter':<{w}}  {'log':>16}  {'replay':>16}  status"]
    for r in rows:
        status = r["status"] + (f": {r['reason']}" if r.get("reason") else "")
        out.append(f"{r['counter']:<{w}}  {_num(r['log']):>16}  {_num(r['replay']):>16}  {status}")
    if fid.get("classes"):
        out.append("by file class (log / replay):")
        for name, c in sorted(fid["classes"].items()):
            lg, rp = c["log"], c["replay"]
            out.append(f"  {name}: {c['records']} records; reads {lg['POSIX_READS']:,} / {rp['POSIX_READS']:,}, "
                       f"writes {lg['POSIX_WRITES']:,} / {rp['POSIX_WRITES']:,}; "
                       f"MiB read {lg['POSIX_BYTES_READ'] / 2**20:,.1f} / {rp['POSIX_BYTES_READ'] / 2**20:,.1f}, "
                       f"written {lg['POSIX_BYTES_WRITTEN'] / 2**20:,.1f} / {rp['POSIX_BYTES_WRITTEN'] / 2**20:,.1f}")
    if fid.get("not_reproduced"):
        out.append("not reproduced:")
        out += [f"  {n['what']}: {n['reason']}" for n in fid["not_reproduced"]]
    return out


def rank_lines(mpi: dict[str, Any] | None) -> list[str]:
    """Under MPI: each node's ranks, bytes and busy time, and the busiest rank."""
    if not mpi or not mpi.get("ranks"):
        return []
    out = [f"  under MPI: {mpi['size']} ranks on {len(mpi['nodes'])} nodes"
           + (f"; ranks {mpi['missing_ranks']} sent no result" if mpi.get("missing_ranks") else "")]
    for n in mpi["nodes"]:
        out.append(f"    {n['node']}: ranks {', '.join(map(str, n['ranks']))}; {n['files']} files, "
                   f"{n['read_bytes'] / 2**20:,.1f} MiB read, {n['write_bytes'] / 2**20:,.1f} MiB written, "
                   f"busiest rank {n['busy_s']:.4g} s")
    busiest = max(mpi["ranks"], key=lambda x: x["busy_s"])
    out.append(f"    busiest rank: {busiest['rank']} on {busiest['node']}, {busiest['busy_s']:.4g} s")
    return out


def render_replay(doc: dict[str, Any]) -> str:
    rep = doc.get("replay")
    if not rep:
        return "no replay section in this document"
    lines = summary_lines(doc["translation"]["source"], rep["log"], rep)
    phases = [p for p in doc.get("phases", []) if isinstance(p, dict)]
    secs = sum(float(p.get("seconds") or 0) for p in phases)
    rd = sum((p.get("read") or {}).get("bytes", 0) or 0 for p in phases)
    wr = sum((p.get("write") or {}).get("bytes", 0) or 0 for p in phases)
    lines.append(f"  ran {len(phases)} phases in {secs:.3f} s: {rd / 2**20:,.1f} MiB read, {wr / 2**20:,.1f} MiB written"
                 + ("" if doc.get("complete", True) else " (incomplete)"))
    if rep.get("laid_out_bytes"):
        lines.append(f"  laid out first: {rep['laid_out_bytes']:,} bytes in {rep['laid_out_files']} files "
                     "(the bytes the log reads before it writes them)")
    lines += rank_lines(doc.get("mpi"))
    lines.append("")
    lines += render_fidelity(rep["fidelity"])
    wi = rep["what_if"]
    lines.append("")
    if wi.get("ratio") is not None:
        lines.append(f"what-if: this job's I/O would take {wi['ratio']:.3g}x as long here: "
                     f"{wi['replay_io_s']:.4g} s against the log's {wi['log_io_s']:.4g} s")
    else:
        lines.append(f"what-if: the log records no I/O time; the replay took {wi['replay_io_s']:.4g} s")
    if wi.get("data_ratio") is not None:
        lines.append(f"  reads and writes alone (the replay issues no opens or stats): {wi['data_ratio']:.3g}x "
                     f"({wi['log_data_io_s']:.4g} s in the log)")
    lines.append(f"  log: {wi['log_basis']}")
    lines.append(f"  replay: {wi['replay_basis']}")
    notes = doc["translation"].get("notes") or []
    if notes:
        lines.append("notes:")
        lines += [f"  {n}" for n in notes]
    return "\n".join(lines)


def render_translation(tr) -> str:
    """A translation emitted without running: the summary and how each counter group was used."""
    lines = summary_lines(tr.source, tr.details["log"], tr.details["replay"])
    lines.append("mapping:")
    for m in tr.mapped:
        lines.append(f"  {m.key} -> {m.storlab} ({m.how})" + (f": {m.note}" if m.note else ""))
    if tr.notes:
        lines.append("notes:")
        lines += [f"  {n}" for n in tr.notes]
    return "\n".join(lines)
