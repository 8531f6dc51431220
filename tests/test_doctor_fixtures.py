"""Doctor checks on recorded trees (no root): an md RAID 6 of ten rotational SCSI disks with xfs,
made once right and once wrong in every way the checks know; an LVM stripe over two md arrays.
sysfs and procfs are fixture trees, tool output is recorded text, and the xfs superblock is a real
mkfs.xfs image file standing in for the device node."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "doctor"))
from loophelpers import MiB, need_tool  # noqa: E402
from storlab.doctor.checks import run_checks
from storlab.doctor.inventory import discover
from test_devices_sysfs import make_tree as write_tree  # tests/ is on sys.path (pytest prepend mode)

FIX = Path(__file__).parent / "fixtures" / "doctor"
KiB = 1024
DISKS = [f"sd{c}" for c in "abcdefghij"]




def disk_files(name: str, minor: int, *, scheduler="none [mq-deadline] kyber bfq", queue_depth="32",
               part_start=2048, holder="md0", partition=True) -> dict[str, str]:
    q = {"logical_block_size": "512", "physical_block_size": "4096", "minimum_io_size": "4096",
         "optimal_io_size": "0", "max_sectors_kb": "1280", "max_hw_sectors_kb": "32767", "read_ahead_kb": "128",
         "nr_requests": "64", "scheduler": scheduler, "rotational": "1"}
    files = {f"block/{name}/queue/{k}": v for k, v in q.items()}
    files.update({f"block/{name}/dev": f"8:{minor}", f"block/{name}/size": "7814037168",
                  f"block/{name}/device/model": "ST4000NM0035-1V4", f"block/{name}/device/queue_depth": queue_depth,
                  f"block/{name}/holders/": ""})
    if partition:
        files.update({f"block/{name}/{name}1/partition": "1", f"block/{name}/{name}1/start": str(part_start),
                      f"block/{name}/{name}1/size": "7814035087", f"block/{name}/{name}1/dev": f"8:{minor + 1}",
                      f"block/{name}/{name}1/alignment_offset": "0", f"block/{name}/{name}1/holders/{holder}": ""})
    else:
        files[f"block/{name}/holders/{holder}"] = ""
    return files


def md_files(name: str, minor: int, level: str, slaves: list[str], chunk: int, *, read_ahead_kb="8192",
             max_sectors_kb="4096", io_opt: int, holders=()) -> dict[str, str]:
    q = {"logical_block_size": "512", "physical_block_size": "4096", "minimum_io_size": str(chunk),
         "optimal_io_size": str(io_opt), "max_sectors_kb": max_sectors_kb, "max_hw_sectors_kb": "32767",
         "read_ahead_kb": read_ahead_kb, "scheduler": "none", "rotational": "1"}
    files = {f"block/{name}/queue/{k}": v for k, v in q.items()}
    files.update({f"block/{name}/dev": f"9:{minor}", f"block/{name}/size": "62511161344",
                  f"block/{name}/md/level": level, f"block/{name}/md/raid_disks": str(len(slaves)),
                  f"block/{name}/md/chunk_size": str(chunk), f"block/{name}/md/layout": "2",
                  f"block/{name}/md/array_state": "clean", f"block/{name}/md/degraded": "0",
                  f"block/{name}/holders/": ""})
    files.update({f"block/{name}/slaves/{s}": "" for s in slaves})
    files.update({f"block/{name}/holders/{h}": "" for h in holders})
    return files


def xfs_image(path: Path, su: str, sw: int) -> None:
    need_tool("mkfs.xfs")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(2048 * MiB)  # sparse; mkfs.xfs wants room for a 64 MiB log with stripe units
    subprocess.run(["mkfs.xfs", "-q", "-f", "-d", f"su={su},sw={sw}", str(path)], check=True, capture_output=True)


def recorded_tools(outputs: dict[tuple[str, ...], str]):
    calls = []

    def run(argv):
        calls.append(tuple(argv))
        return outputs.get(tuple(argv))
    run.calls = calls
    return run


def raid6_host(tmp_path: Path, *, bad: bool):
    """md0 = RAID 6 of sda1..sdj1, chunk 512 KiB (8 data disks: 4 MiB stripe), xfs mounted on /data."""
    files = {}
    for i, d in enumerate(DISKS):
        files.update(disk_files(
            d, 16 * i,
            scheduler="[none] mq-deadline kyber bfq" if bad and d == "sda" else "none [mq-deadline] kyber bfq",
            queue_depth="1" if bad and d == "sdb" else "32",
            part_start=2049 if bad and d == "sdc" else 2048))
    files.update(md_files("md0", 0, "raid6", [f"{d}1" for d in DISKS], 512 * KiB,
                          read_ahead_kb="128" if bad else "8192", max_sectors_kb="1024" if bad else "4096",
                          io_opt=1536 * MiB if bad else 4 * MiB))
    write_tree(tmp_path / "sys", files)
    sunit, swidth = (128, 512) if bad else (1024, 8192)   # 512-byte units, as /proc/mounts shows them
    write_tree(tmp_path / "proc", {
        "self/mountinfo": (f"27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
                           f"60 27 9:0 / /data rw,noatime - xfs /dev/md0 rw,attr2,inode64,sunit={sunit},"
                           f"swidth={swidth},noquota"),
        "mdstat": (FIX / "mdstat_raid6_raid0.txt").read_text(),
    })
    xfs_image(tmp_path / "dev" / "md0", "64k" if bad else "512k", 4 if bad else 8)
    run = recorded_tools({("mdadm", "--detail", "/dev/md0"): (FIX / "mdadm_detail_md0_raid6.txt").read_text()})
    return discover(sysfs_root=str(tmp_path / "sys"), proc_root=str(tmp_path / "proc"),
                    dev_root=str(tmp_path / "dev"), run=run), run


def test_correct_raid6_stack_has_no_findings(tmp_path):
    inv, run = raid6_host(tmp_path, bad=False)
    s = inv.striping["md0"]
    assert (s.unit_bytes, s.data_members, s.parity) == (512 * KiB, 8, True)
    geo = inv.filesystems["md0"]
    assert (geo.fs_type, geo.stripe_unit_bytes, geo.stripe_width_bytes) == ("xfs", 512 * KiB, 4 * MiB)
    assert ("mdadm", "--detail", "/dev/md0") in run.calls
    assert run_checks(inv) == []


def test_every_mistake_on_the_raid6_stack_is_found_and_nothing_else(tmp_path):
    inv, _ = raid6_host(tmp_path, bad=True)
    found = {(f.code, f.device, f.severity) for f in run_checks(inv)}
    assert found == {
        ("fs-stripe-mismatch", "md0", "warning"),
        ("read-ahead-small", "md0", "warning"),
        ("max-sectors-below-stripe-width", "md0", "warning"),
        ("implausible-optimal-io-size", "md0", "warning"),
        ("scheduler-none-on-rotational", "sda", "warning"),
        ("queue-depth-1", "sdb", "warning"),
        ("partition-misaligned", "sdc1", "error"),
    }


def test_fs_mismatch_names_units_evidence_and_fix(tmp_path):
    inv, _ = raid6_host(tmp_path, bad=True)
    f = next(f for f in run_checks(inv) if f.code == "fs-stripe-mismatch")
    assert f.message == ("xfs on /dev/md0 stripes 64 KiB x 4 but the storage below stripes 512 KiB x 8; "
                         "expected sunit=128 swidth=1024 blks (su=512 KiB, sw=8)")
    assert "xfs: sunit=16 swidth=64 blks (4096-byte blocks) (xfs superblock of" in f.evidence
    assert "md0: raid6, 10 devices (8 data)" in f.evidence
    assert f.fix.startswith("umount /data && mount -o sunit=1024,swidth=8192 /dev/md0 /data")
    assert "mkfs.xfs -d su=512k,sw=8" in f.fix


def test_read_ahead_fix_covers_two_stripes(tmp_path):
    inv, _ = raid6_host(tmp_path, bad=True)
    f = next(f for f in run_checks(inv) if f.code == "read-ahead-small")
    assert f.fix.startswith("blockdev --setra 16384 /dev/md0")   # 2 x 4 MiB in 512-byte sectors


def test_misaligned_partition_evidence(tmp_path):
    inv, _ = raid6_host(tmp_path, bad=True)
    f = next(f for f in run_checks(inv) if f.code == "partition-misaligned")
    assert "starts at byte 1049088 (sector 2049, sysfs start)" in f.evidence
    assert "sector 4096" in f.fix  # next multiple of both 1 MiB and 4 KiB: 2 MiB


def test_md_geometry_from_sysfs_and_mdstat_without_mdadm(tmp_path):
    files = {}
    for i, d in enumerate(["sdk", "sdl"]):
        files.update(disk_files(d, 160 + 16 * i, holder="md1", partition=False))
    files.update(md_files("md1", 1, "raid0", ["sdk", "sdl"], 256 * KiB, io_opt=512 * KiB, read_ahead_kb="1024"))
    write_tree(tmp_path / "sys", files)
    write_tree(tmp_path / "proc", {"self/mountinfo": "", "mdstat": (FIX / "mdstat_raid6_raid0.txt").read_text()})
    inv = discover(sysfs_root=str(tmp_path / "sys"), proc_root=str(tmp_path / "proc"),
                   dev_root=str(tmp_path / "dev"), run=recorded_tools({}))
    s = inv.striping["md1"]
    assert (s.unit_bytes, s.data_members, s.parity) == (256 * KiB, 2, False)
    assert any("mdadm --detail gave nothing for md1" in n for n in inv.notes)
    assert run_checks(inv) == []


def lvm_host(tmp_path: Path):
    """dm-0 = LV vg0/scratch striped 2 x 64 KiB over md0 (RAID 6, 512 KiB chunk) and md1 (RAID 0)."""
    files = {}
    for i, d in enumerate(DISKS):
        files.update(disk_files(d, 16 * i))
    for i, d in enumerate(["sdk", "sdl"]):
        files.update(disk_files(d, 160 + 16 * i, holder="md1", partition=False))
    files.update(md_files("md0", 0, "raid6", [f"{d}1" for d in DISKS], 512 * KiB, io_opt=4 * MiB, holders=["dm-0"]))
    files.update(md_files("md1", 1, "raid0", ["sdk", "sdl"], 256 * KiB, io_opt=512 * KiB, holders=["dm-0"]))
    files.update({f"block/dm-0/queue/{k}": v for k, v in {
        "logical_block_size": "512", "physical_block_size": "4096", "minimum_io_size": "65536",
        "optimal_io_size": "131072", "read_ahead_kb": "8192", "max_sectors_kb": "1024", "scheduler": "none",
        "rotational": "1"}.items()})
    files.update({"block/dm-0/dev": "253:0", "block/dm-0/size": "2097152", "block/dm-0/slaves/md0": "",
                  "block/dm-0/slaves/md1": "", "block/dm-0/dm/name": "vg0-scratch",
                  "block/dm-0/dm/uuid": "LVM-Zx1TvJ9kQ0aXq0yXJm8gH1d0cXoPz4bKc1Zx1TvJ9kQ0aXq0yXJm8gH1d0cXoPz4bK"})
    write_tree(tmp_path / "sys", files)
    write_tree(tmp_path / "proc", {"self/mountinfo": "", "mdstat": (FIX / "mdstat_raid6_raid0.txt").read_text()})
    from storlab.doctor.tools import LVS_ARGS, PVS_ARGS
    run = recorded_tools({
        ("mdadm", "--detail", "/dev/md0"): (FIX / "mdadm_detail_md0_raid6.txt").read_text(),
        LVS_ARGS: (FIX / "lvs_scratch_striped_64k.txt").read_text(),
        PVS_ARGS: (FIX / "pvs_md.txt").read_text(),
    })
    return discover(sysfs_root=str(tmp_path / "sys"), proc_root=str(tmp_path / "proc"),
                    dev_root=str(tmp_path / "dev"), run=run)


def test_lvm_stripe_smaller_than_md_chunk_and_pe_start(tmp_path):
    inv = lvm_host(tmp_path)
    seg = inv.lvm["dm-0"]
    assert (seg.lv_name, seg.stripes, seg.stripe_size_bytes) == ("scratch", 2, 64 * KiB)
    assert inv.striping["dm-0"].source == "LV vg0/scratch: 2 stripes of 64 KiB"
    found = {(f.code, f.device) for f in run_checks(inv)}
    assert found == {("lvm-stripe-smaller-than-chunk", "dm-0"), ("lvm-pe-start-not-stripe-aligned", "md0")}
    f = next(f for f in run_checks(inv) if f.code == "lvm-stripe-smaller-than-chunk")
    assert "lvcreate -i 2 -I 4096k" in f.fix


def test_lvm_without_lvs_notes_it(tmp_path):
    inv = lvm_host(tmp_path)
    inv2 = discover(sysfs_root=str(tmp_path / "sys"), proc_root=str(tmp_path / "proc"),
                    dev_root=str(tmp_path / "dev"), run=recorded_tools({}))
    assert inv.lvm and not inv2.lvm
    assert any("lvs not available" in n for n in inv2.notes)
    assert not any(f.code.startswith("lvm-") for f in run_checks(inv2))


@pytest.mark.parametrize("io_opt, expect", [
    (33553920, True),          # USB bridge value (util-linux #1221)
    (3 * 512 * KiB, False),    # a RAID 5 of 3+1 with 512 KiB chunk: plausible
    (4 * MiB + 512, True),     # not a multiple of the physical block
    (512 * MiB, True),         # beyond any plausible stripe
])
def test_implausible_optimal_io_size_on_a_disk(tmp_path, io_opt, expect):
    files = disk_files("sdx", 0, partition=False, holder="x")
    files["block/sdx/queue/optimal_io_size"] = str(io_opt)
    files["block/sdx/queue/minimum_io_size"] = "4096"
    write_tree(tmp_path / "sys", files)
    write_tree(tmp_path / "proc", {"self/mountinfo": ""})
    inv = discover(sysfs_root=str(tmp_path / "sys"), proc_root=str(tmp_path / "proc"),
                   dev_root=str(tmp_path / "dev"), run=recorded_tools({}))
    codes = [f.code for f in run_checks(inv)]
    assert ("implausible-optimal-io-size" in codes) is expect
