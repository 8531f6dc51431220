"""Signals and leftovers (issue 13): SIGTERM and SIGHUP stop a run like Ctrl-C, a second signal
does not lose the result, a layout stops on a signal, a killed run leaves its last checkpoint, a
run that cannot fit is refused before anything is written, and a failed run leaves no file it made.
Each test starts storlab as a subprocess and sends it real signals."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import have_root, wait_for_progress

STORLAB = [sys.executable, "-m", "storlab"]


def start(args: list[str], cwd: Path | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "python")}
    return subprocess.Popen([*STORLAB, *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def stored_runs(store: Path) -> list[tuple]:
    with sqlite3.connect(store) as db:
        return db.execute("SELECT run_id, complete, stop_reason FROM runs").fetchall()


def null_run(out: Path, store: Path, *extra: str) -> list[str]:
    """A time-based run on the null backend in the default scratch folder (cwd), checkpointing
    often (wait_for_progress reads the checkpoints to know the phase is under way)."""
    return ["run", "--size", "1m", "--rw", "read", "--engine", "null", "--null-delay", "100us",
            "--time", "60s", "--checkpoint-every", "0.2s", "--json", str(out), "--store", str(store),
            "-q", *extra]


@pytest.mark.parametrize("signo, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_kill_storlab_with_nothing_stored_and_the_scratch_folder_left(tmp_path, signo, code):
    work = tmp_path / "work"
    work.mkdir()
    out, store = tmp_path / "r.json", tmp_path / "s.db"
    proc = start(null_run(out, store), cwd=work)
    wait_for_progress(proc, out)
    proc.send_signal(signo)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == code, err
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "interrupted"
    assert doc["signal"] == signal.Signals(signo).name
    assert doc["phases"][0]["read"]["ops"] > 100
    assert stored_runs(store) == [(doc["run_id"], 0, "interrupted")]
    assert list(work.iterdir()) == [], "the scratch folder must be removed"


@pytest.mark.parametrize("gap_s", [0.2, 0.7])
def test_a_second_ctrl_c_0_2_s_after_the_first_loses_the_result(tmp_path, gap_s):
    out, store = tmp_path / "r.json", tmp_path / "s.db"
    # The first request takes 5 s: after the first Ctrl-C the phase waits for it, and the second
    # Ctrl-C arrives during that wait (0.7 s: surely after the first was handled).
    proc = start(["run", "--target", str(tmp_path / "t.dat"), "--size", "1m", "--engine", "null",
                  "--null-delay", "5s", "--time", "60s", "--checkpoint-every", "0.2s", "--json", str(out),
                  "--store", str(store), "-q"])
    wait_for_progress(proc, out, min_ops=0)     # the phase runs: its first request is in flight
    proc.send_signal(signal.SIGINT)
    time.sleep(gap_s)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "still stopping and saving" in err
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "interrupted"
    assert stored_runs(store) == [(doc["run_id"], 0, "interrupted")]


def test_ctrl_c_during_the_layout_of_a_large_file_is_ignored_until_it_ends(tmp_path):
    job = tmp_path / "job.toml"
    small, big = tmp_path / "small.dat", tmp_path / "big.dat"
    job.write_text(f"""
[[phase]]
name = "small"
target = "{small}"
size = "1m"
rw = "write"

