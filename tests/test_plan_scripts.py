"""Build scripts: the exact commands for stacks whose parameters are checked by hand against the
documented conventions (mdadm.8, lvcreate, mkfs.xfs.8, mke2fs.8, mkfs.btrfs)."""
from pathlib import Path

import pytest
from storlab.model.stack import Filesystem, StackError, load_stack, stack_from_notation
from storlab.planner.scripts import build_script, placeholder_devices, size_arg

K, M = 1024, 1024 * 1024
STACKS = Path(__file__).resolve().parents[1] / "examples" / "stacks"


def test_size_arg_and_placeholders():
    assert size_arg(512 * K) == "512K" and size_arg(4 * M, upper=False) == "4m" and size_arg(3 * M // 2) == "1536K"
    assert placeholder_devices(3) == ["/dev/sdb", "/dev/sdc", "/dev/sdd"]
    assert placeholder_devices(26)[-1] == "/dev/sdaa"


def test_md_raid6_of_ten_with_xfs():
    # md RAID 6, 10 drives, chunk 512 KiB -> mkfs.xfs -d su=512k,sw=8
    devices = [f"/dev/disk/by-id/d{i}" for i in range(10)]
    script = build_script(stack_from_notation("R6/10", 512 * K, engine="md"), devices)
    assert f"mdadm --create /dev/md0 --level=6 --raid-devices=10 --chunk=512K --metadata=1.2 {' '.join(devices)}" in script.lines
    assert "mkfs.xfs -b size=4096 -d su=512k,sw=8 -l su=256k /dev/md0" in script.lines
    # read-ahead two full stripes = 8 MiB = 16384 sectors; stripe cache for the RAID 6 array
    assert "blockdev --setra 16384 /dev/md0   # in 512-byte sectors = 8192 KiB" in script.lines
    assert any(line.startswith("echo 4096 > /sys/block/md0/md/stripe_cache_size") for line in script.lines)
    assert script.warnings == ()


def test_md_raid6_with_ext4_stride_and_stripe_width():
    # chunk 512 KiB, 4 KiB blocks, 8 data disks -> -E stride=128,stripe_width=1024
    script = build_script(stack_from_notation("R6/10", 512 * K, engine="md", filesystem=Filesystem("ext4")))
    assert "mkfs.ext4 -b 4096 -E stride=128,stripe_width=1024 /dev/md0" in script.lines
    assert script.warnings   # placeholder device names


def test_lvm_stripe_over_three_md_raid6_8_plus_2():
    # RAID 6 of 8+2 with 512 KiB chunk -> 4 MiB stripe; lvcreate -i 3 -I 4M; xfs su=4m,sw=3
    stack = stack_from_notation("R6/10", 512 * K, engine="md", count=3, inter_chunk_bytes=4 * M)
    script = build_script(stack)
    assert "pvcreate /dev/md0 /dev/md1 /dev/md2" in script.lines
    assert "vgcreate -s 4M vg_storlab /dev/md0 /dev/md1 /dev/md2" in script.lines
    assert ("lvcreate --type striped --stripes 3 --stripesize 4m --extents 100%FREE --name lv_storlab vg_storlab"
            in script.lines)
    assert "mkfs.xfs -b size=4096 -d su=4m,sw=3 -l su=256k /dev/vg_storlab/lv_storlab" in script.lines
    assert "mdadm --create /dev/md2 --level=6 --raid-devices=10 --chunk=512K --metadata=1.2 " \
           + " ".join(placeholder_devices(30)[20:]) in script.lines


def test_raid1_gets_no_chunk_and_raid10_gets_near_layout():
    r1 = build_script(stack_from_notation("R1/2", 64 * K, engine="md"), ["/dev/sdx", "/dev/sdy"])
    assert "mdadm --create /dev/md0 --level=1 --raid-devices=2 --metadata=1.2 /dev/sdx /dev/sdy" in r1.lines
    r10 = build_script(stack_from_notation("R10/4", 256 * K, engine="md"))
    assert any("--level=10 --raid-devices=4 --chunk=256K --layout=n2" in line for line in r10.lines)


def test_software_raid60_is_md_raid0_over_raid6_spans():
    script = build_script(stack_from_notation("R60/6/12", 512 * K, engine="md"))
    assert "mdadm --create /dev/md2 --level=0 --raid-devices=2 --chunk=512K --metadata=1.2 /dev/md0 /dev/md1" in script.lines
    # su = chunk, sw = 2 spans x 4 data drives
    assert "mkfs.xfs -b size=4096 -d su=512k,sw=8 -l su=256k /dev/md2" in script.lines


def test_linear_concat():
    script = build_script(stack_from_notation("R5/5", 64 * K, engine="md", count=2, aggregate="concat"))
    assert "lvcreate --type linear --extents 100%FREE --name lv_storlab vg_storlab" in script.lines


def test_btrfs_native_profiles():
    script = build_script(stack_from_notation("R6/6", 64 * K, engine="md", filesystem=Filesystem("btrfs")))
    assert "mkfs.btrfs -d raid6 -m raid1c3 " + " ".join(placeholder_devices(6)) in script.lines
    assert not any(line.startswith("mdadm") for line in script.lines)
    assert any("unstable" in w.message for w in script.warnings)
    three_way = build_script(stack_from_notation("R1/3", 64 * K, engine="md", filesystem=Filesystem("btrfs")))
    assert any(line.startswith("mkfs.btrfs -d raid1c3 -m raid1c3") for line in three_way.lines)


def test_hardware_raid_starts_from_the_luns():
    stack = load_stack(STACKS / "sas-jbod-4x12-two-raid-adapters.toml")
    script = build_script(stack, ["/dev/sdc", "/dev/sdd"])
    assert not any(line.startswith("mdadm") for line in script.lines)
    assert "lvcreate --type striped --stripes 2 --stripesize 1m --extents 100%FREE --name lv_storlab vg_storlab" in script.lines
    assert "mkfs.xfs -b size=4096 -d su=1m,sw=2 -l su=256k /dev/vg_storlab/lv_storlab" in script.lines


@pytest.mark.parametrize("stack, devices, message", [
    (stack_from_notation("R3/5", 64 * K, engine="md"), None, "md has no RAID 3"),
    (stack_from_notation("R5/5", 48 * K, engine="md"), None, "power-of-two chunk"),
    (stack_from_notation("R6/12", 512 * K, count=2), None, "LVM stripe size must be a power of two"),
    (stack_from_notation("R6/6", 64 * K, engine="md"), ["/dev/sdb"], "needs 6 drives, got 1 devices"),
])
def test_refusals(stack, devices, message):
    with pytest.raises(StackError, match=message):
        build_script(stack, devices)


def test_more_than_128_stripes_are_striped_by_md_raid0_not_lvm():
    # lvcreate takes at most 128 stripes; 130 LUNs of R5/9 (1 MiB stripe) go to one md RAID 0
    luns = [f"/dev/mapper/lun{i}" for i in range(130)]
    script = build_script(stack_from_notation("R5/9", 128 * K, count=130, inter_chunk_bytes=M), luns)
    assert not any(line.startswith(("pvcreate", "vgcreate", "lvcreate")) for line in script.lines)
    assert f"mdadm --create /dev/md0 --level=0 --raid-devices=130 --chunk=1M --metadata=1.2 {' '.join(luns)}" \
        in script.lines
    assert "mkfs.xfs -b size=4096 -d su=1m,sw=130 -l su=256k /dev/md0" in script.lines
    assert "lvm-stripes-limit" in [w.code for w in script.warnings]
    at_limit = build_script(stack_from_notation("R5/9", 128 * K, count=128, inter_chunk_bytes=M), luns[:128])
    assert any(line.startswith("lvcreate --type striped --stripes 128 ") for line in at_limit.lines)


def test_vg_extent_is_at_least_the_lvm_stripe_size():
    # an 8 MiB stripe size above the 4 MiB default extent: lvcreate would cut it to 4 MiB
    script = build_script(stack_from_notation("R5/5", 2 * M, count=2), ["/dev/sdx", "/dev/sdy"])
    assert "vgcreate -s 8M vg_storlab /dev/sdx /dev/sdy" in script.lines
    assert any(line.startswith("lvcreate --type striped --stripes 2 --stripesize 8m ") for line in script.lines)
    small = build_script(stack_from_notation("R0/2", 64 * K, count=2), ["/dev/sdx", "/dev/sdy"])
    assert "vgcreate -s 4M vg_storlab /dev/sdx /dev/sdy" in small.lines


@pytest.mark.parametrize("chunk, data_su, log_su", [(64 * K, "64k", "64k"), (256 * K, "256k", "256k"),
                                                     (512 * K, "512k", "256k")])
def test_xfs_log_stripe_unit_is_the_data_su_up_to_256k(chunk, data_su, log_su):
    script = build_script(stack_from_notation("R0/4", chunk), ["/dev/sdx"])
    assert f"mkfs.xfs -b size=4096 -d su={data_su},sw=4 -l su={log_su} /dev/sdx" in script.lines
    assert any("log stripe unit is capped at 256 KiB" in line for line in script.lines) == (data_su != log_su)


@pytest.mark.parametrize("fs, line", [("xfs", "mkfs.xfs -b size=4096 /dev/md0"), ("ext4", "mkfs.ext4 -b 4096 /dev/md0")])
def test_raid1_file_system_has_no_stripe_unit(fs, line):
    script = build_script(stack_from_notation("R1/2", 64 * K, engine="md", filesystem=Filesystem(fs)))
    assert line in script.lines
    # striped by LVM, mirrors do get the LVM stripe as su
    striped = build_script(stack_from_notation("R1/2", 64 * K, engine="md", count=2, inter_chunk_bytes=M,
                                               filesystem=Filesystem(fs)))
    assert any("su=1m,sw=2" in x or "stride=256,stripe_width=512" in x for x in striped.lines)


def test_script_carries_the_stack_warnings_as_comments():
    # a named drive (the default one gets no reliability verdict, issue 36)
    from storlab.model.stack import DriveType
    drive = DriveType("2 TB NL-SAS", capacity_bytes=2 * 10**12, mtbf_h=600_000)
    script = build_script(stack_from_notation("R50/6/12", 512 * K, engine="md", drive=drive))
    assert "single-parity-long-term" in [w.code for w in script.warnings]
    assert any(line.startswith("# warning: single-parity-long-term: R50/6/12") for line in script.lines)
    assert script.lines[0] == "#!/bin/sh"
