"""The default main job (`storlab run` with no arguments): four corners, writes before reads, O_DIRECT
where the scratch folder allows it and the out-of-cache method where it does not, one table, no
warning about itself, nothing left behind."""
from __future__ import annotations

import json
import os
import pathlib

import pytest
from storlab.cli.main import main
from storlab.jobs import mainjob
from storlab.measure import scratch

# Long enough that no phase is under checks.MIN_RELIABLE_SECONDS (a 1 s phase can measure 0.9999 s).
PHASE_TIME = "1.2s"


def run_main_job(cwd, capsys, monkeypatch, *extra: str) -> tuple[int, dict, str, str]:
    """`storlab run` with only run-level options (and `extra`), in `cwd`; (rc, doc, stdout, stderr)."""
    monkeypatch.chdir(cwd)
    out = os.path.join("/dev/shm" if os.path.isdir("/dev/shm") else "/tmp", f"storlab-mainjob-{os.getpid()}.json")
    try:
        rc = main(["run", "--time", PHASE_TIME, "--json", out, "--no-store", *extra])
        with open(out) as f:
            doc = json.load(f)
    finally:
        if os.path.exists(out):
            os.unlink(out)
    captured = capsys.readouterr()
    return rc, doc, captured.out, captured.err


def assert_one_clean_table(doc: dict, out: str, err: str, cwd) -> None:
    assert [p["name"] for p in doc["phases"]] == [name for name, _, _ in mainjob.CORNERS]
    assert [p["rw"] for p in doc["phases"]] == ["write", "randwrite", "read", "randread"]
    for p, (_, rw, bs) in zip(doc["phases"], mainjob.CORNERS):
        g = doc["job"]["phases"][[q["name"] for q in doc["job"]["phases"]].index(p["name"])]["groups"][0]
        assert g["bs"] == bs and g["time"] == pytest.approx(1.2)
        side = p["read" if "read" in rw else "write"]
        assert side["ops"] > 0
    assert out.count("p99.9 us") == 1, out                  # one table
    assert out.count("main job: ") == 1
    assert "warning" not in out + err, out + err
    assert doc["warnings"] == []
    assert os.listdir(cwd) == [], "the scratch folder must be removed"


def test_applies_only_without_options_that_shape_the_io():
    assert mainjob.applies({}, None)
    assert mainjob.applies({"time": "2s", "json": "-", "tag": ["x"], "quiet": True}, None)
    assert mainjob.applies({"size": "128m"}, None)
    assert not mainjob.applies({"rw": "randread"}, None)
    assert not mainjob.applies({"target": ["/dev/shm/a"]}, None)
    assert not mainjob.applies({}, {"bs": "4k"})
    assert not mainjob.applies({"fio": "job.fio"}, None)


def test_phases_write_before_they_read():
    rws = [p["groups"][0]["options"]["rw"] for p in mainjob.phases()]
    assert rws == ["write", "randwrite", "read", "randread"]
    assert {p["groups"][0]["options"]["time"] for p in mainjob.phases()} == {mainjob.DEFAULT_TIME_S}


def test_a_flag_that_shapes_the_io_gives_the_ordinary_single_phase_job(shm_dir, capsys, monkeypatch):
    monkeypatch.chdir(shm_dir)
    assert main(["run", "--rw", "read", "--size", "4m", "--no-store", "-q"]) == 0
    assert os.listdir(shm_dir) == []


def test_on_tmpfs_with_o_direct_accepted(shm_dir, capsys, monkeypatch):
    if scratch.direct_io_refusal(shm_dir) is not None:
        pytest.skip(f"this kernel's tmpfs refuses O_DIRECT ({scratch.direct_io_refusal(shm_dir)}); "
                    "the fallback test covers it")
    rc, doc, out, err = run_main_job(shm_dir, capsys, monkeypatch)
    assert rc == 0
    assert doc["main_job"]["method"] == "direct" and doc["main_job"]["memory_backed"]
    assert all(g["direct"] for p in doc["job"]["phases"] for g in p["groups"])
    assert "main job: O_DIRECT on tmpfs" in out and "memory speeds" in out
    assert_one_clean_table(doc, out, err, shm_dir)


