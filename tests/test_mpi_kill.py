"""A rank killed with SIGKILL mid-run (issue 33): the other ranks stop within the rank timeout,
name the dead rank, keep what they measured (the document, complete: false) and exit non-zero;
they never hang.

Launched as a batch job launches ranks: `mpiexec -disable-auto-cleanup` (without it MPICH's
mpiexec SIGKILLs every rank when one dies, and the launcher, not storlab, decides the outcome),
each rank under a shell that outlives it and records the rank's own exit status. The test's hard
timeout ends a hang; everything the test started is killed in a `finally`.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from test_mpi_runs import MPIEXEC, _have_mpi4py, _rank_pids

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich, or a site MPI on PATH)"),
    pytest.mark.skipif(not _have_mpi4py(), reason="mpi4py not installed (pip install 'storlab[mpi]')"),
]

RANK_TIMEOUT_S = 5
# From the kill to the survivor's exit: the rank timeout, the clean-up and the final exchange
# (each bounded by the timeout) and start-up noise on two shared cores.
STOP_WITHIN_S = 6 * RANK_TIMEOUT_S
HARD_TIMEOUT_S = 90


class Launch:
    """`mpiexec -disable-auto-cleanup -n 2 rank.sh python -m storlab ARGS`, each rank's exit
    status written by its shell to rc.<rank>."""

    def __init__(self, tmp_path: Path, args: list[str]) -> None:
        self.tmp = tmp_path
        wrap = tmp_path / "rank.sh"
        # the shell ignores mpiexec's SIGUSR1 notice (it is meant for the rank), outlives the rank
        # and records its exit status
        wrap.write_text(f"#!/bin/sh\ntrap '' USR1\n\"$@\"\necho $? > {tmp_path}/rc.$PMI_RANK\n")
        wrap.chmod(0o755)
        self.marker = uuid.uuid4().hex
        self.proc = subprocess.Popen(
            [MPIEXEC, "-disable-auto-cleanup", "-n", "2", str(wrap), sys.executable, "-m", "storlab", *args],
            env={**os.environ, "STORLAB_TEST_MARK": self.marker}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.seen: set[int] = set()

    def pids(self) -> dict[int, int]:
        """The storlab ranks' own processes (python, not their shells), by rank."""
        found = {}
        for r, p in _rank_pids(self.marker).items():
            try:
                if b"python" in Path(f"/proc/{p}/cmdline").read_bytes():
                    found[r] = p
            except OSError:
                continue
        self.seen.update(found.values())
        return found

    def wait_for(self, ready, what: str, within_s: float = 120) -> dict[int, int]:
        deadline = time.monotonic() + within_s
        while True:
            pids = self.pids()
            if len(pids) == 2 and ready():
                return pids
            if self.proc.poll() is not None:
                pytest.fail(f"mpiexec ended before {what}: {self.proc.communicate()[1][-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {within_s} s")
            time.sleep(0.05)

    def kill_rank_and_wait(self, pids: dict[int, int], rank: int) -> tuple[float, str]:
        """SIGKILL one rank; (seconds until mpiexec ended, its stderr). Fails on a hang."""
        os.kill(pids[rank], signal.SIGKILL)
        t0 = time.monotonic()
        try:
            _, err = self.proc.communicate(timeout=HARD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the surviving rank hung: still running {HARD_TIMEOUT_S} s after rank {rank} was "
                        f"killed with SIGKILL")
        return time.monotonic() - t0, err

    def exit_status(self, rank: int) -> int | None:
        rc = self.tmp / f"rc.{rank}"
        return int(rc.read_text()) if rc.exists() else None

    def close(self) -> None:
        """Kill whatever is left: mpiexec's session and every rank seen (a hung rank included)."""
        for pid in self.seen:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.communicate(timeout=10)
        except (subprocess.TimeoutExpired, ValueError):
            pass


def _one_error_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith(f"storlab {command}: error:")]
    assert len(lines) == 1, err
    return lines[0]


