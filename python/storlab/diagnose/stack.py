"""The layers below a diagnose target, read from the doctor's inventory.

A target is a mount point, a file, or a block device. Below it: the file system (if any), the
volume that aggregates several devices (md, LVM, or btrfs's own multi-device profile, which has
no block device of its own), and the member devices at the bottom. Partitions are followed down
to the disk that holds them only for naming; they are measured as the member they are.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any

from ..doctor.filesystems import FsGeometry
from ..doctor.inventory import Inventory, Striping, discover
from ..errors import TargetError

__all__ = ["StackView", "describe_stack", "level_of", "shared_below"]

# btrfs data profiles and md levels, in the names the model uses.
_LEVELS = {"single": "single", "dup": "raid1", "raid0": "raid0", "raid1": "raid1", "raid1c3": "raid1",
           "raid1c4": "raid1", "raid10": "raid10", "raid5": "raid5", "raid6": "raid6", "linear": "linear",
           "striped": "raid0", "mirror": "raid1"}


@dataclass
class StackView:
    """What diagnose measures: the file system, the volume and the members below one target."""
    target: str
    target_kind: str                   # "dir" (a folder: the probe file goes there) | "file" | "block"
    mount_point: str | None            # file system holding the target (None for a bare device)
    fs_type: str | None
    fs_device: str | None              # kernel name of the device the file system lives on
    volume: str | None                 # aggregate block device (md, dm) measured on its own; None for
                                       # btrfs multi-device (the file system is the volume) or one device
    level: str                         # single | linear | raid0 | raid1 | raid10 | raid5 | raid6
    members: list[str]                 # kernel names of the member devices, bottom layer
    striping: Striping | None = None
    fs_geometry: FsGeometry | None = None
    notes: list[str] = field(default_factory=list)
    shared_below: dict[str, str] = field(default_factory=dict)   # member -> the device it hangs on

    @property
    def volume_layer(self) -> str:
        """How the members are combined, in words: "btrfs raid0 over 4 devices"."""
        n = len(self.members)
        if self.volume:
            return f"{self.volume} ({self.level} over {n} devices)"
        if self.fs_type == "btrfs" and n > 1:
            return f"btrfs {self.level} over {n} devices"
        return f"{self.level} over {n} device" + ("s" if n != 1 else "")

    def to_dict(self) -> dict[str, Any]:
        s = self.striping
        return {
            "target": self.target, "target_kind": self.target_kind, "mount_point": self.mount_point,
            "fs_type": self.fs_type, "fs_device": self.fs_device, "volume": self.volume,
            "level": self.level, "members": list(self.members),
            "striping": None if s is None else {"unit_bytes": s.unit_bytes, "data_members": s.data_members,
                                                "parity": s.parity, "width_bytes": s.width_bytes,
                                                "source": s.source},
            "notes": list(self.notes), "shared_below": dict(self.shared_below),
        }


def level_of(name: str | None) -> str:
    """The model's name for a btrfs profile, an md level or an LVM segment type."""
    key = (name or "single").lower().split("+")[0]
    return _LEVELS.get(key, key)


def _mount_holding(inv: Inventory, path: str):
    path = os.path.realpath(path)
    best = None
    for m in inv.mounts:
        mp = m.mount_point.rstrip("/") or "/"
        if path == mp or path.startswith(mp.rstrip("/") + "/") or mp == "/":
            if best is None or len(mp) > len(best.mount_point):
                best = m
    return best


def _device_of(inv: Inventory, m) -> str | None:
    for name in inv.devices:
        if m in inv.mounts_of(name):
            return name
    return None


def _leaves(inv: Inventory, name: str, seen: frozenset = frozenset()) -> list[str]:
    """The bottom devices below `name` (md/dm slaves followed down; partitions stay members)."""
    dev = inv.devices.get(name)
    if dev is None or name in seen or not dev.slaves:
        return [name]
    out: list[str] = []
    for s in dev.slaves:
        out += _leaves(inv, s, seen | {name})
    return out


def _volume_level(inv: Inventory, name: str) -> str:
    if name in inv.md:
        return level_of(inv.md[name].level)
    dev = inv.devices[name]
    if dev.md is not None and getattr(dev.md, "level", None):
        return level_of(dev.md.level)
    if name in inv.lvm:
        return level_of(getattr(inv.lvm[name], "segtype", None) or "linear")
    return "linear"


