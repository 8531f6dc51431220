"""Doctor on real stacks built on loop devices (root): a btrfs RAID 0 over two loop devices is the
striped storage (64 KiB x 2); image files on it carry xfs or ext4 made with wrong and with correct
su/sw, or a partition table (sfdisk) with a misaligned or aligned partition shown by a loop device
at the partition's offset. Each test asserts the exact set of findings: the right ones and no others."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "doctor"))
from loophelpers import LoopFactory, MiB, need_tool, run, skip_unless_root_and_loop  # noqa: E402
from storlab.doctor.checks import run_checks
from storlab.doctor.inventory import discover

pytestmark = [pytest.mark.root, pytest.mark.loop]


@pytest.fixture
def striped(tmp_path):
    """A mounted btrfs with data RAID 0 over two 1 GiB loop devices; yields (factory, mount point)."""
    skip_unless_root_and_loop()
    need_tool("mkfs.btrfs")
    loops = LoopFactory(tmp_path)
    try:
        a = loops.attach(loops.image("member-a.img", 1024 * MiB))
        b = loops.attach(loops.image("member-b.img", 1024 * MiB))
        run("mkfs.btrfs", "-q", "-f", "-d", "raid0", "-m", "raid1", a, b)
        mnt = loops.mount(a, "striped")
        yield loops, Path(mnt)
    finally:
        loops.cleanup()


def _image_on(mnt: Path, name: str, size_bytes: int) -> str:
    path = mnt / name
    with open(path, "wb") as f:
        f.truncate(size_bytes)
    return str(path)


def _findings(target: str) -> set[tuple[str, str]]:
    inv = discover([target])
    return {(f.code, f.device) for f in run_checks(inv) if f.severity != "info"}


def test_btrfs_raid0_is_seen_as_64k_x_2(striped):
    loops, mnt = striped
    dev = loops.attach(_image_on(mnt, "plain.img", 64 * MiB))
    inv = discover([dev])
    s = inv.striping[os.path.basename(dev)]
    assert (s.unit_bytes, s.data_members, s.parity) == (64 * 1024, 2, False)
    assert "data raid0 over 2 devices" in s.source


@pytest.mark.parametrize("su, sw, expected", [
    ("32k", 3, {"fs-stripe-mismatch"}),
    ("64k", 2, set()),
])
def test_mounted_xfs_su_sw_over_striped_btrfs(striped, su, sw, expected):
    need_tool("mkfs.xfs")
    loops, mnt = striped
    dev = loops.attach(_image_on(mnt, "xfs.img", 1024 * MiB))
    run("mkfs.xfs", "-q", "-f", "-d", f"su={su},sw={sw}", dev)
    fs_mnt = loops.mount(dev, "xfs")
    name = os.path.basename(dev)
    assert _findings(fs_mnt) == {(code, name) for code in expected}


def test_xfs_without_stripe_geometry_over_striped_btrfs(striped):
    need_tool("mkfs.xfs")
    loops, mnt = striped
    dev = loops.attach(_image_on(mnt, "xfs.img", 1024 * MiB))
    run("mkfs.xfs", "-q", "-f", dev)   # the loop reports no io_opt: mkfs sets no stripe
    assert _findings(dev) == {("fs-stripe-unset", os.path.basename(dev))}


@pytest.mark.parametrize("extended, expected", [
    ("stride=8,stripe_width=24", {"fs-stripe-mismatch"}),
    ("stride=16,stripe_width=32", set()),
])
def test_unmounted_ext4_stride_over_striped_btrfs(striped, extended, expected):
    need_tool("mkfs.ext4")
    loops, mnt = striped
    dev = loops.attach(_image_on(mnt, "ext4.img", 256 * MiB))
    run("mkfs.ext4", "-q", "-F", "-b", "4096", "-E", extended, dev)
    name = os.path.basename(dev)
    assert _findings(dev) == {(code, name) for code in expected}


@pytest.mark.parametrize("start_sector, expected", [
    (2049, {"partition-not-stripe-aligned"}),   # 1 MiB + 512 bytes: not a multiple of 64 KiB
    (2048, set()),                              # 1 MiB: aligned to the 64 KiB x 2 stripe
])
def test_partition_alignment_on_a_loop_disk(striped, start_sector, expected):
    need_tool("sfdisk")
    need_tool("mkfs.xfs")
    loops, mnt = striped
    image = _image_on(mnt, "disk.img", 1200 * MiB)
    size_sectors = 1100 * MiB // 512
    run("sfdisk", "-q", image, stdin=f"label: dos\nstart={start_sector}, size={size_sectors}, type=83\n")
    disk = loops.attach(image)
    # This kernel creates no partition devices for loop disks; a loop at the offset shows partition 1.
    part = loops.attach(image, offset_bytes=start_sector * 512, sizelimit_bytes=size_sectors * 512)
    run("mkfs.xfs", "-q", "-f", "-d", "su=64k,sw=2", part)
    inv = discover([disk])
    views = [p for p in inv.partitions if p.disk == os.path.basename(disk)]
    assert [(p.number, p.start_bytes, p.device, p.origin) for p in views] == [
        (1, start_sector * 512, os.path.basename(part), "table")]
    found = {(f.code, f.device) for f in run_checks(inv) if f.severity != "info"}
    assert found == {(code, os.path.basename(part)) for code in expected}
    assert inv.filesystems[os.path.basename(part)].stripe_unit_bytes == 64 * 1024


def test_loop_offset_without_partition_table_is_checked(striped):
    need_tool("mkfs.ext4")
    loops, mnt = striped
    image = _image_on(mnt, "raw.img", 300 * MiB)
    dev = loops.attach(image, offset_bytes=4096)
    run("mkfs.ext4", "-q", "-F", "-b", "4096", "-E", "stride=16,stripe_width=32", dev)
    assert _findings(dev) == {("loop-offset-not-stripe-aligned", os.path.basename(dev))}
