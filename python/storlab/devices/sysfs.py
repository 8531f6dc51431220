"""Block-device discovery from sysfs and procfs: disks, partitions, loop, md and device-mapper
devices, how they stack (holders/slaves), their queue limits, and the mount table.

Every reader takes `sysfs_root` / `proc_root` so tests can point it at a recorded fixture tree; a
missing or unreadable attribute becomes None rather than an error, because the set of attributes
differs between kernels and device types (see reference §3.4 for what each one means).
"""
from __future__ import annotations

import os
import stat
from dataclasses import asdict, dataclass, field

__all__ = [
    "QueueLimits", "LoopInfo", "MdInfo", "DmInfo", "BlockDevice", "Mount",
    "list_block_devices", "read_block_device", "device_by_devnum", "device_by_path",
    "read_mountinfo", "read_swaps", "mounts_of", "whole_disk_name", "stack_below",
    "loops_backed_by",
]

SECTOR_BYTES = 512  # sysfs `size`, `start` and md `component_size` are in 512-byte sectors


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _read_int(path: str) -> int | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


@dataclass
class QueueLimits:
    """queue/ attributes of a whole device (partitions share their disk's queue)."""

    logical_block_size: int | None = None
    physical_block_size: int | None = None
    minimum_io_size: int | None = None      # bytes; for RAID often the chunk
    optimal_io_size: int | None = None      # bytes; for RAID usually the stripe width; 0 = not reported
    max_sectors_kb: int | None = None
    max_hw_sectors_kb: int | None = None
    read_ahead_kb: int | None = None
    nr_requests: int | None = None
    scheduler: str | None = None            # the active one ("none", "mq-deadline", ...)
    schedulers_available: tuple[str, ...] = ()
    rotational: bool | None = None
    queue_depth: int | None = None          # device/queue_depth (SCSI), when present
    chunk_sectors: int | None = None
    write_cache: str | None = None


@dataclass
class LoopInfo:
    backing_file: str | None
    offset_bytes: int | None
    sizelimit_bytes: int | None
    direct_io: bool | None


@dataclass
class MdInfo:
    level: str | None
    raid_disks: int | None
    chunk_size_bytes: int | None
    layout: int | None
    metadata_version: str | None
    array_state: str | None
    degraded: int | None
    component_size_bytes: int | None


@dataclass
class DmInfo:
    name: str | None
    uuid: str | None

    @property
    def is_lvm(self) -> bool:
        return bool(self.uuid and self.uuid.startswith("LVM-"))


@dataclass
class BlockDevice:
    """One entry under /sys/block (or a partition below one)."""

    name: str                               # kernel name: "sda", "sda1", "loop0", "md0", "dm-3"
    kind: str                               # "disk" | "partition" | "loop" | "md" | "dm"
    major: int | None
    minor: int | None
    size_bytes: int | None
    parent: str | None = None               # whole-disk name, for partitions
    partition_number: int | None = None
    start_bytes: int | None = None          # partition start on its disk
    alignment_offset_bytes: int | None = None
    holders: list[str] = field(default_factory=list)
    slaves: list[str] = field(default_factory=list)
    queue: QueueLimits = field(default_factory=QueueLimits)
    model: str | None = None
    vendor: str | None = None
    removable: bool | None = None
    read_only: bool | None = None
    loop: LoopInfo | None = None
    md: MdInfo | None = None
    dm: DmInfo | None = None
    partitions: list[str] = field(default_factory=list)

    @property
    def dev_path(self) -> str:
        return f"/dev/{self.name}"

    def to_dict(self) -> dict:
        return asdict(self)


def _read_queue(dev_dir: str) -> QueueLimits:
    q = os.path.join(dev_dir, "queue")
    sched_text = _read(os.path.join(q, "scheduler"))
    active, available = None, ()
    if sched_text:
        names = sched_text.split()
        available = tuple(n.strip("[]") for n in names)
        bracketed = [n.strip("[]") for n in names if n.startswith("[")]
        # A single scheduler without brackets ("none") is the active one.
        active = bracketed[0] if bracketed else (names[0] if len(names) == 1 else None)
    rotational = _read_int(os.path.join(q, "rotational"))
    return QueueLimits(
        logical_block_size=_read_int(os.path.join(q, "logical_block_size")),
        physical_block_size=_read_int(os.path.join(q, "physical_block_size")),
        minimum_io_size=_read_int(os.path.join(q, "minimum_io_size")),
        optimal_io_size=_read_int(os.path.join(q, "optimal_io_size")),
        max_sectors_kb=_read_int(os.path.join(q, "max_sectors_kb")),
        max_hw_sectors_kb=_read_int(os.path.join(q, "max_hw_sectors_kb")),
        read_ahead_kb=_read_int(os.path.join(q, "read_ahead_kb")),
        nr_requests=_read_int(os.path.join(q, "nr_requests")),
        scheduler=active,
        schedulers_available=available,
        rotational=None if rotational is None else bool(rotational),
        queue_depth=_read_int(os.path.join(dev_dir, "device", "queue_depth")),
        chunk_sectors=_read_int(os.path.join(q, "chunk_sectors")),
        write_cache=_read(os.path.join(q, "write_cache")),
    )


