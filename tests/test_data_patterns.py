"""The data writes carry (buffer.rs): incompressible and unique by default, compressible and
repeated by set shares when asked (fio's buffer_compress_percentage, dedupe_percentage), checked
with real compressors (zstd, gzip) and a count of repeated 4 KiB blocks, with verification on
such data, the document's record of what was written, and the refusals."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from storlab import schemas

zstandard = pytest.importorskip("zstandard", reason="the zstd check needs the zstandard package (test extra)")
MiB = 1 << 20


def write(tmp_path: Path, name: str, *args: str) -> tuple[bytes, dict]:
    target = Path("/dev/shm") / f"storlab-data-{tmp_path.name}-{name}"
    out = tmp_path / f"{name}.json"
    try:
        r = subprocess.run([sys.executable, "-m", "storlab", "run", "--target", str(target), "--size", "16m",
                            "--no-store", "-q", "--json", str(out), *args], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return target.read_bytes(), json.loads(out.read_text())
    finally:
        target.unlink(missing_ok=True)


def saved(data: bytes) -> tuple[float, float]:
    """The share zstd (level 3, a window far wider than a request) and gzip (level 6) save."""
    return (1 - len(zstandard.ZstdCompressor(level=3).compress(data)) / len(data),
            1 - len(zlib.compress(data, 6)) / len(data))


def repeated_share(data: bytes, block: int = 4096) -> float:
    """The share of 4 KiB blocks that repeat an earlier one, as a block-level deduplicator counts."""
    hashes = [hashlib.sha256(data[i:i + block]).digest() for i in range(0, len(data), block)]
    return 1 - len(set(hashes)) / len(hashes)


@pytest.mark.parametrize("args", [("--rw", "write", "--bs", "64k"),
                                  ("--rw", "randwrite", "--bs", "4k", "--engine", "io_uring", "--qd", "8")],
                         ids=["sequential-64k", "random-4k-qd8"])
def test_written_data_is_incompressible_and_unique_by_default(tmp_path, args):
    data, doc = write(tmp_path, "plain", *args)
    zstd_saved, gzip_saved = saved(data)
    # a slot's buffer carries every write it makes: without a key per write zstd saved 99 % of it
    assert zstd_saved < 0.01 and gzip_saved < 0.01, (zstd_saved, gzip_saved)
    assert repeated_share(data) == 0
    assert doc["phases"][0]["data"] == {"kind": "random", "scrambled": True, "compress_percentage": 0,
                                        "compress_chunk": 512, "dedupe_percentage": 0, "repeated_writes": 0}


@pytest.mark.parametrize("percent", [25, 50, 75, 90])
def test_compress_percentage_is_what_zstd_and_gzip_save_within_5_points(tmp_path, percent):
    data, doc = write(tmp_path, f"c{percent}", "--rw", "write", "--bs", "64k", "--compress-percentage", str(percent))
    schemas.validate(doc)
    zstd_saved, gzip_saved = saved(data)
    assert abs(zstd_saved - percent / 100) < 0.05 and abs(gzip_saved - percent / 100) < 0.05, (zstd_saved, gzip_saved)
    assert repeated_share(data) == 0                          # compressible, never duplicate
    assert doc["phases"][0]["data"]["compress_percentage"] == percent


def test_a_larger_chunk_and_a_pattern_as_the_fixed_part(tmp_path):
    data, _ = write(tmp_path, "chunk", "--rw", "write", "--bs", "64k", "--compress-percentage", "60",
                    "--compress-chunk", "4k", "--buffer-pattern", "0xdeadbeef")
    assert abs(saved(data)[0] - 0.60) < 0.05
    # each 4 KiB chunk: 40 % (1638 bytes) random, then the pattern from its start to the chunk's end
    for chunk in (data[:4096], data[5 * 4096:6 * 4096]):
        assert chunk[1638:] == (bytes.fromhex("deadbeef") * 1024)[:4096 - 1638]
        assert chunk[:1638].count(0) < 40


@pytest.mark.parametrize("percent", [20, 50, 80])
def test_dedupe_percentage_is_the_share_of_repeated_4k_blocks_within_5_points(tmp_path, percent):
    data, doc = write(tmp_path, f"d{percent}", "--rw", "write", "--bs", "4k", "--dedupe-percentage", str(percent))
    share = repeated_share(data)
    assert abs(share - percent / 100) < 0.05, share
    repeats = doc["phases"][0]["data"]["repeated_writes"]
    assert abs(repeats / 4096 - percent / 100) < 0.05 and repeats >= round(share * 4096)


def test_compressible_and_duplicate_together(tmp_path):
    data, _ = write(tmp_path, "both", "--rw", "write", "--bs", "4k", "--compress-percentage", "50",
                    "--dedupe-percentage", "40")
    assert abs(repeated_share(data) - 0.40) < 0.05
    # the unique blocks compress by half; the repeats a compressor with a window finds as well
    assert saved(data)[0] > 0.5


def test_verified_compressible_blocks_read_back_clean(tmp_path):
    target = Path("/dev/shm") / f"storlab-data-{tmp_path.name}-verify"
    try:
        base = [sys.executable, "-m", "storlab", "run", "--target", str(target), "--size", "8m", "--bs", "4k",
                "--verify", "crc32c", "--compress-percentage", "50", "--no-store", "-q", "--json"]
        r = subprocess.run(base + [str(tmp_path / "w.json"), "--rw", "write"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert abs(saved(target.read_bytes())[0] - 0.5) < 0.05       # the stamped payload is shaped too
        r = subprocess.run(base + [str(tmp_path / "r.json"), "--rw", "randread"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        v = json.loads((tmp_path / "r.json").read_text())["phases"][0]["verify"]
        assert v["checked_blocks"] == 2048 and v["mismatches"] == 0
    finally:
        target.unlink(missing_ok=True)


@pytest.mark.parametrize("args, words", [
    (("--dedupe-percentage", "30", "--verify", "crc32c"), ("dedupe_percentage", "verify")),
    (("--dedupe-percentage", "30", "--no-scramble"), ("dedupe_percentage", "scramble")),
    (("--compress-percentage", "30", "--verify", "fill"), ("compress_percentage", "fill")),
    (("--compress-percentage", "101",), ("compress_percentage",)),
    (("--compress-chunk", "16",), ("compress_chunk",)),
], ids=["dedupe-verify", "dedupe-unscrambled", "compress-fill", "percent-range", "chunk-small"])
def test_combinations_that_cannot_hold_are_one_line(tmp_path, args, words):
    r = subprocess.run([sys.executable, "-m", "storlab", "run", "--target", str(tmp_path / "f"), "--size", "1m",
                        "--rw", "write", "--no-store", *args], capture_output=True, text=True)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), r.stderr
    assert not (tmp_path / "f").exists()
