"""Tests of `storlab report`: charts chosen from the runs, a self-contained HTML file, PNG export,
and (marked `browser`) the page opened in headless Chromium: screenshot not blank, every image
decoded, no console or script errors."""
from __future__ import annotations

import base64
import json
import math
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the report needs matplotlib (extras: report, test)")

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "results"))

import rundoc  # noqa: E402
from browser import in_page_check, needs_chromium, screenshot
from storlab import store
from storlab.cli.main import main
from storlab.document import header
from storlab.measure import stats
from storlab.measure.prediction import predict_for_run
from storlab.output.report import build_report, charts_for, write_report
from storlab.output.report.charts import MODEL_TITLE
from storlab.output.report.data import split_runs

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MiB = 1 << 20


# -- the three kinds of report the issue asks for ----------------------------------------------
def single_run():
    return [rundoc.make_run(rw="randrw", engine="io_uring", qd=16, threads=4, seed=3)]


def bs_sweep():
    return rundoc.bs_sweep()


def multi_rank():
    """Runs at 1..8 MPI ranks (2 threads each): scaling chart with ideal line and per-rank bars."""
    return [rundoc.make_run(ranks=r, threads=2, iops=20000 * r ** 0.85, seed=r,
                            started_at=f"2026-11-21T16:0{r}:00.000Z") for r in (1, 2, 4, 8)]


STACKS = Path(__file__).resolve().parent.parent / "examples" / "stacks"
JBOD = str(STACKS / "sas-jbod-4x12-two-raid-adapters.toml")


def with_model(run, stack=JBOD):
    """A run with the stack model attached, as `storlab run --stack` stores it."""
    run["job"]["stack"] = stack
    run["model"] = predict_for_run(stack, run["job"])
    return run


def model_run():
    """Random reads at qd 16 on the 48-drive JBOD stack, plus a sequential write phase."""
    run = rundoc.make_run(rw="randread", engine="io_uring", qd=16, threads=2, iops=2600, seed=5,
                          phases=["randread", "write"])
    run["job"]["phases"] = [{"name": "randread", "groups": [{**run["job"], "rw": "randread"}]},
                            {"name": "write", "groups": [{**run["job"], "rw": "write"}]}]
    return [with_model(run)]


def model_bs_sweep():
    return [with_model(r) for r in rundoc.bs_sweep(sizes=(4096, 65536, 1 << 20), rw="read")]


def sweep_document():
    """A `storlab.sweep/1` document as docs/sweep.md shows it: qd 1..32 at bs 4 KiB, knee at 8,
    latency climbing at 32."""
    runs = [rundoc.make_run(qd=q, engine="io_uring", iops=20000 * min(q, 8), seed=q,
                            lat_ns=50_000 * max(1, q / 8)) for q in (1, 2, 4, 8, 16, 32)]
    points = []
    for i, r in enumerate(runs):
        d = r["phases"][0]["read"]
        points.append({"index": i, "params": {"qd": r["job"]["qd"]}, "run_id": r["run_id"], "status": "done",
                       "phase": "randread", "passes": 1, "bw_bytes": d["bw_bytes"], "iops": d["iops"],
                       "lat_mean_ns": d["lat_ns"]["mean"], "lat_p50_ns": d["lat_ns"]["p50"],
                       "lat_p99_ns": d["lat_ns"]["p99"], "lat_p999_ns": d["lat_ns"]["p999"]})
    tput = [p["bw_bytes"] for p in points]
    series = [{"axis": "qd", "fixed": {}, "inner": True, "values": [1, 2, 4, 8, 16, 32],
               "points": list(range(6)),
               "best": {"value": 32, "point": 5, "throughput": max(tput)},
               "knee": {"value": 8, "point": 3, "throughput": tput[3], "share_of_best_pct": 99.0,
                        "saturated": True},
               "climb_basis": "same_bs",
               "latency_climb": {"value": 32, "point": 5, "previous_value": 16, "latency": "mean",
                                 "basis": "same_bs", "unit": "ns", "compared": points[5]["lat_mean_ns"],
                                 "lowest": points[0]["lat_mean_ns"], "lowest_value": 1,
                                 "latency_ns": points[5]["lat_mean_ns"], "ratio": 4.0,
                                 "throughput_gain_pct": 0.5}}]
    return [{**header("sweep", run_id="5" * 32, started_at=STARTED, finished_at=STARTED),
             "axes": [{"name": "qd", "values": [1, 2, 4, 8, 16, 32], "numeric": True}],
             "settings": {"metric": "bw", "knee_pct": 95, "climb_pct": 50, "climb_gain_pct": 5,
                          "climb_latency": "mean", "stop_flat_pct": 0, "stop_count": 2, "phase": None},
             "job": {}, "environment": {}, "points": points, "series": series, "early_stops": [],
             "warnings": [], "runs": runs}]


