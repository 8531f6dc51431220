"""Emulated storage stacks for tests and benchmarks: throttled loop devices, btrfs RAID, xfs/ext4
geometry, storlab run inside the throttle (docs/testbed.md)."""
from .bed import BTRFS_LEVELS, REPO_ROOT, SharedBus, Testbed, TestbedError, testbed_unavailable
from .throttle import BlkioV1, IoMaxV2, Limits, ThrottleUnavailable, detect_throttle, dev_numbers

__all__ = ["Testbed", "TestbedError", "SharedBus", "Limits", "BlkioV1", "IoMaxV2", "ThrottleUnavailable",
           "detect_throttle", "dev_numbers", "testbed_unavailable", "BTRFS_LEVELS", "REPO_ROOT"]
