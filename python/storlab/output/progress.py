"""The live progress line of a measuring command: one line on a terminal (stderr) with the phase,
the elapsed time and the rate over the last update; nothing when stderr is no terminal, the
command is quiet or NO_COLOR asks for plain output."""
from __future__ import annotations

import os
import sys
import time

from ..units import format_rate

__all__ = ["ProgressLine", "wants_progress", "progress_line"]


class ProgressLine:
    """A live progress line on a terminal (stderr): phase, elapsed time and the rate over the
    last update — bandwidth and IOPS for I/O, operations per second for metadata phases."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.last: tuple[str, float, int, int] | None = None

    def __call__(self, phase: str, done_bytes: int, done_ops: int, elapsed: float) -> None:
        now = time.monotonic()
        if self.last is None or self.last[0] != phase or done_ops < self.last[3]:
            self.last = (phase, now, 0, 0)
        dt = max(now - self.last[1], 1e-9)
        bw = (done_bytes - self.last[2]) / dt
        ops = (done_ops - self.last[3]) / dt
        self.last = (phase, now, done_bytes, done_ops)
        rates = (f"{format_rate(bw):>12}  {ops:12,.0f} IOPS" if done_bytes
                 else f"{done_ops:12,d} ops  {ops:12,.0f} ops/s")
        self.stream.write(f"\r\x1b[K{phase}: {elapsed:6.1f} s  {rates}")
        self.stream.flush()

    def finish(self) -> None:
        if self.last is not None:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def wants_progress(quiet: bool) -> bool:
    """A progress line only on a terminal, and not when asked to be quiet or plain."""
    return sys.stderr.isatty() and not quiet and not os.environ.get("NO_COLOR")


def progress_line(quiet: bool) -> ProgressLine | None:
    """The progress line a command shows while it runs, or None where it shows none."""
    return ProgressLine(sys.stderr) if wants_progress(quiet) else None
