"""The nbd engine against a real NBD server (nbdkit, started by each test): the bytes storlab
reports are the bytes the server received, verification over the network, the write-safety rule
of block devices applied to exports, and bad input in one line."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from storlab import schemas
from testbed.servers import NbdServer, nbd_unavailable

WHY = nbd_unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"NBD: {WHY}")
MiB = 1 << 20


def storlab(*args: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "run.json"
    out.unlink(missing_ok=True)
    r = subprocess.run([sys.executable, "-m", "storlab", "run", "--no-store", "--json", str(out), *args],
                       capture_output=True, text=True, timeout=120)
    return r, (json.loads(out.read_text()) if out.exists() else {})


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.mark.parametrize("tcp", [False, True], ids=["unix-socket", "tcp-loopback"])
def test_a_write_then_a_read_move_exactly_their_bytes_through_the_server(tmp_path, tcp):
    with NbdServer(tmp_path, "32M", tcp=tcp) as srv:
        r, doc = storlab("--target", srv.url, "--rw", "write", "--bs", "1m", "--size", "16m", "--qd", "4",
                         tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        schemas.validate(doc)
        written = srv.requests()
        r, doc_read = storlab("--target", srv.url, "--rw", "randread", "--bs", "4k", "--size", "16m", "--qd", "8",
                              "--io-size", "4m", tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        schemas.validate(doc_read)
        after = srv.requests()
    (phase,) = doc["phases"]
    assert phase["write"]["bytes"] == 16 * MiB and phase["write"]["ops"] == 16
    assert written.bytes["Write"] == 16 * MiB and written.ops["Write"] == 16
    # the end fsync is one NBD flush per worker
    assert written.ops.get("Flush") == 1 and phase["sync"]["ops"] == 1
    (target,) = doc["environment"]["targets"]
    assert target["type"] == "nbd" and target["size_bytes"] == 32 * MiB and doc["environment"]["engine"] == "nbd"
    assert target["server"] == (srv.url.split("/")[2] if tcp else f"unix:{srv.socket}")
    (read,) = doc_read["phases"]
    reads = after.bytes["Read"] - written.bytes.get("Read", 0)
    assert read["read"]["bytes"] == 4 * MiB == reads
    assert after.ops["Read"] - written.ops.get("Read", 0) == 1024 == read["read"]["ops"]
    assert read["read"]["lat_ns"]["p50"] > 0


def test_verified_random_writes_read_back_clean_over_the_network(tmp_path):
    with NbdServer(tmp_path, "16M") as srv:
        r, doc = storlab("--target", srv.url, "--rw", "randwrite", "--bs", "4k", "--size", "8m", "--qd", "8",
                         "--verify", "crc32c", "--threads", "2", tmp_path=tmp_path)
        reqs = srv.requests()
    assert r.returncode == 0, r.stderr
    (phase,) = doc["phases"]
    assert phase["verify"]["mismatches"] == 0 and phase["verify"]["readback_blocks"] == 2048
    assert reqs.bytes["Write"] == 8 * MiB == phase["write"]["bytes"]
    # before writing, the plan reads the blank export (16 MiB: up to 64 MiB it reads all of it) to
    # see that it holds no data; after, the read-back reads each written block once
    assert reqs.bytes["Read"] == 16 * MiB + 8 * MiB


def test_an_export_holding_data_is_written_only_when_named_in_allow_destroy(tmp_path):
    with NbdServer(tmp_path, "8M") as srv:
        r, _ = storlab("--target", srv.url, "--rw", "write", "--bs", "1m", "--size", "1m", tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        before = srv.requests().bytes["Write"]
        r, _ = storlab("--target", srv.url, "--rw", "randwrite", "--bs", "4k", "--size", "8m", tmp_path=tmp_path)
        line = one_line_error(r)
        assert "holds data" in line and "--allow-destroy" in line and srv.url in line
        assert srv.requests().bytes["Write"] == before          # refused before any write
        r, _ = storlab("--target", srv.url, "--rw", "read", "--bs", "1m", "--size", "8m", tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr                     # reading it is always allowed
        r, _ = storlab("--target", srv.url, "--rw", "randwrite", "--bs", "4k", "--size", "8m",
                       "--allow-destroy", srv.url, tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        assert srv.requests().bytes["Write"] == before + 8 * MiB


def test_a_read_only_export_is_refused_for_writing_and_read_as_asked(tmp_path):
    with NbdServer(tmp_path, "8M", read_only=True) as srv:
        r, _ = storlab("--target", srv.url, "--rw", "write", "--bs", "1m", "--size", "1m",
                       "--allow-destroy", srv.url, tmp_path=tmp_path)
        assert "read-only" in one_line_error(r)
        r, doc = storlab("--target", srv.url, "--rw", "read", "--bs", "1m", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert doc["phases"][0]["read"]["bytes"] == 8 * MiB          # no size: the whole export


def test_a_file_backed_export_carries_the_bytes_to_the_servers_file(tmp_path):
    backing = tmp_path / "disk.img"
    backing.write_bytes(b"\0" * (4 * MiB))
    with NbdServer(tmp_path, plugin="file", backing=backing) as srv:
        r, _ = storlab("--target", srv.url, "--rw", "write", "--bs", "64k", "--size", "4m", "--verify", "crc32c",
                       tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    data = backing.read_bytes()
    assert data.count(0) < len(data) // 100      # the stamped blocks reached the server's file


@pytest.mark.parametrize("args, words", [
    (("--target", "nbd://127.0.0.1:1/", "--rw", "read", "--size", "1m"), ("cannot connect", "refused")),
    (("--target", "nbd://127.0.0.1:1/", "--engine", "psync", "--rw", "read"), ("engine nbd", "engine is psync")),
    (("--engine", "nbd", "--rw", "read", "--size", "1m", "--target", "/tmp/storlab-not-nbd"), ("local path",)),
    (("--target", "nbd://127.0.0.1:1/", "--files", "per_thread", "--rw", "read"), ("files:", "network block device")),
    (("--target", "nbd://127.0.0.1:1/", "--open-sync", "dsync", "--rw", "write"), ("open_sync:", "fsync_every")),
], ids=["unreachable", "wrong-engine", "nbd-on-a-path", "per-thread-files", "open-sync"])
def test_bad_input_is_one_line(tmp_path, args, words):
    r, _ = storlab(*args, tmp_path=tmp_path)
    line = one_line_error(r)
    assert all(w in line for w in words), line


def test_a_size_past_the_end_of_the_export_is_refused(tmp_path):
    with NbdServer(tmp_path, "4M") as srv:
        r, _ = storlab("--target", srv.url, "--rw", "read", "--size", "8m", tmp_path=tmp_path)
    line = one_line_error(r)
    assert "runs past the end" in line and "4194304 bytes" in line
