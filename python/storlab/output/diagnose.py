"""The outputs of `storlab diagnose`: the terminal table (one row per layer and workload, the
findings below it) and the self-contained HTML report with the waterfall chart (measured against
predicted, layer by layer, bottom-up) built from a `storlab.diagnose/1` document.
"""
from __future__ import annotations

import base64
import html
from typing import TYPE_CHECKING, Any

from .base import align

if TYPE_CHECKING:
    from .report.charts import Chart

__all__ = ["render_table", "waterfall_chart", "build_html"]

_LAYER_NAMES = {"member": "member", "members": "members at once", "volume": "volume", "fs": "file system", "fs-ranks": "fs, MPI ranks",
                "fs-buffered": "fs buffered", "fs-cached": "fs in cache", "server-storage": "server storage",
                "client-link": "client link", "fabric": "fabric", "protocol": "protocol", "clients": "clients",
                "client": "client"}


def _value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if unit == "IOPS" else f"{v / 1e6:,.1f}"


def _eff(e: float | None) -> str:
    return "-" if e is None else f"{e:.0%}"


def render_table(doc: dict[str, Any]) -> str:
    """Plain-text table and findings."""
    st = doc["stack"]
    fabric = doc.get("fabric")
    if fabric is not None:
        lines = [f"storlab diagnose {doc['target']}: {fabric['protocol']} across the fabric, client node(s) "
                 f"{', '.join(fabric['clients'])}, server node(s) {', '.join(fabric['servers'])}"]
    else:
        lines = [f"storlab diagnose {doc['target']}: {st.get('fs_type') or 'block device'}"
                 + (f" on {st['level']} over {len(st['members'])} member(s) ({', '.join(st['members'])})"
                    if st["members"] else "")]
    check = doc.get("stack_check")
    if check is not None:
        diffs = check["differences"]
        lines.append(f"planned stack {check['stack_file']}: " + ("matches the live stack" if not diffs else
                     f"{len(diffs)} difference(s) from the live stack"))
        lines += [f"  - {d['item']} ({d['device']}): planned {d['planned']}, found {d['found']}" for d in diffs]
    labels = {w["name"]: w["label"] for w in doc.get("workloads") or []}
    for wname, label in labels.items():
        rows = [r for r in doc["layers"] if r["workload"] == wname]
        if not rows:
            continue
        unit = rows[0]["unit"]
        head = ["layer", "subject", f"measured {'IOPS' if unit == 'IOPS' else 'MB/s'}",
                f"predicted {'IOPS' if unit == 'IOPS' else 'MB/s'}", "efficiency", "limited by"]
        body = [[_LAYER_NAMES.get(r["layer"], r["layer"]), r["subject"], _value(r["measured"], unit),
                 _value(r["predicted"], unit), _eff(r["efficiency"]), r["limited_by"] or "-"] for r in rows]
        lines += ["", f"{label}:", *align(head, body, [False, False, True, True, True, False])]
    warnings = [f for f in doc["findings"] if f["severity"] == "warning"]
    infos = [f for f in doc["findings"] if f["severity"] != "warning"]
    lines.append("")
    if warnings:
        lines.append("findings:")
        for f in warnings:
            lines.append(f"  - {f['message']}")
            lines.append(f"    evidence: {f['evidence']}")
            if f.get("fix"):
                lines.append(f"    fix: {f['fix']}")
    else:
        lines.append("findings: none above the noise (every layer within 15 % of what the layer below predicts)")
    for f in infos:
        lines.append(f"  note: {f['message']}")
    if not doc.get("complete", True):
        lines.append(f"incomplete: {doc.get('stop_reason')}" + (f" ({doc['error']})" if doc.get("error") else ""))
    return "\n".join(lines)


LOG_SCALE_SPAN = 10.0   # bars spanning more than this factor are drawn on a log axis


