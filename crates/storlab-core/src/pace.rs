//! Pacing of one worker's issue times: the rate limiter (fio's rate / rate_iops with
//! rate_process=linear) and think time (fio's thinktime, thinktime_spin, thinktime_blocks).
//!
//! The limiter spreads requests evenly: request n of a direction (n counted from 0) may be issued
//! no earlier than n x bs / rate (and n / rate_iops) after the worker's start, fio's
//! `rate_next_io_time`. A worker behind that schedule issues at once (it catches up, as fio does);
//! one ahead of it waits. With requests in flight it waits by reaping completions until the issue
//! time, so the queue depth is kept and completions are timed as usual (fio instead drains the
//! queue before it sleeps). The check per request is two multiplications and a comparison.
//!
//! With rate_process=poisson (fio's) the gaps between a direction's issue times are drawn from an
//! exponential law whose mean is the linear schedule's gap for one request of the smallest size
//! (fio's `usec_for_io`: 1 / iops, iops = rate / min_bs): arrivals of a Poisson process, as
//! independent clients make them, at the same mean rate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::rng::Rng;
use crate::spec::{GroupSpec, RateProcess};
use crate::workload::Dir;

/// Sleep for long waits, spin for short ones (a sleep overshoots by tens of microseconds).
pub fn wait_until(t: Instant) {
    loop {
        let now = Instant::now();
        if now >= t {
            return;
        }
        let left = t - now;
        if left > Duration::from_micros(200) {
            std::thread::sleep(left - Duration::from_micros(100));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// `wait_until` in slices of at most 10 ms, ending early once `stop` is set (Ctrl-C must not wait
/// out a long pause).
pub fn wait_until_or_stop(t: Instant, stop: &AtomicBool) {
    loop {
        let now = Instant::now();
        if now >= t || stop.load(Ordering::Relaxed) {
            return;
        }
        wait_until(t.min(now + Duration::from_millis(10)));
    }
}

/// The rate limiter of one worker: per direction, the issue schedule of its cap(s).
pub struct Pacer {
    pub start: Instant,
    /// Nanoseconds each byte / each request of a direction costs on the schedule (0: no cap).
    ns_per_byte: [f64; 3],
    ns_per_op: [f64; 3],
    bytes: [u64; 3],
    ops: [u64; 3],
    poisson: Option<Poisson>,
}

/// rate_process=poisson: per direction the next issue time and the mean gap, and the draws.
struct Poisson {
    next_ns: [f64; 3],
    mean_gap_ns: [f64; 3],
    rng: Rng,
}

impl Pacer {
    /// A limiter for a group with a rate or rate_iops; None without one. `seed` seeds the
    /// gaps of a Poisson process.
    pub fn new(g: &GroupSpec, start: Instant, seed: u64) -> Option<Pacer> {
        if g.rate.iter().chain(g.rate_iops.iter()).all(|&r| r == 0) {
            return None;
        }
        let per = |r: u64| if r == 0 { 0.0 } else { 1e9 / r as f64 };
        let (ns_per_byte, ns_per_op) = (g.rate.map(per), g.rate_iops.map(per));
        let poisson = (g.rate_process == RateProcess::Poisson).then(|| {
            let min_bs = g.bs as f64; // the unit: the smallest request size (bssplit, bsrange)
            Poisson {
                next_ns: [0.0; 3],
                mean_gap_ns: [0, 1, 2].map(|d| (ns_per_byte[d] * min_bs).max(ns_per_op[d])),
                rng: Rng::new(Rng::derive(seed, 0x9015_5011)),
            }
        });
        Some(Pacer { start, ns_per_byte, ns_per_op, bytes: [0; 3], ops: [0; 3], poisson })
    }

    /// Nanoseconds after the start before which the next request of `dir` may not be issued.
    #[inline(always)]
    pub fn due_ns(&self, dir: Dir) -> u64 {
        let d = dir.index();
        if let Some(p) = &self.poisson {
            return p.next_ns[d] as u64;
        }
        (self.bytes[d] as f64 * self.ns_per_byte[d]).max(self.ops[d] as f64 * self.ns_per_op[d]) as u64
    }

    /// fio's rate_ddir for a mixed pattern: keep `dir` when it is due; else take the other
    /// direction when that one is due; else whichever is due first.
    #[inline]
    pub fn choose(&self, dir: Dir, now_ns: u64) -> Dir {
        let other = if dir == Dir::Read { Dir::Write } else { Dir::Read };
        let (mine, theirs) = (self.due_ns(dir), self.due_ns(other));
        if mine <= now_ns || (theirs > now_ns && mine <= theirs) { dir } else { other }
    }

    /// A request of `dir` and `len` bytes was issued.
    #[inline(always)]
    pub fn issued(&mut self, dir: Dir, len: u64) {
        let d = dir.index();
        self.bytes[d] += len;
        self.ops[d] += 1;
        if let Some(p) = &mut self.poisson {
            // an exponential gap: -ln(u) x mean, u uniform in (0, 1]
            let u = ((p.rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64;
            p.next_ns[d] += -u.ln() * p.mean_gap_ns[d];
        }
    }
}

/// fio's think time: after every `every` requests issued, wait for those in flight, spin for
/// `spin`, then sleep for the rest of the pause.
pub struct Think {
    every: u64,
    spin: Duration,
    sleep: Duration,
    since: u64,
}

impl Think {
    pub fn new(g: &GroupSpec) -> Option<Think> {
        (g.thinktime > 0.0).then(|| Think {
            every: g.thinktime_blocks,
            spin: Duration::from_secs_f64(g.thinktime_spin),
            sleep: Duration::from_secs_f64(g.thinktime - g.thinktime_spin),
            since: 0,
        })
    }

    /// A request was issued.
    #[inline(always)]
    pub fn issued(&mut self) {
        self.since += 1;
    }

    /// A pause is due before the next request.
    #[inline(always)]
    pub fn due(&self) -> bool {
        self.since >= self.every
    }

    /// The pause, ending early at `until` (the run's deadline) or a stop.
    pub fn pause(&mut self, until: Option<Instant>, stop: &AtomicBool) {
        self.since = 0;
        let t0 = Instant::now();
        let cap = |t: Instant| until.map_or(t, |u| t.min(u));
        let spin_end = cap(t0 + self.spin);
        while Instant::now() < spin_end {
            std::hint::spin_loop();
        }
        wait_until_or_stop(cap(spin_end + self.sleep), stop);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(rate: [u64; 3], rate_iops: [u64; 3]) -> GroupSpec {
        GroupSpec { rate, rate_iops, ..Default::default() }
    }

    #[test]
    fn the_schedule_spreads_requests_evenly_per_direction() {
        let mut p = Pacer::new(&group([4096 * 1000, 0, 0], [0, 500, 0]), Instant::now(), 1).unwrap();
        for n in 0..10u64 {
            assert_eq!(p.due_ns(Dir::Read), n * 1_000_000, "read n={n}");
            p.issued(Dir::Read, 4096);
        }
        for n in 0..4u64 {
            assert_eq!(p.due_ns(Dir::Write), n * 2_000_000, "write n={n}");
            p.issued(Dir::Write, 1 << 20);
        }
        assert_eq!(p.due_ns(Dir::Trim), 0, "no cap on trims");
    }

    /// Poisson arrivals: the gaps average the linear schedule's (1 / rate_iops, or bs / rate) and
    /// vary as an exponential law's do (standard deviation = mean); the same seed, the same gaps.
    #[test]
    fn poisson_gaps_are_exponential_with_the_linear_mean() {
        for (rate, iops, bs, mean_ns) in [([0; 3], [2000; 3], 4096, 500_000.0), ([4096 * 1000; 3], [0; 3], 4096, 1_000_000.0)] {
            let g = GroupSpec { rate, rate_iops: iops, bs, rate_process: RateProcess::Poisson, ..Default::default() };
            let mut p = Pacer::new(&g, Instant::now(), 7).unwrap();
            let mut gaps = Vec::new();
            let mut last = p.due_ns(Dir::Read);
            assert_eq!(last, 0, "the first request goes at once");
            for _ in 0..20_000 {
                p.issued(Dir::Read, bs);
                let due = p.due_ns(Dir::Read);
                gaps.push((due - last) as f64);
                last = due;
            }
            let n = gaps.len() as f64;
            let mean = gaps.iter().sum::<f64>() / n;
            let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n).sqrt();
            assert!((mean / mean_ns - 1.0).abs() < 0.03, "mean gap {mean} ns, want {mean_ns}");
            assert!((sd / mean - 1.0).abs() < 0.05, "sd/mean {} (exponential: 1)", sd / mean);
            let mut q = Pacer::new(&g, Instant::now(), 7).unwrap();
            q.issued(Dir::Read, bs);
            let mut r = Pacer::new(&g, Instant::now(), 7).unwrap();
            r.issued(Dir::Read, bs);
            assert_eq!(q.due_ns(Dir::Read), r.due_ns(Dir::Read));
        }
    }

    #[test]
    fn the_tighter_of_rate_and_rate_iops_wins() {
        // 1 MB/s and 100 IOPS with 4 KiB requests: the byte cap allows 244 IOPS, so 100 IOPS binds.
        let mut p = Pacer::new(&group([1_000_000; 3], [100; 3]), Instant::now(), 1).unwrap();
        p.issued(Dir::Read, 4096);
        assert_eq!(p.due_ns(Dir::Read), 10_000_000);
    }

    #[test]
    fn a_mixed_pattern_switches_to_the_direction_that_is_due() {
        let mut p = Pacer::new(&group([0; 3], [1000, 10, 0]), Instant::now(), 1).unwrap();
        p.issued(Dir::Write, 4096); // next write due at 100 ms
        assert_eq!(p.choose(Dir::Write, 1_000), Dir::Read);
        p.issued(Dir::Read, 4096); // next read due at 1 ms
        assert_eq!(p.choose(Dir::Write, 500_000), Dir::Read, "both ahead: the earlier one");
        assert_eq!(p.choose(Dir::Read, 2_000_000), Dir::Read);
        assert!(Pacer::new(&group([0; 3], [0; 3]), Instant::now(), 1).is_none());
    }

    #[test]
    fn think_time_is_due_every_thinktime_blocks_requests() {
        let g = GroupSpec { thinktime: 0.001, thinktime_spin: 0.0005, thinktime_blocks: 3, ..Default::default() };
        let mut t = Think::new(&g).unwrap();
        let stop = AtomicBool::new(false);
        let mut pauses = 0;
        for _ in 0..9 {
            if t.due() {
                t.pause(None, &stop);
                pauses += 1;
            }
            t.issued();
        }
        assert_eq!(pauses, 2, "before requests 4 and 7");
        let t0 = Instant::now();
        t.pause(None, &stop);
        assert!(t0.elapsed() >= Duration::from_millis(1), "the pause lasts thinktime");
        assert!(Think::new(&GroupSpec::default()).is_none());
    }
}
