//! Log-linear latency histogram (after fio's stat.c): exact below 128 ns, then 64 linear
//! sub-buckets per power of two, so any value is known to within 1/128 (0.78 %) when reported as
//! its bucket midpoint. Each worker owns one without locks; merging is bucket-wise addition plus the
//! parallel mean/variance formula, so percentiles of merged histograms are exact re-computations.
//!
//! The bucket scheme is called `loglinear6` in results; python/storlab/measure/stats.py mirrors `index`
//! and `bounds`, and a test checks both sides agree.

use serde::Serialize;

/// Sub-bucket bits: 2^6 = 64 linear buckets per power of two.
pub const SUB_BITS: u32 = 6;
const SUB_COUNT: u64 = 1 << SUB_BITS;
/// Number of buckets covering the whole u64 range.
pub const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB_COUNT as usize;
pub const SCHEME: &str = "loglinear6";

/// Bucket index of a value.
#[inline(always)]
pub fn index(v: u64) -> usize {
    if v < 2 * SUB_COUNT {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    (((shift + 1) as u64) * SUB_COUNT + ((v >> shift) & (SUB_COUNT - 1))) as usize
}

/// Lower end and width of a bucket.
fn lower_and_width(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < 2 * SUB_COUNT {
        return (i, 1);
    }
    let shift = i / SUB_COUNT - 1;
    ((SUB_COUNT + i % SUB_COUNT) << shift, 1u64 << shift)
}

/// Half-open value range `[lower, upper)` of a bucket. The last bucket's upper end, 2^64, is
/// given as u64::MAX.
pub fn bounds(i: usize) -> (u64, u64) {
    let (lower, width) = lower_and_width(i);
    (lower, lower.saturating_add(width))
}

/// The value reported for a bucket: its midpoint, lower + width / 2 (exact for the unit-width
/// buckets). From the width, not `bounds`, so the last bucket's midpoint is not cut by the
/// saturated upper end.
pub fn representative(i: usize) -> u64 {
    let (lower, width) = lower_and_width(i);
    lower + width / 2
}

/// Latency histogram plus exact min/max/mean/variance (Welford), all in nanoseconds.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64]>,
    count: u64,
    min: u64,
    max: u64,
    mean: f64,
    m2: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    pub fn new() -> Self {
        Histogram {
            counts: vec![0u64; BUCKETS].into_boxed_slice(),
            count: 0,
            min: u64::MAX,
            max: 0,
            mean: 0.0,
            m2: 0.0,
        }
    }

    /// Record one value. Called once per I/O: no allocation, no branches beyond min/max.
    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        // SAFETY of the index: `index` maps every u64 below BUCKETS (checked in tests).
        self.counts[index(v)] += 1;
        self.count += 1;
        if v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
        let x = v as f64;
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// Record `n` copies of one value at once (e.g. the zero submission latency of each request of
    /// a blocking backend). Exact: the same state as `n` calls of `record(v)`.
    pub fn record_n(&mut self, v: u64, n: u64) {
        if n == 0 {
            return;
        }
        let mut same = Histogram::new();
        same.counts[index(v)] = n;
        same.count = n;
        same.min = v;
        same.max = v;
        same.mean = v as f64;
        self.merge(&same);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Add another histogram into this one (bucket addition; Chan et al. for mean and variance).
    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += *b;
        }
        let n_a = self.count as f64;
        let n_b = other.count as f64;
        let n = n_a + n_b;
        let delta = other.mean - self.mean;
        self.mean += delta * n_b / n;
        self.m2 += other.m2 + delta * delta * n_a * n_b / n;
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Value at quantile `q` in [0, 1]: the midpoint of the bucket holding the ceil(q*n)-th value,
    /// clamped to the exact min and max.
    pub fn percentile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return representative(i).clamp(self.min, self.max);
            }
        }
        self.max
    }

    pub fn summary(&self) -> LatencySummary {
        if self.count == 0 {
            return LatencySummary::default();
        }
        let variance = if self.count > 1 { self.m2 / (self.count - 1) as f64 } else { 0.0 };
        LatencySummary {
            min: self.min,
            mean: self.mean,
            stddev: variance.sqrt(),
            p50: self.percentile(0.50),
            p90: self.percentile(0.90),
            p99: self.percentile(0.99),
            p999: self.percentile(0.999),
            max: self.max,
        }
    }

    /// Non-empty buckets as `[index, count]` pairs, for results and later re-merging.
    pub fn sparse_buckets(&self) -> Vec<[u64; 2]> {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| [i as u64, c])
            .collect()
    }
}

