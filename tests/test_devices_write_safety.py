"""Write safety on what is actually opened: loop devices carrying every kind of signature blkid
reports are refused, through the gate and through `storlab run`, with their first MiB unchanged;
per-thread and per-rank names, symlinks re-pointed between phases or between check and open, a
mistyped /dev name, and a loop device backing another loop device (root and loop markers)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "doctor"))
from loophelpers import LoopFactory, MiB, need_tool, run, skip_unless_root_and_loop  # noqa: E402
from storlab import _core
from storlab.cli.main import main
from storlab.devices import signatures
from storlab.devices.safety import TargetRefused, check_write_allowed
from storlab.jobs.job import resolve_job
from storlab.measure.benchmark import PhaseHooks
from storlab.measure.mpi.rewrite import rewrite_job
from storlab.measure.runner import checked_spec, run_job

pytestmark = [pytest.mark.root, pytest.mark.loop]


@pytest.fixture
def loops(tmp_path):
    skip_unless_root_and_loop()
    need_tool("blkid")
    factory = LoopFactory(tmp_path)
    yield factory
    factory.cleanup()


def first_mib_sha(dev: str) -> str:
    with open(dev, "rb") as f:
        return hashlib.sha256(f.read(MiB)).hexdigest()


def storlab_run(*args: str) -> int:
    return main(["run", *args, "-q", "--no-store"])


# --- devices carrying each signature ---------------------------------------------------------

def _md_1_2_superblock() -> bytes:
    """An md 1.2 member superblock (RAID 1 of 2) as mdadm writes it at 4 KiB, with the checksum
    libblkid verifies; crafted because this kernel has no md driver for `mdadm --create`."""
    sb = bytearray(256 + 2 * 4)
    struct.pack_into("<III", sb, 0, 0xA92B4EFC, 1, 0)          # magic, major_version, feature_map
    sb[16:32] = bytes(range(16))                                # set_uuid
    sb[32:40] = b"storlab\0"                                    # set_name
    struct.pack_into("<iiQII", sb, 72, 1, 0, 100000, 0, 2)     # level, layout, size, chunksize, raid_disks
    struct.pack_into("<QQQ", sb, 128, 2048, 100000, 8)         # data_offset, data_size, super_offset (sectors)
    sb[168:184] = bytes(range(16, 32))                          # device_uuid
    struct.pack_into("<I", sb, 220, 4)                          # max_dev
    struct.pack_into("<HHHH", sb, 256, 0, 1, 0xFFFF, 0xFFFF)    # dev_roles
    words = struct.unpack_from(f"<{len(sb) // 4}I", sb)        # md's calc_sb_1_csum
    total = sum(words) & 0xFFFFFFFFFFFFFFFF
    struct.pack_into("<I", sb, 216, ((total & 0xFFFFFFFF) + (total >> 32)) & 0xFFFFFFFF)
    return bytes(sb)


def _write_at(path: str, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _luks2(loops: LoopFactory, backup_only: bool) -> str:
    need_tool("cryptsetup")
    img = loops.image("luks.img", 64 * MiB)
    key = loops.tmp_path / "key"
    key.write_text("storlab")
    run("cryptsetup", "luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2",
        "--pbkdf-force-iterations", "1000", "--key-file", str(key), img)
    if backup_only:
        _write_at(img, 0, bytes(16 * 1024))   # primary binary header + JSON area; the backup follows
    return loops.attach(img)


def make_ext4(loops):
    need_tool("mkfs.ext4")
    img = loops.image("ext4.img", 64 * MiB)
    run("mkfs.ext4", "-q", "-F", img)
    return loops.attach(img)


def make_xfs(loops):
    need_tool("mkfs.xfs")
    img = loops.image("xfs.img", 320 * MiB)
    run("mkfs.xfs", "-q", "-f", img)
    return loops.attach(img)


def make_btrfs(loops):
    need_tool("mkfs.btrfs")
    img = loops.image("btrfs.img", 128 * MiB)
    run("mkfs.btrfs", "-q", img)
    return loops.attach(img)


def make_swap(loops):
    need_tool("mkswap")
    img = loops.image("swap.img", 16 * MiB)
    run("mkswap", img)
    return loops.attach(img)


def make_gpt(loops):
    need_tool("sfdisk")
    img = loops.image("gpt.img", 16 * MiB)
    run("sfdisk", "-q", img, stdin="label: gpt\nstart=2048, size=8192\n")
    return loops.attach(img)


def make_dos(loops):
    need_tool("sfdisk")
    img = loops.image("dos.img", 16 * MiB)
    run("sfdisk", "-q", img, stdin="label: dos\nstart=2048, size=8192, type=83\n")
    return loops.attach(img)


def make_lvm2(loops):
    need_tool("pvcreate")
    dev = loops.attach(loops.image("lvm.img", 16 * MiB))
    run("pvcreate", "-q", "-y", "-ff", "--config", "devices { obtain_device_list_from_udev = 0 }", dev)
    return dev


def make_md_1_2(loops):
    img = loops.image("md.img", 16 * MiB)
    _write_at(img, 4096, _md_1_2_superblock())
    if shutil.which("mdadm"):   # mdadm reads it as its own: the crafted bytes are a real superblock
        assert "Version : 1.2" in run("mdadm", "--examine", img)
    return loops.attach(img)


def make_luks2(loops):
    return _luks2(loops, backup_only=False)


def make_luks2_backup_only(loops):
    return _luks2(loops, backup_only=True)


def make_bcache(loops):
    need_tool("make-bcache")
    img = loops.image("bcache.img", 16 * MiB)
    run("make-bcache", "-B", img)
    return loops.attach(img)


def make_iso9660(loops):
    tool = shutil.which("xorriso") or shutil.which("genisoimage")
    if tool is None:
        pytest.skip("xorriso or genisoimage not installed (Debian package: see scripts/test.sh)")
    content = loops.tmp_path / "iso-content"
    content.mkdir()
    (content / "a.txt").write_text("storlab\n")
    img = str(loops.tmp_path / "iso.img")
    mkisofs = [tool, "-as", "mkisofs"] if tool.endswith("xorriso") else [tool]
    run(*mkisofs, "-quiet", "-o", img, str(content))
    os.truncate(img, 4 * MiB)   # room for the 1 MiB write the test attempts
    return loops.attach(img)


def make_zfs_member(loops):
    """A ZFS vdev label's uberblock ring (magic 0x00bab10c in every 1 KiB slot from 128 KiB), which
    libblkid reports as zfs_member; zfs itself is not in Debian main."""
    img = loops.image("zfs.img", 64 * MiB)   # libblkid ignores vdevs under 64 MiB
    for slot in range(128):
        _write_at(img, 128 * 1024 + slot * 1024, struct.pack("<Q", 0x00BAB10C))
    return loops.attach(img)


# name: (builder, TYPE or PTTYPE that blkid -p reports)
DEVICES = {
    "ext4": (make_ext4, "ext4"),
    "xfs": (make_xfs, "xfs"),
    "btrfs": (make_btrfs, "btrfs"),
    "swap": (make_swap, "swap"),
    "gpt": (make_gpt, "gpt"),
    "dos": (make_dos, "dos"),
    "lvm2": (make_lvm2, "LVM2_member"),
    "md-1.2": (make_md_1_2, "linux_raid_member"),
    "luks2": (make_luks2, "crypto_LUKS"),
    "luks2-backup-header-only": (make_luks2_backup_only, "crypto_LUKS"),
    "bcache": (make_bcache, "bcache"),
    "iso9660": (make_iso9660, "iso9660"),
    "zfs_member": (make_zfs_member, "zfs_member"),
}


@pytest.mark.parametrize("kind", list(DEVICES))
def test_device_carrying_a_signature_is_refused_and_its_first_mib_unchanged(loops, kind, capsys):
    make, blkid_name = DEVICES[kind]
    dev = make(loops)
    reported = run("blkid", "-p", "-o", "export", dev)
    assert f"TYPE={blkid_name}\n" in reported, f"blkid does not recognise the {kind} device: {reported}"
    before = first_mib_sha(dev)
    with pytest.raises(TargetRefused) as e:
        check_write_allowed(dev)
    assert f"{blkid_name} " in str(e.value) and "found by blkid (libblkid low-level probe)" in str(e.value)
    for rw in ("write", "randrw"):
        assert storlab_run("--target", dev, "--rw", rw, "--size", "1m", "--bs", "64k") == 2
        assert f"refusing to write to {dev}: " in capsys.readouterr().err
    assert first_mib_sha(dev) == before


@pytest.mark.parametrize("kind", ["zfs_member", "bcache", "luks2-backup-header-only"])
def test_signatures_storlabs_own_prober_did_not_know_are_refused(loops, kind, capsys):
    # These devices were written: the hand-written prober finds nothing on them; libblkid does.
    make, blkid_name = DEVICES[kind]
    dev = make(loops)
    assert signatures.probe_signatures(dev) == []
    before = first_mib_sha(dev)
    assert storlab_run("--target", dev, "--rw", "write", "--size", "1m") == 2
    assert f"{blkid_name} " in capsys.readouterr().err
    assert first_mib_sha(dev) == before


def test_without_blkid_storlabs_prober_refuses_and_says_so(loops, monkeypatch):
    dev = make_ext4(loops)
    monkeypatch.setattr(signatures, "_blkid_path", lambda: None)
    with pytest.raises(TargetRefused) as e:
        check_write_allowed(dev)
    assert str(e.value) == (f"refusing to write to {dev}: ext4 file system (magic 0xEF53 at byte 1080), "
                            f"found by storlab's built-in prober (blkid not found); "
                            f"pass --allow-destroy {dev} to overwrite it")


def test_allow_destroy_lifts_a_signature_refusal_for_that_device_only(loops, capsys):
    dev, other = make_ext4(loops), make_swap(loops)
    assert storlab_run("--target", dev, "--target", other, "--rw", "write", "--size", "1m",
                       "--allow-destroy", dev) == 2
    assert f"refusing to write to {other}: swap" in capsys.readouterr().err
    assert storlab_run("--target", dev, "--rw", "write", "--size", "1m", "--allow-destroy", dev) == 0


# --- what broke ---------------------------------------------------------------------------------

def test_per_thread_names_that_are_symlinks_to_formatted_devices_are_refused(loops, tmp_path, capsys):
    ext4, xfs = make_ext4(loops), make_xfs(loops)
    base = tmp_path / "t"
    Path(f"{base}.0").symlink_to(ext4)
    Path(f"{base}.1").symlink_to(xfs)
    hashes = first_mib_sha(ext4), first_mib_sha(xfs)
    assert storlab_run("--target", str(base), "--files", "per_thread", "--threads", "2", "--rw", "write",
                       "--size", "1m") == 2
    assert f"refusing to write to {base}.0: ext4 file system" in capsys.readouterr().err
    assert (first_mib_sha(ext4), first_mib_sha(xfs)) == hashes


def test_per_rank_names_that_are_symlinks_to_formatted_devices_are_refused(loops, tmp_path):
    # Two ranks sharing PATH with files=per_thread: rank 1 opens PATH.1, which the gate must check.
    dev = make_ext4(loops)
    base = tmp_path / "t"
    Path(f"{base}.1").symlink_to(dev)
    job = resolve_job({"target": [str(base)], "files": "per_thread", "rw": "write", "size": "1m",
                       "no_store": True})
    rank1 = rewrite_job(job, rank=1, nodes=["n", "n"])
    with pytest.raises(TargetRefused, match=f"refusing to write to {base}.1: ext4 file system"):
        checked_spec(rank1.phases[0], ())


def test_symlink_re_pointed_at_a_formatted_device_between_phases_is_refused(loops, tmp_path):
    dev = make_ext4(loops)
    before = first_mib_sha(dev)
    plain = tmp_path / "plain.dat"
    plain.write_bytes(bytes(MiB))
    link = tmp_path / "link"
    link.symlink_to(plain)

    class RePoint(PhaseHooks):
        def after_end(self, phase, run, result):
            link.unlink()
            link.symlink_to(dev)

    phases = [{"name": "one", "groups": [{"name": "g", "options": {}}]},
              {"name": "two", "groups": [{"name": "g", "options": {}}]}]
    job = resolve_job({"target": [str(link)], "rw": "write", "size": "1m", "no_store": True}, phases=phases)
    with pytest.raises(TargetRefused, match=f"refusing to write to {link}: ext4 file system"):
        run_job(job, hooks=RePoint())
    assert first_mib_sha(dev) == before


def test_symlink_re_pointed_between_check_and_open_is_refused_by_the_engine(loops, tmp_path):
    dev = make_ext4(loops)
    blank = make_dos(loops)   # any other device: checked as one device, then the link names another
    before = first_mib_sha(dev)
    link = tmp_path / "link"
    link.symlink_to(blank)
    job = resolve_job({"target": [str(link)], "rw": "write", "size": "1m", "no_store": True,
                       "allow_destroy": (blank,)})
    spec = checked_spec(job.phases[0], (blank,))
    assert spec["checked"] == [{"path": str(link), "kind": "block", "rdev": os.stat(blank).st_rdev}]
    link.unlink()
    link.symlink_to(dev)
    with pytest.raises(_core.CoreError) as e:
        _core.PhaseRun(json.dumps(spec))
    kind, message = e.value.args
    assert kind == "target" and "changed between the check and the open" in message
    assert first_mib_sha(dev) == before


def test_mistyped_device_name_creates_no_file_in_dev(capsys):
    skip_unless_root_and_loop()
    path = "/dev/LOOP1"
    if os.path.exists(path):
        pytest.skip(f"{path} exists on this host")
    try:
        for rw in ("write", "read"):
            assert storlab_run("--target", path, "--rw", rw, "--size", "8m") == 2
            assert "storlab creates no regular files there" in capsys.readouterr().err
            assert not os.path.exists(path)
    finally:
        if os.path.isfile(path):
            os.unlink(path)


def test_regular_files_in_dev_shm_are_still_allowed(tmp_path):
    if not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat("/dev").st_dev:
        pytest.skip("/dev/shm is not a separate file system here")
    path = f"/dev/shm/storlab-safety-{os.getpid()}.dat"
    try:
        assert storlab_run("--target", path, "--rw", "write", "--size", "1m") == 0
    finally:
        if os.path.exists(path):
            os.unlink(path)


def test_loop_device_backing_another_loop_device_counts_as_held(loops, capsys):
    lower = loops.attach(loops.image("lower.img", 16 * MiB))
    upper = loops.attach(lower)
    before = first_mib_sha(lower)
    with pytest.raises(TargetRefused) as e:
        check_write_allowed(lower, allow_destroy=[lower])
    assert str(e.value) == (f"refusing to write to {lower}: {lower} backs the loop device "
                            f"{os.path.basename(upper)}; detach it first (losetup -d); "
                            f"--allow-destroy does not lift this refusal")
    assert storlab_run("--target", lower, "--rw", "write", "--size", "1m", "--allow-destroy", lower) == 2
    assert "backs the loop device" in capsys.readouterr().err
    assert first_mib_sha(lower) == before


def test_mounted_device_is_not_written_even_when_named_in_allow_destroy(loops, capsys):
    dev = make_ext4(loops)
    mnt = loops.mount(dev, "mnt")
    before = first_mib_sha(dev)
    assert storlab_run("--target", dev, "--rw", "write", "--size", "1m", "--allow-destroy", dev) == 2
    assert f"it is mounted at {mnt} (ext4)" in capsys.readouterr().err
    assert first_mib_sha(dev) == before



def test_job_file_targets_are_checked_in_every_phase(loops, tmp_path, capsys):
    dev = make_ext4(loops)
    before = first_mib_sha(dev)
    job = tmp_path / "job.toml"
    job.write_text(f'size = "1m"\n[[phase]]\nname = "r"\nrw = "read"\ntarget = ["{dev}"]\n'
                   f'[[phase]]\nname = "w"\nrw = "write"\ntarget = ["{dev}"]\n')
    assert storlab_run(str(job)) == 2
    assert f"refusing to write to {dev}: ext4 file system" in capsys.readouterr().err
    assert first_mib_sha(dev) == before
