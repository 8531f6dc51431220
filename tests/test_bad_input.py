"""Regression tests for bad input that once gave tracebacks, Rust panics or runaway memory (issue 13):
output destinations, job files, wrongly typed TOML, huge and non-finite numbers, planner inputs.
Each test is named after what broke; each checks for a one-line error and a documented exit code.
"""
from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import time

import pytest
from storlab import _core, units
from storlab.cli.main import ExitCode, main
from storlab.jobs.meta_options import META_OPTIONS
from storlab.jobs.options import OPTIONS, OptionError, parse_option
from storlab.measure.sweep import SWEEP_OPTIONS

NUMERIC_KINDS = {"int", "float", "percent", "size", "duration", "rate"}


def run(capsys, *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err and "panicked" not in err, err
    return rc, err


def one_error_line(err: str, command: str = "run") -> str:
    lines = [line for line in err.splitlines() if line.startswith(f"storlab {command}: error: ")]
    assert len(lines) == 1, err
    return lines[0]


def tiny(tmp_path, *extra: str) -> list[str]:
    return ["run", "--engine", "null", "--target", str(tmp_path / "t.dat"), "--size", "64k", "-q", *extra]


def stored_runs(store_path) -> int:
    if not os.path.exists(store_path):
        return 0
    with sqlite3.connect(store_path) as db:
        return db.execute("select count(*) from runs").fetchone()[0]


# --- output destinations -------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["a directory", "a missing folder", "a pseudo file system"])
def test_bad_json_destination_is_refused_before_the_run(tmp_path, capsys, private_store, where):
    dest = {"a directory": str(tmp_path), "a missing folder": str(tmp_path / "missing" / "r.json"),
            "a pseudo file system": "/proc/storlab-r.json"}[where]
    rc, err = run(capsys, *tiny(tmp_path, "--json", dest))
    assert rc == ExitCode.USAGE
    assert "json:" in one_error_line(err)
    assert not (tmp_path / "t.dat").exists(), "the run started although its output could not be written"
    assert stored_runs(private_store) == 0


def test_read_only_json_destination_is_refused_before_the_run(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    if os.access(ro, os.W_OK) and os.geteuid() == 0:
        # root passes permission bits: a read-only bind mount is the read-only place root cannot write
        import subprocess

        if subprocess.run(["mount", "--bind", "-o", "ro", str(ro), str(ro)], capture_output=True).returncode:
            pytest.skip("root ignores permission bits and a read-only bind mount is not possible here")
        try:
            rc, err = run(capsys, *tiny(tmp_path, "--json", str(ro / "r.json")))
        finally:
            subprocess.run(["umount", str(ro)], capture_output=True)
    else:
        rc, err = run(capsys, *tiny(tmp_path, "--json", str(ro / "r.json")))
    assert rc == ExitCode.USAGE
    assert "json:" in one_error_line(err) and "r.json" in err


def test_json_write_failing_after_the_run_still_stores_the_result(tmp_path, capsys, private_store, monkeypatch):
    """The check before the run is skipped here, as if the folder vanished during the run."""
    import storlab.output.emit as emit

    monkeypatch.setattr(emit, "check_destination", lambda *a, **k: None)
    rc, err = run(capsys, *tiny(tmp_path, "--json", str(tmp_path / "gone" / "r.json")))
    assert rc == ExitCode.FAILURE
    assert "gone" in one_error_line(err)
    assert stored_runs(private_store) == 1


def test_sweep_csv_into_a_directory_is_refused_before_the_sweep(tmp_path, capsys, private_store):
    rc, err = run(capsys, "sweep", "--engine", "null", "--target", str(tmp_path / "t.dat"), "--size", "64k",
                  "--bs", "4k,8k", "-q", "--csv", str(tmp_path))
    assert rc == ExitCode.USAGE and "csv:" in one_error_line(err, "sweep")
    assert stored_runs(private_store) == 0


def test_plan_script_output_into_a_missing_folder_is_one_line(tmp_path, capsys):
    rc, err = run(capsys, "plan", "script", "R6/8", "-o", str(tmp_path / "missing" / "build.sh"))
    assert rc == ExitCode.USAGE and "output:" in one_error_line(err, "plan")


def test_json_to_dev_null_and_stdout_still_work(tmp_path, capsys):
    assert main(tiny(tmp_path, "--json", os.devnull, "--no-store")) == ExitCode.OK
    assert main(tiny(tmp_path, "--json", "-", "--no-store")) == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["kind"] == "run"


# --- job files -----------------------------------------------------------------------------------

def test_job_file_that_is_a_directory_is_one_line(tmp_path, capsys):
    rc, err = run(capsys, "run", str(tmp_path))
    assert rc == ExitCode.USAGE and "a directory" in one_error_line(err)


def test_job_file_that_cannot_be_read_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    rc, err = run(capsys, "run", str(blocker / "job.toml"))   # ENOTDIR: a file is in the way
    assert rc == ExitCode.USAGE and "job.toml" in one_error_line(err)


def test_job_file_that_is_binary_is_one_line(tmp_path, capsys):
    job = tmp_path / "job.toml"
    job.write_bytes(b"\x00\xff\xfe\x80binary")
    rc, err = run(capsys, "run", str(job))
    assert rc == ExitCode.USAGE and "not a text file" in one_error_line(err)


def test_job_file_that_is_a_fifo_is_refused_without_waiting(tmp_path, capsys):
    fifo = tmp_path / "job.toml"
    os.mkfifo(fifo)
    rc, err = run(capsys, "run", str(fifo))
    assert rc == ExitCode.USAGE and "not a regular file" in one_error_line(err)


@pytest.mark.parametrize("text, field", [
    pytest.param("tag = 5\n", "tag", id="tag-is-a-number"),
    pytest.param("[[phase]]\nrw = 'read'\n[phase.group]\nrw = 'read'\n", "group", id="phase-group-is-a-table"),
    pytest.param("[[phase]]\ngroup = 5\n", "group", id="phase-group-is-a-number"),
    pytest.param("[[phase]]\noptions = 5\n", "table of options", id="phase-options-is-a-number"),
    pytest.param("qd = inf\n", "qd", id="qd-is-infinite"),
])
def test_job_file_with_wrong_types_is_one_line(tmp_path, capsys, text, field):
    job = tmp_path / "job.toml"
    job.write_text(text)
    rc, err = run(capsys, *tiny(tmp_path), str(job))
    assert rc == ExitCode.USAGE and field in one_error_line(err)


# --- numbers -------------------------------------------------------------------------------------

@pytest.mark.parametrize("flag, value", [("--time", "18446744073709551616s"),
                                         ("--start-delay", "9223372036854775807"),
                                         ("--ramp", "99999999999999999999999"), ("--stall-after", "99999999999d"),
                                         ("--null-delay", "315360001")])
def test_huge_duration_is_refused_not_a_rust_panic(tmp_path, capsys, flag, value):
    rc, err = run(capsys, *tiny(tmp_path, flag, value))
    assert rc == ExitCode.USAGE
    assert flag.lstrip("-").replace("-", "_") in one_error_line(err)


@pytest.mark.parametrize("field, value", [("time", 1.8446744073709552e19), ("start_delay", 9.223372036854776e18),
                                          ("ramp", 1e300), ("stall_after", 4e8), ("null_delay", 1e20)])
def test_engine_refuses_huge_durations_it_is_handed_directly(field, value):
    """The engine's own validation, without the Python table in front: an error, never a panic."""
    from storlab.jobs.job import core_spec, resolve_job

    job = resolve_job({"target": ["/tmp/never-opened"], "engine": "null"})
    spec = core_spec(job.phases[0])
    spec["groups"][0][field] = value
    with pytest.raises(_core.CoreError, match=field):
        _core.validate_spec(json.dumps(spec))


@pytest.mark.parametrize("flag", ["--cache-in-pct", "--pass-spread"])
def test_nan_is_refused_for_cache_in_pct_and_pass_spread(tmp_path, capsys, flag):
    rc, err = run(capsys, *tiny(tmp_path, flag, "nan", "--cache", "in" if flag == "--cache-in-pct" else "off"))
    assert rc == ExitCode.USAGE
    assert flag.lstrip("-").replace("-", "_") in one_error_line(err)


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e999", float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_are_refused_for_every_numeric_option(value):
    for table in (OPTIONS, META_OPTIONS, SWEEP_OPTIONS):
        for o in table:
            if o.kind in NUMERIC_KINDS:
                with pytest.raises(OptionError, match=re.escape(o.name)):
                    parse_option(o, value)


def test_every_numeric_option_has_bounds():
    for table in (OPTIONS, META_OPTIONS, SWEEP_OPTIONS):
        for o in table:
            if o.kind in NUMERIC_KINDS:
                assert o.minimum is not None and o.upper is not None and math.isfinite(o.upper), o.name


def test_size_and_duration_bounds_are_the_engines():
    assert units.MAX_BYTES == _core.MAX_BYTES
    assert units.MAX_DURATION_S == _core.MAX_DURATION_S


def test_sizes_above_2_to_the_53_stay_exact():
    assert units.parse_size("9007199254740993") == 2**53 + 1
    assert units.parse_size("1.5k") == 1536
    with pytest.raises(units.UnitError, match="too large"):
        units.parse_size("2048PiB")


@pytest.mark.parametrize("flag, toml, fio, message", [
    ("--bs=2g", 'bs = "2g"', "bs=2g", "bs: 2 GiB is out of range; allowed: >= 1 byte and <= 1 GiB"),
    ("--threads=5000", "threads = 5000", "numjobs=5000", "threads: 5000 is out of range; allowed: >= 1 and <= 4096"),
    ("--qd=70000", "qd = 70000", "iodepth=70000", "qd: 70000 is out of range; allowed: >= 1 and <= 65536"),
    ("--ramp=400000000", "ramp = 400000000", "ramp_time=400000000",
     "ramp: 400000000 s is out of range; allowed: >= 0 s and <= 10 years"),
])
def test_a_bad_value_reads_the_same_from_a_flag_a_job_file_and_an_fio_job_file(tmp_path, capsys, flag, toml, fio, message):
    """The engine checks every value of an engine option (storlab._core.check_option): one message,
    whichever way the value came in."""
    target = str(tmp_path / "t.dat")
    (tmp_path / "job.toml").write_text(f'{toml}\nengine = "null"\n')
    (tmp_path / "job.fio").write_text(f"[j]\nioengine=null\nfilename={target}\nsize=64k\n{fio}\n")
    lines = []
    for extra in ([flag], [str(tmp_path / "job.toml")], ["--fio", str(tmp_path / "job.fio")]):
        rc, err = run(capsys, *tiny(tmp_path, *extra))
        assert rc == ExitCode.USAGE
        lines.append(one_error_line(err))
    assert all(line.endswith(message) for line in lines), lines
    assert not os.path.exists(target)


def test_every_engine_error_kind_maps_to_its_own_storlab_error():
    """Error kinds cross the boundary by name (ErrorKind::as_str); an unmapped kind would become the
    bare base class and lose its exit code."""
    from storlab.errors import StorlabError, from_core

    kinds = _core.error_kinds()
    assert {"spec", "target", "alignment", "io", "engine", "interrupted"} <= set(kinds)
    for kind in kinds:
        e = from_core(kind, f"{kind}: message")
        assert isinstance(e, StorlabError) and type(e) is not StorlabError, kind
        assert str(e) == f"{kind}: message"
    with pytest.raises(_core.CoreError) as e:
        _core.validate_spec("{}")
    assert e.value.args[0] == "spec" and type(from_core(*e.value.args)).__name__ == "SpecError"


# --- planner -------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["plan", "perf", "R6/99999999999999999999"],
    ["plan", "geometry", "R6/99999999999999999999"],
    ["plan", "perf", "R6/8", "--request", "9223372036854775807"],
    ["plan", "geometry", "R6/8", "--request", "9223372036854775807"],
    ["plan", "geometry", "R6/8", "--request", "200GiB", "--pattern", "random:4k"],
    ["plan", "reliability", "R1/100000", "--mttr", "24h"],
    ["plan", "geometry", "R6/8", "--count", "999999999999"],
    ["plan", "recommend", "--drives", "999999999"],
    ["plan", "recommend", "--drives", "24", "--max-annual-loss", "nan"],
])
def test_huge_planner_input_is_refused_within_a_second(capsys, argv):
    started = time.monotonic()
    rc, err = run(capsys, *argv)
    assert time.monotonic() - started < 1.0
    assert rc == ExitCode.USAGE
    one_error_line(err, "plan")


def test_wide_mirror_with_slow_rebuild_has_an_mttdl_not_a_division_by_zero(capsys):
    rc = main(["plan", "reliability", "R1/64", "--rebuild-rate", "1", "--json"])
    assert rc == ExitCode.OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["group"]["mttdl_approx_h"] is None or doc["group"]["mttdl_approx_h"] > 0


def test_stack_file_that_is_a_directory_is_one_line(tmp_path, capsys):
    rc, err = run(capsys, "plan", "geometry", str(tmp_path))
    assert rc == ExitCode.USAGE and "a directory" in one_error_line(err, "plan")


@pytest.mark.parametrize("kind", ["binary", "fifo"])
def test_fio_job_file_that_is_binary_or_a_fifo_is_one_line(tmp_path, capsys, kind):
    path = tmp_path / "job.fio"
    if kind == "fifo":
        os.mkfifo(path)           # once read until a writer came: the command hung
    else:
        path.write_bytes(b"[job]\n\xff\xfe")
    rc, err = run(capsys, *tiny(tmp_path, "--fio", str(path)))
    assert rc == ExitCode.USAGE and "fio job file" in one_error_line(err)
