"""The conformance job table: each job once, as storlab arguments and as fio options, with the
checks that apply to it.

The storlab and fio columns say the same job in each tool's words; where the words differ (storlab's
`size` is the whole range its threads split, fio's is each job's; fio's `number_ios` is storlab's
`io_size` in bytes) the case says so in its note. `range_start`/`range_bytes` and `io_bytes` are
what both tools must do, so each is also checked against the table, not only against the other.
"""
from __future__ import annotations

from dataclasses import dataclass

KiB, MiB = 1 << 10, 1 << 20

# The checks. Each names one test in test_conformance.py; figures.py links each figure to them.
COUNTS = "counts"            # bytes and operations per direction (totals for mixes)
OFFSETS = "offsets"          # the offsets touched, per thread and direction, from strace
POSITIONS = "positions"      # sequential mixes: each direction keeps its own position
COVERAGE = "coverage"        # fraction of blocks touched; exactly once per pass with the random map
FSYNC = "fsync"              # fsync system calls during the I/O, and the JSON's sync count
MIX = "mix"                  # read share of a mix within a binomial tolerance of rwmix_read
LAT_ORDER = "lat_order"      # slat <= lat and clat <= lat, lat = slat + clat
LAT_MATCH = "lat_match"      # storlab's median lat within a factor of fio's
BANDWIDTH = "bandwidth"      # both tools measure a throttled device's rate within 15 %
SIZES = "sizes"              # mixed sizes (bssplit): each size's share of the requests, from strace
CHECKS = (COUNTS, OFFSETS, POSITIONS, COVERAGE, FSYNC, MIX, LAT_ORDER, LAT_MATCH, BANDWIDTH, SIZES)

TMPFS, LOOP, EXT4 = "tmpfs", "loop", "ext4"
TRACED = (OFFSETS, POSITIONS, COVERAGE, FSYNC, SIZES)      # checks that read strace's record


@dataclass(frozen=True)
class Case:
    name: str
    where: str                       # tmpfs: a file in /dev/shm; loop: a raw loop block device;
                                     # ext4: a file on ext4 on a loop device
    storlab: tuple[str, ...]         # `storlab run --target T` arguments
    fio: tuple[str, ...]             # fio options (name=value, without dashes); filename added
    checks: frozenset[str]
    bs: int
    io_bytes: int                    # bytes both tools must move, all directions and threads
    range_bytes: int                 # length of the range the job covers (all threads)
    range_start: int = 0
    target_bytes: int = 16 * MiB     # size of the file or device created for the case
    sequential: bool = False         # offsets in a fixed order (compared in order, not as a set)
    random_map: bool = True          # random jobs: every block once per pass (fio's default)
    rwmix_read: int | None = None    # mixes: the read share in percent
    end_fsync: bool = False
    fsync_every: int = 0
    throttle_bps: int | None = None  # blkio throttle on the loop device for both directions
    note: str = ""

    @property
    def traced(self) -> bool:
        """Run both tools under strace (psync jobs whose checks read the system calls)."""
        return bool(self.checks & set(TRACED))

    @property
    def passes(self) -> float:
        return self.io_bytes / self.range_bytes


def _case(name: str, where: str, storlab: str, fio: str, checks: tuple[str, ...], **kw) -> Case:
    return Case(name, where, tuple(storlab.split()), tuple(fio.split()), frozenset(checks), **kw)


