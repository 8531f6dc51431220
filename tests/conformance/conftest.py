"""Fixtures of the conformance suite: a case's target (a tmpfs file, or a loop device, throttled by the
blkio controller when the case asks), both tools run on it once, and the results kept for every
check of that case. A case whose latencies are compared also runs both tools in turn LAT_ROUNDS
times without tracing, so the comparison can take the median over rounds: one run lasts tens of
milliseconds, and on a loaded host a preemption can land on either tool's run.

A case runs at most once per session: its results are plain data, so the target (and the loop
device, detached by tests/conftest.py's fixture) need not outlive the first test that ran it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Callable

import pytest

from .cases import EXT4, LAT_MATCH, LOOP, TMPFS, Case
from .tools import ToolFailed, ToolRun, missing_tools, run_fio, run_storlab

BLKIO = "/sys/fs/cgroup/blkio"
LAT_ROUNDS = 5       # untraced (fio, storlab) pairs of a LAT_MATCH case: the median ignores 2 bad ones


@dataclass
class CaseRuns:
    case: Case
    fio: ToolRun
    storlab: ToolRun
    # LAT_MATCH cases: (fio, storlab) run back to back, untraced (strace slows every system call)
    latency_rounds: list[tuple[ToolRun, ToolRun]] = field(default_factory=list)

    @property
    def both(self) -> tuple[ToolRun, ToolRun]:
        return self.fio, self.storlab


_RUNS: dict[str, CaseRuns | str] = {}     # case name -> its runs, or why they failed


def _fill(path: str, size: int) -> None:
    """A target file of SIZE bytes of random data (one random MiB repeated)."""
    chunk = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for done in range(0, size, len(chunk)):
            f.write(chunk[: min(len(chunk), size - done)])


class _Throttle:
    """A cgroup v1 blkio group limiting DEVICE to BPS bytes/s in each direction."""

    def __init__(self, device: str, bps: int):
        if not os.path.exists(os.path.join(BLKIO, "blkio.throttle.read_bps_device")):
            pytest.skip(f"cgroup v1 blkio controller with throttling not mounted at {BLKIO}")
        self.dir = tempfile.mkdtemp(prefix="storlab-conformance-", dir=BLKIO)
        rdev = os.stat(device).st_rdev
        rule = f"{os.major(rdev)}:{os.minor(rdev)} {bps}"
        for name in ("blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"):
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(rule)

    def remove(self) -> None:
        os.rmdir(self.dir)      # the tools have exited: the group is empty


def _mount_ext4(request: pytest.FixtureRequest, scratch: str, file_bytes: int) -> str:
    """A fresh ext4 on a loop device, mounted in SCRATCH, with room for a FILE_BYTES file."""
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 not installed")
    device = request.getfixturevalue("loop_device")(file_bytes + (32 << 20), backing_dir=scratch)
    subprocess.run(["mkfs.ext4", "-q", "-F", device], check=True, capture_output=True)
    mount_point = os.path.join(scratch, "mnt")
    os.mkdir(mount_point)
    r = subprocess.run(["mount", device, mount_point], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount ext4 on {device}: {r.stderr.strip()}")
    return mount_point


def _run_case(case: Case, request: pytest.FixtureRequest, scratch: str) -> CaseRuns:
    why = missing_tools(trace=case.traced)
    if why:
        pytest.skip(why)
    mount_point = None
    if case.where == LOOP:
        target = request.getfixturevalue("loop_device")(case.target_bytes, backing_dir=scratch)
    elif case.where == EXT4:
        mount_point = _mount_ext4(request, scratch, case.target_bytes)
        target = os.path.join(mount_point, "target")
        _fill(target, case.target_bytes)
    else:
        target = os.path.join(scratch, "target")
        _fill(target, case.target_bytes)
    throttle = _Throttle(target, case.throttle_bps) if case.throttle_bps else None
    cgroup = throttle.dir if throttle else None
    try:
        def both(suffix: str, trace: bool) -> tuple[ToolRun, ToolRun]:
            runs = {}
            for tool, run in (("fio", run_fio), ("storlab", run_storlab)):
                workdir = os.path.join(scratch, tool + suffix)
                os.mkdir(workdir)
                args = case.fio if tool == "fio" else case.storlab
                runs[tool] = run(args, target, workdir, trace=trace, cgroup_dir=cgroup)
            return runs["fio"], runs["storlab"]

        result = CaseRuns(case, *both("", case.traced))
        if LAT_MATCH in case.checks:
            if not case.traced:
                result.latency_rounds.append((result.fio, result.storlab))
            while len(result.latency_rounds) < LAT_ROUNDS:
                result.latency_rounds.append(both(f"-lat{len(result.latency_rounds)}", False))
        return result
    finally:
        if throttle:
            throttle.remove()
        if mount_point:
            subprocess.run(["umount", mount_point], capture_output=True)   # before the loop detaches


@pytest.fixture
def case_runs(request, shm_dir) -> Callable[[Case], CaseRuns]:
    """Both tools' results for a case, run on first use and kept for the session."""
    def get(case: Case) -> CaseRuns:
        if case.name not in _RUNS:
            scratch = os.path.join(shm_dir, case.name)
            os.mkdir(scratch)
            try:
                _RUNS[case.name] = _run_case(case, request, scratch)
            except (ToolFailed, ValueError) as e:
                _RUNS[case.name] = f"{case.name}: {e}"
            finally:
                if case.where == TMPFS:
                    shutil.rmtree(scratch, ignore_errors=True)
        result = _RUNS[case.name]
        if isinstance(result, str):
            pytest.fail(result, pytrace=False)
        return result
    return get
