"""The testbed: throttled loop devices on tmpfs assembled into real stacks (btrfs RAID, partitions,
xfs/ext4 with a chosen stripe geometry), storlab run inside the throttling cgroup, everything removed
afterwards even after a failure or Ctrl-C.

    with Testbed() as bed:
        members = bed.add_devices(2, 256 << 20, Limits.both(bps=20 << 20, iops=500))
        mnt = bed.btrfs(members, "raid0")
        doc = bed.run_storlab(["--target", f"{mnt}/f", "--rw", "read", ...])

Shared limits (an adapter or a bus): `add_shared` makes one more loop device on tmpfs, throttled,
with a file system on it; members created with `shared=` are loop devices over files on that file
system, so their I/O crosses the shared device as well. Loop I/O is charged to the cgroup of the
process that issued it, so one cgroup holds every limit.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .throttle import Limits, Throttle, ThrottleUnavailable, detect_throttle, dev_numbers

__all__ = ["Testbed", "SharedBus", "TestbedError", "REPO_ROOT", "BTRFS_LEVELS", "testbed_unavailable"]

REPO_ROOT = Path(__file__).resolve().parents[2]
BTRFS_LEVELS = ("single", "raid0", "raid1", "raid10", "raid5", "raid6")


class TestbedError(RuntimeError):
    """A testbed step failed; the message names the command and its error output."""
    __test__ = False        # not a pytest test class despite the name


def testbed_unavailable() -> str | None:
    """Why a testbed cannot be built here (None when it can): root, losetup, tmpfs, a throttle."""
    if os.geteuid() != 0:
        return "needs root for loop devices and cgroups"
    if shutil.which("losetup") is None or not os.path.exists("/dev/loop-control"):
        return "losetup or /dev/loop-control not available"
    if not os.path.isdir("/dev/shm"):
        return "no /dev/shm (tmpfs) for the backing files"
    try:
        detect_throttle("probe")
    except ThrottleUnavailable as e:
        return str(e)
    return None


testbed_unavailable.__test__ = False      # not a pytest test despite the name


def _run(cmd: list[str], **kwargs) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if r.returncode != 0:
        lines = [line for line in (r.stderr or r.stdout).splitlines() if line.strip()]
        raise TestbedError(f"{' '.join(cmd)}: {lines[0].strip() if lines else f'exit {r.returncode}'}")
    return r.stdout


@dataclass
class SharedBus:
    """A throttled loop device carrying a file system whose files back member loop devices."""
    name: str
    device: str
    mountpoint: str
    limits: Limits
    members: list[str] = field(default_factory=list)


class Testbed:
    """Context manager owning every loop device, mount, file and the cgroup it creates."""
    __test__ = False        # not a pytest test class despite the name

    def __init__(self, name: str | None = None, backing_dir: str = "/dev/shm",
                 cgroup_root: str = "/sys/fs/cgroup"):
        self.name = name or f"storlab-testbed-{os.getpid()}"
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{self.name}-", dir=backing_dir))
        self.throttle: Throttle = detect_throttle(self.name, cgroup_root)
        self.loops: list[str] = []           # attached, in order (detached in reverse)
        self.mounts: list[str] = []          # mounted, in order (unmounted in reverse)
        self.limits: dict[str, Limits] = {}  # device -> its own limits
        self.buses: dict[str, SharedBus] = {}
        self.children: list[subprocess.Popen] = []
        self._cgroup_made = False
        self._term_handler_before = None

    # -- lifetime -------------------------------------------------------------------------------
    def __enter__(self) -> "Testbed":
        # SIGTERM (a timeout, a job scheduler) would end the process without unwinding this block,
        # leaving its loop devices and mounts: while it lives and nothing else handles SIGTERM, the
        # signal raises SystemExit here, and __exit__ tears down
        if _main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self._term_handler_before = signal.signal(signal.SIGTERM, _exit_on_term)
        try:
            self.throttle.create()
        except FileExistsError:
            self._restore_term_handler()
            raise TestbedError(f"cgroup {self.throttle.path} exists; a previous testbed was not removed "
                               f"(rmdir it, or pass another name)") from None
        except BaseException:
            self._restore_term_handler()
            raise
        self._cgroup_made = True
        return self

    def _restore_term_handler(self) -> None:
        if self._term_handler_before is not None:
            signal.signal(signal.SIGTERM, self._term_handler_before)
            self._term_handler_before = None

    def __exit__(self, *exc) -> None:
        try:
            self.teardown()
        finally:
            self._restore_term_handler()

    def teardown(self) -> list[str]:
        """Remove everything, in reverse order; every step is tried, the problems are returned."""
        problems: list[str] = []
        # Ctrl-C during teardown would leave devices behind: hold it until the end
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main_thread() else None
        try:
            for child in self.children:
                if child.poll() is None:
                    child.kill()
                    child.wait()
            self.children.clear()
            for mnt in reversed(self.mounts):
                r = subprocess.run(["umount", mnt], capture_output=True, text=True)
                if r.returncode != 0:
                    r = subprocess.run(["umount", "-l", mnt], capture_output=True, text=True)
                    if r.returncode != 0:
                        problems.append(f"umount {mnt}: {r.stderr.strip()}")
            self.mounts.clear()
            for dev in reversed(self.loops):
                r = subprocess.run(["losetup", "-d", dev], capture_output=True, text=True)
                if r.returncode != 0:
                    problems.append(f"losetup -d {dev}: {r.stderr.strip()}")
            self.loops.clear()
            if self._cgroup_made:
                try:
                    self.throttle.remove()
                    self._cgroup_made = False
                except OSError as e:
                    problems.append(f"rmdir {self.throttle.path}: {e}")
            shutil.rmtree(self.workdir, ignore_errors=True)
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        return problems

    # -- devices --------------------------------------------------------------------------------
    def _backing_file(self, directory: Path, size_bytes: int, label: str) -> Path:
        path = directory / f"{label}.img"
        with open(path, "wb") as f:
            f.truncate(size_bytes)
        return path

    def attach(self, backing: str | os.PathLike[str], direct_io: bool = True, partscan: bool = False) -> str:
        """A loop device over a file; detached at teardown."""
        cmd = ["losetup", "-f", "--show"]
        if direct_io:
            cmd.append("--direct-io=on")
        if partscan:
            cmd.append("-P")
        dev = _run(cmd + [str(backing)]).strip()
        self.loops.append(dev)
        return dev

    def set_limits(self, device: str, limits: Limits) -> None:
        if not limits.is_empty():
            self.throttle.limit(dev_numbers(device), limits)
        self.limits[device] = limits

    def add_shared(self, name: str, limits: Limits, size_bytes: int) -> SharedBus:
        """A shared limit: a throttled loop device with ext4 on it; members made with shared=name
        are backed by files on it (size_bytes must hold them all, plus ~5 % for ext4)."""
        if name in self.buses:
            raise TestbedError(f"shared limit {name!r} exists")
        backing = self._backing_file(self.workdir, size_bytes, f"bus-{name}")
        dev = self.attach(backing)
        _run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev])
        mnt = self.mount(dev, "ext4", label=f"bus-{name}")
        self.set_limits(dev, limits)
        bus = SharedBus(name, dev, mnt, limits)
        self.buses[name] = bus
        return bus

    def add_devices(self, count: int, size_bytes: int, limits: Limits | list[Limits] | None = None,
                    shared: str | None = None, partscan: bool = False) -> list[str]:
        """count loop devices with O_DIRECT backing (tmpfs files, or files on a shared bus), each
        with its own limits (one Limits for all, or a list of one per device)."""
        per_device = limits if isinstance(limits, list) else [limits or Limits()] * count
        if len(per_device) != count:
            raise TestbedError(f"limits: {len(per_device)} given for {count} devices")
        directory = self.workdir if shared is None else Path(self.buses[shared].mountpoint)
        devices = []
        for lim in per_device:
            label = f"member-{len(self.limits)}"
            backing = self._backing_file(directory, size_bytes, label)
            if shared is not None:      # allocate now: ext4 must not allocate under the throttle
                _run(["fallocate", "-l", str(size_bytes), str(backing)])
            dev = self.attach(backing, partscan=partscan)
            self.set_limits(dev, lim)
            if shared is not None:
                self.buses[shared].members.append(dev)
            devices.append(dev)
        return devices

    # -- assembly -------------------------------------------------------------------------------
    def mount(self, device: str, fstype: str, options: str | None = None, label: str | None = None) -> str:
        mnt = self.workdir / f"mnt-{label or os.path.basename(device)}"
        mnt.mkdir()
        cmd = ["mount", "-t", fstype] + (["-o", options] if options else []) + [device, str(mnt)]
        _run(cmd)
        self.mounts.append(str(mnt))
        return str(mnt)

    def btrfs(self, devices: list[str], level: str, metadata: str | None = None,
              options: str | None = "nodatacow") -> str:
        """mkfs.btrfs -d LEVEL -m LEVEL over the devices and mount it (nodatacow by default:
        overwrites land in place, with no checksum or copy-on-write traffic of their own)."""
        if level not in BTRFS_LEVELS:
            raise TestbedError(f"btrfs level must be one of {', '.join(BTRFS_LEVELS)}, got {level!r}")
        _run(["mkfs.btrfs", "-q", "-f", "-d", level, "-m", metadata or level, *devices])
        return self.mount(devices[0], "btrfs", options, label=f"btrfs-{os.path.basename(devices[0])}")

    def mkfs_xfs(self, device: str, su: int | None = None, sw: int | None = None) -> None:
        """xfs with the data stripe unit and width (bytes, count); both or neither."""
        cmd = ["mkfs.xfs", "-q", "-f"]
        if (su is None) != (sw is None):
            raise TestbedError("xfs stripe: give su and sw together")
        if su is not None:
            cmd += ["-d", f"su={su // 1024}k,sw={sw}"]
        _run(cmd + [device])

    def mkfs_ext4(self, device: str, stride: int | None = None, stripe_width: int | None = None,
                  block: int = 4096) -> None:
        """ext4 with stride and stripe_width in file-system blocks."""
        extended = ["lazy_itable_init=0", "lazy_journal_init=0"]
        if stride is not None:
            extended.append(f"stride={stride}")
        if stripe_width is not None:
            extended.append(f"stripe_width={stripe_width}")
        _run(["mkfs.ext4", "-q", "-F", "-b", str(block), "-E", ",".join(extended), device])

    def partition(self, device: str, sizes_bytes: list[int]) -> list[str]:
        """A GPT with one partition per size (1 MiB aligned); the device must be attached with
        partscan=True. Returns the partition nodes."""
        lines = ["label: gpt"] + [f"size={s // 512}" for s in sizes_bytes]
        _run(["sfdisk", "-q", device], input="\n".join(lines) + "\n")
        _run(["partx", "-u", device]) if not os.path.exists(f"{device}p1") else None
        parts = [f"{device}p{i}" for i in range(1, len(sizes_bytes) + 1)]
        missing = [p for p in parts if not os.path.exists(p)]
        if missing:
            raise TestbedError(f"partition nodes missing after sfdisk: {', '.join(missing)}")
        return parts

    def file_device(self, path: str, size_bytes: int) -> str:
        """A loop device over a file on a mounted testbed file system (e.g. to put xfs on top of a
        btrfs RAID 0: the upper loop is not throttled, the members below it are). The file is
        written once outside the cgroup, so reads reach the members."""
        self.fill(path, size_bytes)
        return self.attach(path)

    def fill(self, path: str, size_bytes: int, block: int = 1 << 20) -> None:
        """Write size_bytes of non-zero data with O_DIRECT from this (unthrottled) process, so that
        later reads reach the devices (a hole or an unwritten extent reads as zeros without I/O)."""
        _run(["dd", "if=/dev/urandom", f"of={path}", f"bs={block}", f"count={size_bytes // block}",
              "oflag=direct", "conv=fsync", "status=none"])

    # -- running --------------------------------------------------------------------------------
    def popen(self, cmd: list[str], **kwargs) -> subprocess.Popen:
        """Start a command inside the throttling cgroup (it joins before exec)."""
        procs = str(self.throttle.path / "cgroup.procs")

        def join() -> None:
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        child = subprocess.Popen(cmd, preexec_fn=join, **kwargs)
        self.children.append(child)
        return child

    def run_storlab(self, args: list[str], timeout_s: float = 600) -> dict:
        """`python -m storlab.cli.main run ARGS --json OUT --no-store` in the cgroup; the document."""
        return self.storlab_command(["run", *args], timeout_s)

    def storlab_command(self, argv: list[str], timeout_s: float = 600) -> dict:
        """`python -m storlab.cli.main ARGV --json OUT --no-store --quiet` in the cgroup; the document."""
        out = self.workdir / f"{argv[0]}-{len(self.children)}.json"
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python"))
        cmd = [sys.executable, "-m", "storlab.cli.main", *argv, "--json", str(out), "--no-store", "--quiet"]
        child = self.popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, err = child.communicate(timeout=timeout_s)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        if child.returncode != 0:
            raise TestbedError(f"storlab {' '.join(argv)}: exit {child.returncode}: {err.strip()[-400:]}")
        return json.loads(out.read_text())


def _exit_on_term(signum, frame):   # noqa: ARG001 - a signal handler's signature
    raise SystemExit(128 + signum)


def _main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()
