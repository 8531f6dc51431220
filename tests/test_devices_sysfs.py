"""sysfs/procfs discovery on fixture trees: a SCSI disk with a partition, a loop device, an md
RAID 6 and an LVM dm device stacked on it, and the mountinfo / swaps parsers."""
from __future__ import annotations

from pathlib import Path

from storlab.devices.sysfs import device_by_devnum, list_block_devices, parse_mountinfo, read_block_device, read_swaps, stack_below


def make_tree(root: Path, files: dict[str, str]) -> str:
    """Write `files` (relative path -> content; a path ending in '/' is an empty directory)."""
    for rel, content in files.items():
        p = root / rel
        if rel.endswith("/"):
            p.mkdir(parents=True, exist_ok=True)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content + "\n")
    return str(root)


QUEUE_HDD = {
    "logical_block_size": "512", "physical_block_size": "4096", "minimum_io_size": "4096",
    "optimal_io_size": "0", "max_sectors_kb": "1280", "max_hw_sectors_kb": "32767",
    "read_ahead_kb": "128", "nr_requests": "64", "scheduler": "none [mq-deadline] kyber bfq",
    "rotational": "1", "chunk_sectors": "0", "write_cache": "write back",
}


def _queue(dev: str, values: dict[str, str]) -> dict[str, str]:
    return {f"block/{dev}/queue/{k}": v for k, v in values.items()}


def stacked_tree(root: Path) -> str:
    files = {}
    for i, disk in enumerate(["sda", "sdb"]):
        files.update(_queue(disk, QUEUE_HDD))
        files.update({
            f"block/{disk}/dev": f"8:{16 * i}", f"block/{disk}/size": "7814037168",
            f"block/{disk}/alignment_offset": "0", f"block/{disk}/removable": "0", f"block/{disk}/ro": "0",
            f"block/{disk}/device/model": "ST4000NM0035-1V4", f"block/{disk}/device/vendor": "ATA     ",
            f"block/{disk}/device/queue_depth": "32", f"block/{disk}/holders/": "", f"block/{disk}/slaves/": "",
            f"block/{disk}/{disk}1/partition": "1", f"block/{disk}/{disk}1/start": "2048",
            f"block/{disk}/{disk}1/size": "7814035087", f"block/{disk}/{disk}1/dev": f"8:{16 * i + 1}",
            f"block/{disk}/{disk}1/alignment_offset": "0", f"block/{disk}/{disk}1/holders/md0": "",
        })
    files.update(_queue("md0", {**QUEUE_HDD, "minimum_io_size": "524288", "optimal_io_size": "1048576",
                                "scheduler": "none", "read_ahead_kb": "4096"}))
    files.update({
        "block/md0/dev": "9:0", "block/md0/size": "15627804672",
        "block/md0/slaves/sda1": "", "block/md0/slaves/sdb1": "", "block/md0/holders/dm-0": "",
        "block/md0/md/level": "raid0", "block/md0/md/raid_disks": "2", "block/md0/md/chunk_size": "524288",
        "block/md0/md/metadata_version": "1.2", "block/md0/md/array_state": "clean",
        "block/md0/md/component_size": "3906886272", "block/md0/md/layout": "0",
    })
    files.update(_queue("dm-0", {**QUEUE_HDD, "scheduler": "none"}))
    files.update({
        "block/dm-0/dev": "253:0", "block/dm-0/size": "2097152", "block/dm-0/slaves/md0": "",
        "block/dm-0/holders/": "", "block/dm-0/dm/name": "vg0-scratch",
        "block/dm-0/dm/uuid": "LVM-abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcd",
    })
    files.update(_queue("loop0", {**QUEUE_HDD, "physical_block_size": "512", "scheduler": "[none] mq-deadline"}))
    files.update({
        "block/loop0/dev": "7:0", "block/loop0/size": "131072",
        "block/loop0/loop/backing_file": "/scratch/img with space", "block/loop0/loop/offset": "1048576",
        "block/loop0/loop/sizelimit": "0", "block/loop0/loop/dio": "1",
    })
    return make_tree(root, files)


