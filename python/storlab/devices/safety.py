"""The write-safety gate for benchmark targets, and the target description stored with every result.

`check_write_allowed` refuses a block device that is in use (mounted, active swap, held by another
device, or busy for an exclusive open) or that carries any signature from `signatures.py`, unless
the user named that very device in `--allow-destroy`. Regular files and reads are never refused.
`describe_path` is the cheap, never-raising summary of a target for a run's `environment`.
"""
from __future__ import annotations

import errno
import os
import stat
from typing import Iterable

from .signatures import probe_signatures
from .sysfs import (BlockDevice, Mount, device_by_devnum, device_by_path, read_block_device,
                    read_mountinfo, read_swaps, mounts_of)

__all__ = ["TargetRefused", "check_write_allowed", "describe_path", "same_block_device"]


class TargetRefused(ValueError):
    """Writing to this target could destroy data or a live file system; the message says why."""


def same_block_device(a: str, b: str) -> bool:
    """True when both paths are block devices with the same device number.

    Comparing st_rdev makes /dev/disk/by-id/..., /dev/mapper/... and other links count as the
    same device as the kernel name they point to.
    """
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return stat.S_ISBLK(sa.st_mode) and stat.S_ISBLK(sb.st_mode) and sa.st_rdev == sb.st_rdev


def _in_use_reason(path: str, st: os.stat_result, dev: BlockDevice | None,
                   sysfs_root: str, proc_root: str) -> str | None:
    """Why the device is in use right now, or None. These refusals cannot be overridden."""
    mounts = read_mountinfo(proc_root)
    related = [dev] if dev else []
    if dev is not None:
        related += [p for p in (read_block_device(n, sysfs_root) for n in dev.partitions) if p]
    for d in related:
        for m in mounts_of(d, mounts):
            who = "it" if d is dev else f"its partition {d.dev_path}"
            return f"{who} is mounted at {m.mount_point} ({m.fs_type}); unmount it first"
    for swap_path in read_swaps(proc_root):
        for d in related:
            try:
                if os.stat(swap_path).st_rdev == os.makedev(d.major, d.minor):
                    return f"{d.dev_path} is in use as swap; swapoff it first"
            except (OSError, TypeError):
                continue
    for d in related:
        if d.holders:
            names = ", ".join(d.holders)
            return (f"{d.dev_path} is held by {names} (sysfs holders); "
                    f"remove or stop {names} first")
    # The kernel also refuses an exclusive open of a device that a file system, md, dm or swap
    # has claimed: this catches claims sysfs does not show (e.g. the second device of a btrfs).
    try:
        fd = os.open(path, os.O_RDONLY | os.O_EXCL | getattr(os, "O_CLOEXEC", 0))
        os.close(fd)
    except OSError as e:
        if e.errno == errno.EBUSY:
            return "it is busy (exclusive open refused by the kernel: claimed by a file system, RAID or mapper)"
    return None


def check_write_allowed(path: str | os.PathLike, allow_destroy: Iterable[str] = (), *,
                        sysfs_root: str = "/sys", proc_root: str = "/proc") -> None:
    """Raise TargetRefused when writing to `path` could destroy data; return None when it is safe.

    Refused: a block device that is mounted (or has a mounted partition), is active swap, has
    holders, is busy for O_EXCL, has partitions, or carries any signature. `allow_destroy` lists
    devices the user agreed to overwrite; a match (same device number, so links count) lifts every
    refusal, including in-use ones (the message warns that writing corrupts the live data).
    Missing paths and non-block paths (regular files, directories) are allowed: the engine creates
    or rejects them itself.
    """
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise TargetRefused(f"refusing to write to {path}: cannot stat it ({e.strerror})") from None
    if not stat.S_ISBLK(st.st_mode):
        return
    dev = device_by_devnum(os.major(st.st_rdev), os.minor(st.st_rdev), sysfs_root)

    # Naming the exact device is the user's informed opt-in, for every refusal below (the spec:
    # "unless the user opts in for that exact device"); the in-use message says what that costs.
    if any(same_block_device(path, os.fspath(a)) for a in allow_destroy):
        return
    in_use = _in_use_reason(path, st, dev, sysfs_root, proc_root)
    if in_use:
        raise TargetRefused(f"refusing to write to {path}: {in_use}, or pass --allow-destroy {path} "
                            f"to write anyway and destroy what is on it")
    try:
        found = [s.describe() for s in probe_signatures(path)]
    except OSError as e:
        raise TargetRefused(f"refusing to write to {path}: cannot read it to check for existing data "
                            f"({e.strerror}); pass --allow-destroy {path} to overwrite it") from None
    if dev is not None and dev.partitions:
        found.append("kernel partitions " + ", ".join(dev.partitions))
    if found:
        raise TargetRefused(f"refusing to write to {path}: {'; '.join(found)}; "
                            f"pass --allow-destroy {path} to overwrite it")


