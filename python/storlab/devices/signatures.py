"""On-disk signature probing: which file system, partition table, RAID, LVM or swap magic a device
or image file carries, read at the offsets libblkid uses (reference §3.6), including the ones at the
end of the device (md 0.90/1.0 superblocks, the GPT backup header) that a zero-check of the first
MiB would miss. Read-only; works on block devices and on plain image files alike.

`probe_device` is what the write-safety gate uses: libblkid's low-level probe through `blkid -p`
(util-linux), which knows every superblock and partition table the host's tools know (zfs_member,
bcache, LUKS2 with only its backup header, ...), with storlab's own prober below as the fallback
where blkid is missing and as a second opinion where blkid finds nothing.
"""
from __future__ import annotations

import os
import shutil
import stat
import struct
from dataclasses import asdict, dataclass

__all__ = ["Signature", "probe_signatures", "probe_device", "probe_with_blkid", "device_size_bytes",
           "SECTOR_BYTES", "BLKID_PROBER", "STORLAB_PROBER"]

BLKID_PROBER = "blkid (libblkid low-level probe)"
STORLAB_PROBER = "storlab's built-in prober"

SECTOR_BYTES = 512          # the kernel's unit for sysfs sizes and partition starts
_HEAD_BYTES = 128 * 1024    # covers btrfs (64 KiB + 0x40), iso9660 (32 KiB + 1), swap up to 64 KiB pages
_TAIL_BYTES = 128 * 1024    # covers md 0.90 (last 64 KiB-aligned block minus 64 KiB) and GPT backup


@dataclass(frozen=True)
class Signature:
    """One signature found on a device: what it is and where its magic sits."""

    kind: str           # "filesystem" | "partition-table" | "raid" | "lvm" | "swap" | "crypto"
    name: str           # "ext4", "xfs", "dos", "gpt", "linux_raid_member", "LVM2_member", "swap", ...
    offset_bytes: int   # absolute byte offset of the magic that identified it
    detail: str         # human text: the magic and anything decoded from the header

    def describe(self) -> str:
        """One phrase for messages, e.g. 'ext4 file system (magic 0xEF53 at byte 1080)'."""
        noun = {
            "filesystem": "file system",
            "partition-table": "partition table",
            "raid": "RAID member",
            "lvm": "LVM physical volume",
            "swap": "signature",
            "crypto": "encrypted volume",
        }.get(self.kind, self.kind)
        return f"{self.name} {noun} ({self.detail})"

    def to_dict(self) -> dict:
        return asdict(self)


def device_size_bytes(fd: int) -> int:
    """Size of an open block device or regular file in bytes (seek to end works for both)."""
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode):
        return st.st_size
    return os.lseek(fd, 0, os.SEEK_END)


def _pread_exact(fd: int, length: int, offset: int) -> bytes:
    """Read up to `length` bytes at `offset`; short at end of device, empty when offset is past it."""
    chunks = []
    while length > 0:
        data = os.pread(fd, length, offset)
        if not data:
            break
        chunks.append(data)
        length -= len(data)
        offset += len(data)
    return b"".join(chunks)


class _Image:
    """The head and tail of a device, read once; `at(offset, n)` serves any probe from them."""

    def __init__(self, fd: int, size_bytes: int):
        self.size_bytes = size_bytes
        self.head = _pread_exact(fd, min(_HEAD_BYTES, size_bytes), 0)
        tail_start = max(0, size_bytes - _TAIL_BYTES)
        self.tail_start = tail_start
        self.tail = _pread_exact(fd, size_bytes - tail_start, tail_start)

    def at(self, offset: int, length: int) -> bytes:
        if offset < 0 or offset + length > self.size_bytes:
            return b""
        if offset + length <= len(self.head):
            return self.head[offset:offset + length]
        if offset >= self.tail_start:
            rel = offset - self.tail_start
            return self.tail[rel:rel + length]
        return b""  # a probe outside the head and tail windows: none of ours are


def _u16le(b: bytes, off: int) -> int:
    return struct.unpack_from("<H", b, off)[0]


def _u32le(b: bytes, off: int) -> int:
    return struct.unpack_from("<I", b, off)[0]


# --- file systems -----------------------------------------------------------------------------

