"""Running the storage tools `doctor` consults (xfs_info, mdadm, lvs, pvs, btrfs) and parsing their
output into plain data. Every parser takes the tool's text and is tested on recorded output; the
runner is a parameter of discovery so tests can substitute recorded output for the real tools.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

__all__ = [
    "ToolRunner", "run_tool", "XfsInfo", "parse_xfs_info", "MdDetail", "parse_mdadm_detail",
    "MdstatArray", "parse_mdstat", "LvSegment", "parse_lvs", "LVS_ARGS", "PvInfo", "parse_pvs",
    "PVS_ARGS", "parse_btrfs_fi_df", "parse_size_suffix",
]

# A runner takes argv and returns stdout, or None when the tool is missing or fails.
ToolRunner = Callable[[Sequence[str]], Optional[str]]


def run_tool(argv: Sequence[str], timeout_s: float = 10.0) -> str | None:
    """Run a read-only inspection tool; None when it is not installed, fails or hangs."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s,
                              env={"LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


_SIZE_SUFFIX = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def parse_size_suffix(text: str) -> int:
    """'512K', '64k', '1.00GiB', '4096' -> bytes (binary suffixes, as mdadm and btrfs print them)."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kKmMgGtTpPbB]?)(?:i?B)?\s*", text)
    if not m:
        raise ValueError(f"cannot read size {text!r}")
    return int(float(m.group(1)) * _SIZE_SUFFIX[m.group(2).lower()])


# --- xfs_info ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class XfsInfo:
    """Data-section geometry as xfs_info prints it: sunit/swidth in file-system blocks."""
    block_bytes: int
    sunit_blocks: int
    swidth_blocks: int
    sector_bytes: int | None
    log_sunit_blocks: int | None

    @property
    def stripe_unit_bytes(self) -> int:
        return self.sunit_blocks * self.block_bytes

    @property
    def stripe_width_bytes(self) -> int:
        return self.swidth_blocks * self.block_bytes


def parse_xfs_info(text: str) -> XfsInfo:
    """Parse `xfs_info` output (xfsprogs growfs format: sections meta-data, data, naming, log)."""
    section = None
    values: dict[tuple[str, str], str] = {}
    for line in text.splitlines():
        head, _, rest = line.partition("=")
        if head.strip():
            section = head.strip()
        for key, value in re.findall(r"([a-z0-9_-]+)=([0-9]+)", rest):
            values.setdefault((section or "", key), value)
    try:
        return XfsInfo(
            block_bytes=int(values[("data", "bsize")]),
            sunit_blocks=int(values[("data", "sunit")]),
            swidth_blocks=int(values[("data", "swidth")]),
            sector_bytes=int(values[("meta-data", "sectsz")]) if ("meta-data", "sectsz") in values else None,
            log_sunit_blocks=int(values[("log", "sunit")]) if ("log", "sunit") in values else None,
        )
    except KeyError as e:
        raise ValueError(f"xfs_info output has no data {e.args[0][1]}= field") from None


# --- mdadm --detail and /proc/mdstat --------------------------------------------------------------

@dataclass(frozen=True)
class MdDetail:
    device: str
    level: str | None
    raid_devices: int | None
    chunk_bytes: int | None
    layout: str | None
    metadata_version: str | None
    state: str | None
    members: tuple[str, ...] = ()        # /dev paths, in RaidDevice order


def parse_mdadm_detail(text: str) -> MdDetail:
    """Parse `mdadm --detail /dev/mdN` (Detail.c: 'Key : value' lines, then the device table)."""
    lines = text.splitlines()
    device = lines[0].rstrip(":").strip() if lines else ""
    fields: dict[str, str] = {}
    members: list[tuple[int, str]] = []
    in_table = False
    for line in lines[1:]:
        if re.match(r"\s*Number\s+Major\s+Minor\s+RaidDevice", line):
            in_table = True
            continue
        if in_table:
            parts = line.split()
            if len(parts) >= 5 and parts[-1].startswith("/dev/") and parts[3].isdigit():
                members.append((int(parts[3]), parts[-1]))
            continue
        key, sep, value = line.partition(" : ")
        if sep:
            fields[key.strip()] = value.strip()
    chunk = fields.get("Chunk Size")
    raid_devices = fields.get("Raid Devices")
    return MdDetail(
        device=device, level=fields.get("Raid Level"),
        raid_devices=int(raid_devices) if raid_devices and raid_devices.isdigit() else None,
        chunk_bytes=parse_size_suffix(chunk) if chunk else None,
        layout=fields.get("Layout"), metadata_version=fields.get("Version"), state=fields.get("State"),
        members=tuple(path for _, path in sorted(members)),
    )


@dataclass(frozen=True)
class MdstatArray:
    name: str
    state: str                   # "active", "inactive", "active (auto-read-only)"
    level: str | None
    members: tuple[str, ...]     # kernel names, flags stripped: "sda1"
    chunk_bytes: int | None
    raid_disks: int | None
    in_sync: int | None
    status: str | None           # "[UUUU_U]"


_MDSTAT_HEAD = re.compile(r"^(md\S+)\s*:\s*(active(?: \([^)]*\))?|inactive)\s*(raid\d+|linear|multipath|faulty)?\s*(.*)$")


def parse_mdstat(text: str) -> list[MdstatArray]:
    """Parse /proc/mdstat: an 'mdN : active raidL dev[i]...' line, then the personality status line."""
    arrays = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _MDSTAT_HEAD.match(line)
        if not m:
            continue
        members = tuple(re.sub(r"\[\d+\].*$", "", d) for d in m.group(4).split())
        status_line = lines[i + 1] if i + 1 < len(lines) else ""
        chunk = re.search(r"(\d+)k chunks?\b", status_line, re.IGNORECASE)
        disks = re.search(r"\[(\d+)/(\d+)\]\s*\[([U_]+)\]", status_line)
        arrays.append(MdstatArray(
            name=m.group(1), state=m.group(2), level=m.group(3), members=members,
            chunk_bytes=int(chunk.group(1)) * 1024 if chunk else None,
            raid_disks=int(disks.group(1)) if disks else None,
            in_sync=int(disks.group(2)) if disks else None,
            status=f"[{disks.group(3)}]" if disks else None,
        ))
    return arrays


# --- LVM ------------------------------------------------------------------------------------------

LVS_ARGS = ("lvs", "--noheadings", "--units", "b", "--nosuffix", "--separator", "|",
            "-o", "vg_name,lv_name,segtype,stripes,stripe_size,devices,lv_kernel_major,lv_kernel_minor")
PVS_ARGS = ("pvs", "--noheadings", "--units", "b", "--nosuffix", "--separator", "|",
            "-o", "pv_name,vg_name,pe_start")


@dataclass(frozen=True)
class LvSegment:
    vg_name: str
    lv_name: str
    segtype: str                  # "striped", "linear", "raid5", "thin-pool", ...
    stripes: int
    stripe_size_bytes: int        # 0 for a single stripe
    devices: tuple[str, ...]      # "/dev/md0" (extent numbers stripped)
    major: int | None
    minor: int | None

    @property
    def dm_name(self) -> str:
        """The device-mapper name: '-' inside VG and LV names is doubled."""
        return f"{self.vg_name.replace('-', '--')}-{self.lv_name.replace('-', '--')}"


def _int_or_none(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() and int(text) >= 0 else None


def parse_lvs(text: str) -> list[LvSegment]:
    """Parse `lvs` run with LVS_ARGS: one '|'-separated line per LV segment."""
    segments = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 8:
            continue
        vg, lv, segtype, stripes, stripe_size, devices, major, minor = parts
        segments.append(LvSegment(
            vg_name=vg, lv_name=lv, segtype=segtype,
            stripes=int(stripes) if stripes.isdigit() else 1,
            stripe_size_bytes=int(float(stripe_size)) if stripe_size else 0,
            devices=tuple(re.sub(r"\(\d+\)$", "", d) for d in devices.split(",") if d),
            major=_int_or_none(major), minor=_int_or_none(minor),
        ))
    return segments


@dataclass(frozen=True)
class PvInfo:
    pv_name: str
    vg_name: str
    pe_start_bytes: int


def parse_pvs(text: str) -> list[PvInfo]:
    """Parse `pvs` run with PVS_ARGS."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2].replace(".", "", 1).isdigit():
            out.append(PvInfo(parts[0], parts[1], int(float(parts[2]))))
    return out


# --- btrfs ------------------------------------------------------------------------------------------

def parse_btrfs_fi_df(text: str) -> dict[str, str]:
    """`btrfs filesystem df MOUNT` -> {'data': 'raid0', 'metadata': 'raid1', 'system': 'raid1'}."""
    profiles = {}
    for line in text.splitlines():
        m = re.match(r"^(Data|Metadata|System|Data\+Metadata),\s*([A-Za-z0-9]+):", line.strip())
        if m:
            profiles[m.group(1).lower()] = m.group(2).lower()
    return profiles
