"""The report's charts, drawn with matplotlib's object API (no pyplot, no display: Agg only).

Each `*_charts` function looks at the runs and returns the charts that make sense for them (often
none): throughput against a swept option, with ideal scaling for ranks; latency percentiles and CDF
from the histogram buckets; IOPS against latency; time series; per-rank or per-worker bars. Every
chart has a title, axis labels with units and a legend. Runs with a stack model get predicted vs
measured; sweep, scale and meta documents get their knee/climb, parallel-efficiency and per-operation
charts.
"""
from __future__ import annotations

import io
import textwrap
from dataclasses import dataclass, field
from typing import Any, Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from ...jobs.options import BY_NAME
from ...measure import stats
from ...units import format_size
from .data import (
    SWEEP_AXES,
    ModelRow,
    Point,
    fmt_param,
    model_rows,
    param,
    points,
    series_along,
    varying_options,
    worker_rates,
)

__all__ = ["Chart", "all_charts", "MODEL_TITLE"]

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


# -- predicted (stack model) vs measured -----------------------------------------------------------
MODEL_TITLE = "Predicted (stack model) vs measured"
MAX_MODEL_BARS = 16
_UNIT_AXIS = {"bytes/s": ("bandwidth (MiB/s)", 1.0 / MiB), "IOPS": ("IOPS (operations/s)", 1.0)}


def _model_row_label(row: ModelRow, varying: Sequence[str], multi_run: bool, many_phases: bool) -> str:
    parts = [run_label(row.run, varying)] if multi_run else []
    if many_phases or not parts:
        parts.append(row.phase)
    return "\n".join(parts)