_EXT_SB_OFFSET = 0x400
_EXT_MAGIC_OFFSET = _EXT_SB_OFFSET + 0x38       # byte 1080
# Feature bits that ext3 does not know: their presence makes it ext4 (libblkid superblocks/ext.c).
_EXT3_COMPAT_HAS_JOURNAL = 0x0004
_EXT4_INCOMPAT = 0x0040 | 0x0080 | 0x0100 | 0x0200 | 0x0400 | 0x1000 | 0x8000 | 0x10000
_EXT4_RO_COMPAT = 0x0008 | 0x0010 | 0x0020 | 0x0040 | 0x0400


def _probe_ext(img: _Image) -> list[Signature]:
    sb = img.at(_EXT_SB_OFFSET, 1024)
    if len(sb) < 1024 or _u16le(sb, 0x38) != 0xEF53:
        return []
    compat, incompat, ro_compat = _u32le(sb, 0x5C), _u32le(sb, 0x60), _u32le(sb, 0x64)
    if incompat & _EXT4_INCOMPAT or ro_compat & _EXT4_RO_COMPAT:
        name = "ext4"
    elif compat & _EXT3_COMPAT_HAS_JOURNAL:
        name = "ext3"
    else:
        name = "ext2"
    return [Signature("filesystem", name, _EXT_MAGIC_OFFSET, f"magic 0xEF53 at byte {_EXT_MAGIC_OFFSET}")]


def _probe_fixed(img: _Image) -> list[Signature]:
    """Signatures that are a fixed byte string at a fixed offset."""
    found = []
    table = (
        ("filesystem", "xfs", 0, b"XFSB", "'XFSB'"),
        ("filesystem", "btrfs", 0x10040, b"_BHRfS_M", "'_BHRfS_M'"),
        ("filesystem", "ntfs", 3, b"NTFS    ", "'NTFS    '"),
        ("filesystem", "exfat", 3, b"EXFAT   ", "'EXFAT   '"),
        ("filesystem", "iso9660", 0x8001, b"CD001", "'CD001'"),
        ("filesystem", "f2fs", 0x400, struct.pack("<I", 0xF2F52010), "0xF2F52010"),
        ("crypto", "crypto_LUKS", 0, b"LUKS\xba\xbe", "'LUKS\\xba\\xbe'"),
    )
    for kind, name, offset, magic, shown in table:
        if img.at(offset, len(magic)) == magic:
            found.append(Signature(kind, name, offset, f"magic {shown} at byte {offset}"))
    return found


def _probe_vfat(img: _Image) -> list[Signature]:
    boot = img.at(0, 512)
    if len(boot) < 512 or boot[510:512] != b"\x55\xaa" or boot[0] not in (0xEB, 0xE9):
        return []
    for offset, label in ((0x52, b"FAT32   "), (0x36, b"FAT16   "), (0x36, b"FAT12   ")):
        if boot[offset:offset + 8] == label:
            return [Signature("filesystem", "vfat", offset,
                              f"{label.decode().strip()} label at byte {offset}, 0x55AA at byte 510")]
    return []


def _probe_swap(img: _Image) -> list[Signature]:
    # The swap magic sits in the last 10 bytes of the first page; the page size of the machine that
    # ran mkswap is unknown, so try the sizes libblkid tries.
    for page_bytes in (4096, 8192, 16384, 65536):
        offset = page_bytes - 10
        magic = img.at(offset, 10)
        if magic in (b"SWAPSPACE2", b"SWAP-SPACE"):
            return [Signature("swap", "swap", offset, f"magic {magic.decode()!r} at byte {offset}")]
    return []


# --- RAID and LVM -----------------------------------------------------------------------------

_MD_MAGIC = 0xA92B4EFC


def md_superblock_offsets(size_bytes: int) -> dict[str, int]:
    """Where each md metadata version keeps its superblock on a member of `size_bytes`."""
    offsets = {"1.1": 0, "1.2": 4096}
    if size_bytes >= 128 * 1024:
        offsets["0.90"] = (size_bytes & ~(64 * 1024 - 1)) - 64 * 1024
    if size_bytes >= 16 * 1024:
        offsets["1.0"] = (size_bytes & ~(4 * 1024 - 1)) - 8 * 1024
    return offsets


