"""The doctor's result document (versioned JSON, `storlab.doctor/1`): the inventory, the findings
with evidence and fix, and the differences from a planned stack. output/doctor_text.py renders it."""
from __future__ import annotations

import platform
import socket

from ..document import DOCTOR_SCHEMA, header
from .checks import SEVERITIES, Finding
from .inventory import Inventory
from .stack_check import Difference

__all__ = ["SCHEMA", "build_result"]

SCHEMA = DOCTOR_SCHEMA


def build_result(inv: Inventory, findings: list[Finding], targets: list[str],
                 stack_file: str | None = None, differences: list[Difference] | None = None) -> dict:
    counts = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}
    result = {
        **header("doctor"),
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "targets": list(targets),
        "summary": {"devices": len(inv.scope),
                    "filesystems": sum(1 for n in inv.filesystems if n in inv.scope), **counts},
        **inv.to_dict(),
        "findings": [f.to_dict() for f in findings],
    }
    if stack_file is not None:
        result["stack"] = {"file": stack_file, "differences": [d.to_dict() for d in differences or []]}
    return result
