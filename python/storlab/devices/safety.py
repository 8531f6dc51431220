"""The write-safety gate for benchmark targets, and the target description stored with every result.

`check_opened_paths` is what `storlab run` calls before every phase, on every path the engine's
plan will open (per-thread and per-rank names included, symlinks followed): it refuses what must
not be written and returns the identity it checked for each path (device number of a block
device, device and inode of a file, or "absent"), which the engine compares with fstat of every
descriptor it opens, so a link re-pointed between the check and the open is refused.

`check_write_allowed` refuses a block device that is in use (mounted, active swap, held by another
device, backing a loop device, or busy for an exclusive open), which nothing lifts, or that
carries any signature libblkid (or storlab's own prober) finds, unless the user named that very
device in `--allow-destroy`. Regular files outside /dev and reads are never refused; no regular
file is created or written on /dev's file system (a mistyped device name).
The kernel's memory character devices /dev/null (1:3), /dev/zero (1:5) and /dev/full (1:7) are
allowed, known by device number (a link to them passes, a link named `null` to another device
does not): writing to them destroys nothing, so no --allow-destroy is needed. Every other
character device is refused from stat alone, read or write, before it is ever opened (opening a
tape or terminal can act on it).
`describe_path` is the cheap, never-raising summary of a target for a run's `environment`.
"""
from __future__ import annotations

import errno
import os
import stat
from typing import Iterable

from ..errors import TargetError
from .signatures import probe_device
from .sysfs import (
    BlockDevice,
    Mount,
    device_by_devnum,
    device_by_path,
    loops_backed_by,
    mounts_of,
    read_block_device,
    read_mountinfo,
    read_swaps,
)

__all__ = ["TargetRefused", "check_write_allowed", "check_opened_paths", "describe_path",
           "same_block_device", "MEMORY_DEVICES", "memory_device"]

# The character devices a run may use, by (major, minor): the same list as the engine's
# (crates/storlab-core/src/plan.rs MEMORY_DEVICES).
MEMORY_DEVICES = {(1, 3): "/dev/null", (1, 5): "/dev/zero", (1, 7): "/dev/full"}


class TargetRefused(TargetError):
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


def memory_device(rdev: int) -> str | None:
    """The name of the memory device with device number `rdev` (/dev/null, /dev/zero,
    /dev/full), or None for any other device."""
    return MEMORY_DEVICES.get((os.major(rdev), os.minor(rdev)))


def _char_device_refusal(path: str, rdev: int) -> TargetRefused:
    named = [f"{name} ({ma}:{mi})" for (ma, mi), name in MEMORY_DEVICES.items()]
    allowed = f"{', '.join(named[:-1])} and {named[-1]}"
    return TargetRefused(f"refusing {path}: it is character device {os.major(rdev)}:{os.minor(rdev)}; "
                         f"the only character devices storlab uses are {allowed}")


def _in_use_reason(fd: int, dev: BlockDevice | None, sysfs_root: str, proc_root: str) -> str | None:
    """Why the device open on `fd` is in use right now, or None. These refusals cannot be
    overridden: writing under a live file system, swap area, RAID, mapper or loop device corrupts
    it and can crash the kernel."""
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
        loops = loops_backed_by(d, sysfs_root)
        if loops:
            names = ", ".join(loops)
            return f"{d.dev_path} backs the loop device {names}; detach it first (losetup -d)"
    # The kernel also refuses an exclusive open of a device that a file system, md, dm or swap
    # has claimed: this catches claims sysfs does not show (e.g. the second device of a btrfs).
    # Reopening /proc/self/fd/N opens the very device already open on `fd`.
    try:
        os.close(os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)))
    except OSError as e:
        if e.errno == errno.EBUSY:
            return "it is busy (exclusive open refused by the kernel: claimed by a file system, RAID or mapper)"
    return None


def _check_block_device(path: str, fd: int, rdev: int, allow_destroy: Iterable[str],
                        sysfs_root: str, proc_root: str) -> None:
    """The refusals for the block device open on `fd` (reached through `path`)."""
    dev = device_by_devnum(os.major(rdev), os.minor(rdev), sysfs_root)
    in_use = _in_use_reason(fd, dev, sysfs_root, proc_root)
    if in_use:
        raise TargetRefused(f"refusing to write to {path}: {in_use}; --allow-destroy does not lift "
                            f"this refusal")
    # Naming the exact device is the user's informed opt-in to destroy what is on it.
    if any(same_block_device(path, os.fspath(a)) for a in allow_destroy):
        return
    try:
        prober, signatures = probe_device(path, fd)
    except OSError as e:
        raise TargetRefused(f"refusing to write to {path}: cannot read it to check for existing data "
                            f"({e.strerror or e}); pass --allow-destroy {path} to overwrite it") from None
    found = [f"{'; '.join(s.describe() for s in signatures)}, found by {prober}"] if signatures else []
    if dev is not None and dev.partitions:
        found.append("kernel partitions " + ", ".join(dev.partitions))
    if found:
        raise TargetRefused(f"refusing to write to {path}: {'; '.join(found)}; "
                            f"pass --allow-destroy {path} to overwrite it")


