"""Reading the TOML files users hand to storlab (job files, stack files): one place that refuses
what is not a small UTF-8 TOML file with a one-line error naming the file."""
from __future__ import annotations

import os
import stat
import sys
from typing import Any

from ..errors import UserError

__all__ = ["TomlFileError", "read_toml", "MAX_TOML_BYTES"]   # and `tomllib`, imported on first use

# A job or stack file is a few KiB; a bigger one is a mistake (a log, an image), not a description.
MAX_TOML_BYTES = 16 << 20


class TomlFileError(UserError):
    """A TOML file that cannot be used; the message names it and what is wrong."""


def read_toml(path: str, what: str) -> dict[str, Any]:
    """A TOML file (job, stack) as a dict; a missing, unreadable, non-regular, binary or malformed
    file is one TomlFileError naming it and what is wrong."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise TomlFileError(f"{what} {path}: not found") from None
    except OSError as e:
        raise TomlFileError(f"{what} {path}: cannot be read: {e.strerror or e}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):   # a directory, FIFO or device: never read it
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise TomlFileError(f"{what} {path}: {kind}; give a TOML file")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(MAX_TOML_BYTES + 1)
        except OSError as e:
            raise TomlFileError(f"{what} {path}: cannot be read: {e.strerror or e}") from None
    if len(data) > MAX_TOML_BYTES:
        raise TomlFileError(f"{what} {path}: larger than {MAX_TOML_BYTES // (1 << 20)} MiB, too large for a {what}")
    parser = __getattr__("tomllib")
    try:
        return parser.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise TomlFileError(f"{what} {path}: not a text file (byte {e.start} is not UTF-8); give a TOML file") from None
    except parser.TOMLDecodeError as e:
        raise TomlFileError(f"{what} {path}: not valid TOML: {e}") from None
    except RecursionError:
        raise TomlFileError(f"{what} {path}: not valid TOML: nested too deeply") from None


def __getattr__(name: str) -> Any:
    """`tomllib` (tomli before Python 3.11), imported when first used: a command given no TOML
    file does not pay for the parser."""
    if name != "tomllib":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python < 3.11 only
        import tomli as tomllib
    globals()["tomllib"] = tomllib
    return tomllib
