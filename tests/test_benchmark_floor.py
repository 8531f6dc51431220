"""benchmarks/meta_floor.c, the bare system calls vs_mdtest.py runs beside mdtest: it builds, runs
every phase from forked ranks in one shared directory, says its rates, and leaves nothing behind.
(Its speed is a benchmark figure, never checked here.)"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent.parent / "benchmarks" / "meta_floor.c"
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler on PATH (meta_floor.c needs cc)")


@pytest.fixture(scope="module")
def floor(tmp_path_factory) -> str:
    binary = str(tmp_path_factory.mktemp("floor") / "meta_floor")
    subprocess.run([CC, "-O2", "-Wall", "-Werror", "-o", binary, str(SOURCE)], check=True)
    return binary


@pytest.mark.parametrize("ranks,size", [(1, 0), (3, 4096)])
def test_every_phase_runs_and_the_directory_is_removed(floor, tmp_path, ranks, size):
    work = tmp_path / "w"
    out = subprocess.run([floor, str(work), "50", str(ranks), str(size)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rates = json.loads(out.stdout)
    assert set(rates) == {"create", "stat", "read", "remove"}
    assert all(v > 0 for v in rates.values())
    assert not work.exists()


def test_an_existing_directory_and_bad_counts_are_refused(floor, tmp_path):
    """The floor makes its own directory: one that exists is refused before anything is made in
    it (what is there stays), and so are file counts below 1."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "mine").write_text("x")
    out = subprocess.run([floor, str(work), "5", "1"], capture_output=True, text=True)
    assert out.returncode == 1 and "mkdir" in out.stderr and (work / "mine").exists()
    bad = subprocess.run([floor, str(tmp_path / "x"), "0", "1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "FILES_PER_RANK" in bad.stderr
