//! Per-worker statistics and their merge into a phase result. Workers own their counters (no
//! locks, no atomics on the hot path); the phase sums throughput counters and merges latency
//! histograms by bucket addition once all workers are done.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::Serialize;

use crate::histogram::{Histogram, LatencySummary, SCHEME};

/// Columns of a direction's per-interval series: bytes, ops, and the lat, clat, slat sums in ns.
pub const SERIES_COLUMNS: usize = 5;

/// Counters of one direction (read or write) of one worker.
#[derive(Clone, Default)]
pub struct DirStats {
    pub ops: u64,
    pub bytes: u64,
    /// Total latency (fio's `lat`): request prepared to completion reaped.
    pub lat: Histogram,
    /// Completion latency (fio's `clat`): submitting call returned to completion reaped.
    /// Recorded only by asynchronous backends; for blocking ones it equals `lat` (see `DirResult`).
    pub clat: Histogram,
    /// Submission latency (fio's `slat`): request prepared to the submitting call returning.
    /// Recorded only by asynchronous backends; for blocking ones it is zero for every request.
    pub slat: Histogram,
    /// Per interval, indexed by completion time after the ramp: [bytes, ops, lat, clat, slat],
    /// the latencies as sums in ns (mean = sum / ops).
    pub series: Vec<[u64; SERIES_COLUMNS]>,
    /// Requests per size, [size, ops] sorted by size: kept when sizes vary (bssplit, bsrange).
    pub sizes: Vec<[u64; 2]>,
    /// Time to first byte of reads, where the backend measures it (s3: issue to the first byte of
    /// the GET's body); empty otherwise.
    pub ttfb: Histogram,
}

impl DirStats {
    pub fn with_intervals(expected: usize) -> DirStats {
        DirStats { series: Vec::with_capacity(expected), ..Default::default() }
    }

    /// One completed request of a blocking backend: the call was the whole latency.
    #[inline(always)]
    pub fn record(&mut self, bytes: u64, lat_ns: u64, interval: usize) {
        self.ops += 1;
        self.bytes += bytes;
        self.lat.record(lat_ns);
        self.count(bytes, interval, [lat_ns, lat_ns, 0]);
    }

    /// One completed request of an asynchronous backend: submission and completion parts.
    #[inline(always)]
    pub fn record_split(&mut self, bytes: u64, slat_ns: u64, clat_ns: u64, interval: usize) {
        self.ops += 1;
        self.bytes += bytes;
        self.slat.record(slat_ns);
        self.clat.record(clat_ns);
        self.lat.record(slat_ns + clat_ns);
        self.count(bytes, interval, [slat_ns + clat_ns, clat_ns, slat_ns]);
    }

    /// After the last `record` of a blocking backend: its calls were all completion latency, so
    /// clat is lat and slat is zero for every request. Then workers of either kind merge alike.
    pub fn finish_unsplit(&mut self) {
        self.clat = self.lat.clone();
        self.slat = Histogram::new();
        self.slat.record_n(0, self.lat.count());
    }

    /// One more request of `len` bytes in the per-size counts.
    #[inline]
    pub fn count_size(&mut self, len: u64) {
        match self.sizes.binary_search_by_key(&len, |e| e[0]) {
            Ok(i) => self.sizes[i][1] += 1,
            Err(i) => self.sizes.insert(i, [len, 1]),
        }
    }

    #[inline(always)]
    fn count(&mut self, bytes: u64, interval: usize, lat_clat_slat_ns: [u64; 3]) {
        if interval >= self.series.len() {
            // Grows once per interval (about once a second), never per I/O.
            self.series.resize(interval + 1, [0; SERIES_COLUMNS]);
        }
        let s = &mut self.series[interval];
        s[0] += bytes;
        s[1] += 1;
        s[2] += lat_clat_slat_ns[0];
        s[3] += lat_clat_slat_ns[1];
        s[4] += lat_clat_slat_ns[2];
    }

    pub fn merge(&mut self, o: &DirStats) {
        self.ops += o.ops;
        self.bytes += o.bytes;
        self.lat.merge(&o.lat);
        self.clat.merge(&o.clat);
        self.slat.merge(&o.slat);
        self.ttfb.merge(&o.ttfb);
        if o.series.len() > self.series.len() {
            self.series.resize(o.series.len(), [0; SERIES_COLUMNS]);
        }
        for (a, b) in self.series.iter_mut().zip(o.series.iter()) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
        for &[len, ops] in &o.sizes {
            match self.sizes.binary_search_by_key(&len, |e| e[0]) {
                Ok(i) => self.sizes[i][1] += ops,
                Err(i) => self.sizes.insert(i, [len, ops]),
            }
        }
    }
}