def test_on_tmpfs_where_o_direct_is_refused_falls_back_and_says_so(shm_dir, capsys, monkeypatch):
    # tmpfs accepts O_DIRECT since Linux 6.6: the refusal older kernels give is injected here
    monkeypatch.setattr(scratch, "direct_io_refusal", lambda d: "the file system refused O_DIRECT (Invalid argument)")
    rc, doc, out, err = run_main_job(shm_dir, capsys, monkeypatch)
    assert rc == 0
    record = doc["main_job"]
    assert record["method"] == "buffered" and record["fs_type"] == "tmpfs"
    assert not any(g["direct"] for p in doc["job"]["phases"] for g in p["groups"])
    line = next(text for text in out.splitlines() if text.startswith("main job: "))
    assert "buffered, O_DIRECT refused on tmpfs" in line and "memory speeds" in line
    assert_one_clean_table(doc, out, err, shm_dir)


def test_on_a_disk_file_system_where_o_direct_is_refused_reads_out_of_cache(tmp_path, capsys, monkeypatch):
    if scratch.fs_type(str(tmp_path)) in scratch.MEMORY_FS:
        pytest.skip(f"{tmp_path} is memory-backed; this test needs a disk file system")
    monkeypatch.setattr(scratch, "direct_io_refusal", lambda d: "the file system refused O_DIRECT (Invalid argument)")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    rc, doc, out, err = run_main_job(cwd, capsys, monkeypatch, "--size", "32m")
    assert rc == 0
    assert doc["main_job"]["method"] == "buffered" and not doc["main_job"]["memory_backed"]
    assert "out of cache" in doc["main_job"]["line"]
    for spec, result in zip(doc["job"]["phases"], doc["phases"]):
        g = spec["groups"][0]
        assert g["direct"] is False and g["size"] == 32 << 20
        if g["rw"] in ("write", "randwrite"):
            assert g["fsync_end"] is True
        else:   # each byte read at most once, after the written pages were dropped
            assert g["io_size"] == 32 << 20
            assert result["read"]["bytes"] <= 32 << 20
            assert result["cache"]["resident_after_bytes"] == 0
    assert os.listdir(cwd) == []


@pytest.mark.root
@pytest.mark.loop
def test_on_ext4_uses_o_direct_and_shrinks_to_the_free_space(ext4_mount, tmp_path, capsys, monkeypatch):
    mnt = pathlib.Path(ext4_mount(400 << 20, backing_dir="/dev/shm"))
    os.rmdir(mnt / "lost+found")
    rc, doc, out, err = run_main_job(mnt, capsys, monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert rc == 0
    record = doc["main_job"]
    assert record["method"] == "direct" and record["fs_type"] == "ext4" and not record["memory_backed"]
    assert all(g["direct"] for p in doc["job"]["phases"] for g in p["groups"])
    # under 800 MiB free: half the free space, whole MiB, and the line says it was shrunk
    assert record["size_bytes"] < scratch.WANTED_BYTES and record["size_bytes"] % (1 << 20) == 0
    assert "main job: O_DIRECT on ext4" in out and "shrunk from 1 GiB" in out
    assert_one_clean_table(doc, out, err, mnt)


def test_too_little_free_space_is_refused_in_one_line(shm_dir, capsys, monkeypatch):
    class Tiny:
        f_bavail, f_frsize = 16, 1 << 20           # 16 MiB free
    monkeypatch.setattr(scratch.os, "statvfs", lambda d: Tiny())
    monkeypatch.chdir(shm_dir)
    rc = main(["run", "--no-store", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "16 MiB free" in err and "--target" in err
    assert os.listdir(shm_dir) == []


def test_the_laid_out_scratch_file_has_no_two_sectors_alike(shm_dir):
    """The main job's scratch file is one random chunk written over and over; each 512-byte sector
    carries its offset, so deduplicating storage cannot hold it in a few shared blocks."""
    import hashlib

    path = f"{shm_dir}/scratch.dat"
    scratch._lay_out(path, 3 * scratch._LAYOUT_CHUNK + 4096)
    data = pathlib.Path(path).read_bytes()
    assert len(data) == 3 * scratch._LAYOUT_CHUNK + 4096
    sectors = {hashlib.blake2b(data[i:i + 512], digest_size=16).digest() for i in range(0, len(data), 512)}
    assert len(sectors) == len(data) // 512
    assert int.from_bytes(data[2 * scratch._LAYOUT_CHUNK + 512:][:8], "little") == 2 * scratch._LAYOUT_CHUNK + 512
