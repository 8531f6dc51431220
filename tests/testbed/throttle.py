"""Per-device I/O limits for the testbed: cgroup v1 blkio.throttle or cgroup v2 io.max.

A `Throttle` owns one dedicated cgroup; `limit(dev, Limits)` caps a block device (by MAJ:MIN) for the
processes placed in that cgroup with `add_pid`. The cgroup root is a parameter, so the writing path
of both versions can be exercised against a temporary directory laid out like /sys/fs/cgroup.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Limits", "Throttle", "BlkioV1", "IoMaxV2", "detect_throttle", "ThrottleUnavailable", "dev_numbers"]

CGROUP_ROOT = "/sys/fs/cgroup"


class ThrottleUnavailable(RuntimeError):
    """No cgroup I/O throttle on this host (the message says why)."""


@dataclass(frozen=True)
class Limits:
    """Caps of one device; None = unlimited. Bandwidth in bytes/s, IOPS in operations/s."""
    read_bps: int | None = None
    write_bps: int | None = None
    read_iops: int | None = None
    write_iops: int | None = None

    @classmethod
    def both(cls, bps: int | None = None, iops: int | None = None) -> "Limits":
        return cls(bps, bps, iops, iops)

    def is_empty(self) -> bool:
        return all(v is None for v in (self.read_bps, self.write_bps, self.read_iops, self.write_iops))

    def __post_init__(self) -> None:
        for name in ("read_bps", "write_bps", "read_iops", "write_iops"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"limits: {name} must be a positive whole number or None, got {value!r}")


def dev_numbers(device: str) -> str:
    """'MAJ:MIN' of a block device node."""
    st = os.stat(device)
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


class Throttle:
    """One dedicated cgroup with per-device limits (see BlkioV1 and IoMaxV2)."""
    version = 0

    def __init__(self, root: str | os.PathLike[str], name: str):
        self.root = Path(root)
        self.name = name
        self.path = self.controller_dir / name
        self.limited: list[str] = []

    @property
    def controller_dir(self) -> Path:
        raise NotImplementedError

    def create(self) -> None:
        self.path.mkdir(exist_ok=False)

    def limit(self, devnum: str, limits: Limits) -> None:
        raise NotImplementedError

    def read_bytes(self, devnum: str) -> int | None:
        """Bytes the device has read for this cgroup's processes so far (None: not counted)."""
        raise NotImplementedError

    def add_pid(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except FileNotFoundError:
            return []

    def remove(self, timeout_s: float = 10.0) -> None:
        """Move any process left back to the root cgroup, then remove the cgroup directory."""
        if not self.path.exists():
            return
        deadline = time.monotonic() + timeout_s
        while True:
            for pid in self.pids():
                try:
                    (self.controller_dir / "cgroup.procs").write_text(f"{pid}\n")
                except OSError:     # already exited
                    pass
            try:
                self.path.rmdir()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


class BlkioV1(Throttle):
    """cgroup v1: blkio.throttle.{read,write}_{bps,iops}_device, one 'MAJ:MIN value' line each."""
    version = 1

    @property
    def controller_dir(self) -> Path:
        return self.root / "blkio"

    def limit(self, devnum: str, limits: Limits) -> None:
        for key, value in (("read_bps", limits.read_bps), ("write_bps", limits.write_bps),
                           ("read_iops", limits.read_iops), ("write_iops", limits.write_iops)):
            if value is not None:
                (self.path / f"blkio.throttle.{key}_device").write_text(f"{devnum} {value}\n")
        self.limited.append(devnum)

    def read_bytes(self, devnum: str) -> int | None:
        for line in (self.path / "blkio.throttle.io_service_bytes").read_text().splitlines():
            words = line.split()
            if len(words) == 3 and words[0] == devnum and words[1] == "Read":
                return int(words[2])
        return None


class IoMaxV2(Throttle):
    """cgroup v2: one io.max line 'MAJ:MIN rbps=.. wbps=.. riops=.. wiops=..' (max = unlimited);
    the io controller must be enabled in the parent's cgroup.subtree_control."""
    version = 2

    @property
    def controller_dir(self) -> Path:
        return self.root

    def create(self) -> None:
        control = self.root / "cgroup.subtree_control"
        if "io" not in control.read_text().split():
            control.write_text("+io\n")
        super().create()

    def limit(self, devnum: str, limits: Limits) -> None:
        def word(value: int | None) -> str:
            return "max" if value is None else str(value)
        line = (f"{devnum} rbps={word(limits.read_bps)} wbps={word(limits.write_bps)} "
                f"riops={word(limits.read_iops)} wiops={word(limits.write_iops)}\n")
        (self.path / "io.max").write_text(line)
        self.limited.append(devnum)

    def read_bytes(self, devnum: str) -> int | None:
        for line in (self.path / "io.stat").read_text().splitlines():
            words = line.split()
            if words and words[0] == devnum:
                fields = dict(w.split("=", 1) for w in words[1:] if "=" in w)
                return int(fields["rbytes"]) if "rbytes" in fields else None
        return None


def detect_throttle(name: str, root: str | os.PathLike[str] = CGROUP_ROOT) -> Throttle:
    """The throttle this host offers: cgroup v2 when the unified root lists the io controller,
    else v1 blkio with throttle files; ThrottleUnavailable otherwise."""
    base = Path(root)
    controllers = base / "cgroup.controllers"
    if controllers.exists():
        if "io" in controllers.read_text().split():
            return IoMaxV2(base, name)
        raise ThrottleUnavailable(f"{root}: cgroup v2 without the io controller")
    if (base / "blkio" / "blkio.throttle.read_bps_device").exists():
        return BlkioV1(base, name)
    raise ThrottleUnavailable(f"{root}: neither cgroup v2 io.max nor v1 blkio.throttle is available")