/// A worker's cumulative measured bytes over time, sampled every `period` (10 ms to start with;
/// halved in resolution whenever it reaches MAX_POINTS, so memory stays bounded on long runs).
/// Used after the phase to ask "how many bytes did this worker move between t0 and t1" — the
/// de-skewed aggregate across workers, threads or MPI ranks.
#[derive(Clone, Debug)]
pub struct ProgressLog {
    period_ns: u64,
    next_ns: u64,
    /// [time since phase start in ns, cumulative bytes], times increasing.
    points: Vec<[u64; 2]>,
}

const MAX_POINTS: usize = 1 << 16;

impl ProgressLog {
    pub fn new(start_ns: u64) -> ProgressLog {
        let period_ns = 10_000_000;
        let mut points = Vec::with_capacity(1024);
        points.push([start_ns, 0]);
        ProgressLog { period_ns, next_ns: start_ns + period_ns, points }
    }

    #[inline(always)]
    pub fn record(&mut self, t_ns: u64, cumulative_bytes: u64) {
        if t_ns >= self.next_ns {
            self.push(t_ns, cumulative_bytes);
        }
    }

    #[cold]
    fn push(&mut self, t_ns: u64, cumulative_bytes: u64) {
        self.points.push([t_ns, cumulative_bytes]);
        self.next_ns = t_ns + self.period_ns;
        if self.points.len() >= MAX_POINTS {
            // keep the first point and every second one after it; sample half as often from now on
            let kept: Vec<[u64; 2]> = self.points.iter().step_by(2).copied().collect();
            self.points = kept;
            self.period_ns *= 2;
        }
    }

    /// The last point: the worker's end time and total.
    pub fn finish(&mut self, t_ns: u64, cumulative_bytes: u64) {
        if self.points.last().is_some_and(|p| p[0] == t_ns) {
            self.points.pop();
        }
        self.points.push([t_ns, cumulative_bytes]);
    }

    /// Bytes moved by time `t_ns`, linearly interpolated between samples.
    pub fn bytes_at(&self, t_ns: f64) -> f64 {
        let first = self.points[0];
        let last = *self.points.last().unwrap();
        if t_ns <= first[0] as f64 {
            return first[1] as f64;
        }
        if t_ns >= last[0] as f64 {
            return last[1] as f64;
        }
        let i = self.points.partition_point(|p| (p[0] as f64) <= t_ns);
        let (a, b) = (self.points[i - 1], self.points[i]);
        let span = (b[0] - a[0]) as f64;
        a[1] as f64 + (b[1] - a[1]) as f64 * ((t_ns - a[0] as f64) / span)
    }

    /// Bytes moved in [t0, t1] (times in ns since the phase start).
    pub fn bytes_between(&self, t0_ns: f64, t1_ns: f64) -> f64 {
        (self.bytes_at(t1_ns) - self.bytes_at(t0_ns)).max(0.0)
    }
}

/// Live progress of one worker, read by the front end while the phase runs. Padded to its own
/// cache line so workers never share one; written with plain relaxed stores of worker-local totals.
#[repr(align(64))]
#[derive(Default)]
pub struct WorkerProgress {
    pub bytes: AtomicU64,
    pub ops: AtomicU64,
    /// Sum of the completion latencies (ns) of the `ops` completed: a reader's difference of two
    /// readings over the difference of `ops` is the mean clat between them (fio's steadystate lat).
    pub clat_ns: AtomicU64,
    pub done: AtomicBool,
    /// One entry per request slot: what the stall monitor watches.
    pub slots: Box<[SlotWatch]>,
}

/// Issue time of the request in a slot, in ns since the phase start plus 1 (0: slot idle), and its
/// offset. Written by the worker with relaxed stores (offset first; a stale offset next to a fresh
/// time can only mislabel a report, never hide a stall).
#[derive(Default)]
pub struct SlotWatch {
    pub issue_ns: AtomicU64,
    pub offset: AtomicU64,
}

impl WorkerProgress {
    pub fn with_slots(qd: usize) -> WorkerProgress {
        WorkerProgress { slots: (0..qd).map(|_| SlotWatch::default()).collect(), ..Default::default() }
    }

    #[inline(always)]
    pub fn publish(&self, bytes: u64, ops: u64, clat_ns: u64) {
        self.bytes.store(bytes, Ordering::Relaxed);
        self.ops.store(ops, Ordering::Relaxed);
        self.clat_ns.store(clat_ns, Ordering::Relaxed);
    }

