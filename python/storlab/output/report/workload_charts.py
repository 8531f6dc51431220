"""Report charts of `storlab workload` results: accelerator utilization over time against the
threshold (training's, and evaluation's apart when the run evaluated), and AU against the number
of accelerators (a search's trials, or several runs)."""
from __future__ import annotations

from typing import Any, Sequence

from matplotlib.figure import Figure

from .charts import MAX_SERIES, Chart

__all__ = ["workload_charts"]


def _axes() -> tuple[Figure, Any]:
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    ax.grid(True, which="major", alpha=0.3)
    return fig, ax


def _label(doc: dict[str, Any]) -> str:
    return f"{doc.get('workload', {}).get('name', '?')} x{doc.get('accelerators')} ({str(doc.get('run_id', ''))[:8]})"


def workload_charts(docs: Sequence[dict[str, Any]]) -> list[Chart]:
    docs = [d for d in docs if d.get("timeseries") and d.get("au") is not None][:MAX_SERIES]
    if not docs:
        return []
    fig, ax = _axes()
    evaluated = False
    for d in docs:
        ts = d["timeseries"]
        line, = ax.plot(ts["t_s"], [100 * x for x in ts["au"]], label=_label(d) + " training")
        if ts.get("eval_au") and any(ts["eval_au"]):
            evaluated = True
            ax.plot(ts["t_s"], [100 * x for x in ts["eval_au"]], color=line.get_color(), linestyle=":",
                    marker=".", label=_label(d) + " evaluation")
            for ev in (d.get("evaluation") or {}).get("evaluations") or []:
                if "start_s" in ev:
                    ax.axvspan(ev["start_s"], ev["start_s"] + ev["seconds"], color=line.get_color(), alpha=0.08)
    threshold = docs[0].get("au_threshold")
    if threshold:
        ax.axhline(100 * threshold, color="k", linestyle="--", linewidth=1, label=f"threshold {100 * threshold:.0f} %")
    ax.set_xlabel("time since training started (s)")
    ax.set_ylabel("accelerator utilization (%)")
    ax.set_title("AU over time")
    ax.legend(fontsize="small")
    note = "compute time of the steps ending in each interval over interval x accelerators"
    if evaluated:
        note += ("; evaluation steps (dotted, shaded spans) apart from training's: training AU leaves them out, "
                 "as DLIO's does")
    charts = [Chart("workload-au-time", "AU over time", fig, note)]
    points: list[tuple[int, float]] = []
    for d in docs:
        trials = (d.get("search") or {}).get("trials")
        if trials:
            points += [(t["accelerators"], t["au"]) for t in trials if t.get("au") is not None]
        else:
            points.append((d["accelerators"], d["au"]))
    if len({n for n, _ in points}) >= 2:
        points.sort()
        fig, ax = _axes()
        ax.plot([n for n, _ in points], [100 * a for _, a in points], marker="o")
        if threshold:
            ax.axhline(100 * threshold, color="k", linestyle="--", linewidth=1)
        ax.set_xlabel("emulated accelerators")
        ax.set_ylabel("accelerator utilization (%)")
        ax.set_title("AU against accelerators")
        charts.append(Chart("workload-au-accelerators", "AU against accelerators", fig,
                            "the most accelerators above the threshold is MLPerf Storage's figure"))
    return charts
