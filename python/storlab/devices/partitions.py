"""Partition tables read from the device itself (MBR primary entries and GPT), for kernels or
containers that did not create partition devices (e.g. loop devices without partscan), and for
image files. The start offsets are what alignment checks need.
"""
from __future__ import annotations

import os
import struct
from dataclasses import asdict, dataclass

__all__ = ["PartitionEntry", "PartitionTable", "read_partition_table"]


@dataclass(frozen=True)
class PartitionEntry:
    number: int
    start_bytes: int
    size_bytes: int
    type_id: str        # MBR type byte "0x83", or the GPT type GUID


@dataclass(frozen=True)
class PartitionTable:
    kind: str           # "dos" | "gpt"
    sector_bytes: int
    entries: tuple[PartitionEntry, ...]

    def to_dict(self) -> dict:
        return asdict(self)


def _guid(raw: bytes) -> str:
    a, b, c = struct.unpack_from("<IHH", raw, 0)
    return f"{a:08x}-{b:04x}-{c:04x}-{raw[8:10].hex()}-{raw[10:16].hex()}"


def _read_gpt(fd: int, sector_bytes: int) -> PartitionTable | None:
    header = os.pread(fd, 92, sector_bytes)
    if len(header) < 92 or header[:8] != b"EFI PART":
        return None
    entries_lba, count, entry_bytes = struct.unpack_from("<QII", header, 72)
    if not 0 < entry_bytes <= 4096 or not 0 < count <= 1024:
        return None
    raw = os.pread(fd, count * entry_bytes, entries_lba * sector_bytes)
    entries = []
    for i in range(count):
        e = raw[i * entry_bytes:(i + 1) * entry_bytes]
        if len(e) < 56 or e[:16] == bytes(16):
            continue
        first, last = struct.unpack_from("<QQ", e, 32)
        entries.append(PartitionEntry(i + 1, first * sector_bytes, (last - first + 1) * sector_bytes, _guid(e[:16])))
    return PartitionTable("gpt", sector_bytes, tuple(entries))


def read_partition_table(path: str, sector_bytes: int = 512) -> PartitionTable | None:
    """The partition table on `path` (block device or image), or None when there is none.

    `sector_bytes` is the device's logical block size: MBR and GPT count in those units.
    Extended/logical MBR partitions are not followed (their starts are listed as the container).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        mbr = os.pread(fd, 512, 0)
        if len(mbr) < 512 or mbr[510:512] != b"\x55\xaa":
            return _read_gpt(fd, sector_bytes)
        raw_entries = [mbr[446 + 16 * i: 446 + 16 * (i + 1)] for i in range(4)]
        if not all(e[0] in (0x00, 0x80) for e in raw_entries):
            return None  # a FAT/NTFS boot sector, not an MBR
        if any(e[4] == 0xEE for e in raw_entries):
            return _read_gpt(fd, sector_bytes)
        entries = []
        for i, e in enumerate(raw_entries):
            start, count = struct.unpack_from("<II", e, 8)
            if e[4] == 0 or count == 0:
                continue
            entries.append(PartitionEntry(i + 1, start * sector_bytes, count * sector_bytes, f"0x{e[4]:02x}"))
        return PartitionTable("dos", sector_bytes, tuple(entries))
    finally:
        os.close(fd)
