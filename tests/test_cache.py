"""Cache control: sizing for in/out of cache, dropping the page cache between phases (with the
residency it leaves), and the warnings that flag cache-served results."""
import os

import pytest
from storlab.jobs.job import resolve_job
from storlab.measure import cache
from storlab.measure.benchmark import PhaseHooks
from storlab.measure.runner import run_job

GiB = 1 << 30


def test_working_set_sizes():
    assert cache.working_set_bytes("in", 16 * GiB, 0, 0.5, 2) == 8 * GiB
    assert cache.working_set_bytes("in", 16 * GiB, 2 * GiB, 0.5, 2) == 2 * GiB   # declared cache wins
    assert cache.working_set_bytes("out", 16 * GiB, 2 * GiB, 0.5, 2) == 34 * GiB
    assert cache.working_set_bytes("off", 16 * GiB, 0, 0.5, 2) is None


def test_sizing_fills_missing_sizes_and_warns_on_contradictions():
    job = resolve_job({"target": ["/a", "/b"], "bs": "1m", "cache": "out"})
    warnings = cache.apply_sizing(job, job.run, ram_bytes=4 * GiB)
    assert warnings == []
    assert job.phases[0].groups[0].values["size"] == 4 * GiB  # (2 x 4 GiB) over two targets
    job = resolve_job({"target": ["/a"], "size": "1g", "cache": "out"})
    warnings = cache.apply_sizing(job, job.run, ram_bytes=4 * GiB)
    assert [w["code"] for w in warnings] == ["cache_size_mismatch"]
    job = resolve_job({"target": ["/a"], "cache": "in", "cache_bytes": "512m", "threads": "2",
                       "files": "per_thread"})
    cache.apply_sizing(job, job.run, ram_bytes=4 * GiB)
    assert job.phases[0].groups[0].values["size"] == 256 << 20  # two files share the 512 MiB


def test_drop_leaves_nothing_resident_on_a_disk_file(tmp_path):
    from storlab.devices.safety import describe_path

    path = tmp_path / "f.dat"
    if describe_path(str(tmp_path))["fs_type"] == "tmpfs":
        pytest.skip("tmp_path is on tmpfs, whose pages are the storage and cannot be dropped")
    path.write_bytes(os.urandom(4 << 20))
    assert cache.resident_bytes(str(path)) == 4 << 20
    info = cache.drop_page_cache([str(path)])
    assert info["method"] in ("drop_caches", "fadvise")
    assert info["resident_before_bytes"] == 4 << 20
    assert info["resident_after_bytes"] == 0


def test_fadvise_is_used_without_root(tmp_path, monkeypatch):
    path = tmp_path / "f.dat"
    path.write_bytes(os.urandom(1 << 20))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    info = cache.drop_page_cache([str(path)])
    assert info["method"] == "fadvise" and info["resident_after_bytes"] == 0


def test_auto_drops_between_write_and_read_of_the_same_file(tmp_path):
    path = str(tmp_path / "wr.dat")
    job = resolve_job({"target": [path], "size": "8m", "bs": "1m", "cache": "auto"},
                      phases=[{"name": "write", "rw": "write"}, {"name": "read", "rw": "read"}])
    doc = run_job(job)
    write, read = doc["phases"]
    assert "cache" not in write
    assert read["cache"]["dropped"] == [path] and read["cache"]["resident_after_bytes"] == 0
    # a cold cache and one pass over the data: no page-cache warning for the read
    assert "small_buffered_read" not in {w["code"] for w in doc["warnings"]}


def test_cached_reads_are_flagged(shm_dir):
    doc = run_job(resolve_job({"target": [f"{shm_dir}/c.dat"], "size": "16m", "rw": "randread",
                               "time": "300ms"}))
    codes = {w["code"] for w in doc["warnings"]}
    assert {"small_buffered_read", "likely_cached"} <= codes
    # a declared ceiling decides instead of the built-in rules
    doc = run_job(resolve_job({"target": [f"{shm_dir}/c.dat"], "rw": "read", "bs": "1m",
                               "bw_ceiling": "1TB/s"}))
    assert "likely_cached" not in {w["code"] for w in doc["warnings"]}
    doc = run_job(resolve_job({"target": [f"{shm_dir}/c.dat"], "rw": "read", "bs": "1m",
                               "bw_ceiling": "1MB/s"}))
    assert "likely_cached" in {w["code"] for w in doc["warnings"]}


def test_direct_reads_are_not_flagged(shm_dir):
    doc = run_job(resolve_job({"target": [f"{shm_dir}/d.dat"], "size": "16m", "rw": "read", "bs": "1m",
                               "direct": True}))
    assert not {"small_buffered_read", "likely_cached"} & {w["code"] for w in doc["warnings"]}


