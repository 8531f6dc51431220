"""jobs/darshan/layout.py: which bytes a replay lays out (read before the log writes them) and
each file's extent, on request sequences whose answer is worked out by hand."""
from __future__ import annotations

from dataclasses import dataclass

from storlab.jobs.darshan.layout import Ranges, extents, read_before_written


@dataclass
class W:
    """The fields of a translator Worker the layout reads."""
    index: int
    target: str
    ops: list
    first_s: float = 0.0


def test_ranges_merge_touching_and_overlapping_and_find_gaps():
    r = Ranges()
    for s, e in ((10, 20), (30, 40), (20, 25), (35, 50), (0, 5)):
        r.add(s, e)
    assert r.pairs() == [(0, 5), (10, 25), (30, 50)] and r.total() == 40
    assert r.gaps(0, 60) == [(5, 10), (25, 30), (50, 60)]
    assert r.gaps(12, 24) == [] and r.gaps(24, 31) == [(25, 30)]
    r.add(4, 31)
    assert r.pairs() == [(0, 50)]


def test_written_then_read_lays_out_nothing():
    w = W(0, "/t/a", [("write", k * 64, 64) for k in range(4)] + [("read", k * 64, 64) for k in range(4)])
    assert read_before_written([w]) == {} and extents([w]) == {"/t/a": 256}


def test_read_before_written_lays_out_only_what_was_not_written_yet():
    # read [0,100), write [50,150), read [0,200): laid out [0,100) and [150,200)
    w = W(0, "/t/a", [("read", 0, 100), ("write", 50, 100), ("sync", 0, 0), ("read", 0, 200)])
    assert read_before_written([w]) == {"/t/a": [(0, 100), (150, 200)]}


def test_the_logs_order_across_workers_decides():
    # DXT times: worker 1 writes [0,100) at t=1, worker 0 reads it at t=2: nothing to lay out;
    # a read at t=0.5 (before the write) needs it laid out
    writer = W(1, "/t/s", [("write", 0, 100, 1.0, 1.1)])
    reader = W(0, "/t/s", [("read", 0, 100, 2.0, 2.1)])
    assert read_before_written([reader, writer]) == {}
    early = W(2, "/t/s", [("read", 0, 10, 0.5, 0.6)])
    assert read_before_written([reader, writer, early]) == {"/t/s": [(0, 10)]}
    # from the counters: each file's workers in the order their records were first opened
    first = W(3, "/t/c", [("read", 0, 4096)], first_s=5.0)
    second = W(4, "/t/c", [("write", 0, 4096)], first_s=1.0)
    assert read_before_written([first, second]) == {}
