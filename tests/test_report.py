"""Tests of `storlab report`: charts chosen from the runs, a self-contained HTML file, PNG export,
and (marked `browser`) the page opened in headless Chromium: screenshot not blank, every image
decoded, no console or script errors."""
from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the report needs matplotlib (extras: report, test)")

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "results"))

import rundoc  # noqa: E402

from storlab import store  # noqa: E402
from storlab.cli.main import main  # noqa: E402
from storlab.report import build_report, charts_for, write_report  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# -- the three kinds of report the issue asks for ----------------------------------------------
def single_run():
    return [rundoc.make_run(rw="randrw", engine="io_uring", qd=16, threads=4, seed=3)]


def bs_sweep():
    return rundoc.bs_sweep()


def multi_rank():
    """Runs at 1..8 MPI ranks (2 threads each): scaling chart with ideal line and per-rank bars."""
    return [rundoc.make_run(ranks=r, threads=2, iops=20000 * r ** 0.85, seed=r,
                            started_at=f"2026-11-21T16:0{r}:00.000Z") for r in (1, 2, 4, 8)]


REPORTS = {"run": single_run, "sweep": bs_sweep, "multi-rank": multi_rank}


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
    sweep = {"schema": "storlab.sweep/1", "kind": "sweep", "run_id": "s" * 32, "runs": rundoc.bs_sweep()}
    plan = {"schema": "storlab.plan/1", "kind": "plan", "run_id": "a" * 32, "stripes": 8}
    text = build_report([sweep, plan])
    assert "throughput-vs-bs" in chart_names([sweep])
    assert "Other documents" in text and "stripes" in text
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
    code = main(["report", str(tmp_path / "extra.json"), "--tag", "bs", "-o", str(out),
                 "--png", str(tmp_path / "png")])
    _, err = capsys.readouterr()
    assert code == 0 and "wrote" in err
    text = out.read_text()
    assert extra["run_id"][:8] in text and len(embedded_pngs(text)) == len(list((tmp_path / "png").iterdir()))
    code = main(["report", "-o", str(out)])
    assert code == 2 and "name the runs" in capsys.readouterr()[1]


# -- in a real browser -------------------------------------------------------------------------
def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


_CHECK_HOOK = """<script>
window.__errors = [];
window.addEventListener('error', function (e) { window.__errors.push(String(e.message || e.type)); }, true);
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var r = {images: imgs.length,
           broken: imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); }).length,
           errors: window.__errors,
           height: document.body.scrollHeight};
  var pre = document.createElement('pre'); pre.id = 'storlab-check';
  pre.textContent = JSON.stringify(r); document.body.appendChild(pre);
});
</script>"""


def _run_chromium(args: list[str], workdir: Path) -> subprocess.CompletedProcess:
    exe = _chromium()
    profile = tempfile.mkdtemp(dir=workdir, prefix="profile-")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--hide-scrollbars", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
           *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _console_lines(stderr: str) -> list[str]:
    """Messages the page wrote to the console (errors, failed loads, uncaught exceptions)."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


def _in_page_check(html_file: Path, workdir: Path) -> tuple[dict, list[str]]:
    """Load a copy of the page with an error hook that writes its findings into the DOM."""
    hooked = workdir / ("hooked-" + html_file.name)
    hooked.write_text(html_file.read_text().replace("<head>", "<head>" + _CHECK_HOOK, 1))
    res = _run_chromium(["--dump-dom", "--virtual-time-budget=10000", hooked.as_uri()], workdir)
    assert res.returncode == 0, res.stderr[-2000:]
    m = re.search(r'<pre id="storlab-check">(.*?)</pre>', res.stdout)
    assert m, "the page did not finish loading"
    return json.loads(m.group(1).replace("&quot;", '"')), _console_lines(res.stderr)


def _screenshot(html_file: Path, workdir: Path):
    """(colours in a downscaled screenshot, share of non-white pixels, console lines, size)."""
    from PIL import Image

    shot = workdir / (html_file.stem + ".png")
    res = _run_chromium([f"--screenshot={shot}", "--window-size=1280,2400", html_file.as_uri()], workdir)
    assert res.returncode == 0, res.stderr[-2000:]
    img = Image.open(shot).convert("RGB")
    small = img.resize((320, 600))
    colors = small.getcolors(maxcolors=1 << 20)
    non_white = sum(n for n, c in colors if sum(c) < 3 * 245) / (320 * 600)
    return len(colors), non_white, _console_lines(res.stderr), img.size


needs_chromium = pytest.mark.skipif(_chromium() is None,
                                    reason="chromium not installed (apt-get install chromium)")


@pytest.mark.browser
@needs_chromium
def test_browser_checks_catch_a_broken_page(tmp_path):
    """The checks below can fail: a page with a bad image and a script error is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head></head><body><p>x</p>'
                   '<img src="data:image/png;base64,AAAA"><script>undefinedFn();</script></body></html>')
    check, console = _in_page_check(bad, tmp_path)
    assert check["images"] == 1 and check["broken"] == 1
    assert check["errors"] and "undefinedFn" in check["errors"][0]
    assert any("undefinedFn" in ln for ln in console)
    ncolors, non_white, console, _ = _screenshot(bad, tmp_path)
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
    ncolors, non_white, console, size = _screenshot(html_file, tmp_path)
    assert console == []
    assert size == (1280, 2400)
    assert ncolors > 50, "screenshot is (nearly) one colour"
    assert non_white > 0.03, "screenshot is blank"

    # 2. a copy with an error hook that writes into the DOM: every image decoded, no errors
    check, console = _in_page_check(html_file, tmp_path)
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