def _md_level_text(level: int) -> str:
    return {-4: "multipath", -1: "linear", 0: "raid0", 1: "raid1", 4: "raid4", 5: "raid5",
            6: "raid6", 10: "raid10"}.get(level, f"level {level}")


def _probe_md(img: _Image) -> list[Signature]:
    found = []
    for version, offset in md_superblock_offsets(img.size_bytes).items():
        sb = img.at(offset, 512)
        if len(sb) < 512 or _u32le(sb, 0) != _MD_MAGIC:
            continue
        major = _u32le(sb, 4)
        if version == "0.90":
            if major != 0:
                continue
            level = struct.unpack_from("<i", sb, 28)[0]
            raid_disks = _u32le(sb, 40)
            chunk_bytes = _u32le(sb, 65 * 4)   # personality word 1 of mdp_super_t: chunk_size in bytes
        else:
            if major != 1:
                continue
            level = struct.unpack_from("<i", sb, 72)[0]
            chunk_bytes = _u32le(sb, 88) * SECTOR_BYTES   # chunksize is in 512-byte sectors
            raid_disks = _u32le(sb, 92)
        detail = (f"md metadata {version}, magic 0xA92B4EFC at byte {offset}; "
                  f"{_md_level_text(level)}, {raid_disks} devices")
        if chunk_bytes:
            detail += f", chunk {chunk_bytes // 1024} KiB"
        found.append(Signature("raid", "linux_raid_member", offset, detail))
    return found


def _probe_lvm2(img: _Image) -> list[Signature]:
    for sector in range(4):
        base = sector * SECTOR_BYTES
        if img.at(base, 8) == b"LABELONE" and img.at(base + 0x18, 8) == b"LVM2 001":
            return [Signature("lvm", "LVM2_member", base,
                              f"label 'LABELONE' at byte {base} (sector {sector}), type 'LVM2 001'")]
    return []


# --- partition tables -------------------------------------------------------------------------

def _gpt_header_ok(header: bytes) -> bool:
    return len(header) >= 92 and header[:8] == b"EFI PART"


def _probe_partition_tables(img: _Image, fs_found: bool) -> list[Signature]:
    found = []
    for sector_bytes in (512, 4096):
        primary = sector_bytes
        backup = img.size_bytes - sector_bytes
        if _gpt_header_ok(img.at(primary, 92)):
            found.append(Signature("partition-table", "gpt", primary,
                                   f"'EFI PART' header at byte {primary}, LBA 1 of {sector_bytes}-byte sectors"))
        if backup > primary and _gpt_header_ok(img.at(backup, 92)):
            found.append(Signature("partition-table", "gpt", backup,
                                   f"backup 'EFI PART' header at byte {backup}, last LBA of "
                                   f"{sector_bytes}-byte sectors"))
        if found:
            break
    mbr = img.at(0, 512)
    if len(mbr) == 512 and mbr[510:512] == b"\x55\xaa" and not fs_found:
        entries = [mbr[446 + 16 * i: 446 + 16 * (i + 1)] for i in range(4)]
        # A real MBR has boot flags 0x00/0x80 only; FAT boot sectors fail this (dos.c does the same).
        if all(e[0] in (0x00, 0x80) for e in entries):
            types = [e[4] for e in entries if e[4] != 0]
            if 0xEE in types and not found:
                found.append(Signature("partition-table", "gpt", 510,
                                       "protective MBR (type 0xEE), 0x55AA at byte 510; GPT header missing"))
            elif 0xEE not in types:
                found.append(Signature("partition-table", "dos", 510,
                                       f"MBR 0x55AA at byte 510, {len(types)} partition entries"))
    return found


def probe_signatures(path: str | os.PathLike) -> list[Signature]:
    """Every signature found on the block device or image file at `path`, in offset order.

    Raises OSError when the path cannot be opened for reading.
    """
    fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        return probe_fd(fd)
    finally:
        os.close(fd)


