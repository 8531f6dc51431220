"""The report's charts, drawn with matplotlib's object API (no pyplot, no display: Agg only).

Each `*_charts` function looks at the runs and returns the charts that make sense for them (often
none): throughput against a swept option, with ideal scaling for ranks; latency percentiles and CDF
from the histogram buckets; IOPS against latency; time series; per-rank or per-worker bars. Every
chart has a title, axis labels with units and a legend.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from .. import stats
from ..units import format_size
from .data import (SWEEP_AXES, Point, fmt_param, param, points, series_along, varying_options,
                   worker_rates)

__all__ = ["Chart", "all_charts"]

MiB = 1 << 20
MAX_SERIES = 8          # more lines than this make a chart unreadable; the rest are left out
MAX_BAR_CHARTS = 4

AXIS_LABELS = {"bs": "request size (bs)", "threads": "threads per target",
               "qd": "queue depth per thread", "ranks": "MPI ranks"}


@dataclass
class Chart:
    name: str           # file name stem, e.g. "bw-vs-bs"
    title: str
    figure: Figure
    note: str = ""      # shown under the chart in the report
    _png: bytes | None = field(default=None, repr=False)

    def png(self) -> bytes:
        """The chart as PNG bytes (rendered once, then reused for the HTML and --png files)."""
        if self._png is None:
            buf = io.BytesIO()
            self.figure.savefig(buf, format="png", dpi=100)
            self._png = buf.getvalue()
        return self._png


def _figure(ncols: int = 1) -> tuple[Figure, list]:
    fig = Figure(figsize=(6.4 * ncols if ncols > 1 else 7.5, 4.2), layout="constrained")
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    for ax in axes:
        ax.grid(True, which="major", alpha=0.3)
    return fig, axes


def run_label(run: dict[str, Any], varying: Sequence[str]) -> str:
    """How a run is named in legends: the options that differ, else its short id."""
    if varying:
        return ", ".join(f"{n}={fmt_param(n, param(run, n))}" for n in varying[:3])
    return str(run.get("run_id", "run"))[:8]


def _point_label(p: Point, varying: Sequence[str], many_phases: bool, multi_run: bool) -> str:
    parts = []
    if multi_run:
        parts.append(run_label(p.run, varying))
    if many_phases:
        parts.append(p.phase)
    parts.append(p.direction)
    return " ".join(parts)


_PLAIN = FuncFormatter(lambda v, _: f"{v:g}")


def _log_latency_axis(ax, which: str = "y") -> None:
    """Log scale with plain numbers (20, 50, 100 rather than 2x10^1)."""
    axis = ax.yaxis if which == "y" else ax.xaxis
    (ax.set_yscale if which == "y" else ax.set_xscale)("log")
    axis.set_major_formatter(_PLAIN)
    axis.set_minor_formatter(FuncFormatter(
        lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else ""))


def _size_axis(ax, values: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(set(values)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_size(v).replace(" ", "")))
    ax.minorticks_off()


def _count_axis(ax, values: Sequence[int]) -> None:
    if min(values) > 0 and max(values) / min(values) >= 8:
        ax.set_xscale("log", base=2)
        ax.minorticks_off()
    ax.set_xticks(sorted(set(values)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def throughput_charts(runs: Sequence[dict[str, Any]]) -> list[Chart]:
    """Bandwidth and IOPS against each swept option (bs, threads, qd, ranks)."""
    charts = []
    for axis in SWEEP_AXES:
        groups = series_along(runs, axis)
        if not groups:
            continue
        fig, (ax_bw, ax_iops) = _figure(2)
        xs_all = []
        nlines = 0
        for label, series in groups.items():
            directions = [d for d in ("read", "write")
                          if any(p.direction == d for r in series for p in points(r))]
            for d in directions:
                if nlines >= MAX_SERIES:
                    break
                xs, bw, iops = [], [], []
                for r in series:
                    ps = [p for p in points(r) if p.direction == d]
                    if not ps:
                        continue
                    # several phases of one direction: their summed bytes over summed time
                    secs = sum(p.data.get("seconds") or 0 for p in ps)
                    if secs <= 0:
                        continue
                    xs.append(param(r, axis))
                    bw.append(sum(p.data.get("bytes") or 0 for p in ps) / secs / MiB)
                    iops.append(sum(p.data.get("ops") or 0 for p in ps) / secs)
                if len(xs) < 2:
                    continue
                name = f"{label} {d}".strip()
                ax_bw.plot(xs, bw, marker="o", label=name)
                ax_iops.plot(xs, iops, marker="o", label=name)
                xs_all += xs
                nlines += 1
                if axis == "ranks":
                    # ideal scaling: the smallest run's rate per rank times the ranks
                    ideal = [bw[0] / xs[0] * x for x in xs]
                    ax_bw.plot(xs, ideal, linestyle="--", color="grey", label=f"{name} ideal")
                    ax_iops.plot(xs, [iops[0] / xs[0] * x for x in xs], linestyle="--",
                                 color="grey", label=f"{name} ideal")
        if not xs_all:
            continue
        for ax in (ax_bw, ax_iops):
            (_size_axis if axis == "bs" else _count_axis)(ax, xs_all)
            ax.set_xlabel(AXIS_LABELS[axis])
            ax.set_ylim(bottom=0)
            ax.legend(fontsize="small")
        ax_bw.set_ylabel("bandwidth (MiB/s)")
        ax_iops.set_ylabel("IOPS (operations/s)")
        title = f"Bandwidth and IOPS vs {AXIS_LABELS[axis]}"
        ax_bw.set_title("Bandwidth")
        ax_iops.set_title("IOPS")
        fig.suptitle(title)
        note = "dashed: ideal linear scaling from the smallest run" if axis == "ranks" else ""
        charts.append(Chart(f"throughput-vs-{axis}", title, fig, note))
    return charts


def _all_points(runs: Sequence[dict[str, Any]]) -> tuple[list[tuple[str, Point]], bool]:
    varying = varying_options(runs)
    many_phases = any(len(r.get("phases") or []) > 1 for r in runs)
    labelled = [(_point_label(p, varying, many_phases, len(runs) > 1), p)
                for r in runs for p in points(r)]
    return labelled[:MAX_SERIES], len(labelled) > MAX_SERIES


_PCTS = (("p50", 50), ("p90", 90), ("p99", 99), ("p999", 99.9))


def latency_charts(runs: Sequence[dict[str, Any]]) -> list[Chart]:
    """Latency percentiles (from the reported lat_ns, else the buckets) and the CDF of the buckets."""
    labelled, cut = _all_points(runs)
    charts = []
    usable = [(lab, p) for lab, p in labelled if p.lat_ns or p.buckets]
    if usable:
        fig, (ax,) = _figure()
        names = ["p50", "p90", "p99", "p99.9", "max"]
        for lab, p in usable:
            src = p.lat_ns if p.lat_ns.get("p50") is not None else stats.summary(p.buckets)
            ys = [src.get(k) for k in ("p50", "p90", "p99", "p999", "max")]
            xs = [i for i, y in enumerate(ys) if y is not None]
            ax.plot(xs, [ys[i] / 1e3 for i in xs], marker="o", label=lab)
        ax.set_xticks(range(len(names)), names)
        _log_latency_axis(ax, "y")
        ax.set_xlabel("percentile")
        ax.set_ylabel("completion latency (µs)")
        ax.set_title("Latency percentiles")
        ax.legend(fontsize="small")
        charts.append(Chart("latency-percentiles", "Latency percentiles", fig,
                            _cut_note(cut)))
    with_hist = [(lab, p) for lab, p in labelled if p.buckets]
    if with_hist:
        fig, (ax,) = _figure()
        for lab, p in with_hist:
            pts = stats.cdf(p.buckets)
            ax.step([v / 1e3 for v, _ in pts], [f for _, f in pts], where="post", label=lab)
        _log_latency_axis(ax, "x")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("completion latency (µs)")
        ax.set_ylabel("fraction of I/Os at or below (0-1)")
        ax.set_title("Latency CDF (from histogram buckets)")
        ax.legend(fontsize="small", loc="lower right")
        charts.append(Chart("latency-cdf", "Latency CDF", fig, _cut_note(cut)))
    return charts


def _cut_note(cut: bool) -> str:
    return f"only the first {MAX_SERIES} series are drawn" if cut else ""


def iops_latency_charts(runs: Sequence[dict[str, Any]]) -> list[Chart]:
    """IOPS against mean and p99 latency as the load (qd, threads, ranks) grows."""
    for axis in ("qd", "threads", "ranks"):
        groups = series_along(runs, axis)
        if not groups:
            continue
        fig, (ax,) = _figure()
        drawn = 0
        for label, series in groups.items():
            for d in ("read", "write"):
                # the first phase of each run that did this direction stands for the run
                firsts = [next((p for p in points(r) if p.direction == d), None) for r in series]
                rows = [(p.iops, p.lat_ns.get("mean"), p.lat_ns.get("p99"), param(p.run, axis))
                        for p in firsts if p is not None]
                rows = [row for row in rows if None not in row[:3]]
                if len(rows) < 2 or drawn >= MAX_SERIES:
                    continue
                name = f"{label} {d}".strip()
                line, = ax.plot([r[0] for r in rows], [r[1] / 1e3 for r in rows], marker="o",
                                label=f"{name} mean")
                ax.plot([r[0] for r in rows], [r[2] / 1e3 for r in rows], marker="^",
                        linestyle="--", color=line.get_color(), label=f"{name} p99")
                for x, y, _, load in rows:
                    ax.annotate(f"{axis}={load:g}", (x, y / 1e3), fontsize="x-small",
                                textcoords="offset points", xytext=(4, 4))
                drawn += 1
        if not drawn:
            continue
        ax.set_xlabel("IOPS (operations/s)")
        ax.set_ylabel("completion latency (µs)")
        _log_latency_axis(ax, "y")
        title = f"IOPS vs latency as {AXIS_LABELS[axis]} grows"
        ax.set_title(title)
        ax.legend(fontsize="small")
        return [Chart(f"iops-vs-latency-{axis}", title, fig)]
    return []


def timeseries_charts(runs: Sequence[dict[str, Any]]) -> list[Chart]:
    labelled, cut = _all_points(runs)
    usable = [(lab, p) for lab, p in labelled if len(p.timeseries.get("bw_bytes") or []) >= 2]
    if not usable:
        return []
    fig, (ax,) = _figure()
    for lab, p in usable:
        ts = p.timeseries
        step = float(ts.get("interval_s") or 1.0)
        bw = ts["bw_bytes"]
        # each value is drawn at the end of its interval, counted from the end of the ramp
        xs = [(k + 1) * step for k in range(len(bw))]
        ax.plot(xs, [b / MiB for b in bw], marker=".", label=lab)
    ax.set_xlabel("time since measurement start (s)")
    ax.set_ylabel("bandwidth (MiB/s)")
    ax.set_ylim(bottom=0)
    ax.set_title("Bandwidth over time")
    ax.legend(fontsize="small")
    return [Chart("timeseries", "Bandwidth over time", fig, _cut_note(cut))]


def worker_charts(runs: Sequence[dict[str, Any]]) -> list[Chart]:
    """Per-rank (MPI) or per-worker bandwidth bars, for phases with more than one of them."""
    charts = []
    varying = varying_options(runs)
    for run in runs:
        for pi, phase in enumerate(run.get("phases") or []):
            kind, rates = worker_rates(phase)
            if len(rates) < 2:
                continue
            if len(charts) >= MAX_BAR_CHARTS:
                return charts
            fig, (ax,) = _figure()
            names = [k for k, _ in rates]
            values = [v / MiB for _, v in rates]
            ax.bar(range(len(values)), values, label=f"{kind} bandwidth")
            mean = sum(values) / len(values)
            ax.axhline(mean, color="black", linestyle="--", label=f"mean {mean:.1f} MiB/s")
            step = max(1, len(names) // 16)
            ax.set_xticks(range(0, len(names), step), names[::step])
            ax.set_xlabel(kind)
            ax.set_ylabel("bandwidth (MiB/s)")
            who = run_label(run, varying) if len(runs) > 1 else str(run.get("run_id", ""))[:8]
            title = f"Bandwidth per {kind}: {who}, phase {phase.get('name', pi)}"
            ax.set_title(title)
            ax.legend(fontsize="small")
            lo, hi = min(values), max(values)
            note = f"slowest {kind} at {lo / hi:.0%} of the fastest" if hi > 0 else ""
            charts.append(Chart(f"per-{kind}-{str(run.get('run_id', ''))[:8]}-{pi}", title, fig, note))
    return charts


def all_charts(runs: Sequence[dict[str, Any]]) -> list[Chart]:
    """Every chart that fits these runs, in reading order."""
    return (throughput_charts(runs) + iops_latency_charts(runs) + latency_charts(runs)
            + timeseries_charts(runs) + worker_charts(runs))
