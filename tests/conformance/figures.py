"""The figures storlab shares with fio: each one's definition in both tools, whether they agree, and
which conformance checks hold them to it. docs/fio.md's generated section is rendered from FIGURES
and the case table, and a test keeps the page current.

Regenerate: `PYTHONPATH=python python3 -m tests.conformance.figures --write` (from the repository root).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from .cases import BANDWIDTH, CASES, CHECKS, COUNTS, COVERAGE, FSYNC, LAT_MATCH, LAT_ORDER, MIX, OFFSETS, POSITIONS, SIZES

DOC = Path(__file__).resolve().parents[2] / "docs" / "fio.md"
BEGIN = "<!-- begin generated: tests/conformance/figures.py -->"
END = "<!-- end generated -->"
SAME = "same"


@dataclass(frozen=True)
class Figure:
    figure: str                  # storlab's name (JSON field or option) / fio's name
    fio: str                     # fio's definition
    storlab: str                 # storlab's definition
    verdict: str                 # SAME, or why they differ
    checks: tuple[str, ...] = () # the conformance checks that hold storlab to it
    uses: tuple[str, ...] = ()   # ... in the cases whose fio options start with one of these
    unless: tuple[str, ...] = () # ... and with none of these

    def cases(self) -> list[str]:
        """Names of the cases whose checks hold storlab to this figure."""
        def has(case, prefixes):
            return any(a.startswith(p) for a in case.fio for p in prefixes)
        return [c.name for c in CASES if c.checks & set(self.checks)
                and (not self.uses or has(c, self.uses)) and not has(c, self.unless)]


FIGURES: tuple[Figure, ...] = (
    Figure("`bytes` / `io_bytes`",
           "bytes transferred per direction",
           "bytes transferred per direction, summed over workers",
           SAME, (COUNTS,)),
    Figure("`ops` / `total_ios`",
           "requests completed per direction",
           "requests completed per direction, summed over workers",
           SAME, (COUNTS,)),
    Figure("`bw_bytes` / `bw_bytes`",
           "io_bytes / the job's runtime (ms resolution)",
           "bytes / the phase window, first worker start to last finish (end fsync included)",
           f"{SAME} where both hit one resource: within 15 % under a throttled loop device", (BANDWIDTH,)),
    Figure("`lat_ns` / `lat_ns`",
           "total latency: io_u prepared to completion reaped (slat + clat)",
           "request prepared to completion reaped: slat + clat",
           SAME, (LAT_ORDER, LAT_MATCH)),
    Figure("`slat_ns` / `slat_ns`",
           "io_u prepared to the submitting call's return; at iodepth 1 a synchronous engine takes "
           "no sample (N = 0, reported as zeros)",
           "request prepared to the submitting call's return; psync: 0 (the call is clat)",
           f"{SAME} (psync: fio samples nothing, storlab reports 0)", (LAT_ORDER,)),
    Figure("`clat_ns` / `clat_ns`",
           "submission to completion; for psync the pread/pwrite call",
           "submission to the reaped completion; for psync the pread/pwrite call",
           SAME, (LAT_ORDER,)),
    Figure("`sync.ops` / `sync.total_ios`",
           "syncs issued by fsync=N; the end_fsync call is not counted",
           "every fsync call of the phase, end fsync included",
           "storlab counts the end fsync too (one more with end_fsync); the calls are the same", (FSYNC,)),
    Figure("`fsync_every` / `fsync`",
           "a sync before the request that follows every N-th write, so none after the last write "
           "(end_fsync covers it); in rw mixes before every read until the next write",
           "a sync before the request that follows every N-th write (all in flight drained first), "
           "none after the last write (fsync_end covers it); in mixes once before the next request",
           f"{SAME}, except in mixes: storlab syncs once before the request after the N-th write, "
           "fio before every read until the next write", (FSYNC,), uses=("fsync=",)),
    Figure("`fsync_end` / `end_fsync`",
           "fsync the file when the job's writes are done; default off",
           "fsync written targets inside the timed window; default on",
           "defaults differ: storlab does not report buffered writes at page-cache speed", (FSYNC,),
           uses=("end_fsync",)),
    Figure("random offsets / random map",
           "the random map (one per file): every block once per pass, in random order, across both "
           "directions of randrw",
           "every block once per pass, in random order, across both directions",
           SAME, (OFFSETS, COVERAGE), uses=("rw=rand",), unless=("norandommap",)),
    Figure("`random_map = off` / `norandommap`",
           "uniform draws with repeats (about 63 % of blocks in one pass's worth of requests)",
           "uniform draws with repeats",
           SAME, (COVERAGE,), uses=("norandommap",)),
    Figure("`bssplit` / `bssplit`",
           "each request's size drawn from the split (shares of the requests); random offsets "
           "multiples of the smallest size; the random map cuts a request where it meets a covered "
           "block",
           "each request's size drawn per I/O with fio's lookup; offsets multiples of the smallest "
           "size (or blockalign); the same random map rule",
           SAME, (SIZES,), uses=("bssplit",)),
    Figure("sequential mixes / `rw`",
           "a position per direction: reads at 0, bs, 2 bs ... and writes at 0, bs ...",
           "a position per direction",
           SAME, (POSITIONS,), uses=("rw=rw",)),
    Figure("`rwmix_read` / `rwmixread`",
           "direction drawn with the mix's odds, then kept for a run of requests; the share "
           "converges to rwmixread",
           "direction drawn with the mix's odds for every request",
           "same share; fio's runs make it vary ~1.4x more than a binomial", (MIX,),
           uses=("rwmixread",)),
    Figure("`threads` + `thread_layout = region` / `numjobs` + `offset_increment`",
           "job k covers [offset + k x offset_increment, + size)",
           "`size` is the whole range, split into equal bs-aligned slices, one per thread",
           "storlab's size = numjobs x fio's size (fio's is per job)", (OFFSETS, COVERAGE),
           uses=("numjobs",)),
    Figure("`io_size` / `io_size`, `number_ios`",
           "bytes (or requests) per job; past the range it wraps to its start",
           "bytes per thread; past the range it wraps to its start",
           f"{SAME}; number_ios = io_size / bs", (COUNTS, OFFSETS, COVERAGE),
           uses=("io_size", "number_ios")),
    Figure("`offset`, `size` / `offset`, `size`",
           "the job's range [offset, offset + size)",
           "the range [offset, offset + size), shared by the threads",
           f"{SAME} with one thread", (OFFSETS, COVERAGE), uses=("offset=",)),
    Figure("`direct` / `direct`",
           "O_DIRECT", "O_DIRECT", SAME, (COUNTS, OFFSETS), uses=("direct=1",)),
    Figure("`qd` / `iodepth`",
           "requests in flight per job", "requests in flight per thread", SAME, (COUNTS, LAT_ORDER),
           uses=("iodepth",)),
    Figure("(always) / `iomem_align`",
           "the alignment of the I/O buffers; default none for buffered I/O (malloc's, 16 bytes off "
           "the page), the page with `direct=1`",
           "every buffer page-aligned",
           "defaults differ: a cached read is a copy into the buffer, and into a misaligned one it ran "
           "at a third of the rate (fio 3.33, tmpfs, 1 MiB reads: 1.1 GB/s; 4.2 GB/s with "
           "`iomem_align=4096`); every conformance run gives fio `iomem_align=4096`, so both tools "
           "time the same copy", (LAT_MATCH,)),
    Figure("`uring.batch` / `iodepth_batch_submit`",
           "requests queued before one submitting call; default 1: each request is submitted as soon "
           "as it is prepared",
           "requests queued before one submitting call; default 0 = the queue depth: the queue is "
           "filled, then submitted at once (and after each reap, whatever was refilled)",
           "defaults differ (storlab makes fewer system calls); a request's wait for its batch is "
           "slat in both; `--uring-batch 1` is fio's default", (LAT_MATCH,), uses=("iodepth_batch",)),
    Figure("`uring.fixed_buffers` / `fixedbufs`",
           "register the I/O buffers with the ring; default off: the kernel pins each request's pages "
           "on every I/O",
           "`auto` (default): registered where the kernel allows; `on`: required, a refusal is a "
           "warning; `off`: never registered, as fio's default",
           "defaults differ (storlab spends less CPU per request; the requests are the same): "
           "`storlab fio` translates fixedbufs=1 to `on`, fixedbufs=0 to `off`, and says in one line "
           "when an io_uring job leaves it unset; recorded as `FIXED_BUFFERS`, or "
           "`FIXED_BUFFERS_UNAVAILABLE(why)`, in `environment.io_uring.setup_flags`, the mode asked "
           "for in `environment.io_uring.requested`",
           (COUNTS, LAT_ORDER), uses=("ioengine=io_uring",)),
    Figure("`uring.wait_spin` / (none)",
           "a thread that must wait for a completion sleeps in io_uring_enter at once",
           "spins up to 100 µs first (default), polling the ring (and entering the kernel only when "
           "it flags pending completion work), then sleeps; after a wait that outlasted the spin the "
           "next ones sleep at once until one ends within it (every 16th spins again to look); off "
           "where the phase's threads on the host (times the MPI ranks there) outnumber the CPUs",
           "deliberate (the requests are the same; the waiting thread's CPU differs): a sleeping "
           "thread leaves its CPU idle, and on a virtual machine waking it costs the hypervisor's "
           "round trip on every wait, so a fast device waits on the tool; `storlab fio` says so once "
           "for io_uring jobs, `--uring-wait-spin 0` is fio's behaviour; recorded as "
           "`WAIT_SPIN(100us)` or `WAIT_SPIN_OFF(why)` in `environment.io_uring.setup_flags`",
           (COUNTS, LAT_ORDER), uses=("ioengine=io_uring",)),
    Figure("`invalidate` / `invalidate`",
           "drop the file's cached pages before the job (fadvise DONTNEED; BLKFLSBUF for devices)",
           "fsync, then drop the target's cached pages before each phase",
           "storlab flushes dirty pages first so they can be dropped; the flush is not counted as "
           "the job's fsync"),
    Figure("`scramble` / `scramble_buffers`",
           "before each write, every 512-byte sector of the buffer gets its file offset in one of its "
           "first eight cache lines and the issue time (seconds, nanoseconds) at bytes 48..64; default "
           "on; not with verify or refill_buffers",
           "before each write, every 512-byte sector gets its offset in one of its first eight cache "
           "lines and the writer's nonce and write number at bytes 48..64; default on; not with a "
           "stamping verify (its blocks are unique already) or verify=fill; laid-out files too",
           "same purpose and layout; a write number instead of the time, so no two sectors written "
           "in a run are alike whatever the clock's resolution; refill_buffers runs as scramble "
           "(said in one line); tested by hashing every sector written, not against fio"),
)


def render() -> str:
    """The generated section of docs/fio.md, markers included."""
    lines = [BEGIN, "", "| figure (storlab / fio) | fio's definition | storlab's | same or why different | checked by |",
             "|---|---|---|---|---|"]
    for f in FIGURES:
        cases = f.cases()
        checks = ", ".join(f"`{c}`" for c in f.checks)
        if not cases:
            where = "not in this suite"
        elif len(cases) == len(CASES):
            where = f"{checks} in every case"
        else:
            where = f"{checks} in " + ", ".join(f"`{c}`" for c in cases)
        lines.append(f"| {f.figure} | {f.fio} | {f.storlab} | {f.verdict} | {where} |")
    lines += ["", "The cases (`tests/conformance/cases.py`):", "",
              "| case | target | storlab | fio | checks |", "|---|---|---|---|---|"]
    for c in CASES:
        checks = ", ".join(k for k in CHECKS if k in c.checks)
        lines.append(f"| `{c.name}` | {c.where} | `{' '.join(c.storlab)}` | `{' '.join(c.fio)}` | {checks} |")
    lines += ["", END]
    return "\n".join(lines)


def updated(text: str) -> str:
    """TEXT (the page) with its generated section replaced, or appended when it has none."""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        return head + render() + rest.split(END, 1)[1]
    return text.rstrip("\n") + "\n\n" + render() + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        DOC.write_text(updated(DOC.read_text()))
    elif sys.argv[1:]:
        sys.exit("usage: python3 -m tests.conformance.figures [--write]")
    else:
        print(render())