class ResidencyAtStart(PhaseHooks):
    """Measures, independently of the runner's own record, how much of a file is in the page
    cache at the moment each phase's clock starts."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.resident: dict[str, int | None] = {}

    def before_start(self, phase, run) -> None:
        self.resident[phase.name] = cache.resident_bytes(self.path)


def _write_then_read(path: str, **options) -> tuple[dict, ResidencyAtStart]:
    job = resolve_job({"target": [path], "size": "32m", "bs": "1m", **options},
                      phases=[{"name": "write", "rw": "write"}, {"name": "read", "rw": "read"}])
    hooks = ResidencyAtStart(path)
    return run_job(job, hooks=hooks), hooks


@pytest.mark.root
@pytest.mark.loop
def test_reads_of_a_just_written_file_came_from_the_page_cache(ext4_dir):
    """Regression: a buffered re-read of a file storlab had just written ran at memory speed,
    because its pages were still cached; fio drops them first (invalidate=1), and so do we now."""
    path = f"{ext4_dir}/rw.dat"
    size = 32 << 20
    doc, seen = _write_then_read(path)
    write, read = doc["phases"]
    assert seen.resident["read"] is not None and seen.resident["read"] <= size // 100
    inv = read["invalidate"]
    assert inv["enabled"] and [t["method"] for t in inv["targets"]] == ["fadvise"]
    assert inv["resident_before_bytes"] >= size * 9 // 10   # the write left it cached ...
    assert inv["resident_after_bytes"] <= size // 100       # ... and it was dropped
    assert read["read"]["bytes"] == size
    # a default run on a disk file does not call its own result cache-served
    assert not {"likely_cached", "small_buffered_read"} & {w["code"] for w in doc["warnings"]}

    doc, seen = _write_then_read(path, invalidate="off")
    read = doc["phases"][1]
    assert seen.resident["read"] >= size * 9 // 10
    inv = read["invalidate"]
    assert not inv["enabled"] and inv["targets"][0]["method"] == "none"
    assert inv["targets"][0]["reason"] == "invalidate off"
    assert inv["resident_before_bytes"] == inv["resident_after_bytes"] >= size * 9 // 10


@pytest.mark.root
@pytest.mark.loop
def test_cache_in_keeps_the_pages(ext4_dir):
    doc, seen = _write_then_read(f"{ext4_dir}/in.dat", cache="in")
    inv = doc["phases"][1]["invalidate"]
    assert inv["targets"][0]["reason"] == "cache in keeps the working set cached"
    assert seen.resident["read"] >= (32 << 20) * 9 // 10


def test_invalidation_drops_a_disk_file_without_root(tmp_path, monkeypatch):
    from storlab.devices.safety import describe_path

    if describe_path(str(tmp_path))["fs_type"] in ("tmpfs", "ramfs"):
        pytest.skip("tmp_path is on tmpfs, whose pages are the storage and cannot be dropped")
    path = tmp_path / "f.dat"
    path.write_bytes(os.urandom(4 << 20))   # dirty pages: fsync first, or fadvise leaves them
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    rec = cache.invalidate_target(str(path))
    assert (rec["method"], rec["reason"]) == ("fadvise", None)
    assert rec["resident_before_bytes"] == 4 << 20 and rec["resident_after_bytes"] == 0


def test_tmpfs_is_recorded_as_not_droppable(shm_dir):
    path = f"{shm_dir}/t.dat"
    with open(path, "wb") as f:
        f.write(os.urandom(1 << 20))
    rec = cache.invalidate_target(path)
    assert rec["method"] == "none" and rec["reason"].startswith("not droppable: tmpfs")
    assert rec["resident_before_bytes"] == rec["resident_after_bytes"] == 1 << 20
    # and a read of it is still flagged: not cold, whatever the invalidation said
    doc = run_job(resolve_job({"target": [path], "rw": "read", "bs": "4k"}))
    assert doc["phases"][0]["invalidate"]["targets"][0]["method"] == "none"
    assert "small_buffered_read" in {w["code"] for w in doc["warnings"]}


@pytest.mark.root
@pytest.mark.loop
def test_block_device_buffers_are_flushed_with_blkflsbuf(loop_device):
    dev = loop_device(16 << 20)
    # Held open, as the engine's plan holds its targets: the last close of a block device drops
    # its buffers by itself.
    with open(dev, "r+b", buffering=0) as f:
        f.write(os.urandom(8 << 20))
        assert cache.resident_bytes(dev) >= 8 << 20
        rec = cache.invalidate_target(dev)
        assert (rec["method"], rec["reason"]) == ("blkflsbuf", None)
        assert rec["resident_before_bytes"] >= 8 << 20 and rec["resident_after_bytes"] == 0


def test_a_nonexistent_target_is_recorded_not_dropped(tmp_path):
    rec = cache.invalidate_target(str(tmp_path / "missing"))
    assert rec["method"] == "none" and rec["reason"].startswith("cannot stat")


def test_a_read_rate_no_memory_copy_reaches_is_judged_without_the_memory_copy_probe(monkeypatch):
    def probe():
        raise AssertionError("the 128 MiB memory-copy probe ran")
    monkeypatch.setattr(cache, "memcpy_rate_bytes", probe)
    # 400 MB/s per thread, 20 us median: a device's figure, judged without probing
    assert cache.likely_cached(800e6, 2, None, 20_000) is None
    # 3 GB/s per thread could be a page-cache copy: only then is the host's copy rate measured
    monkeypatch.setattr(cache, "memcpy_rate_bytes", lambda: 4e9)
    assert "memory-copy rate" in cache.likely_cached(3e9, 1, None, 20_000)
    monkeypatch.setattr(cache, "memcpy_rate_bytes", lambda: 10e9)
    assert cache.likely_cached(3e9, 1, None, 20_000) is None


def test_a_memory_device_is_not_invalidated_and_says_why():
    record = cache.invalidate_target("/dev/zero")
    assert record == {"path": "/dev/zero", "method": "none",
                      "reason": "a character device (/dev/null, /dev/zero, /dev/full): no page cache to drop",
                      "resident_before_bytes": None, "resident_after_bytes": None}
