"""Block devices: discovery from sysfs/procfs, on-disk signatures, and the engine's write-safety gate."""
from __future__ import annotations

from .safety import TargetRefused, check_write_allowed, describe_path
from .signatures import Signature, probe_signatures

__all__ = ["TargetRefused", "check_write_allowed", "describe_path", "Signature", "probe_signatures"]
