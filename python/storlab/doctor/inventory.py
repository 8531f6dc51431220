"""Discovery for `storlab doctor`: one Inventory of the host's storage stack built from sysfs,
procfs, on-disk superblocks and partition tables, and (when installed) mdadm, lvs/pvs, xfs_info.

The Inventory is plain data; the checks only read it. Every input location is a parameter
(`sysfs_root`, `proc_root`, `dev_root`, `run`) so recorded fixtures can stand in for a live host.
The stripe geometry each device presents to the layer above is derived bottom-up here (`Striping`).
"""
from __future__ import annotations

import os
import stat
from dataclasses import asdict, dataclass, field

from ..devices.netfs import network_filesystem
from ..devices.partitions import read_partition_table
from ..devices.signatures import Signature, probe_signatures
from ..devices.sysfs import BlockDevice, Mount, list_block_devices, read_mountinfo
from ..errors import TargetError
from ..units import format_size
from .filesystems import (
    BTRFS_STRIPE_BYTES,
    FsGeometry,
    apply_mount_options,
    btrfs_geometry,
    ext_geometry_from_superblock,
    xfs_geometry,
    xfs_geometry_from_superblock,
)
from .tools import (
    LVS_ARGS,
    PVS_ARGS,
    LvSegment,
    MdDetail,
    PvInfo,
    ToolRunner,
    parse_lvs,
    parse_mdadm_detail,
    parse_mdstat,
    parse_pvs,
    run_tool,
)

__all__ = ["Striping", "PartitionView", "Inventory", "discover", "md_data_members"]


@dataclass(frozen=True)
class Striping:
    """The stripe a device presents to the layer above it."""
    unit_bytes: int          # bytes on one member before the next (chunk, stripe size)
    data_members: int        # data-bearing members per full stripe
    parity: bool             # parity RAID: partial-stripe writes cost read-modify-write
    source: str              # human evidence, e.g. "md0: raid6, 10 devices (8 data), chunk 512 KiB"

    @property
    def width_bytes(self) -> int:
        return self.unit_bytes * self.data_members


@dataclass(frozen=True)
class PartitionView:
    disk: str                # kernel name of the whole device
    number: int
    start_bytes: int
    size_bytes: int
    device: str | None       # kernel name of the partition device or loop view over it, if any
    origin: str              # "sysfs" or "table" (read from the disk: the kernel made no device)


@dataclass
class Inventory:
    devices: dict[str, BlockDevice] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    filesystems: dict[str, FsGeometry] = field(default_factory=dict)      # by device name
    partitions: list[PartitionView] = field(default_factory=list)
    md: dict[str, MdDetail] = field(default_factory=dict)
    lvm: dict[str, LvSegment] = field(default_factory=dict)              # by dm kernel name
    pvs: dict[str, PvInfo] = field(default_factory=dict)                 # by PV kernel name
    signatures: dict[str, list[Signature]] = field(default_factory=dict)  # unmounted devices
    striping: dict[str, Striping] = field(default_factory=dict)
    loop_views: dict[str, PartitionView] = field(default_factory=dict)   # loop name -> partition it shows
    scope: list[str] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)      # devices the targets named (all file systems if none)
    notes: list[str] = field(default_factory=list)

    def mounts_of(self, name: str) -> list[Mount]:
        dev = self.devices.get(name)
        if dev is None:
            return []
        return [m for m in self.mounts
                if ((m.major, m.minor) == (dev.major, dev.minor) and dev.major is not None)
                or m.source == dev.dev_path]

    def to_dict(self) -> dict:
        return {
            "devices": [self._device_dict(n) for n in self.scope],
            "partitions": [asdict(p) for p in self.partitions if p.disk in self.scope],
            "filesystems": [g.to_dict() for n, g in self.filesystems.items() if n in self.scope],
            "notes": list(self.notes),
        }

    def _device_dict(self, name: str) -> dict:
        dev = self.devices[name]
        d = dev.to_dict()
        d["queue"]["schedulers_available"] = list(dev.queue.schedulers_available)
        s = self.striping.get(name)
        d["striping"] = None if s is None else {**asdict(s), "width_bytes": s.width_bytes}
        d["mounts"] = [{"mount_point": m.mount_point, "fs_type": m.fs_type} for m in self.mounts_of(name)]
        d["signatures"] = [s.to_dict() for s in self.signatures.get(name, [])]
        if name in self.md:
            d["md_detail"] = asdict(self.md[name])
        if name in self.lvm:
            d["lvm"] = asdict(self.lvm[name])
        if name in self.pvs:
            d["pv"] = asdict(self.pvs[name])
        return d


