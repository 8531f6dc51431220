"""`storlab replay` under mpiexec: each rank of the Darshan log replays on its own MPI rank (log
rank r on MPI rank r mod N), rank 0 merges the ranks' phases (per rank and per node) and counts
the fidelity table from every rank's replayed requests. Two and four ranks on this host; an IOR
run and its replay both recorded by Darshan, counted alike; two nodes of the cluster in a box.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_mpi_runs import MPIEXEC, _have_mpi4py

darshan = pytest.importorskip("darshan", reason="PyDarshan (pip install darshan, the replay extra) is not installed")

from storlab.schemas import validate  # noqa: E402

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich, or a site MPI on PATH)"),
    pytest.mark.skipif(not _have_mpi4py(), reason="mpi4py not installed (pip install 'storlab[mpi]')"),
]

REPO = Path(__file__).resolve().parents[1]
IOR_HDF5 = str(Path(darshan.__file__).parent / "examples" / "example_logs" / "ior_hdf5_example.darshan")
MIB = 1024 * 1024
REPLAY = [sys.executable, "-m", "storlab", "replay"]


def _env(tmp_path: Path) -> dict[str, str]:
    """The replay's private folders go to a temporary folder of the test's own (checked empty)."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp_path / "tmp")}


def _replayed(cmd: list[str], tmp_path: Path, out: Path) -> dict:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=_env(tmp_path), cwd=REPO)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    validate(doc)
    return doc


def _not_ok(doc: dict) -> list[dict]:
    return [r for r in doc["replay"]["fidelity"]["rows"] if r["status"] == "differs"]


@pytest.mark.parametrize("n", [2, 4])
def test_each_log_rank_replays_on_its_own_mpi_rank(tmp_path, n):
    """IOR over HDF5, 4 ranks on one shared file, DXT-traced: on 4 MPI ranks each log rank is
    one MPI rank; on 2, log ranks 0 and 2 go to MPI rank 0, 1 and 3 to MPI rank 1."""
    out, target = tmp_path / "r.json", tmp_path / "t"
    doc = _replayed([MPIEXEC, "-n", str(n), *REPLAY, IOR_HDF5, "--target", str(target), "--json", str(out), "-q",
                     "--no-store"], tmp_path, out)
    rep = doc["replay"]
    assert rep["ranks"] == n and rep["in_process"] is False and rep["from_dxt"] == 4
    assert not _not_ok(doc), _not_ok(doc)
    rows = {r["counter"]: r for r in rep["fidelity"]["rows"]}
    assert rows["POSIX_BYTES_WRITTEN"]["replay"] == 4195800 and rows["POSIX_READS"]["replay"] == 36
    mpi = doc["mpi"]
    assert mpi["size"] == n and [x["rank"] for x in mpi["ranks"]] == list(range(n)) and mpi["missing_ranks"] == []
    assert all(x["files"] == 1 and x["write_bytes"] > 0 and x["busy_s"] > 0 for x in mpi["ranks"])
    assert sum(x["write_bytes"] for x in mpi["ranks"]) == 4195800
    assert [node["ranks"] for node in mpi["nodes"]] == [list(range(n))]
    # each step merged over the ranks, with the per-rank figures every MPI run has
    assert doc["phases"] and all(sorted(x["rank"] for x in p["mpi"]["ranks"]) == list(range(n))
                                 for p in doc["phases"][:1])
    assert sum(p["write"]["bytes"] for p in doc["phases"] if p.get("write")) == 4195800
    assert doc["replay"]["what_if"]["ratio"] is not None
    assert not list(target.rglob("*")) and not list((tmp_path / "tmp").iterdir())   # nothing left behind


def test_more_mpi_ranks_than_the_log_leave_the_others_idle(tmp_path):
    out = tmp_path / "r.json"
    doc = _replayed([MPIEXEC, "-n", "5", *REPLAY, IOR_HDF5, "--target", str(tmp_path / "t"), "--json", str(out),
                     "-q", "--no-store"], tmp_path, out)
    assert doc["complete"] and not _not_ok(doc)
    assert [x["files"] for x in doc["mpi"]["ranks"]] == [1, 1, 1, 1, 0]
    assert doc["phases"][0]["mpi"]["idle_ranks"] == [4] and doc["phases"][0]["mpi"]["missing_ranks"] == []
    assert any("MPI rank 4 replay nothing" in n for n in doc["translation"]["notes"])