def test_lists_disks_partitions_loop_md_and_dm(tmp_path):
    root = stacked_tree(tmp_path)
    devs = {d.name: d for d in list_block_devices(root)}
    assert {n: d.kind for n, d in devs.items()} == {
        "sda": "disk", "sda1": "partition", "sdb": "disk", "sdb1": "partition",
        "md0": "md", "dm-0": "dm", "loop0": "loop"}
    sda = devs["sda"]
    assert (sda.major, sda.minor, sda.size_bytes) == (8, 0, 7814037168 * 512)
    assert (sda.model, sda.vendor, sda.partitions) == ("ST4000NM0035-1V4", "ATA", ["sda1"])
    q = sda.queue
    assert (q.logical_block_size, q.physical_block_size, q.minimum_io_size, q.optimal_io_size) == (512, 4096, 4096, 0)
    assert (q.max_sectors_kb, q.max_hw_sectors_kb, q.read_ahead_kb, q.nr_requests) == (1280, 32767, 128, 64)
    assert (q.scheduler, q.rotational, q.queue_depth, q.write_cache) == ("mq-deadline", True, 32, "write back")
    assert q.schedulers_available == ("none", "mq-deadline", "kyber", "bfq")
    part = devs["sda1"]
    assert (part.parent, part.partition_number, part.start_bytes, part.holders) == ("sda", 1, 2048 * 512, ["md0"])
    assert part.queue.physical_block_size == 4096  # a partition shares its disk's queue


def test_md_dm_and_loop_details(tmp_path):
    root = stacked_tree(tmp_path)
    md = read_block_device("md0", root)
    assert (md.md.level, md.md.raid_disks, md.md.chunk_size_bytes, md.md.metadata_version) == ("raid0", 2, 524288, "1.2")
    assert md.md.component_size_bytes == 3906886272 * 1024
    assert (md.slaves, md.holders, md.queue.scheduler) == (["sda1", "sdb1"], ["dm-0"], "none")
    dm = read_block_device("/dev/dm-0", root)
    assert (dm.dm.name, dm.dm.is_lvm, dm.slaves) == ("vg0-scratch", True, ["md0"])
    loop = read_block_device("loop0", root)
    assert (loop.loop.backing_file, loop.loop.offset_bytes, loop.loop.direct_io) == ("/scratch/img with space", 1048576, True)
    assert loop.queue.scheduler == "none"


def test_partition_lookup_by_name_and_devnum(tmp_path):
    root = stacked_tree(tmp_path)
    assert read_block_device("sdb1", root).parent == "sdb"
    assert device_by_devnum(8, 17, root).name == "sdb1"
    assert device_by_devnum(0, 42, root) is None
    assert read_block_device("nvme9n1", root) is None


def test_stack_below_walks_slaves_and_partition_parents(tmp_path):
    root = stacked_tree(tmp_path)
    assert [d.name for d in stack_below("dm-0", root)] == ["md0", "sda1", "sdb1", "sda", "sdb"]


def test_missing_attributes_are_none(tmp_path):
    root = make_tree(tmp_path, {"block/vdb/dev": "254:16"})
    dev = read_block_device("vdb", root)
    assert dev.kind == "disk" and dev.size_bytes is None and dev.queue.scheduler is None
    assert dev.queue.rotational is None and dev.holders == []


def test_parse_mountinfo_with_optional_fields_and_escapes():
    text = (
        "27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard\n"
        "90 27 0:45 / /mnt/my\\040data rw,relatime shared:50 master:2 - btrfs /dev/loop1 rw,space_cache=v2\n"
        "garbage line\n"
    )
    m = parse_mountinfo(text)
    assert [(x.mount_point, x.fs_type, x.source, x.major, x.minor) for x in m] == [
        ("/", "ext4", "/dev/vda", 254, 0), ("/mnt/my data", "btrfs", "/dev/loop1", 0, 45)]
    assert m[0].super_options == "rw,discard"


def test_read_swaps(tmp_path):
    make_tree(tmp_path, {"swaps": "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
                                  "/dev/sdc2                               partition\t8388604\t\t0\t\t-2"})
    assert read_swaps(str(tmp_path)) == ["/dev/sdc2"]