    #[inline(always)]
    pub fn issued(&self, slot: u32, issue_ns: u64, offset: u64) {
        let w = &self.slots[slot as usize];
        w.offset.store(offset, Ordering::Relaxed);
        w.issue_ns.store(issue_ns + 1, Ordering::Relaxed);
    }

    #[inline(always)]
    pub fn completed(&self, slot: u32) {
        self.slots[slot as usize].issue_ns.store(0, Ordering::Relaxed);
    }
}

#[derive(Debug, Serialize, Clone)]
pub struct Histo {
    pub scheme: &'static str,
    pub buckets: Vec<[u64; 2]>,
}

impl Histo {
    pub fn of(h: &Histogram) -> Histo {
        Histo { scheme: SCHEME, buckets: h.sparse_buckets() }
    }
}

#[derive(Debug, Serialize, Clone)]
pub struct TimeSeries {
    pub interval_s: f64,
    pub bw_bytes: Vec<f64>,
    pub iops: Vec<f64>,
    /// Mean total, completion and submission latency of the requests completed in each
    /// interval (0 where none did): fio's write_lat_log with log_avg_msec.
    pub lat_mean_ns: Vec<f64>,
    pub clat_mean_ns: Vec<f64>,
    pub slat_mean_ns: Vec<f64>,
}

/// One direction of a phase, as reported (see docs/result-format.md).
#[derive(Debug, Serialize, Clone)]
pub struct DirResult {
    pub bytes: u64,
    pub ops: u64,
    pub seconds: f64,
    pub iops: f64,
    pub bw_bytes: f64,
    /// Total latency per request, slat + clat (fio's `lat`): the figure tables and charts show.
    pub lat_ns: LatencySummary,
    pub lat_hist: Histo,
    /// Completion latency (fio's `clat`): from the submitting call's return to the reaped completion.
    pub clat_ns: LatencySummary,
    pub clat_hist: Histo,
    /// Submission latency (fio's `slat`): from the request being prepared to the submitting call's
    /// return. Zero for blocking backends (psync), whose call is all `clat`.
    pub slat_ns: LatencySummary,
    pub slat_hist: Histo,
    pub timeseries: TimeSeries,
    /// Requests per size when sizes vary (bssplit, bsrange): fio's share of requests per size.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sizes: Vec<SizeCount>,
    /// Time to first byte (reads of s3 targets): from the issue to the first byte of the response
    /// body; absent where the backend does not measure it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttfb_ns: Option<LatencySummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttfb_hist: Option<Histo>,
}

/// The requests of one size in a direction.
#[derive(Debug, Serialize, Clone)]
pub struct SizeCount {
    pub bs: u64,
    pub ops: u64,
    /// Share of the direction's requests, 0..1.
    pub share: f64,
}

impl DirResult {
    /// `seconds` is the phase's measured window; `interval_s` the series interval.
    pub fn from_stats(s: &DirStats, seconds: f64, interval_s: f64) -> DirResult {
        let rate = |x: u64| if seconds > 0.0 { x as f64 / seconds } else { 0.0 };
        DirResult {
            bytes: s.bytes,
            ops: s.ops,
            seconds,
            iops: rate(s.ops),
            bw_bytes: rate(s.bytes),
            lat_ns: s.lat.summary(),
            lat_hist: Histo::of(&s.lat),
            clat_ns: s.clat.summary(),
            clat_hist: Histo::of(&s.clat),
            slat_ns: s.slat.summary(),
            slat_hist: Histo::of(&s.slat),
            timeseries: TimeSeries::of(&s.series, seconds, interval_s),
            sizes: s.sizes.iter().map(|&[bs, ops]| SizeCount { bs, ops, share: if s.ops > 0 { ops as f64 / s.ops as f64 } else { 0.0 } }).collect(),
            ttfb_ns: (s.ttfb.count() > 0).then(|| s.ttfb.summary()),
            ttfb_hist: (s.ttfb.count() > 0).then(|| Histo::of(&s.ttfb)),
        }
    }
}