def _model_lines(ax, rows: Sequence[ModelRow], axis: str, scale: float) -> bool:
    """Predicted (dashed) and measured (solid) along a swept option; True if anything was drawn."""
    by_phase: dict[str, list[ModelRow]] = {}
    for r in rows:
        if isinstance(param(r.run, axis), (int, float)):
            by_phase.setdefault(r.phase, []).append(r)
    drawn = False
    for phase, rs in list(by_phase.items())[:MAX_SERIES // 2]:
        rs.sort(key=lambda r: param(r.run, axis))
        xs = [param(r.run, axis) for r in rs]
        if len(set(xs)) < 2:
            continue
        line, = ax.plot(xs, [r.predicted * scale for r in rs], linestyle="--", marker="s",
                        label=f"{phase} predicted")
        ax.plot([x for x, r in zip(xs, rs) if r.measured is not None],
                [r.measured * scale for r in rs if r.measured is not None], marker="o",
                color=line.get_color(), label=f"{phase} measured")
        # the limiting component, where it changes along the sweep
        last = None
        for x, r in zip(xs, rs):
            if r.limiting != last:
                ax.annotate(f"limit: {r.limiting}", (x, r.predicted * scale), fontsize="x-small",
                            textcoords="offset points", xytext=(3, 5))
                last = r.limiting
        drawn = True
    return drawn


def model_charts(runs: Sequence[dict[str, Any]]) -> list[Chart]:
    """Predicted against measured for runs with a stack model: one panel per unit (bandwidth for
    sequential metrics, IOPS for random ones); lines along a swept option, bars otherwise, each
    predicted figure labelled with its limiting component."""
    rows = model_rows(runs)
    if not rows:
        return []
    units = [u for u in _UNIT_AXIS if any(r.unit == u for r in rows)]
    fig, axes = _figure(len(units))
    model_runs = [r for r in runs if isinstance(r.get("model"), dict)]
    varying = varying_options(model_runs)
    axis = next((a for a in SWEEP_AXES if series_along(model_runs, a)), None)
    cut = False
    for ax, unit in zip(axes, units):
        ylabel, scale = _UNIT_AXIS[unit]
        mine = [r for r in rows if r.unit == unit]
        if axis is not None and _model_lines(ax, mine, axis, scale):
            (_size_axis if axis == "bs" else _count_axis)(ax, [param(r.run, axis) for r in mine])
            ax.set_xlabel(AXIS_LABELS[axis])
        else:
            cut = cut or len(mine) > MAX_MODEL_BARS
            mine = mine[:MAX_MODEL_BARS]
            many_phases = len({r.phase for r in mine}) > 1
            labels = [_model_row_label(r, varying, len(model_runs) > 1, many_phases) for r in mine]
            xs = list(range(len(mine)))
            w = 0.38
            ax.bar([x - w / 2 for x in xs], [r.predicted * scale for r in mine], w,
                   label="predicted (stack model)", color="#9bb7d4", edgecolor="#4a6f96", hatch="//")
            ax.bar([x + w / 2 for x in xs], [(r.measured or 0.0) * scale for r in mine], w,
                   label="measured", color="#d98c3f")
            for x, r in zip(xs, mine):
                if r.ratio is not None:
                    ax.annotate(f"{r.ratio:.0%}", (x + w / 2, r.measured * scale), fontsize="x-small",
                                ha="center", va="bottom", textcoords="offset points", xytext=(0, 2))
            # the limiting component of each prediction goes under its bars
            ax.set_xticks(xs, [f"{lab}\nlimit: {textwrap.fill(r.limiting, 24)}" for lab, r in zip(labels, mine)],
                          fontsize="x-small" if len(xs) > 4 else "small")
            ax.set_xlim(-0.5 - max(0, 2 - len(xs)) * 0.5, len(xs) - 0.5 + max(0, 2 - len(xs)) * 0.5)
            ax.set_xlabel("run / phase (and the predicted rate's limiting component)" if len(model_runs) > 1
                          else "phase (and the predicted rate's limiting component)")
            ax.set_ylim(top=ax.get_ylim()[1] * 1.1)       # room for the ratio labels
        ax.set_ylim(bottom=0)
        ax.set_ylabel(ylabel)
        ax.set_title("Sequential bandwidth" if unit == "bytes/s" else "Random IOPS")
        ax.legend(fontsize="small")
    stacks = sorted({r.stack for r in rows})
    fig.suptitle(f"{MODEL_TITLE}: {', '.join(stacks)}")
    limits = sorted({r.limiting for r in rows})
    note = ("limiting component of the prediction: " + "; ".join(limits)
            + ". Measured as % of predicted above the measured bars or points.")
    if cut:
        note += f" Only the first {MAX_MODEL_BARS} phases are drawn."
    return [Chart("predicted-vs-measured", MODEL_TITLE, fig, note)]


# -- sweep, scale and meta documents ------------------------------------------------------------
def _short(doc: dict[str, Any]) -> str:
    return str(doc.get("run_id", ""))[:8]


def sweep_charts(sweeps: Sequence[dict[str, Any]]) -> list[Chart]:
    """Per sweep document and swept numeric axis: the throughput of every series with its knee
    and latency climb marked, and the climb latency beside it: along bs latency per KiB of
    request (what the climb compares there; latencies of different request sizes say nothing),
    along other axes plain latency."""
    from ...measure.sweep import climb_basis, compared_latency

    charts = []
    for doc in sweeps:
        settings = doc.get("settings") or {}
        metric = settings.get("metric", "bw")
        lat_key = settings.get("climb_latency", "mean")
        points_by_index = {p.get("index"): p for p in doc.get("points") or []}
        axes_by_name: dict[str, list[dict[str, Any]]] = {}
        for s in doc.get("series") or []:
            axes_by_name.setdefault(str(s.get("axis")), []).append(s)
        for axis, series in axes_by_name.items():
            fig, (ax_t, ax_l) = _figure(2)
            per_kib = climb_basis(axis) == "per_kib"
            xs_all: list[float] = []
            for s in series[:MAX_SERIES]:
                pts = [points_by_index.get(i) or {} for i in s.get("points") or []]
                xs = list(s.get("values") or [])
                tput = [p.get("bw_bytes" if metric == "bw" else "iops") for p in pts]
                lat = [p.get(f"lat_{lat_key}_ns") for p in pts]
                fixed = s.get("fixed") or {}
                label = ", ".join(f"{k}={fmt_param(k, v)}" for k, v in fixed.items()) or "measured"
                scale = 1 / MiB if metric == "bw" else 1.0
                good = [(x, t * scale) for x, t in zip(xs, tput) if t is not None]
                if len(good) < 2:
                    continue
                line, = ax_t.plot(*zip(*good), marker="o", label=label)
                xs_all += [x for x, _ in good]
                if per_kib:   # ns per KiB, plotted as is
                    lgood = [(x, v) for x, v in zip(xs, compared_latency(axis, xs, lat)) if v is not None]
                else:
                    lgood = [(x, v / 1e3) for x, v in zip(xs, lat) if v is not None]
                if lgood:
                    ax_l.plot(*zip(*lgood), marker="o", color=line.get_color(), label=label)
                knee = s.get("knee")
                if knee:
                    ax_t.plot([knee["value"]], [knee["throughput"] * scale], marker="*", markersize=14,
                              color=line.get_color(), linestyle="none",
                              label=f"knee at {axis}={fmt_param(axis, knee['value'])}")
                climb = s.get("latency_climb")
                if climb and climb.get("latency_ns") is not None:
                    y = climb.get("compared") if per_kib else climb["latency_ns"] / 1e3
                    ax_l.plot([climb["value"]], [y], marker="X", markersize=11,
                              color=line.get_color(), linestyle="none",
                              label=f"latency climbs at {axis}={fmt_param(axis, climb['value'])}")
            if len(xs_all) < 2 or not all(isinstance(x, (int, float)) for x in xs_all):
                continue
            for ax in (ax_t, ax_l):
                (_size_axis if BY_NAME.get(axis) is not None and BY_NAME[axis].kind == "size"
                 else _count_axis)(ax, xs_all)
                ax.set_xlabel(AXIS_LABELS.get(axis, axis))
                ax.legend(fontsize="x-small")
            ax_t.set_ylim(bottom=0)
            ax_t.set_ylabel("bandwidth (MiB/s)" if metric == "bw" else "IOPS (operations/s)")
            ax_t.set_title("Throughput, knee marked")
            ax_l.set_ylabel(f"{lat_key} latency per KiB of request (ns/KiB)" if per_kib
                            else f"{lat_key} completion latency (µs)")
            _log_latency_axis(ax_l, "y")
            ax_l.set_title("Latency, climb marked")
            title = f"Sweep {_short(doc)}: {'bandwidth' if metric == 'bw' else 'IOPS'} and latency vs {axis}"
            fig.suptitle(title)
            judged = (f"{lat_key} latency per KiB of request (request sizes differ along {axis})" if per_kib
                      else f"{lat_key} latency (one request size per series)")
            note = (f"knee: smallest setting reaching {settings.get('knee_pct', 95):g} % of the series' "
                    f"best; latency climb: {judged} over {1 + settings.get('climb_pct', 50) / 100:g}x "
                    f"the lowest so far while throughput gains < {settings.get('climb_gain_pct', 5):g} %")
            charts.append(Chart(f"sweep-{_short(doc)}-{axis}", title, fig, note))
    return charts


def scale_charts(scales: Sequence[dict[str, Any]]) -> list[Chart]:
    """Per scale document: aggregate bandwidth against ranks with ideal scaling, and the parallel
    efficiency (plain and de-skewed) against ranks."""
    charts = []
    for doc in scales:
        curve = (doc.get("scale") or {}).get("curve") or []
        usable = [c for c in curve if len([p for p in c.get("points") or [] if p.get("bw_bytes")]) >= 2]
        if not usable:
            continue
        fig, (ax_bw, ax_eff) = _figure(2)
        ranks_all: list[int] = []
        for c in usable[:MAX_SERIES]:
            pts = [p for p in c["points"] if p.get("bw_bytes")]
            xs = [p["ranks"] for p in pts]
            ranks_all += xs
            line, = ax_bw.plot(xs, [p["bw_bytes"] / MiB for p in pts], marker="o", label=f"{c['phase']}")
            base = pts[0]
            ax_bw.plot(xs, [base["bw_bytes"] / MiB * x / base["ranks"] for x in xs], linestyle="--",
                       color=line.get_color(), alpha=0.6, label=f"{c['phase']} ideal")
            eff = [(p["ranks"], 100 * p["efficiency"]) for p in pts if p.get("efficiency") is not None]
            if eff:
                ax_eff.plot(*zip(*eff), marker="o", color=line.get_color(), label=f"{c['phase']}")
            deskew = [(p["ranks"], 100 * p["deskew_efficiency"]) for p in pts
                      if p.get("deskew_efficiency") is not None]
            if deskew:
                ax_eff.plot(*zip(*deskew), marker="^", linestyle=":", color=line.get_color(),
                            label=f"{c['phase']} de-skewed")
        ax_eff.axhline(100, color="grey", linestyle="--", label="perfect scaling")
        for ax in (ax_bw, ax_eff):
            _count_axis(ax, ranks_all)
            ax.set_xlabel(AXIS_LABELS["ranks"])
            ax.set_ylim(bottom=0)
            ax.legend(fontsize="small")
        ax_bw.set_ylabel("aggregate bandwidth (MiB/s)")
        ax_bw.set_title("Bandwidth (dashed: ideal)")
        ax_eff.set_ylabel("parallel efficiency (%)")
        ax_eff.set_title("Parallel efficiency")
        title = f"Scaling {_short(doc)}: bandwidth and parallel efficiency vs MPI ranks"
        fig.suptitle(title)
        base_ranks = sorted({c.get("base_ranks") for c in usable if c.get("base_ranks") is not None})
        note = (f"efficiency = (rate / rate at {', '.join(map(str, base_ranks)) or 'the fewest'} rank(s)) "
                f"/ (ranks / base ranks); every rank runs the whole job (weak scaling)")
        charts.append(Chart(f"scale-{_short(doc)}", title, fig, note))
    return charts


_META_PCTS = (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"))


def meta_charts(metas: Sequence[dict[str, Any]]) -> list[Chart]:
    """Metadata runs: operations per second per phase, and latency percentiles per operation."""
    metas = [m for m in metas if any(p.get("ops") for p in m.get("phases") or [])][:MAX_SERIES]
    if not metas:
        return []
    names: list[str] = []
    for m in metas:
        for p in m.get("phases") or []:
            if p.get("ops") and p.get("name") not in names:
                names.append(str(p.get("name")))
    varying = varying_options(metas)
    labels = [run_label(m, varying) for m in metas]
    fig, (ax,) = _figure()
    w = 0.8 / len(metas)
    for k, (m, label) in enumerate(zip(metas, labels)):
        by_name = {str(p.get("name")): p for p in m.get("phases") or []}
        ys = [(by_name.get(n) or {}).get("ops_per_s") or 0.0 for n in names]
        ax.bar([i - 0.4 + w * (k + 0.5) for i in range(len(names))], ys, w, label=label)
    ax.set_xticks(range(len(names)), names)
    ax.set_xlabel("operation (phase)")
    ax.set_ylabel("operations per second (ops/s)")
    ax.set_title("Metadata rate per operation")
    ax.legend(fontsize="small")
    charts = [Chart("meta-ops", "Metadata rate per operation", fig,
                    "ops/s = the phase's operations of all threads over the phase time")]
    metas = [m for m in metas if any((p.get("lat_ns") or {}).get(key) for p in m.get("phases") or []
                                     for key, _ in _META_PCTS)]
    if not metas:               # rates only (imported mdtest runs): no latency chart
        return charts
    labels = [run_label(m, varying) for m in metas]
    fig, (ax,) = _figure()
    styles = {"p50": ("o", "-"), "p99": ("^", "--"), "p999": ("s", ":")}
    colors = [f"C{i}" for i in range(len(metas))]
    for m, label, color in zip(metas, labels, colors):
        by_name = {str(p.get("name")): p for p in m.get("phases") or [] if p.get("ops")}
        for key, shown in _META_PCTS:
            xs = [i for i, n in enumerate(names) if (by_name.get(n, {}).get("lat_ns") or {}).get(key)]
            if xs:
                marker, style = styles[key]
                ax.plot(xs, [by_name[names[i]]["lat_ns"][key] / 1e3 for i in xs], marker=marker,
                        linestyle=style, color=color if len(metas) > 1 else None,
                        label=f"{label} {shown}" if len(metas) > 1 else shown)
    ax.set_xticks(range(len(names)), names)
    _log_latency_axis(ax, "y")
    ax.set_xlabel("operation (phase)")
    ax.set_ylabel("latency per operation (µs)")
    ax.set_title("Metadata latency percentiles per operation")
    ax.legend(fontsize="small")
    charts.append(Chart("meta-latency", "Metadata latency percentiles per operation", fig,
                        "a create includes its data write, fsync and close"))
    return charts


def all_charts(runs: Sequence[dict[str, Any]], sweeps: Sequence[dict[str, Any]] = (),
               scales: Sequence[dict[str, Any]] = (), metas: Sequence[dict[str, Any]] = ()) -> list[Chart]:
    """Every chart that fits these runs (and sweep, scale, meta documents), in reading order."""
    return (model_charts(runs) + sweep_charts(sweeps) + scale_charts(scales) + throughput_charts(runs)
            + iops_latency_charts(runs) + latency_charts(runs) + timeseries_charts(runs)
            + worker_charts(runs) + meta_charts(metas))