# Write jobs state the end fsync explicitly: storlab's default is on, fio's off.
CASES: tuple[Case, ...] = (
    _case("read_4k_seq", TMPFS,
          "--rw read --bs 4k --size 16m",
          "rw=read bs=4k size=16m ioengine=psync",
          (COUNTS, OFFSETS, COVERAGE),
          bs=4 * KiB, io_bytes=16 * MiB, range_bytes=16 * MiB, sequential=True),
    _case("write_64k_seq_end_fsync", TMPFS,
          "--rw write --bs 64k --size 16m --fsync-end",
          "rw=write bs=64k size=16m ioengine=psync end_fsync=1",
          (COUNTS, OFFSETS, COVERAGE, FSYNC),
          bs=64 * KiB, io_bytes=16 * MiB, range_bytes=16 * MiB, sequential=True, end_fsync=True),
    _case("read_1m_seq_cached", TMPFS,
          "--rw read --bs 1m --size 64m",
          "rw=read bs=1m size=64m ioengine=psync",
          (COUNTS, OFFSETS, LAT_ORDER, LAT_MATCH),
          bs=MiB, io_bytes=64 * MiB, range_bytes=64 * MiB, target_bytes=64 * MiB, sequential=True,
          note="a cached tmpfs file: both tools time the same memory copy"),
    _case("randread_4k_map", TMPFS,
          "--rw randread --bs 4k --size 16m",
          "rw=randread bs=4k size=16m ioengine=psync",
          (COUNTS, OFFSETS, COVERAGE),
          bs=4 * KiB, io_bytes=16 * MiB, range_bytes=16 * MiB),
    _case("randwrite_4k_map", TMPFS,
          "--rw randwrite --bs 4k --size 16m --no-fsync-end",
          "rw=randwrite bs=4k size=16m ioengine=psync end_fsync=0",
          (COUNTS, OFFSETS, COVERAGE, FSYNC),
          bs=4 * KiB, io_bytes=16 * MiB, range_bytes=16 * MiB),
    _case("randread_4k_norandommap", TMPFS,
          "--rw randread --bs 4k --size 16m --random-map off",
          "rw=randread bs=4k size=16m ioengine=psync norandommap=1",
          (COUNTS, COVERAGE),
          bs=4 * KiB, io_bytes=16 * MiB, range_bytes=16 * MiB, random_map=False),
    _case("randwrite_64k_norandommap", TMPFS,
          "--rw randwrite --bs 64k --size 64m --random-map off --no-fsync-end",
          "rw=randwrite bs=64k size=64m ioengine=psync norandommap=1 end_fsync=0",
          (COUNTS, COVERAGE),
          bs=64 * KiB, io_bytes=64 * MiB, range_bytes=64 * MiB, target_bytes=64 * MiB,
          random_map=False),
    _case("rw_mix70_4k", TMPFS,
          "--rw rw --rwmix-read 70 --bs 4k --size 16m --no-fsync-end",
          "rw=rw rwmixread=70 bs=4k size=16m ioengine=psync end_fsync=0",
          (COUNTS, MIX, POSITIONS),
          bs=4 * KiB, io_bytes=16 * MiB, range_bytes=16 * MiB, sequential=True, rwmix_read=70,
          note="fio keeps a position per direction: reads at 0, 4k, 8k ... and writes at 0, 4k ..."),
    _case("randrw_mix70_4k_map", TMPFS,
          "--rw randrw --rwmix-read 70 --bs 4k --size 16m --no-fsync-end",
          "rw=randrw rwmixread=70 bs=4k size=16m ioengine=psync end_fsync=0",
          (COUNTS, MIX, COVERAGE),
          bs=4 * KiB, io_bytes=16 * MiB, range_bytes=16 * MiB, rwmix_read=70,
          note="fio's random map is one per file: reads and writes together visit every block once"),
    _case("randrw_mix70_64k_norandommap", TMPFS,
          "--rw randrw --rwmix-read 70 --bs 64k --size 64m --random-map off --no-fsync-end",
          "rw=randrw rwmixread=70 bs=64k size=64m ioengine=psync norandommap=1 end_fsync=0",
          (COUNTS, MIX, COVERAGE),
          bs=64 * KiB, io_bytes=64 * MiB, range_bytes=64 * MiB, target_bytes=64 * MiB,
          rwmix_read=70, random_map=False),
    _case("randread_4k_io_size_2x", TMPFS,
          "--rw randread --bs 4k --size 4m --io-size 8m",
          "rw=randread bs=4k size=4m io_size=8m ioengine=psync",
          (COUNTS, OFFSETS, COVERAGE),
          bs=4 * KiB, io_bytes=8 * MiB, range_bytes=4 * MiB,
          note="two passes: with the random map every block exactly twice"),
    _case("read_4k_number_ios", TMPFS,
          f"--rw read --bs 4k --size 16m --io-size {1000 * 4 * KiB}",
          "rw=read bs=4k size=16m number_ios=1000 ioengine=psync",
          (COUNTS, OFFSETS),
          bs=4 * KiB, io_bytes=1000 * 4 * KiB, range_bytes=16 * MiB, sequential=True,
          note="fio's number_ios is storlab's io_size in bytes (number_ios x bs)"),
    _case("write_64k_io_size_wrap", TMPFS,
          "--rw write --bs 64k --size 8m --io-size 20m --no-fsync-end",
          "rw=write bs=64k size=8m io_size=20m ioengine=psync end_fsync=0",
          (COUNTS, OFFSETS, COVERAGE),
          bs=64 * KiB, io_bytes=20 * MiB, range_bytes=8 * MiB, sequential=True,
          note="io_size beyond size wraps to the range start: 2.5 passes"),
    _case("randwrite_4k_fsync_100", TMPFS,
          "--rw randwrite --bs 4k --size 4m --fsync-every 100 --fsync-end",
          "rw=randwrite bs=4k size=4m fsync=100 end_fsync=1 ioengine=psync",
          (COUNTS, OFFSETS, COVERAGE, FSYNC),
          bs=4 * KiB, io_bytes=4 * MiB, range_bytes=4 * MiB, fsync_every=100, end_fsync=True,
          note="1,024 writes: a sync after writes 100, 200 ... 1,000, then the end fsync"),
    _case("write_64k_fsync_16_exact", TMPFS,
          "--rw write --bs 64k --size 4m --fsync-every 16 --no-fsync-end",
          "rw=write bs=64k size=4m fsync=16 end_fsync=0 ioengine=psync",
          (COUNTS, OFFSETS, FSYNC),
          bs=64 * KiB, io_bytes=4 * MiB, range_bytes=4 * MiB, sequential=True, fsync_every=16,
          note="64 writes, a multiple of 16: syncs after writes 16, 32, 48 and none after the last"),
    _case("randread_64k_offset_range", TMPFS,
          "--rw randread --bs 64k --offset 4m --size 8m",
          "rw=randread bs=64k offset=4m size=8m ioengine=psync",
          (COUNTS, OFFSETS, COVERAGE),
          bs=64 * KiB, io_bytes=8 * MiB, range_bytes=8 * MiB, range_start=4 * MiB),
    _case("randwrite_4k_2threads_region", TMPFS,
          "--rw randwrite --bs 4k --size 16m --threads 2 --thread-layout region --no-fsync-end",
          "rw=randwrite bs=4k size=8m numjobs=2 offset_increment=8m ioengine=psync end_fsync=0",
          (COUNTS, OFFSETS, COVERAGE),
          bs=4 * KiB, io_bytes=16 * MiB, range_bytes=16 * MiB,
          note="storlab's size is the range its threads split evenly; fio's is per job, "
               "placed by offset_increment"),
    _case("randread_bssplit_norandommap", TMPFS,
          "--rw randread --bssplit 4k/50:16k/30:64k/20 --size 16m --io-size 256m --random-map off",
          "rw=randread bssplit=4k/50:16k/30:64k/20 size=16m io_size=256m ioengine=psync norandommap=1",
          (SIZES,),
          bs=4 * KiB, io_bytes=256 * MiB, range_bytes=16 * MiB, random_map=False,
          note="size-based: each request's size drawn from the split, ~12,000 requests"),
    _case("randrw_bssplit_map_time_based", TMPFS,
          "--rw randrw --bssplit 4k/50:64k/30:1m/20 --size 16m --time 1 --no-fsync-end",
          "rw=randrw bssplit=4k/50:64k/30:1m/20 size=16m time_based=1 runtime=1 ioengine=psync end_fsync=0",
          (SIZES,),
          bs=4 * KiB, io_bytes=16 * MiB, range_bytes=16 * MiB,
          note="time-based, with the random map: both tools cut requests that meet covered blocks, "
               "in the same share"),
    _case("uring_randread_4k_qd8", TMPFS,
          "--rw randread --bs 4k --size 16m --engine io_uring --qd 8",
          "rw=randread bs=4k size=16m ioengine=io_uring iodepth=8",
          (COUNTS, LAT_ORDER),
          bs=4 * KiB, io_bytes=16 * MiB, range_bytes=16 * MiB),
    _case("uring_read_1m_cached_qd8", TMPFS,
          "--rw read --bs 1m --size 64m --engine io_uring --qd 8",
          "rw=read bs=1m size=64m ioengine=io_uring iodepth=8 iodepth_batch_submit=8",
          (COUNTS, LAT_ORDER, LAT_MATCH),
          bs=MiB, io_bytes=64 * MiB, range_bytes=64 * MiB, target_bytes=64 * MiB, sequential=True,
          note="the submit call is part of lat: a cached 1 MiB read is not 120 ns; fio told to "
               "batch submissions as storlab does by default (uring.batch = qd)"),
    _case("ext4_uring_read_1m_cached", EXT4,
          "--rw read --bs 1m --size 32m --engine io_uring --qd 1 --invalidate off",
          "rw=read bs=1m size=32m ioengine=io_uring iodepth=1 invalidate=0",
          (COUNTS, LAT_ORDER, LAT_MATCH),
          bs=MiB, io_bytes=32 * MiB, range_bytes=32 * MiB, target_bytes=32 * MiB, sequential=True,
          note="ext4 serves a cached read inside the submitting call: all of it is slat"),
    _case("loop_direct_randwrite_4k", LOOP,
          "--rw randwrite --bs 4k --size 16m --direct --fsync-end",
          "rw=randwrite bs=4k size=16m direct=1 ioengine=psync end_fsync=1",
          (COUNTS, OFFSETS, COVERAGE, FSYNC),
          bs=4 * KiB, io_bytes=16 * MiB, range_bytes=16 * MiB, end_fsync=True),
    _case("loop_direct_read_1m", LOOP,
          "--rw read --bs 1m --size 32m --direct",
          "rw=read bs=1m size=32m direct=1 ioengine=psync",
          (COUNTS, OFFSETS, COVERAGE),
          bs=MiB, io_bytes=32 * MiB, range_bytes=32 * MiB, target_bytes=32 * MiB, sequential=True),
    _case("loop_direct_uring_randread_4k_qd8", LOOP,
          "--rw randread --bs 4k --size 16m --direct --engine io_uring --qd 8",
          "rw=randread bs=4k size=16m direct=1 ioengine=io_uring iodepth=8",
          (COUNTS, LAT_ORDER),
          bs=4 * KiB, io_bytes=16 * MiB, range_bytes=16 * MiB),
    _case("loop_throttled_read_64k", LOOP,
          "--rw read --bs 64k --size 24m --direct",
          "rw=read bs=64k size=24m direct=1 ioengine=psync",
          (COUNTS, BANDWIDTH),
          bs=64 * KiB, io_bytes=24 * MiB, range_bytes=24 * MiB, target_bytes=24 * MiB,
          sequential=True, throttle_bps=16 * MiB,
          note="blkio throttle 16 MiB/s on the loop device: both tools must see 16 MiB/s"),
    _case("loop_throttled_write_64k", LOOP,
          "--rw write --bs 64k --size 24m --direct --no-fsync-end",
          "rw=write bs=64k size=24m direct=1 ioengine=psync end_fsync=0",
          (COUNTS, BANDWIDTH),
          bs=64 * KiB, io_bytes=24 * MiB, range_bytes=24 * MiB, target_bytes=24 * MiB,
          sequential=True, throttle_bps=16 * MiB),
)

BY_NAME = {c.name: c for c in CASES}