def test_a_rank_killed_mid_epoch_ends_storlab_workload_with_the_epochs_done(tmp_path):
    """SIGKILL of rank 1 of `storlab workload` while the ranks train (they meet at every step's
    barrier): rank 0 stops within the rank timeout, names rank 1, writes the epochs it finished
    (complete: false) and exits non-zero. Before the rank interface, rank 0 waited in MPI's
    Allreduce for ever and ignored SIGTERM."""
    folder = tmp_path / "d"
    out = tmp_path / "r.json"
    launch = Launch(tmp_path, [
        "workload", "unet3d_h100", "--set", f"dataset.folder={folder}", "--set", "dataset.record_length=8192",
        "--set", "dataset.record_length_stdev=0", "--set", "dataset.files=32", "--set", "reader.batch_size=2",
        "--set", "train.computation_time=0.02", "--set", "checkpoint.enabled=false", "--epochs", "1000",
        "--rank-timeout", str(RANK_TIMEOUT_S), "--json", str(out), "--no-store", "--quiet"])
    try:
        manifest = folder / ".storlab-dataset.json"
        pids = launch.wait_for(manifest.exists, "dataset written")
        time.sleep(1.5)                       # training: a few epochs of 8 steps, 0.2 s each
        took, err = launch.kill_rank_and_wait(pids, 1)
    finally:
        launch.close()
    assert took < STOP_WITHIN_S, f"rank 0 took {took:.0f} s to stop: {err[-2000:]}"
    assert "Traceback" not in err, err
    line = _one_error_line(err, "workload")
    assert "rank 1 (node" in line, line
    assert launch.exit_status(0) not in (None, 0), err
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "error"
    assert "rank 1 (node" in doc["error"]
    assert 1 <= doc["epochs_done"] < 1000 and len(doc["epochs"]) == doc["epochs_done"]
    assert doc["ranks"] == 2 and {a["rank"] for a in doc["per_accelerator"]} == {0}   # rank 1 sent nothing


def test_a_rank_killed_mid_checkpoint_keeps_the_checkpoints_done_and_removes_every_shard(tmp_path):
    """SIGKILL of rank 1 of a checkpoint workload between its checkpoints: rank 0 stops within the
    rank timeout, names rank 1, keeps the checkpoints done (complete: false), exits non-zero and
    removes the shards of both ranks (each shard is named by rank 0's run, so rank 0 knows the
    dead rank's)."""
    out = tmp_path / "r.json"
    ck = tmp_path / "ck"
    launch = Launch(tmp_path, [
        "workload", "llama3_8b", "--scale", "0.0002", "--set", f"checkpoint.folder={ck}",
        "--set", "checkpoint.count_write=1000", "--set", "checkpoint.count_read=1",
        "--rank-timeout", str(RANK_TIMEOUT_S), "--json", str(out), "--no-store", "--quiet"])
    try:
        # 2 writers x 2 files (llama3_8b's model and optimizer shards) per checkpoint: the second
        # one's files appear once every rank ended the first
        pids = launch.wait_for(lambda: ck.is_dir() and len(os.listdir(ck)) >= 8, "a checkpoint written")
        took, err = launch.kill_rank_and_wait(pids, 1)
    finally:
        launch.close()
    assert took < STOP_WITHIN_S, f"rank 0 took {took:.0f} s to stop: {err[-2000:]}"
    assert "Traceback" not in err, err
    assert "rank 1 (node" in _one_error_line(err, "workload")
    assert launch.exit_status(0) not in (None, 0), err
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "error" and "rank 1 (node" in doc["error"]
    assert 1 <= len(doc["checkpoints"]) < 1000 and all(c["kind"] == "write" for c in doc["checkpoints"])
    assert os.listdir(ck) == [], "the dead rank's shards are removed too"


