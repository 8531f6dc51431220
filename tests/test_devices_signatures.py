"""Signature probing on image files: real mkfs/mkswap/sfdisk output plus hand-written RAID, LVM,
FAT and GPT-backup magic, including the signatures that live at the end of the device."""
from __future__ import annotations

import shutil
import struct
import subprocess

import pytest
from storlab.devices.signatures import md_superblock_offsets, probe_signatures

MiB = 1 << 20


def _image(tmp_path, name="disk.img", size_bytes=64 * MiB):
    path = tmp_path / name
    with open(path, "wb") as f:
        f.truncate(size_bytes)
    return path


def _need(tool):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} not installed (Debian package: see scripts/test.sh)")


def _run(*cmd, stdin=None):
    subprocess.run(cmd, input=stdin, check=True, capture_output=True, text=True)


def _write_at(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _names(path):
    return [(s.kind, s.name, s.offset_bytes) for s in probe_signatures(path)]


def test_blank_image_has_no_signature(tmp_path):
    assert probe_signatures(_image(tmp_path)) == []


def test_tiny_image_smaller_than_every_probe_is_blank(tmp_path):
    assert probe_signatures(_image(tmp_path, size_bytes=100)) == []


@pytest.mark.parametrize("tool, args, name", [
    ("mkfs.ext4", ["-q", "-F"], "ext4"),
    ("mkfs.ext2", ["-q", "-F"], "ext2"),
    ("mkfs.ext3", ["-q", "-F"], "ext3"),
])
def test_ext_family_found_at_byte_1080(tmp_path, tool, args, name):
    _need(tool)
    img = _image(tmp_path)
    _run(tool, *args, str(img))
    sigs = probe_signatures(img)
    assert [(s.kind, s.name, s.offset_bytes) for s in sigs] == [("filesystem", name, 1080)]
    assert sigs[0].describe() == f"{name} file system (magic 0xEF53 at byte 1080)"


def test_xfs_found_at_byte_0(tmp_path):
    _need("mkfs.xfs")
    img = _image(tmp_path, size_bytes=320 * MiB)  # current mkfs.xfs wants at least 300 MB
    _run("mkfs.xfs", "-q", str(img))
    assert _names(img) == [("filesystem", "xfs", 0)]


def test_btrfs_found_at_64KiB_plus_0x40(tmp_path):
    _need("mkfs.btrfs")
    img = _image(tmp_path, size_bytes=256 * MiB)
    _run("mkfs.btrfs", "-q", str(img))
    assert _names(img) == [("filesystem", "btrfs", 0x10040)]


def test_swap_found_at_end_of_first_page(tmp_path):
    _need("mkswap")
    img = _image(tmp_path)
    img.chmod(0o600)
    _run("mkswap", str(img))
    assert _names(img) == [("swap", "swap", 4096 - 10)]


def test_swap_with_64KiB_pages(tmp_path):
    img = _image(tmp_path)
    _write_at(img, 65536 - 10, b"SWAPSPACE2")
    assert _names(img) == [("swap", "swap", 65526)]


def test_dos_partition_table(tmp_path):
    _need("sfdisk")
    img = _image(tmp_path)
    _run("sfdisk", "-q", str(img), stdin="label: dos\nstart=2048, type=83\n")
    assert _names(img) == [("partition-table", "dos", 510)]


def test_gpt_primary_and_backup(tmp_path):
    _need("sfdisk")
    size = 64 * MiB
    img = _image(tmp_path, size_bytes=size)
    _run("sfdisk", "-q", str(img), stdin="label: gpt\nstart=2048, size=4096\n")
    found = _names(img)
    assert ("partition-table", "gpt", 512) in found
    assert ("partition-table", "gpt", size - 512) in found
    assert all(kind == "partition-table" for kind, _, _ in found)


def test_gpt_backup_alone_at_last_lba_is_found(tmp_path):
    # A disk whose first MiB was zeroed still carries the backup GPT at its end.
    _need("sfdisk")
    size = 64 * MiB
    img = _image(tmp_path, size_bytes=size)
    _run("sfdisk", "-q", str(img), stdin="label: gpt\nstart=2048, size=4096\n")
    _write_at(img, 0, bytes(MiB))
    assert _names(img) == [("partition-table", "gpt", size - 512)]


def _md1_superblock(level=6, raid_disks=10, chunk_sectors=1024):
    sb = bytearray(512)
    struct.pack_into("<II", sb, 0, 0xA92B4EFC, 1)
    sb[32:32 + 6] = b"host:0"
    struct.pack_into("<i", sb, 72, level)
    struct.pack_into("<I", sb, 88, chunk_sectors)
    struct.pack_into("<I", sb, 92, raid_disks)
    return bytes(sb)


@pytest.mark.parametrize("version", ["1.1", "1.2", "1.0"])
def test_md_v1_superblocks(tmp_path, version):
    size = 64 * MiB + 12345  # not a multiple of 4 KiB: the 1.0 offset rounds down first
    img = _image(tmp_path, size_bytes=size)
    offset = md_superblock_offsets(size)[version]
    _write_at(img, offset, _md1_superblock())
    sigs = probe_signatures(img)
    assert [(s.kind, s.name, s.offset_bytes) for s in sigs] == [("raid", "linux_raid_member", offset)]
    assert f"md metadata {version}" in sigs[0].detail
    assert "raid6, 10 devices, chunk 512 KiB" in sigs[0].detail


def test_md_offsets_at_end_follow_libblkid():
    size = 100 * MiB + 5000
    offs = md_superblock_offsets(size)
    assert offs["0.90"] == 100 * MiB - 64 * 1024
    assert offs["1.0"] == 100 * MiB + 4096 - 8192
    assert (offs["1.1"], offs["1.2"]) == (0, 4096)


def test_md_090_superblock_at_end(tmp_path):
    size = 64 * MiB + 7000
    img = _image(tmp_path, size_bytes=size)
    sb = bytearray(1024)
    struct.pack_into("<IIII", sb, 0, 0xA92B4EFC, 0, 90, 0)
    struct.pack_into("<i", sb, 28, 5)         # level
    struct.pack_into("<I", sb, 40, 4)         # raid_disks
    struct.pack_into("<I", sb, 65 * 4, 65536)  # chunk_size in bytes
    offset = 64 * MiB - 64 * 1024
    _write_at(img, offset, bytes(sb))
    sigs = probe_signatures(img)
    assert [(s.name, s.offset_bytes) for s in sigs] == [("linux_raid_member", offset)]
    assert "md metadata 0.90" in sigs[0].detail and "raid5, 4 devices, chunk 64 KiB" in sigs[0].detail


def test_md_magic_with_wrong_version_is_ignored(tmp_path):
    img = _image(tmp_path)
    _write_at(img, 4096, struct.pack("<II", 0xA92B4EFC, 7))
    assert probe_signatures(img) == []


@pytest.mark.parametrize("sector", [0, 1, 2, 3])
def test_lvm2_label_in_first_four_sectors(tmp_path, sector):
    img = _image(tmp_path)
    _write_at(img, sector * 512, b"LABELONE")
    _write_at(img, sector * 512 + 0x18, b"LVM2 001")
    assert _names(img) == [("lvm", "LVM2_member", sector * 512)]


def test_lvm_label_in_sector_4_is_not_a_pv(tmp_path):
    img = _image(tmp_path)
    _write_at(img, 4 * 512, b"LABELONE")
    _write_at(img, 4 * 512 + 0x18, b"LVM2 001")
    assert probe_signatures(img) == []


def test_vfat_boot_sector_is_a_file_system_not_an_mbr(tmp_path):
    img = _image(tmp_path)
    boot = bytearray(512)
    boot[0:3] = b"\xeb\x58\x90"
    boot[3:11] = b"MSDOS5.0"
    boot[0x52:0x5A] = b"FAT32   "
    boot[510:512] = b"\x55\xaa"
    _write_at(img, 0, bytes(boot))
    assert _names(img) == [("filesystem", "vfat", 0x52)]


def test_ntfs_and_iso9660_magic(tmp_path):
    img = _image(tmp_path, "ntfs.img")
    _write_at(img, 3, b"NTFS    ")
    assert _names(img) == [("filesystem", "ntfs", 3)]
    iso = _image(tmp_path, "iso.img")
    _write_at(iso, 0x8001, b"CD001")
    assert _names(iso) == [("filesystem", "iso9660", 0x8001)]


def test_raid_signature_at_end_is_reported_beside_a_file_system_at_start(tmp_path):
    # A device can carry both (e.g. an md 1.0 member formatted by a tool that does not wipe the
    # end, as mke2fs does): a check of the first MiB alone would miss the RAID member.
    _need("mkfs.ext4")
    size = 64 * MiB
    img = _image(tmp_path, size_bytes=size)
    _run("mkfs.ext4", "-q", "-F", str(img))
    offset = md_superblock_offsets(size)["1.0"]
    _write_at(img, offset, _md1_superblock(level=1, raid_disks=2, chunk_sectors=0))
    assert _names(img) == [("filesystem", "ext4", 1080), ("raid", "linux_raid_member", offset)]
