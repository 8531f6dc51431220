"""File-system stripe geometry: xfs (xfs_info, else its superblock), ext2/3/4 (superblock
s_raid_stride / s_raid_stripe_width), btrfs (profiles and member devices from /sys/fs/btrfs), and
the mount options that override the on-disk values (xfs sunit/swidth, ext4 stripe).
All results are in bytes beside the file system's own units, which users copy into commands.
"""
from __future__ import annotations

import os
import re
import struct
from dataclasses import asdict, dataclass, field

from .tools import ToolRunner, parse_btrfs_fi_df, parse_xfs_info

__all__ = ["FsGeometry", "xfs_geometry_from_superblock", "ext_geometry_from_superblock",
           "apply_mount_options", "btrfs_geometry", "BTRFS_STRIPE_BYTES", "btrfs_data_members",
           "xfs_geometry"]

BTRFS_STRIPE_BYTES = 64 * 1024   # BTRFS_STRIPE_LEN, fixed (kernel-shared/volumes.h)
_BTRFS_PROFILES = ("single", "dup", "raid0", "raid1", "raid1c3", "raid1c4", "raid10", "raid5", "raid6")


@dataclass
class FsGeometry:
    fs_type: str
    device: str                       # kernel name of the device holding it
    block_bytes: int | None
    stripe_unit_bytes: int            # 0 = no stripe geometry set
    stripe_width_bytes: int
    native: str                       # the values in the file system's own units, as tools print them
    source: str                       # where the values came from
    mount_point: str | None = None
    profiles: dict[str, str] = field(default_factory=dict)   # btrfs: data/metadata/system -> profile
    members: list[str] = field(default_factory=list)          # btrfs: member device names

    @property
    def stripe_width_units(self) -> int:
        return self.stripe_width_bytes // self.stripe_unit_bytes if self.stripe_unit_bytes else 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["stripe_width_units"] = self.stripe_width_units
        return d