SCALE_EFFICIENCY = {1: 1.0, 2: 0.95, 4: 0.85, 8: 0.7}
STARTED = "2026-11-21T15:20:00.000Z"   # fixed, so the documents are reproducible


def scale_document():
    """A `scale` document (cli/scale.py): the merged run at each rank count and the curve."""
    runs = multi_rank()
    base_bw = 100 * MiB
    points = [{"ranks": n, "nodes": max(1, n // 2), "complete": True, "bytes": 0, "seconds": 5.0,
               "bw_bytes": base_bw * n * e, "deskew_bw_bytes": base_bw * n * min(1.0, e + 0.05),
               "speedup": n * e, "efficiency": e, "deskew_speedup": n * min(1.0, e + 0.05),
               "deskew_efficiency": min(1.0, e + 0.05)} for n, e in SCALE_EFFICIENCY.items()]
    return [{**header("scale", run_id="c" * 32, started_at=STARTED, finished_at=STARTED),
             "job": runs[0]["job"], "environment": runs[0]["environment"], "warnings": [], "phases": [],
             "runs": runs,
             "scale": {"ranks_planned": [1, 2, 4, 8], "ranks_run": [1, 2, 4, 8],
                       "curve": [{"phase": "randread", "base_ranks": 1, "points": points}]}}]


META_RATES = {"mkdir": 900.0, "create": 12000.0, "stat": 80000.0, "read": 30000.0, "remove": 15000.0,
              "rmdir": 800.0}


def meta_document(threads=2, seed=7):
    """A `storlab meta` document (meta.py, crates/storlab-core/src/meta/result.rs)."""
    import random

    rng = random.Random(seed)
    phases = []
    for name, rate in META_RATES.items():
        samples = [max(1, int(rng.lognormvariate(math.log(threads * 1e9 / rate), 0.4))) for _ in range(2000)]
        buckets = stats.histogram(samples)
        lat = {"min": min(samples), "mean": sum(samples) / len(samples), "stddev": 0.0,
               **{k: v for k, v in stats.summary(buckets).items() if k in ("p50", "p90", "p99", "p999")},
               "max": max(samples)}
        ops = int(rate * 2)
        phases.append({"name": name, "complete": True, "stop_reason": "done", "error": None, "ops": ops,
                       "seconds": ops / rate, "ops_per_s": rate, "lat_ns": lat,
                       "lat_hist": {"scheme": "loglinear6", "buckets": buckets},
                       "items_per_worker": [ops // threads] * threads, "stonewalled": False,
                       "stonewall_s": None, "bytes": 0, "bw_bytes": 0.0, "start_unix_s": 0.0,
                       "workers": [{"id": w, "target": f"/mnt/t/w{w}", "start_s": 0.0, "end_s": ops / rate,
                                    "ops": ops // threads, "stonewalled": False, "read_bytes": 0,
                                    "read_ops": 0, "write_bytes": 0, "write_ops": 0}
                                   for w in range(threads)]})
    return {**header("meta", run_id=f"{seed:x}" * 32, started_at=STARTED, finished_at=STARTED,
                     argv=["storlab", "meta"]),
            "job": {"target": ["/mnt/t"], "threads": threads, "files": 4000, "engine": "posix", "rw": None,
                    "bs": None, "phases": [{"name": n, "type": "meta"} for n in META_RATES]},
            "environment": {**rundoc.make_run()["environment"], "engine": "posix", "io_uring": None, "targets": [],
                            "directory": {"path": "/mnt/t", "fs_type": "ext4"}},
            "warnings": [], "workers": threads, "phases": phases,
            "cleanup": {"kept": False, "files_removed": 0, "dirs_removed": 1, "error": None}}


def meta_report():
    """Two metadata runs (2 and 8 threads) reported next to an I/O run."""
    return [meta_document(2, 7), meta_document(8, 9), rundoc.make_run(seed=11)]


REPORTS = {"run": single_run, "sweep": bs_sweep, "multi-rank": multi_rank, "model": model_run,
           "model-sweep": model_bs_sweep, "sweep-document": sweep_document, "scale": scale_document,
           "meta": meta_report}


def chart_names(docs):
    return [c.name for c in charts_for(docs)]


def embedded_pngs(text):
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)]


