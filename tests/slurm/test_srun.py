"""storlab launched by Slurm's srun (`srun --mpi=pmi2`, the pip MPICH) on the session's one-node
cluster: `storlab run` and `storlab meta` merge one document over the ranks, name the launcher and
the Slurm job, and a job that Slurm ends (SIGTERM, then SIGKILL after KillWait) stores what it
measured. Each test reads the JSON document rank 0 writes."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from test_mpi_runs import MPIEXEC, _have_mpi4py, check_schema

from .cluster import KILL_WAIT_S, SlurmCluster

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.slurm,
    pytest.mark.skipif(not _have_mpi4py(), reason="mpi4py not installed (pip install 'storlab[mpi]')"),
]

STORLAB = [sys.executable, "-m", "storlab"]
# Each task writes the Slurm job id it runs in, then becomes storlab: the document must name that job.
RECORD_JOB = ["sh", "-c", 'echo "$SLURM_JOB_ID" > "$0/job.$$"; exec "$@"']


def srun_argv(n: int, job_name: str, *extra: str) -> list[str]:
    return ["srun", "--mpi=pmi2", "-n", str(n), "--job-name", job_name, "--kill-on-bad-exit=0", *extra]


def srun(cluster: SlurmCluster, n: int, command: str, args: list[str], d: Path,
         timeout_s: float = 90) -> tuple[subprocess.CompletedProcess, dict | None]:
    """`srun -n N storlab COMMAND ARGS --json d/out.json --no-store`; the process and rank 0's document."""
    out = d / "out.json"
    name = f"storlab-{uuid.uuid4().hex[:8]}"
    argv = [*srun_argv(n, name), *RECORD_JOB, str(d), *STORLAB, command, *args, "--json", str(out), "--no-store"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, env=cluster.env, cwd=d, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        cluster.client("scancel", "-n", name)      # not left holding the node for the next test
        cluster.wait_idle(30)
        raise
    return p, (json.loads(out.read_text()) if out.exists() else None)


def the_job_id(d: Path, n: int) -> str:
    files = sorted(d.glob("job.*"))
    assert len(files) == n, files
    ids = {f.read_text().strip() for f in files}
    assert len(ids) == 1, ids
    return ids.pop()


def test_srun_run_merges_one_document_over_the_ranks(slurm_cluster, shm_dir):
    d = Path(shm_dir)
    p, doc = srun(slurm_cluster, 2, "run", ["--target", f"{d}/f{{rank}}.{{node}}.{{size}}", "--size", "1m",
                                           "--bs", "64k", "--rw", "write", "--engine", "psync"], d)
    assert p.returncode == 0, p.stderr
    assert doc is not None and doc["complete"], p.stderr
    check_schema(doc)
    assert doc["mpi"]["size"] == 2 and doc["mpi"]["ranks_reporting"] == [0, 1]
    assert doc["mpi"]["launcher"] == "srun" and doc["mpi"]["launch_variables"] == "pmi"
    env = doc["environment"]
    assert env["launcher"] == "srun"
    assert env["slurm_job_id"] == the_job_id(d, 2) and env["slurm_step_id"] == "0"
    # {rank}, {node} and {size} are the srun task's: rank 0 and 1 of 2, on the cluster's node
    node = slurm_cluster.node
    (ph,) = doc["phases"]
    assert [r["targets"] for r in ph["mpi"]["ranks"]] == [[f"{d}/f{r}.{node}.2"] for r in range(2)]
    assert [r["node"] for r in ph["mpi"]["ranks"]] == [node, node]
    assert ph["aggregate"]["bytes"] == ph["write"]["bytes"] == 2 << 20
    assert all((d / f"f{r}.{node}.2").stat().st_size == 1 << 20 for r in range(2))


def test_srun_meta_merges_one_document_over_the_ranks(slurm_cluster, shm_dir):
    d = Path(shm_dir)
    work = d / "meta"
    work.mkdir()
    p, doc = srun(slurm_cluster, 2, "meta", ["--target", str(work), "--threads", "1", "--files-per-thread", "50",
                                            "--depth", "1", "--fanout", "2", "--quiet"], d)
    assert p.returncode == 0, p.stderr
    assert doc is not None and doc["kind"] == "meta" and doc["complete"], p.stderr
    check_schema(doc)
    assert doc["mpi"]["size"] == 2 and doc["mpi"]["launcher"] == "srun"
    assert doc["environment"]["slurm_job_id"] == the_job_id(d, 2)
    create = next(ph for ph in doc["phases"] if ph["name"] == "create")
    assert create["ops"] == 2 * 50 == sum(r["ops"] for r in create["mpi"]["ranks"])
    assert list(work.iterdir()) == []      # every rank removed what it made


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich, or a site MPI on PATH)")
def test_mpiexec_inside_an_allocation_is_named_as_the_launcher(slurm_cluster, shm_dir):
    # hydra starts its helper through srun here: the ranks are tasks of a step, yet mpiexec launched them
    d = Path(shm_dir)
    argv = ["salloc", "-n", "2", "--job-name", f"storlab-{uuid.uuid4().hex[:8]}", MPIEXEC, "-n", "2",
            *RECORD_JOB, str(d), *STORLAB, "run", "--target", f"{d}/f{{rank}}", "--size", "1m", "--engine", "null",
            "--time", "0.3s", "--json", str(d / "out.json"), "--no-store", "--quiet"]
    p = subprocess.run(argv, capture_output=True, text=True, env=slurm_cluster.env, cwd=d, timeout=90)
    assert p.returncode == 0, p.stderr
    doc = json.loads((d / "out.json").read_text())
    assert doc["complete"] and doc["mpi"]["size"] == 2
    assert doc["mpi"]["launcher"] == doc["environment"]["launcher"] == "mpiexec"
    assert doc["environment"]["slurm_job_id"] == the_job_id(d, 2)


