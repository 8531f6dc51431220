"""A write phase with --verify reads back and checks what it wrote (fio's do_verify), outside its
measured window; --no-verify-readback turns that off."""
from __future__ import annotations

import pytest
from test_cli_run import run_cli  # tests/ is on sys.path (pytest prepend mode)


@pytest.mark.parametrize("engine", [("psync", "1"), ("io_uring", "8")], ids=["psync", "io_uring"])
def test_a_verified_write_checks_blocks_without_a_read_phase(shm_dir, engine):
    # Regression: "A write with --verify checks nothing (0 blocks checked)".
    r = run_cli("--target", f"{shm_dir}/w.dat", "--size", "1m", "--bs", "4k", "--rw", "write",
                "--verify", "crc32c", "--engine", engine[0], "--qd", engine[1])
    assert r["rc"] == 0
    phase = r["doc"]["phases"][0]
    v = phase["verify"]
    assert (v["checked_blocks"], v["readback_blocks"], v["mismatches"]) == (256, 256, 0)
    assert v["readback_s"] >= 0
    # the read-back is not counted as measured reads
    assert "read" not in phase or phase["read"]["ops"] == 0
    assert phase["write"]["ops"] == 256


def test_time_based_write_reads_each_block_back_once(shm_dir):
    r = run_cli("--target", f"{shm_dir}/t.dat", "--size", "256k", "--bs", "4k", "--rw", "write",
                "--verify", "xxh3", "--time", "0.3s")
    phase = r["doc"]["phases"][0]
    assert phase["write"]["ops"] > 64          # wrapped around the 64-block range
    assert phase["verify"]["readback_blocks"] == 64


def test_readback_can_be_turned_off(shm_dir):
    r = run_cli("--target", f"{shm_dir}/n.dat", "--size", "1m", "--bs", "4k", "--rw", "write",
                "--verify", "crc32c", "--no-verify-readback")
    v = r["doc"]["phases"][0]["verify"]
    assert (v["checked_blocks"], v["readback_blocks"]) == (0, 0)