# -- chart selection ---------------------------------------------------------------------------
def test_single_run_gets_latency_timeseries_and_worker_charts():
    names = chart_names(single_run())
    assert "latency-percentiles" in names and "latency-cdf" in names and "timeseries" in names
    assert any(n.startswith("per-worker-") for n in names)
    assert not any(n.startswith("throughput-vs-") for n in names)   # nothing was swept


def test_bs_sweep_gets_throughput_vs_request_size():
    names = chart_names(bs_sweep())
    assert names[0] == "throughput-vs-bs"
    assert "iops-vs-latency-qd" not in names


def test_qd_sweep_gets_iops_vs_latency():
    runs = [rundoc.make_run(qd=q, engine="io_uring", iops=20000 * min(q, 8), seed=q) for q in (1, 4, 16)]
    names = chart_names(runs)
    assert "throughput-vs-qd" in names and "iops-vs-latency-qd" in names


def test_multi_rank_gets_scaling_with_ideal_line_and_per_rank_bars():
    charts = {c.name: c for c in charts_for(multi_rank())}
    scaling = charts["throughput-vs-ranks"]
    labels = [line.get_label() for line in scaling.figure.axes[0].get_lines()]
    assert any("ideal" in lab for lab in labels)
    ideal = next(line for line in scaling.figure.axes[0].get_lines() if "ideal" in line.get_label())
    xs, ys = ideal.get_data()
    assert ys[-1] == pytest.approx(ys[0] * xs[-1] / xs[0])       # linear from the smallest run
    assert any(n.startswith("per-rank-") for n in charts)


def test_series_split_by_the_other_varying_option():
    runs = rundoc.bs_sweep(sizes=(4096, 65536)) + rundoc.bs_sweep(sizes=(4096, 65536), engine="io_uring")
    chart = next(c for c in charts_for(runs) if c.name == "throughput-vs-bs")
    labels = {line.get_label() for line in chart.figure.axes[0].get_lines()}
    assert labels == {"engine=psync read", "engine=io_uring read"}


@pytest.mark.parametrize("kind", list(REPORTS))
def test_every_chart_has_title_axis_labels_with_units_and_legend(kind):
    for chart in charts_for(REPORTS[kind]()):
        for ax in chart.figure.axes:
            assert ax.get_title() or chart.figure.get_suptitle(), chart.name
            assert ax.get_xlabel(), chart.name
            assert re.search(r"\(.+\)", ax.get_ylabel()), (chart.name, ax.get_ylabel())
            assert ax.get_legend() is not None, chart.name


# -- predicted (stack model) vs measured, sweep, scale and meta documents -----------------------
def _bars(ax):
    return {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers}


