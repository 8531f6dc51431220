"""The suite's own parts, without running fio: the strace reader, the result readers, the case
table's consistency with storlab's option table, and docs/fio.md being current."""
from __future__ import annotations

import pytest
from storlab.jobs.options import BY_NAME

from . import figures
from .cases import CASES, CHECKS
from .tools import Io, parse_strace_thread, read_fio, read_storlab, read_trace

TARGET = "/dev/shm/t/target"


def test_strace_thread_keeps_the_targets_io_in_order_and_fsyncs_after_the_first():
    text = "\n".join([
        f"fsync(3<{TARGET}>)                    = 0",                       # before any I/O: not the job's
        f'pread64(3<{TARGET}>, ""..., 4096, 8192) = 4096',
        'pread64(4</dev/shm/t/other>, ""..., 4096, 0) = 4096',
        f'pwrite64(3<{TARGET}>, ""..., 65536, 1048576) = 65536',
        f"fdatasync(3<{TARGET}>)                = 0",
        f"fsync(3<{TARGET}>)                    = 0",
    ])
    ios, fsyncs = parse_strace_thread(text, TARGET)
    assert ios == [Io(False, 8192, 4096), Io(True, 1048576, 65536)]
    assert fsyncs == 2


def test_strace_thread_that_called_execve_did_no_job_io():
    text = "\n".join(['execve("/usr/bin/storlab", ["storlab"], 0x7ffd /* 20 vars */) = 0',
                      f'pread64(3<{TARGET}>, ""..., 131072, 0) = 131072'])
    assert parse_strace_thread(text, TARGET) == ([], 0)


def test_strace_short_io_is_an_error_naming_the_call():
    with pytest.raises(ValueError, match="short or failed I/O"):
        parse_strace_thread(f'pread64(3<{TARGET}>, ""..., 4096, 0) = 512', TARGET)


def test_trace_files_per_thread_keep_only_threads_with_io(tmp_path):
    prefix = str(tmp_path / "s")
    (tmp_path / "s.100").write_text('execve("/usr/bin/fio", ["fio"], 0x1 /* 1 var */) = 0\n')
    (tmp_path / "s.102").write_text(f'pwrite64(5<{TARGET}>, ""..., 4096, 4096) = 4096\n'
                                    f"fsync(5<{TARGET}>) = 0\n")
    (tmp_path / "s.101").write_text(f'pwrite64(5<{TARGET}>, ""..., 4096, 0) = 4096\n')
    trace = read_trace(prefix, TARGET)
    assert trace.threads == [[Io(True, 0, 4096)], [Io(True, 4096, 4096)]]
    assert trace.fsyncs == 1


def _lat(mean):
    return {"min": mean, "max": mean, "mean": mean, "N": 2}


def test_fio_jobs_are_summed_per_direction_and_sync_read():
    job = {"read": {"io_bytes": 8192, "total_ios": 2, "bw_bytes": 100,
                    "slat_ns": _lat(0), "clat_ns": _lat(10), "lat_ns": _lat(10)},
           "write": {"io_bytes": 0, "total_ios": 0, "bw_bytes": 0},
           "sync": {"total_ios": 3}}
    run = read_fio({"jobs": [job, job]})
    assert (run.direction("read").bytes, run.direction("read").ops, run.direction("read").bw_bytes) == (16384, 4, 200)
    assert run.direction("write").ops == 0 and run.sync_ops == 6
    assert run.direction("read").lat_ns["clat"]["mean"] == 10


def test_storlab_incomplete_run_is_a_tool_failure():
    from .tools import ToolFailed

    with pytest.raises(ToolFailed, match="did not complete: error: boom"):
        read_storlab({"complete": False, "stop_reason": "error", "error": "boom", "phases": []})


def test_case_table_is_consistent():
    names = [c.name for c in CASES]
    assert len(set(names)) == len(names), "case names must be unique"
    for c in CASES:
        assert c.checks and c.checks <= set(CHECKS), f"{c.name}: unknown check in {sorted(c.checks)}"
        assert c.io_bytes % c.bs == 0 and c.range_bytes % c.bs == 0, f"{c.name}: sizes not multiples of bs"
        assert c.range_start + c.range_bytes <= c.target_bytes, f"{c.name}: range beyond the target"
        for arg in c.storlab:
            if arg.startswith("--"):
                name = arg[2:].replace("-", "_")
                known = name in BY_NAME or any(o.negative == arg for o in BY_NAME.values())
                assert known, f"{c.name}: storlab has no option {arg}"
        assert all("=" in a for a in c.fio), f"{c.name}: fio options are name=value"


def test_fio_doc_is_current():
    text = figures.DOC.read_text()
    assert figures.updated(text) == text, \
        "docs/fio.md is out of date: run `PYTHONPATH=python python3 -m tests.conformance.figures --write`"


def test_every_figure_names_known_checks():
    for f in figures.FIGURES:
        assert set(f.checks) <= set(CHECKS), f"{f.figure}: unknown check"
        if f.checks:
            assert f.cases(), f"{f.figure}: no case holds storlab to it"
