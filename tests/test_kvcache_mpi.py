"""`storlab kvcache` under mpiexec: each rank is one client carrying the option's full per-client
load with the seed + its rank (mlperf_wrapper.py), and rank 0's document sums the ranks."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from storlab import schemas
from test_mpi_runs import (
    MPIEXEC,
    pytestmark,  # noqa: F401 - marked mpi, skipped without mpiexec or mpi4py
)

REPO = Path(__file__).resolve().parents[1]

LOAD = ["--option", "1", "--trials", "1", "--users", "2", "--requests-per-user", "2", "--duration", "120s",
        "--scale", "0.01", "--inter-option-delay", "0", "--no-store", "--quiet"]


def kvcache(prefix: list[str], cache_dir: str, out: Path, *more: str) -> dict:
    p = subprocess.run([*prefix, sys.executable, "-m", "storlab", "kvcache", "--cache-dir", cache_dir, *LOAD, *more,
                        "--json", str(out)], capture_output=True, text=True, timeout=240, cwd=REPO,
                       env=dict(os.environ))
    assert p.returncode == 0, p.stderr
    return json.loads(out.read_text())


def test_two_ranks_each_carry_the_full_load_and_the_aggregate_sums_them(tmp_path, shm_dir):
    doc = kvcache([MPIEXEC, "-n", "2"], shm_dir, tmp_path / "mpi.json")
    schemas.validate(doc)
    assert doc["ranks"] == 2 and doc["hosts"] == 1
    trial = doc["options"][0]["trials"][0]
    ranks = trial["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["requests"] == 2 * 2 for r in ranks)          # every rank: its 2 users x 2 requests
    assert trial["read_bw_bytes"] == pytest.approx(sum(r["read_bw_bytes"] for r in ranks))
    assert trial["tokens_per_s"] == pytest.approx(sum(r["tokens_per_s"] for r in ranks))
    assert trial["read_p95_s"] == max(r["read_p95_s"] for r in ranks)
    assert doc["options"][0]["read_bw_bytes"] == pytest.approx(trial["read_bw_bytes"])
    # rank N draws with seed 42 + N: its bytes are a one-process run's with that seed
    for r in ranks:
        alone = kvcache([], shm_dir, tmp_path / f"alone{r['rank']}.json", "--seed", str(42 + r["rank"]))
        mine = alone["options"][0]["trials"][0]["ranks"][0]
        assert (mine["storage_read_bytes"], mine["storage_write_bytes"]) == (r["storage_read_bytes"],
                                                                               r["storage_write_bytes"])
    assert os.listdir(shm_dir) == []
