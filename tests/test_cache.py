"""Cache control: sizing for in/out of cache, dropping the page cache between phases (with the
residency it leaves), and the warnings that flag cache-served results."""
import os

import pytest

from storlab import cache
from storlab.job import resolve_job
from storlab.runner import run_job

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
