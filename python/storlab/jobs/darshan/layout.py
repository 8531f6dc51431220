"""What a replay's files hold before the replay starts: each file's extent (the byte after its
last request: the size the replay gives it) and the byte ranges the log reads before it writes
them, the data the file held before the application ran. Only those ranges are laid out (written
before the replay); a byte the log writes first is written by the replayed write alone, so a
replay recorded by Darshan counts the application's reads and writes, no more
(tests/test_replay_darshan.py records both and compares).

"Before" is the log's order: a DXT-traced request's recorded start time; a request made from the
counters (no time of its own) at its file's first open, read or write, in the sequence's order.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from typing import Any, Iterable

from .counters import READ, SYNC, WRITE

__all__ = ["Ranges", "extents", "read_before_written"]


class Ranges:
    """Disjoint byte ranges [start, end), sorted; touching ranges are merged."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, start: int, end: int) -> None:
        i = bisect_left(self.ends, start)          # the first range ending at or after `start`
        j = i
        while j < len(self.starts) and self.starts[j] <= end:
            start, end = min(start, self.starts[j]), max(end, self.ends[j])
            j += 1
        self.starts[i:j] = [start]
        self.ends[i:j] = [end]

    def gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of [start, end) no range covers."""
        out: list[tuple[int, int]] = []
        at = start
        i = bisect_right(self.ends, start)         # the first range ending after `start`
        while i < len(self.starts) and self.starts[i] < end:
            if self.starts[i] > at:
                out.append((at, self.starts[i]))
            at = max(at, self.ends[i])
            i += 1
        if at < end:
            out.append((at, end))
        return out

    def pairs(self) -> list[tuple[int, int]]:
        return list(zip(self.starts, self.ends))

    def total(self) -> int:
        return sum(e - s for s, e in zip(self.starts, self.ends))


def extents(workers: Iterable[Any]) -> dict[str, int]:
    """Each target file's extent: the largest offset + length of its workers' requests."""
    out: dict[str, int] = defaultdict(int)
    for w in workers:
        for op in w.ops:
            if op[0] != SYNC:
                out[w.target] = max(out[w.target], op[1] + op[2])
    return dict(out)


def read_before_written(workers: Iterable[Any]) -> dict[str, list[tuple[int, int]]]:
    """Per target file, the byte ranges read before any request of the log writes them (only
    files with such ranges): what a replay must lay out so its reads find data, not holes."""
    by_file: dict[str, list[tuple[float, int, int, tuple]]] = defaultdict(list)
    for w in workers:
        for i, op in enumerate(w.ops):
            if op[0] in (READ, WRITE) and op[2] > 0:
                by_file[w.target].append((op[3] if len(op) > 3 else w.first_s, w.index, i, op))
    out: dict[str, list[tuple[int, int]]] = {}
    for target, ops in by_file.items():
        written, laid_out = Ranges(), Ranges()
        for *_, (direction, offset, length, *_) in sorted(ops, key=lambda o: o[:3]):
            if direction == WRITE:
                written.add(offset, offset + length)
            else:
                for s, e in written.gaps(offset, offset + length):
                    laid_out.add(s, e)
        if laid_out.starts:
            out[target] = laid_out.pairs()
    return out
