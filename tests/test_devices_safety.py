"""The write-safety gate: refusals on real loop devices (root), the --allow-destroy override matched
by device number, and describe_path on files and devices."""
from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "doctor"))
from loophelpers import LoopFactory, MiB, need_tool, run, skip_unless_root_and_loop  # noqa: E402
from storlab.devices.safety import TargetRefused, check_write_allowed, describe_path
from storlab.devices.signatures import md_superblock_offsets


@pytest.fixture
def loops(tmp_path):
    skip_unless_root_and_loop()
    factory = LoopFactory(tmp_path)
    yield factory
    factory.cleanup()


# --- no root needed ---------------------------------------------------------------------------

def test_regular_file_is_always_allowed_even_with_a_file_system_inside(tmp_path):
    need_tool("mkfs.ext4")
    img = tmp_path / "fs.img"
    img.write_bytes(b"")
    os.truncate(img, 32 * MiB)
    run("mkfs.ext4", "-q", "-F", str(img))
    check_write_allowed(img)  # no exception: image files are the user's own data files


def test_missing_path_is_allowed(tmp_path):
    check_write_allowed(tmp_path / "new-file")


def test_describe_regular_file(tmp_path):
    f = tmp_path / "data"
    f.write_bytes(b"x" * 1000)
    d = describe_path(f)
    assert set(d) == {"path", "type", "size_bytes", "fs_type", "mount_point", "device",
                      "logical_block_size", "physical_block_size", "rotational", "model", "scheduler"}
    assert (d["type"], d["size_bytes"]) == ("file", 1000)
    assert d["fs_type"] and d["mount_point"] and str(f).startswith(d["mount_point"])


def test_describe_missing_file_uses_parent_file_system(tmp_path):
    d = describe_path(tmp_path / "a" / "b")
    assert d["type"] == "missing" and d["size_bytes"] is None
    assert d["fs_type"] == describe_path(tmp_path)["fs_type"]


@pytest.mark.parametrize("weird", ["", "\0bad", "/proc/self/status", "/dev/null"])
def test_describe_never_raises(weird):
    d = describe_path(weird)
    assert "type" in d


# --- loop devices -----------------------------------------------------------------------------

@pytest.mark.root
@pytest.mark.loop
def test_ext4_loop_device_is_refused_naming_ext4(loops):
    need_tool("mkfs.ext4")
    img = loops.image("ext4.img", 64 * MiB)
    run("mkfs.ext4", "-q", "-F", img)
    dev = loops.attach(img)
    with pytest.raises(TargetRefused) as e:
        check_write_allowed(dev)
    assert str(e.value) == (f"refusing to write to {dev}: ext4 file system (TYPE=ext4 USAGE=filesystem "
                            f"VERSION=1.0), found by blkid (libblkid low-level probe); "
                            f"pass --allow-destroy {dev} to overwrite it")


@pytest.mark.root
@pytest.mark.loop
def test_allow_destroy_same_device_passes_also_through_a_link(loops, tmp_path):
    need_tool("mkfs.ext4")
    img = loops.image("ext4.img", 64 * MiB)
    run("mkfs.ext4", "-q", "-F", img)
    dev = loops.attach(img)
    check_write_allowed(dev, allow_destroy=[dev])
    link = tmp_path / "by-id-link"   # like /dev/disk/by-id/...: a symlink to the device node
    link.symlink_to(dev)
    check_write_allowed(dev, allow_destroy=[str(link)])
    check_write_allowed(str(link), allow_destroy=[dev])


@pytest.mark.root
@pytest.mark.loop
def test_allow_destroy_naming_another_device_does_not_pass(loops):
    need_tool("mkfs.ext4")
    img = loops.image("ext4.img", 64 * MiB)
    run("mkfs.ext4", "-q", "-F", img)
    dev = loops.attach(img)
    other = loops.attach(loops.image("blank.img", 16 * MiB))
    with pytest.raises(TargetRefused, match="ext4 file system"):
        check_write_allowed(dev, allow_destroy=[other, img])  # the backing file is not the device


@pytest.mark.root
@pytest.mark.loop
def test_blank_loop_device_passes(loops):
    dev = loops.attach(loops.image("blank.img", 64 * MiB))
    check_write_allowed(dev)


@pytest.mark.root
@pytest.mark.loop
def test_mounted_device_named_in_allow_destroy_is_still_refused(loops):
    # docs/doctor.md said --allow-destroy cannot lift this refusal while the code let it: writing
    # under a live file system corrupts it, so a mounted device is never written.
    need_tool("mkfs.ext4")
    img = loops.image("ext4.img", 64 * MiB)
    run("mkfs.ext4", "-q", "-F", img)
    dev = loops.attach(img)
    mnt = loops.mount(dev, "mnt")
    for allow in ([], ["/dev/null"], [dev]):
        with pytest.raises(TargetRefused) as e:
            check_write_allowed(dev, allow_destroy=allow)
        assert str(e.value) == (f"refusing to write to {dev}: it is mounted at {mnt} (ext4); unmount it first; "
                                f"--allow-destroy does not lift this refusal")


