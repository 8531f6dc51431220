"""Parsers of tool output on recorded fixtures: xfs_info (recorded on this project's test stack),
mdadm --detail, /proc/mdstat, lvs, pvs and btrfs filesystem df (formats of reference §3.1-3.3)."""
from __future__ import annotations

from pathlib import Path

import pytest
from storlab.doctor.inventory import md_data_members
from storlab.doctor.tools import (
    parse_btrfs_fi_df,
    parse_lvs,
    parse_mdadm_detail,
    parse_mdstat,
    parse_pvs,
    parse_size_suffix,
    parse_xfs_info,
)

FIX = Path(__file__).parent / "fixtures" / "doctor"


def test_xfs_info_units_are_fs_blocks():
    info = parse_xfs_info((FIX / "xfs_info_loop_su32k_sw3.txt").read_text())
    # mkfs.xfs -d su=32k,sw=3 with 4 KiB blocks: sunit=8 swidth=24 blks
    assert (info.block_bytes, info.sunit_blocks, info.swidth_blocks) == (4096, 8, 24)
    assert (info.stripe_unit_bytes, info.stripe_width_bytes) == (32768, 98304)
    assert (info.sector_bytes, info.log_sunit_blocks) == (512, 8)


def test_xfs_info_reference_example_md_raid6():
    # reference §3.3: RAID 6 of 10 drives, 512 KiB chunk -> sunit=128 swidth=1024 blks
    text = ("meta-data=/dev/md0               isize=512    agcount=32, agsize=30523648 blks\n"
            "         =                       sectsz=4096  attr=2, projid32bit=1\n"
            "data     =                       bsize=4096   blocks=976756736, imaxpct=5\n"
            "         =                       sunit=128    swidth=1024 blks\n"
            "naming   =version 2              bsize=4096   ascii-ci=0, ftype=1\n"
            "log      =internal log           bsize=4096   blocks=476934, version=2\n"
            "         =                       sectsz=4096  sunit=1 blks, lazy-count=1\n")
    info = parse_xfs_info(text)
    assert (info.stripe_unit_bytes, info.stripe_width_bytes) == (512 * 1024, 4 * 1024 * 1024)
    assert info.log_sunit_blocks == 1


def test_xfs_info_without_data_section_is_an_error():
    with pytest.raises(ValueError, match="no data bsize"):
        parse_xfs_info("meta-data=/dev/sda isize=512\n")


def test_mdadm_detail_raid6():
    md = parse_mdadm_detail((FIX / "mdadm_detail_md0_raid6.txt").read_text())
    assert (md.device, md.level, md.raid_devices, md.chunk_bytes) == ("/dev/md0", "raid6", 10, 512 * 1024)
    assert (md.layout, md.metadata_version, md.state) == ("left-symmetric", "1.2", "clean")
    assert md.members[0] == "/dev/sda1" and md.members[-1] == "/dev/sdj1" and len(md.members) == 10
    assert md_data_members(md.level, md.raid_devices) == 8


def test_mdstat_arrays_levels_chunks_and_degraded():
    arrays = {a.name: a for a in parse_mdstat((FIX / "mdstat_raid6_raid0.txt").read_text())}
    assert set(arrays) == {"md0", "md1", "md2"}
    md0, md1, md2 = arrays["md0"], arrays["md1"], arrays["md2"]
    assert (md0.level, md0.chunk_bytes, md0.raid_disks, md0.in_sync, md0.status) == ("raid6", 512 * 1024, 10, 10, "[UUUUUUUUUU]")
    assert md0.members[-1] == "sda1" and len(md0.members) == 10
    assert (md1.level, md1.chunk_bytes, md1.raid_disks) == ("raid0", 256 * 1024, None)  # raid0 prints "chunks"
    assert (md2.in_sync, md2.status, md2.members) == (3, "[U_UU]", ("sdp", "sdo", "sdn", "sdm"))


@pytest.mark.parametrize("level, disks, layout, data", [
    ("raid0", 4, None, 4), ("raid5", 5, None, 4), ("raid6", 10, None, 8), ("raid4", 3, None, 2),
    ("raid10", 4, 0x102, 2), ("raid10", 6, "near=3", 2), ("raid1", 2, None, None), ("linear", 3, None, None),
])
def test_md_data_members(level, disks, layout, data):
    assert md_data_members(level, disks, layout) == data


def test_lvs_segments():
    segs = parse_lvs((FIX / "lvs_scratch_striped_64k.txt").read_text())
    assert [(s.vg_name, s.lv_name, s.segtype, s.stripes, s.stripe_size_bytes) for s in segs] == [
        ("vg0", "scratch", "striped", 2, 65536), ("vg0", "home", "linear", 1, 0),
        ("vg-data", "my-lv", "striped", 4, 4 * 1024 * 1024)]
    assert segs[0].devices == ("/dev/md0", "/dev/md1") and (segs[0].major, segs[0].minor) == (253, 0)
    assert segs[2].dm_name == "vg--data-my--lv" and segs[2].major is None


def test_pvs_pe_start():
    pvs = parse_pvs((FIX / "pvs_md.txt").read_text())
    assert [(p.pv_name, p.vg_name, p.pe_start_bytes) for p in pvs] == [
        ("/dev/md0", "vg0", 1048576), ("/dev/md1", "vg0", 4194304)]


def test_btrfs_fi_df_profiles():
    assert parse_btrfs_fi_df((FIX / "btrfs_fi_df_raid0.txt").read_text()) == {
        "data": "raid0", "system": "raid1", "metadata": "raid1"}


@pytest.mark.parametrize("text, n", [("512K", 524288), ("64k", 65536), ("1.00GiB", 1 << 30), ("4096", 4096)])
def test_size_suffix(text, n):
    assert parse_size_suffix(text) == n


def test_size_suffix_rejects_garbage():
    with pytest.raises(ValueError, match="cannot read size"):
        parse_size_suffix("lots")
