"""The human table of one run: one row per phase x direction, units in the column headers.
`storlab run` prints it after a run and `storlab results show` prints it for a stored one (each
other kind has its own table: the registry in output/views.py)."""
from __future__ import annotations

from typing import Any

from ..document import DIRECTIONS
from ..measure.passes import format_interval
from .base import RESULT_COLUMNS, align, human, result_rows

__all__ = ["render_table"]


MiB = 1 << 20


def _rate(bw_bytes: float | None) -> str:
    return "-" if bw_bytes is None else f"{bw_bytes / MiB:,.1f} MiB/s"


def _size(n: int) -> str:
    for shift, unit in ((20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def _phase_notes(phase: dict[str, Any]) -> list[str]:
    """The lines under the table for one phase: how workers added up, and what else was measured."""
    label = phase["name"] + (f" #{phase['pass']}" if "pass" in phase else "")
    out = []
    a = phase.get("aggregate") or {}
    if a.get("workers", 0) > 1:
        deskew = (f"de-skewed {_rate(a['deskew_bw_bytes'])} over {a['deskew_window_s'][0]:.3f}-"
                  f"{a['deskew_window_s'][1]:.3f} s" if a.get("deskew_window_s") else
                  "no de-skew window (workers never all ran at once)")
        out.append(f"{label}: {a['workers']} workers: plain {_rate(a['bw_bytes'])}, {deskew}; "
                   f"first done {a['first_done_s']:.3f} s, last done {a['last_done_s']:.3f} s; "
                   f"slowest worker {a['slowest_worker']} at {_rate(a['slowest_bw_bytes'])}")
    r = phase.get("rbw")
    if r:
        out.append(f"{label}: read-behind-write {r['mode']}: duplex {_rate(r['duplex_bw_bytes'])}, "
                   f"{r['records_written']} records written, {r['records_read']} read, "
                   f"{r['records_skipped']} skipped")
    v = phase.get("verify")
    if v:
        readback = (f" ({v['readback_blocks']} read back after writing, {v['readback_s']:.2f} s, "
                    f"outside the measured window)" if v.get("readback_blocks") else "")
        other_bs = (f", {v['bs_mismatches']} read with another block size than written"
                    if v.get("bs_mismatches") else "")
        out.append(f"{label}: verify {v['kind']}: {v['checked_blocks']} blocks checked{readback}, "
                   f"{v['mismatches']} mismatches{other_bs}")
    for d in DIRECTIONS:
        sizes = (phase.get(d) or {}).get("sizes")
        if sizes:
            top = sorted(sizes, key=lambda e: -e["ops"])
            shown = ", ".join(f"{_size(e['bs'])} {100 * e['share']:.1f} %" for e in top[:6])
            rest = f" and {len(top) - 6} other sizes" if len(top) > 6 else ""
            out.append(f"{label}: {d} request sizes: {shown}{rest}")
    ttfb = (phase.get("read") or {}).get("ttfb_ns")
    if ttfb:
        out.append(f"{label}: read time to first byte (issue to the first body byte): mean "
                   f"{ttfb['mean'] / 1e3:,.0f} us, p50 {ttfb['p50'] / 1e3:,.0f} us, p99 {ttfb['p99'] / 1e3:,.0f} us, "
                   f"max {ttfb['max'] / 1e3:,.0f} us")
    ss = phase.get("steadystate")
    if ss:
        state = (f"reached at {ss['attained_at_s']:.0f} s" if ss["attained"] else "not reached")
        crit = f", criterion {ss['criterion']:.3g}" if ss.get("criterion") is not None else ""
        every = f" sampled every {ss['interval_s']:g} s" if ss.get("interval_s", 1.0) != 1.0 else ""
        out.append(f"{label}: steady state {ss['ss']} over {ss['duration_s']:g} s{every}: {state}{crit}")
    lt = phase.get("latency_target")
    if lt:
        found = (f"qd {lt['qd']} holds p{lt['percentile']:g} <= {lt['target_s'] * 1e6:,.0f} us at "
                 f"{lt['iops']:,.0f} IOPS" if lt["found"] else
                 f"no depth holds p{lt['percentile']:g} <= {lt['target_s'] * 1e6:,.0f} us")
        tried = ", ".join(f"{s['qd']}{'' if s['held'] else ' (no)'}" for s in lt["steps"])
        out.append(f"{label}: latency target: {found}; depths tried {tried}")
    c = phase.get("cache")
    if c:
        before, after = c.get("resident_before_bytes"), c.get("resident_after_bytes")
        resident = (f"; resident {before / MiB:,.1f} -> {after / MiB:,.1f} MiB"
                    if before is not None and after is not None else "")
        out.append(f"{label}: page cache dropped before the phase ({c['method']}){resident}")
    cpu = phase.get("cpu")
    if cpu and "host_busy_pct" in cpu:
        cost = (f"; {cpu['host_pct_per_100MBps']:.2f} % host CPU per 100 MB/s"
                if "host_pct_per_100MBps" in cpu else "")
        out.append(f"{label}: cpu: host {cpu['host_busy_pct']:.0f} % busy ({cpu['host_user_pct']:.0f} user, "
                   f"{cpu['host_system_pct']:.0f} system, {cpu['host_iowait_pct']:.0f} iowait), "
                   f"storlab {cpu['self_pct']:.0f} %{cost}")
    if phase.get("stalls"):
        out.append(f"{label}: {len(phase['stalls'])} stalled requests (see the JSON result)")
    return out


def _pass_notes(doc: dict[str, Any]) -> list[str]:
    p = doc.get("passes")
    if not p:
        return []
    out = []
    for entry in p["phases"]:
        for d in DIRECTIONS:
            s = entry.get(d)
            if not s:
                continue
            bw = s["bw_bytes"]
            out.append(f"{entry['name']} {d} over {bw['n']} passes: mean {_rate(bw['mean'])}, "
                       f"sd {bw['stddev'] / MiB:,.1f}, min {bw['min'] / MiB:,.1f}, max {bw['max'] / MiB:,.1f} MiB/s; "
                       f"{format_interval(bw, MiB, 'MiB/s', 'bandwidth')}; "
                       f"p99 latency of all passes {s['lat_ns']['p99'] / 1e3:,.1f} us")
    return out


def translation_line(tr: dict[str, Any]) -> str:
    """Where a translated job came from, in one line: format, file, hash, keys by how."""
    import os
    from collections import Counter

    hows = Counter(m.get("how") for m in tr.get("mapped") or ())
    counted = ", ".join(f"{n} {how}" for how, n in hows.items())
    return (f"translated from {tr.get('format')} {os.path.basename(str(tr.get('source')))} "
            f"(sha256 {str(tr.get('sha256'))[:12]}; {sum(hows.values())} keys"
            + (f": {counted})" if counted else ")"))


def render_table(doc: dict[str, Any]) -> str:
    """Compact plain-text table of a run document (no colour, no trailing newline); the table of
    any kind of document is output/views.py's `render`."""
    rows = result_rows([doc], with_run=False)
    phases = doc.get("phases") or []
    if any("pass" in p for p in phases):
        # label rows with their pass: result_rows keeps phase order, one or two rows per phase
        labels = [p["name"] + f" #{p['pass']}" for p in phases for d in DIRECTIONS if d in p]
        for row, label in zip(rows, labels):
            row["phase"] = label
    if not rows:
        lines = ["(no I/O was measured)"]
    else:
        cols = RESULT_COLUMNS
        cells = [[human(c, r.get(c.key)) for c in cols] for r in rows]
        lines = align([c.header for c in cols], cells, [c.kind == "num" for c in cols])
    meta = [p for p in phases if p.get("kind") == "meta"]
    if meta:  # metadata phases of a job file: operations per second, their own columns
        from .meta_table import phase_table

        lines += [""] + phase_table(meta)
    if doc.get("main_job"):   # how the default main job measured, in one line
        lines.append(doc["main_job"]["line"])
    if doc.get("precondition"):   # written before the job, apart from its phases: the verdict
        from ..jobs.precondition import verdict_line

        lines.append(verdict_line(doc["precondition"]))
    if doc.get("translation"):
        lines.append(translation_line(doc["translation"]))
    for phase in phases:
        lines += _phase_notes(phase)
    lines += _pass_notes(doc)
    if doc.get("complete") is False:
        reason = doc.get("stop_reason") or "interrupted"
        detail = f": {doc['error']}" if doc.get("error") else ""
        lines.append(f"incomplete ({reason}{detail}): figures cover the time until the stop")
    return "\n".join(lines)
