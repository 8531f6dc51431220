"""Absurd inputs to every `storlab plan` subcommand are refused with one line naming the field and
its allowed range, within a second of CPU time and in bounded memory.

Each case runs `main()` in a child Python whose address space is capped (RLIMIT_AS), so a model
that tries to build a 13 GB structure fails with MemoryError instead of swapping the machine; the
child measures the CPU time (user + system, getrusage) of the command alone, without the
interpreter's start-up, so a loaded machine does not make the test flaky the way wall-clock would."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

ADDRESS_SPACE_BYTES = 1 << 30     # 1 GiB: a refused input needs a few tens of MB
CPU_SECONDS = 1.0

_CHILD = r"""
import contextlib, io, json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
from storlab.cli.main import main
err = io.StringIO()
before = resource.getrusage(resource.RUSAGE_SELF)
try:
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(json.loads(sys.argv[2]))
except MemoryError:
    code = "MemoryError"
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(json.dumps({"code": code, "stderr": err.getvalue(), "cpu_s": cpu}))
"""

CASES = [
    # geometry: drive counts, spans, chunk sizes, request sizes
    (["geometry", "R6/99999999999999999999"], "numbers too large"),
    (["geometry", "R6/99999"], "allowed: 4 to 1024 drives per span"),
    (["geometry", "R6/12/999999"], "allowed: at most 100000 per stack"),
    (["geometry", "R6/12", "--count", "999999999999"], "--count: '999999999999' is out of range; allowed: >= 1 and <= 100000"),
    (["geometry", "R6/12", "--chunk", "1TiB"], "chunk 1099511627776 bytes; allowed:"),
    (["geometry", "R6/12", "--count", "2", "--inter-chunk", "64GiB"], "inter_chunk 68719476736 bytes; allowed:"),
    (["geometry", "R6/12", "--request", "1024TiB"], "allowed: at most 200000 chunks"),
    # reliability: capacities, MTBF, MTTR, rebuild rates, periods
    (["reliability", "R6/12", "--drive", "1000PB", "--mttr", "24h"], "capacity 1000000000000000000 bytes is out of range"),
    (["reliability", "R6/12", "--mtbf", "1e300", "--mttr", "24h"], "mtbf 1e+300 h is out of range"),
    (["reliability", "R6/12", "--afr", "1e-300", "--mttr", "24h"], "mtbf"),
    (["reliability", "R6/12", "--mttr", "1e12"], "mttr 1e+12 h is out of range"),
    (["reliability", "R6/12", "--rebuild-rate", "1e17B/s"], "rebuild_rate"),
    (["reliability", "R6/12", "--mttr", "24h", "--period", "1e12y"], "period 1e+12 years is out of range"),
    (["reliability", "R1/100000", "--mttr", "24h"], "allowed: 2 to 1024 drives per span"),
    (["reliability", "R1/65", "--mttr", "24h"], "allowed: 2 to 64"),
    # perf: rates, IOPS, caps, requests
    (["perf", "R6/99999999999999999999"], "numbers too large"),
    (["perf", "R6/12", "--drive-read", "1e17B/s"], "seq_read"),
    (["perf", "R6/12", "--drive-iops", "999999999999999"], "random_read_iops"),
    (["perf", "R6/12", *[arg for i in range(65) for arg in ("--cap", f"c{i}=1GB/s")]], "allowed: at most 64"),
    (["perf", "R6/12", "--random-request", "1024TiB"], "allowed: at most 200000 chunks"),
    (["perf", "R6/12", "--sector", "1GiB"], "sector"),
    # recommend: inventories and candidate sets
    (["recommend", "--drives", "100000"], "--drives: 100000 is out of range; allowed: 1 to 2048"),
    (["recommend", "--drives", "999999999"], "--drives"),
    (["recommend", "--drives", "24", "--bays", "100000"], "--bays: 100000 is out of range"),
    (["recommend", "--drives", "24", "--controllers", "100000"], "--controllers: 100000 is out of range"),
    (["recommend", "--drives", "2048", "--bays", "120", "--levels", "0,1,3,4,5,6,10,50,60",
      "--chunks", "4k,8k,16k,32k,64k,128k,256k,512k,1m,2m,4m,8m,16m,32m,64m,128m"], "candidate layouts"),
    (["recommend", "--drives", "24", "--drive", "1000PB"], "capacity"),
    # script: the same stack bounds
    (["script", "R0/99999", "--parity", "md"], "allowed: 1 to 1024 drives per span"),   # R0/1: one drive
    (["script", "R6/12", "--chunk", "1TiB"], "chunk"),
]


def _run_bounded(argv: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(ADDRESS_SPACE_BYTES), json.dumps(["plan", *argv])],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv, names", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_absurd_plan_input_is_refused_in_a_second_of_cpu_and_bounded_memory(argv, names):
    result = _run_bounded(argv)
    assert result["code"] == 2, result
    assert result["stderr"].startswith("storlab plan: error: ") and result["stderr"].count("\n") == 1, result
    assert names in result["stderr"], result
    assert result["cpu_s"] < CPU_SECONDS, f"{argv[:4]}: {result['cpu_s']:.2f} s of CPU"


def test_the_bound_itself_is_answered_in_bounded_memory():
    """The largest accepted inventory and stack are computed, not refused, under the same memory cap."""
    for argv in (["perf", "R6/1024/99328"], ["geometry", "R6/1024/99328", "--request", "1GiB"],
                 ["reliability", "R6/1024/99328", "--mttr", "24h"]):
        result = _run_bounded([*argv, "--json"])
        assert result["code"] == 0, (argv, result)
