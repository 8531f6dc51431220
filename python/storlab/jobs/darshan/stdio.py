"""Darshan's STDIO records (fopen/fread/fwrite/fprintf/fseek... on C library streams) as the
POSIX-named request counters synth.py makes a request sequence from.

What the STDIO module counts (darshan-runtime/lib/darshan-stdio.c, darshan-stdio-log-format.h):
STDIO_READS / STDIO_WRITES one per call that moved bytes (fread, fgets, fgetc, fscanf...;
fwrite, fprintf, fputc...), STDIO_BYTES_* their bytes, STDIO_MAX_BYTE_* the furthest byte at the
stream's own position (which reads and writes advance and fseek/rewind/fsetpos set: STDIO_SEEKS),
STDIO_FLUSHES the fflush calls (counted apart from the writes, 0 bytes), STDIO_OPENS the fopens and
fdopens, the F_ timers and timestamps named as POSIX's. No size histogram, no SEQ/CONSEC counts,
no strides: what they leave open is chosen, always the same way (STDIO_CHOICES, docs/replay.md):
- request size: bytes / calls, the remainder one byte more on as many requests (the sizes differ by
  one byte at most, so the bytes add up exactly);
- offsets: a stream moves forward from where its last call ended, from offset 0 (a new stream's
  position; Darshan counts an fdopen'ed stream's offsets from 0 too). When the bytes do not fill
  the recorded extent (STDIO_MAX_BYTE_* + 1), the stream's seeks (STDIO_SEEKS, shared between the
  directions in proportion to their calls) jump forward evenly over the rest, so the requests
  reach the extent; when the bytes exceed it (a file read or written more than once), the stream
  goes back to 0 where the next request would pass the extent (a rewind or a new fopen);
- a stream both read and written: all requests of the direction that started first, then the other;
- a shared record (rank -1): its calls and bytes dealt evenly to the replay ranks, each rank's
  stream in its own equal slice of the extent;
- fflush is not an fsync (it hands the C library's buffer to the kernel): not replayed.

The C library's own buffering is not reproduced: each call replays as one request of its size, so
the replay issues as many system calls as the application made stdio calls (glibc gathers a fully
buffered stream's small fwrites into buffer-sized write calls of st_blksize bytes, often 4 KiB).

The standard streams (<STDIN>, <STDOUT>, <STDERR>) are not files: they are never replayed. Logs
that darshan-convert --obfuscate'd before Darshan 3.4 name them by the hash it gives every name
(lookup3's hashlittle with key 0): those are recognised too.
"""
from __future__ import annotations

from .counters import READ, WRITE
from .synth import MAX_REQUEST, split_evenly

__all__ = ["stdio_as_posix", "stdio_requests", "buffered", "stream_name", "STDIO_CHOICES", "STDIO_BUFFERING",
           "STDIO_COUNTS", "stdio_scaled"]

# darshan-convert --obfuscate (before 3.4) named every record by hashlittle(name, len, 0) in decimal
OBFUSCATED_STREAMS = {"3126844023": "<STDIN>", "3710437467": "<STDOUT>", "3599639208": "<STDERR>"}
STREAMS = ("<STDIN>", "<STDOUT>", "<STDERR>")

STDIO_COUNTS = ("STDIO_OPENS", "STDIO_READS", "STDIO_WRITES", "STDIO_SEEKS", "STDIO_FLUSHES",
                "STDIO_BYTES_READ", "STDIO_BYTES_WRITTEN", "STDIO_MAX_BYTE_READ", "STDIO_MAX_BYTE_WRITTEN")

STDIO_CHOICES = (
    "stdio request sizes: bytes / calls (STDIO has no size histogram), the remainder one byte more on "
    "as many requests",
    "stdio offsets: each stream moves forward from offset 0 where its last call ended; bytes short of "
    "the recorded extent (STDIO_MAX_BYTE_*) are skipped evenly at its seeks; bytes beyond it start the "
    "stream over at 0; a stream read and written does one direction, then the other; a shared "
    "record's calls dealt evenly to the ranks, each in its own slice of the extent",
)
STDIO_BUFFERING = ("each fread/fwrite call replays as one read/write system call of its size; the C "
                   "library's buffering (glibc gathers a fully buffered stream's small calls into "
                   "st_blksize-sized system calls, often 4 KiB) is not reproduced")


def stream_name(path: str) -> str | None:
    """The standard stream a record names (<STDOUT>...), also under an obfuscated name; else None."""
    if path.startswith(STREAMS):
        return path
    return OBFUSCATED_STREAMS.get(path)


def stdio_scaled(c: dict[str, int], scale: float) -> dict[str, int]:
    """The STDIO counters of a record times `scale` (calls, bytes, extents)."""
    out = {k: max(0, int(c.get(k, 0))) for k in STDIO_COUNTS}   # Darshan writes -1 where it kept none
    if scale != 1.0:
        out = {k: int(round(v * scale)) for k, v in out.items()}
    return out


def stdio_as_posix(s: dict[str, int]) -> dict[str, int]:
    """The STDIO counters `s` (stdio_scaled's) with the POSIX names the fidelity table's file classes
    total (calls and bytes): each stream call is one request."""
    return {**s, "POSIX_READS": s["STDIO_READS"], "POSIX_WRITES": s["STDIO_WRITES"],
            "POSIX_BYTES_READ": s["STDIO_BYTES_READ"], "POSIX_BYTES_WRITTEN": s["STDIO_BYTES_WRITTEN"]}