def probe_fd(fd: int) -> list[Signature]:
    """`probe_signatures` on an already open descriptor."""
    img = _Image(fd, device_size_bytes(fd))
    found: list[Signature] = []
    found += _probe_ext(img)
    found += _probe_fixed(img)
    found += _probe_vfat(img)
    found += _probe_swap(img)
    found += _probe_md(img)
    found += _probe_lvm2(img)
    fs_found = any(s.kind == "filesystem" for s in found)
    found += _probe_partition_tables(img, fs_found)
    return sorted(found, key=lambda s: (s.offset_bytes, s.name))


# --- libblkid through blkid -p ----------------------------------------------------------------

# blkid(8) exit codes: 0 found, 2 nothing found (or the device could not be opened), 4 usage
# error, 8 ambivalent result (several signatures, e.g. a file system over an old RAID member).
_BLKID_FOUND, _BLKID_NOTHING, _BLKID_AMBIVALENT = 0, 2, 8
_BLKID_KIND_BY_USAGE = {"filesystem": "filesystem", "raid": "raid", "crypto": "crypto", "other": "other"}


def _blkid_path() -> str | None:
    """The blkid executable; /sbin and /usr/sbin are not on every user's PATH."""
    return shutil.which("blkid") or shutil.which("blkid", path="/usr/sbin:/sbin")


def _blkid_signatures(fields: dict[str, str]) -> list[Signature]:
    found = []
    if "TYPE" in fields:
        name, usage = fields["TYPE"], fields.get("USAGE", "")
        kind = ("lvm" if name == "LVM2_member" else "swap" if name == "swap"
                else _BLKID_KIND_BY_USAGE.get(usage, usage or "other"))
        shown = " ".join(f"{k}={fields[k]}" for k in ("TYPE", "USAGE", "VERSION") if k in fields)
        found.append(Signature(kind, name, int(fields.get("SBMAGIC_OFFSET", 0) or 0), shown))
    if "PTTYPE" in fields:
        found.append(Signature("partition-table", fields["PTTYPE"], int(fields.get("PTMAGIC_OFFSET", 0) or 0),
                               f"PTTYPE={fields['PTTYPE']}"))
    return found


def probe_with_blkid(path: str | os.PathLike, fd: int | None = None) -> list[Signature] | None:
    """Signatures libblkid finds on `path` (`blkid -p -o export`), or None when blkid is missing.

    With `fd`, blkid probes that open descriptor (as /dev/fd/N), not whatever `path` names by
    then. Raises OSError when the path cannot be read or blkid fails.
    """
    exe = _blkid_path()
    if exe is None:
        return None
    import subprocess  # only where blkid is asked

    own_fd = fd is None
    # blkid says nothing and exits 2 both for "no signature" and "cannot open": open it here.
    if own_fd:
        fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        proc = subprocess.run([exe, "-p", "-o", "export", f"/dev/fd/{fd}"], capture_output=True,
                              text=True, timeout=60, check=False, pass_fds=(fd,))
    except (OSError, subprocess.TimeoutExpired) as e:
        raise OSError(f"blkid -p failed: {e}") from None
    finally:
        if own_fd:
            os.close(fd)
    if proc.returncode == _BLKID_NOTHING:
        return []
    if proc.returncode == _BLKID_AMBIVALENT:
        return [Signature("multiple", "ambivalent", 0,
                          "several signatures: an ambivalent result; `wipefs -n` lists them")]
    if proc.returncode != _BLKID_FOUND:
        raise OSError(f"blkid -p exited with {proc.returncode}: {proc.stderr.strip() or 'no message'}")
    fields = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    return _blkid_signatures(fields)


def probe_device(path: str | os.PathLike, fd: int | None = None) -> tuple[str, list[Signature]]:
    """The signatures on `path` (or on the open `fd`, when given) and which prober found them
    (`BLKID_PROBER` or `STORLAB_PROBER`).

    blkid first; where it is missing, or finds nothing, storlab's own prober (which also knows a
    lone GPT backup header and md superblocks at the end). Raises OSError when `path` cannot be read.
    """
    by_blkid = probe_with_blkid(path, fd)
    if by_blkid:
        return BLKID_PROBER, by_blkid
    own = probe_fd(fd) if fd is not None else probe_signatures(path)
    if by_blkid is None:
        return f"{STORLAB_PROBER} (blkid not found)", own
    return (STORLAB_PROBER if own else BLKID_PROBER), own
