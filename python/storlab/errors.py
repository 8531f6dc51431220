"""The small exception hierarchy of storlab, and the mapping from engine errors to it.

User-fixable problems (bad option, refused or unusable target, alignment) are ValueErrors too,
so the CLI prints them as one line with exit code 2; run failures (I/O errors) exit with 1.
"""
from __future__ import annotations


class StorlabError(Exception):
    """Base of storlab's own errors."""


class SpecError(StorlabError, ValueError):
    """A bad option value or combination."""


class TargetError(StorlabError, ValueError):
    """A target that cannot be used (missing, wrong type, refused by the safety check)."""


class AlignmentError(SpecError):
    """O_DIRECT alignment violated by a size or offset."""


class EngineError(StorlabError):
    """The I/O backend could not be set up (e.g. io_uring disabled)."""


class RunIOError(StorlabError):
    """An I/O request failed during the run."""


_BY_KIND = {
    "spec": SpecError,
    "target": TargetError,
    "alignment": AlignmentError,
    "engine": EngineError,
    "io": RunIOError,
    # A layout stopped by a signal: the signal's own exception (signals.Interrupted) reaches Python
    # first, so this only names what the engine says if it ever comes through.
    "interrupted": EngineError,
}


def from_core(kind: str, message: str) -> StorlabError:
    """Turn a (kind, message) pair from the engine into the matching exception."""
    return _BY_KIND.get(kind, StorlabError)(message)