def test_a_rank_killed_mid_phase_ends_storlab_io500_with_the_phases_done(shm_dir, tmp_path):
    """SIGKILL of rank 1 of `storlab io500` inside ior-easy-write (its engine run going, no rank in
    a collective): rank 0 stops within the rank timeout, names rank 1, writes the document
    (complete: false) and the result files, removes what both ranks made, and exits non-zero."""
    d = Path(shm_dir)
    (d / "data").mkdir()
    cfg = tmp_path / "c.ini"
    cfg.write_text(f"[global]\ndatadir = {d}/data\nresultdir = {d}/res\n[debug]\nstonewall-time = 30\n"
                   "[ior-easy]\ntransferSize = 1m\nblockSize = 100000m\n")
    out = tmp_path / "doc.json"
    launch = Launch(tmp_path, ["io500", str(cfg), "--timestamp", "T", "--json", str(out), "--no-store", "--quiet",
                               "--rank-timeout", str(RANK_TIMEOUT_S)])
    easy = d / "data" / "T" / "ior-easy"
    try:
        pids = launch.wait_for(lambda: easy.is_dir() and len(os.listdir(easy)) == 2, "ior-easy-write started")
        time.sleep(1.0)                       # inside ior-easy-write (a 30 s stonewall)
        took, err = launch.kill_rank_and_wait(pids, 1)
    finally:
        launch.close()
    assert took < STOP_WITHIN_S, f"rank 0 took {took:.0f} s to stop: {err[-2000:]}"
    assert "Traceback" not in err, err
    line = _one_error_line(err, "io500")
    assert "rank 1 (node" in line, line
    assert launch.exit_status(0) not in (None, 0), err
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "error"
    assert "rank 1 (node" in doc["error"]
    assert [p["name"] for p in doc["phases"]] == ["ior-easy-write"]
    assert not doc["phases"][0]["complete"] and not doc["score"]["valid"]
    assert (d / "res" / "T" / "result.txt").exists()
    assert os.listdir(d / "data") == [], "what the dead rank made is removed too"


SIGTERM_IN_A_WAIT_SCRIPT = """
import json, os, threading, time
from mpi4py import MPI
from storlab.measure.mpi.comm import Comm, Liveness
from storlab.measure.ranks import RankFailure
from storlab.signals import STOP

STOP.install()
live = Liveness(MPI.COMM_WORLD, 3.0)
comm = Comm(MPI.COMM_WORLD, live)
comm.barrier()
if comm.rank == 0:
    out, done = {}, threading.Event()
    def wait():                  # a collective in a thread of its own: a signal cannot raise there
        try:
            comm.barrier()
        except RankFailure as e:
            out["raised"], out["at"] = str(e), time.time()
        done.set()
    threading.Thread(target=wait, daemon=True).start()
    print(f"waiting {os.getpid()}", flush=True)
    while not done.is_set():
        try:
            done.wait(0.1)
        except KeyboardInterrupt:
            out["signal_at"] = time.time()
    print(json.dumps(out), flush=True)
else:
    t0 = time.time()             # alive (heartbeats go on) and busy: never comes to the barrier
    while live.failure is None and time.time() - t0 < 60:
        time.sleep(0.05)
    print(json.dumps({"heard": str(live.failure)}), flush=True)
live.close()
os._exit(0)
"""


def test_sigterm_ends_a_wait_for_a_rank_that_never_comes():
    """A rank waiting in a collective where a signal cannot raise (another thread) for a rank
    that is alive but never comes: after SIGTERM it waits at most the rank timeout, then gives
    up, names itself as interrupted by SIGTERM, and the other rank hears of it."""
    proc = subprocess.Popen([MPIEXEC, "-n", "2", sys.executable, "-c", SIGTERM_IN_A_WAIT_SCRIPT],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("waiting "), line + proc.stderr.read()
        time.sleep(0.5)
        os.kill(int(line.split()[1]), signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=HARD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail("the waiting rank ignored SIGTERM")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    docs = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    rank0 = next(d for d in docs if "signal_at" in d or "raised" in d)
    heard = next(d["heard"] for d in docs if "heard" in d)
    assert "rank 0 (node" in rank0["raised"] and "interrupted by SIGTERM" in rank0["raised"], rank0
    assert 3.0 <= rank0["at"] - rank0["signal_at"] < 6.0, rank0      # the 3 s rank timeout, then at once
    assert "rank 0 (node" in heard and "interrupted by SIGTERM" in heard, heard
