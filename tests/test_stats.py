"""Tests of storlab.stats: the loglinear6 histogram against the rules in docs/result-format.md and
against exact percentiles of known samples."""
from __future__ import annotations

import math
import random

import pytest

from storlab import stats


def exact_percentile(values, q):
    """Nearest-rank percentile of the raw samples."""
    s = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(s)))
    return s[rank - 1]


def test_index_matches_the_documented_formula_at_known_points():
    assert stats.index(0) == 0
    assert stats.index(127) == 127
    assert stats.index(128) == 128            # shift 1: (1+1)*64 + (64 & 63)
    assert stats.index(129) == 128            # same bucket of width 2
    assert stats.index(130) == 129
    assert stats.index(255) == 191
    assert stats.index(256) == 192            # shift 2
    assert stats.index(1_000_000) == (13 + 1) * 64 + ((1_000_000 >> 13) & 63)


def test_every_value_lies_in_its_bucket_and_buckets_tile_the_line():
    for v in list(range(0, 5000)) + [2**k + d for k in range(12, 40) for d in (-1, 0, 1)]:
        lo, hi = stats.bucket_bounds(stats.index(v))
        assert lo <= v < hi, v
    for i in range(0, 64 * 40):
        assert stats.bucket_bounds(i)[1] == stats.bucket_bounds(i + 1)[0], i


def test_bucket_relative_width_is_at_most_one_in_64():
    for i in range(128, 64 * 40):
        lo, hi = stats.bucket_bounds(i)
        assert (hi - lo) / lo <= 1 / 64


def test_negative_values_are_refused():
    with pytest.raises(ValueError, match="latency"):
        stats.index(-1)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentiles_within_one_percent_of_exact(seed):
    rng = random.Random(seed)
    # log-normal around 100 us with a long tail, plus a few sub-128 ns values
    values = [int(rng.lognormvariate(math.log(100_000), 1.0)) for _ in range(20000)]
    values += [rng.randrange(0, 128) for _ in range(50)]
    buckets = stats.histogram(values)
    for q in (1, 10, 50, 90, 99, 99.9, 99.99, 100):
        exact = exact_percentile(values, q)
        approx = stats.percentile(buckets, q)
        assert abs(approx - exact) <= 0.01 * exact + 0.5, (q, exact, approx)


def test_bucket_value_is_the_engines_representative():
    assert stats.bucket_value(100) == 100                 # unit width: the value itself
    assert stats.bucket_bounds(128) == (128, 130)
    assert stats.bucket_value(128) == 129                 # lower + width / 2
    lo, hi = stats.bucket_bounds(1000)
    assert stats.bucket_value(1000) == lo + (hi - lo) // 2


def test_small_values_are_exact():
    buckets = stats.histogram([5, 7, 7, 9, 100])
    assert stats.percentile(buckets, 50) == 7
    assert stats.percentile(buckets, 100) == 100
    assert stats.percentile(buckets, 0) == 5


def test_summary_approximates_mean_min_max():
    rng = random.Random(7)
    values = [rng.randrange(1000, 10_000_000) for _ in range(5000)]
    s = stats.summary(stats.histogram(values))
    assert s["min"] == pytest.approx(min(values), rel=0.01)
    assert s["max"] == pytest.approx(max(values), rel=0.01)
    assert s["mean"] == pytest.approx(sum(values) / len(values), rel=0.01)
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    assert s["stddev"] == pytest.approx(sd, rel=0.01)
    assert s["p999"] == pytest.approx(exact_percentile(values, 99.9), rel=0.01)


def test_merge_equals_histogram_of_all_samples():
    rng = random.Random(11)
    a = [rng.randrange(0, 10**7) for _ in range(3000)]
    b = [rng.randrange(0, 10**5) for _ in range(1000)]
    merged = stats.merge(stats.histogram(a), stats.histogram(b))
    assert merged == stats.histogram(a + b)
    assert stats.count(merged) == 4000
    # order-independent, and unsorted input with zero counts is accepted
    assert stats.merge(stats.histogram(b), stats.histogram(a)) == merged
    assert stats.merge([[300, 2], [5, 0], [10, 1]]) == [[10, 1], [300, 2]]


def test_empty_histogram():
    assert stats.percentile([], 50) is None
    assert stats.summary([])["p99"] is None
    assert stats.cdf([]) == []


def test_cdf_ends_at_one_and_is_monotonic():
    buckets = stats.histogram([10, 200, 200, 5000, 70000])
    points = stats.cdf(buckets)
    assert points[-1][1] == 1.0
    assert [p[0] for p in points] == sorted(p[0] for p in points)
    assert points[0] == (10.0, 0.2)


def test_bad_buckets_and_bad_q_name_the_problem():
    with pytest.raises(ValueError, match="pairs"):
        stats.merge([[1, 2, 3]])
    with pytest.raises(ValueError, match="between 0 and 100"):
        stats.percentile([[1, 1]], 101)
