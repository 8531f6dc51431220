"""`storlab doctor` in-process on a recorded tree: human report, JSON only on stdout, --fail-on,
--stack differences, and one-line usage errors."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from storlab.cli.main import main
from test_doctor_fixtures import DISKS, FIX, KiB, MiB, disk_files, md_files, write_tree  # noqa: E402


@pytest.fixture
def tree(tmp_path):
    """md0 = RAID 6 of ten disks, chunk 512 KiB, with read-ahead too small; nothing mounted."""
    files = {}
    for i, d in enumerate(DISKS):
        files.update(disk_files(d, 16 * i))
    files.update(md_files("md0", 0, "raid6", [f"{d}1" for d in DISKS], 512 * KiB, io_opt=4 * MiB, read_ahead_kb="128"))
    write_tree(tmp_path / "sys", files)
    write_tree(tmp_path / "proc", {"self/mountinfo": "", "mdstat": (FIX / "mdstat_raid6_raid0.txt").read_text()})
    return ["--sysfs-root", str(tmp_path / "sys"), "--proc-root", str(tmp_path / "proc"),
            "--dev-root", str(tmp_path / "dev")]


def test_human_report(tree, capsys):
    assert main(["doctor", *tree]) == 0
    out = capsys.readouterr().out
    assert out.startswith("storlab doctor: 21 devices, 0 file systems; 0 errors, 1 warnings, 0 info")
    assert any(line.split()[:2] == ["md0", "md"] and line.rstrip().endswith("512 KiB x 8") for line in out.splitlines())
    assert "WARNING md0: read_ahead_kb of /dev/md0 is 128 KiB" in out
    assert "fix: blockdev --setra 16384 /dev/md0" in out


def test_json_only_on_stdout(tree, capsys):
    assert main(["doctor", "--json", *tree]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["schema"] == "storlab.doctor/1"
    assert doc["summary"]["warning"] == 1
    assert [f["code"] for f in doc["findings"]] == ["read-ahead-small"]
    md0 = next(d for d in doc["devices"] if d["name"] == "md0")
    assert md0["striping"]["width_bytes"] == 4 * MiB and md0["md"]["chunk_size_bytes"] == 512 * KiB


@pytest.mark.parametrize("fail_on, code", [("never", 0), ("warning", 1), ("error", 0)])
def test_fail_on(tree, capsys, fail_on, code):
    assert main(["doctor", "--fail-on", fail_on, *tree]) == code


def test_stack_needs_a_target(tree, tmp_path, capsys):
    stack = tmp_path / "stack.toml"
    stack.write_text('[raid]\nlayout = "R6/10"\nchunk = "512KiB"\nengine = "md"\n')
    assert main(["doctor", "--stack", str(stack), *tree]) == 2
    assert capsys.readouterr().err.strip() == (
        "storlab doctor: error: --stack needs a TARGET: the mount point or device the planned stack describes")


def test_bad_stack_file_is_one_line(tmp_path, capsys):
    stack = tmp_path / "stack.toml"
    stack.write_text('[raid]\nlayout = "R6/10"\n')
    assert main(["doctor", "--stack", str(stack), "/"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("storlab doctor: error:") and "chunk is required" in err and "\n" not in err


def test_missing_target_is_a_usage_error(capsys, tmp_path):
    assert main(["doctor", str(tmp_path / "nope")]) == 2
    assert "give a block device, mount point or path" in capsys.readouterr().err


def test_a_character_device_target_is_a_usage_error(capsys):
    assert main(["doctor", "/dev/null"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("storlab doctor: error: target '/dev/null': a character device has no storage below it; "
                   "give a block device, mount point or path")