def test_run_with_a_model_gets_predicted_vs_measured_bars_per_unit():
    (run,) = model_run()
    chart = next(c for c in charts_for([run]) if c.name == "predicted-vs-measured")
    assert chart.title == MODEL_TITLE
    bw_ax, iops_ax = chart.figure.axes        # sequential write in MiB/s, random read in IOPS
    assert bw_ax.get_ylabel() == "bandwidth (MiB/s)" and iops_ax.get_ylabel() == "IOPS (operations/s)"
    phases = {p["phase"]: p for p in run["model"]["phases"]}
    measured = {p["name"]: p for p in run["phases"]}
    bars = _bars(iops_ax)
    assert bars["predicted (stack model)"] == [pytest.approx(phases["randread"]["value"])]
    assert bars["measured"] == [pytest.approx(measured["randread"]["read"]["iops"])]
    bars = _bars(bw_ax)
    assert bars["predicted (stack model)"] == [pytest.approx(phases["write"]["value"] / MiB)]
    assert bars["measured"] == [pytest.approx(measured["write"]["write"]["bw_bytes"] / MiB)]
    # the limiting component is written on the predicted bar and listed under the chart
    (tick,) = [t.get_text().replace("\n", " ") for t in iops_ax.get_xticklabels()]
    assert tick == f"randread limit: {phases['randread']['limiting_component']}"
    assert [t.get_text() for t in iops_ax.texts] == [
        f"{measured['randread']['read']['iops'] / phases['randread']['value']:.0%}"]
    assert phases["write"]["limiting_component"] in chart.note


def test_model_table_has_predicted_measured_and_ratio():
    (run,) = model_run()
    text = build_report([run])
    assert f'alt="{MODEL_TITLE}"' in text
    section = text.split("<h2>Predicted (stack model) vs measured</h2>", 1)[1].split("<h2>", 1)[0]
    assert "<th>measured / predicted</th>" in section and "<th>limiting component</th>" in section
    pred = next(p for p in run["model"]["phases"] if p["phase"] == "randread")
    ratio = run["phases"][0]["read"]["iops"] / pred["value"]
    assert f'<td class="num">{ratio:.2f}</td>' in section
    assert f"{pred['value']:,.0f} IOPS" in section
    assert _e(pred["limiting_component"]) in section
    assert "sas-jbod-4x12-two-raid-adapters" in section and "engine" not in run["model"]["notes"][0]


def _e(text):
    import html

    return html.escape(text, quote=True)


def test_runs_without_a_model_have_no_prediction_chart_or_section():
    assert "predicted-vs-measured" not in chart_names(single_run())
    assert "Predicted (stack model)" not in build_report(single_run())


def test_model_bs_sweep_draws_predicted_and_measured_lines_along_bs():
    runs = model_bs_sweep()
    chart = next(c for c in charts_for(runs) if c.name == "predicted-vs-measured")
    (ax,) = chart.figure.axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"read predicted", "read measured"}
    assert list(lines["read predicted"].get_xdata()) == [4096, 65536, 1 << 20]
    expected = [r["model"]["phases"][0]["value"] / MiB for r in runs]
    assert list(lines["read predicted"].get_ydata()) == pytest.approx(expected)
    assert any(t.get_text().startswith("limit: ") for t in ax.texts)


def test_sweep_document_gets_its_own_chart_with_knee_and_latency_climb():
    docs = sweep_document()
    charts = {c.name: c for c in charts_for(docs)}
    chart = charts["sweep-55555555-qd"]
    ax_t, ax_l = chart.figure.axes
    labels = [line.get_label() for line in ax_t.get_lines()]
    assert "knee at qd=8" in labels
    knee = next(line for line in ax_t.get_lines() if line.get_label() == "knee at qd=8")
    assert knee.get_ydata()[0] == pytest.approx(docs[0]["series"][0]["knee"]["throughput"] / MiB)
    assert "latency climbs at qd=32" in [line.get_label() for line in ax_l.get_lines()]
    assert "throughput-vs-qd" in charts          # its runs still get the run charts


def test_sweep_along_bs_plots_latency_per_kib_not_latencies_of_different_sizes():
    doc = sweep_document()[0]
    sizes = [4096, 16384, 65536, 262144, 1 << 20, 4 << 20]
    for p, bs in zip(doc["points"], sizes):
        p["params"] = {"bs": bs}
    doc["axes"] = [{"name": "bs", "values": sizes, "numeric": True}]
    s = doc["series"][0]
    s.update(axis="bs", values=sizes, climb_basis="per_kib", latency_climb=None)
    chart = next(c for c in charts_for([doc]) if c.name == f"sweep-{'5' * 8}-bs")
    _, ax_l = chart.figure.axes
    (line,) = [ln for ln in ax_l.get_lines() if not ln.get_label().startswith("latency climbs")]
    lat = [p["lat_mean_ns"] for p in doc["points"]]
    assert list(line.get_ydata()) == pytest.approx([v / (b / 1024) for v, b in zip(lat, sizes)])
    assert "per KiB" in ax_l.get_ylabel() and "per KiB" in chart.note


