"""Emit the Linux commands that build a stack on real devices (dry-run text; storlab never runs them).

md (mdadm --create with level, chunk, devices; RAID 50/60 as md RAID 0 over the span arrays), LVM
(pvcreate, vgcreate, lvcreate --stripes/--stripesize with the inter-chunk, or linear for concat),
mkfs.xfs su/sw, mkfs.ext4 stride/stripe_width, mkfs.btrfs profiles, and queue settings (read-ahead of at
least two full stripes for parity RAID, as md's raid5.c wants; scheduler; nr_requests; md stripe cache).
For a hardware RAID stack the groups are built in the controller and the script starts from its LUNs.
Conventions from modelling-and-linux.md §3 (mdadm.8, lvcreate, mkfs.xfs.8, mke2fs.8, mkfs.btrfs).
"""
from __future__ import annotations

import shlex
import string
from dataclasses import dataclass

from ..model.advice import PlanWarning, stack_warnings
from ..model.geometry import geometry_of, geometry_report, is_power_of_two
from ..model.stack import Stack, StackError
from ..units import format_size

__all__ = ["BuildScript", "build_script", "placeholder_devices", "size_arg", "BTRFS_PROFILES", "LVM_MAX_STRIPES",
           "LVM_DEFAULT_EXTENT_BYTES", "XFS_MAX_LOG_STRIPE_BYTES", "BTRFS_STRIPE_BYTES"]

# lvcreate: "Number of stripes must be between 1 and 128" (one striped segment); beyond it the
# volume is striped by md RAID 0 instead, which takes the same chunk.
LVM_MAX_STRIPES = 128
# vgcreate's default physical extent; lvcreate silently cuts a stripe size above the extent size
# down to it ("Reducing requested stripe size ... to maximum, physical extent size"), so the
# script sets the extent to at least the stripe size.
LVM_DEFAULT_EXTENT_BYTES = 4 << 20
# mkfs.xfs caps the log stripe unit at 256 KiB and, given a larger data su, falls back to 32 KiB
# with a warning; the script sets -l su itself: the data su, or 256 KiB when that is larger.
XFS_MAX_LOG_STRIPE_BYTES = 256 << 10
# btrfs stripes data in fixed 64 KiB elements (BTRFS_STRIPE_LEN); no option changes it.
BTRFS_STRIPE_BYTES = 64 << 10

# notation level (and span for mirrors) -> mkfs.btrfs data profile, metadata profile
BTRFS_PROFILES = {0: ("raid0", "raid1"), 5: ("raid5", "raid1"), 6: ("raid6", "raid1c3"), 10: ("raid10", "raid1")}
_BTRFS_MIRRORS = {2: ("raid1", "raid1"), 3: ("raid1c3", "raid1c3"), 4: ("raid1c4", "raid1c4")}