def waterfall_chart(doc: dict[str, Any]) -> Chart | None:
    """Measured (bars) against predicted (outlined) for each layer above the members, per workload."""
    works = [w for w in doc.get("workloads") or [] if any(r["workload"] == w["name"] for r in doc["layers"])]
    if not works:
        return None
    from matplotlib.figure import Figure  # charts only: the text table needs no matplotlib

    from .report.charts import Chart

    fig = Figure(figsize=(6 * len(works), 4.2), layout="constrained")
    axes = fig.subplots(1, len(works), squeeze=False)[0]
    for ax, w in zip(axes, works):
        rows = [r for r in doc["layers"] if r["workload"] == w["name"] and r["layer"] != "member"]
        if not rows:
            rows = [r for r in doc["layers"] if r["workload"] == w["name"]]
        iops = rows[0]["unit"] == "IOPS"
        scale = 1.0 if iops else 1e6
        xs = list(range(len(rows)))
        measured = [(r["measured"] or 0) / scale for r in rows]
        predicted = [(r["predicted"] or 0) / scale for r in rows]
        ax.bar(xs, measured, width=0.6, color="#4878a8", label="measured")
        ax.bar(xs, predicted, width=0.6, fill=False, edgecolor="#d1495b", linewidth=2, linestyle="--",
               label="predicted from the layer below")
        ax.set_xticks(xs, [_LAYER_NAMES.get(r["layer"], r["layer"]) for r in rows], rotation=20, ha="right")
        positive = [v for v in measured + predicted if v > 0]
        log = bool(positive) and max(positive) > LOG_SCALE_SPAN * min(positive)
        if log:     # an in-cache bar (memory speed) would flatten every device bar on a linear axis
            ax.set_yscale("log")
        ax.set_ylabel(("IOPS" if iops else "throughput (MB/s)") + (", log scale" if log else ""))
        ax.set_xlabel("layer, bottom-up")
        ax.set_title(w["label"])
        ax.legend(loc="best", fontsize="small")
    return Chart("diagnose-waterfall", "Measured vs predicted per layer", fig,
                 "Bars: measured. Dashed outline: what the layer below predicts (docs/diagnose.md). A panel whose "
                 f"bars span more than {LOG_SCALE_SPAN:g}x (an in-cache read at memory speed) has a log axis.")


def build_html(doc: dict[str, Any]) -> str:
    """The HTML report: stack, waterfall chart, table per workload, findings."""
    from .report import CSS

    e = html.escape
    body = [f"<h1>storlab diagnose {e(doc['target'])}</h1>",
            f'<p class="meta">{e(doc.get("started_at") or "")} · storlab {e(doc.get("storlab_version", ""))}'
            f" · run {e(doc.get('run_id', '')[:8])}</p>"]
    chart = waterfall_chart(doc)
    warnings = [f for f in doc["findings"] if f["severity"] == "warning"]
    body.append("<h2>Findings</h2>")
    if warnings:
        for f in warnings:
            body.append(f'<div class="warn"><b>{e(f["message"])}</b><br>evidence: {e(f["evidence"])}'
                        + (f"<br>fix: <code>{e(f['fix'])}</code>" if f.get("fix") else "") + "</div>")
    else:
        body.append("<p>None above the noise: every layer is within 15 % of what the layer below predicts.</p>")
    for f in doc["findings"]:
        if f["severity"] != "warning":
            body.append(f"<p>Note: {e(f['message'])}</p>")
    if chart is not None:
        data = base64.b64encode(chart.png()).decode("ascii")
        body.append(f'<h2>Layers</h2><figure><img src="data:image/png;base64,{data}" alt="{e(chart.title)}">'
                    f"<figcaption>{e(chart.title)} — {e(chart.note)}</figcaption></figure>")
    body.append("<h2>Table</h2><pre>" + e(render_table(doc)) + "</pre>")
    body.append("<h2>Stack</h2><pre>" + e(str(doc["stack"])) + "</pre>")
    title = f"storlab diagnose {doc['target']}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{e(title)}</title><style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