def test_scale_document_gets_efficiency_vs_ranks():
    chart = next(c for c in charts_for(scale_document()) if c.name == "scale-cccccccc")
    ax_bw, ax_eff = chart.figure.axes
    plain = next(line for line in ax_eff.get_lines() if line.get_label() == "randread")
    assert list(plain.get_xdata()) == [1, 2, 4, 8]
    assert list(plain.get_ydata()) == pytest.approx([100 * e for e in SCALE_EFFICIENCY.values()])
    ideal = next(line for line in ax_bw.get_lines() if "ideal" in line.get_label())
    assert list(ideal.get_ydata()) == pytest.approx([100 * n for n in SCALE_EFFICIENCY])
    assert ax_eff.get_ylabel() == "parallel efficiency (%)"


def test_meta_documents_get_ops_and_latency_per_operation_and_a_table():
    docs = meta_report()
    charts = {c.name: c for c in charts_for(docs)}
    (ax,) = charts["meta-ops"].figure.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == list(META_RATES)
    for heights in _bars(ax).values():
        assert heights == pytest.approx(list(META_RATES.values()))
    (ax,) = charts["meta-latency"].figure.axes
    p99 = next(line for line in ax.get_lines() if line.get_label().endswith(" p99"))
    create = next(p for p in docs[0]["phases"] if p["name"] == "create")
    assert p99.get_ydata()[1] == pytest.approx(create["lat_ns"]["p99"] / 1e3)
    # metadata runs are not I/O runs: no per-worker bars of their zero bytes
    assert not any(n.startswith(("per-worker-7777", "per-worker-9999")) for n in charts)
    assert [r["kind"] for r in split_runs(docs)[0]] == ["run"]
    docs[0]["warnings"] = [{"code": "short_phase", "message": "stat took 0.9 ms"}]
    text = build_report(docs)
    assert "<h2>Metadata runs</h2>" in text and "<th>ops/s</th>" in text and "80,000" in text
    assert "[short_phase]: stat took 0.9 ms" in text


# -- the HTML ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(REPORTS))
def test_report_is_self_contained_html_with_embedded_pngs(kind):
    docs = REPORTS[kind]()
    text = build_report(docs)
    assert text.startswith("<!DOCTYPE html>")
    pngs = embedded_pngs(text)
    assert len(pngs) == len(charts_for(docs)) >= 3
    assert all(p.startswith(PNG_MAGIC) for p in pngs)
    # nothing is fetched: no external scripts, styles or images
    assert not re.search(r'(src|href)="(https?:)?//', text)
    assert "<script" not in text
    for d in docs:
        assert d["run_id"][:8] in text
    assert "<h2>Results</h2>" in text and "<h2>Environment</h2>" in text and "kernel" in text


def test_report_flags_incomplete_runs_and_incomparable_ones():
    a = rundoc.make_run(seed=1)
    b = rundoc.interrupted(rundoc.make_run(seed=2, kernel="6.1.0"))
    text = build_report([a, b])
    assert "is incomplete (interrupted)" in text
    assert "kernel differs" in text


def test_report_accepts_sweep_documents_and_lists_other_kinds():
    sweep = rundoc.make_sweep()
    plan = rundoc.make_plan()
    text = build_report([sweep, plan])
    assert "throughput-vs-bs" in chart_names([sweep])
    assert "Other documents" in text and "full_stripe_bytes" in text
    with pytest.raises(ValueError, match="no documents"):
        build_report([])


