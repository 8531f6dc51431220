"""Tests of storlab.measure.stats: the loglinear6 histogram against the rules in docs/result-format.md and
against exact percentiles of known samples."""
from __future__ import annotations

import json
import math
import random

import pytest
from storlab import _core
from storlab.measure import stats


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


def test_percentile_uses_the_engines_quantile_for_p999():
    # 99.9 / 100 is 0.9990000000000001 in doubles: with n = 1000 that picks rank 1000, the engine
    # (0.999 * 1000 = 999) picks rank 999
    assert stats.quantile_fraction(99.9) == 0.999
    values = list(range(1000, 2000))         # 1000 distinct samples, one per rank
    buckets = stats.histogram(values)
    assert stats.percentile(buckets, 99.9) == stats.bucket_value(stats.index(1998))


def test_merged_percentile_never_exceeds_the_exact_max():
    # regression: MPI merged p99.9 6,652 us against a max of 6,626 us. Two ranks whose largest
    # samples sit low in one wide bucket: the bucket's midpoint lies above every sample in it.
    rank0 = [5_000_000] * 997 + [6_600_000] * 3
    rank1 = [5_000_000] * 997 + [6_626_000] * 3     # bucket [6,619,136, 6,684,672), midpoint 6,651,904
    assert stats.bucket_value(stats.index(6_626_000)) > 6_626_000, "the case needs a midpoint above the max"
    merged = stats.merge(stats.histogram(rank0), stats.histogram(rank1))
    exact_max = max(max(rank0), max(rank1))
    assert stats.percentile(merged, 99.9, 5_000_000, exact_max) <= exact_max
    s = stats.summary(merged, min_ns=5_000_000, max_ns=exact_max)
    assert s["max"] == exact_max and s["min"] == 5_000_000
    assert s["min"] <= s["p50"] <= s["p90"] <= s["p99"] <= s["p999"] <= s["max"]
    assert s["p999"] == exact_max


def test_percentile_is_clamped_up_to_the_exact_min():
    buckets = stats.histogram([1_007_000] * 10)          # midpoint 1,003,520: below the only value
    assert stats.bucket_value(stats.index(1_007_000)) < 1_007_000
    assert stats.percentile(buckets, 50) == 1_003_520     # without bounds: the midpoint
    assert stats.percentile(buckets, 50, 1_007_000, 1_007_000) == 1_007_000


def test_clamp_bounds_out_of_order_are_refused():
    with pytest.raises(ValueError, match="min_ns"):
        stats.percentile([[300, 1]], 50, 10, 5)


def _engine_result(tmp_dir: str, *args: str) -> dict:
    import json
    import os

    from storlab.cli.main import main

    out = os.path.join(tmp_dir, "result.json")
    assert main(["run", "--target", os.path.join(tmp_dir, "x.dat"), *args, "--json", out, "-q", "--no-store"]) == 0
    with open(out) as f:
        return json.load(f)


@pytest.mark.parametrize("args", [
    # 4000 ops: n a multiple of 1000, where a rank off by one would show at p99.9
    ("--size", "16000k", "--bs", "4k", "--rw", "randrw", "--engine", "psync"),
    ("--size", "16000k", "--bs", "4k", "--rw", "read", "--engine", "null", "--null-delay", "20us"),
    ("--size", "8m", "--bs", "4k", "--rw", "randwrite", "--engine", "io_uring", "--qd", "4"),
], ids=["psync-randrw", "null-delay", "io_uring"])
def test_python_summary_of_engine_buckets_equals_the_engines_summary(shm_dir, args):
    doc = _engine_result(shm_dir, *args)
    checked = 0
    for phase in doc["phases"]:
        for d in ("read", "write"):
            side = phase.get(d)
            if not side or not side["ops"]:
                continue
            for key in ("lat", "slat"):
                engine = side.get(f"{key}_ns")
                if not engine or not side.get(f"{key}_hist"):
                    continue
                mine = stats.summary(side[f"{key}_hist"]["buckets"], min_ns=engine["min"], max_ns=engine["max"])
                for k in ("min", "p50", "p90", "p99", "p999", "max"):
                    assert mine[k] == engine[k], (d, key, k, mine[k], engine[k])
                checked += 1
    assert checked >= 1


# --- the same histogram in the engine (crates/storlab-core/src/histogram.rs) ---------------------

EDGES = [0, 1, 127, 128, 129, 255, 256, 1_000_000, 2**40 + 12345, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1]


@pytest.mark.parametrize("seed", [1, 2])
def test_python_and_the_engine_agree_on_buckets_bounds_and_percentiles(seed):
    """The same values through both: identical bucket indices and bounds, the same buckets, and
    the same percentiles (each clamped to the exact min and max, as the engine does)."""
    rng = random.Random(seed)
    values = [int(rng.lognormvariate(math.log(100_000), 1.5)) for _ in range(5000)]
    values += [rng.randrange(0, 128) for _ in range(50)] + EDGES
    quantiles = [0, 1, 10, 50, 90, 99, 99.9, 99.99, 100]
    engine = json.loads(_core.hist_record(values, [stats.quantile_fraction(q) for q in quantiles]))

    assert [stats.index(v) for v in values] == [_core.hist_index(v) for v in values]
    assert stats.histogram(values) == engine["buckets"]
    for i in range(_core.HIST_BUCKETS):
        lower, upper = stats.bucket_bounds(i)
        assert (lower, min(upper, 2**64 - 1)) == _core.hist_bounds(i), i   # the engine's u64 saturates at 2^64
    lo, hi = min(values), max(values)
    assert [stats.percentile(engine["buckets"], q, lo, hi) for q in quantiles] == engine["percentiles"]
    mine = stats.summary(engine["buckets"], lo, hi)
    assert {k: mine[k] for k in ("min", "p50", "p90", "p99", "p999", "max")} == \
        {k: engine["summary"][k] for k in ("min", "p50", "p90", "p99", "p999", "max")}


def test_the_last_buckets_midpoint_is_the_same_in_python_and_the_engine():
    """The engine took the last bucket's midpoint from its upper end saturated at 2^64 - 1, and
    reported 2^56 - 1 above the lower end where Python reports 2^56."""
    last = _core.HIST_BUCKETS - 1
    values = [127 << 57, 2**64 - 1]                 # both ends of the last bucket
    engine = json.loads(_core.hist_record(values, [0.5]))
    assert engine["buckets"] == stats.histogram(values) == [[last, 2]]
    assert engine["percentiles"] == [(127 << 57) + 2**56] == [stats.percentile(engine["buckets"], 50, *values)]