def describe_stack(target: str, inventory: Inventory | None = None) -> StackView:
    """The StackView below `target`; a TargetError names what cannot be used."""
    if not os.path.exists(target):
        raise TargetError(f"diagnose target: {target} does not exist; give a mount point, a file or a block device")
    st = os.stat(target)
    inv = inventory if inventory is not None else discover([target])
    if stat.S_ISBLK(st.st_mode):
        name = next((n for n, d in inv.devices.items()
                     if (d.major, d.minor) == (os.major(st.st_rdev), os.minor(st.st_rdev))), None)
        if name is None:
            raise TargetError(f"diagnose target: {target} is not a block device this host lists under /sys/block")
        lower = _below_loop(inv, name)
        if lower is not None:
            return _over(lower, target, "block", None, None, name, inv, None, [])
        members = _leaves(inv, name)
        volume = name if members != [name] else None
        level = _volume_level(inv, name) if volume else "single"
        return StackView(target, "block", None, None, None, volume, level, members,
                         inv.striping.get(name), None)
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        raise TargetError(f"diagnose target: {target} is neither a directory, a regular file nor a block device")
    m = _mount_holding(inv, target)
    if m is None:
        raise TargetError(f"diagnose target: no mounted file system holds {target}")
    kind = "dir" if stat.S_ISDIR(st.st_mode) else "file"
    fs_dev = _device_of(inv, m)
    geo = inv.filesystems.get(fs_dev) if fs_dev else None
    notes: list[str] = []
    if fs_dev is None:
        notes.append(f"{m.mount_point} ({m.fs_type}) has no block device below it: only the file-system "
                     "layer can be measured")
        return StackView(target, kind, m.mount_point, m.fs_type, None, None, "single", [], None, geo, notes)
    if geo is not None and geo.fs_type == "btrfs" and len(geo.members) > 1:
        level = level_of(geo.profiles.get("data"))
        members = [leaf for mem in geo.members for leaf in _leaves(inv, mem)]
        return StackView(target, kind, m.mount_point, m.fs_type, fs_dev, None, level, members,
                         inv.striping.get(fs_dev), geo, notes)
    lower = _below_loop(inv, fs_dev)
    if lower is not None:
        return _over(lower, target, kind, m.mount_point, m.fs_type, fs_dev, inv, geo, notes)
    members = _leaves(inv, fs_dev)
    volume = fs_dev if members != [fs_dev] else None
    level = _volume_level(inv, fs_dev) if volume else "single"
    return StackView(target, kind, m.mount_point, m.fs_type, fs_dev, volume, level, members,
                     inv.striping.get(fs_dev), geo, notes)


def _below_loop(inv: Inventory, name: str) -> StackView | None:
    """The stack under a loop device whose backing file lives on a file system over devices."""
    dev = inv.devices.get(name)
    backing = dev.loop.backing_file if dev is not None and dev.loop is not None else None
    if not backing or not os.path.isfile(backing):
        return None
    try:
        lower = describe_stack(backing, inv)
    except TargetError:
        return None
    return lower if lower.members else None


def _over(lower: StackView, target: str, kind: str, mount_point: str | None, fs_type: str | None,
          device: str, inv: Inventory, geo: FsGeometry | None, notes: list[str]) -> StackView:
    """A loop device over a file on `lower`: the loop device is the volume (measured on its own),
    the lower stack's members are the members."""
    note = (f"{device} is a loop device over {lower.target} on {lower.fs_type} "
            f"({lower.volume_layer}): its members are measured as this stack's members")
    return StackView(target, kind, mount_point, fs_type, device, device, lower.level, list(lower.members),
                     inv.striping.get(device) or lower.striping, geo, [*notes, *lower.notes, note])


def _sysfs_name(major: int, minor: int) -> str | None:
    try:
        return os.path.basename(os.path.realpath(f"/sys/dev/block/{major}:{minor}"))
    except OSError:
        return None


def shared_below(members: list[str], sys_root: str = "/sys") -> dict[str, str]:
    """For each member, the device it depends on that others may share, in words: "backed by files
    on loop7" (a loop device's backing file lives on that block device), "partitions of sdb", or
    "behind SCSI host3" / "behind expander-3:0" (its sysfs device path). A member with none of
    these (a whole disk on its own, a loop file in memory) is left out."""
    out: dict[str, str] = {}
    for m in members:
        block = os.path.join(sys_root, "class", "block", m)
        try:
            with open(os.path.join(block, "loop", "backing_file")) as fh:
                backing = fh.read().strip()
        except OSError:
            backing = ""
        if backing:
            try:
                st = os.stat(backing)
            except OSError:
                st = None
            if st is not None and os.major(st.st_dev) != 0:
                name = _sysfs_name(os.major(st.st_dev), os.minor(st.st_dev))
                if name:
                    out[m] = f"backed by files on {name}"
            continue
        if os.path.exists(os.path.join(block, "partition")):
            out[m] = f"partitions of {os.path.basename(os.path.dirname(os.path.realpath(block)))}"
            continue
        device = os.path.realpath(os.path.join(block, "device"))
        parts = device.split(os.sep)
        expanders = [p for p in parts if p.startswith("expander-")]
        hosts = [p for p in parts if p.startswith("host") and p[4:].isdigit()]
        if expanders:
            out[m] = f"behind {expanders[-1]}"
        elif hosts:
            out[m] = f"behind SCSI {hosts[-1]}"
    return out