def _read_devnum(dev_dir: str) -> tuple[int | None, int | None]:
    text = _read(os.path.join(dev_dir, "dev"))
    if not text or ":" not in text:
        return None, None
    major, minor = text.split(":", 1)
    try:
        return int(major), int(minor)
    except ValueError:
        return None, None


def _sectors_to_bytes(n: int | None) -> int | None:
    return None if n is None else n * SECTOR_BYTES


def _read_common(name: str, dev_dir: str, kind: str) -> BlockDevice:
    major, minor = _read_devnum(dev_dir)
    removable = _read_int(os.path.join(dev_dir, "removable"))
    ro = _read_int(os.path.join(dev_dir, "ro"))
    return BlockDevice(
        name=name, kind=kind, major=major, minor=minor,
        size_bytes=_sectors_to_bytes(_read_int(os.path.join(dev_dir, "size"))),
        alignment_offset_bytes=_read_int(os.path.join(dev_dir, "alignment_offset")),
        holders=_listdir(os.path.join(dev_dir, "holders")),
        slaves=_listdir(os.path.join(dev_dir, "slaves")),
        removable=None if removable is None else bool(removable),
        read_only=None if ro is None else bool(ro),
    )


def _read_disk(name: str, sysfs_root: str) -> BlockDevice | None:
    dev_dir = os.path.join(sysfs_root, "block", name)
    if not os.path.isdir(dev_dir):
        return None
    if os.path.isdir(os.path.join(dev_dir, "md")):
        kind = "md"
    elif os.path.isdir(os.path.join(dev_dir, "dm")):
        kind = "dm"
    elif os.path.isdir(os.path.join(dev_dir, "loop")) or name.startswith("loop"):
        kind = "loop"
    else:
        kind = "disk"
    dev = _read_common(name, dev_dir, kind)
    dev.queue = _read_queue(dev_dir)
    dev.model = _read(os.path.join(dev_dir, "device", "model")) or None
    dev.vendor = _read(os.path.join(dev_dir, "device", "vendor")) or None
    dev.partitions = [p for p in _listdir(dev_dir)
                      if os.path.isfile(os.path.join(dev_dir, p, "partition"))]
    if kind == "loop":
        loop_dir = os.path.join(dev_dir, "loop")
        dio = _read_int(os.path.join(loop_dir, "dio"))
        dev.loop = LoopInfo(
            backing_file=_read(os.path.join(loop_dir, "backing_file")),
            offset_bytes=_read_int(os.path.join(loop_dir, "offset")),
            sizelimit_bytes=_read_int(os.path.join(loop_dir, "sizelimit")),
            direct_io=None if dio is None else bool(dio),
        )
    elif kind == "md":
        md_dir = os.path.join(dev_dir, "md")
        component_kib = _read_int(os.path.join(md_dir, "component_size"))
        dev.md = MdInfo(
            level=_read(os.path.join(md_dir, "level")),
            raid_disks=_read_int(os.path.join(md_dir, "raid_disks")),
            chunk_size_bytes=_read_int(os.path.join(md_dir, "chunk_size")),
            layout=_read_int(os.path.join(md_dir, "layout")),
            metadata_version=_read(os.path.join(md_dir, "metadata_version")),
            array_state=_read(os.path.join(md_dir, "array_state")),
            degraded=_read_int(os.path.join(md_dir, "degraded")),
            # md.c component_size_show prints dev_sectors / 2, i.e. KiB (md.rst says sectors)
            component_size_bytes=None if component_kib is None else component_kib * 1024,
        )
    elif kind == "dm":
        dm_dir = os.path.join(dev_dir, "dm")
        dev.dm = DmInfo(name=_read(os.path.join(dm_dir, "name")), uuid=_read(os.path.join(dm_dir, "uuid")))
    return dev


def _read_partition(disk: BlockDevice, part: str, sysfs_root: str) -> BlockDevice:
    dev_dir = os.path.join(sysfs_root, "block", disk.name, part)
    dev = _read_common(part, dev_dir, "partition")
    dev.parent = disk.name
    dev.partition_number = _read_int(os.path.join(dev_dir, "partition"))
    dev.start_bytes = _sectors_to_bytes(_read_int(os.path.join(dev_dir, "start")))
    dev.queue = disk.queue
    dev.model, dev.vendor = disk.model, disk.vendor
    return dev


def list_block_devices(sysfs_root: str = "/sys") -> list[BlockDevice]:
    """All block devices: every /sys/block entry followed by its partitions."""
    devices = []
    for name in _listdir(os.path.join(sysfs_root, "block")):
        disk = _read_disk(name, sysfs_root)
        if disk is None:
            continue
        devices.append(disk)
        devices.extend(_read_partition(disk, p, sysfs_root) for p in disk.partitions)
    return devices


