"""The text and CSV of a sweep document: one row per point that ran (swept options as columns,
the figures, the knee / best / latency-climb marks), then the findings of every series in words.
Reads only the `storlab.sweep/1` document (measure/sweep.py makes it)."""
from __future__ import annotations

import csv
import io
from typing import Any

from ..measure.sweep import climb_basis, fmt_value, point_label
from .base import align, fmt_number

__all__ = ["table_rows", "render_table", "findings_text", "to_csv", "CSV_RESULT_COLUMNS"]

_MiB = float(1 << 20)
# (header, key, scale): canonical value / scale is shown
_RESULT_COLUMNS = (("bw MiB/s", "bw_bytes", _MiB), ("IOPS", "iops", 1.0),
                   ("mean us", "lat_mean_ns", 1e3), ("p50 us", "lat_p50_ns", 1e3),
                   ("p99 us", "lat_p99_ns", 1e3))


def _marks(doc: dict[str, Any]) -> dict[int, list[str]]:
    """Markers of each point from the series along the innermost axis (the table's series)."""
    marks: dict[int, list[str]] = {}
    for s in doc.get("series") or []:
        if not s.get("inner"):
            continue
        if s.get("knee"):
            marks.setdefault(s["knee"]["point"], []).append("knee")
        if s.get("best"):
            marks.setdefault(s["best"]["point"], []).append("best")
        if s.get("latency_climb"):
            marks.setdefault(s["latency_climb"]["point"], []).append("latency climbs")
    for p in doc.get("points") or []:
        if p.get("status") not in ("done", "skipped"):
            marks.setdefault(p["index"], []).append(str(p.get("status")))
    return marks