def _check_path(path: str, writes: bool, allow_destroy: Iterable[str], sysfs_root: str,
                proc_root: str) -> dict:
    """Check `path` once, through one descriptor, and return the identity of what was checked."""
    try:
        st = os.stat(path)
    except OSError:
        pass
    else:
        if stat.S_ISCHR(st.st_mode) and memory_device(st.st_rdev) is None:
            raise _char_device_refusal(path, st.st_rdev)   # never opened
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        if _on_dev_filesystem(path):
            raise TargetRefused(_dev_refusal(path, "does not exist")) from None
        return {"path": path, "kind": "absent"}
    except OSError as e:
        if not writes:
            return {}
        raise TargetRefused(f"refusing to write to {path}: cannot open it to check it ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISBLK(st.st_mode):
            if writes:
                _check_block_device(path, fd, st.st_rdev, allow_destroy, sysfs_root, proc_root)
            return {"path": path, "kind": "block", "rdev": st.st_rdev}
        if stat.S_ISREG(st.st_mode):
            if writes and _on_dev_filesystem(path):
                raise TargetRefused(_dev_refusal(path, "is a regular file"))
            return {"path": path, "kind": "file", "dev": st.st_dev, "ino": st.st_ino}
        if stat.S_ISCHR(st.st_mode):
            if memory_device(st.st_rdev) is None:   # swapped in after the stat above
                raise _char_device_refusal(path, st.st_rdev)
            return {"path": path, "kind": "char", "rdev": st.st_rdev}
        return {}  # directories, FIFOs, sockets: the engine rejects them with its own message
    finally:
        os.close(fd)


def check_write_allowed(path: str | os.PathLike, allow_destroy: Iterable[str] = (), *,
                        sysfs_root: str = "/sys", proc_root: str = "/proc") -> None:
    """Raise TargetRefused when writing to `path` could destroy data; return None when it is safe.

    Refused: a block device that is in use (mounted or with a mounted partition, active swap,
    with holders, backing a loop device, busy for O_EXCL), whatever `allow_destroy` says; a block
    device with partitions or any signature, unless `allow_destroy` names it (same device
    number, so links count); a regular file on /dev's file system, or a missing path there
    (storlab would create it). Other missing paths and regular files are allowed.
    """
    _check_path(os.fspath(path), True, tuple(allow_destroy), sysfs_root, proc_root)


def check_opened_paths(opened: Iterable[dict], allow_destroy: Iterable[str] = (), *,
                       sysfs_root: str = "/sys", proc_root: str = "/proc") -> list[dict]:
    """Check every path a phase opens (`{"path", "writes"}` from the engine's `opened_paths`) and
    return what was checked, for the spec's `checked` list.

    Each path is opened once (symlinks followed) and everything is checked through that
    descriptor: its fstat is the identity returned, its device is what blkid probes. Paths that
    may be written get every refusal of `check_write_allowed`; no path, read or written, may
    create a file on /dev's file system. The engine compares each descriptor it opens with the
    identity returned, so a path re-pointed after the check is refused there.
    """
    allow_destroy = tuple(allow_destroy)
    checked = []
    for entry in opened:
        if is_remote_target(entry["path"]):
            # Nothing here can look inside a network export: the engine's plan does, over its own
            # connection, and refuses to write one that holds data unless it is named here.
            checked.append({"path": entry["path"], "kind": "remote",
                            "allow_destroy": entry["path"] in allow_destroy})
            continue
        identity = _check_path(entry["path"], entry["writes"], allow_destroy, sysfs_root, proc_root)
        if identity:
            checked.append(identity)
    return checked


def is_remote_target(target: str) -> bool:
    """A target named by a URL of a network protocol storlab's engines speak (nbd://...); the
    engine knows the schemes (crates/storlab-core/src/remote)."""
    from .. import _core

    return _core.remote_target(target) is not None


def is_object_target(target: str) -> bool:
    """A target named by an s3:// URL: objects the run makes there are its own, removed at its end
    unless kept (docs/object.md)."""
    from .. import _core

    remote = _core.remote_target(target)
    return remote is not None and remote[0] == "s3"


def remote_server(url: str) -> str:
    """The server part of a network target's URL (host[:port], or the socket of nbd+unix), without
    any user or password it carries."""
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(url)
    if parts.scheme.endswith("+unix"):
        return "unix:" + (parse_qs(parts.query).get("socket") or ["?"])[0]
    host = parts.hostname or ""
    return f"{host}:{parts.port}" if parts.port else host


# --- /dev ----------------------------------------------------------------------------------------

def _nearest_existing(path: str) -> str:
    """The path itself, or its nearest existing parent directory (symlinks resolved)."""
    real = os.path.realpath(path)
    while not os.path.exists(real) and real != os.path.dirname(real):
        real = os.path.dirname(real)
    return real


def _on_dev_filesystem(path: str, dev_root: str = "/dev") -> bool:
    """True when `path` (or where it would be created) is on the file system mounted at /dev,
    devtmpfs: device nodes only. /dev/shm and other mounts below /dev are other file systems."""
    try:
        return os.stat(_nearest_existing(path)).st_dev == os.stat(dev_root).st_dev
    except OSError:
        return False


def _dev_refusal(path: str, what: str) -> str:
    return (f"refusing to write to {path}: it {what} on /dev's file system, which holds device "
            f"nodes only; storlab creates no regular files there (a mistyped device name?)")


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
            out["type"] = ("block" if stat.S_ISBLK(st.st_mode)
                           else "char" if stat.S_ISCHR(st.st_mode) else "file")
        except FileNotFoundError:
            out["type"] = "missing"
            st = None
        if out["type"] == "char":
            return out   # a memory device: no size, file system or device beneath it
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
