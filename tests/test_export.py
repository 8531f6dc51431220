"""Tests of the exporters (table, JSON, CSV, Markdown) and of the run comparison."""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "results"))

import rundoc  # noqa: E402
from storlab.output import EXPORTERS, export, render_table, to_csv, to_json, to_markdown
from storlab.output.compare import compare, render_compare

MiB = 1 << 20


def cell(lines, row, header):
    """The number right-aligned under `header` in a rendered table."""
    end = lines[0].index(header) + len(header)
    return lines[row][:end].split()[-1]


def test_render_table_one_row_per_phase_and_direction_with_units_in_headers():
    doc = rundoc.make_run(rw="randrw", phases=["warm", "randrw"], bs=4096, seconds=2.0)
    lines = render_table(doc).splitlines()
    header = lines[0].split()
    assert header[:2] == ["phase", "dir"]
    for unit_header in ("MiB", "s", "IOPS", "MiB/s", "us"):
        assert unit_header in header
    assert [ln.split()[:2] for ln in lines[1:]] == [["warm", "read"], ["warm", "write"],
                                                    ["randrw", "read"], ["randrw", "write"]]
    # the bandwidth column shows bw_bytes in MiB/s, right-aligned under its header
    assert float(cell(lines, 1, "bw MiB/s")) == pytest.approx(
        doc["phases"][0]["read"]["bw_bytes"] / MiB, rel=0.01)


def test_render_table_latency_in_microseconds():
    doc = rundoc.make_run(lat_ns=2_000_000)
    p99_ns = doc["phases"][0]["read"]["lat_ns"]["p99"]
    lines = render_table(doc).splitlines()
    assert float(cell(lines, 1, "p99 us")) == pytest.approx(p99_ns / 1e3, rel=0.01)
    assert float(cell(lines, 1, "max us")) == pytest.approx(
        doc["phases"][0]["read"]["lat_ns"]["max"] / 1e3, rel=0.01)


def test_render_table_marks_incomplete_runs():
    text = render_table(rundoc.interrupted(rundoc.make_run()))
    assert "incomplete (interrupted)" in text.splitlines()[-1]
    assert "incomplete" not in render_table(rundoc.make_run())


def test_render_table_without_io():
    doc = rundoc.make_run()
    doc["phases"] = []
    assert render_table(doc) == "(no I/O was measured)"


def test_json_export_round_trips():
    docs = [rundoc.make_run(seed=1), rundoc.make_run(seed=2)]
    assert json.loads(to_json(docs[:1])) == docs[0]
    assert json.loads(to_json(docs)) == docs


def test_csv_export_has_canonical_units_and_full_precision():
    docs = rundoc.bs_sweep(sizes=(4096, 1 << 20))
    rows = list(csv.DictReader(io.StringIO(to_csv(docs))))
    assert len(rows) == 2
    assert {"bw_bytes", "lat_p99_ns", "bytes", "seconds", "iops", "run_id", "bs"} <= set(rows[0])
    assert rows[1]["bs"] == str(1 << 20)
    assert float(rows[0]["bw_bytes"]) == docs[0]["phases"][0]["read"]["bw_bytes"]
    assert rows[0]["run_id"] == docs[0]["run_id"]


def test_markdown_single_run_and_multi_run_tables():
    one = to_markdown([rundoc.make_run()])
    assert "| phase | dir |" in one and "|---:|" in one
    many = to_markdown(rundoc.bs_sweep(sizes=(4096, 65536)))
    header = many.splitlines()[0]
    assert "| bs |" in header                 # the option that differs is shown
    assert "| engine |" not in header         # the ones that do not are left out
    assert "4KiB" in many and "64KiB" in many


def test_markdown_expands_sweep_documents():
    sweep = {"schema": "storlab.sweep/1", "kind": "sweep", "runs": rundoc.bs_sweep(sizes=(4096, 8192))}
    assert len([ln for ln in to_markdown([sweep]).splitlines() if ln.startswith("| ")]) == 3


def test_export_rejects_unknown_format_naming_the_allowed_ones():
    with pytest.raises(ValueError, match="json, csv, md, openmetrics"):
        export([rundoc.make_run()], "xml")
    assert set(EXPORTERS) == {"json", "csv", "md", "openmetrics"}


def test_compare_ratios_against_the_first_run():
    a = rundoc.make_run(seed=1, iops=10000)
    b = rundoc.make_run(seed=2, iops=25000)
    cmp = compare([a, b])
    bw = next(r for r in cmp["rows"] if r["metric"] == "bw_bytes")
    assert bw["ratios"][0] == pytest.approx(2.5)
    assert cmp["incomparable"] == []
    assert cmp["job_differences"] == []
    text = render_compare(cmp)
    assert "2.50x" in text and "WARNING" not in text


