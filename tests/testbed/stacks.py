"""Stacks the testbed builds from a short description: members (optionally behind a shared limit),
an optional btrfs RAID over them, an optional xfs/ext4 with a stripe geometry on top, and a data file
written once so reads reach the devices."""
from __future__ import annotations

from dataclasses import dataclass, field

from .bed import Testbed, TestbedError
from .throttle import Limits

__all__ = ["BuiltStack", "build_stack", "usable_fraction"]

MiB = 1 << 20

# data capacity of a btrfs profile over n members, in members
_DATA_MEMBERS = {"single": lambda n: n, "raid0": lambda n: n, "raid1": lambda n: n / 2,
                 "raid10": lambda n: n / 2, "raid5": lambda n: n - 1, "raid6": lambda n: n - 2}


def usable_fraction(level: str | None, members: int) -> float:
    """Members' worth of data a profile holds (1 for a bare device)."""
    return 1.0 if level is None else _DATA_MEMBERS[level](members)


@dataclass
class BuiltStack:
    members: list[str]
    target: str                                        # what storlab does I/O on
    target_bytes: int
    run_args: list[str] = field(default_factory=list)  # e.g. --allow-destroy for a bare device
    layers: list[str] = field(default_factory=list)    # bottom up, for the report


def _round_mib(n: float) -> int:
    return max(MiB, int(n) // MiB * MiB)


def build_stack(bed: Testbed, limits: list[Limits], member_bytes: int, *, btrfs: str | None = None,
                fs: str | None = None, su: int | None = None, sw: int | None = None,
                shared_bps: int | None = None, fill_fraction: float = 0.6) -> BuiltStack:
    """Build members -> [btrfs LEVEL] -> [loop over a file -> xfs/ext4 su,sw] and a filled target.
    A bare device is the target itself; otherwise a file of fill_fraction of the usable space."""
    count = len(limits)
    layers = [f"{count} loop device(s) of {member_bytes // MiB} MiB"]
    shared = None
    if shared_bps is not None:
        bus = bed.add_shared("bus", Limits.both(bps=shared_bps), int(count * member_bytes * 1.1) + 64 * MiB)
        shared = bus.name
        layers.append(f"shared limit {shared_bps / MiB:g} MiB/s over them")
    members = bed.add_devices(count, member_bytes, limits, shared=shared)
    if btrfs is None and count > 1:
        raise TestbedError("more than one member needs btrfs to assemble them (md and dm are not available)")
    usable = member_bytes * usable_fraction(btrfs, count)
    if btrfs is not None:
        top_dir = bed.btrfs(members, btrfs)
        layers.append(f"btrfs {btrfs} (nodatacow)")
        if fs is not None:
            volume = f"{top_dir}/volume.img"
            volume_bytes = _round_mib(usable * 0.75)
            device = bed.file_device(volume, volume_bytes)
            layers.append(f"loop over a {volume_bytes // MiB} MiB file")
            return _with_fs(bed, members, device, volume_bytes, fs, su, sw, fill_fraction, layers)
        target = f"{top_dir}/data"
        target_bytes = _round_mib(usable * fill_fraction)
        bed.fill(target, target_bytes)
        return BuiltStack(members, target, target_bytes, [], layers)
    if fs is not None:
        return _with_fs(bed, members, members[0], member_bytes, fs, su, sw, fill_fraction, layers)
    bed.fill(members[0], member_bytes)
    return BuiltStack(members, members[0], member_bytes, ["--allow-destroy", members[0]], layers)


def _with_fs(bed: Testbed, members: list[str], device: str, device_bytes: int, fs: str, su: int | None,
             sw: int | None, fill_fraction: float, layers: list[str]) -> BuiltStack:
    if fs == "xfs":
        bed.mkfs_xfs(device, su, sw)
    else:
        block = 4096
        bed.mkfs_ext4(device, None if su is None else su // block,
                      None if su is None or sw is None else su * sw // block)
    geometry = "" if su is None else f" su={su // 1024}KiB sw={sw}"
    layers.append(f"{fs}{geometry}")
    top = bed.mount(device, fs)
    target = f"{top}/data"
    target_bytes = _round_mib(device_bytes * fill_fraction)
    bed.fill(target, target_bytes)
    return BuiltStack(members, target, target_bytes, [], layers)
