"""`storlab doctor --stack stack.toml`: compare the live stack under a target with the planned one
(the model package's Stack and geometry report) and list every difference, planned vs found."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..model.geometry import geometry_of, geometry_report
from ..model.stack import Stack
from ..units import format_size
from .inventory import Inventory, md_data_members

__all__ = ["Difference", "compare_with_stack"]


@dataclass(frozen=True)
class Difference:
    item: str          # what is compared, e.g. "md chunk"
    device: str        # kernel name of the live device compared
    planned: str
    found: str

    def to_dict(self) -> dict:
        return asdict(self)


def _below(inv: Inventory, root: str) -> list[str]:
    """`root` and everything under it, nearest first (slaves and partition parents)."""
    out, todo = [], [root]
    while todo:
        name = todo.pop(0)
        if name in out or name not in inv.devices:
            continue
        out.append(name)
        dev = inv.devices[name]
        todo += dev.slaves + ([dev.parent] if dev.parent else [])
    return out


def _fs_differences(inv: Inventory, root: str, stack: Stack) -> list[Difference]:
    report = geometry_report(stack)
    planned_fs = stack.filesystem
    geo = inv.filesystems.get(root)
    out = []
    if planned_fs.kind == "none":
        return out
    if geo is None:
        return [Difference("file system", root, planned_fs.kind, "none found")]
    if geo.fs_type != planned_fs.kind:
        out.append(Difference("file system type", root, planned_fs.kind, geo.fs_type))
    if geo.block_bytes and geo.block_bytes != planned_fs.block_bytes:
        out.append(Difference("file system block", root, format_size(planned_fs.block_bytes), format_size(geo.block_bytes)))
    if geo.fs_type in ("xfs", "ext4"):
        unit, units = report.fs_stripe_unit_bytes, report.fs_stripe_width_units
        have = (geo.stripe_unit_bytes, geo.stripe_width_units)
        if have != (unit, units):
            found = "not set" if not geo.stripe_unit_bytes else f"{format_size(geo.stripe_unit_bytes)} x {geo.stripe_width_units}"
            out.append(Difference("file system stripe (unit x width)", root,
                                  f"{format_size(unit)} x {units}", f"{found} ({geo.native})"))
    return out


def _md_differences(inv: Inventory, names: list[str], stack: Stack) -> list[Difference]:
    raid = stack.raid
    mds = [n for n in names if inv.devices[n].kind == "md" and n in inv.md]
    # Only arrays that stripe count as the planned RAID devices (an md RAID 1 under them would not).
    if raid.engine != "md":
        return [Difference("RAID engine", n, "controller", f"md ({inv.md[n].level})") for n in mds
                if md_data_members(inv.md[n].level, inv.md[n].raid_devices) is not None]
    out = []
    if len(mds) != raid.devices:
        out.append(Difference("md arrays", names[0], str(raid.devices), f"{len(mds)} ({', '.join(mds) or 'none'})"))
    level = raid.layout.level
    for n in mds:
        md = inv.md[n]
        planned_level = f"raid{level.span_level}" if not level.nested else f"raid{level.number}"
        if (md.level or "").lower() != planned_level:
            out.append(Difference("md level", n, planned_level, md.level or "unknown"))
        if not level.nested and md.raid_devices != raid.layout.span:
            out.append(Difference("md devices", n, str(raid.layout.span), str(md.raid_devices)))
        if level.number != 1 and md.chunk_bytes != raid.chunk_bytes:
            out.append(Difference("md chunk", n, format_size(raid.chunk_bytes),
                                  format_size(md.chunk_bytes) if md.chunk_bytes else "unknown"))
    return out


def _volume_differences(inv: Inventory, names: list[str], stack: Stack) -> list[Difference]:
    volume = stack.volume
    lvs = [(n, inv.lvm[n]) for n in names if n in inv.lvm]
    striped = [(n, s) for n, s in lvs if s.segtype == "striped" and s.stripes > 1]
    if volume.aggregate != "stripe":
        return [Difference("volume aggregation", n, volume.aggregate, f"striped LV ({s.stripes} stripes)")
                for n, s in striped]
    geometry = geometry_of(stack)
    stripe_size = volume.inter_chunk_bytes or geometry.device_full_stripe_bytes
    if not striped:
        found = "no striped LV" if inv.lvm or not any(inv.devices[n].kind == "dm" for n in names) \
            else "device-mapper device (lvs unavailable)"
        return [Difference("volume aggregation", names[0], f"stripe over {stack.raid.devices} devices", found)]
    out = []
    for n, seg in striped:
        if seg.stripes != stack.raid.devices:
            out.append(Difference("LV stripes", n, str(stack.raid.devices), str(seg.stripes)))
        if seg.stripe_size_bytes != stripe_size:
            out.append(Difference("LV stripe size", n, format_size(stripe_size), format_size(seg.stripe_size_bytes)))
    return out


def compare_with_stack(inv: Inventory, stack: Stack, roots: list[str]) -> list[Difference]:
    """Every difference between the planned `stack` and the live stack under each root device."""
    out: list[Difference] = []
    report = geometry_report(stack)
    for root in roots:
        names = _below(inv, root)
        out += _fs_differences(inv, root, stack)
        out += _md_differences(inv, names, stack)
        out += _volume_differences(inv, names, stack)
        s = inv.striping.get(root)
        if s is not None and (s.unit_bytes, s.data_members) != (report.fs_stripe_unit_bytes, report.fs_stripe_width_units):
            out.append(Difference("stripe presented by the storage", root,
                                  f"{format_size(report.fs_stripe_unit_bytes)} x {report.fs_stripe_width_units}",
                                  f"{format_size(s.unit_bytes)} x {s.data_members} ({s.source})"))
        ra_kb = inv.devices[root].queue.read_ahead_kb if root in inv.devices else None
        if ra_kb is not None and ra_kb * 1024 < report.read_ahead_min_bytes:
            out.append(Difference("read-ahead", root, f"at least {format_size(report.read_ahead_min_bytes)}",
                                  f"{ra_kb} KiB"))
    return out