@pytest.mark.parametrize("flag", [["--ranks", "2"], ["--emit", "job.toml"]], ids=["ranks", "emit"])
def test_what_mpiexec_cannot_do_is_refused_in_one_line(tmp_path, flag):
    p = subprocess.run([MPIEXEC, "-n", "2", *REPLAY, IOR_HDF5, "--target", str(tmp_path / "t"), *flag, "--no-store"],
                       capture_output=True, text=True, timeout=120, env=_env(tmp_path), cwd=tmp_path)
    assert p.returncode == 2
    lines = {line for line in p.stderr.splitlines() if line.strip()}
    assert len(lines) == 1 and flag[0].lstrip("-") in lines.pop()
    assert not (tmp_path / "t").exists() and not (tmp_path / "job.toml").exists()


def test_an_ior_run_and_its_replay_under_mpi_count_alike_in_darshan(tmp_path):
    """IOR, 2 ranks, one shared file (-t 64k -b 1m -s 4, write then read), recorded by Darshan;
    its replay on 2 MPI ranks recorded by Darshan too: the same reads, writes and bytes of the
    file per rank-summed record, and nothing laid out."""
    from test_replay import _ior, _record
    from test_replay_darshan import COMPARED, _counters_by_file, _libdarshan

    app = tmp_path / "app"
    app.mkdir()
    ior_log = _record(tmp_path, [MPIEXEC, "-n", "2", _ior(), "-a", "POSIX", "-w", "-r", "-t", "64k", "-b", "1m",
                                 "-s", "4", "-k", "-o", str(app / "ior.dat")], "ior")
    target, out, logs = tmp_path / "t", tmp_path / "r.json", tmp_path / "replay-logs"
    logs.mkdir()
    env = {**_env(tmp_path), "DARSHAN_LOGPATH": str(logs), "LD_PRELOAD": _libdarshan()}
    p = subprocess.run([MPIEXEC, "-n", "2", *REPLAY, ior_log, "--target", str(target), "--json", str(out), "-q",
                        "--no-store"], capture_output=True, text=True, timeout=240, env=env, cwd=REPO)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    validate(doc)
    assert doc["replay"]["laid_out_bytes"] == 0 and doc["mpi"]["size"] == 2
    found = [str(x) for x in logs.iterdir() if _counters_by_file(str(x), target)]   # the replay's, not a helper's
    assert len(found) == 1, sorted(os.listdir(logs))
    got = _counters_by_file(found[0], target)
    want = _counters_by_file(ior_log, app)
    assert want["ior.dat"]["POSIX_BYTES_WRITTEN"] == 8 * MIB
    assert got == want, {k: (want["ior.dat"][k], got.get("ior.dat", {}).get(k)) for k in COMPARED}


@pytest.mark.root
@pytest.mark.netns
def test_two_nodes_of_the_cluster_in_a_box_each_replay_their_ranks(tmp_path):
    """mpiexec places ranks 0 and 2 on n1, 1 and 3 on n2 (network namespaces with host names of
    their own, one file system): the replay names each node with its ranks and bytes."""
    from testbed.cluster import Cluster, cluster_unavailable, leftovers, mpi_unavailable

    why = cluster_unavailable() or mpi_unavailable()
    if why:
        pytest.skip(f"cluster in a box: {why}")
    out, target = tmp_path / "r.json", tmp_path / "t"
    with Cluster(["n1", "n2"]) as c:
        p = subprocess.run(c.mpiexec(["n1", "n2"], 4) + [*REPLAY, IOR_HDF5, "--target", str(target), "--json",
                                                         str(out), "-q", "--no-store"],
                           capture_output=True, text=True, timeout=240, env=_env(tmp_path), cwd=REPO)
        assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    validate(doc)
    assert not _not_ok(doc)
    mpi = doc["mpi"]
    assert {n["node"]: n["ranks"] for n in mpi["nodes"]} == {"n1": [0, 2], "n2": [1, 3]}
    assert [x["node"] for x in mpi["ranks"]] == ["n1", "n2", "n1", "n2"]
    assert sum(n["write_bytes"] for n in mpi["nodes"]) == 4195800 and all(n["write_bytes"] for n in mpi["nodes"])
    nodes_of_step = {x["node"] for x in doc["phases"][0]["mpi"]["nodes"]}
    assert nodes_of_step == {"n1", "n2"}
    assert not list(target.rglob("*")) and not list((tmp_path / "tmp").iterdir())
    assert leftovers() == []