impl TimeSeries {
    /// Rates per interval. Every interval is full except the last, which ends with the window;
    /// a last remainder shorter than half an interval is folded into the one before it, so a
    /// single late completion cannot show as a spike.
    pub fn of(series: &[[u64; SERIES_COLUMNS]], seconds: f64, interval_s: f64) -> TimeSeries {
        let mut sums: Vec<[u64; SERIES_COLUMNS]> = series.to_vec();
        let mut lengths: Vec<f64> = vec![interval_s; sums.len()];
        if let Some(last) = lengths.last_mut() {
            let remainder = seconds - interval_s * (sums.len() - 1) as f64;
            if remainder > 0.0 && remainder < interval_s {
                *last = remainder;
            }
        }
        if sums.len() >= 2 && lengths[sums.len() - 1] < interval_s / 2.0 {
            let tail = sums.pop().unwrap();
            let tail_len = lengths.pop().unwrap();
            let prev = sums.last_mut().unwrap();
            for (x, y) in prev.iter_mut().zip(tail) {
                *x += y;
            }
            *lengths.last_mut().unwrap() += tail_len;
        }
        TimeSeries {
            interval_s,
            bw_bytes: sums.iter().zip(&lengths).map(|(v, l)| v[0] as f64 / l).collect(),
            iops: sums.iter().zip(&lengths).map(|(v, l)| v[1] as f64 / l).collect(),
            lat_mean_ns: sums.iter().map(|v| mean(v[2], v[1])).collect(),
            clat_mean_ns: sums.iter().map(|v| mean(v[3], v[1])).collect(),
            slat_mean_ns: sums.iter().map(|v| mean(v[4], v[1])).collect(),
        }
    }
}

/// A latency sum over `ops` requests as a mean; 0 without requests.
fn mean(sum_ns: u64, ops: u64) -> f64 {
    if ops == 0 { 0.0 } else { sum_ns as f64 / ops as f64 }
}

/// fsync calls of a phase.
#[derive(Debug, Serialize, Clone)]
pub struct SyncResult {
    pub ops: u64,
    pub lat_ns: LatencySummary,
    pub lat_hist: Histo,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_log_interpolates_and_stays_bounded() {
        let mut log = ProgressLog::new(0);
        // 1 byte per ns for 2 s, sampled at every completion of 1000 ns
        for t in (1000..2_000_000_000u64).step_by(1000) {
            log.record(t, t);
        }
        log.finish(2_000_000_000, 2_000_000_000);
        assert!(log.points.len() < MAX_POINTS);
        assert!((log.bytes_between(0.5e9, 1.5e9) - 1e9).abs() < 1e9 * 1e-6);
        assert_eq!(log.bytes_at(-1.0), 0.0);
        assert_eq!(log.bytes_at(3e9), 2e9);
    }

    #[test]
    fn series_rates_use_real_interval_lengths() {
        // 2.5 s window, 1 s intervals: the last one is half long, so its rate doubles
        let ts = TimeSeries::of(&[[100, 10, 0, 0, 0], [100, 10, 0, 0, 0], [50, 5, 0, 0, 0]], 2.5, 1.0);
        assert_eq!(ts.iops, vec![10.0, 10.0, 10.0]);
        assert_eq!(ts.bw_bytes, vec![100.0, 100.0, 100.0]);
    }

    /// Each interval's mean latencies are those of the requests completed in it; a folded tail's
    /// requests count in the interval it joins; psync's requests are all completion latency.
    #[test]
    fn series_carries_the_mean_latencies_of_each_interval() {
        let mut a = DirStats::default();
        a.record_split(4096, 1_000, 9_000, 0);
        a.record_split(4096, 3_000, 27_000, 0);
        a.record_split(4096, 2_000, 8_000, 2);
        let mut b = DirStats::default();
        b.record(4096, 50_000, 1);
        b.record(4096, 6_000, 2);
        a.merge(&b);
        let ts = TimeSeries::of(&a.series, 3.0, 1.0);
        assert_eq!(ts.lat_mean_ns, vec![20_000.0, 50_000.0, 8_000.0]);
        assert_eq!(ts.clat_mean_ns, vec![18_000.0, 50_000.0, 7_000.0]);
        assert_eq!(ts.slat_mean_ns, vec![2_000.0, 0.0, 1_000.0]);
        let folded = TimeSeries::of(&a.series, 2.2, 1.0);
        assert_eq!(folded.lat_mean_ns, vec![20_000.0, 22_000.0]);
        assert_eq!(TimeSeries::of(&[[0; SERIES_COLUMNS]], 1.0, 1.0).lat_mean_ns, vec![0.0]);
    }

    #[test]
    fn a_tiny_last_interval_is_folded_into_the_previous_one() {
        let ts = TimeSeries::of(&[[1000, 100, 0, 0, 0], [1000, 100, 0, 0, 0], [10, 1, 0, 0, 0]], 2.01, 1.0);
        assert_eq!(ts.iops.len(), 2);
        assert!((ts.iops[1] - 101.0 / 1.01).abs() < 1e-9);
    }
}