# --- md -------------------------------------------------------------------------------------------

def md_data_members(level: str | None, raid_disks: int | None, layout: int | str | None = None) -> int | None:
    """Data-bearing members of a full stripe; None for levels that do not stripe (raid1, linear)."""
    if not level or not raid_disks:
        return None
    level = level.lower().replace("level ", "raid")
    if level in ("raid0", "0", "stripe"):
        return raid_disks
    if level in ("raid4", "raid5", "4", "5"):
        return raid_disks - 1
    if level in ("raid6", "6"):
        return raid_disks - 2
    if level in ("raid10", "10"):
        copies = 2
        if isinstance(layout, int) and layout:
            copies = max(1, (layout & 0xFF) * ((layout >> 8) & 0xFF))
        elif isinstance(layout, str):
            digits = [int(c) for c in layout if c.isdigit()]
            copies = digits[0] if digits else 2
        return max(1, raid_disks // copies)
    return None


def _md_details(devices: dict[str, BlockDevice], proc_root: str, run: ToolRunner, notes: list[str]) -> dict[str, MdDetail]:
    out: dict[str, MdDetail] = {}
    mdstat = {}
    try:
        with open(os.path.join(proc_root, "mdstat")) as f:
            mdstat = {a.name: a for a in parse_mdstat(f.read())}
    except OSError:
        pass
    without_mdadm = []
    for name, dev in devices.items():
        if dev.kind != "md":
            continue
        text = run(["mdadm", "--detail", dev.dev_path])
        if text:
            out[name] = parse_mdadm_detail(text)
            continue
        without_mdadm.append(name)
        sys_md, stat_md = dev.md, mdstat.get(name)
        out[name] = MdDetail(
            device=dev.dev_path,
            level=(sys_md.level if sys_md and sys_md.level else stat_md.level if stat_md else None),
            raid_devices=(sys_md.raid_disks if sys_md and sys_md.raid_disks else stat_md.raid_disks if stat_md else None),
            chunk_bytes=(sys_md.chunk_size_bytes if sys_md and sys_md.chunk_size_bytes
                         else stat_md.chunk_bytes if stat_md else None),
            layout=str(sys_md.layout) if sys_md and sys_md.layout is not None else None,
            metadata_version=sys_md.metadata_version if sys_md else None,
            state=sys_md.array_state if sys_md else (stat_md.state if stat_md else None),
            members=tuple(f"/dev/{s}" for s in dev.slaves),
        )
    if without_mdadm:
        notes.append(f"mdadm --detail gave nothing for {', '.join(without_mdadm)}: "
                     f"geometry read from sysfs and /proc/mdstat")
    return out


# --- LVM ------------------------------------------------------------------------------------------

def _lvm(devices: dict[str, BlockDevice], run: ToolRunner, notes: list[str]) -> tuple[dict, dict]:
    lvm_devs = [d for d in devices.values() if d.dm is not None and d.dm.is_lvm]
    if not lvm_devs:
        return {}, {}
    text = run(list(LVS_ARGS))
    if text is None:
        notes.append("lvs not available: LVM stripe counts and sizes unknown")
        return {}, {}
    by_dm_name = {d.dm.name: d.name for d in lvm_devs if d.dm and d.dm.name}
    by_devnum = {(d.major, d.minor): d.name for d in lvm_devs}
    lvm: dict[str, LvSegment] = {}
    for seg in parse_lvs(text):
        name = by_devnum.get((seg.major, seg.minor)) or by_dm_name.get(seg.dm_name)
        if name and name not in lvm:      # first segment; multi-segment LVs are rare on scratch
            lvm[name] = seg
    pvs: dict[str, PvInfo] = {}
    pv_text = run(list(PVS_ARGS))
    if pv_text:
        for pv in parse_pvs(pv_text):
            pvs[os.path.basename(pv.pv_name)] = pv
    return lvm, pvs


# --- discovery ------------------------------------------------------------------------------------

def _loop_backing_key(dev: BlockDevice) -> str | None:
    if dev.loop is None or not dev.loop.backing_file:
        return None
    return os.path.realpath(dev.loop.backing_file.replace(" (deleted)", ""))


def _partitions(inv: Inventory, dev_root: str) -> None:
    loops_by_file: dict[str, list[BlockDevice]] = {}
    for d in inv.devices.values():
        key = _loop_backing_key(d)
        if key:
            loops_by_file.setdefault(key, []).append(d)
    for disk in list(inv.devices.values()):
        if disk.kind == "partition":
            continue
        if disk.partitions:
            for p in disk.partitions:
                part = inv.devices.get(p)
                if part and part.start_bytes is not None:
                    inv.partitions.append(PartitionView(disk.name, part.partition_number or 0, part.start_bytes,
                                                        part.size_bytes or 0, p, "sysfs"))
            continue
        if disk.kind in ("md", "dm") or (disk.loop and disk.loop.offset_bytes):
            continue  # partitioned md/dm are rare; a loop with an offset is itself a view
        try:
            table = read_partition_table(os.path.join(dev_root, disk.name),
                                         disk.queue.logical_block_size or 512)
        except OSError:
            continue
        if table is None:
            continue
        siblings = [d for d in loops_by_file.get(_loop_backing_key(disk) or "", []) if d is not disk]
        for e in table.entries:
            view_dev = next((d.name for d in siblings if d.loop and d.loop.offset_bytes == e.start_bytes), None)
            view = PartitionView(disk.name, e.number, e.start_bytes, e.size_bytes, view_dev, "table")
            inv.partitions.append(view)
            if view_dev:
                inv.loop_views[view_dev] = view


def _filesystems(inv: Inventory, names: list[str], sysfs_root: str, dev_root: str, run: ToolRunner) -> None:
    for name in names:
        dev = inv.devices[name]
        mounts = inv.mounts_of(name)
        dev_path = os.path.join(dev_root, name)
        geo = None
        try:
            if mounts:
                m = mounts[0]
                if m.fs_type == "xfs":
                    geo = xfs_geometry(name, dev_path, m.mount_point, run)
                elif m.fs_type in ("ext2", "ext3", "ext4"):
                    geo = ext_geometry_from_superblock(dev_path, name, m.fs_type)
                elif m.fs_type == "btrfs":
                    geo = btrfs_geometry(name, m.mount_point, sysfs_root, run)
                if geo is not None:
                    geo.mount_point = m.mount_point
                    geo = apply_mount_options(geo, m.super_options)
            elif dev.size_bytes:
                sigs = probe_signatures(dev_path)
                if sigs:
                    inv.signatures[name] = sigs
                fs = {s.name for s in sigs if s.kind == "filesystem"}
                if "xfs" in fs:
                    geo = xfs_geometry_from_superblock(dev_path, name)
                elif fs & {"ext2", "ext3", "ext4"}:
                    geo = ext_geometry_from_superblock(dev_path, name, sorted(fs & {"ext2", "ext3", "ext4"})[0])
                elif "btrfs" in fs:
                    geo = btrfs_geometry(name, None, sysfs_root, run)
        except FileNotFoundError:
            pass  # no device node (a recorded tree, or udev has not created it): nothing to read
        except OSError as e:
            inv.notes.append(f"{name}: cannot read the device ({e.strerror}); run as root for superblocks and signatures")
        if geo is not None:
            inv.filesystems[name] = geo


def _mount_of_path(path: str, mounts: list[Mount]) -> Mount | None:
    best = None
    for m in mounts:
        mp = m.mount_point
        if path == mp or path.startswith(mp.rstrip("/") + "/"):
            if best is None or len(mp) >= len(best.mount_point):
                best = m
    return best


def _device_of_mount(inv: Inventory, m: Mount) -> str | None:
    for d in inv.devices.values():
        if d.major is not None and (d.major, d.minor) == (m.major, m.minor):
            return d.name
    if m.source.startswith("/dev/"):
        base = os.path.basename(os.path.realpath(m.source)) if os.path.exists(m.source) else os.path.basename(m.source)
        if base in inv.devices:
            return base
    return None


def _striping(inv: Inventory, name: str, visiting: frozenset = frozenset()) -> Striping | None:
    if name in inv.striping:
        return inv.striping[name]
    dev = inv.devices.get(name)
    if dev is None or name in visiting:
        return None
    visiting = visiting | {name}
    result: Striping | None = None
    if dev.kind == "md" and name in inv.md:
        md = inv.md[name]
        data = md_data_members(md.level, md.raid_devices, dev.md.layout if dev.md else md.layout)
        if data and md.chunk_bytes:
            parity = md.level is not None and any(x in md.level for x in ("4", "5", "6")) and "10" not in md.level
            result = Striping(md.chunk_bytes, data, parity,
                              f"{name}: {md.level}, {md.raid_devices} devices ({data} data), "
                              f"chunk {format_size(md.chunk_bytes)}")
        elif dev.slaves:  # raid1/linear: what the first member presents
            result = _striping(inv, dev.slaves[0], visiting)
    elif dev.kind == "dm":
        seg = inv.lvm.get(name)
        if seg and seg.segtype == "striped" and seg.stripes > 1 and seg.stripe_size_bytes:
            result = Striping(seg.stripe_size_bytes, seg.stripes, False,
                              f"LV {seg.vg_name}/{seg.lv_name}: {seg.stripes} stripes of {format_size(seg.stripe_size_bytes)}")
        elif len(dev.slaves) == 1:
            result = _striping(inv, dev.slaves[0], visiting)
    elif dev.kind == "partition" and dev.parent:
        result = _striping(inv, dev.parent, visiting)
    elif dev.kind == "loop" and dev.loop and dev.loop.backing_file:
        result = _striping_of_file(inv, _loop_backing_key(dev) or dev.loop.backing_file, visiting)
    else:
        q = dev.queue
        io_min, io_opt, pbs = q.minimum_io_size or 0, q.optimal_io_size or 0, q.physical_block_size or 512
        if io_min > pbs and io_opt > io_min and io_opt % io_min == 0 and io_opt // io_min <= 64:
            result = Striping(io_min, io_opt // io_min, False,
                              f"{name} reports minimum_io_size {format_size(io_min)} and optimal_io_size "
                              f"{format_size(io_opt)}")
    inv.striping[name] = result
    return result


def _striping_of_file(inv: Inventory, path: str, visiting: frozenset) -> Striping | None:
    m = _mount_of_path(path, inv.mounts)
    if m is None:
        return None
    dev_name = _device_of_mount(inv, m)
    if m.fs_type == "btrfs" and dev_name:
        geo = inv.filesystems.get(dev_name)
        if geo and geo.stripe_unit_bytes:
            data = geo.stripe_width_bytes // BTRFS_STRIPE_BYTES
            return Striping(BTRFS_STRIPE_BYTES, data, geo.profiles.get("data") in ("raid5", "raid6"),
                            f"backing file {path} on btrfs {m.mount_point}: data {geo.profiles.get('data')} over "
                            f"{len(geo.members)} devices ({data} data stripes of 64 KiB)")
        return None
    if dev_name:
        below = _striping(inv, dev_name, visiting)
        if below:
            return Striping(below.unit_bytes, below.data_members, below.parity,
                            f"backing file {path} on {m.mount_point}, over {below.source}")
    return None


def _resolve_target(inv: Inventory, target: str) -> list[str]:
    """Device names a command-line target stands for; TargetError when it is none of them."""
    try:
        st = os.stat(target)
    except OSError as e:
        raise TargetError(f"target {target!r}: {e.strerror}; give a block device, mount point or path") from None
    if stat.S_ISBLK(st.st_mode):
        for d in inv.devices.values():
            if (d.major, d.minor) == (os.major(st.st_rdev), os.minor(st.st_rdev)):
                return [d.name]
        raise TargetError(f"target {target!r}: block device not found in sysfs")
    if stat.S_ISCHR(st.st_mode):
        raise TargetError(f"target {target!r}: a character device has no storage below it; "
                          "give a block device, mount point or path")
    m = _mount_of_path(os.path.realpath(target), inv.mounts)
    name = _device_of_mount(inv, m) if m else None
    network = network_filesystem(m.fs_type) if m else None
    if name is None and network:
        raise TargetError(f"target {target!r}: on {network} ({m.fs_type} at {m.mount_point}, from {m.source}), "
                          "a network file system with no block device below it on this host; measure it as a path "
                          "with storlab run, and its fabric with storlab net")
    if name is None:
        raise TargetError(f"target {target!r}: its file system ({m.fs_type if m else 'unknown'}) is not on a block device")
    return [name]


def _expand_scope(inv: Inventory, roots: list[str]) -> list[str]:
    """The roots, everything below them, their partitions, loop views and btrfs co-members."""
    out: list[str] = []
    todo = list(roots)
    while todo:
        name = todo.pop(0)
        if name in out or name not in inv.devices:
            continue
        out.append(name)
        dev = inv.devices[name]
        todo += dev.slaves + ([dev.parent] if dev.parent else []) + dev.partitions
        todo += [v for v, view in inv.loop_views.items() if view.disk == name]
        geo = inv.filesystems.get(name)
        if geo:
            todo += geo.members
        if dev.loop and dev.loop.backing_file:
            m = _mount_of_path(_loop_backing_key(dev) or "", inv.mounts)
            below = _device_of_mount(inv, m) if m else None
            if below:
                todo.append(below)
    return out


def discover(targets: list[str] | tuple[str, ...] = (), *, sysfs_root: str = "/sys", proc_root: str = "/proc",
             dev_root: str = "/dev", run: ToolRunner = run_tool) -> Inventory:
    """Build the Inventory for `targets` (device, mount point or path; none = the whole host)."""
    inv = Inventory()
    for dev in list_block_devices(sysfs_root):
        if dev.kind == "loop" and (not dev.size_bytes or dev.loop is None or not dev.loop.backing_file):
            continue  # an unattached loop device
        inv.devices[dev.name] = dev
    inv.mounts = read_mountinfo(proc_root)
    inv.md = _md_details(inv.devices, proc_root, run, inv.notes)
    inv.lvm, inv.pvs = _lvm(inv.devices, run, inv.notes)
    _partitions(inv, dev_root)
    # File systems of every mounted device are needed to follow loop files down to their mount.
    mounted = [n for n in inv.devices if inv.mounts_of(n)]
    _filesystems(inv, mounted, sysfs_root, dev_root, run)
    if targets:
        roots: list[str] = []
        for t in targets:
            roots += _resolve_target(inv, t)
        inv.roots = list(dict.fromkeys(roots))
        inv.scope = _expand_scope(inv, inv.roots)
    else:
        inv.scope = sorted(inv.devices, key=lambda n: (inv.devices[n].parent or n, n))
    _filesystems(inv, [n for n in inv.scope if n not in inv.filesystems and not inv.mounts_of(n)],
                 sysfs_root, dev_root, run)
    if not targets:
        inv.roots = [n for n in inv.scope if n in inv.filesystems]
    for name in inv.scope:
        _striping(inv, name)
    return inv
