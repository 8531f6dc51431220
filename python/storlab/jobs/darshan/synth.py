"""A request sequence that has a Darshan record's POSIX counters, made from the counters alone.

Without a DXT trace a record holds totals: request counts and bytes per direction, the size
histogram, the four most common sizes and strides, SEQ and CONSEC counts, read/write switches and
fsyncs. `synthesize` builds requests (direction, offset, length) whose counters, counted as Darshan
counts them (counters.count_ops), equal the record's wherever the record determines them. What it
does not determine is chosen, always the same way (STATED_CHOICES, docs/replay.md):
- sizes: the four common sizes first (in the bins they fall in), the rest of each bin one size
  per bin, placed so that the bytes add up; sizes are spread over the sequence in a seeded order;
- offsets: the first request at offset 0 when the record has non-sequential requests, jumps
  forward by the recorded strides (then by one stride chosen to reach the recorded extent),
  non-sequential requests go back to a seeded position already covered;
- order: one direction after the other in runs that make the recorded switches, starting with
  the direction whose first request came first; fsyncs evenly after the writes;
- a record shared by several ranks: its requests dealt round-robin to the ranks, each rank
  working in its own equal slice of the extent (IOR's segmented file).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from .counters import BINS, READ, SYNC, WRITE, bin_bounds, bin_index

__all__ = ["synthesize", "Synthesis", "STATED_CHOICES", "MAX_REQUEST", "split_evenly"]

MAX_REQUEST = 1 << 30   # the engine's largest request: longer ones are split

STATED_CHOICES = (
    "request sizes the histogram leaves open: one size per bin, chosen so the bytes add up; the "
    "four most common sizes (POSIX_ACCESS1..4) are used first; sizes spread over the sequence in a "
    "seeded order",
    "offsets: sequential requests follow on (CONSEC) or jump forward by the recorded strides "
    "(POSIX_STRIDE1..4), then by one stride chosen to reach the recorded extent; non-sequential "
    "requests go back to a seeded, already covered position",
    "order of reads and writes: runs making the recorded POSIX_RW_SWITCHES, the direction that "
    "started first first; fsyncs spread evenly after the writes",
    "a shared file's requests are dealt round-robin to the ranks, each in its own equal slice of "
    "the file (as IOR's segmented shared file)",
    "no think time: each rank issues its next request when the last one completes",
    "the page cache is left as it is (invalidate = false), as an application finds it; each file is "
    "made at its extent before the first step, and only the bytes the log reads before it writes them "
    "are laid out (the data the file held before the application ran)",
)


@dataclass
class Synthesis:
    parts: list[list[tuple]]                       # per rank sharing the record: its requests
    notes: list[str] = field(default_factory=list)  # what could not be matched, one line each


def split_evenly(total: int, parts: int) -> list[int]:
    base, extra = divmod(max(0, int(total)), parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _sizes(c: dict[str, int], tag: str, dir_name: str, pool: dict[int, int], notes: list[str]) -> list[int]:
    """Request sizes of one direction: n per bin from the histogram, bytes from BYTES_*."""
    counts = [c.get(f"POSIX_SIZE_{tag}_{b}", 0) for b in BINS]
    n = c.get(f"POSIX_{dir_name}", 0)
    if sum(counts) != n and n:
        notes.append(f"{dir_name}: the size bins hold {sum(counts)} requests, not {n}; the bins are used")
    total = c.get("POSIX_BYTES_READ" if tag == "READ" else "POSIX_BYTES_WRITTEN", 0)
    known: list[int] = []
    free = list(counts)
    for size, cnt in sorted(pool.items(), key=lambda kv: -kv[0]):   # largest first: the bytes must fit
        b = bin_index(size)
        take = min(cnt, free[b], (total - sum(known)) // size if size > 0 else 0)
        if take and size > 0:
            known += [size] * take
            free[b] -= take
            pool[size] = cnt - take
    rest = total - sum(known)
    lows = sum(bin_bounds(b)[0] * k for b, k in enumerate(free))
    highs = sum(bin_bounds(b)[1] * k for b, k in enumerate(free))
    if not any(free):
        t = 0.0
    elif rest <= lows:
        t = 0.0
    elif rest >= highs:
        t = 1.0
    else:
        t = (rest - lows) / (highs - lows)
    unknown: list[int] = []
    for b, k in enumerate(free):
        lo, hi = bin_bounds(b)
        unknown += [int(lo + t * (hi - lo))] * k
    # Whole bytes: hand out the remainder one byte at a time within each request's bin.
    residual = rest - sum(unknown)
    i = 0
    while residual > 0 and unknown and i < len(unknown) * 4:
        j = i % len(unknown)
        lo, hi = bin_bounds(bin_index(unknown[j]))
        step = min(residual, hi - unknown[j])
        if step > 0:
            unknown[j] += step
            residual -= step
        i += 1
    sizes = known + unknown
    zero = sum(1 for s in sizes if s <= 0)
    if zero:
        notes.append(f"{dir_name}: {zero} requests of 0 bytes (reads at end of file) cannot be replayed")
    sizes = [s for s in sizes if s > 0]
    got = sum(sizes)
    if total and abs(got - total) > 0.05 * total:
        notes.append(f"{dir_name}: the size bins cannot hold {total} bytes; the sizes give {got}")
    return sizes


def _types(n: int, seq: int, consec: int, first_at_zero: bool) -> list[str]:
    """N (not sequential), J (jump forward), C (consecutive) for n requests. The first is set by
    where the sequence starts; the N and J requests (each starts a new run of consecutive ones)
    are spaced evenly, so equal runs come out equal (IOR's blocks: a jump every block)."""
    seq = min(seq, n)
    consec = min(consec, seq)
    counts = {"N": n - seq, "J": seq - consec, "C": consec}
    if n == 0:
        return []
    first = ("N" if first_at_zero and counts["N"] else "J" if counts["J"] else "C" if counts["C"] else "N")
    counts[first] -= 1
    starts = counts["N"] + counts["J"]          # run starts after the first request
    keyed = sorted([((i + 0.5) / counts["N"], "N") for i in range(counts["N"])] +
                   [((i + 0.5) / counts["J"], "J") for i in range(counts["J"])])
    out = ["C"] * n
    out[0] = first
    where = [(j * n) // (starts + 1) for j in range(1, starts + 1)]
    used = {0}
    for pos, (_, t) in zip(where, keyed):
        while pos in used and pos < n - 1:
            pos += 1
        used.add(pos)
        out[pos] = t
    return out


def _offsets(sizes: list[int], types: list[str], base: int, extent: int, strides: list[int],
             rng: random.Random, align: int = 1) -> list[int]:
    """Offsets for requests of `sizes` and `types` (N, J, C) from `base`, within `extent` where the
    types allow. Jumps take the recorded strides first; then, in a mostly sequential sequence, one
    stride that spreads the rest evenly up to the extent, and in a random one (a tenth or more
    not sequential) a seeded aligned position between the last byte and the extent. Non-sequential
    requests go back to a seeded aligned position already covered."""
    jumps = types.count("J") - (1 if types and types[0] == "J" else 0)
    forward = sum(s for s, t in zip(sizes, types) if t != "N")
    room = max(0, extent - base - forward)       # bytes the jumps may skip in all
    known = sum(strides[:jumps])
    if known > room and known:                   # recorded strides that overshoot the extent: shrunk to fit
        shrink = room / known
        strides[:] = [max(1, int(s * shrink)) for s in strides]
        known = sum(strides[:jumps])
    filler = max(1, (room - known) // max(1, jumps - len(strides))) if jumps > len(strides) else 1
    random_walk = types.count("N") * 10 >= len(types) > 0
    pool = strides   # shared by both directions of a rank: what one uses, the other does not
    up = (lambda x: -(-x // align) * align) if align > 1 else (lambda x: x)
    # ahead[i]: the least room the requests after i need before the next one that goes back (N):
    # each follows on (C) or jumps at least one aligned gap (J)
    ahead = [0] * len(sizes)
    for k in range(len(sizes) - 2, -1, -1):
        nxt = types[k + 1]
        ahead[k] = 0 if nxt == "N" else sizes[k + 1] + (max(align, 1) if nxt == "J" else 0) + ahead[k + 1]
    out = []
    last = 0
    for i, (size, t) in enumerate(zip(sizes, types)):
        if i == 0:
            off = 0 if t == "N" else (1 if t == "C" else max(up(base), up(2)))
        elif t == "C":
            off = last + 1
        elif t == "J":
            lo = up(last + 2)                    # beyond last + 1: sequential, not consecutive
            hi = extent - size - ahead[i]        # the last start that leaves room for the forward requests after it
            hi -= hi % align if align > 1 else 0
            if pool:
                off = up(last + 1 + max(1, pool.pop(0)))
            elif random_walk and hi > lo:
                off = lo + rng.randrange((hi - lo) // align + 1) * align
            else:
                off = up(last + 1 + filler)
            if lo <= hi < off:                   # a jump never carries the requests past the extent
                off = hi
        else:
            lo = base if base <= last else 0
            # back to a covered byte, low enough that the forward requests after it still fit
            cap = extent - size - ahead[i]
            cap -= cap % align if align > 1 else 0
            top = min(last, cap) if cap >= lo else last
            slots = max(1, (top - lo + 1) // max(align, 1))
            off = min(lo + rng.randrange(slots) * align, top) if align > 1 else \
                min(lo + rng.randrange(max(1, (top - lo + 1) // max(1, size))) * max(1, size), top)
            if align > 1 and off % align:
                off -= off % align
        out.append(off)
        last = off + size - 1
    return out


def _runs(first: str, n_first: int, n_second: int, switches: int) -> list[tuple[str, int]]:
    """(direction, count) runs alternating `switches` times (as far as the counts allow)."""
    second = WRITE if first == READ else READ
    if not n_second:
        return [(first, n_first)] if n_first else []
    if not n_first:
        return [(second, n_second)]
    runs_total = min(switches + 1, 2 * min(n_first, n_second) + (1 if n_first > n_second else 0))
    runs_total = max(2, runs_total)
    k_first = (runs_total + 1) // 2
    k_second = runs_total // 2
    if k_first > n_first or k_second > n_second:   # cannot alternate that often: as often as possible
        k_second = min(k_second, n_second)
        k_first = min(k_first, n_first, k_second + 1)
    a = split_evenly(n_first, k_first)
    b = split_evenly(n_second, k_second)
    out = []
    for i in range(k_first):
        out.append((first, a[i]))
        if i < k_second:
            out.append((second, b[i]))
    return out


def synthesize(c: dict[str, int], f: dict[str, float], parts: int, seed: int, log_ranks: int = 1) -> Synthesis:
    """Requests with the counters `c` (fcounters `f` give the order), dealt to `parts` ranks (of
    the log's `log_ranks` that shared the record)."""
    notes: list[str] = []
    rng = random.Random(seed)
    pool = {c.get(f"POSIX_ACCESS{i}_ACCESS", 0): c.get(f"POSIX_ACCESS{i}_COUNT", 0) for i in range(1, 5)
            if c.get(f"POSIX_ACCESS{i}_COUNT", 0)}
    reads = _sizes(c, "READ", "POSIX_READS", pool, notes)
    writes = _sizes(c, "WRITE", "POSIX_WRITES", pool, notes)
    rng.shuffle(reads)
    rng.shuffle(writes)
    strides = []
    for i in range(1, 5):
        s, k = c.get(f"POSIX_STRIDE{i}_STRIDE", 0), c.get(f"POSIX_STRIDE{i}_COUNT", 0)
        if s > 0 and k > 0:
            strides += [s] * k
    rng.shuffle(strides)
    first = READ if reads and (not writes or 0 < f.get("POSIX_F_READ_START_TIMESTAMP", 0) <
                               f.get("POSIX_F_WRITE_START_TIMESTAMP", float("inf"))) else WRITE
    seqs = {READ: _seq_shares(len(reads), c.get("POSIX_SEQ_READS", 0), parts),
            WRITE: _seq_shares(len(writes), c.get("POSIX_SEQ_WRITES", 0), parts)}
    cons = {READ: _capped_shares(c.get("POSIX_CONSEC_READS", 0), [max(0, k - (p > 0)) for p, k in enumerate(seqs[READ])]),
            WRITE: _capped_shares(c.get("POSIX_CONSEC_WRITES", 0), [max(0, k - (p > 0)) for p, k in enumerate(seqs[WRITE])])}
    switches, firsts = _share_switches(c.get("POSIX_RW_SWITCHES", 0), [len(reads[p::parts]) for p in range(parts)],
                                       [len(writes[p::parts]) for p in range(parts)], first)
    syncs = split_evenly(c.get("POSIX_FSYNCS", 0) + c.get("POSIX_FDSYNCS", 0), parts)
    extents = {READ: c.get("POSIX_MAX_BYTE_READ", 0) + 1, WRITE: c.get("POSIX_MAX_BYTE_WRITTEN", 0) + 1}
    # A shared record with recorded strides: the ranks interleaved their requests (IOR's segments):
    # rank p starts one request in, and a stride over the other ranks' requests shrinks with fewer ranks.
    interleaved = parts > 1 and bool(strides)
    # The block each rank owns per segment: the commonest stride skips the other ranks' blocks.
    main_stride = max(((c.get(f"POSIX_STRIDE{i}_COUNT", 0), c.get(f"POSIX_STRIDE{i}_STRIDE", 0)) for i in range(1, 5)
                       if c.get(f"POSIX_STRIDE{i}_STRIDE", 0) > 0), default=(0, 0))[1]
    block = main_stride // (log_ranks - 1) if log_ranks > 1 else 0
    if interleaved and log_ranks > parts:
        strides = [max(1, s * (parts - 1) // (log_ranks - 1)) for s in strides]
        notes.append(f"strides scaled by {parts - 1}/{log_ranks - 1}: {log_ranks} ranks' interleaved requests "
                     f"replayed by {parts}")
    mean_size = {d: (sum(v) // len(v) if v else 0) for d, v in ((READ, reads), (WRITE, writes))}
    stride_parts = [strides[p::parts] for p in range(parts)]
    # Every request was aligned to the file system's block (POSIX_FILE_NOT_ALIGNED = 0): so are ours.
    align = c.get("POSIX_FILE_ALIGNMENT", 0) if c.get("POSIX_FILE_NOT_ALIGNED", 0) == 0 else 1
    align = align if 1 < align <= 1 << 20 else 1
    out: list[list[tuple]] = []
    for p in range(parts):
        per_dir = {}
        pool_p = list(stride_parts[p])
        for d, sizes in ((READ, reads[p::parts]), (WRITE, writes[p::parts])):
            if interleaved:
                base, end = p * (block or mean_size[d]), extents[d]
            else:
                slice_len = extents[d] // parts
                base, end = p * slice_len, (p + 1) * slice_len
            types = _types(len(sizes), seqs[d][p], cons[d][p], first_at_zero=base == 0)
            offs = _offsets(sizes, types, base, end, pool_p, rng, align)
            per_dir[d] = list(zip(offs, sizes))
        n_r, n_w = len(per_dir[READ]), len(per_dir[WRITE])
        second_first = firsts[p] if (n_r and n_w) else (READ if n_r else WRITE)
        runs = _runs(second_first, n_r if second_first == READ else n_w, n_w if second_first == READ else n_r,
                     switches[p])
        ops: list[tuple] = []
        pos = {READ: 0, WRITE: 0}
        for d, k in runs:
            for off, size in per_dir[d][pos[d]:pos[d] + k]:
                ops += _split((d, off, size))
            pos[d] += k
        out.append(_with_syncs(ops, syncs[p]))
    return Synthesis(out, notes)


def _seq_shares(n: int, seq: int, parts: int) -> list[int]:
    """SEQ per rank: the non-sequential requests (n - seq) dealt first to rank 0, whose slice
    starts at offset 0 (a first request there is not sequential: Darshan's last byte starts at 0),
    then evenly."""
    counts = [len(range(p, n, parts)) for p in range(parts)]
    nonseq = max(0, n - seq)
    ns = [0] * parts
    if nonseq and counts and counts[0]:
        ns[0] = 1
        nonseq -= 1
    for p, k in enumerate(split_evenly(nonseq, parts)):
        ns[p] += k
    # what a rank cannot hold goes to the others
    spill = 0
    for p in range(parts):
        spill += max(0, ns[p] - counts[p])
        ns[p] = min(ns[p], counts[p])
    for p in range(parts):
        extra = min(spill, counts[p] - ns[p])
        ns[p] += extra
        spill -= extra
    return [counts[p] - ns[p] for p in range(parts)]


def _capped_shares(total: int, caps: list[int]) -> list[int]:
    """`total` dealt evenly, no share above its cap, what one cannot hold to the others."""
    share = [min(s, cap) for s, cap in zip(split_evenly(total, len(caps)), caps)]
    left = total - sum(share)
    for i, cap in enumerate(caps):
        extra = min(left, cap - share[i])
        share[i] += extra
        left -= extra
    return share


def _most_switches(first_n: int, second_n: int) -> int:
    if not first_n or not second_n:
        return 0
    return (2 * second_n + 1 if first_n > second_n else 2 * first_n) - 1


def _share_switches(total: int, n_reads: list[int], n_writes: list[int], first: str) -> tuple[list[int], list[str]]:
    """The record's switches dealt to its ranks, and the direction each rank starts with: rank 0
    the record's first; another rank the other one when that lets it alternate more often."""
    other = WRITE if first == READ else READ
    caps, firsts = [], []
    for p, (r, w) in enumerate(zip(n_reads, n_writes)):
        own = _most_switches(r, w) if first == READ else _most_switches(w, r)
        alt = _most_switches(w, r) if first == READ else _most_switches(r, w)
        use_alt = p > 0 and alt > own
        caps.append(alt if use_alt else own)
        firsts.append(other if use_alt else first)
    return _capped_shares(total, caps), firsts


def _split(op: tuple) -> list[tuple]:
    d, off, size = op
    if size <= MAX_REQUEST:
        return [op]
    return [(d, off + k, min(MAX_REQUEST, size - k)) for k in range(0, size, MAX_REQUEST)]


def _with_syncs(ops: list[tuple], n_syncs: int) -> list[tuple]:
    if not n_syncs:
        return ops
    write_pos = [i for i, op in enumerate(ops) if op[0] == WRITE]
    if not write_pos:
        return ops + [(SYNC, 0, 0)] * n_syncs
    # The engine does one fsync between two requests however many are asked: at most one per write.
    n_syncs = min(n_syncs, len(write_pos))
    after: dict[int, int] = {}
    for k in range(n_syncs):
        idx = write_pos[min(len(write_pos) - 1, ((k + 1) * len(write_pos)) // n_syncs - 1)]
        after[idx] = after.get(idx, 0) + 1
    out = []
    for i, op in enumerate(ops):
        out.append(op)
        out += [(SYNC, 0, 0)] * after.get(i, 0)
    return out
