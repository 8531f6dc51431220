"""The doctor's checks: each reads the Inventory and returns Findings with a severity, the evidence
it saw, and the command that fixes it. Severities: "error" (every write pays: misalignment against
the physical block), "warning" (a mismatch that costs throughput for common workloads),
"info" (worth knowing; nothing necessarily wrong).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..units import format_size
from .inventory import Inventory, PartitionView, Striping

__all__ = ["Finding", "run_checks", "SEVERITIES", "CHECKS"]

SEVERITIES = ("error", "warning", "info")
_MiB = 1 << 20


@dataclass(frozen=True)
class Finding:
    code: str            # stable identifier, e.g. "fs-stripe-mismatch"
    severity: str        # "error" | "warning" | "info"
    device: str          # kernel name the finding is about
    message: str         # one line: what is wrong
    evidence: str        # what was read, and from where
    fix: str | None      # a command (or the shortest instruction) that fixes it

    def to_dict(self) -> dict:
        return asdict(self)


def _size(n: int) -> str:
    return format_size(n)


# --- file-system stripe geometry ------------------------------------------------------------------

def _fs_fix(fs_type: str, dev: str, mount_point: str | None, s: Striping, block: int) -> str:
    if fs_type == "xfs":
        sunit_512, swidth_512 = s.unit_bytes // 512, s.width_bytes // 512
        where = mount_point or "MOUNTPOINT"
        return (f"umount {where} && mount -o sunit={sunit_512},swidth={swidth_512} /dev/{dev} {where} "
                f"(and in /etc/fstab); when re-creating: mkfs.xfs -d su={s.unit_bytes // 1024}k,sw={s.data_members}")
    stride, width = s.unit_bytes // block, s.width_bytes // block
    return f"tune2fs -E stride={stride},stripe_width={width} /dev/{dev}"


def _expected_native(fs_type: str, s: Striping, block: int) -> str:
    if fs_type == "xfs":
        return f"sunit={s.unit_bytes // block} swidth={s.width_bytes // block} blks (su={_size(s.unit_bytes)}, sw={s.data_members})"
    return f"stride={s.unit_bytes // block} stripe_width={s.width_bytes // block}"


def check_fs_stripe(inv: Inventory) -> list[Finding]:
    out = []
    for name in inv.scope:
        geo = inv.filesystems.get(name)
        s = inv.striping.get(name)
        if geo is None or s is None or geo.fs_type not in ("xfs", "ext2", "ext3", "ext4") or not geo.block_bytes:
            continue
        if s.data_members < 2:
            continue
        block = geo.block_bytes
        if s.unit_bytes % block:
            out.append(Finding("fs-stripe-unit-not-block-multiple", "info", name,
                               f"stripe unit {_size(s.unit_bytes)} is not a multiple of the {geo.fs_type} block "
                               f"{_size(block)}: the file system cannot describe it",
                               f"{geo.native} ({geo.source}); below: {s.source}", None))
            continue
        have = (geo.stripe_unit_bytes, geo.stripe_width_bytes)
        want = (s.unit_bytes, s.width_bytes)
        if have == want:
            continue
        evidence = f"{geo.fs_type}: {geo.native} ({geo.source}); below: {s.source}"
        fix = _fs_fix(geo.fs_type, name, geo.mount_point, s, block)
        if geo.stripe_unit_bytes == 0:
            out.append(Finding("fs-stripe-unset", "warning", name,
                               f"{geo.fs_type} on /dev/{name} has no stripe geometry but the storage below stripes "
                               f"{_size(s.unit_bytes)} x {s.data_members}; expected {_expected_native(geo.fs_type, s, block)}",
                               evidence, fix))
        else:
            out.append(Finding("fs-stripe-mismatch", "warning", name,
                               f"{geo.fs_type} on /dev/{name} stripes {_size(geo.stripe_unit_bytes)} x "
                               f"{geo.stripe_width_units} but the storage below stripes {_size(s.unit_bytes)} x "
                               f"{s.data_members}; expected {_expected_native(geo.fs_type, s, block)}",
                               evidence, fix))
    return out


# --- partitions and loop offsets ---------------------------------------------------------------------

def _partition_fix(view: PartitionView, align_bytes: int, sector_bytes: int) -> str:
    # Next start at or after the current one that is a multiple of both 1 MiB and the alignment.
    step = align_bytes * _MiB // math.gcd(align_bytes, _MiB)
    new_start = -(-view.start_bytes // step) * step
    return (f"back up the data, then re-create partition {view.number} of /dev/{view.disk} starting at sector "
            f"{new_start // sector_bytes} (a multiple of {_size(align_bytes)}), e.g. "
            f"parted -a optimal /dev/{view.disk} (check: parted /dev/{view.disk} align-check optimal {view.number})")


def check_partitions(inv: Inventory) -> list[Finding]:
    out = []
    for view in inv.partitions:
        if view.disk not in inv.scope:
            continue
        disk = inv.devices[view.disk]
        q = disk.queue
        sector = q.logical_block_size or 512
        pbs = q.physical_block_size or sector
        where = view.device or f"{view.disk} partition {view.number}"
        origin = "sysfs start" if view.origin == "sysfs" else "partition table read from the disk"
        evidence_base = (f"partition {view.number} of /dev/{view.disk} starts at byte {view.start_bytes} "
                         f"(sector {view.start_bytes // sector}, {origin})")
        part_dev = inv.devices.get(view.device) if view.device else None
        if part_dev is not None and part_dev.kind == "partition" and part_dev.alignment_offset_bytes:
            out.append(Finding("partition-alignment-offset", "error", where,
                               f"/dev/{where} has alignment_offset {part_dev.alignment_offset_bytes} bytes: "
                               f"it is not naturally aligned to the device's physical blocks",
                               evidence_base + f"; alignment_offset {part_dev.alignment_offset_bytes}",
                               _partition_fix(view, pbs, sector)))
            continue
        if view.start_bytes % pbs:
            out.append(Finding("partition-misaligned", "error", where,
                               f"partition {view.number} of /dev/{view.disk} starts {view.start_bytes % pbs} bytes past a "
                               f"{_size(pbs)} physical block boundary: writes straddle physical blocks",
                               evidence_base + f"; physical_block_size {pbs}", _partition_fix(view, pbs, sector)))
            continue
        s = inv.striping.get(view.disk)
        if s is None:
            continue
        if view.start_bytes % s.unit_bytes:
            out.append(Finding("partition-not-stripe-aligned", "warning", where,
                               f"partition {view.number} of /dev/{view.disk} starts {view.start_bytes % s.unit_bytes} bytes "
                               f"past a {_size(s.unit_bytes)} stripe-unit boundary: chunk-sized requests span two members",
                               evidence_base + f"; below: {s.source}", _partition_fix(view, s.unit_bytes, sector)))
        elif s.parity and view.start_bytes % s.width_bytes:
            out.append(Finding("partition-not-full-stripe-aligned", "info", where,
                               f"partition {view.number} of /dev/{view.disk} is chunk aligned but not full-stripe "
                               f"aligned ({_size(s.width_bytes)}): stripe-sized writes become two partial stripes",
                               evidence_base + f"; below: {s.source}", _partition_fix(view, s.width_bytes, sector)))
    return out


def check_loop_offsets(inv: Inventory) -> list[Finding]:
    """A loop device with an offset into a file on striped storage is a partition by another name."""
    out = []
    for name in inv.scope:
        dev = inv.devices[name]
        if dev.kind != "loop" or not dev.loop or not dev.loop.offset_bytes or name in inv.loop_views:
            continue
        s = inv.striping.get(name)
        if s and dev.loop.offset_bytes % s.unit_bytes:
            out.append(Finding("loop-offset-not-stripe-aligned", "warning", name,
                               f"/dev/{name} starts {dev.loop.offset_bytes % s.unit_bytes} bytes past a "
                               f"{_size(s.unit_bytes)} stripe-unit boundary of its backing file",
                               f"loop offset {dev.loop.offset_bytes} bytes into {dev.loop.backing_file}; below: {s.source}",
                               f"losetup -d /dev/{name} && losetup --offset "
                               f"{-(-dev.loop.offset_bytes // s.unit_bytes) * s.unit_bytes} ... (move the data first)"))
    return out


# --- LVM over RAID ---------------------------------------------------------------------------------------

def check_lvm(inv: Inventory) -> list[Finding]:
    out = []
    for name in inv.scope:
        seg = inv.lvm.get(name)
        if seg is None:
            continue
        lv = f"{seg.vg_name}/{seg.lv_name}"
        reported_stripe = False
        for pv_path in seg.devices:
            pv = pv_path.rsplit("/", 1)[-1]
            s = inv.striping.get(pv)   # PVs are in scope: discovery follows slaves down
            if s is None:
                continue
            if (not reported_stripe and seg.segtype == "striped" and seg.stripes > 1
                    and seg.stripe_size_bytes < s.unit_bytes):
                reported_stripe = True
                out.append(Finding("lvm-stripe-smaller-than-chunk", "warning", name,
                                   f"LV {lv} stripes {_size(seg.stripe_size_bytes)} per PV, smaller than the "
                                   f"{_size(s.unit_bytes)} chunk of {pv}: each LV stripe is a partial RAID stripe",
                                   f"lvs: {seg.stripes} stripes of {seg.stripe_size_bytes} bytes over {', '.join(seg.devices)}; "
                                   f"below: {s.source}",
                                   f"re-create the LV with a stripe size of the {pv} full stripe: lvcreate -i {seg.stripes} "
                                   f"-I {s.width_bytes // 1024}k ... (a power of two; see reference §3.2)"))
            pvinfo = inv.pvs.get(pv)
            if pvinfo and s.data_members > 1 and pvinfo.pe_start_bytes % s.width_bytes:
                out.append(Finding("lvm-pe-start-not-stripe-aligned", "warning", pv,
                                   f"PV {pv_path} data starts at {pvinfo.pe_start_bytes} bytes, not a multiple of the "
                                   f"{_size(s.width_bytes)} stripe width of {pv}",
                                   f"pvs: pe_start {pvinfo.pe_start_bytes}; below: {s.source}",
                                   f"pvcreate --dataalignment {s.width_bytes // 1024}k {pv_path} (when re-creating the PV)"))
    return out


# --- queue limits ----------------------------------------------------------------------------------------------

def _striped_devices(inv: Inventory) -> list[tuple[str, Striping]]:
    """Devices that stripe or that carry a file system over striping: where read-ahead and request
    size limits decide whether whole stripes reach the layer below. Partitions use the disk queue."""
    out = []
    for name in inv.scope:
        dev = inv.devices[name]
        s = inv.striping.get(name)
        if s is None or s.data_members < 2 or dev.kind == "partition":
            continue
        owns = dev.kind in ("md", "dm") or dev.kind == "disk"
        if owns or name in inv.filesystems:
            out.append((name, s))
    return out


def check_read_ahead(inv: Inventory) -> list[Finding]:
    out = []
    for name, s in _striped_devices(inv):
        ra_kb = inv.devices[name].queue.read_ahead_kb
        if ra_kb is None:
            continue
        # md's rule for RAID 4/5/6: read-ahead covers two whole stripes (drivers/md/raid5.c).
        need = 2 * s.width_bytes if s.parity else s.width_bytes
        if ra_kb * 1024 < need:
            out.append(Finding("read-ahead-small", "warning", name,
                               f"read_ahead_kb of /dev/{name} is {ra_kb} KiB, less than "
                               f"{'two stripe widths' if s.parity else 'one stripe width'} ({_size(need)}): "
                               f"sequential reads do not keep all members busy",
                               f"/sys/block/{name}/queue/read_ahead_kb = {ra_kb}; stripe: {s.source}",
                               f"blockdev --setra {need // 512} /dev/{name} (persist with a udev rule)"))
    return out


def check_max_sectors(inv: Inventory) -> list[Finding]:
    out = []
    for name, s in _striped_devices(inv):
        q = inv.devices[name].queue
        if q.max_sectors_kb is None or q.max_sectors_kb * 1024 >= s.width_bytes:
            continue
        want_kb = s.width_bytes // 1024
        hw_ok = q.max_hw_sectors_kb is None or q.max_hw_sectors_kb >= want_kb
        fix = (f"echo {want_kb} > /sys/block/{name}/queue/max_sectors_kb" if hw_ok else
               f"the hardware limit max_hw_sectors_kb is {q.max_hw_sectors_kb}: raise it to "
               f"{q.max_hw_sectors_kb} (echo {q.max_hw_sectors_kb} > /sys/block/{name}/queue/max_sectors_kb) "
               f"or use a smaller stripe width")
        out.append(Finding("max-sectors-below-stripe-width", "warning", name,
                           f"max_sectors_kb of /dev/{name} is {q.max_sectors_kb} KiB, below the {_size(s.width_bytes)} "
                           f"stripe width: full-stripe writes are split into partial stripes",
                           f"/sys/block/{name}/queue/max_sectors_kb = {q.max_sectors_kb}, max_hw_sectors_kb = "
                           f"{q.max_hw_sectors_kb}; stripe: {s.source}", fix))
    return out


def check_scheduler(inv: Inventory) -> list[Finding]:
    """Only real disks: stacked devices (md, dm, loop) pass requests on and use 'none' by design."""
    out = []
    for name in inv.scope:
        dev = inv.devices[name]
        q = dev.queue
        if dev.kind != "disk" or q.scheduler is None or q.rotational is None:
            continue
        if q.rotational and q.scheduler == "none" and "mq-deadline" in q.schedulers_available:
            out.append(Finding("scheduler-none-on-rotational", "warning", name,
                               f"/dev/{name} is rotational but uses the 'none' scheduler: no request sorting "
                               f"or merging across processes, so seeks multiply under concurrent load",
                               f"queue/rotational = 1, queue/scheduler = {' '.join(q.schedulers_available)} "
                               f"(active: none)",
                               f"echo mq-deadline > /sys/block/{name}/queue/scheduler (persist with a udev rule)"))
        elif not q.rotational and q.scheduler == "bfq":
            out.append(Finding("scheduler-bfq-on-ssd", "info", name,
                               f"/dev/{name} is non-rotational but uses bfq, whose per-request cost caps IOPS "
                               f"on fast flash",
                               "queue/rotational = 0, active scheduler bfq",
                               f"echo none > /sys/block/{name}/queue/scheduler (or mq-deadline)"))
    return out


def check_queue_depth(inv: Inventory) -> list[Finding]:
    out = []
    for name in inv.scope:
        dev = inv.devices[name]
        if dev.kind == "partition":
            continue
        q = dev.queue
        if q.queue_depth == 1:
            out.append(Finding("queue-depth-1", "warning", name,
                               f"/dev/{name} has a device queue depth of 1: command queueing is disabled, one "
                               f"command at a time reaches the drive (the studies measured 2-4x less throughput)",
                               f"/sys/block/{name}/device/queue_depth = 1",
                               f"echo 32 > /sys/block/{name}/device/queue_depth (or the controller's maximum)"))
        if q.nr_requests == 1:
            out.append(Finding("nr-requests-1", "warning", name,
                               f"/dev/{name} allows 1 request in its block queue: no merging or queueing",
                               f"/sys/block/{name}/queue/nr_requests = 1",
                               f"echo 64 > /sys/block/{name}/queue/nr_requests"))
    return out


_USB_BRIDGE_IO_OPT = 33553920   # 32 MiB - 512, reported by some USB bridges (util-linux #1221)


def check_optimal_io(inv: Inventory) -> list[Finding]:
    out = []
    for name in inv.scope:
        dev = inv.devices[name]
        if dev.kind == "partition":
            continue
        q = dev.queue
        io_opt, io_min = q.optimal_io_size or 0, q.minimum_io_size or 0
        lbs, pbs = q.logical_block_size or 512, q.physical_block_size or 512
        if not io_opt:
            continue
        reason = None
        if io_opt == _USB_BRIDGE_IO_OPT or io_opt % lbs:
            reason = f"not a multiple of the {lbs}-byte logical block"
        elif io_opt % pbs:
            reason = f"not a multiple of the {pbs}-byte physical block"
        elif io_min > lbs and io_opt % io_min:
            reason = f"not a multiple of minimum_io_size {io_min}"
        elif io_opt > 256 * _MiB:
            reason = "larger than any plausible stripe width (256 MiB)"
        elif dev.kind == "md" and name in inv.md:
            s = inv.striping.get(name)
            if s and s.data_members > 1 and io_opt != s.width_bytes:
                reason = f"not the array's stripe width {_size(s.width_bytes)} ({s.source})"
        if reason:
            out.append(Finding("implausible-optimal-io-size", "warning", name,
                               f"/dev/{name} reports optimal_io_size {io_opt} bytes, {reason}: mkfs and partitioning "
                               f"tools that trust it will pick a wrong geometry",
                               f"queue/optimal_io_size = {io_opt}, minimum_io_size = {io_min}, "
                               f"logical/physical block = {lbs}/{pbs}",
                               "give the geometry explicitly: mkfs.xfs -d su=CHUNK,sw=DATA_DISKS / "
                               "mkfs.ext4 -E stride=,stripe_width= / parted -a minimal"))
    return out


def check_md_state(inv: Inventory) -> list[Finding]:
    out = []
    for name in inv.scope:
        dev = inv.devices[name]
        if dev.kind != "md" or dev.md is None or not dev.md.degraded:
            continue
        out.append(Finding("md-degraded", "warning", name,
                           f"/dev/{name} is degraded ({dev.md.degraded} member(s) missing): reads reconstruct "
                           f"data and every benchmark of it measures the degraded array",
                           f"/sys/block/{name}/md/degraded = {dev.md.degraded}, array_state = {dev.md.array_state}",
                           f"mdadm --detail /dev/{name}; replace the member: mdadm /dev/{name} --add /dev/NEW"))
    return out


def check_signatures(inv: Inventory) -> list[Finding]:
    """Signatures on unmounted devices nothing holds: data someone may still want."""
    out = []
    for name in inv.scope:
        sigs = inv.signatures.get(name)
        dev = inv.devices[name]
        if not sigs or dev.holders or inv.mounts_of(name):
            continue
        if any(name in geo.members for geo in inv.filesystems.values() if geo.fs_type == "btrfs"):
            continue
        out.append(Finding("unmounted-signature", "info", name,
                           f"/dev/{name} is not mounted or held but carries " + "; ".join(s.describe() for s in sigs),
                           "on-disk signature probe", None))
    return out


CHECKS = (check_fs_stripe, check_partitions, check_loop_offsets, check_lvm, check_read_ahead,
          check_max_sectors, check_scheduler, check_queue_depth, check_optimal_io, check_md_state,
          check_signatures)


def run_checks(inv: Inventory) -> list[Finding]:
    """All findings, most severe first, then by device."""
    findings = [f for check in CHECKS for f in check(inv)]
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: (order[f.severity], f.device, f.code))
