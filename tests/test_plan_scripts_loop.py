"""`storlab plan script` output run for real where this kernel allows it, then `storlab doctor`'s
checks on the result.

What runs: the whole script (mkfs.btrfs / mkfs.xfs / mkfs.ext4, the queue settings and read-ahead)
on loop devices, including a loop device over a partition made by sfdisk; the "LUNs" of a hardware
RAID stack are loop devices over images on a btrfs RAID 0 of two loop devices, which the doctor sees
as a 64 KiB x 2 stripe. The LVM lines run for real up to the volume group (pvcreate and vgcreate only
write labels and metadata); lvcreate, which needs device-mapper (absent here), runs with its own
`--test` and `--driverloaded n`, which validate the stripe count and size against the volume group
and print what they would change (e.g. "Reducing requested stripe size"). Not validated: the mdadm
lines (this kernel has no md and mdadm has no dry run), which are checked as text in
test_plan_scripts.py."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "doctor"))
from loophelpers import LoopFactory, MiB, need_tool, run, skip_unless_root_and_loop  # noqa: E402
from storlab.cli.main import main
from storlab.doctor.checks import run_checks
from storlab.doctor.inventory import discover
from storlab.model.stack import Filesystem, stack_from_notation
from storlab.planner.scripts import build_script

pytestmark = [pytest.mark.root, pytest.mark.loop]
K = 1024


@pytest.fixture
def loops(tmp_path):
    skip_unless_root_and_loop()
    factory = LoopFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.cleanup()


@pytest.fixture
def striped(loops, tmp_path):
    """A mounted btrfs with data RAID 0 over two loop devices (64 KiB x 2): images on it are LUNs."""
    need_tool("mkfs.btrfs")
    a = loops.attach(loops.image("member-a.img", 1024 * MiB))
    b = loops.attach(loops.image("member-b.img", 1024 * MiB))
    run("mkfs.btrfs", "-q", "-f", "-d", "raid0", "-m", "raid1", a, b)
    return Path(loops.mount(a, "striped"))


def _lun(loops, mnt: Path, name: str, size_bytes: int = 1024 * MiB) -> str:
    path = mnt / name
    with open(path, "wb") as f:
        f.truncate(size_bytes)
    return loops.attach(str(path))


def _run_script(tmp_path: Path, lines: tuple[str, ...]) -> subprocess.CompletedProcess:
    script = tmp_path / "build.sh"
    script.write_text("\n".join(lines) + "\n")
    proc = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"script failed ({proc.returncode}): {proc.stderr.strip()[-1500:]}"
    return proc


def _findings(target: str) -> set[tuple[str, str]]:
    return {(f.code, f.device) for f in run_checks(discover([target])) if f.severity != "info"}


def _xfs_geometry(target: str) -> dict[str, int]:
    """sunit/swidth of the data section and sunit of the log, in file-system blocks (xfs_info)."""
    text = run("xfs_info", target)
    data = re.search(r"^\s*=\s+sunit=(\d+)\s+swidth=(\d+) blks", text, re.M)
    log = re.search(r"^log\s.*\n\s*=.*sunit=(\d+) blks", text, re.M)
    return {"sunit": int(data.group(1)), "swidth": int(data.group(2)), "log_sunit": int(log.group(1))}


def test_native_btrfs_raid0_script_builds_what_the_doctor_reads_as_64k_x_2(loops, tmp_path):
    need_tool("mkfs.btrfs")
    devices = [loops.attach(loops.image(f"d{i}.img", 512 * MiB)) for i in range(2)]
    stack = stack_from_notation("R0/2", 256 * K, engine="md", filesystem=Filesystem("btrfs"))
    script = build_script(stack, devices)
    # the chunk that cannot be set is said so, in the script and as a warning
    assert any("the chunk cannot be set; the stack's 256 KiB chunk is not used" in line for line in script.lines)
    assert "btrfs-chunk-fixed" in [w.code for w in script.warnings]
    _run_script(tmp_path, script.lines)
    mnt = loops.mount(devices[0], "btrfs")
    inv = discover([mnt])
    fs = inv.filesystems[os.path.basename(devices[0])]
    assert (fs.fs_type, fs.profiles["data"], fs.stripe_unit_bytes, fs.stripe_width_bytes) == ("btrfs", "raid0",
                                                                                              64 * K, 128 * K)
    assert sorted(fs.members) == sorted(os.path.basename(d) for d in devices)
    assert {(f.code, f.device) for f in run_checks(inv) if f.severity != "info"} == set()


@pytest.mark.parametrize("fs", ["xfs", "ext4"])
def test_hardware_raid0_lun_script_matches_the_stripe_the_doctor_sees(loops, striped, tmp_path, capsys, fs):
    """End to end through the CLI: `plan script STACK --devices LUN -o build.sh`, run it, then
    `doctor --json --stack STACK LUN`: no finding and no difference from the planned stack."""
    need_tool(f"mkfs.{fs}")
    lun = _lun(loops, striped, f"{fs}.img")
    stack_file = tmp_path / "lun.toml"
    stack_file.write_text(f'[raid]\nlayout = "R0/2"\nchunk = "64KiB"\n[filesystem]\ntype = "{fs}"\n')
    script = tmp_path / "build.sh"
    assert main(["plan", "script", str(stack_file), "--devices", lun, "--output", str(script)]) == 0
    capsys.readouterr()
    _run_script(tmp_path, tuple(script.read_text().splitlines()))
    assert main(["doctor", "--json", "--stack", str(stack_file), lun]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [f for f in doc["findings"] if f["severity"] != "info"] == []
    assert doc["stack"]["differences"] == []
    if fs == "xfs":
        # -l su set to the data stripe unit: 64 KiB = 16 blocks of 4 KiB
        assert _xfs_geometry(lun) == {"sunit": 16, "swidth": 32, "log_sunit": 16}


def test_xfs_log_stripe_unit_is_capped_at_256k_without_mkfs_adjusting_it(loops, tmp_path):
    need_tool("mkfs.xfs")
    lun = loops.attach(loops.image("lun.img", 1024 * MiB))
    script = build_script(stack_from_notation("R0/2", 512 * K), [lun])
    assert any(line.endswith(f"-d su=512k,sw=2 -l su=256k {lun}") for line in script.lines)
    proc = _run_script(tmp_path, script.lines)
    assert "log stripe unit" not in proc.stderr + proc.stdout        # mkfs.xfs adjusted nothing
    assert _xfs_geometry(lun) == {"sunit": 128, "swidth": 256, "log_sunit": 64}


def test_raid1_gets_no_stripe_unit(loops, tmp_path):
    need_tool("mkfs.xfs")
    lun = loops.attach(loops.image("mirror.img", 1024 * MiB))
    script = build_script(stack_from_notation("R1/2", 64 * K), [lun])
    assert f"mkfs.xfs -b size=4096 {lun}" in script.lines
    _run_script(tmp_path, script.lines)
    assert _xfs_geometry(lun) == {"sunit": 0, "swidth": 0, "log_sunit": 0}


def test_script_on_an_sfdisk_partition_aligned_to_the_stripe(loops, striped, tmp_path):
    need_tool("sfdisk")
    need_tool("mkfs.xfs")
    image = striped / "disk.img"
    with open(image, "wb") as f:
        f.truncate(1200 * MiB)
    start_sector, size_sectors = 2048, 1100 * MiB // 512         # 1 MiB: a multiple of the 128 KiB stripe
    run("sfdisk", "-q", str(image), stdin=f"label: dos\nstart={start_sector}, size={size_sectors}, type=83\n")
    disk = loops.attach(str(image))
    # This kernel creates no partition devices for loop disks; a loop at the offset shows partition 1.
    part = loops.attach(str(image), offset_bytes=start_sector * 512, sizelimit_bytes=size_sectors * 512)
    script = build_script(stack_from_notation("R0/2", 64 * K), [part])
    _run_script(tmp_path, script.lines)
    inv = discover([disk])
    assert {(f.code, f.device) for f in run_checks(inv) if f.severity != "info"} == set()
    assert inv.filesystems[os.path.basename(part)].stripe_unit_bytes == 64 * K


def _lvm(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LVM_SUPPRESS_FD_WARNINGS": "1"}
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def lvm_luns(loops):
    need_tool("pvcreate")
    luns = [loops.attach(loops.image(f"pv{i}.img", 64 * MiB)) for i in range(2)]
    vg = f"vg_storlab_test_{os.getpid()}"
    try:
        yield luns, vg
    finally:
        _lvm("vgremove", "-f", vg)
        _lvm("pvremove", "-y", *luns)


def _lvm_lines(lines: tuple[str, ...]) -> list[list[str]]:
    return [line.split() for line in lines if line.split()[:1] in (["pvcreate"], ["vgcreate"], ["lvcreate"])]


@pytest.mark.parametrize("emit_extent", [True, False])
def test_lvm_stripe_size_above_the_default_extent_is_kept(lvm_luns, emit_extent):
    """R5/5 LUNs with a 2 MiB segment have an 8 MiB stripe: the host stripe size is 8 MiB, above the
    4 MiB default extent. With the script's `vgcreate -s 8M` lvcreate keeps it; without it (the old
    script), lvcreate --test says it would cut it down, which this test would catch."""
    luns, vg = lvm_luns
    script = build_script(stack_from_notation("R5/5", 2048 * K, count=2), luns, vg_name=vg)
    commands = _lvm_lines(script.lines)
    assert [c[0] for c in commands] == ["pvcreate", "vgcreate", "lvcreate"]
    assert commands[1][:3] == ["vgcreate", "-s", "8M"] and "--stripesize" in commands[2]
    if not emit_extent:
        commands[1] = ["vgcreate", *commands[1][3:]]
    for command in commands[:2]:
        proc = _lvm(*command)
        assert proc.returncode == 0, proc.stderr
    proc = _lvm("lvcreate", "--driverloaded", "n", "--test", *commands[2][1:])
    assert proc.returncode == 0, proc.stderr
    reduced = "Reducing requested stripe size" in proc.stderr + proc.stdout
    assert reduced == (not emit_extent), proc.stderr
