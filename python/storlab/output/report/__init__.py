"""`storlab report`: one self-contained HTML file (charts embedded as base64 PNG, inline CSS, no
script, nothing fetched) built from stored or exported result documents.

The report reads documents only, never the live engine. Charts are chosen from what the runs
contain (report/charts.py); then come training workloads (training's AU, samples/s and MiB/s, and
evaluation's beside them when the run evaluated), predicted vs measured (runs with a stack model),
metadata runs, the results table, the job, the environment, warnings, and what makes the runs
incomparable when there are several.
"""
from __future__ import annotations

import base64
import html
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from ... import __version__
from ...units import format_size
from ..base import RESULT_COLUMNS, RUN_COLUMNS, human, job_parameter, result_rows, short_id, varying
from ..compare import compare
from .charts import Chart, all_charts
from .data import fmt_param, model_rows, of_kind, split_runs, varying_options

__all__ = ["build_report", "write_report", "charts_for", "CSS"]

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 1200px; color: #1d1d1f; background: #fff; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
.meta { color: #555; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f2f2f2; text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; }
.warn { background: #fff4e5; border-left: 4px solid #f0a020; padding: 0.5em 1em; }
.bad { color: #b00020; font-weight: bold; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[bool]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{_e(c)}</td>' if num else f"<td>{_e(c)}</td>"
                         for c, num in zip(row, numeric)) + "</tr>"
        for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _results_section(runs: list[dict[str, Any]]) -> str:
    rows = result_rows(runs)
    if not rows:
        return "<p>No I/O was measured.</p>"
    run_cols = [RUN_COLUMNS[0]] + (varying(rows, RUN_COLUMNS[1:]) if len(runs) > 1 else [])
    cols = run_cols + list(RESULT_COLUMNS)
    return _table([c.header for c in cols], [[human(c, r.get(c.key)) for c in cols] for r in rows],
                  [c.kind == "num" for c in cols])


def _job_value(key: str, value: Any) -> str:
    if isinstance(value, list):
        value = tuple(value)
    return fmt_param(key, value) if value is not None else "-"


def _job_section(runs: list[dict[str, Any]]) -> str:
    keys: list[str] = []
    for r in runs:
        job = r.get("job") or {}
        # nested structures (the resolved phases a run records) repeat the options shown here
        keys += [k for k in job if k not in keys
                 and not (job[k] is not None and job_parameter(job, k) is None)]
    if not keys:
        return ""
    differ = set(varying_options(runs)) if len(runs) > 1 else set()
    common = [[k, _job_value(k, (runs[0].get("job") or {}).get(k))] for k in keys if k not in differ]
    out = "<h3>Options common to all runs</h3>" if differ else ""
    out += _table(["option", "value"], common, [False, False])
    if differ:
        headers = ["run"] + [k for k in keys if k in differ]
        rows = [[short_id(r.get("run_id"))] + [_job_value(k, (r.get("job") or {}).get(k))
                                              for k in headers[1:]] for r in runs]
        out += "<h3>Options that differ</h3>" + _table(headers, rows, [False] * len(headers))
    return out


def _environment_section(runs: list[dict[str, Any]]) -> str:
    seen: list[str] = []
    parts = []
    for r in runs:
        env = r.get("environment") or {}
        key = json.dumps({k: v for k, v in env.items() if k != "targets"}, sort_keys=True)
        if key in seen:
            continue
        seen.append(key)
        rows = [[k, env.get(k)] for k in ("host", "kernel", "os", "cpu_model", "cpu_count", "python",
                                          "engine", "launcher", "slurm_job_id") if env.get(k) is not None]
        if env.get("memory_bytes"):
            rows.append(["memory", format_size(env["memory_bytes"])])
        uring = env.get("io_uring")
        if uring:
            rows.append(["io_uring", ", ".join(f"{k}={v}" for k, v in uring.items())])
        users = [short_id(x.get("run_id")) for x in runs
                 if json.dumps({k: v for k, v in (x.get("environment") or {}).items()
                                if k != "targets"}, sort_keys=True) == key]
        parts.append(f"<p>Runs: {_e(', '.join(users))}</p>" + _table(["field", "value"], rows,
                                                                     [False, False]))
    targets: dict[str, dict[str, Any]] = {}
    for r in runs:
        for t in (r.get("environment") or {}).get("targets") or []:
            targets.setdefault(str(t.get("path")), t)
    if targets:
        sized = {p: t.get("size_bytes") is not None and t.get("type") != "char"   # char: no size
                 for p, t in targets.items()}
        rows = [[p, t.get("type"), format_size(t["size_bytes"]) if sized[p] else "-",
                 t.get("fs_type") or "-", t.get("device") or "-", t.get("model") or "-",
                 {True: "yes", False: "no"}.get(t.get("rotational"), "-"), t.get("scheduler") or "-"]
                for p, t in targets.items()]
        parts.append("<h3>Targets</h3>" + _table(
            ["path", "type", "size", "file system", "device", "model", "rotational", "scheduler"],
            rows, [False] * 8))
    return "".join(parts)


def _notes_section(runs: list[dict[str, Any]], metas: Sequence[dict[str, Any]] = ()) -> str:
    items = []
    for r in [*runs, *metas]:
        rid = short_id(r.get("run_id"))
        if r.get("complete") is False:
            err = f": {r['error']}" if r.get("error") else ""
            items.append(f'<li class="bad">run {_e(rid)} is incomplete ({_e(r.get("stop_reason"))}'
                         f"{_e(err)}); its figures cover only the time until the stop</li>")
        for w in r.get("warnings") or []:
            items.append(f"<li>run {_e(rid)} [{_e(w.get('code'))}]: {_e(w.get('message'))}</li>")
    if len(runs) > 1:
        for item in compare(runs)["incomparable"]:
            if item["code"] != "incomplete":
                items.append(f"<li>not comparable like for like: {_e(item['message'])}</li>")
    return f'<div class="warn"><ul>{"".join(items)}</ul></div>' if items else ""


def _rate(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value / (1 << 20):,.1f} MiB/s" if unit == "bytes/s" else f"{value:,.0f} IOPS"


def _model_section(runs: list[dict[str, Any]]) -> str:
    """Predicted vs measured per run and phase, then the notes of each stack model."""
    rows = model_rows(runs)
    if not rows:
        return ""
    multi = len({id(r.run) for r in rows}) > 1
    headers = (["run"] if multi else []) + ["phase", "stack", "metric", "predicted", "measured",
                                            "measured / predicted", "limiting component"]
    cells = [([short_id(r.run.get("run_id"))] if multi else [])
             + [r.phase, r.stack, r.metric, _rate(r.predicted, r.unit), _rate(r.measured, r.unit),
                "-" if r.ratio is None else f"{r.ratio:.2f}", r.limiting] for r in rows]
    numeric = ([False] if multi else []) + [False, False, False, True, True, True, False]
    out = [_table(headers, cells, numeric)]
    seen: list[str] = []
    notes = []
    for run in runs:
        model = run.get("model") or {}
        stack = model.get("stack") or {}
        key = str(model.get("stack_file"))
        if not model or key in seen:
            continue
        seen.append(key)
        p = model.get("predicted") or {}
        notes.append(
            f"<p><b>{_e(stack.get('name'))}</b> ({_e(model.get('stack_file'))}): {_e(stack.get('layout'))}"
            f" x {_e(stack.get('count'))}, {_e(stack.get('drives'))} drives "
            f"({_e(stack.get('data_drives'))} holding data), chunk {_e(format_size(stack.get('chunk_bytes') or 0))}, "
            f"full stripe {_e(format_size(stack.get('full_stripe_bytes') or 0))}. At "
            f"{_e(format_size(model.get('request_bytes') or 0))} requests the stack gives sequential read "
            f"{_e(_rate(p.get('seq_read_bw_bytes'), 'bytes/s'))}, sequential write "
            f"{_e(_rate(p.get('seq_write_bw_bytes'), 'bytes/s'))}, random read "
            f"{_e(_rate(p.get('rand_read_iops'), 'IOPS'))}, random write "
            f"{_e(_rate(p.get('rand_write_iops'), 'IOPS'))}.</p>")
        if model.get("notes"):
            notes.append("<ul>" + "".join(f"<li>{_e(n)}</li>" for n in model["notes"]) + "</ul>")
    return "".join(out + notes)


def _meta_section(metas: list[dict[str, Any]]) -> str:
    """One table per metadata run: ops/s and latency percentiles per operation (phase)."""
    parts = []
    us = lambda p, k: "-" if not p.get("ops") else f"{((p.get('lat_ns') or {}).get(k) or 0) / 1e3:,.1f}"  # noqa: E731
    for m in metas:
        job = m.get("job") or {}
        rows = [[p.get("name"), p.get("ops"), f"{(p.get('seconds') or 0) * 1e3:,.1f}",
                 f"{p.get('ops_per_s') or 0:,.0f}", us(p, "mean"), us(p, "p50"), us(p, "p99"),
                 us(p, "p999"), "yes" if p.get("stonewalled") else "no"] for p in m.get("phases") or []]
        parts.append(f"<h3>meta {_e(short_id(m.get('run_id')))}: {_e(m.get('workers'))} thread(s) x "
                     f"{_e(job.get('files'))} files in {_e((job.get('target') or ['?'])[0])}</h3>")
        parts.append(_table(["operation", "ops", "time ms", "ops/s", "mean µs", "p50 µs", "p99 µs",
                             "p99.9 µs", "stonewalled"], rows,
                            [False, True, True, True, True, True, True, True, False]))
    return "".join(parts)


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _workload_section(docs: Sequence[dict[str, Any]]) -> str:
    """One table per training run of `storlab workload`: training's AU, samples/s, MiB/s (DLIO's
    'MB/s') and seconds per epoch, and beside them, only when the run evaluated, the same figures
    of evaluation (apart from training's, as DLIO reports them) and a row per evaluation."""
    parts = []
    pct = lambda x: "-" if x is None else f"{100 * x:.2f} %"  # noqa: E731
    verdict = lambda ok: "PASS" if ok else "FAIL"  # noqa: E731
    for d in docs:
        if d.get("au") is None:
            continue
        epochs = d.get("epochs") or []
        mean_s = sum(e["seconds"] for e in epochs) / len(epochs) if epochs else None
        rows = [["training", len(epochs), d.get("steps_per_epoch"), "-" if mean_s is None else f"{mean_s:,.3f}",
                 pct(d.get("au")), f"{d.get('samples_per_s') or 0:,.2f}", _mib(d.get("mib_per_s")),
                 verdict(d.get("passed"))]]
        ev = d.get("evaluation") or {}
        evals = ev.get("evaluations") or []
        if evals:
            mean_ev = sum(e["seconds"] for e in evals) / len(evals)
            rows.append(["evaluation", len(evals), ev.get("steps_per_evaluation"), f"{mean_ev:,.3f}", pct(ev.get("au")),
                         f"{ev.get('samples_per_s') or 0:,.2f}", _mib(ev.get("mib_per_s")), verdict(ev.get("passed"))])
        name = (d.get("workload") or {}).get("name", "?")
        parts.append(f"<h3>{_e(name)} x{_e(d.get('accelerators'))} accelerator(s) ({_e(short_id(d.get('run_id')))}), "
                     f"AU threshold {_e(pct(d.get('au_threshold')))}</h3>")
        parts.append(_table(["phase", "epochs / evaluations", "steps each", "seconds each (mean)", "AU", "samples/s",
                             "MiB/s", "pass / fail"], rows, [False, True, True, True, True, True, True, False]))
        if evals:
            ms = lambda e: f"{1000 * ((e.get('wait_s') or {}).get('p99') or 0):,.2f}"  # noqa: E731
            rows = [[e["epoch"], f"{e.get('start_s', 0):,.3f}", f"{e['seconds']:,.3f}", pct(e["au"]),
                     f"{e['samples_per_s']:,.2f}", _mib(e.get("mib_per_s")), ms(e)] for e in evals]
            parts.append("<p>Evaluations (DLIO's eval: the eval files read after the training epochs named, batch "
                         f"{_e(ev.get('batch_size'))}, {_e(ev.get('computation_time'))} s of compute per batch; "
                         "reported apart from training, whose figures leave them out):</p>")
            parts.append(_table(["after epoch", "start s", "seconds", "AU", "samples/s", "MiB/s", "batch wait p99 ms"],
                                rows, [True] * 7))
    if not parts:
        return ""
    return "".join(parts) + ("<p class=\"meta\">AU: compute time over wall time, first step left out (DLIO's); "
                             "MiB/s: samples/s x record length / 2<sup>20</sup> (DLIO's 'MB/s').</p>")


def _imported_section(docs: Sequence[dict[str, Any]]) -> str:
    """Where each imported run came from (`storlab results import`) and what its file lacks: its
    figures are the other tool's, its percentiles not recomputed from storlab histograms."""
    rows = []
    for d in docs:
        imp = d.get("imported")
        if not isinstance(imp, dict):
            continue
        src = imp.get("imported_from") or {}
        rows.append([short_id(d.get("run_id")), f"{src.get('tool')} {src.get('version') or ''}",
                     src.get("file"), str(src.get("sha256"))[:16], imp.get("command") or "-",
                     imp.get("latency"), ", ".join(imp.get("missing") or [])])
    if not rows:
        return ""
    return _table(["run", "tool", "file", "sha256", "command", "latency", "not in the file"], rows,
                  [False] * 7)


def charts_for(docs: Sequence[dict[str, Any]]) -> list[Chart]:
    runs, _ = split_runs(docs)
    from .workload_charts import workload_charts

    return all_charts(runs, of_kind(docs, "sweep"), of_kind(docs, "scale"), of_kind(docs, "meta")) + \
        workload_charts(of_kind(docs, "workload"))


def _contents(runs: Sequence[dict[str, Any]], metas: Sequence[dict[str, Any]],
              others: Sequence[dict[str, Any]]) -> str:
    """What the report is on, by kind: "2 run(s), 1 workload run(s)"."""
    workloads = sum(1 for d in others if d.get("kind") == "workload")
    counts = [(len(runs), "run(s)"), (len(metas), "metadata run(s)"), (workloads, "workload run(s)"),
              (len(others) - workloads, "other document(s)")]
    return ", ".join(f"{n} {what}" for n, what in counts if n)


def build_report(docs: Sequence[dict[str, Any]], title: str | None = None,
                 charts: Sequence[Chart] | None = None) -> str:
    """The HTML text of a report on these documents."""
    runs, others = split_runs(docs)
    metas = of_kind(docs, "meta")
    if not runs and not others and not metas:
        raise ValueError("report: no documents to report on")
    charts = list(charts) if charts is not None else charts_for(docs)
    differ = varying_options(runs)
    contents = _contents(runs, metas, others)
    title = title or (f"storlab report: {contents}" + (f" varying {', '.join(differ)}" if differ else ""))
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = [f"<h1>{_e(title)}</h1>",
            f'<p class="meta">Generated {now} by storlab {_e(__version__)} from {_e(contents)}</p>']
    notes = _notes_section(runs, metas)
    if notes:
        body += ["<h2>Warnings</h2>", notes]
    if charts:
        body.append("<h2>Charts</h2>")
        for c in charts:
            data = base64.b64encode(c.png()).decode("ascii")
            cap = _e(c.title) + (f" — {_e(c.note)}" if c.note else "")
            body.append(f'<figure><img src="data:image/png;base64,{data}" alt="{_e(c.title)}">'
                        f"<figcaption>{cap}</figcaption></figure>")
    training = _workload_section(of_kind(docs, "workload"))
    if training:
        body += ["<h2>Training workloads</h2>", training]
    model = _model_section(runs)
    if model:
        body += ["<h2>Predicted (stack model) vs measured</h2>", model]
    if metas:
        body += ["<h2>Metadata runs</h2>", _meta_section(metas)]
    if runs:
        body += ["<h2>Results</h2>", _results_section(runs),
                 "<p class=\"meta\">Units: MiB = 2<sup>20</sup> bytes; latency is completion "
                 "latency in microseconds; bandwidth and IOPS are summed over workers.</p>",
                 "<h2>Job</h2>", _job_section(runs),
                 "<h2>Environment</h2>", _environment_section(runs)]
    imported = _imported_section([*runs, *metas])
    if imported:
        body += ["<h2>Imported results</h2>", imported]
    if others:
        body.append("<h2>Other documents</h2>")
        for d in others:
            text = json.dumps(d, indent=1)
            if len(text) > 20000:
                text = text[:20000] + "\n…"
            body.append(f"<h3>{_e(d.get('kind'))} {_e(short_id(d.get('run_id')))}</h3><pre>{_e(text)}</pre>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def write_report(docs: Sequence[dict[str, Any]], path: str | Path, png_dir: str | Path | None = None,
                 title: str | None = None) -> list[Path]:
    """Write the HTML report (and with `png_dir`, every chart as NN-name.png); returns the files."""
    charts = charts_for(docs)
    text = build_report(docs, title=title, charts=charts)
    out = Path(path)
    out.write_text(text, encoding="utf-8")
    written = [out]
    if png_dir is not None:
        d = Path(png_dir)
        d.mkdir(parents=True, exist_ok=True)
        for n, c in enumerate(charts, 1):
            f = d / f"{n:02d}-{c.name}.png"
            f.write_bytes(c.png())
            written.append(f)
    return written