def table_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per point that ran, canonical units: the swept options, the figures, the marks."""
    axes = [a["name"] for a in doc.get("axes") or []]
    marks = _marks(doc)
    rows = []
    for p in doc.get("points") or []:
        if p.get("status") == "skipped" or p.get("run_id") is None:
            continue
        row = {name: p["params"].get(name) for name in axes}
        row.update({"run_id": p.get("run_id"), "status": p.get("status")})
        row.update({key: p.get(key) for _, key, _ in _RESULT_COLUMNS})
        row["lat_p999_ns"] = p.get("lat_p999_ns")
        row["marks"] = marks.get(p["index"], [])
        rows.append(row)
    return rows


def _num(v: float | None) -> str:
    return fmt_number(v)


def render_table(doc: dict[str, Any]) -> str:
    """The sweep as one plain-text table (swept options as columns) and its findings."""
    axes = [a["name"] for a in doc.get("axes") or []]
    rows = table_rows(doc)
    headers = axes + [h for h, _, _ in _RESULT_COLUMNS] + ["finding"]
    numeric = [True] * len(axes) + [True] * len(_RESULT_COLUMNS) + [False]
    cells = []
    for r in rows:
        cells.append([fmt_value(a, r[a]) for a in axes]
                     + [_num(None if r[k] is None else r[k] / scale) for _, k, scale in _RESULT_COLUMNS]
                     + [", ".join(r["marks"])])
    lines = align(headers, cells, numeric) if rows else ["(no point of the sweep was measured)"]
    lines += findings_text(doc)
    return "\n".join(lines)


def _rate(doc: dict[str, Any], value: float | None) -> str:
    if value is None:
        return "-"
    if doc.get("settings", {}).get("metric") == "iops":
        return f"{_num(value)} IOPS"
    return f"{_num(value / _MiB)} MiB/s"


def _basis_words(basis: str) -> str:
    return "latency per KiB of request" if basis == "per_kib" else "same request size"


def _compared(climb: dict[str, Any], value: float) -> str:
    if climb["unit"] == "ns_per_kib":
        return f"{_num(value)} ns/KiB"
    return f"{_num(value / 1e3)} us"


def findings_text(doc: dict[str, Any]) -> list[str]:
    """Knee, latency climb and early stop of every series, each block headed by its rule."""
    st = doc.get("settings") or {}
    metric = "IOPS" if st.get("metric") == "iops" else "bandwidth"
    series = doc.get("series") or []
    lines: list[str] = []

    def where(s: dict[str, Any]) -> str:
        return s["axis"] + (" at " + point_label(s["fixed"]) if s["fixed"] else "")

    knees = [s for s in series if s.get("knee")]
    if knees:
        lines += ["", f"knee (smallest setting reaching {st.get('knee_pct')}% of the series' best {metric}):"]
        for s in knees:
            axis, k, best = s["axis"], s["knee"], s["best"]
            text = (f"  along {where(s)}: {axis}={fmt_value(axis, k['value'])} "
                    f"({k['share_of_best_pct']:.0f}% of {_rate(doc, best['throughput'])} "
                    f"at {axis}={fmt_value(axis, best['value'])})")
            if not k["saturated"]:
                text += f"; still rising at the largest {axis}, the knee may lie beyond"
            lines.append(text)
    if series:
        lat = st.get("climb_latency", "mean")
        lines += ["", f"latency climb (first setting whose {lat} latency is over "
                      f"{1 + st.get('climb_pct', 50) / 100:g}x the lowest at smaller settings while "
                      f"{metric} gains < {st.get('climb_gain_pct')}% over the previous setting; "
                      f"only latencies of one request size are compared: along bs, latency per KiB):"]
        climbs = [s for s in series if s.get("latency_climb")]
        for s in climbs:
            axis, c = s["axis"], s["latency_climb"]
            lines.append(f"  along {where(s)} ({_basis_words(c['basis'])}): from {axis}="
                         f"{fmt_value(axis, c['value'])}: {_compared(c, c['compared'])} is {c['ratio']:.2f}x "
                         f"the lowest {_compared(c, c['lowest'])} (at {axis}={fmt_value(axis, c['lowest_value'])}); "
                         f"{metric} {c['throughput_gain_pct']:+.1f}% over {axis}={fmt_value(axis, c['previous_value'])}")
        quiet_axes = sorted({s["axis"] for s in series} - {s["axis"] for s in climbs})
        for axis in quiet_axes:
            lines.append(f"  along {axis} ({_basis_words(climb_basis(axis))}): none")
    stops = doc.get("early_stops") or []
    if stops:
        lines += ["", f"early stop ({metric} less than {st.get('stop_flat_pct')}% above the series' "
                      f"best so far for {st.get('stop_count')} points in a row):"]
        for e in stops:
            axis = e["axis"]
            at = point_label(e["fixed"]) + ": " if e["fixed"] else ""
            skipped = ", ".join(fmt_value(axis, v) for v in e["skipped"]) or "none"
            lines.append(f"  {at}stopped after {axis}={fmt_value(axis, e['last_run'])}; "
                         f"skipped {axis} {skipped}")
    if doc.get("complete") is False:
        done = sum(1 for p in doc.get("points") or [] if p.get("status") == "done")
        total = 1
        for a in doc.get("axes") or []:
            total *= len(a["values"])
        detail = f": {doc['error']}" if doc.get("error") else ""
        lines += ["", f"incomplete sweep ({doc.get('stop_reason')}{detail}): "
                      f"{done} of {total} points measured"]
    return lines


CSV_RESULT_COLUMNS = ("run_id", "status", "bw_bytes", "iops", "lat_mean_ns", "lat_p50_ns",
                      "lat_p99_ns", "lat_p999_ns", "marks")


def to_csv(doc: dict[str, Any]) -> str:
    """The sweep table as CSV: swept options in canonical units (bytes, seconds), then the
    figures in canonical units (bw_bytes = bytes/s, *_ns), full precision; marks separated by ';'."""
    axes = [a["name"] for a in doc.get("axes") or []]
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(axes + list(CSV_RESULT_COLUMNS))
    for r in table_rows(doc):
        cells = [",".join(map(str, r[a])) if isinstance(r[a], (list, tuple)) else r[a] for a in axes]
        cells += [";".join(r["marks"]) if c == "marks" else r.get(c) for c in CSV_RESULT_COLUMNS]
        w.writerow(["" if c is None else c for c in cells])
    return out.getvalue()
