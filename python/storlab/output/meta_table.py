"""The human table of a metadata result (`storlab meta`, and `meta` phases of a `storlab run` job
file): one row per phase with operations, time, ops/s and latency percentiles, units in the
headers. Reads only the result document (measure/meta.py makes it)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .base import align, fmt_number

__all__ = ["MetaColumn", "META_COLUMNS", "phase_table", "render_table"]


@dataclass(frozen=True)
class MetaColumn:
    """One column: its header (unit included), the value of a phase, the divisor that turns the
    canonical value (seconds, ns) into the header's unit, and whether it is a number."""
    header: str
    get: Callable[[dict], Any]
    scale: float = 1.0
    numeric: bool = True


META_COLUMNS = (
    MetaColumn("phase", lambda p: p["name"], numeric=False),
    MetaColumn("ops", lambda p: p["ops"]),
    MetaColumn("time ms", lambda p: p["seconds"], 1e-3),
    MetaColumn("ops/s", lambda p: p["ops_per_s"]),
    MetaColumn("mean us", lambda p: latency(p, "mean"), 1e3),
    MetaColumn("p50 us", lambda p: latency(p, "p50"), 1e3),
    MetaColumn("p99 us", lambda p: latency(p, "p99"), 1e3),
    MetaColumn("p99.9 us", lambda p: latency(p, "p999"), 1e3),
    MetaColumn("max us", lambda p: latency(p, "max"), 1e3),
    MetaColumn("stonewalled", lambda p: "yes" if p.get("stonewalled") else "no", numeric=False),
)


def latency(phase: dict[str, Any], key: str) -> Any:
    """A latency figure of a phase; none when it did no operation or (an imported mdtest run) has
    no latency."""
    return (phase.get("lat_ns") or {}).get(key) if phase.get("ops") else None


def mix_rows(phase: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows under a mix phase: each operation with the share of the drawn operations it got (and
    the one asked for), its rate over the phase's time and its latency; then the re-creates (when
    deletes were asked)."""
    rows = []
    asked = phase["mix"]["asked"]
    for op, o in phase["mix"]["operations"].items():
        if not asked.get(op, asked["delete"]):     # not asked; recreate follows delete
            continue
        label = (f"  {op} {o['share'] * 100:.1f}% ({asked[op]:g}%)" if o["share"] is not None
                 else f"  {op} (after delete)")
        rows.append({**o, "name": label, "seconds": phase["seconds"], "stonewalled": False})
    return rows


def phase_table(phases: list[dict[str, Any]]) -> list[str]:
    """Lines of the table of metadata phases: one row per phase (a mix phase: and one per
    operation below it), units in the headers."""
    cells = []
    for p in phases:
        for shown in (p, *(mix_rows(p) if p.get("mix") else ())):
            row = []
            for c in META_COLUMNS:
                v = c.get(shown)
                row.append(str(v) if not c.numeric else fmt_number(None if v is None else v / c.scale))
            cells.append(row)
    return align([c.header for c in META_COLUMNS], cells, [c.numeric for c in META_COLUMNS]) if cells else [
        "(no phase ran)"]


def render_table(doc: dict[str, Any]) -> str:
    """Plain-text table of a meta result: the settings line, then one row per phase."""
    lines = phase_table(doc.get("phases") or [])
    job = doc.get("job") or {}
    lines.insert(0, f"{doc.get('workers')} thread(s) x {job.get('files')} files, dir {job.get('dir')}, "
                    f"depth {job.get('depth')}, fanout {job.get('fanout')}, "
                    f"file size {job.get('file_size')} bytes, in {job.get('workdir')}")
    if job.get("mix"):
        limits = [f"{n} ops" for n in [job.get("mix_ops")] if n] + [f"{t:g} s" for t in [job.get("mix_time")] if t]
        lines.insert(1, "mix: " + ",".join(f"{op}={pct:g}" for op, pct in job["mix"].items() if pct)
                     + " per thread, each " + (" or ".join(limits) or "10000 ops")
                     + " (shares: of the drawn operations; rates: over the mix phase's time)")
    skipped = [p for p in doc.get("phases") or [] if p.get("skipped")]
    if skipped:
        lines.append(f"{', '.join(p['name'] for p in skipped)}: skipped: {skipped[0]['skipped']}")
    for p in doc.get("phases") or []:
        if p.get("requests") is not None:
            lines.append(f"{p['name']}: {p['ops']} names in {p['requests']} LIST requests of up to "
                         f"{job.get('list_page')} keys; its latencies are per request")
    if doc.get("complete") is False:
        detail = f": {doc['error']}" if doc.get("error") else ""
        lines.append(f"incomplete ({doc.get('stop_reason')}{detail}): figures cover the time until the stop")
    cleanup = doc.get("cleanup") or {}
    if cleanup.get("kept"):
        lines.append(f"kept: the files are in {job.get('workdir')}")
    return "\n".join(lines)
