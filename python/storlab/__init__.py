"""storlab: measure, model, plan and check storage for HPC and data-heavy clusters."""
from __future__ import annotations

try:
    from importlib.metadata import version as _version

    __version__ = _version("storlab")
except Exception:  # running from a source tree without installation
    __version__ = "0.0.0+source"