/// Latency statistics in nanoseconds.
#[derive(Debug, Default, Clone, Serialize, PartialEq)]
pub struct LatencySummary {
    pub min: u64,
    pub mean: f64,
    pub stddev: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_is_continuous_and_monotonic() {
        let mut prev = 0usize;
        for v in 0u64..200_000 {
            let i = index(v);
            assert!(i == prev || i == prev + 1, "jump at {v}: {prev} -> {i}");
            let (lo, hi) = bounds(i);
            assert!(lo <= v && v < hi, "{v} outside bucket {i} [{lo},{hi})");
            prev = i;
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1);
        assert_eq!(bounds(BUCKETS - 1).0, 127u64 << 57);
    }

    #[test]
    fn bucket_width_bounds_relative_error() {
        for shift in 0..57u32 {
            for sub in [0u64, 1, 31, 63] {
                let v = (64 + sub) << (shift + 1);
                let rep = representative(index(v)) as f64;
                let err = (rep - v as f64).abs() / v as f64;
                assert!(err <= 1.0 / 128.0 + 1e-12, "v={v} rep={rep} err={err}");
            }
        }
    }

    /// Percentiles of a known, skewed sample stay within 1 % of the exact order statistics.
    #[test]
    fn percentiles_within_one_percent_of_exact() {
        let mut samples: Vec<u64> = Vec::new();
        let mut x: u64 = 0x9E3779B97F4A7C15;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // log-uniform between 1 us and ~16 ms, like real I/O latencies
            let exp = 10 + (x % 14);
            samples.push((1u64 << exp) + (x >> 40) % (1u64 << exp));
        }
        let mut h = Histogram::new();
        samples.iter().for_each(|&v| h.record(v));
        samples.sort_unstable();
        for q in [0.5, 0.9, 0.99, 0.999] {
            let exact = samples[((q * samples.len() as f64).ceil() as usize) - 1] as f64;
            let got = h.percentile(q) as f64;
            assert!((got - exact).abs() / exact <= 0.01, "q={q}: got {got}, exact {exact}");
        }
        let mean = samples.iter().map(|&v| v as f64).sum::<f64>() / samples.len() as f64;
        assert!((h.summary().mean - mean).abs() / mean < 1e-9);
    }

    #[test]
    fn record_n_equals_n_single_records() {
        let mut one_by_one = Histogram::new();
        let mut at_once = Histogram::new();
        for v in [5u64, 900, 12_345] {
            one_by_one.record(v);
            at_once.record(v);
        }
        for _ in 0..1000 {
            one_by_one.record(0);
        }
        at_once.record_n(0, 1000);
        at_once.record_n(77, 0);
        assert_eq!(one_by_one.sparse_buckets(), at_once.sparse_buckets());
        let (a, b) = (one_by_one.summary(), at_once.summary());
        assert_eq!((a.min, a.max, a.p50, a.p99), (b.min, b.max, b.p50, b.p99));
        assert!((a.mean - b.mean).abs() < 1e-9 && (a.stddev - b.stddev).abs() < 1e-6, "{a:?} {b:?}");
    }

    #[test]
    fn merge_equals_histogram_of_all_samples() {
        let (mut a, mut b, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
        for v in 1..5000u64 {
            let v = v * v;
            if v % 3 == 0 { a.record(v) } else { b.record(v) }
            all.record(v);
        }
        a.merge(&b);
        assert_eq!(a.sparse_buckets(), all.sparse_buckets());
        let (sa, sall) = (a.summary(), all.summary());
        assert_eq!((sa.min, sa.max, sa.p50, sa.p999), (sall.min, sall.max, sall.p50, sall.p999));
        assert!((sa.mean - sall.mean).abs() / sall.mean < 1e-12);
        assert!((sa.stddev - sall.stddev).abs() / sall.stddev < 1e-9);
    }
}
