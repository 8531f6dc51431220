"""`storlab doctor`: discover a host's storage stack and check it for misalignment and mistuning."""
from __future__ import annotations

from .checks import Finding, run_checks
from .inventory import Inventory, Striping, discover

__all__ = ["Finding", "run_checks", "Inventory", "Striping", "discover"]