[[phase]]
name = "big"
target = "{big}"
size = "16g"
rw = "read"
""")
    out, store = tmp_path / "r.json", tmp_path / "s.db"
    proc = start(["run", str(job), "--json", str(out), "--store", str(store), "-q"])
    deadline = time.monotonic() + 20
    while not (big.exists() and big.stat().st_size > (64 << 20)):   # the layout is under way
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[1]
        time.sleep(0.05)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 3, "the layout must stop promptly"
    assert proc.returncode == 130, err
    assert not big.exists(), "the half-laid-out file storlab created must be removed"
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "interrupted"
    assert [p["name"] for p in doc["phases"]] == ["small"]    # what was measured is kept
    assert stored_runs(store) == [(doc["run_id"], 0, "interrupted")]


def test_a_killed_single_phase_run_leaves_no_checkpoint(tmp_path):
    out, store = tmp_path / "r.json", tmp_path / "s.db"
    proc = start(null_run(out, store, "--checkpoint-every", "0.5s"), cwd=tmp_path)
    wait_for_progress(proc, out)
    proc.kill()
    proc.communicate(timeout=20)
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "running"
    phase = doc["phases"][0]
    assert phase["stop_reason"] == "running" and phase["progress"]["ops"] > 100
    assert phase["progress"]["read_ops"] == phase["progress"]["ops"]
    assert stored_runs(store) == [(doc["run_id"], 0, "running")]
    from importlib import resources

    import jsonschema

    schema = json.loads(resources.files("storlab.schemas").joinpath("run-1.schema.json").read_text())
    jsonschema.validate(doc, schema)


def test_sigterm_leaves_the_metadata_tree_of_storlab_meta(tmp_path):
    target = tmp_path / "meta"
    target.mkdir()
    out = tmp_path / "m.json"
    proc = start(["meta", "--target", str(target), "--files", "2000000", "--json", str(out), "--no-store", "-q"])
    deadline = time.monotonic() + 20
    while not any(target.iterdir()):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    time.sleep(1.0)   # files are being created
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "interrupted"
    assert doc["cleanup"]["files_removed"] > 0
    assert list(target.iterdir()) == [], "the metadata tree must be removed"


# -- leftovers and free space (tiny tmpfs mounts) ------------------------------------------------
@pytest.fixture
def tiny_fs(tmp_path):
    """A 32 MiB tmpfs mounted for the test."""
    if not have_root():
        pytest.skip("needs root to mount a tmpfs")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def run_cli(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    proc = start(args, cwd=cwd)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.root
def test_a_job_that_cannot_fit_preallocates_until_enospc_and_leaves_its_file(tiny_fs):
    target = tiny_fs / "big.dat"
    p = run_cli(["run", "--target", str(target), "--size", "64m", "--rw", "write", "--time", "1s",
                 "--no-store", "-q"])
    assert p.returncode == 2, p.stderr
    assert "needs 67108864 bytes" in p.stderr and "free" in p.stderr
    assert list(tiny_fs.iterdir()) == []


@pytest.mark.root
def test_cache_out_choosing_twice_the_ram_on_a_small_file_system_is_refused_up_front(tiny_fs):
    p = run_cli(["run", "--target", str(tiny_fs / "c.dat"), "--rw", "read", "--cache", "out",
                 "--time", "1s", "--no-store", "-q"])
    assert p.returncode == 2, p.stderr
    assert "needs" in p.stderr and "free" in p.stderr
    assert list(tiny_fs.iterdir()) == []
    used = os.statvfs(tiny_fs)
    assert used.f_bfree == used.f_blocks, "nothing may be written before the refusal"


@pytest.mark.root
def test_enospc_during_the_run_leaves_the_target_file_storlab_created(tiny_fs):
    # The read phase's layout fits; the second group's file does not: the build fails part-way.
    job = tiny_fs.parent / "job.toml"
    job.write_text(f"""
[[phase]]
name = "both"
[[phase.group]]
name = "a"
target = "{tiny_fs / 'a.dat'}"
size = "20m"
rw = "read"
[[phase.group]]
name = "b"
target = "{tiny_fs / 'b.dat'}"
size = "20m"
rw = "read"
""")
    p = run_cli(["run", str(job), "--time", "1s", "--no-store", "-q"])
    assert p.returncode == 2, p.stderr
    assert "b.dat" in p.stderr and "free" in p.stderr
    assert list(tiny_fs.iterdir()) == [], "a.dat was made by this run and must be removed"


def test_an_alignment_error_leaves_the_target_file(tmp_path):
    target = tmp_path / "odd.dat"
    # the engine checks O_DIRECT's alignment once the plan has created the file
    p = run_cli(["run", "--target", str(target), "--size", "1m", "--bs", "1000", "--direct",
                 "--rw", "write", "--time", "1s", "--no-store", "-q"])
    assert p.returncode == 2 and "is not a multiple of" in p.stderr and "O_DIRECT" in p.stderr, p.stderr
    assert not target.exists(), "the file this run created must be removed"
