"""`storlab sweep` end to end, in-process on the null backend: the table, JSON, CSV, the store, the
report, one-line errors, warnings summarised once, and Ctrl-C keeping the points done."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from storlab.cli.main import main

# one pass over 8 blocks of a 200 ms null device: IOPS doubles with qd up to 8, flat beyond. A
# loaded host wakes a point's worker late now and then (tens of ms); the knee at 75 % of the best
# sits between "doubled" and "flat", so such a delay cannot move it (the default 95 % could).
SATURATING = ["--size", "32k", "--bs", "4k", "--engine", "null", "--null-delay", "200ms", "--knee", "75"]


def sweep(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["sweep", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_table_has_swept_options_as_columns_and_marks_the_knee(shm_dir, capsys):
    rc, out, err = sweep(capsys, "--target", f"{shm_dir}/a.dat", *SATURATING, "--qd", "2,4,8,16",
                         "--no-store")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:6] == ["qd", "bw", "MiB/s", "IOPS", "mean", "us"]
    rows = {line.split()[0]: line for line in lines[1:5]}
    assert set(rows) == {"2", "4", "8", "16"}
    assert rows["8"].rstrip().endswith("knee") or "knee" in rows["8"]
    assert "knee" not in rows["4"] and "knee" not in rows["16"]
    assert "along qd: qd=8" in out
    assert "along qd (same request size): none" in out   # no latency climb on a device with 200 ms per request
    assert err.count("point ") == 4          # one progress line per point on standard error


def test_axes_follow_the_command_line_order_and_series_changes_it(shm_dir, capsys):
    common = ["--target", f"{shm_dir}/b.dat", "--size", "1m", "--engine", "null", "--time", "0.1s",
              "--no-store", "--json"]
    sweep(capsys, "--threads", "1,2", "--bs", "4k,8k", *common, f"{shm_dir}/o1.json")
    doc = json.load(open(f"{shm_dir}/o1.json"))
    assert [a["name"] for a in doc["axes"]] == ["threads", "bs"]
    assert [tuple(p["params"].values()) for p in doc["points"]] == [(1, 4096), (1, 8192), (2, 4096), (2, 8192)]
    sweep(capsys, "--threads", "1,2", "--bs", "4k,8k", "--series", "threads", *common, f"{shm_dir}/o2.json")
    doc = json.load(open(f"{shm_dir}/o2.json"))
    assert [a["name"] for a in doc["axes"]] == ["bs", "threads"]
    assert [p["params"]["threads"] for p in doc["points"]] == [1, 2, 1, 2]


def test_json_on_stdout_is_only_json_and_csv_goes_to_its_file(shm_dir, capsys, tmp_path):
    csv_path = tmp_path / "s.csv"
    rc, out, err = sweep(capsys, "--target", f"{shm_dir}/c.dat", *SATURATING, "--qd", "4,8,16",
                         "--json", "-", "--csv", str(csv_path), "--no-store")
    assert rc == 0
    doc = json.loads(out)
    assert doc["schema"] == "storlab.sweep/1" and doc["kind"] == "sweep"
    assert [a["name"] for a in doc["axes"]] == ["qd"] and doc["axes"][0]["values"] == [4, 8, 16]
    assert len(doc["runs"]) == 3 and all(r["kind"] == "run" for r in doc["runs"])
    assert doc["series"][0]["knee"]["value"] == 8
    assert "bw MiB/s" in err                  # the table went to standard error
    lines = csv_path.read_text().splitlines()
    assert lines[0].startswith("qd,run_id,status,bw_bytes,iops")
    assert [line.split(",")[0] for line in lines[1:]] == ["4", "8", "16"]
    assert lines[2].endswith("knee;best") or lines[2].endswith("knee")


def test_sweep_and_each_point_are_stored(shm_dir, capsys, private_store):
    rc, _, err = sweep(capsys, "--target", f"{shm_dir}/d.dat", *SATURATING, "--qd", "4,8",
                       "--tag", "nvme", "--note", "first try")
    assert rc == 0, err
    from storlab import store

    (s,) = store.list_runs(kind="sweep")
    assert s["tags"] == ["nvme"] and s["note"] == "first try" and s["rw"] == "read" and s["bs"] == 4096
    doc = store.load(s["run_id"])
    sweep_tag = f"sweep-{s['run_id'][:12]}"
    runs = store.list_runs(kind="run", tag=sweep_tag)
    assert sorted(r["run_id"] for r in runs) == sorted(p["run_id"] for p in doc["points"])
    # the user's tag is on the sweep only, so a report by tag does not show every run twice
    assert store.list_runs(tag="nvme") == [s]
    assert f"tagged {sweep_tag}" in err


def test_report_of_a_stored_sweep(shm_dir, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    rc, _, err = sweep(capsys, "--target", f"{shm_dir}/r.dat", *SATURATING, "--qd", "4,8", "-q")
    assert rc == 0, err
    from storlab import store

    (s,) = store.list_runs(kind="sweep")
    out = tmp_path / "r.html"
    assert main(["report", s["run_id"][:10], "-o", str(out)]) == 0
    html = out.read_text()
    assert "2 run(s) varying qd" in html


def test_report_plots_the_sweep_along_its_axis(shm_dir, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "s.json"
    sweep(capsys, "--target", f"{shm_dir}/e.dat", *SATURATING, "--qd", "2,4,8", "--json", str(out),
          "--no-store")
    from storlab.output.report import build_report, charts_for

    doc = json.loads(out.read_text())
    charts = charts_for([doc])
    assert any(c.title.startswith("Bandwidth and IOPS vs queue depth") for c in charts), [c.title for c in charts]
    assert "<html" in build_report([doc])


def test_warnings_of_the_points_are_summarised_once(shm_dir, capsys):
    rc, _, err = sweep(capsys, "--target", f"{shm_dir}/f.dat", *SATURATING, "--qd", "4,8,16", "--no-store")
    short = [line for line in err.splitlines() if "noisy" in line]
    assert len(short) == 1, err                        # each point's run was shorter than 1 s
    assert short[0].startswith("warning (every point; first at qd=4): ")


@pytest.mark.parametrize("args, words", [
    (["--bs", "4k,,1m"], ["bs", "empty value"]),
    (["--rw", "read,bogus"], ["rw", "'bogus'", "randread"]),
    (["--threads", "1,2", "--series", "qd"], ["series", "'qd'", "swept: threads"]),
    (["--threads", "2"], ["nothing to sweep", "comma-separated"]),
    (["--engine", "psync", "--qd", "1,2"], ["point qd=2", "asynchronous engine"]),
    (["--threads", "4,2,1", "--stop-flat", "5"], ["stop_flat", "ascending"]),
    (["--qd", "1,2", "--knee", "150"], ["knee", "out of range"]),
    (["--qd", "1,2", "--sweep", "direct"], ["sweep", "OPTION=V1,V2"]),
    (["--qd", "1,2", "--engine", "null", "--phase", "write"], ["phase", "'write'", "read"]),
    (["--qd", "1,2", "--engine", "null", "--json", "-", "--csv", "-"], ["csv", "standard output"]),
])
def test_bad_input_gives_one_line_naming_the_option_and_exit_2(args, words, capsys):
    rc, out, err = sweep(capsys, *args, "--no-store")
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("storlab sweep: error: "), err
    for w in words:
        assert w in lines[0], lines[0]


def test_on_off_options_sweep_with_sweep_flag(shm_dir, capsys, tmp_path):
    out = tmp_path / "d.json"
    rc, _, err = sweep(capsys, "--target", f"{shm_dir}/g.dat", "--size", "1m", "--time", "0.1s",
                       "--sweep", "direct=false,true", "--no-store", "--json", str(out), "-q")
    assert rc == 0, err
    doc = json.loads(out.read_text())
    assert [p["params"] for p in doc["points"]] == [{"direct": False}, {"direct": True}]
    assert [r["job"]["direct"] for r in doc["runs"]] == [False, True]
    assert doc["series"] == []          # on/off is not an ordered setting: no knee


def test_ctrl_c_stops_the_sweep_and_keeps_the_points_done(shm_dir, tmp_path):
    # a 1 s point, then a 60 s one: Ctrl-C goes in once the first point has reported (not after a
    # fixed sleep, which a loaded host can outrun), and must end the second long before its 60 s
    out, err_path = tmp_path / "partial.json", tmp_path / "err.txt"
    with open(err_path, "w") as err_file:
        proc = subprocess.Popen([sys.executable, "-m", "storlab", "sweep", "--target", f"{shm_dir}/i.dat",
                                 "--size", "1m", "--engine", "null", "--null-delay", "100us",
                                 "--time", "1s,60s", "--json", str(out), "--no-store"],
                                stdout=subprocess.PIPE, stderr=err_file, text=True)
    deadline = time.monotonic() + 120
    while "point 1/2" not in err_path.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, err_path.read_text()
        time.sleep(0.05)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    err = err_path.read_text()
    assert time.monotonic() - t0 < 30, "Ctrl-C must stop the sweep long before the point's 60 s are up"
    assert proc.returncode == 130, err
    assert "interrupted; the points done are kept" in err
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "interrupted"
    statuses = [p["status"] for p in doc["points"]]
    assert statuses == ["done", "interrupted"], statuses
    assert doc["runs"][0]["complete"] is True and doc["runs"][0]["phases"][0]["read"]["ops"] > 100


def test_docs_hold_the_generated_option_table():
    from pathlib import Path

    from storlab.measure.sweep import render_reference

    page = (Path(__file__).parent.parent / "docs" / "sweep.md").read_text()
    begin, end = "<!-- sweep-options:begin -->\n", "\n<!-- sweep-options:end -->"
    assert page[page.index(begin) + len(begin):page.index(end)] == render_reference()


def test_help_lists_the_sweep_options(capsys):
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    out = capsys.readouterr().out
    for flag in ("--stop-flat", "--stop-count", "--knee", "--climb", "--series", "--sweep", "--csv", "--bs"):
        assert flag in out