def _pread(path: str, length: int, offset: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        return os.pread(fd, length, offset)
    finally:
        os.close(fd)


def xfs_geometry_from_superblock(path: str, device: str) -> FsGeometry | None:
    """sb_blocksize (byte 4), sb_unit (184) and sb_width (188), big-endian, in fs blocks."""
    sb = _pread(path, 512, 0)
    if len(sb) < 192 or sb[:4] != b"XFSB":
        return None
    block = struct.unpack_from(">I", sb, 4)[0]
    sunit, swidth = struct.unpack_from(">II", sb, 184)
    return FsGeometry("xfs", device, block, sunit * block, swidth * block,
                      f"sunit={sunit} swidth={swidth} blks ({block}-byte blocks)", f"xfs superblock of {path}")


def xfs_geometry(device: str, dev_path: str, mount_point: str | None, run: ToolRunner) -> FsGeometry | None:
    """A mounted xfs is asked through xfs_info (an ioctl: works without reading the device);
    otherwise, or when xfs_info is missing, the superblock is read."""
    if mount_point:
        text = run(["xfs_info", mount_point])
        if text:
            try:
                info = parse_xfs_info(text)
            except ValueError:
                info = None
            if info:
                return FsGeometry("xfs", device, info.block_bytes, info.stripe_unit_bytes, info.stripe_width_bytes,
                                  f"sunit={info.sunit_blocks} swidth={info.swidth_blocks} blks "
                                  f"({info.block_bytes}-byte blocks)", f"xfs_info {mount_point}", mount_point)
    geo = xfs_geometry_from_superblock(dev_path, device)
    if geo:
        geo.mount_point = mount_point
    return geo


def ext_geometry_from_superblock(path: str, device: str, fs_type: str = "ext4") -> FsGeometry | None:
    """s_log_block_size (0x18), s_raid_stride (0x164, u16), s_raid_stripe_width (0x170, u32)."""
    sb = _pread(path, 1024, 1024)
    if len(sb) < 0x174 or struct.unpack_from("<H", sb, 0x38)[0] != 0xEF53:
        return None
    block = 1024 << struct.unpack_from("<I", sb, 0x18)[0]
    stride = struct.unpack_from("<H", sb, 0x164)[0]
    stripe_width = struct.unpack_from("<I", sb, 0x170)[0]
    return FsGeometry(fs_type, device, block, stride * block, stripe_width * block,
                      f"stride={stride} stripe_width={stripe_width} ({block}-byte blocks)",
                      f"{fs_type} superblock of {path}")


def apply_mount_options(geo: FsGeometry, options: str) -> FsGeometry:
    """Mount options override the superblock: xfs sunit/swidth (512-byte units), ext4 stripe (blocks)."""
    opts = dict(o.split("=", 1) for o in options.split(",") if "=" in o)
    if geo.fs_type == "xfs" and "sunit" in opts and "swidth" in opts and "xfs_info" not in geo.source:
        unit, width = int(opts["sunit"]) * 512, int(opts["swidth"]) * 512
        if (unit, width) != (geo.stripe_unit_bytes, geo.stripe_width_bytes):
            geo.stripe_unit_bytes, geo.stripe_width_bytes = unit, width
            geo.native = f"mount options sunit={opts['sunit']},swidth={opts['swidth']} (512-byte units)"
            geo.source = "mount options"
    if geo.fs_type.startswith("ext") and "stripe" in opts and geo.block_bytes:
        width = int(opts["stripe"]) * geo.block_bytes
        if width != geo.stripe_width_bytes:
            geo.stripe_width_bytes = width
            geo.native += f"; mount option stripe={opts['stripe']}"
            geo.source += " and mount options"
    return geo


def btrfs_data_members(profile: str, devices: int) -> int:
    """Data-bearing stripes per full stripe of a btrfs profile over `devices` devices; 1 = not striped."""
    return {"raid0": devices, "raid10": devices // 2, "raid5": devices - 1,
            "raid6": devices - 2}.get(profile, 1)


def _btrfs_sysfs_dir(device: str, sysfs_root: str) -> str | None:
    base = os.path.join(sysfs_root, "fs", "btrfs")
    try:
        uuids = sorted(os.listdir(base))
    except OSError:
        return None
    for uuid in uuids:
        if os.path.exists(os.path.join(base, uuid, "devices", device)):
            return os.path.join(base, uuid)
    return None


def btrfs_geometry(device: str, mount_point: str | None, sysfs_root: str, run: ToolRunner) -> FsGeometry | None:
    """Profiles and members of a mounted btrfs, from /sys/fs/btrfs/<uuid>/ (or `btrfs filesystem df`).

    btrfs has no stripe-unit setting: data is striped in fixed 64 KiB elements, so the stripe unit is
    64 KiB and the width follows from the data profile and number of devices.
    """
    fs_dir = _btrfs_sysfs_dir(device, sysfs_root)
    profiles: dict[str, str] = {}
    members: list[str] = []
    source = ""
    if fs_dir:
        members = sorted(os.listdir(os.path.join(fs_dir, "devices")))
        for kind in ("data", "metadata", "system"):
            try:
                names = os.listdir(os.path.join(fs_dir, "allocation", kind))
            except OSError:
                continue
            found = [n for n in names if n in _BTRFS_PROFILES]
            if found:
                profiles[kind] = sorted(found)[0] if len(found) == 1 else "+".join(sorted(found))
        source = fs_dir
    elif mount_point:
        text = run(["btrfs", "filesystem", "df", mount_point])
        if text:
            profiles = parse_btrfs_fi_df(text)
            source = f"btrfs filesystem df {mount_point}"
    if not profiles:
        return None
    data = profiles.get("data", profiles.get("data+metadata", "single"))
    data_members = btrfs_data_members(data, len(members)) if members else 1
    striped = data_members > 1 and not re.search(r"\+", data)
    unit = BTRFS_STRIPE_BYTES if striped else 0
    native = ", ".join(f"{k} {v}" for k, v in profiles.items())
    if members:
        native += f" over {len(members)} devices"
    return FsGeometry("btrfs", device, None, unit, unit * data_members if striped else 0, native, source,
                      mount_point, profiles, members)