def _job_id_of(cluster: SlurmCluster, job_name: str, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        q = cluster.client("squeue", "-h", "-n", job_name, "-t", "RUNNING", "-o", "%i")
        if q.stdout.strip():
            return q.stdout.split()[0]
        time.sleep(0.2)
    raise AssertionError(f"job {job_name} not running after {timeout_s:g} s: squeue: {q.stdout} {q.stderr}")


def _wait_for_files(paths: list[Path], size: int, srun_proc: subprocess.Popen, timeout_s: float = 30) -> None:
    """Until every rank has laid out its file (its plan is built), or fail with srun's output."""
    deadline = time.monotonic() + timeout_s
    while not all(p.exists() and p.stat().st_size == size for p in paths):
        if srun_proc.poll() is not None or time.monotonic() > deadline:
            srun_proc.kill()
            _, err = srun_proc.communicate(timeout=10)
            raise AssertionError(f"the ranks did not lay out their files: srun exit {srun_proc.returncode}: {err}")
        time.sleep(0.1)


def _start_long_run(cluster: SlurmCluster, d: Path, *srun_extra: str) -> tuple[subprocess.Popen, str]:
    """A 2-rank null-engine run of 5 minutes that only a signal ends; returns srun and the job name."""
    name = f"storlab-{uuid.uuid4().hex[:8]}"
    argv = [*srun_argv(2, name, *srun_extra), *STORLAB, "run", "--target", f"{d}/f{{rank}}", "--size", "1m",
            "--engine", "null", "--null-delay", "1ms", "--rw", "randread", "--time", "300s",
            "--json", str(d / "out.json"), "--store", str(d / "results.db"), "--quiet"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cluster.env, cwd=d)
    return proc, name


def _end(cluster: SlurmCluster, srun_proc: subprocess.Popen, job_name: str) -> None:
    """After a failed test: no job of it left running to hold the node for the next test."""
    cluster.client("scancel", "-n", job_name)
    if srun_proc.poll() is None:
        srun_proc.kill()
        srun_proc.wait()
    cluster.wait_idle(30)


def _check_partial_result_stored(d: Path, job_id: str, err: str) -> None:
    out = d / "out.json"
    assert out.exists(), f"no document written after Slurm ended the job; srun stderr: {err}"
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] in ("interrupted", "error"), doc["stop_reason"]
    assert doc["mpi"]["size"] == 2 and doc["environment"]["slurm_job_id"] == job_id
    (ph,) = doc["phases"]
    # both ranks measured for at least a second at ~1000 IOPS each before the signal
    assert [r["rank"] for r in ph["mpi"]["ranks"]] == [0, 1]
    assert all(r["read"]["ops"] > 200 for r in ph["mpi"]["ranks"]), [r["read"]["ops"] for r in ph["mpi"]["ranks"]]
    from storlab import store
    assert [x["run_id"] for x in store.list_runs(path=d / "results.db")] == [doc["run_id"]]


def test_a_job_scancelled_like_at_its_time_limit_stores_its_partial_result(slurm_cluster, shm_dir):
    # scancel ends a running job as its time limit does: SIGTERM to every task, SIGKILL KillWait
    # (2 s here) later. Within those 2 s, rank 0 must merge and store what the ranks measured.
    d = Path(shm_dir)
    proc, name = _start_long_run(slurm_cluster, d)
    try:
        job_id = _job_id_of(slurm_cluster, name)
        _wait_for_files([d / "f0", d / "f1"], 1 << 20, proc)
        time.sleep(1.5)                     # the phase runs: past the barrier, about a second measured
        c = slurm_cluster.client("scancel", job_id)
        assert c.returncode == 0, c.stderr
        _, err = proc.communicate(timeout=30 + KILL_WAIT_S)
    finally:
        _end(slurm_cluster, proc, name)
    assert slurm_cluster.wait_idle(30), "the cancelled job's tasks did not end"
    _check_partial_result_stored(d, job_id, err)


@pytest.mark.slow
def test_a_job_that_reaches_its_time_limit_stores_its_partial_result(slurm_cluster, shm_dir):
    # The real thing: srun --time=1 (a minute, Slurm's smallest limit; slurmctld checks limits
    # every 30 s, so the job ends 60 to 90 s in).
    d = Path(shm_dir)
    proc, name = _start_long_run(slurm_cluster, d, "--time=1")
    try:
        job_id = _job_id_of(slurm_cluster, name)
        _, err = proc.communicate(timeout=150)
    finally:
        _end(slurm_cluster, proc, name)
    assert "TIME LIMIT" in err, err
    assert slurm_cluster.wait_idle(30), "the timed-out job's tasks did not end"
    _check_partial_result_stored(d, job_id, err)
