"""A replay recorded by Darshan does the application's I/O and no more: fio is recorded with
darshan-runtime (LD_PRELOAD), storlab's replay of that log is recorded the same way, and Darshan's
own POSIX counters of each file (reads, writes, bytes, size bins, extents) must be equal in the
two logs. Before the fix a file fio wrote and then read was laid out in full before the replay and
written again by the replayed writes (136 writes, 16 MiB against fio's 128 writes, 8 MiB), and
the replay's request logs were written inside the target folder.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("darshan", reason="PyDarshan (pip install darshan, the replay extra) is not installed")

from storlab.jobs.darshan.log import load  # noqa: E402
from storlab.schemas import validate  # noqa: E402

MIB = 1024 * 1024
COMPARED = ("POSIX_READS", "POSIX_WRITES", "POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN", "POSIX_MAX_BYTE_READ",
            "POSIX_MAX_BYTE_WRITTEN", *(f"POSIX_SIZE_{d}_{b}" for d in ("READ", "WRITE")
                                        for b in ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M")))


def _libdarshan() -> str:
    prefix = os.environ.get("STORLAB_DARSHAN", "/tmp/darshan")
    lib = os.path.join(prefix, "lib", "libdarshan.so")
    if not os.path.exists(lib):
        pytest.skip(f"darshan-runtime not built (no {lib}; scripts/test.sh builds it with "
                    "../shared/peers/build-darshan.sh and sets STORLAB_DARSHAN)")
    return lib


def _fio() -> str:
    fio = shutil.which("fio")
    if not fio:
        pytest.skip("fio is not installed (apt-get install fio; scripts/test.sh installs it)")
    return fio


def _recorded(logs: Path, argv: list[str], under: Path) -> str:
    """Run argv under darshan-runtime (non-MPI); the one new log that holds a file under `under`
    (a program's helpers, e.g. the replay's PyDarshan reader, leave logs of their own)."""
    logs.mkdir(exist_ok=True)
    env = {**os.environ, "DARSHAN_LOGPATH": str(logs), "DARSHAN_ENABLE_NONMPI": "1", "LD_PRELOAD": _libdarshan()}
    before = set(logs.iterdir())
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=180)
    made = [str(p) for p in sorted(set(logs.iterdir()) - before)
            if any(r.path.startswith(f"{under}/") for r in load(str(p)).module_records("POSIX"))]
    assert len(made) == 1, made
    return made[0]


def _counters_by_file(log: str, under: Path) -> dict[str, dict[str, int]]:
    """Darshan's counters of every file under `under` (path relative to it), rank by rank summed."""
    out: dict[str, dict[str, int]] = {}
    for r in load(log).module_records("POSIX"):
        if r.path.startswith(f"{under}/"):
            got = out.setdefault(os.path.relpath(r.path, under), dict.fromkeys(COMPARED, 0))
            for k in COMPARED:
                got[k] = max(got[k], r.c(k)) if k.startswith("POSIX_MAX_BYTE") else got[k] + r.c(k)
    return out


def _replay_recorded(tmp_path: Path, app_log: str, target: Path, *extra: str) -> tuple[str, dict]:
    out = tmp_path / "replay.json"
    log = _recorded(tmp_path / "replay-logs", [sys.executable, "-m", "storlab", "replay", app_log, "--target",
                                               str(target), "--no-store", "-q", "--json", str(out), *extra], target)
    doc = json.loads(out.read_text())
    validate(doc)
    return log, doc


def test_a_file_written_then_read_replays_with_the_applications_counters(tmp_path):
    """fio writes 8 MiB in 64 KiB requests, then reads them back (one file, two jobs in a row)."""
    app = tmp_path / "app"
    app.mkdir()
    fio_log = _recorded(tmp_path / "app-logs", [_fio(), "--thread", "--ioengine=psync", "--bs=64k", "--size=8m",
                                                f"--filename={app}/wr.dat", "--output=/dev/null",
                                                "--name=w", "--rw=write", "--name=r", "--stonewall", "--rw=read"], app)
    target = tmp_path / "t"
    replay_log, doc = _replay_recorded(tmp_path, fio_log, target)
    want = _counters_by_file(fio_log, app)
    assert want["wr.dat"]["POSIX_WRITES"] == 128 and want["wr.dat"]["POSIX_BYTES_WRITTEN"] == 8 * MIB
    assert want["wr.dat"]["POSIX_READS"] == 128
    got = _counters_by_file(replay_log, target)
    assert got == want                      # nothing laid out, no request log among the files
    assert doc["replay"]["laid_out_bytes"] == 0
    assert not target.exists() or not any(target.rglob("*"))     # and nothing left behind


def test_only_the_bytes_read_before_they_are_written_are_laid_out(tmp_path):
    """fio reads a 4 MiB file that was there before it ran (fio lays it out itself, in a run that
    is not recorded), then overwrites its first 1 MiB and reads all of it again: the replay lays
    out the 4 MiB the first read needs, once, and writes then what fio wrote."""
    app = tmp_path / "app"
    app.mkdir()
    subprocess.run([_fio(), "--thread", "--ioengine=psync", "--bs=1m", "--size=4m", f"--filename={app}/old.dat",
                    "--output=/dev/null", "--name=make", "--rw=write"], check=True, capture_output=True, timeout=60)
    fio_log = _recorded(tmp_path / "app-logs", [_fio(), "--thread", "--ioengine=psync", "--bs=64k",
                                                f"--filename={app}/old.dat", "--output=/dev/null",
                                                "--name=r1", "--size=4m", "--rw=read",
                                                "--name=w", "--stonewall", "--size=1m", "--rw=write",
                                                "--name=r2", "--stonewall", "--size=4m", "--rw=read"], app)
    target = tmp_path / "t"
    replay_log, doc = _replay_recorded(tmp_path, fio_log, target)
    want = _counters_by_file(fio_log, app)["old.dat"]
    assert (want["POSIX_READS"], want["POSIX_WRITES"]) == (128, 16)
    got = _counters_by_file(replay_log, target)["old.dat"]
    assert doc["replay"]["laid_out_bytes"] == 4 * MIB and doc["replay"]["laid_out_files"] == 1
    # the reads are the application's; the writes are its 16 plus the 4 MiB laid out in 1 MiB pieces
    assert {k: got[k] for k in COMPARED if "READ" in k} == {k: want[k] for k in COMPARED if "READ" in k}
    assert got["POSIX_WRITES"] == 16 + 4 and got["POSIX_BYTES_WRITTEN"] == MIB + 4 * MIB
