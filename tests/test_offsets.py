"""Offsets storlab issues, seen from outside: every block once per random pass (fio's random map),
a position per direction in sequential mixes, the options that change both. Offsets are taken from
the system calls (strace on the psync engine) or from what ends up in the file.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest
from test_cli_run import run_cli  # tests/ is on sys.path (pytest prepend mode)

BS = 4096
# A transfer size nothing else in a run uses, so the traced calls are the workload's.
TRACE_BS = 12 * 1024
_CALL = re.compile(r"\b(pread64|pwrite64)\(\d+, .*, (\d+), (\d+)\)\s+=\s+(-?\d+)")


def traced_offsets(*args: str) -> dict[str, list[int]]:
    """Run `storlab run ARGS` under strace; the offsets of its bs-sized preads and pwrites, in order."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed (apt-get install strace)")
    python_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
    env = dict(os.environ, PYTHONPATH=python_dir + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as log:
        trace = subprocess.run(
            ["strace", "-f", "-qq", "-s", "0", "-e", "trace=pread64,pwrite64", "-o", log.name,
             sys.executable, "-m", "storlab", "run", *args, "--bs", str(TRACE_BS), "--engine", "psync",
             "--no-store", "-q"], capture_output=True, text=True, env=env, timeout=120)
        if trace.returncode != 0 and "ptrace" in trace.stderr:
            pytest.skip(f"strace cannot trace here: {trace.stderr.strip().splitlines()[0]}")
        assert trace.returncode == 0, trace.stderr[-2000:]
        text = log.read()
    calls: dict[str, list[int]] = {"read": [], "write": []}
    for m in _CALL.finditer(text):
        if int(m.group(2)) == TRACE_BS:
            calls["read" if m.group(1) == "pread64" else "write"].append(int(m.group(3)))
    return calls


def test_randwrite_over_an_existing_file_verifies_on_every_block_where_1526_of_4096_failed(shm_dir):
    """Issue 11: a size-based randwrite over 16 MiB touched ~63 % of the blocks (uniform draws with
    repeats), so a verified read-back failed on the blocks it never stamped."""
    path = f"{shm_dir}/r.dat"
    with open(path, "wb") as f:  # a file written before, without verification headers
        f.write(os.urandom(16 << 20))
    w = run_cli("--target", path, "--size", "16m", "--rw", "randwrite", "--bs", "4k", "--verify", "crc32c")
    assert w["rc"] == 0 and w["doc"]["phases"][0]["write"]["ops"] == 4096
    r = run_cli("--target", path, "--size", "16m", "--rw", "read", "--bs", "4k", "--verify", "crc32c")
    v = r["doc"]["phases"][0]["verify"]
    assert (r["rc"], v["checked_blocks"], v["mismatches"]) == (0, 4096, 0), v


def test_norandommap_draws_with_repeats_and_leaves_blocks_unstamped(shm_dir):
    path = f"{shm_dir}/n.dat"
    with open(path, "wb") as f:
        f.write(bytes(4 << 20))
    run_cli("--target", path, "--size", "4m", "--rw", "randwrite", "--verify", "crc32c", "--no-random-map")
    r = run_cli("--target", path, "--rw", "read", "--verify", "crc32c", "--verify-report", "0")
    missed = r["doc"]["phases"][0]["verify"]["mismatches"]
    # 1024 draws over 1024 blocks miss each block with probability (1 - 1/1024)^1024 = 1/e: 377 expected
    assert 300 < missed < 460, missed


def test_rw_mix_reads_and_writes_each_walk_from_the_start(shm_dir):
    blocks = 128
    calls = traced_offsets("--target", f"{shm_dir}/m.dat", "--size", str(blocks * TRACE_BS), "--rw", "rw")
    reads, writes = calls["read"], calls["write"]
    assert len(reads) + len(writes) == blocks and min(len(reads), len(writes)) > 30, calls
    # fio's last_pos per direction: reads at 0, bs, 2 bs ... and writes at 0, bs ... independently
    assert reads == [i * TRACE_BS for i in range(len(reads))]
    assert writes == [i * TRACE_BS for i in range(len(writes))]


@pytest.mark.parametrize("rw", ["randwrite", "randrw"])
def test_random_pass_issues_each_offset_once_in_a_seeded_order(rw):
    blocks = 100
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        target = ["--target", f"{d}/p.dat", "--size", str(blocks * TRACE_BS), "--rw", rw]
        first = traced_offsets(*target, "--seed", "1")
        again = traced_offsets(*target, "--seed", "1")
        other = traced_offsets(*target, "--seed", "2")
    offsets = first["read"] + first["write"]
    # a randrw pass reads or writes each block once (fio's random map is per file)
    assert sorted(offsets) == [i * TRACE_BS for i in range(blocks)]
    assert offsets != sorted(offsets), "a random order, not a sequential one"
    assert again == first and other != first


def test_skewed_distribution_concentrates_io_as_pareto_says(shm_dir):
    """pareto:0.2 sends 80 % of the I/O to 20 % of the blocks; without the map, so blocks repeat."""
    import collections
    blocks = 200
    calls = traced_offsets("--target", f"{shm_dir}/z.dat", "--size", str(blocks * TRACE_BS), "--rw", "randread",
                           "--random-distribution", "pareto:0.2", "--io-size", str(20 * blocks * TRACE_BS))
    hits = sorted(collections.Counter(calls["read"]).values(), reverse=True)
    assert sum(hits) == 20 * blocks
    top = sum(hits[:blocks // 5]) / sum(hits)
    # P(rank < k) = (k / (n - 1))^(ln 0.8 / ln 0.2) = 0.80 for k = n/5
    assert abs(top - 0.80) < 0.04, top


@pytest.mark.parametrize("text,words", [
    ("zipf:1", None), ("zoned:60/10:40/90", None),
    ("zipf:0", ["random_distribution", "theta", "zoned:A/R"]),
    ("zoned:60/10:30/20", ["random_distribution", "100", "pareto[:h[:center]]"]),
])
def test_random_distribution_is_checked_by_the_engine_rule(shm_dir, capsys, text, words):
    from storlab.cli.main import main

    rc = main(["run", "--target", f"{shm_dir}/d.dat", "--size", "64k", "--rw", "randread",
               "--random-distribution", text, "--no-store", "-q"])
    err = capsys.readouterr().err
    if words is None:
        assert rc == 0, err
    else:
        assert rc == 2 and len(err.strip().splitlines()) == 1, err
        assert all(w in err for w in words), err
