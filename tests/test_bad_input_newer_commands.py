"""Regression tests for bad input to the newer commands (issue 39): fio command lines, DLIO
workload files, io500 .ini files and model profiles. Each is named after what broke and checks one
error line, exit 2, no traceback, and that the refusal comes before any work (within a second).
"""
from __future__ import annotations

import time

import pytest
from storlab.cli.main import ExitCode, main
from storlab.jobs.io500.ini import parse_ini


def refused(capsys, command: str, *argv: str) -> str:
    """Run the CLI in-process; the one error line (exit 2, within a second, no traceback)."""
    t0 = time.monotonic()
    rc = main([command, *argv])
    seconds = time.monotonic() - t0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "panicked" not in err, err
    assert rc == ExitCode.USAGE, err
    lines = [line for line in err.splitlines() if line.startswith(f"storlab {command.split()[0]}: error: ")]
    assert len(lines) == 1, err
    assert seconds < 1.0, f"refused after {seconds:.1f} s: the bound was checked after work was done"
    return lines[0]


def test_fio_numjobs_beyond_the_thread_bound_is_refused_before_the_clones_are_made(capsys, tmp_path):
    # numjobs=10000000 took 38 s to be refused, numjobs=99999999 ran for minutes: the clones were
    # expanded before the thread bound was checked
    for n in ("10000000", "99999999"):
        line = refused(capsys, "fio", "--parse-only", "--name=j", f"--filename={tmp_path / 'F'}", "--size=1m",
                       f"--numjobs={n}")
        assert "numjobs" in line and line.endswith(f"threads: {n} is out of range; allowed: >= 1 and <= 4096")
    assert not (tmp_path / "F").exists()


@pytest.mark.parametrize("depth", ["nan", "inf", "1e999", "-1", ""])
def test_fio_iodepth_that_is_not_a_number_is_refused_with_psync_too(capsys, tmp_path, depth):
    # --iodepth=nan became qd = 1 with exit 0 (psync never read the value; fio itself refuses it)
    line = refused(capsys, "fio", "--parse-only", "--name=j", f"--filename={tmp_path / 'F'}", "--size=1m",
                   f"--iodepth={depth}")
    assert "iodepth" in line


@pytest.mark.parametrize("text", ["", "# only a comment\n", "\n\n"])
def test_an_empty_dlio_workload_file_is_refused_instead_of_running_as_defaults(capsys, tmp_path, text):
    path = tmp_path / "w.yaml"
    path.write_text(text)
    line = refused(capsys, "workload", str(path), "--emit", str(tmp_path / "out.toml"))
    assert "w.yaml" in line and "no workload keys" in line
    assert not (tmp_path / "out.toml").exists()


def test_a_key_repeated_in_an_io500_section_says_which_value_io500_keeps():
    # a duplicate key silently took the last value; io500 keeps the last too (ini-parse.c assigns
    # each line over the one before), and now the translation says so
    ini = parse_ini("[global]\ndatadir = /a\n[debug]\nstonewall-time = 5\nstonewall-time = 7\nstonewall-time = 9\n")
    assert ini.get("debug", "stonewall-time") == 9
    assert ini.repeat_notes() == ["[debug] stonewall-time is set on lines 4, 5, 6: io500 keeps the last, '9' (line 6)"]
    assert parse_ini("[global]\ndatadir = /a\n").repeat_notes() == []


@pytest.mark.parametrize("content, says", [
    (b"not json", "not a profile: not JSON at line 1, column 1"),
    (b"\xff\xfe{}", "not a profile: not UTF-8 text (byte 0)"),
])
def test_a_profile_that_is_not_json_or_not_utf8_says_so_without_python_exception_text(capsys, tmp_path,
                                                                                       content, says):
    path = tmp_path / "p.json"
    path.write_bytes(content)
    line = refused(capsys, "plan", "perf", "R5/4", "--profile", str(path))
    assert line.endswith(f"{path}: {says}"), line
    assert "codec" not in line and "Expecting value" not in line


def test_a_profile_path_that_exists_but_is_no_file_is_not_called_missing(capsys):
    # `plan perf --profile /dev/zero` said "no such profile file" for a path that exists
    line = refused(capsys, "plan", "perf", "R5/4", "--profile", "/dev/zero")
    assert "/dev/zero: not a regular file" in line and "no such" not in line


def test_plan_profile_of_a_character_device_names_no_flag_it_does_not_take(capsys):
    # `plan profile /dev/zero` said "use --buffered", a flag plan profile does not have
    line = refused(capsys, "plan", "profile", "/dev/zero")
    assert "/dev/zero is not a block device or a regular file" in line and "--buffered" not in line
