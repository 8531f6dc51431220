"""jobs/darshan/stdio.py: Darshan's STDIO counters as the requests a replay issues (no PyDarshan
needed: the counters are given as Darshan writes them; tests/test_replay.py records a real
program's stdio calls and replays them end to end)."""
from __future__ import annotations

import pytest
from storlab.jobs.darshan.counters import READ, WRITE, count_ops
from storlab.jobs.darshan.stdio import buffered, stdio_requests, stdio_scaled, stream_name
from storlab.jobs.darshan.synth import MAX_REQUEST


def _stdio(**counters: int) -> dict[str, int]:
    return stdio_scaled({f"STDIO_{k.upper()}": v for k, v in counters.items()}, 1.0)


def test_each_call_is_one_request_of_bytes_over_calls_and_the_bytes_add_up():
    s = _stdio(reads=7, bytes_read=7003, max_byte_read=7002, writes=3, bytes_written=10, max_byte_written=9)
    (ops,) = stdio_requests(s, {}, 1)
    reads = [op for op in ops if op[0] == READ]
    writes = [op for op in ops if op[0] == WRITE]
    assert len(reads) == 7 and sum(n for _, _, n in reads) == 7003 and {n for _, _, n in reads} == {1000, 1001}
    assert [n for _, _, n in writes] == [4, 3, 3]
    # a stream moves forward from offset 0: consecutive requests, up to the recorded extent
    assert [o for _, o, _ in writes] == [0, 4, 7]
    got = count_ops([op for op in ops if op[0] == READ])
    assert got["POSIX_CONSEC_READS"] == 6 and got["POSIX_MAX_BYTE_READ"] == 7002


def test_the_direction_that_started_first_goes_first():
    s = _stdio(reads=2, bytes_read=20, max_byte_read=19, writes=2, bytes_written=20, max_byte_written=19)
    (ops,) = stdio_requests(s, {"STDIO_F_READ_START_TIMESTAMP": 1.0, "STDIO_F_WRITE_START_TIMESTAMP": 2.0}, 1)
    assert [op[0] for op in ops] == [READ, READ, WRITE, WRITE]
    (ops,) = stdio_requests(s, {"STDIO_F_READ_START_TIMESTAMP": 3.0, "STDIO_F_WRITE_START_TIMESTAMP": 2.0}, 1)
    assert [op[0] for op in ops] == [WRITE, WRITE, READ, READ]


def test_bytes_beyond_the_extent_start_the_stream_over():
    """A 1000-byte file read three times in 100-byte freads (a rewind or a new fopen each time)."""
    (ops,) = stdio_requests(_stdio(reads=30, bytes_read=3000, max_byte_read=999, opens=3), {}, 1)
    assert [o for _, o, _ in ops] == list(range(0, 1000, 100)) * 3


def test_seeks_skip_what_the_bytes_leave_of_the_extent():
    """10 reads of 100 bytes over a 10,000-byte extent with 9 seeks: spread over the whole file."""
    (ops,) = stdio_requests(_stdio(reads=10, bytes_read=1000, max_byte_read=9999, seeks=9), {}, 1)
    offsets = [o for _, o, _ in ops]
    assert offsets == sorted(offsets) and offsets[0] == 0
    assert 9000 <= offsets[-1] + 100 <= 10000


def test_a_shared_record_is_dealt_to_the_ranks_in_slices():
    s = _stdio(reads=8, bytes_read=8000, max_byte_read=7999)
    parts = stdio_requests(s, {}, 4)
    assert [len(p) for p in parts] == [2, 2, 2, 2]
    assert [[o for _, o, _ in p] for p in parts] == [[0, 1000], [2000, 3000], [4000, 5000], [6000, 7000]]
    # fewer calls than ranks: the bytes still add up
    parts = stdio_requests(_stdio(reads=3, bytes_read=3001, max_byte_read=3000), {}, 8)
    assert sum(n for p in parts for _, _, n in p) == 3001 and sum(len(p) for p in parts) == 3


def test_a_call_longer_than_the_engines_largest_request_is_split():
    (ops,) = stdio_requests(_stdio(writes=1, bytes_written=MAX_REQUEST + 5, max_byte_written=MAX_REQUEST + 4), {}, 1)
    assert [(o, n) for _, o, n in ops] == [(0, MAX_REQUEST), (MAX_REQUEST, 5)]


def test_scale_and_darshans_minus_one():
    s = stdio_scaled({"STDIO_READS": 1000, "STDIO_BYTES_READ": 10**6, "STDIO_FDOPENS": -1, "STDIO_SEEKS": -1}, 0.01)
    assert (s["STDIO_READS"], s["STDIO_BYTES_READ"], s["STDIO_SEEKS"]) == (10, 10**4, 0)


@pytest.mark.parametrize("name, stream", [("<STDOUT>", "<STDOUT>"), ("<STDERR>", "<STDERR>"), ("<STDIN>", "<STDIN>"),
                                          ("3710437467", "<STDOUT>"), ("3599639208", "<STDERR>"),
                                          ("3126844023", "<STDIN>"), ("/scratch/out.txt", None), ("/x/3710437467", None)])
def test_standard_streams_are_known_also_by_their_obfuscated_names(name, stream):
    """darshan-convert --obfuscate (before 3.4) named every record by lookup3's hashlittle of its name
    with key 0: PyDarshan's noposix.darshan names its <STDOUT> 3710437467."""
    assert stream_name(name) == stream


# -- --stdio-buffer: glibc's fully buffered stream (libio's xsputn/xsgetn) --------------------------
def test_small_writes_gather_into_buffer_sized_system_calls():
    calls = [(WRITE, k * 100, 100) for k in range(100)]                  # 10,000 bytes
    assert [n for _, _, n in buffered(calls, 4096)] == [4096, 4096, 1808]
    # an fflush in the middle writes out what the buffer holds there
    assert [n for _, _, n in buffered(calls, 4096, flushes=2)] == [4096, 904, 4096, 904]


def test_a_large_write_fills_the_buffer_then_goes_straight_through_in_whole_buffers():
    """As glibc does (seen under strace): fwrite 100 then 10,000 bytes writes 4096, 4096, 1908;
    a first fwrite of 10,000 (no buffer allocated yet), then 5, writes 8192, 1813."""
    assert [(o, n) for _, o, n in buffered([(WRITE, 0, 100), (WRITE, 100, 10000)], 4096)] == \
        [(0, 4096), (4096, 4096), (8192, 1908)]
    assert [(o, n) for _, o, n in buffered([(WRITE, 0, 10000), (WRITE, 10000, 5)], 4096)] == [(0, 8192), (8192, 1813)]


def test_reads_refill_the_buffer_and_large_reads_go_straight_through():
    calls = [(READ, k * 400, 400) for k in range(25)]                     # 10,000 bytes of a 10,000-byte file
    assert [(o, n) for _, o, n in buffered(calls, 4096, end=10000)] == [(0, 4096), (4096, 4096), (8192, 1808)]
    assert [(o, n) for _, o, n in buffered([(READ, 0, 10000), (READ, 10000, 5)], 4096, end=20000)] == \
        [(0, 8192), (8192, 4096)]


def test_a_seek_drops_the_read_buffer():
    calls = [(READ, 0, 100), (READ, 100, 100), (READ, 0, 100)]
    assert [(o, n) for _, o, n in buffered(calls, 4096, end=8192)] == [(0, 4096), (0, 4096)]