@dataclass(frozen=True)
class BuildScript:
    lines: tuple[str, ...]
    warnings: tuple[PlanWarning, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def size_arg(n_bytes: int, upper: bool = True) -> str:
    """Largest exact binary unit: 4194304 -> '4M', 524288 -> '512K' (upper=False: '4m', '512k')."""
    for suffix, unit in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n_bytes % unit == 0:
            text = f"{n_bytes // unit}{suffix}"
            return text if upper else text.lower()
    return str(n_bytes)


def placeholder_devices(n: int, first: str = "b") -> list[str]:
    """/dev/sdb, /dev/sdc, ... /dev/sdz, /dev/sdaa, ... (placeholders to replace)."""
    letters = string.ascii_lowercase
    names = []
    index = letters.index(first)
    while len(names) < n:
        name, i = "", index
        while True:
            name = letters[i % 26] + name
            i = i // 26 - 1
            if i < 0:
                break
        names.append(f"/dev/sd{name}")
        index += 1
    return names


def build_script(stack: Stack, devices: list[str] | None = None, vg_name: str = "vg_storlab",
                 lv_name: str = "lv_storlab") -> BuildScript:
    raid, layout, fs = stack.raid, stack.raid.layout, stack.filesystem
    geometry = geometry_of(stack)
    report = geometry_report(stack)
    software = raid.engine == "md"
    warnings: list[PlanWarning] = list(stack_warnings(stack))
    native_btrfs = (fs.kind == "btrfs" and software and raid.devices == 1 and not layout.level.nested
                    and (layout.level.number in BTRFS_PROFILES or
                         (layout.level.number == 1 and layout.span in _BTRFS_MIRRORS)))
    needed = raid.drives if software else raid.devices
    if devices is None:
        devices = placeholder_devices(needed)
        warnings.append(PlanWarning("placeholder-devices",
                                    f"device names are placeholders ({devices[0]} ...); pass the real ones"))
    if len(devices) != needed:
        what = "drives" if software else "controller LUNs"
        raise StackError(f"{layout.text} x {raid.count} needs {needed} {what}, got {len(devices)} devices")
    body: list[str] = []

    if native_btrfs:
        number = layout.level.number
        data, metadata = _BTRFS_MIRRORS[layout.span] if number == 1 else BTRFS_PROFILES[number]
        body += ["# btrfs does the RAID itself (no md): data and metadata profiles"]
        if number != 1:
            body.append(f"# btrfs stripes in fixed {format_size(BTRFS_STRIPE_BYTES)} elements (BTRFS_STRIPE_LEN): "
                        f"the chunk cannot be set" + (f"; the stack's {format_size(raid.chunk_bytes)} chunk is not used"
                                                      if raid.chunk_bytes != BTRFS_STRIPE_BYTES else ""))
            if raid.chunk_bytes != BTRFS_STRIPE_BYTES:
                warnings.append(PlanWarning("btrfs-chunk-fixed", (
                    f"btrfs RAID {number} stripes in fixed {format_size(BTRFS_STRIPE_BYTES)} elements; the "
                    f"{format_size(raid.chunk_bytes)} chunk of {layout.text} cannot be set (use chunk = 64KiB to "
                    f"model what btrfs builds)")))
        body.append(f"mkfs.btrfs -d {data} -m {metadata} {' '.join(map(shlex.quote, devices))}")
        if number in (5, 6):
            warnings.append(PlanWarning("btrfs-raid56-unstable",
                                        "btrfs RAID5/6 is marked unstable upstream; raid1c3 is the suggested replacement"))
        body += [""] + _queue_lines(stack, devices, None, report.read_ahead_min_bytes, md_arrays=())
        return BuildScript(_header(stack, warnings) + tuple(body), tuple(warnings))

    arrays: list[str] = []
    parity_arrays: list[str] = []
    md_index = 0
    if software:
        if layout.level.number == 3:
            raise StackError(f"{layout.text}: Linux md has no RAID 3; build it in a controller or use R4/R5")
        if not is_power_of_two(raid.chunk_bytes) or raid.chunk_bytes < 4096:
            raise StackError(f"{layout.text}: md needs a power-of-two chunk of at least 4 KiB, got {format_size(raid.chunk_bytes)}")
        span_level = layout.level.span_level
        body.append("# RAID groups (md)")
        span_arrays: list[str] = []
        for group in range(raid.groups):
            members = devices[group * layout.span:(group + 1) * layout.span]
            md = f"/dev/md{md_index}"
            md_index += 1
            options = [f"--level={span_level}", f"--raid-devices={layout.span}"]
            if span_level != 1:                 # newer mdadm rejects --chunk for RAID 1
                options.append(f"--chunk={size_arg(raid.chunk_bytes)}")
            if span_level == 10:
                options.append("--layout=n2")
            options.append("--metadata=1.2")
            body.append(f"mdadm --create {md} {' '.join(options)} {' '.join(map(shlex.quote, members))}")
            span_arrays.append(md)
        if layout.level.nested:
            body.append(f"# RAID {layout.level.number}: md RAID 0 over each device's {layout.spans} spans")
            spans = layout.spans
            for device in range(raid.devices):
                md = f"/dev/md{md_index}"
                md_index += 1
                members = span_arrays[device * spans:(device + 1) * spans]
                body.append(f"mdadm --create {md} --level=0 --raid-devices={spans} "
                            f"--chunk={size_arg(raid.effective_span_chunk_bytes)} --metadata=1.2 {' '.join(members)}")
                arrays.append(md)
        else:
            arrays = span_arrays
        if geometry.has_parity:
            parity_arrays = span_arrays
        body += ["mdadm --detail --scan  # append its output to /etc/mdadm/mdadm.conf (or /etc/mdadm.conf)", ""]
    else:
        body += [f"# The controller builds the RAID: create {layout.text} with a {format_size(raid.chunk_bytes)} segment"
                 + (f" and a {format_size(raid.effective_span_chunk_bytes)} span stripe" if layout.level.nested else "")
                 + f", {raid.count} time(s), in its console or CLI.",
                 "# The devices below are the LUNs it exports.", ""]
        arrays = list(devices)

    target = arrays[0]
    if stack.volume.aggregate == "stripe":
        unit = geometry.levels[0].unit_bytes
        if not is_power_of_two(unit) or unit < 4096:
            raise StackError(f"LVM stripe size must be a power of two of at least 4 KiB; the inter-chunk is "
                             f"{format_size(unit)}: set volume inter_chunk")
        if len(arrays) > LVM_MAX_STRIPES:
            md = f"/dev/md{md_index}"
            body += [f"# Volume (md RAID 0): LVM stripes over at most {LVM_MAX_STRIPES} physical volumes and this "
                     f"volume has {len(arrays)}; md RAID 0 stripes them with the same {format_size(unit)} unit",
                     f"mdadm --create {md} --level=0 --raid-devices={len(arrays)} --chunk={size_arg(unit)} "
                     f"--metadata=1.2 {' '.join(map(shlex.quote, arrays))}", ""]
            warnings.append(PlanWarning("lvm-stripes-limit", (
                f"{len(arrays)} devices to stripe: LVM takes at most {LVM_MAX_STRIPES} stripes, so the script "
                f"stripes them with md RAID 0 ({format_size(unit)} chunk) instead")))
            target = md
        else:
            extent = max(LVM_DEFAULT_EXTENT_BYTES, unit)
            body += [f"# Volume (LVM): the extent ({size_arg(extent)}) is at least the stripe size, else lvcreate "
                     f"would cut the stripe size down to the extent",
                     f"pvcreate {' '.join(map(shlex.quote, arrays))}",
                     f"vgcreate -s {size_arg(extent)} {vg_name} {' '.join(map(shlex.quote, arrays))}",
                     f"lvcreate --type striped --stripes {len(arrays)} --stripesize {size_arg(unit, upper=False)} "
                     f"--extents 100%FREE --name {lv_name} {vg_name}", ""]
            target = f"/dev/{vg_name}/{lv_name}"
    elif stack.volume.aggregate == "concat":
        body += ["# Volume (LVM, linear)",
                 f"pvcreate {' '.join(map(shlex.quote, arrays))}",
                 f"vgcreate -s {size_arg(LVM_DEFAULT_EXTENT_BYTES)} {vg_name} {' '.join(map(shlex.quote, arrays))}",
                 f"lvcreate --type linear --extents 100%FREE --name {lv_name} {vg_name}", ""]
        target = f"/dev/{vg_name}/{lv_name}"
    elif len(arrays) > 1:
        warnings.append(PlanWarning("separate-devices", (
            f"{len(arrays)} separate devices (aggregate = none): one file system each; shown for {target}")))

    body += _filesystem_lines(stack, geometry, report, target)
    body.append("")
    body += _queue_lines(stack, devices, target, report.read_ahead_min_bytes, md_arrays=tuple(parity_arrays))
    return BuildScript(_header(stack, warnings) + tuple(body), tuple(warnings))


def _header(stack: Stack, warnings: list[PlanWarning]) -> tuple[str, ...]:
    raid = stack.raid
    lines = ["#!/bin/sh",
             f"# storlab plan script: {stack.name} ({raid.layout.text} x {raid.count}, chunk {format_size(raid.chunk_bytes)})",
             "# DRY RUN TEXT: storlab runs nothing. Review it, check the device names, then run it as root.",
             "# It DESTROYS all data on the devices it names."]
    lines += [f"# warning: {w.code}: {w.message}" for w in warnings]
    return tuple(lines + ["set -eu", ""])


def _filesystem_lines(stack: Stack, geometry, report, target: str) -> list[str]:
    """mkfs with the stripe geometry; none for a mirror that nothing stripes (RAID 1 has no stripe
    unit: su = chunk would make xfs align to a boundary that means nothing)."""
    fs, layout = stack.filesystem, stack.raid.layout
    su, sw = report.fs_stripe_unit_bytes, report.fs_stripe_width_units
    block = fs.block_bytes
    unstriped_mirror = layout.level.number == 1 and not geometry.levels
    if fs.kind in ("xfs", "ext4") and not unstriped_mirror and su % block:
        raise StackError(f"stripe unit {format_size(su)} is not a multiple of the {fs.kind} block {format_size(block)}")
    if fs.kind == "xfs":
        if unstriped_mirror:
            return ["# File system: a RAID 1 mirror has no stripe: no su/sw",
                    f"mkfs.xfs -b size={block} {target}"]
        log_su = min(su, XFS_MAX_LOG_STRIPE_BYTES)
        lines = ["# File system: stripe unit = top-level chunk, stripe width in units; log stripe unit set too"]
        if log_su < su:
            lines.append(f"# the log stripe unit is capped at {format_size(XFS_MAX_LOG_STRIPE_BYTES)} (mkfs.xfs): "
                         f"{size_arg(log_su, upper=False)}, not the {format_size(su)} data stripe unit")
        lines.append(f"mkfs.xfs -b size={block} -d su={size_arg(su, upper=False)},sw={sw} "
                     f"-l su={size_arg(log_su, upper=False)} {target}")
        return lines
    if fs.kind == "ext4":
        if unstriped_mirror:
            return ["# File system: a RAID 1 mirror has no stripe: no stride/stripe_width",
                    f"mkfs.ext4 -b {block} {target}"]
        return ["# File system: stride = chunk in blocks, stripe_width = stride x data members",
                f"mkfs.ext4 -b {block} -E stride={su // block},stripe_width={su * sw // block} {target}"]
    if fs.kind == "btrfs":
        return [f"# btrfs on top of md/LVM: one device, metadata duplicated; it stripes nothing itself, and its "
                f"fixed {format_size(BTRFS_STRIPE_BYTES)} stripe length takes no su/sw",
                f"mkfs.btrfs -d single -m dup {target}"]
    return []


def _queue_lines(stack: Stack, devices: list[str], target: str | None, read_ahead_bytes: int,
                 md_arrays: tuple[str, ...]) -> list[str]:
    scheduler = "mq-deadline" if stack.drive.rotational else "none"
    lines = ["# Queue settings (not persistent: put them in a udev rule or tuned profile)",
             f"for dev in {' '.join(map(shlex.quote, devices))}; do",
             f"    echo {scheduler} > /sys/block/$(basename $(readlink -f \"$dev\"))/queue/scheduler",
             "    echo 256 > /sys/block/$(basename $(readlink -f \"$dev\"))/queue/nr_requests",
             "done"]
    read_ahead_kib = max(read_ahead_bytes // 1024, 128)
    if target is not None:
        lines.append(f"# read-ahead >= {'two full stripes' if stack.raid.layout.level.parity_drives else 'one full stripe'}"
                     f" ({format_size(read_ahead_bytes)})")
        lines.append(f"blockdev --setra {read_ahead_kib * 2} {target}   # in 512-byte sectors = {read_ahead_kib} KiB")
    # md RAID 4/5/6 stripe cache: memory = page size x member drives x stripe_cache_size (md.4)
    cache_entries = 4096
    memory = 4096 * stack.raid.layout.span * cache_entries
    for md in md_arrays:
        lines.append(f"echo {cache_entries} > /sys/block/{md[len('/dev/'):]}/md/stripe_cache_size"
                     f"   # {format_size(memory)} of RAM with 4 KiB pages")
    return lines