# --- description for results ---------------------------------------------------------------------

_DESCRIBE_KEYS = ("path", "type", "size_bytes", "fs_type", "mount_point", "device",
                  "logical_block_size", "physical_block_size", "rotational", "model", "scheduler")


def _mount_holding(real: str, st_dev: int, mounts: list[Mount]) -> Mount | None:
    """The mount a path lives on: same device number, longest mount point prefix (bind mounts)."""
    def is_prefix(mp: str) -> bool:
        return real == mp or real.startswith(mp.rstrip("/") + "/")

    candidates = [m for m in mounts if is_prefix(m.mount_point)]
    same_dev = [m for m in candidates if os.makedev(m.major, m.minor) == st_dev]
    pool = same_dev or candidates
    return max(pool, key=lambda m: len(m.mount_point)) if pool else None


def _fill_from_device(out: dict, dev: BlockDevice | None) -> None:
    if dev is None:
        return
    out["device"] = dev.name
    out["logical_block_size"] = dev.queue.logical_block_size
    out["physical_block_size"] = dev.queue.physical_block_size
    out["rotational"] = dev.queue.rotational
    out["model"] = dev.model
    out["scheduler"] = dev.queue.scheduler


def describe_path(path: str | os.PathLike, *, sysfs_root: str = "/sys",
                  proc_root: str = "/proc") -> dict:
    """What a benchmark target is: type, size, file system and device underneath.

    Never raises; anything that cannot be found is None. For a path that does not exist yet the
    file system and device are those of its nearest existing parent directory (where it would be
    created).
    """
    out: dict = {k: None for k in _DESCRIBE_KEYS}
    try:
        path = os.fspath(path)
        out["path"] = path
        try:
            st = os.stat(path)
            out["type"] = "block" if stat.S_ISBLK(st.st_mode) else "file"
        except FileNotFoundError:
            out["type"] = "missing"
            st = None
        mounts = read_mountinfo(proc_root)
        if out["type"] == "block":
            dev = device_by_devnum(os.major(st.st_rdev), os.minor(st.st_rdev), sysfs_root)
            _fill_from_device(out, dev)
            if dev is not None:
                out["size_bytes"] = dev.size_bytes
                mounted = mounts_of(dev, mounts)
                if mounted:
                    out["fs_type"], out["mount_point"] = mounted[0].fs_type, mounted[0].mount_point
            return out
        existing = os.path.abspath(path)
        if st is None:
            while not os.path.exists(existing) and existing != os.path.dirname(existing):
                existing = os.path.dirname(existing)
            st_fs = os.stat(existing)
        else:
            st_fs = st
            out["size_bytes"] = st.st_size if stat.S_ISREG(st.st_mode) else None
        mount = _mount_holding(os.path.realpath(existing), st_fs.st_dev, mounts)
        if mount is None:
            return out
        out["fs_type"], out["mount_point"] = mount.fs_type, mount.mount_point
        dev = device_by_devnum(mount.major, mount.minor, sysfs_root) if mount.major else None
        if dev is None and mount.source.startswith("/dev/"):
            # btrfs and others report an anonymous device number; the source names the device.
            dev = device_by_path(mount.source, sysfs_root)
        _fill_from_device(out, dev)
    except Exception:  # noqa: BLE001 - a description must never stop a run
        pass
    return out
