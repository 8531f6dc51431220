"""Python side of the `loglinear6` latency histogram (docs/result-format.md): bucket index and bounds,
merging, percentiles, summaries and CDFs computed from the raw buckets kept in results.

Values are nanoseconds. Buckets are lists of `[index, count]` pairs, as stored in `lat_hist.buckets`.
Every percentile is the midpoint of the bucket holding the sample of that rank, so its relative
error is at most 1/128 (0.78 %); values below 128 ns are exact. Given the exact min and max (the
engine's, or the extremes over merged parts), a percentile is clamped to them, exactly as the
engine's `Histogram::percentile` does: a bucket midpoint can otherwise lie above the largest sample
in its bucket (p99.9 6,652 us against a max of 6,626 us).
"""
from __future__ import annotations

import math
from decimal import Decimal
from typing import Iterable, Sequence

__all__ = [
    "SCHEME", "EXACT_LIMIT", "index", "bucket_bounds", "bucket_value", "histogram", "merge",
    "count", "quantile_fraction", "percentile", "summary", "cdf",
]

SCHEME = "loglinear6"
SUB_BITS = 6                      # 64 linear sub-buckets per power of two
EXACT_LIMIT = 2 << SUB_BITS       # 128: values below this have their own bucket

Buckets = Sequence[Sequence[int]]


def index(v: int) -> int:
    """Bucket index of a latency `v` in nanoseconds (v >= 0)."""
    v = int(v)
    if v < 0:
        raise ValueError(f"latency: must not be negative, got {v}")
    if v < EXACT_LIMIT:
        return v
    shift = v.bit_length() - 1 - SUB_BITS
    return (shift + 1) * 64 + ((v >> shift) & 63)


def bucket_bounds(i: int) -> tuple[int, int]:
    """Half-open range `[lower, upper)` of nanosecond values that fall in bucket `i`."""
    i = int(i)
    if i < 0:
        raise ValueError(f"bucket index: must not be negative, got {i}")
    if i < EXACT_LIMIT:
        return i, i + 1
    shift = i // 64 - 1
    lower = (64 + i % 64) << shift
    return lower, lower + (1 << shift)


def bucket_value(i: int) -> int:
    """Representative value of bucket `i`, as the engine reports it (crates/storlab-core
    histogram.rs `representative`): the value itself for a unit-width bucket, else
    lower + width / 2, at most 1/128 of the value away from any member."""
    lower, upper = bucket_bounds(i)
    return lower if upper - lower == 1 else lower + (upper - lower) // 2


def histogram(values_ns: Iterable[int]) -> list[list[int]]:
    """Buckets of a list of latencies (used to build fixtures and in tests)."""
    counts: dict[int, int] = {}
    for v in values_ns:
        i = index(v)
        counts[i] = counts.get(i, 0) + 1
    return [[i, counts[i]] for i in sorted(counts)]


def _checked(buckets: Buckets) -> list[tuple[int, int]]:
    out = []
    for pair in buckets:
        if len(pair) != 2:
            raise ValueError(f"histogram buckets: expected [index, count] pairs, got {pair!r}")
        i, c = int(pair[0]), int(pair[1])
        if i < 0 or c < 0:
            raise ValueError(f"histogram buckets: index and count must not be negative, got {pair!r}")
        if c:
            out.append((i, c))
    out.sort()
    return out


def merge(*bucket_lists: Buckets) -> list[list[int]]:
    """Bucket-wise sum of several histograms (threads, passes, ranks): exact, order-independent."""
    counts: dict[int, int] = {}
    for buckets in bucket_lists:
        for i, c in _checked(buckets):
            counts[i] = counts.get(i, 0) + c
    return [[i, counts[i]] for i in sorted(counts)]


def count(buckets: Buckets) -> int:
    """Number of samples in a histogram."""
    return sum(c for _, c in _checked(buckets))


def quantile_fraction(q: float) -> float:
    """The engine's quantile for percentile `q` (0..100): the double nearest to q/100 as written in
    decimal, so 99.9 gives the literal 0.999 the engine uses (plain 99.9 / 100 is 0.9990000000000001,
    which moves the rank by one whenever n is a multiple of 1000)."""
    return float(Decimal(repr(float(q))) / 100)


def percentile(buckets: Buckets, q: float, min_ns: float | None = None,
               max_ns: float | None = None) -> int | None:
    """Latency (ns) at percentile `q` (0..100, e.g. 99.9), nearest rank; None when empty.

    The rank is ceil(q/100 * n), between 1 and n, as for an exact nearest-rank percentile of the
    samples; the value returned is the midpoint of the bucket holding that sample, clamped to the
    exact `min_ns`/`max_ns` when given. This is crates/storlab-core histogram.rs `percentile` step
    for step (tests/test_stats.py checks both agree on the engine's own buckets).
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile: q must be between 0 and 100, got {q!r}")
    pairs = _checked(buckets)
    n = sum(c for _, c in pairs)
    if n == 0:
        return None
    rank = min(n, max(1, math.ceil(quantile_fraction(q) * n)))
    seen = 0
    value = bucket_value(pairs[-1][0])
    for i, c in pairs:
        seen += c
        if seen >= rank:
            value = bucket_value(i)
            break
    return _clamped(value, min_ns, max_ns)


def _clamped(value: int, min_ns: float | None, max_ns: float | None) -> int:
    if min_ns is not None and max_ns is not None and min_ns > max_ns:
        raise ValueError(f"percentile: min_ns {min_ns} is above max_ns {max_ns}")
    if min_ns is not None and value < min_ns:
        value = min_ns
    if max_ns is not None and value > max_ns:
        value = max_ns
    return value


def summary(buckets: Buckets, min_ns: float | None = None,
            max_ns: float | None = None) -> dict[str, float | None]:
    """{min, mean, stddev, p50, p90, p99, p999, max} in ns from the buckets.

    With the exact `min_ns` and `max_ns` (the engine's, or the extremes over the merged parts) min
    and max are those and every percentile is clamped to them, as the engine's summary is; without
    them min and max are the first and last buckets' values. mean and stddev are the histogram's
    estimates (the engine's exact ones combine with the pooled formulas in passes.py and
    mpi/aggregate.py); stddev is the sample standard deviation (n - 1), as the engine computes it.
    """
    pairs = _checked(buckets)
    keys = ("min", "mean", "stddev", "p50", "p90", "p99", "p999", "max")
    n = sum(c for _, c in pairs)
    if n == 0:
        return {k: None for k in keys}
    lo = bucket_value(pairs[0][0]) if min_ns is None else min_ns
    hi = bucket_value(pairs[-1][0]) if max_ns is None else max_ns
    mean = sum(bucket_value(i) * c for i, c in pairs) / n
    var = sum(c * (bucket_value(i) - mean) ** 2 for i, c in pairs) / (n - 1) if n > 1 else 0.0
    return {
        "min": lo,
        "mean": mean,
        "stddev": math.sqrt(var),
        "p50": percentile(pairs, 50, lo, hi),
        "p90": percentile(pairs, 90, lo, hi),
        "p99": percentile(pairs, 99, lo, hi),
        "p999": percentile(pairs, 99.9, lo, hi),
        "max": hi,
    }


def cdf(buckets: Buckets) -> list[tuple[float, float]]:
    """Cumulative distribution: (latency_ns at the bucket's upper end, fraction of samples <= it)."""
    pairs = _checked(buckets)
    n = sum(c for _, c in pairs)
    out: list[tuple[float, float]] = []
    seen = 0
    for i, c in pairs:
        seen += c
        out.append((float(bucket_bounds(i)[1] - 1), seen / n))
    return out