@pytest.mark.root
@pytest.mark.loop
def test_md_superblock_at_end_of_loop_device_is_refused(loops):
    size = 64 * MiB
    img = loops.image("md.img", size)
    sb = bytearray(512)
    struct.pack_into("<II", sb, 0, 0xA92B4EFC, 1)
    struct.pack_into("<i", sb, 72, 1)
    struct.pack_into("<I", sb, 92, 2)
    offset = md_superblock_offsets(size)["1.0"]
    with open(img, "r+b") as f:
        f.seek(offset)
        f.write(sb)
    dev = loops.attach(img)
    with pytest.raises(TargetRefused, match=f"md metadata 1.0, magic 0xA92B4EFC at byte {offset}"):
        check_write_allowed(dev)


@pytest.mark.root
@pytest.mark.loop
def test_device_with_holders_is_refused(loops, tmp_path):
    # md and device-mapper are not in every kernel, so the holder is recorded in a fixture sysfs
    # tree for the real device's number.
    dev = loops.attach(loops.image("blank.img", 16 * MiB))
    name = os.path.basename(dev)
    st = os.stat(dev)
    block = tmp_path / "sys" / "block" / name
    (block / "holders" / "md0").mkdir(parents=True)
    (block / "dev").write_text(f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}\n")
    with pytest.raises(TargetRefused) as e:
        check_write_allowed(dev, sysfs_root=str(tmp_path / "sys"))
    assert str(e.value) == (f"refusing to write to {dev}: {dev} is held by md0 (sysfs holders); remove or stop "
                            f"md0 first; --allow-destroy does not lift this refusal")
    with pytest.raises(TargetRefused, match="held by md0"):
        check_write_allowed(dev, allow_destroy=[dev], sysfs_root=str(tmp_path / "sys"))


@pytest.mark.root
@pytest.mark.loop
def test_describe_block_device_and_file_on_it(loops):
    need_tool("mkfs.ext4")
    img = loops.image("ext4.img", 64 * MiB)
    run("mkfs.ext4", "-q", "-F", img)
    dev = loops.attach(img)
    d = describe_path(dev)
    assert (d["type"], d["size_bytes"], d["device"]) == ("block", 64 * MiB, os.path.basename(dev))
    assert d["logical_block_size"] == 512 and d["fs_type"] is None
    mnt = loops.mount(dev, "mnt")
    f = Path(mnt) / "target"
    f.write_bytes(b"y" * 4096)
    d = describe_path(f)
    assert (d["type"], d["fs_type"], d["mount_point"], d["device"]) == ("file", "ext4", mnt, os.path.basename(dev))
    assert d["size_bytes"] == 4096


@pytest.mark.root
@pytest.mark.loop
def test_describe_file_on_btrfs_names_the_device(loops):
    # btrfs mounts report an anonymous device number; the mount source names the device.
    need_tool("mkfs.btrfs")
    img = loops.image("btrfs.img", 256 * MiB)
    run("mkfs.btrfs", "-q", img)
    dev = loops.attach(img)
    mnt = loops.mount(dev, "mnt")
    d = describe_path(mnt)
    assert (d["fs_type"], d["device"]) == ("btrfs", os.path.basename(dev))


# --- the kernel's memory devices -----------------------------------------------------------------

def test_memory_devices_pass_the_gate_by_device_number_without_allow_destroy():
    from storlab.devices.safety import check_opened_paths

    for path in ("/dev/null", "/dev/zero", "/dev/full"):
        check_write_allowed(path)
        (checked,) = check_opened_paths([{"path": path, "writes": True}])
        assert checked == {"path": path, "kind": "char", "rdev": os.stat(path).st_rdev}
        assert describe_path(path)["type"] == "char"


def test_a_link_to_dev_null_passes_as_dev_null(tmp_path):
    from storlab.devices.safety import check_opened_paths

    link = tmp_path / "sink"
    link.symlink_to("/dev/null")
    (checked,) = check_opened_paths([{"path": str(link), "writes": True}])
    assert checked["kind"] == "char" and (os.major(checked["rdev"]), os.minor(checked["rdev"])) == (1, 3)


@pytest.mark.parametrize("writes", [True, False])
def test_another_character_device_is_refused_by_number_before_it_is_opened(tmp_path, monkeypatch, writes):
    """A link named `null` to /dev/random is /dev/random (1:8): refused in one line naming what is
    allowed, read or write, without the gate ever opening it."""
    from storlab.devices import safety

    fake = tmp_path / "null"
    fake.symlink_to("/dev/random")
    opened = []
    real_open = os.open
    monkeypatch.setattr(safety.os, "open", lambda p, *a, **k: opened.append(p) or real_open(p, *a, **k))
    for path in (str(fake), "/dev/random"):
        with pytest.raises(TargetRefused) as e:
            safety.check_opened_paths([{"path": path, "writes": writes}])
        assert str(e.value) == (f"refusing {path}: it is character device 1:8; the only character devices "
                                "storlab uses are /dev/null (1:3), /dev/zero (1:5) and /dev/full (1:7)")
    assert opened == []
