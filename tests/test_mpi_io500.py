"""`storlab io500` under mpiexec: 2 and 3 ranks on /dev/shm; every rank's phases are counted,
the reads and visits are shifted as io500 shifts them, the stonewall wear-out leaves every rank with the same
transfers, find is spread over the ranks, and nothing is left behind."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from storlab.jobs.io500.phases import PHASES
from test_mpi_runs import MPIEXEC, _have_mpi4py

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich, or a site MPI on PATH)"),
    pytest.mark.skipif(not _have_mpi4py(), reason="mpi4py not installed (pip install 'storlab[mpi]')"),
]


@pytest.mark.parametrize("n", [2, 3])
def test_every_rank_runs_every_phase(shm_dir, tmp_path, n):
    d = Path(shm_dir)
    (d / "data").mkdir()
    cfg = tmp_path / "c.ini"
    cfg.write_text(f"[global]\ndatadir = {d}/data\nresultdir = {d}/res\n[debug]\nstonewall-time = 1\n"
                   "[ior-easy]\ntransferSize = 1m\nblockSize = 8m\n[mdtest-easy]\nn = 200\n"
                   "[ior-hard]\nsegmentCount = 100000\n[mdtest-hard]\nn = 1000000\n")
    out = tmp_path / "doc.json"
    p = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, "-m", "storlab", "io500", str(cfg), "--timestamp", "T",
                        "--json", str(out), "--quiet", "--no-store"], capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["io500"]["procs"] == n
    by = {p["name"]: p for p in doc["phases"]}
    assert list(by) == [name for name, _ in PHASES]
    assert by["ior-easy-write"]["details"]["bytes"] == n * (8 << 20)
    assert by["mdtest-easy-write"]["details"]["items_per_rank"] == [200] * n
    hard = by["ior-hard-write"]["details"]
    # the 1 s stonewall ends ior-hard-write; then every rank catches up with the one that did most
    assert all(c + w == hard["pairs_per_rank"] for c, w in zip(hard["pairs_at_stonewall"], hard["wearout_pairs"]))
    assert hard["bytes"] == n * hard["pairs_per_rank"] * 47008
    assert by["ior-hard-read"]["details"]["bytes"] == hard["bytes"]       # read back (IOR -C -Q 1)
    assert by["ior-easy-read"]["details"]["bytes"] == n * (8 << 20)
    # the 1 s stonewall ends mdtest-hard-write; every rank then creates up to the most any made
    made = by["mdtest-hard-write"]["details"]
    assert len(set(made["items_per_rank"])) == 1 and made["stonewalled_ranks"] >= 1
    for name in ("mdtest-hard-stat", "mdtest-hard-read", "mdtest-hard-delete"):
        assert by[name]["details"]["items"] == made["items"], name
    # io500's rate (mdtest's): every rank's files, wear-out included, over the whole phase (sync included)
    assert made["items"] == sum(made["items_per_rank"]) and len(made["sync_s"]) == n
    hard_write = by["mdtest-hard-write"]
    assert hard_write["score"] == pytest.approx(made["items"] / hard_write["seconds"] / 1000)
    # find looked at every file: the mdtest files, a file per rank of ior-easy and the ior-hard file
    assert by["find"]["details"]["total_files"] == n * 200 + made["items"] + n + 1
    assert by["find"]["details"]["nproc"] == n
    assert os.listdir(d / "data") == []
    assert (d / "res" / "T" / "result.txt").read_text().startswith(f"[run]\nprocs           = {n}\n")


def test_sigterm_to_one_rank_stops_every_rank_and_rank_0_keeps_the_run(shm_dir, tmp_path):
    import signal
    import time
    import uuid

    from test_mpi_runs import _rank_pids

    d = Path(shm_dir)
    (d / "data").mkdir()
    cfg = tmp_path / "c.ini"
    cfg.write_text(f"[global]\ndatadir = {d}/data\nresultdir = {d}/res\n[debug]\nstonewall-time = 4\n"
                   "[ior-easy]\ntransferSize = 1m\nblockSize = 100000m\n")
    out = tmp_path / "doc.json"
    marker = uuid.uuid4().hex
    proc = subprocess.Popen([MPIEXEC, "-n", "2", sys.executable, "-m", "storlab", "io500", str(cfg), "--timestamp", "T",
                             "--json", str(out), "--quiet", "--no-store"], env={**os.environ, "STORLAB_TEST_MARK": marker},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    pids: dict[int, int] = {}
    while len(pids) < 2 or not (d / "data" / "T" / "ior-easy").exists():   # the first phase is next
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
        pids = _rank_pids(marker)
    time.sleep(1.0)            # inside ior-easy-write (4 s)
    os.kill(pids[1], signal.SIGTERM)
    _, err = proc.communicate(timeout=90)
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "interrupted", err
    assert "rank 1" in doc["error"] and "SIGTERM" in doc["error"]
    assert doc["phases"][-1]["name"] == "ior-easy-write" and not doc["phases"][-1]["valid"]
    assert not doc["score"]["valid"]
    assert os.listdir(d / "data") == []          # every rank removed what it made


def test_ranks_visit_each_others_files_as_io500_shifts_them(shm_dir, tmp_path):
    """Each rank's own system calls (strace per rank): under mdtest -N 1 rank r stats the files of
    rank r+1, reads those of r+2 and removes those of r+3 (mod 2); IOR -C -Q 1 on one node reads
    back the rank's own file (the shift is a whole node)."""
    import re
    import shutil

    if shutil.which("strace") is None:
        pytest.skip("strace not installed")
    d = Path(shm_dir)
    (d / "data").mkdir()
    cfg = tmp_path / "c.ini"
    cfg.write_text(f"[global]\ndatadir = {d}/data\nresultdir = {d}/res\n[debug]\nstonewall-time = 1\n"
                   "[ior-easy]\ntransferSize = 1m\nblockSize = 2m\n[mdtest-easy]\nn = 50\n"
                   "[ior-hard]\nsegmentCount = 20\n[mdtest-hard]\nn = 50\n[ior-rnd4K-easy-read]\nrun = FALSE\n")
    wrap = tmp_path / "wrap.sh"
    wrap.write_text(f"#!/bin/sh\nexec strace -f -qq -e trace=newfstatat,statx,openat,unlinkat "
                    f"-o {tmp_path}/trace.$PMI_RANK \"$@\"\n")
    wrap.chmod(0o755)
    out = tmp_path / "doc.json"
    p = subprocess.run([MPIEXEC, "-n", "2", str(wrap), sys.executable, "-m", "storlab", "io500", str(cfg),
                        "--timestamp", "T", "--json", str(out), "--quiet", "--no-store"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    by = {p["name"]: p for p in json.loads(out.read_text())["phases"]}
    for name, owners in (("mdtest-easy-stat", [1, 0]), ("mdtest-hard-stat", [1, 0]), ("mdtest-hard-read", [0, 1]),
                         ("mdtest-easy-delete", [1, 0]), ("mdtest-hard-delete", [1, 0])):
        assert by[name]["details"]["files_of_rank"] == owners, name
        assert by[name]["details"]["items"] == by[name.split("-")[0] + "-" + name.split("-")[1] + "-write"]["details"]["items"]
    assert by["ior-easy-read"]["details"]["read_from"] == [0, 1]
    for rank in (0, 1):
        other = 1 - rank
        calls = Path(f"{tmp_path}/trace.{rank}").read_text()
        # the engine works relative to the tree's folder: `call(fd, "r<rank>.f0.<item>", ...)`
        def files(call, owner, flags="", calls=calls):
            return len(re.findall(rf'{call}\(\d+, "r{owner}\.f0\.\d+"[^\n]*{flags}', calls))
        assert files("openat", rank, "O_CREAT") == 100 and files("openat", other, "O_CREAT") == 0
        assert files("(?:newfstatat|statx)", other) == 100 and files("(?:newfstatat|statx)", rank) == 0
        assert files("openat", rank, "O_RDONLY") == 50 and files("openat", other, "O_RDONLY") == 0
        assert files("unlinkat", other) == 100 and files("unlinkat", rank) == 0
        reads = re.findall(r'openat\(AT_FDCWD, "[^"]*ior_file_easy\.0*(\d+)", O_RDONLY', calls)
        assert reads and set(reads) == {str(rank)}, reads


def test_a_rank_killed_is_reported_in_one_line_and_the_phases_done_are_kept(shm_dir, tmp_path):
    """SIGKILL of rank 1 in ior-hard-write: rank 0 names the dead rank in one line within seconds,
    keeps and scores the phases done, and removes what both ranks made. mpiexec -disable-auto-
    cleanup, and each rank under a shell that outlives it: MPICH's plain mpiexec SIGKILLs every rank
    when one is killed, and with -disable-auto-cleanup alone MPICH sometimes still ends rank 0 too
    (seen 3 times in 5 here), so the launcher would decide the outcome, not storlab."""
    import signal
    import time
    import uuid

    from test_mpi_runs import _rank_pids

    d = Path(shm_dir)
    (d / "data").mkdir()
    cfg = tmp_path / "c.ini"
    cfg.write_text(f"[global]\ndatadir = {d}/data\nresultdir = {d}/res\n[debug]\nstonewall-time = 3\n"
                   "[ior-easy]\ntransferSize = 1m\nblockSize = 32m\n[mdtest-easy]\nn = 500\n")
    wrap = tmp_path / "rank.sh"
    wrap.write_text("#!/bin/sh\ntrap '' USR1\n\"$@\"\n")
    wrap.chmod(0o755)
    out = tmp_path / "doc.json"
    marker = uuid.uuid4().hex
    t0 = time.monotonic()
    proc = subprocess.Popen([MPIEXEC, "-disable-auto-cleanup", "-n", "2", str(wrap), sys.executable, "-m", "storlab",
                             "io500", str(cfg), "--timestamp", "T", "--json", str(out), "--no-store", "--quiet",
                             "--rank-timeout", "5"], env={**os.environ, "STORLAB_TEST_MARK": marker},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids: dict[int, int] = {}
    while len(pids) < 2 or not (d / "data" / "T" / "ior-hard" / "file").exists():    # in ior-hard-write
        assert time.monotonic() - t0 < 90 and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
        pids = {r: p for r, p in _rank_pids(marker).items() if b"python" in Path(f"/proc/{p}/cmdline").read_bytes()}
    os.kill(pids[1], signal.SIGKILL)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the run hung after rank 1 was killed")
    assert time.monotonic() - t0 < 80
    errors = [line for line in err.splitlines() if line.startswith("storlab io500: error:")]
    # named at mpiexec's SIGUSR1 notice (a few heartbeats) or at the 5 s rank timeout
    assert len(errors) == 1 and "rank 1 (node" in errors[0], err
    assert " died: mpiexec reported" in errors[0] or "no sign of life for 5 s" in errors[0], err
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "error"
    by = {p["name"]: p for p in doc["phases"]}
    assert list(by)[:4] == ["ior-easy-write", "mdtest-easy-write", "timestamp", "ior-hard-write"]
    assert by["ior-easy-write"]["complete"] and by["ior-easy-write"]["score"] > 0
    assert by["mdtest-easy-write"]["details"]["items"] == 1000
    assert not by["ior-hard-write"]["complete"] and not doc["score"]["valid"]
    assert (d / "res" / "T" / "result.txt").exists()
    assert os.listdir(d / "data") == [], "what the dead rank made is removed too"


def test_the_concurrent_phase_runs_its_parts_on_disjoint_rank_groups_started_together(shm_dir, tmp_path):
    import math

    d = Path(shm_dir)
    (d / "data").mkdir()
    cfg = tmp_path / "c.ini"
    cfg.write_text(f"[global]\ndatadir = {d}/data\nresultdir = {d}/res\n[debug]\nstonewall-time = 1\n"
                   "[ior-easy]\ntransferSize = 1m\nblockSize = 8m\n[mdtest-easy]\nn = 100\n"
                   "[ior-hard]\nsegmentCount = 100\n[mdtest-hard]\nn = 100\n"
                   "[mdworkbench]\nprecreatePerSet = 20\nfilesPerProc = 10\n"
                   "[ior-rnd1MB]\nblockSize = 4194304\nsegmentCount = 1\n"
                   "[concurrent]\nratio-write = 0.25\nratio-read = 0.25\n")
    out = tmp_path / "doc.json"
    p = subprocess.run([MPIEXEC, "-n", "4", sys.executable, "-m", "storlab", "io500", str(cfg), "--timestamp", "T",
                        "--mode", "extended", "--json", str(out), "--quiet", "--no-store"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    by = {p["name"]: p for p in doc["proposals"]["phases"]}
    rnd = by["ior-rnd1MB-write"]["details"]
    assert len(rnd["bytes_per_rank"]) == 4 and all(b > 0 for b in rnd["bytes_per_rank"])
    c = by["concurrent"]
    assert c["ran"] and c["valid"], c
    det = c["details"]
    assert det["ranks_are"] == "MPI ranks" and det["processes"] == 4
    # io500's division of 4 ranks by 0.25 / 0.25 / the rest, in contiguous blocks: disjoint groups
    assert det["members"] == {"ior-easy-write": [0], "ior-rnd1MB-read": [1], "mdworkbench": [2, 3]}
    assert det["rank_part"] == ["ior-easy-write", "ior-rnd1MB-read", "mdworkbench", "mdworkbench"]
    parts = det["parts"]
    assert parts["ior-easy-write"]["bytes"] > 0 and parts["ior-rnd1MB-read"]["bytes"] > 0
    assert parts["mdworkbench"]["ops"]["obj_read"] == 2 * 10 * 10
    # one barrier of the whole starts every part (clock offsets measured when MPI started)
    assert det["start_spread_s"] < 0.25, det["start_unix"]
    per = [parts[n]["score"] / parts[n]["procs"] for n in ("ior-easy-write", "ior-rnd1MB-read", "mdworkbench")]
    assert c["score"] == pytest.approx(math.prod(per) ** (1 / 3) * 4)
    # io500's own phases are all there, scored as before
    assert [p["name"] for p in doc["phases"]][-1] == "ior-rnd4K-easy-read" and "[SCOREX]" in \
        (d / "res" / "T" / "result.txt").read_text()
    assert os.listdir(d / "data") == []


# one rank's md-workbench part fails (as on a full file system): the parts beside it stop at
# their next look instead of running to the 30 s stonewall, and rank 0 writes the run as far as it got
FAILING_PART = """
import sys
from storlab.cli.main import main
from storlab.errors import TargetError
from storlab.suites.io500 import concurrent

real = concurrent._run_part


def failing(part, deadline):
    if part.name == "mdworkbench" and part.whole_run.rank == 3:
        raise TargetError("mdworkbench-concurrent: No space left on device")
    return real(part, deadline)


concurrent._run_part = failing
sys.argv = ["storlab", *sys.argv[1:]]
raise SystemExit(main())
"""


def test_a_part_failing_on_one_rank_ends_the_concurrent_phase_on_every_rank(shm_dir, tmp_path):
    import time

    d = Path(shm_dir)
    (d / "data").mkdir()
    cfg = tmp_path / "c.ini"
    cfg.write_text(f"[global]\ndatadir = {d}/data\nresultdir = {d}/res\n[debug]\nstonewall-time = 30\n"
                   "[ior-easy]\ntransferSize = 1m\nblockSize = 8m\n[mdtest-easy]\nn = 100\n"
                   "[ior-hard]\nsegmentCount = 100\n[mdtest-hard]\nn = 100\n"
                   "[mdworkbench]\nprecreatePerSet = 20\nfilesPerProc = 10\n[ior-rnd1MB-write]\nrun = FALSE\n"
                   "[concurrent]\nratio-write = 0.25\nratio-read = 0.25\n")
    out = tmp_path / "doc.json"
    started = time.monotonic()
    p = subprocess.run([MPIEXEC, "-n", "4", sys.executable, "-c", FAILING_PART, "io500", str(cfg), "--timestamp", "T",
                        "--mode", "extended", "--json", str(out), "--quiet", "--no-store"],
                       capture_output=True, text=True, timeout=300)
    assert time.monotonic() - started < 25, p.stderr           # not the 30 s stonewall of the write part
    assert p.returncode != 0
    doc = json.loads(out.read_text())
    c = {p["name"]: p for p in doc["proposals"]["phases"]}["concurrent"]
    assert not c["complete"] and "No space left on device" in c["error"]
    assert doc["complete"] is False and "No space left on device" in doc["error"]
    assert "ior-easy-read" not in {p["name"] for p in doc["phases"]}
    assert os.listdir(d / "data") == []
