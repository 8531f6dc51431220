"""The testbed library (tests/testbed): the cgroup v1 and v2 writing paths against a temporary
directory laid out like /sys/fs/cgroup, and on this host a throttled stack that is removed
completely, also when the body fails."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from testbed import BlkioV1, IoMaxV2, Limits, Testbed, ThrottleUnavailable, detect_throttle, testbed_unavailable
from testbed.stacks import build_stack

MiB = 1 << 20


def _v2_root(tmp_path, controllers="cpu io memory"):
    (tmp_path / "cgroup.controllers").write_text(controllers + "\n")
    (tmp_path / "cgroup.subtree_control").write_text("cpu\n")
    (tmp_path / "cgroup.procs").write_text("")
    return tmp_path


def test_v2_is_detected_and_writes_one_io_max_line(tmp_path):
    root = _v2_root(tmp_path)
    throttle = detect_throttle("tb", root)
    assert isinstance(throttle, IoMaxV2)
    # the fake subtree_control is a plain file: the write replaces it (the kernel would add io)
    throttle.create()
    assert (root / "cgroup.subtree_control").read_text() == "+io\n"
    throttle.limit("7:3", Limits(read_bps=20 * MiB, write_iops=300))
    assert (root / "tb" / "io.max").read_text() == "7:3 rbps=20971520 wbps=max riops=max wiops=300\n"
    throttle.add_pid(1234)
    assert (root / "tb" / "cgroup.procs").read_text() == "1234\n"


def test_v2_without_the_io_controller_is_refused_with_the_reason(tmp_path):
    root = _v2_root(tmp_path, controllers="cpu memory")
    with pytest.raises(ThrottleUnavailable, match="without the io controller"):
        detect_throttle("tb", root)


def test_v1_writes_one_file_per_limit(tmp_path):
    blkio = tmp_path / "blkio"
    blkio.mkdir()
    (blkio / "blkio.throttle.read_bps_device").write_text("")
    throttle = detect_throttle("tb", tmp_path)
    assert isinstance(throttle, BlkioV1)
    throttle.create()
    throttle.limit("7:0", Limits.both(bps=10 * MiB, iops=500))
    for key, value in (("read_bps", 10 * MiB), ("write_bps", 10 * MiB), ("read_iops", 500), ("write_iops", 500)):
        assert (blkio / "tb" / f"blkio.throttle.{key}_device").read_text() == f"7:0 {value}\n"


def test_no_throttle_names_what_is_missing(tmp_path):
    with pytest.raises(ThrottleUnavailable, match="neither cgroup v2 io.max nor v1 blkio.throttle"):
        detect_throttle("tb", tmp_path)


def test_limits_refuse_a_zero_rate():
    with pytest.raises(ValueError, match="read_bps must be a positive whole number"):
        Limits(read_bps=0)


def _skip_without_testbed():
    why = testbed_unavailable()
    if why:
        pytest.skip(why)


def _leftovers(bed: Testbed) -> list[str]:
    listed = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    left = [line for line in listed.splitlines() if str(bed.workdir) in line]
    if bed.throttle.path.exists():
        left.append(str(bed.throttle.path))
    if bed.workdir.exists():
        left.append(str(bed.workdir))
    with open("/proc/mounts") as f:
        left += [line for line in f if str(bed.workdir) in line]
    return left


@pytest.mark.root
@pytest.mark.loop
def test_teardown_after_a_failure_leaves_no_device_mount_or_cgroup():
    _skip_without_testbed()
    with pytest.raises(RuntimeError, match="body failed"):
        with Testbed() as bed:
            bed.add_shared("bus", Limits.both(bps=40 * MiB), 300 * MiB)
            members = bed.add_devices(2, 128 * MiB, Limits.both(bps=20 * MiB), shared="bus")
            bed.btrfs(members, "raid1")
            assert len(bed.loops) == 3 and len(bed.mounts) == 2
            raise RuntimeError("body failed")
    assert _leftovers(bed) == []


@pytest.mark.root
@pytest.mark.loop
def test_storlab_runs_inside_the_throttle_and_partitions_are_made(tmp_path):
    _skip_without_testbed()
    with Testbed() as bed:
        (dev,) = bed.add_devices(1, 64 * MiB, Limits(read_iops=200), partscan=True)
        parts = bed.partition(dev, [16 * MiB, 16 * MiB])
        assert all(os.path.exists(p) for p in parts)
        bed.mkfs_ext4(parts[0], stride=16, stripe_width=32)
        tuned = subprocess.run(["tune2fs", "-l", parts[0]], capture_output=True, text=True).stdout
        assert "RAID stride:              16" in tuned and "RAID stripe width:        32" in tuned, tuned
        # a short random read at QD 1: 200 IOPS cap, so about 200 x 2 s (+ the first slice's burst)
        doc = bed.run_storlab(["--target", parts[1], "--allow-destroy", parts[1], "--rw", "randread",
                               "--bs", "4KiB", "--time", "2s", "--direct"])
        iops = doc["phases"][0]["read"]["iops"]
        assert 150 <= iops <= 260, iops
    assert _leftovers(bed) == []


@pytest.mark.root
@pytest.mark.loop
def test_xfs_over_btrfs_raid0_gets_the_stripe_geometry_asked_for():
    _skip_without_testbed()
    with Testbed() as bed:
        stack = build_stack(bed, [Limits()] * 2, 400 * MiB, btrfs="raid0", fs="xfs", su=64 << 10, sw=2)
        info = subprocess.run(["xfs_info", os.path.dirname(stack.target)], capture_output=True, text=True).stdout
        assert "sunit=16" in info and "swidth=32 blks" in info, info


@pytest.mark.root
@pytest.mark.loop
@pytest.mark.slow
def test_a_shared_limit_caps_the_members_together():
    # two members of 20 MiB/s each behind one shared 20 MiB/s limit: btrfs RAID 0 reads get the
    # shared 20 MiB/s, not the members' 40 (loop I/O is charged to the issuing cgroup)
    _skip_without_testbed()
    with Testbed() as bed:
        stack = build_stack(bed, [Limits.both(bps=20 * MiB)] * 2, 256 * MiB, btrfs="raid0", shared_bps=20 * MiB)
        doc = bed.run_storlab(["--target", stack.target, "--rw", "read", "--bs", "1MiB", "--engine", "psync",
                               "--direct", "--ramp", "1s", "--time", "4s"])
        bw = doc["phases"][0]["read"]["bw_bytes"]
        assert 17 * MiB <= bw <= 23 * MiB, bw / MiB


@pytest.mark.root
@pytest.mark.loop
@pytest.mark.parametrize("level, members", [("raid5", 3), ("raid6", 4), ("raid10", 4)])
def test_btrfs_profiles_are_the_ones_asked_for(level, members):
    _skip_without_testbed()
    with Testbed() as bed:
        devices = bed.add_devices(members, 160 * MiB)
        mnt = bed.btrfs(devices, level)
        df = subprocess.run(["btrfs", "filesystem", "df", mnt], capture_output=True, text=True).stdout
        assert f"Data, {level.upper()}" in df and f"Metadata, {level.upper()}" in df, df


@pytest.mark.root
@pytest.mark.loop
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_cli_removes_its_stack_when_interrupted(signum):
    # `python -m tests.testbed --hold` builds, prints its cgroup and waits; a signal tears it down
    _skip_without_testbed()
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-m", "tests.testbed", "--devices", "2", "--size", "160MiB",
                             "--bps", "20MiB", "--btrfs", "raid1", "--hold"], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("testbed: members"), (line, proc.stderr.read() if proc.poll() is not None else "")
    cgroup = line.rsplit("cgroup ", 1)[1].strip()
    workdir = line.split("target ", 1)[1].split("/mnt-", 1)[0]
    assert os.path.isdir(cgroup) and os.path.isdir(workdir)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert not os.path.exists(cgroup) and not os.path.exists(workdir)
    with open("/proc/mounts") as f:
        assert workdir not in f.read()
    assert workdir not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout


@pytest.mark.root
@pytest.mark.loop
def test_a_program_ended_by_sigterm_inside_a_testbed_leaves_nothing():
    # a benchmark stopped by `timeout` left its btrfs mount and loop devices: SIGTERM killed Python
    # without unwinding `with Testbed()`. While a testbed lives, SIGTERM raises SystemExit instead
    _skip_without_testbed()
    root = Path(__file__).resolve().parents[1]
    program = ("import sys, time\n"
               "sys.path[:0] = ['tests']\n"
               "from testbed import Testbed\n"
               "with Testbed() as bed:\n"
               "    members = bed.add_devices(2, 160 << 20)\n"
               "    mnt = bed.btrfs(members, 'raid1')\n"
               "    print(bed.workdir, flush=True)\n"
               "    time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", program], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    workdir = proc.stdout.readline().strip()
    assert workdir and os.path.isdir(workdir), proc.stderr.read() if proc.poll() is not None else workdir
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert not os.path.exists(workdir)
    with open("/proc/mounts") as f:
        assert workdir not in f.read()
    assert workdir not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    # a testbed that ends normally gives SIGTERM back its handler of before
    before = signal.getsignal(signal.SIGTERM)
    with Testbed():
        if before is signal.SIG_DFL:
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.root
@pytest.mark.loop
def test_a_testbed_that_cannot_start_gives_sigterm_back():
    # its cgroup is left from an earlier testbed: the refusal restores SIGTERM's handler of before
    _skip_without_testbed()
    from testbed import TestbedError
    name = f"storlab-testbed-restart-{os.getpid()}"
    earlier, again = Testbed(name=name), Testbed(name=name)
    earlier.throttle.create()
    try:
        before = signal.getsignal(signal.SIGTERM)
        with pytest.raises(TestbedError, match="exists"):
            again.__enter__()
        assert signal.getsignal(signal.SIGTERM) is before
    finally:
        earlier.throttle.remove()
        again.teardown()
        earlier.teardown()
