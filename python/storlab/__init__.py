"""storlab: measure, model, plan and check storage for HPC and data-heavy clusters."""
from __future__ import annotations


def __getattr__(name: str) -> str:
    """`storlab.__version__`, resolved when first asked for: the engine's (maturin builds the
    package version from the same Cargo.toml), so no command pays for importlib.metadata (about a
    fifth of the start-up of `storlab --version`); the installed distribution's without an engine."""
    if name != "__version__":
        raise AttributeError(f"module 'storlab' has no attribute {name!r}")
    try:
        from ._core import __version__ as version
    except ImportError:
        try:
            from importlib.metadata import version as _distribution_version

            version = _distribution_version("storlab")
        except Exception:  # running from a source tree without installation
            version = "0.0.0+source"
    globals()["__version__"] = version
    return version