def test_compare_flags_what_makes_runs_incomparable():
    a = rundoc.make_run(seed=1)
    b = rundoc.make_run(seed=2, kernel="6.1.0", engine="io_uring", direct=True)
    c = rundoc.make_run(seed=3, size=64 << 30, fs_type="xfs")          # larger than 24 GiB of RAM
    d = rundoc.interrupted(rundoc.make_run(seed=4, extra_job={"cache": "out"}))
    codes = {(i["code"], i["run"]) for i in compare([a, b, c, d])["incomparable"]}
    assert ("kernel", b["run_id"]) in codes
    assert ("engine", b["run_id"]) in codes
    assert ("direct", b["run_id"]) in codes
    assert ("size_vs_ram", c["run_id"]) in codes
    assert ("fs_type", c["run_id"]) in codes
    assert ("incomplete", d["run_id"]) in codes
    assert ("cache", d["run_id"]) in codes
    assert ("kernel", c["run_id"]) not in codes
    text = render_compare(compare([a, c]))
    assert "larger than RAM" in text and "size: 1 GiB | 64 GiB" in text


def test_compare_lists_job_differences_and_needs_two_runs():
    runs = rundoc.bs_sweep(sizes=(4096, 65536))
    diffs = compare(runs)["job_differences"]
    assert diffs == [{"option": "bs", "values": [4096, 65536]}]
    with pytest.raises(ValueError, match="at least two"):
        compare(runs[:1])


def test_compare_missing_phase_gives_no_ratio():
    a = rundoc.make_run(seed=1, phases=["randread", "extra"])
    b = rundoc.make_run(seed=2)
    rows = [r for r in compare([a, b])["rows"] if r["phase"] == "extra"]
    assert rows and all(r["ratios"] == [None] for r in rows)


# Real output of `storlab run --engine null --bs 4k|64k|1m --threads 2` (default scratch target),
# kept so the exporters follow what the engine writes, not only the hand-built fixtures.
ENGINE_SWEEP = Path(__file__).parent / "fixtures" / "results" / "engine-null-bs-sweep.json"


def test_engine_output_renders_and_compares_on_bs_only():
    docs = json.loads(ENGINE_SWEEP.read_text())
    for d in docs:
        lines = render_table(d).splitlines()
        assert len(lines) == 2 and lines[1].split()[:2] == ["randread", "read"]
    cmp = compare(docs)
    # the scratch directory differs every run and the job records its resolved phases:
    # neither is a difference between the runs
    assert [d["option"] for d in cmp["job_differences"]] == ["bs"]
    assert cmp["incomparable"] == []
    assert len(list(csv.DictReader(io.StringIO(to_csv(docs))))) == 3


def test_render_table_shows_metadata_runs_as_operations(shm_dir):
    from storlab.jobs.meta_options import resolve_meta_options
    from storlab.measure.meta import run_meta
    from storlab.output import render_table

    doc = run_meta(resolve_meta_options({"target": shm_dir, "files": "50", "no_store": True}, None, "job"))
    text = render_table(doc)
    assert "ops/s" in text and "create" in text and "no I/O was measured" not in text


def test_the_time_column_reads_alike_for_whole_and_fractional_seconds():
    # Regression: a phase of exactly 3 s printed "3" beside "3.00" in the same column.
    from storlab.output.base import RESULT_COLUMNS, human

    col = next(c for c in RESULT_COLUMNS if c.key == "seconds")
    assert [human(col, v) for v in (3.0, 3.0004, 0.5, 250.0)] == ["3.00", "3.00", "0.50", "250"]


def test_table_notes_say_the_request_sizes_steady_state_and_latency_target():
    from storlab.output.table import render_table

    phase = {"name": "mix", "complete": True,
             "read": {"sizes": [{"bs": 4096, "ops": 50, "share": 0.5}, {"bs": 1 << 20, "ops": 50, "share": 0.5}]},
             "steadystate": {"ss": "iops:1%", "duration_s": 10.0, "attained": True, "attained_at_s": 42.0,
                             "criterion": 0.5},
             "latency_target": {"found": True, "qd": 8, "percentile": 99.0, "target_s": 0.001, "iops": 1234.0,
                                "steps": [{"qd": 8, "held": True}, {"qd": 16, "held": False}]}}
    text = render_table({"kind": "run", "phases": [phase]})
    assert "mix: read request sizes: 4 KiB 50.0 %, 1 MiB 50.0 %" in text
    assert "mix: steady state iops:1% over 10 s: reached at 42 s, criterion 0.5" in text
    assert "mix: latency target: qd 8 holds p99 <= 1,000 us at 1,234 IOPS; depths tried 8, 16 (no)" in text