def read_block_device(name: str, sysfs_root: str = "/sys") -> BlockDevice | None:
    """One device by kernel name ("sda", "sda1", "loop0"); None when sysfs has no such device."""
    name = os.path.basename(name)
    disk = _read_disk(name, sysfs_root)
    if disk is not None:
        return disk
    # A partition: find the disk directory that contains it.
    for disk_name in _listdir(os.path.join(sysfs_root, "block")):
        if os.path.isfile(os.path.join(sysfs_root, "block", disk_name, name, "partition")):
            parent = _read_disk(disk_name, sysfs_root)
            if parent is not None:
                return _read_partition(parent, name, sysfs_root)
    return None


def device_by_devnum(major: int, minor: int, sysfs_root: str = "/sys") -> BlockDevice | None:
    """The block device with this device number, or None (e.g. btrfs's anonymous 0:N numbers)."""
    link = os.path.join(sysfs_root, "dev", "block", f"{major}:{minor}")
    try:
        target = os.path.realpath(link)
        if os.path.exists(link):
            return read_block_device(os.path.basename(target), sysfs_root)
    except OSError:
        pass
    for dev in list_block_devices(sysfs_root):
        if (dev.major, dev.minor) == (major, minor):
            return dev
    return None


def device_by_path(path: str, sysfs_root: str = "/sys") -> BlockDevice | None:
    """The block device a /dev path (or any link to it, e.g. /dev/disk/by-id/...) refers to."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISBLK(st.st_mode):
        return None
    return device_by_devnum(os.major(st.st_rdev), os.minor(st.st_rdev), sysfs_root)


def whole_disk_name(dev: BlockDevice) -> str:
    return dev.parent or dev.name


def stack_below(name: str, sysfs_root: str = "/sys") -> list[BlockDevice]:
    """Every device under `name` (slaves, recursively, and a partition's disk), nearest first."""
    seen, out, todo = {name}, [], [name]
    while todo:
        dev = read_block_device(todo.pop(0), sysfs_root)
        if dev is None:
            continue
        below = list(dev.slaves) + ([dev.parent] if dev.parent else [])
        for b in below:
            if b not in seen:
                seen.add(b)
                child = read_block_device(b, sysfs_root)
                if child is not None:
                    out.append(child)
                    todo.append(b)
    return out


def loops_backed_by(dev: BlockDevice, sysfs_root: str = "/sys") -> list[str]:
    """Loop devices whose backing file is `dev` (loop/backing_file naming it, by device number or
    by path). The loop driver does not list itself under its backing device's holders/."""
    out = []
    for name in _listdir(os.path.join(sysfs_root, "block")):
        backing = _read(os.path.join(sysfs_root, "block", name, "loop", "backing_file"))
        if not backing:
            continue
        backing = backing.removesuffix(" (deleted)")
        try:
            st = os.stat(backing)
            same = stat.S_ISBLK(st.st_mode) and st.st_rdev == os.makedev(dev.major, dev.minor)
        except (OSError, TypeError):
            same = False
        if same or backing == dev.dev_path:
            out.append(name)
    return out


# --- mounts and swap ---------------------------------------------------------------------------

@dataclass
class Mount:
    """One line of /proc/self/mountinfo."""

    mount_id: int
    major: int
    minor: int
    root: str
    mount_point: str
    options: str
    fs_type: str
    source: str
    super_options: str


def _unescape(text: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal
    if "\\" not in text:
        return text   # nearly every field (the write-safety gate reads the table every phase)
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 4 <= len(text) and text[i + 1:i + 4].isdigit():
            out.append(chr(int(text[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[Mount]:
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields or len(fields) < 7:
            continue
        sep = fields.index("-")
        if len(fields) < sep + 3:
            continue
        try:
            major, minor = (int(x) for x in fields[2].split(":"))
            mounts.append(Mount(
                mount_id=int(fields[0]), major=major, minor=minor,
                root=_unescape(fields[3]), mount_point=_unescape(fields[4]), options=fields[5],
                fs_type=fields[sep + 1], source=_unescape(fields[sep + 2]),
                super_options=fields[sep + 3] if len(fields) > sep + 3 else "",
            ))
        except ValueError:
            continue
    return mounts


def read_mountinfo(proc_root: str = "/proc") -> list[Mount]:
    """The mount table of this process's namespace; empty when unreadable."""
    return parse_mountinfo(_read(os.path.join(proc_root, "self", "mountinfo")) or "")


def read_swaps(proc_root: str = "/proc") -> list[str]:
    """Paths of active swap areas from /proc/swaps."""
    lines = (_read(os.path.join(proc_root, "swaps")) or "").splitlines()[1:]
    return [_unescape(line.split()[0]) for line in lines if line.split()]


def mounts_of(dev: BlockDevice, mounts: list[Mount]) -> list[Mount]:
    """Mounts whose source is this device, matched by device number or by /dev path.

    btrfs mounts carry an anonymous device number, so the source path is compared too.
    """
    out = []
    for m in mounts:
        if (m.major, m.minor) == (dev.major, dev.minor) and dev.major is not None:
            out.append(m)
        elif m.source == dev.dev_path:
            out.append(m)
    return out
