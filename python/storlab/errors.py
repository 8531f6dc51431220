"""The small exception hierarchy of storlab, and the mapping from engine errors to it.

Two kinds of error reach the user, and the CLI (storlab/cli/main.py) treats them differently:
- `UserError`: a mistake the user can fix (a bad option value, job file, stack file, target or
  output path). Printed as one line naming the field and what is allowed; exit code 2.
- `FailureError`: the work could not be done although it was asked for correctly (the engine
  could not be set up, an I/O request failed). One line; exit code 1.
Anything else escaping a command is a bug in storlab: a short traceback, a request to report
it, exit code 70 (EX_SOFTWARE).

UserError is also a ValueError, so library code that validates with `except ValueError` keeps
working; the CLI catches only UserError, so a stray ValueError shows as the bug it is.
"""
from __future__ import annotations


class StorlabError(Exception):
    """Base of storlab's own errors."""


class UserError(StorlabError, ValueError):
    """A mistake the user can fix; the message is one line naming the field and what is allowed."""


class FailureError(StorlabError):
    """The work failed although it was asked for correctly (not the user's mistake, not a bug)."""


class SpecError(UserError):
    """A bad option value or combination."""


class TargetError(UserError):
    """A target that cannot be used (missing, wrong type, refused by the safety check)."""


class AlignmentError(SpecError):
    """O_DIRECT alignment violated by a size or offset."""


class EngineError(FailureError):
    """The I/O backend could not be set up (e.g. io_uring disabled)."""


class RunIOError(FailureError):
    """An I/O request failed during the run."""


class OutputError(UserError):
    """An output that cannot be written; the message is one line naming the option and the path.
    Found before the run it is a usage error (exit 2); a measuring command that fails to write
    after its run has stored the result, says so and exits 1."""


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
    """Turn a (kind, message) pair from the engine into the matching exception (an unknown kind
    is a failure of the run, not the user's mistake)."""
    return _BY_KIND.get(kind, FailureError)(message)