def test_write_report_with_png_dir(tmp_path):
    files = write_report(bs_sweep(), tmp_path / "r.html", png_dir=tmp_path / "png")
    pngs = sorted((tmp_path / "png").iterdir())
    assert [f.name for f in pngs][0] == "01-throughput-vs-bs.png"
    assert files[1:] == pngs
    assert all(f.read_bytes().startswith(PNG_MAGIC) for f in pngs)
    # the files are the very images embedded in the HTML
    assert embedded_pngs((tmp_path / "r.html").read_text())[0] == pngs[0].read_bytes()


def test_cli_report_from_store_tag_and_json_file(tmp_path, monkeypatch, capsys):
    db = tmp_path / "results.db"
    monkeypatch.setenv("STORLAB_STORE", str(db))
    for d in bs_sweep():
        store.save(d, db, tags=["bs"])
    extra = rundoc.make_run(seed=99)
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    out = tmp_path / "report.html"
    code = main(["report", str(tmp_path / "extra.json"), "--with-tag", "bs", "-o", str(out),
                 "--png", str(tmp_path / "png")])
    _, err = capsys.readouterr()
    assert code == 0 and "wrote" in err
    text = out.read_text()
    assert extra["run_id"][:8] in text and len(embedded_pngs(text)) == len(list((tmp_path / "png").iterdir()))
    code = main(["report", "-o", str(out)])     # no run named: the most recent stored run
    newest = store.list_runs(db)[-1]["run_id"]
    assert code == 0 and newest[:8] in out.read_text() and extra["run_id"][:8] not in out.read_text()
    code = main(["report", "-o", str(out), "--with-tag", "no-such-tag"])
    assert code == 2 and "name the runs" in capsys.readouterr()[1]


# -- in a real browser (tests/browser.py) ---------------------------------------------------

@pytest.mark.browser
@needs_chromium
def test_browser_checks_catch_a_broken_page(tmp_path):
    """The checks below can fail: a page with a bad image and a script error is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head></head><body><p>x</p>'
                   '<img src="data:image/png;base64,AAAA"><script>undefinedFn();</script></body></html>')
    check, console = in_page_check(bad, tmp_path)
    assert check["images"] == 1 and check["broken"] == 1
    assert check["errors"] and "undefinedFn" in check["errors"][0]
    assert any("undefinedFn" in ln for ln in console)
    ncolors, non_white, console, _ = screenshot(bad, tmp_path)
    assert non_white < 0.03 and ncolors <= 50      # what the blank-page check rejects
    assert console


@pytest.mark.browser
@needs_chromium
@pytest.mark.parametrize("kind", list(REPORTS))
def test_report_renders_in_headless_chromium(kind, tmp_path):
    docs = REPORTS[kind]()
    html_file = tmp_path / "report.html"
    write_report(docs, html_file)
    nimages = len(embedded_pngs(html_file.read_text()))

    # 1. the report as written: screenshot, and no console output at all
    ncolors, non_white, console, size = screenshot(html_file, tmp_path)
    assert console == []
    assert size == (1280, 2400)
    assert ncolors > 50, "screenshot is (nearly) one colour"
    assert non_white > 0.03, "screenshot is blank"

    # 2. a copy with an error hook that writes into the DOM: every image decoded, no errors
    check, console = in_page_check(html_file, tmp_path)
    assert check == {"images": nimages, "broken": 0, "errors": [], "height": check["height"]}
    assert check["height"] > 2000
    assert console == []


def test_engine_output_bs_sweep_gets_one_series_vs_request_size():
    """Real `storlab run` documents: the per-run scratch directory must not split the series."""
    docs = json.loads((Path(__file__).parent / "fixtures" / "results" /
                       "engine-null-bs-sweep.json").read_text())
    chart = next(c for c in charts_for(docs) if c.name == "throughput-vs-bs")
    (line,) = chart.figure.axes[0].get_lines()
    assert list(line.get_xdata()) == [4096, 65536, 1 << 20]
    assert "phases" not in build_report(docs)


def test_the_hand_built_report_documents_follow_their_schemas():
    # they were built without storlab_version / finished_at, which no real document lacks
    from storlab.schemas import validate

    for doc in (*sweep_document(), *scale_document(), meta_document()):
        validate(doc)
