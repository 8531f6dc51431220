"""Merging ranks whose wall clocks differ: each rank's offset to rank 0 is measured by ping-pong at
start (measure/mpi/clock.py) and applied before any time of one rank is set against another's, so a
rank whose clock runs 30 s ahead leaves the merged window where it was. Checked on the merge with
exchanges computed from a shifted clock, and for real under mpiexec with one rank's clock shifted
by a small LD_PRELOAD library (built here) and named as a node of its own."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from storlab.measure.aggregate import merge_phase
from storlab.measure.mpi.clock import ClockSample, node_offsets
from test_mpi_runs import MPIEXEC, _have_mpi4py

SHIFT_S = 30.0
T = 1_795_858_900.0     # the true moment both ranks' phases start


def rank_result(start_unix_s: float, offset_s: float, first_end_s: float) -> dict:
    """One rank's phase as the runner reports it: two workers, times after its own start."""
    workers = [{"id": i, "target": f"/dev/shm/f{i}", "start_s": 0.001 * i, "end_s": first_end_s + 0.01 * i,
                "read_bytes": 1 << 20, "write_bytes": 0, "read_ops": 256, "write_ops": 0} for i in range(2)]
    return {"name": "randread", "complete": True, "stop_reason": "done", "error": None, "seconds": 2.0,
            "ramp_s": 0.0, "start_unix_s": start_unix_s, "offset_s": offset_s, "workers": workers}


def ping_pong(shift_s: float, rounds: int = 4) -> list[ClockSample]:
    """Exchanges of a rank whose clock reads true time + shift_s with rank 0 (true time): each
    request and answer takes 50 us, the later rounds less."""
    out = []
    for k in range(rounds):
        sent = T - 5.0 + k
        one_way = 50e-6 / (k + 1)
        out.append(ClockSample(sent + shift_s, sent + one_way, sent + 2 * one_way + shift_s))
    return out


def test_a_rank_thirty_seconds_ahead_leaves_the_merged_window_unchanged():
    offsets = node_offsets([[], ping_pong(SHIFT_S)], ["n0", "n1"])
    assert offsets[1].offset_s == pytest.approx(-SHIFT_S, abs=1e-9)
    true = merge_phase([rank_result(T, 0.0, 2.0), rank_result(T + 0.002, 0.0, 2.1)], None, ["n0", "n1"])
    shifted = merge_phase([rank_result(T, 0.0, 2.0),
                           rank_result(T + 0.002 + SHIFT_S, offsets[1].offset_s, 2.1)], None, ["n0", "n1"])
    for key in ("deskew_window_s", "first_done_s", "last_done_s", "first_start_s", "last_start_s"):
        assert shifted["aggregate"][key] == pytest.approx(true["aggregate"][key], abs=1e-6), key
    assert shifted["mpi"]["start_skew_s"] == pytest.approx(0.002, abs=1e-6)
    assert shifted["mpi"]["first_done"] == true["mpi"]["first_done"]
    assert shifted["mpi"]["last_done"] == true["mpi"]["last_done"]
    # what the measured offset prevents: the raw wall clocks put rank 1 after rank 0 had finished
    raw = merge_phase([rank_result(T, 0.0, 2.0), rank_result(T + 0.002 + SHIFT_S, 0.0, 2.1)], None, ["n0", "n1"])
    assert raw["aggregate"]["deskew_window_s"] is None and raw["mpi"]["start_skew_s"] > SHIFT_S - 1


# A process whose wall clock runs SHIFT_REALTIME_S ahead: clock_gettime(CLOCK_REALTIME),
# gettimeofday and time shifted for every caller in it (Python's time.time and the engine's
# SystemTime alike); the monotonic clock, sleeps and timed waits untouched. (libfaketime does the
# same but, as packaged in Debian 12, breaks Python's sleeps or timed waits on either setting of
# FAKETIME_DONT_FAKE_MONOTONIC.)
SHIFT_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long shift_s(void) { const char *v = getenv("SHIFT_REALTIME_S"); return v ? atol(v) : 0; }

int clock_gettime(clockid_t id, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = dlsym(RTLD_NEXT, "clock_gettime");
    int r = real(id, ts);
    if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) ts->tv_sec += shift_s();
    return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
    static int (*real)(struct timeval *, void *);
    if (!real) real = dlsym(RTLD_NEXT, "gettimeofday");
    int r = real(tv, tz);
    if (r == 0 && tv) tv->tv_sec += shift_s();
    return r;
}

time_t time(time_t *t) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t) *t = ts.tv_sec;
    return ts.tv_sec;
}
"""
CC = shutil.which("cc") or shutil.which("gcc")


@pytest.fixture
def clock_ahead(tmp_path) -> str:
    """The shared library that shifts a process's wall clock (SHIFT_SOURCE), built here."""
    src, lib = tmp_path / "shift.c", tmp_path / "libshift.so"
    src.write_text(SHIFT_SOURCE)
    subprocess.run([CC, "-shared", "-fPIC", "-O2", "-o", str(lib), str(src), "-ldl"], check=True,
                   capture_output=True, timeout=60)
    check = subprocess.run([sys.executable, "-c", "import time; print(time.time())"], capture_output=True,
                           text=True, env={**os.environ, "LD_PRELOAD": str(lib), "SHIFT_REALTIME_S": "30"})
    assert float(check.stdout) - time.time() == pytest.approx(SHIFT_S, abs=5)
    return str(lib)


@pytest.mark.mpi
@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich, or a site MPI on PATH)")
@pytest.mark.skipif(not _have_mpi4py(), reason="mpi4py not installed (pip install 'storlab[mpi]')")
@pytest.mark.skipif(CC is None, reason="no C compiler (cc) to build the clock-shifting library")
def test_under_mpiexec_a_rank_whose_clock_is_thirty_seconds_ahead_merges_as_if_in_step(shm_dir, clock_ahead):
    out = Path(shm_dir) / "out.json"
    args = [sys.executable, "-m", "storlab", "run", "--target", f"{shm_dir}/f{{rank}}", "--size", "8m",
            "--bs", "4k", "--rw", "randread", "--time", "2s", "--no-store", "--json", str(out)]
    # each rank a node of its own (STORLAB_NODE_NAME), so its offset is measured, not taken as 0
    cmd = [MPIEXEC, "-n", "1", "env", "STORLAB_NODE_NAME=n0", *args, ":",
           "-n", "1", "env", "STORLAB_NODE_NAME=n1", f"LD_PRELOAD={clock_ahead}", f"SHIFT_REALTIME_S={SHIFT_S:.0f}",
           *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    clock = {c["rank"]: c for c in doc["mpi"]["clock"]}
    assert clock[1]["offset_s"] == pytest.approx(-SHIFT_S, abs=0.5)   # the shift was real, and measured
    (phase,) = doc["phases"]
    ranks = {r["rank"]: r for r in phase["mpi"]["ranks"]}
    assert ranks[1]["start_unix_s"] - ranks[0]["start_unix_s"] == pytest.approx(SHIFT_S, abs=0.5)
    a = phase["aggregate"]
    assert phase["mpi"]["start_skew_s"] < 0.5 and a["straggler_s"] < 0.5
    lo, hi = a["deskew_window_s"]
    assert lo < 0.5 and hi == pytest.approx(2.0, abs=0.5)
    assert a["last_done_s"] == pytest.approx(2.0, abs=0.5) and phase["seconds"] == pytest.approx(2.0, abs=0.5)
