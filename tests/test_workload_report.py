"""The report of workload results: AU over time, and AU against accelerators from a search."""
from __future__ import annotations

from storlab.jobs.workload import spec_from_table
from storlab.measure.workload import run_workload
from storlab.output.report import build_report, charts_for
from storlab.output.table import render_table


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
    text = render_table(doc)
    assert text.startswith("workload workload: 1 accelerator(s)") and "accelerator search: 2" in text
