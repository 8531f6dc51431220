"""A network file system mounted through FUSE (SSHFS, served by an sshd of the test's own on
loopback) is measured as a plain path, its document and a warning say what it is, and the doctor
names it in one line instead of looking for a block device below it."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from storlab import schemas
from storlab.devices.netfs import network_filesystem
from testbed.servers import SshfsMount, sshfs_unavailable

WHY = sshfs_unavailable()
MiB = 1 << 20


def test_mount_types_name_network_file_systems_and_only_those():
    assert network_filesystem("fuse.sshfs") == "SSHFS, through FUSE"
    assert network_filesystem("fuse.glusterfs") == "GlusterFS, through FUSE"
    assert network_filesystem("nfs4") == "NFSv4 (kernel client)"
    assert network_filesystem("lustre") == "Lustre"
    for local in ("ext4", "xfs", "btrfs", "tmpfs", "fuse.fuse-overlayfs", "fuse", None, ""):
        assert network_filesystem(local) is None, local


@pytest.mark.root
@pytest.mark.skipif(WHY is not None, reason=f"SSHFS: {WHY}")
def test_a_path_on_sshfs_is_measured_and_named(tmp_path):
    with SshfsMount(tmp_path) as m:
        target = m.mount_point / "data"
        out = tmp_path / "run.json"
        r = subprocess.run([sys.executable, "-m", "storlab", "run", "--target", str(target), "--rw", "write",
                            "--bs", "1m", "--size", "8m", "--no-store", "--json", str(out)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert (m.served / "data").stat().st_size == 8 * MiB          # the bytes crossed to the server's folder
        doc = json.loads(out.read_text())
        schemas.validate(doc)
        (t,) = doc["environment"]["targets"]
        assert t["fs_type"] == "fuse.sshfs" and t["network_fs"] == "SSHFS, through FUSE"
        assert any(w["code"] == "network_filesystem" and "SSHFS" in w["message"] for w in doc["warnings"])
        assert doc["phases"][0]["write"]["bytes"] == 8 * MiB
        r = subprocess.run([sys.executable, "-m", "storlab", "doctor", str(m.mount_point)],
                           capture_output=True, text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "SSHFS, through FUSE" in lines[0] and "storlab run" in lines[0] and "storlab net" in lines[0]
