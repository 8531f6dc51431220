"""The report of workload results: AU over time, AU against accelerators from a search, and
DLIO's evaluation apart from training (a real run on tmpfs: its time series, the store, results
show, the HTML report, and, marked `browser`, the page in headless Chromium)."""
from __future__ import annotations

import pytest
from browser import needs_chromium
from storlab.jobs.tomlfile import tomllib
from storlab.jobs.workload import spec_from_table
from storlab.output import render_table
from storlab.output.report import build_report, charts_for, write_report
from storlab.suites.training.workload import run_workload


def test_report_charts_au_over_time_and_against_accelerators(tmp_path):
    spec = spec_from_table({"dataset": {"folder": str(tmp_path / "d"), "files": 8, "record_length": 4096},
                            "reader": {"batch_size": 2}, "train": {"computation_time": 0.002}})
    doc = run_workload(spec, argv=["test"])
    doc["search"] = {"trials": [{"accelerators": 1, "au": 0.99}, {"accelerators": 2, "au": 0.95},
                                {"accelerators": 4, "au": 0.6}], "max_accelerators": 2}
    names = [c.name for c in charts_for([doc])]
    assert names == ["workload-au-time", "workload-au-accelerators"]
    html = build_report([doc])
    assert "AU over time" in html and "AU against accelerators" in html
    # the title says what the report is on (it said "0 run(s)" for workload runs)
    assert "<h1>storlab report: 1 workload run(s)</h1>" in html and "0 run(s)" not in html
    text = render_table(doc)
    assert text.startswith("workload workload: 1 accelerator(s)") and "accelerator search: 2" in text


EVAL_TOML = """[workload]
name = "evalrun"
[dataset]
folder = "{folder}"
files = 8
eval_files = 8
record_length = 4096
[reader]
batch_size = 2
[train]
epochs = 3
computation_time = 0.02
[evaluation]
enabled = true
batch_size = 2
computation_time = 0.05
after_epoch = 2
"""


def eval_job(folder: str, tmp_path) -> str:
    """One accelerator, 4 training steps of 20 ms per epoch for 3 epochs, and after epochs 2 and 3 an
    evaluation of 4 steps of 50 ms (8 eval files, batch 2): well under a second on tmpfs."""
    path = tmp_path / "eval.toml"
    path.write_text(EVAL_TOML.format(folder=f"{folder}/data"))
    return str(path)


def test_a_real_run_records_evaluation_apart_in_the_series_the_store_and_the_report(shm_dir, tmp_path, capsys,
                                                                                      private_store):
    from storlab import store
    from storlab.cli.main import main

    assert main(["workload", eval_job(shm_dir, tmp_path), "--tag", "evalfig"]) == 0
    capsys.readouterr()
    (run_id,) = [r["run_id"] for r in store.list_runs(private_store)]
    doc = store.load(run_id, private_store)
    ts = doc["timeseries"]
    n_bins = len(ts["t_s"])
    assert len(ts["eval_au"]) == len(ts["eval_samples_per_s"]) == len(ts["phase"]) == n_bins
    # the series split the steps: training's 3 x 4 steps of 20 ms and 24 samples in `au` and
    # `samples_per_s`, evaluation's 2 x 4 steps of 50 ms and 16 samples in their own series only
    dt = ts["interval_s"]
    assert sum(ts["au"]) * dt == pytest.approx(12 * 0.02, abs=0.002)
    assert sum(ts["eval_au"]) * dt == pytest.approx(8 * 0.05, abs=0.002)
    assert sum(ts["samples_per_s"]) * dt == pytest.approx(24, abs=0.01)
    assert sum(ts["eval_samples_per_s"]) * dt == pytest.approx(16, abs=0.01)
    assert "evaluation" in ts["phase"] and "training" in ts["phase"]     # intervals of one phase alone
    for k, phase in enumerate(ts["phase"]):
        assert ("training" in phase) == (ts["samples_per_s"][k] > 0)
        assert ("evaluation" in phase) == (ts["eval_samples_per_s"][k] > 0)
    # per-epoch rows: training epochs and evaluations, each labelled, evaluations placed in time
    assert [e["phase"] for e in doc["epochs"]] == ["training"] * 3
    evals = doc["evaluation"]["evaluations"]
    assert [(e["phase"], e["epoch"], e["steps"]) for e in evals] == [("evaluation", 2, 4), ("evaluation", 3, 4)]
    assert 0 < evals[0]["start_s"] < evals[0]["end_s"] <= evals[1]["start_s"] < evals[1]["end_s"] <= doc["seconds"] + 0.01
    assert evals[0]["mib_per_s"] == pytest.approx(evals[0]["samples_per_s"] * 4096 / 2**20)
    # results show lists each evaluation beside the training epochs
    assert main(["results", "show", run_id]) == 0
    shown = capsys.readouterr().out
    assert "evaluation (apart from training" in shown and "eval after epoch" in shown
    # the report: evaluation's AU, samples/s, MiB/s and seconds beside training's, and in the chart
    html_file = tmp_path / "r.html"
    assert main(["report", run_id, "-o", str(html_file)]) == 0
    html = html_file.read_text()
    section = html[html.index("<h2>Training workloads</h2>"):html.index("<h2>Other documents</h2>")]
    assert "<td>training</td>" in section and "<td>evaluation</td>" in section
    ev = doc["evaluation"]
    assert f"{100 * ev['au']:.2f} %" in section and f"{ev['samples_per_s']:,.2f}" in section
    assert f"{ev['mib_per_s']:,.2f}" in section and f"{evals[1]['seconds']:,.3f}" in section
    assert "Evaluations (DLIO's eval" in section
    assert "evaluation steps (dotted, shaded spans)" in html


def test_a_run_without_evaluation_reports_none(tmp_path):
    spec = spec_from_table({"dataset": {"folder": str(tmp_path / "d"), "files": 8, "record_length": 4096},
                            "reader": {"batch_size": 2}, "train": {"computation_time": 0.002}})
    doc = run_workload(spec, argv=["test"])
    assert not {"eval_au", "eval_samples_per_s", "phase"} & set(doc["timeseries"]) and "evaluation" not in doc
    html = build_report([doc])
    section = html[html.index("<h2>Training workloads</h2>"):html.index("<h2>Other documents</h2>")]
    assert "<td>training</td>" in section and "<td>evaluation</td>" not in section
    assert "Evaluations (DLIO" not in html and "evaluation steps (dotted" not in html


@pytest.mark.browser
@needs_chromium
def test_the_report_of_an_evaluating_run_renders_in_headless_chromium(shm_dir, tmp_path):
    from browser import in_page_check, screenshot
    spec = spec_from_table(tomllib.loads(EVAL_TOML.format(folder=f"{shm_dir}/data")))
    doc = run_workload(spec, argv=["test"])
    html_file = tmp_path / "report.html"
    write_report([doc], html_file)
    ncolors, non_white, console, _ = screenshot(html_file, tmp_path)
    assert console == [] and ncolors > 50 and non_white > 0.03
    check, console = in_page_check(html_file, tmp_path)
    assert check["images"] == 1 and check["broken"] == 0 and check["errors"] == [] and console == []
