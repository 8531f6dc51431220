"""Predicted vs measured on the testbed, a subset short enough for CI (the full table is
benchmarks/model_validation.py, in docs/model.md): a single throttled device and a btrfs RAID 0 over
two, 1 MiB sequential reads at QD 1 (the psync engine, as the full table), each within 15 %."""
from __future__ import annotations

import os

import pytest
from storlab.model.predict import Device, Workload, predict
from storlab.model.stack import DriveType, stack_from_notation
from testbed import Limits, Testbed, testbed_unavailable
from testbed.stacks import build_stack

MiB = 1 << 20
KiB = 1 << 10
BPS, IOPS = 20 * MiB, 500
LATENCY_S = 20e-6      # unloaded 4 KiB read on a loop device over tmpfs (measured: 19 us); it binds nothing here
pytestmark = [pytest.mark.root, pytest.mark.loop, pytest.mark.slow]


def _device() -> Device:
    return Device(BPS, BPS, IOPS, IOPS, LATENCY_S, "throttled loop", shared_time=False, counts_every_request=True,
                  queues=False)


def _measure(stack_kwargs: dict, members: int, args: list[str]) -> dict:
    why = testbed_unavailable()
    if why:
        pytest.skip(why)
    with Testbed(name=f"storlab-test-validation-{os.getpid()}") as bed:
        stack = build_stack(bed, [Limits.both(bps=BPS, iops=IOPS)] * members, 256 * MiB, **stack_kwargs)
        doc = bed.run_storlab(["--target", stack.target, *stack.run_args, *args, "--engine", "psync",
                               "--direct", "--ramp", "1s", "--time", "4s"])
    return doc["phases"][0]["read"]


def test_single_device_sequential_reads_match_the_prediction():
    measured = _measure({}, 1, ["--rw", "read", "--bs", "1MiB", "--qd", "1"])
    predicted = predict(None, Workload("read", MiB, qd=1), [_device()])
    assert predicted.bw_bytes == pytest.approx(BPS, rel=0.01)
    assert measured["bw_bytes"] == pytest.approx(predicted.bw_bytes, rel=0.15)


def test_btrfs_raid0_over_two_sequential_reads_match_the_prediction():
    measured = _measure({"btrfs": "raid0"}, 2, ["--rw", "read", "--bs", "1MiB", "--qd", "1"])
    drive = DriveType("loop", 256 * MiB, 1e6)
    predicted = predict(stack_from_notation("R0/2", 64 * KiB, drive=drive), Workload("read", MiB, qd=1), [_device()])
    assert predicted.bw_bytes == pytest.approx(2 * BPS, rel=0.01)
    assert measured["bw_bytes"] == pytest.approx(predicted.bw_bytes, rel=0.15)
