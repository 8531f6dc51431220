"""The nfs engine against a real NFS server (nfs-ganesha with its VFS backend, started by the
tests in a network namespace of its own): the bytes storlab reports are the bytes in the server's
folder, verification over the network, files made and laid out as local ones are, the
write-safety rule for files that hold data, and bad input in one line."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from storlab import schemas
from testbed.servers import GaneshaServer, nfs_unavailable

WHY = nfs_unavailable()
pytestmark = [pytest.mark.root, pytest.mark.netns, pytest.mark.skipif(WHY is not None, reason=f"NFS: {WHY}")]
MiB = 1 << 20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp("nfs")
    export = work / "export"
    export.mkdir()
    with GaneshaServer(work, export) as srv:
        yield srv


def storlab(srv: GaneshaServer, *args: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "run.json"
    out.unlink(missing_ok=True)
    r = subprocess.run(srv.run_here([sys.executable, "-m", "storlab", "run", "--no-store", "--json", str(out), *args]),
                       capture_output=True, text=True, timeout=120)
    return r, (json.loads(out.read_text()) if out.exists() else {})


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_a_written_file_lands_in_the_servers_folder_and_reads_back(server, tmp_path):
    url = server.url("w1")
    r, doc = storlab(server, "--target", url, "--rw", "write", "--bs", "1m", "--size", "16m", "--qd", "4",
                     tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    schemas.validate(doc)
    (phase,) = doc["phases"]
    assert phase["write"]["bytes"] == 16 * MiB and phase["write"]["ops"] == 16
    assert phase["sync"]["ops"] == 1                            # the end fsync: one COMMIT
    (target,) = doc["environment"]["targets"]
    assert target["type"] == "nfs" and target["created"] is True and target["size_bytes"] == 16 * MiB
    assert doc["environment"]["engine"] == "nfs" and target["server"] == "127.0.0.1"
    on_server = server.export_dir / "w1"
    assert on_server.stat().st_size == 16 * MiB and on_server.read_bytes().count(0) < MiB
    r, doc = storlab(server, "--target", url, "--rw", "randread", "--bs", "4k", "--qd", "8", "--io-size", "2m",
                     tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert doc["phases"][0]["read"]["bytes"] == 2 * MiB and doc["environment"]["targets"][0]["created"] is False


def test_verified_random_writes_and_a_laid_out_read_check_clean(server, tmp_path):
    r, doc = storlab(server, "--target", server.url("v1"), "--rw", "randwrite", "--bs", "4k", "--size", "4m",
                     "--qd", "8", "--verify", "crc32c", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    v = doc["phases"][0]["verify"]
    assert v["mismatches"] == 0 and v["readback_blocks"] == 1024
    # a read of a file that is not there: made and laid out first (stamped, for verify), as locally
    r, doc = storlab(server, "--target", server.url("v2"), "--rw", "randread", "--bs", "64k", "--size", "8m",
                     "--qd", "4", "--verify", "crc32c", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    (target,) = doc["environment"]["targets"]
    assert target["laid_out_bytes"] == 8 * MiB and target["created"] is True
    assert doc["phases"][0]["verify"]["mismatches"] == 0 and doc["phases"][0]["verify"]["checked_blocks"] == 128
    assert (server.export_dir / "v2").stat().st_size == 8 * MiB


def test_a_file_holding_data_is_written_only_when_named_in_allow_destroy(server, tmp_path):
    (server.export_dir / "theirs").write_bytes(b"precious" * 4096)
    url = server.url("theirs")
    r, _ = storlab(server, "--target", url, "--rw", "randwrite", "--bs", "4k", "--size", "32k", tmp_path=tmp_path)
    line = one_line_error(r)
    assert "holds data (32768 bytes)" in line and "--allow-destroy" in line
    assert (server.export_dir / "theirs").read_bytes() == b"precious" * 4096
    r, _ = storlab(server, "--target", url, "--rw", "randwrite", "--bs", "4k", "--size", "32k",
                   "--allow-destroy", url, tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (server.export_dir / "theirs").read_bytes() != b"precious" * 4096


def test_nfs_v4_reads_and_refuses_writes_the_library_cannot_make(server, tmp_path):
    (server.export_dir / "r4").write_bytes(bytes(range(256)) * 4096)        # 1 MiB
    r, doc = storlab(server, "--target", server.url("r4", version=4), "--rw", "read", "--bs", "64k",
                     tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert doc["phases"][0]["read"]["bytes"] == MiB
    r, _ = storlab(server, "--target", server.url("n4", version=4), "--rw", "write", "--bs", "64k", "--size", "1m",
                   tmp_path=tmp_path)
    line = one_line_error(r)
    assert "NFSv4" in line and "version=3" in line
    assert not (server.export_dir / "n4").exists()


def test_a_failed_plan_removes_the_file_it_made(server, tmp_path):
    # the first target is made and laid out, the second cannot be mounted: the plan fails and the
    # file it made goes again
    r, _ = storlab(server, "--target", server.url("made"), "--target", "nfs://127.0.0.1/no/such/f?version=3",
                   "--rw", "read", "--bs", "1m", "--size", "2m", tmp_path=tmp_path)
    assert "cannot mount" in one_line_error(r)
    assert not (server.export_dir / "made").exists()


@pytest.mark.parametrize("target, args, words", [
    ("nfs://127.0.0.1/no/such/export/f?version=3", ("--rw", "read", "--size", "1m"), ("cannot connect", "mount")),
    ("nfs://127.0.0.1/export/none?version=4", ("--rw", "read"), ("size:", "does not exist")),
    ("nfs://127.0.0.1/export/t?version=3", ("--rw", "trim", "--size", "1m"), ("rw:", "NFS has no trim")),
    ("nfs://127.0.0.1/export/", ("--rw", "read", "--size", "1m"), ("no file",)),
], ids=["no-export", "missing-file-no-size", "trim", "no-file"])
def test_bad_input_is_one_line(server, tmp_path, target, args, words):
    r, _ = storlab(server, "--target", target, *args, tmp_path=tmp_path)
    line = one_line_error(r)
    assert all(w in line for w in words), line