def stdio_requests(s: dict[str, int], f: dict[str, float], parts: int, buffer: int = 0) -> list[list[tuple]]:
    """Per replay rank sharing the record (`parts`), its requests (direction, offset, length) with
    the choices of the module's docstring: one per stream call, or with `buffer` (bytes) the
    system calls a fully buffered glibc stream of that buffer makes for them (`buffered`)."""
    read_first = 0 < f.get("STDIO_F_READ_START_TIMESTAMP", 0.0) < f.get("STDIO_F_WRITE_START_TIMESTAMP", float("inf"))
    order = (READ, WRITE) if read_first else (WRITE, READ)
    calls = {READ: s.get("STDIO_READS", 0), WRITE: s.get("STDIO_WRITES", 0)}
    total = {READ: s.get("STDIO_BYTES_READ", 0), WRITE: s.get("STDIO_BYTES_WRITTEN", 0)}
    extent = {READ: s.get("STDIO_MAX_BYTE_READ", 0) + 1, WRITE: s.get("STDIO_MAX_BYTE_WRITTEN", 0) + 1}
    seeks = {d: s.get("STDIO_SEEKS", 0) * calls[d] // max(1, sum(calls.values())) for d in calls}
    out: list[list[tuple]] = [[] for _ in range(parts)]
    for d in order:
        n = min(calls[d], total[d])                  # every counted call moved a byte at least
        if n <= 0:
            continue
        small, extra = divmod(total[d], n)
        sizes = [small + 1 if i < extra else small for i in range(n)]
        j_parts = split_evenly(seeks[d], parts)
        slice_len = max(1, extent[d] // parts)
        f_parts = split_evenly(s.get("STDIO_FLUSHES", 0) if d == WRITE else 0, parts)
        for p in range(parts):                       # the calls dealt round-robin: the bytes add up
            calls_p = _stream(d, sizes[p::parts], p * slice_len, slice_len, j_parts[p])
            out[p] += buffered(calls_p, buffer, f_parts[p], p * slice_len + slice_len) if buffer > 0 else calls_p
    return out


def buffered(calls: list[tuple], size: int, flushes: int = 0, end: int | None = None) -> list[tuple]:
    """The read/write system calls glibc makes for stream `calls` of one direction through a fully
    buffered stream of `size` bytes (libio's _IO_new_file_xsputn and _IO_file_xsgetn):
    - a write that fits the buffer's free space is copied; one that does not fills the buffer,
      which is written (`size` bytes), then the largest multiple of `size` left goes straight to
      the file, the rest into the buffer (the stream's first write, before glibc has allocated the
      buffer, sends its whole multiples of `size` straight to the file); a seek (a call not where the last ended) and the end
      write out what the buffer holds; `flushes` fflush calls spread evenly over the writes do too;
    - a read is served from the buffer; when it is empty, a read of `size` bytes or more takes the
      largest multiple of `size` straight from the file, a smaller one refills the buffer with one
      read of `size` bytes (not past `end`, the file's end)."""
    out: list[tuple] = []

    def emit(d: str, off: int, n: int) -> None:
        if n > 0:
            out.extend((d, off + k, min(MAX_REQUEST, n - k)) for k in range(0, n, MAX_REQUEST))

    flush_after = {((k + 1) * len(calls)) // flushes - 1 for k in range(flushes)} if flushes and calls else set()
    start = fill = 0          # the buffer: file bytes [start, start + fill)
    allocated = False         # glibc allocates a stream's buffer at its first write
    pos = None                # where the stream is
    for i, (d, off, n) in enumerate(calls):
        if d == WRITE:
            if fill and off != start + fill:
                emit(WRITE, start, fill)
                fill = 0
            if not fill:
                start = off
            if not allocated:                    # no buffer yet: whole buffers straight through, the rest kept
                direct = n - n % size
                emit(WRITE, start, direct)
                start, fill, allocated = start + direct, n % size, True
            elif n < size - fill:
                fill += n
            else:
                rest = n - (size - fill)
                emit(WRITE, start, size)
                direct = rest - rest % size
                emit(WRITE, start + size, direct)
                start, fill = start + size + direct, rest % size
            if i in flush_after and fill:
                emit(WRITE, start, fill)
                start, fill = start + fill, 0
            continue
        if pos != off:                           # a seek: the buffer is dropped
            fill, pos = 0, off
        take = min(n, start + fill - pos) if fill else 0
        want = n - take
        pos += take
        if want >= size:
            direct = want - want % size
            emit(READ, pos, direct)
            pos += direct
            want -= direct
            fill = 0
        if want:
            limit = max(pos + want, min(pos + size, end if end is not None else pos + size))
            emit(READ, pos, limit - pos)
            start, fill = pos, limit - pos
            pos += want
    if fill and calls and calls[-1][0] == WRITE:
        emit(WRITE, start, fill)
    return out


def _stream(d: str, sizes: list[int], base: int, extent: int, seeks: int) -> list[tuple]:
    """Requests of `sizes` moving forward through [base, base + extent) (one longer than the
    engine's largest request, 1 GiB, is split)."""
    n, total = len(sizes), sum(sizes)
    if n == 0:
        return []
    jumps = min(seeks, n - 1)
    gap = (extent - total) // jumps if jumps and total < extent else 0
    every = n // (jumps + 1) if gap else 0
    ops: list[tuple] = []
    pos = 0
    for i, size in enumerate(sizes):
        if every and i and i % every == 0 and i // every <= jumps:
            pos += gap
        if pos and pos + size > extent:
            pos = 0                                  # the stream starts over (a rewind or a new fopen)
        ops += [(d, base + pos + k, min(MAX_REQUEST, size - k)) for k in range(0, size, MAX_REQUEST)]
        pos += size
    return ops
