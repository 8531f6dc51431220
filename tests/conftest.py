"""Shared fixtures: a private results store for every test, every document a test writes checked
against its JSON Schema, fast scratch space, loop devices.

Tests that need root or loop devices are marked (`root`, `loop`) and skip with the reason when the
machine cannot provide them.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_store(tmp_path, monkeypatch):
    """Never write to the user's real results store from a test."""
    monkeypatch.setenv("STORLAB_STORE", str(tmp_path / "results.db"))
    return tmp_path / "results.db"


@pytest.fixture(autouse=True)
def documents_match_their_schemas(monkeypatch):
    """Every storlab document a test turns into JSON (a --json file or stdout, the store, an
    export, a fixture written by the test) is validated against its schema in storlab/schemas;
    the test fails at teardown naming the first place that breaks it. Documents are recognised by
    a `schema` starting with "storlab."; the store's summary rows (`results list --json`) repeat
    the schema but are not documents, and are told apart by their `saved_at`. In-process only
    (not in subprocesses)."""
    try:
        import jsonschema  # noqa: F401 - a test dependency; without it test_schemas skips too
        from storlab.schemas import DocumentInvalid, validate
    except ImportError:
        yield
        return
    broken: list[str] = []
    dumps, dump = json.dumps, json.dump

    def check(obj) -> None:
        for doc in obj if isinstance(obj, list) else [obj]:
            if (isinstance(doc, dict) and str(doc.get("schema", "")).startswith("storlab.")
                    and "saved_at" not in doc):
                try:
                    validate(doc)
                except DocumentInvalid as e:
                    broken.append(f"{doc.get('schema')} kind {doc.get('kind')} run {doc.get('run_id')}: {e}")

    def checked_dumps(obj, *args, **kwargs):
        check(obj)
        return dumps(obj, *args, **kwargs)

    def checked_dump(obj, fp, *args, **kwargs):
        check(obj)
        return dump(obj, fp, *args, **kwargs)

    monkeypatch.setattr(json, "dumps", checked_dumps)
    monkeypatch.setattr(json, "dump", checked_dump)
    yield
    if broken:
        pytest.fail(f"{len(broken)} document(s) break their schema; first: {broken[0]}", pytrace=False)


def _mpich_segments() -> set[str]:
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith("mpich_shm_")}
    except OSError:
        return set()


def _mapped_anywhere(path: str) -> bool:
    """Whether any process maps `path` (an MPICH job still running, the test's or another's)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/maps") as f:
                if path in f.read():
                    return True
        except OSError:
            continue
    return False


@pytest.fixture(autouse=True)
def no_orphaned_mpich_segments():
    """MPICH unlinks its shared-memory segment once the ranks of a node have mapped it; ranks a
    test kills before that leave it in /dev/shm. A segment the test made that no process maps
    once it is over is such an orphan, and goes."""
    before = _mpich_segments()
    yield
    for name in sorted(_mpich_segments() - before):
        path = f"/dev/shm/{name}"
        if not _mapped_anywhere(path):
            try:
                os.unlink(path)
            except OSError:
                pass


@pytest.fixture
def shm_dir():
    """A scratch folder in /dev/shm (tmpfs: fast, supports O_DIRECT on Linux >= 6.6)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    d = tempfile.mkdtemp(prefix="storlab-test-", dir=base)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def wait_for_progress(proc: subprocess.Popen, out: Path, min_ops: int = 100,
                      timeout_s: float = 120) -> dict:
    """Poll the checkpoint a `storlab run --checkpoint-every T --json OUT` rewrites until its running
    phase has done at least min_ops operations, and return it. Signalling a run after this, not
    after a fixed sleep, hits the phase mid-run however slowly a loaded host starts storlab."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, f"storlab ended before any progress: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no checkpoint with {min_ops} ops in {out} after {timeout_s} s"
        try:
            doc = json.loads(out.read_text())
        except (OSError, ValueError):   # not written yet
            doc = None
        running = [p for p in (doc or {}).get("phases", []) if p.get("stop_reason") == "running"]
        if running and running[-1].get("progress", {}).get("ops", 0) >= min_ops:
            return doc
        time.sleep(0.05)


def have_root() -> bool:
    return os.geteuid() == 0


def have_losetup() -> bool:
    return shutil.which("losetup") is not None and os.path.exists("/dev/loop-control")


@pytest.fixture
def loop_device(tmp_path):
    """Factory: attach a loop device over a new sparse file of the given size; detached afterwards."""
    if not have_root():
        pytest.skip("needs root to attach loop devices")
    if not have_losetup():
        pytest.skip("losetup or /dev/loop-control not available")
    attached: list[str] = []
    backings: list[str] = []

    def make(size_bytes: int = 64 << 20, backing_dir: str | None = None) -> str:
        # a unique name: other test sessions may use the same backing_dir (e.g. /dev/shm) at once
        fd, backing = tempfile.mkstemp(prefix="storlab-test-loop-", suffix=".img", dir=backing_dir or str(tmp_path))
        os.close(fd)
        backings.append(backing)
        with open(backing, "wb") as f:
            f.truncate(size_bytes)
        out = subprocess.run(["losetup", "-f", "--show", backing], capture_output=True, text=True)
        if out.returncode != 0:
            pytest.skip(f"losetup failed: {out.stderr.strip()}")
        dev = out.stdout.strip()
        attached.append(dev)
        return dev

    yield make
    for dev in attached:
        subprocess.run(["losetup", "-d", dev], capture_output=True)
    for backing in backings:     # those outside tmp_path (e.g. in /dev/shm) are not removed for us
        if os.path.exists(backing):
            os.unlink(backing)


@pytest.fixture
def ext4_mount(loop_device, tmp_path):
    """Factory: a fresh ext4 file system of the given size on a loop device, mounted (a real disk
    file system: its page cache can be dropped, unlike tmpfs); returns the mount point, which is
    unmounted afterwards."""
    if not shutil.which("mkfs.ext4"):
        pytest.skip("mkfs.ext4 not installed")
    mounted: list[str] = []

    def make(size_bytes: int = 128 << 20, backing_dir: str | None = None) -> str:
        dev = loop_device(size_bytes, backing_dir=backing_dir)
        subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True)
        mnt = tmp_path / f"ext4-{len(mounted)}"
        mnt.mkdir()
        r = subprocess.run(["mount", dev, str(mnt)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount ext4 on {dev}: {r.stderr.strip()}")
        mounted.append(str(mnt))
        return str(mnt)

    yield make
    for mnt in reversed(mounted):
        subprocess.run(["umount", mnt], capture_output=True)


@pytest.fixture
def ext4_dir(ext4_mount):
    """A fresh 128 MiB ext4 file system on a loop device, mounted; yields the mount point."""
    yield ext4_mount(128 << 20)
