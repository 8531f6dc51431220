"""Output files of every command (--json, --csv, -o, --png): checked before any work starts,
written so a reader never sees half a file, and every failure one line naming the option and path.

A destination is '-' (standard output, where the command allows it), an existing regular file in
a writable folder, a new file in an existing writable folder, or an existing non-regular file
that may be written in place (/dev/null, a FIFO, a terminal). A directory, a missing folder, a
read-only or pseudo file system (/proc, /sys) are refused before the run, so a long measurement
is never lost to a typo in its output path.
"""
from __future__ import annotations

import os
import stat
import sys
import tempfile

from ..errors import OutputError

__all__ = ["OutputError", "check_destination", "check_folder", "write_output"]


def _reason(e: OSError) -> str:
    return e.strerror or str(e)


def _probe_folder(folder: str, option: str, path: str) -> None:
    """Create and remove a file in `folder`: the only test that also catches read-only mounts,
    pseudo file systems and root's permission bypass (os.access says yes to root)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".storlab-probe-", dir=folder)
    except OSError as e:
        raise OutputError(f"{option}: cannot write into folder {folder} for {path}: {_reason(e)}") from None
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass


def check_destination(path: str | None, option: str, allow_stdout: bool = True) -> None:
    """Refuse an output path that cannot be written, before anything runs (see module doc)."""
    if path is None:
        return
    if path == "-":
        if not allow_stdout:
            raise OutputError(f"{option}: standard output ('-') is not possible here; give a file")
        return
    if not path.strip() or "\0" in path:
        raise OutputError(f"{option}: {path!r} is not a file path")
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputError(f"{option}: cannot use {path}: {_reason(e)}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{option}: {path} is a directory; give a file name")
    if st is not None and not stat.S_ISREG(st.st_mode):
        # a device node, FIFO or terminal is written in place (opening a FIFO here would block)
        if not os.access(real, os.W_OK):
            raise OutputError(f"{option}: {path} is not writable")
        return
    folder = os.path.dirname(real) or "."
    if not os.path.isdir(folder):
        raise OutputError(f"{option}: folder {os.path.dirname(path) or '.'} of {path} does not exist")
    if st is not None and not os.access(real, os.W_OK):
        raise OutputError(f"{option}: {path} is not writable")
    _probe_folder(folder, option, path)


def check_folder(path: str | None, option: str) -> None:
    """An output folder (e.g. --png DIR): an existing writable folder, or one that can be made
    because its nearest existing parent is a writable folder."""
    if path is None:
        return
    real = os.path.realpath(path)
    existing = real
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise OutputError(f"{option}: {existing} is not a folder, so {path} cannot be made")
    _probe_folder(existing, option, path)


def write_output(text: str, path: str, option: str) -> None:
    """`text` to standard output for '-'; into a regular file atomically (a temporary file in the
    same folder, then renamed); into anything else (/dev/null, a FIFO, a terminal) directly, since
    replacing it would destroy a device node. Any failure is one OutputError line."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    real = os.path.realpath(path)
    try:
        if os.path.exists(real) and not os.path.isfile(real):
            if os.path.isdir(real):
                raise IsADirectoryError(21, "Is a directory")
            with open(real, "w", encoding="utf-8") as f:
                f.write(text)
            return
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(real) + ".", suffix=".tmp",
                                   dir=os.path.dirname(real) or ".")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, 0o644 & ~_umask())
            os.replace(tmp, real)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError as e:
        raise OutputError(f"{option}: cannot write {path}: {_reason(e)}") from None


def _umask() -> int:
    """The process umask, read without setting it (os.umask would change it for the engine's
    threads too while they may be creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022
