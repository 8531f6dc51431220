//! fio's `random_distribution`: which blocks random I/O favours. This module owns the option's
//! one rule (parsing, validation, canonical text; Python asks it through `_core`) and the samplers
//! that draw a block from a skewed law. The uniform law is not sampled here: workload.rs visits
//! every block once per pass with a permutation, or draws with repeats when the map is off.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::rng::Rng;

/// The forms `random_distribution` accepts, for error messages and help.
pub const FORMS: &str = "random (uniform), zipf[:theta[:center]] (theta > 0, default 1.1), \
pareto[:h[:center]] (0 < h < 1, default 0.2), normal[:sigma[:center]] (0 <= sigma < 100, in % of the range, \
default 0), zoned:A/R[:A/R...] (access %/range % per zone, each column summing to 100); center in [0, 1]";

/// One zone of a zoned distribution: `access_pct` % of the I/O goes to the next `range_pct` % of
/// the blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zone {
    pub access_pct: u8,
    pub range_pct: u8,
}

/// fio's random distributions, with fio's names and parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum RandomDistribution {
    /// fio's `random`: every block equally likely.
    #[default]
    Uniform,
    /// Block of popularity rank k (1-based) drawn with probability k^-theta / H(n, theta).
    Zipf { theta: f64, center: Option<f64> },
    /// fio's Pareto: rank floor((n-1) * u^(ln h / ln(1-h))), u uniform in [0, 1).
    Pareto { h: f64, center: Option<f64> },
    /// fio's "normal": the mean of 12 uniform draws over [0, n] (a bell, sd about n/12) plus a
    /// uniform deviation of width sigma % of the range.
    Normal { sigma_pct: f64, center: Option<f64> },
    /// fio's `zoned`: zones of the range, each with its share of the accesses.
    Zoned(Vec<Zone>),
}

impl RandomDistribution {
    pub fn is_uniform(&self) -> bool {
        matches!(self, RandomDistribution::Uniform)
    }
}

fn bad(text: &str, why: &str) -> String {
    format!("random_distribution: {text:?} is not allowed ({why}); use {FORMS}")
}

fn number(text: &str, part: &str, what: &str) -> Result<f64, String> {
    match part.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(bad(text, &format!("{what} {part:?} is not a number"))),
    }
}

impl FromStr for RandomDistribution {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, String> {
        let text = raw.trim();
        let (name, rest) = match text.split_once(':') {
            Some((n, r)) => (n.trim(), Some(r)),
            None => (text, None),
        };
        // zipf/pareto/normal take value[:center], as fio's split_parse_distr
        let value_center = |default: f64| -> Result<(f64, Option<f64>), String> {
            let Some(rest) = rest else { return Ok((default, None)) };
            let mut parts = rest.split(':');
            let value = number(text, parts.next().unwrap_or(""), "value")?;
            let center = parts.next().map(|c| number(text, c, "center")).transpose()?;
            if parts.next().is_some() {
                return Err(bad(text, "too many ':' parts"));
            }
            if let Some(c) = center {
                if !(0.0..=1.0).contains(&c) {
                    return Err(bad(text, &format!("center {c} is outside [0, 1]")));
                }
            }
            Ok((value, center))
        };
        match name {
            "random" | "uniform" if rest.is_none() => Ok(RandomDistribution::Uniform),
            "zipf" => {
                let (theta, center) = value_center(1.1)?;
                if theta <= 0.0 {
                    return Err(bad(text, &format!("zipf theta {theta} must be > 0")));
                }
                Ok(RandomDistribution::Zipf { theta, center })
            }
            "pareto" => {
                let (h, center) = value_center(0.2)?;
                if !(h > 0.0 && h < 1.0) {
                    return Err(bad(text, &format!("pareto h {h} must be between 0 and 1, exclusive")));
                }
                Ok(RandomDistribution::Pareto { h, center })
            }
            "normal" => {
                let (sigma_pct, center) = value_center(0.0)?;
                if !(0.0..100.0).contains(&sigma_pct) {
                    return Err(bad(text, &format!("normal sigma {sigma_pct} must be >= 0 and < 100 (% of the range)")));
                }
                Ok(RandomDistribution::Normal { sigma_pct, center })
            }
            "zoned" => parse_zones(text, rest.unwrap_or("")).map(RandomDistribution::Zoned),
            "zoned_abs" | "sequence" => Err(bad(text, &format!("fio's {name} is not supported"))),
            _ => Err(bad(text, "unknown distribution")),
        }
    }
}

fn parse_zones(text: &str, spec: &str) -> Result<Vec<Zone>, String> {
    if spec.contains(',') {
        return Err(bad(text, "separate read/write zones (',') are not supported; give one set"));
    }
    let mut zones = Vec::new();
    for part in spec.split(':') {
        let (a, r) = part.split_once('/').ok_or_else(|| bad(text, &format!("zone {part:?} is not access%/range%")))?;
        let pct = |s: &str| s.trim().trim_end_matches('%').parse::<u8>().ok().filter(|&v| v <= 100);
        let (Some(access_pct), Some(range_pct)) = (pct(a), pct(r)) else {
            return Err(bad(text, &format!("zone {part:?} needs whole percentages 0..100")));
        };
        if range_pct == 0 {
            return Err(bad(text, &format!("zone {part:?} covers 0 % of the range")));
        }
        zones.push(Zone { access_pct, range_pct });
    }
    let access: u32 = zones.iter().map(|z| z.access_pct as u32).sum();
    let range: u32 = zones.iter().map(|z| z.range_pct as u32).sum();
    if access != 100 || range != 100 {
        return Err(bad(text, &format!("zone accesses sum to {access} % and ranges to {range} %; both must be 100")));
    }
    Ok(zones)
}

impl fmt::Display for RandomDistribution {
    /// The canonical text: what `FromStr` reads back to the same value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let with_center = |f: &mut fmt::Formatter<'_>, name: &str, v: f64, c: Option<f64>| match c {
            Some(c) => write!(f, "{name}:{v}:{c}"),
            None => write!(f, "{name}:{v}"),
        };
        match self {
            RandomDistribution::Uniform => write!(f, "random"),
            RandomDistribution::Zipf { theta, center } => with_center(f, "zipf", *theta, *center),
            RandomDistribution::Pareto { h, center } => with_center(f, "pareto", *h, *center),
            RandomDistribution::Normal { sigma_pct, center } => with_center(f, "normal", *sigma_pct, *center),
            RandomDistribution::Zoned(zones) => {
                write!(f, "zoned")?;
                for z in zones {
                    write!(f, ":{}/{}", z.access_pct, z.range_pct)?;
                }
                Ok(())
            }
        }
    }
}

impl TryFrom<String> for RandomDistribution {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<RandomDistribution> for String {
    fn from(d: RandomDistribution) -> String {
        d.to_string()
    }
}

/// A uniform double in [0, 1) from the top 53 bits.
#[inline(always)]
fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Exact Zipf sampling by rejection-inversion (Hörmann and Derflinger, "Rejection-inversion to
/// generate variates from monotone discrete distributions", 1996): O(1) set-up and about one
/// iteration per draw for any n, where fio approximates with Gray et al.'s formula over a zeta
/// sum capped at 10 M terms.
#[derive(Debug, Clone)]
pub(crate) struct ZipfSampler {
    n: f64,
    theta: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

impl ZipfSampler {
    pub(crate) fn new(n: u64, theta: f64) -> ZipfSampler {
        let mut z = ZipfSampler { n: n as f64, theta, h_integral_x1: 0.0, h_integral_n: 0.0, s: 0.0 };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(n as f64 + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    fn h(&self, x: f64) -> f64 {
        (-self.theta * x.ln()).exp()
    }

    /// The integral of h from 1 to x, (x^(1-theta) - 1) / (1 - theta), continuous at theta = 1.
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        expm1_over_x((1.0 - self.theta) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.theta)).max(-1.0);
        (log1p_over_x(t) * x).exp()
    }

    /// A rank in [0, n): 0 the most popular.
    #[inline]
    pub(crate) fn rank(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_integral_n + unit(rng) * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64 - 1;
            }
        }
    }
}

/// expm1(x)/x, continuous at 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 { x.exp_m1() / x } else { 1.0 + x * 0.5 * (1.0 + x / 3.0) }
}

/// ln(1+x)/x, continuous at 0.
fn log1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 { x.ln_1p() / x } else { 1.0 - x * (0.5 - x / 3.0) }
}

/// fio's Pareto rank: floor((n - 1) * u^power) with power = ln h / ln(1 - h), so the top fraction
/// f of the ranks takes f^(1/power) of the draws (h = 0.2: 20 % of the blocks take 80 %).
#[inline]
pub(crate) fn pareto_rank(n: u64, power: f64, rng: &mut Rng) -> u64 {
    (((n - 1) as f64) * unit(rng).powf(power)) as u64
}

/// fio's normal draw (lib/gauss.c): the mean (rounded up) of 12 uniform integers in [0, n], plus
/// a deviation uniform in [-s/2, s/2) with s = ceil(n * sigma / 100) capped at n/2, halved until
/// the sum lies in [0, n). A value fio would leave at n (only possible with s = 0) becomes n - 1.
#[inline]
pub(crate) fn normal_value(n: u64, spread: u64, rng: &mut Rng) -> u64 {
    const DRAWS: u64 = 12;
    let mut sum = 0u64;
    for _ in 0..DRAWS {
        sum += rng.below(n + 1);
    }
    let mut v = sum.div_ceil(DRAWS);
    if spread > 0 {
        let mut dev = (spread as f64 * unit(rng)) as i64 - (spread / 2) as i64;
        while !(0..n as i64).contains(&(v as i64 + dev)) && dev != 0 {
            dev /= 2;
        }
        v = (v as i64 + dev) as u64;
    }
    v.min(n - 1)
}

/// fio's deviation width in blocks for normal:sigma over n blocks.
pub(crate) fn normal_spread(n: u64, sigma_pct: f64) -> u64 {
    if sigma_pct == 0.0 {
        return 0;
    }
    ((n as f64 * sigma_pct / 100.0).ceil() as u64).min(n / 2)
}

/// Zones laid over n blocks: a 100-entry table from a uniform percent to its zone (fio's
/// zone_state_index), and each zone's first block and length.
#[derive(Debug, Clone)]
pub(crate) struct ZoneTable {
    by_percent: [u8; 100],
    zones: Vec<(u64, u64)>,
}

impl ZoneTable {
    pub(crate) fn new(zones: &[Zone], n: u64) -> ZoneTable {
        let mut by_percent = [0u8; 100];
        let mut spans = Vec::with_capacity(zones.len());
        let (mut access, mut range) = (0usize, 0u64);
        for (i, z) in zones.iter().enumerate() {
            by_percent[access..access + z.access_pct as usize].fill(i as u8);
            access += z.access_pct as usize;
            // Zone i spans [range% of n, (range + range_pct)% of n); a zone that rounds to no block
            // on a tiny range keeps one (the last block at most), so its share still lands.
            let start = ((range as u128 * n as u128) / 100) as u64;
            range += z.range_pct as u64;
            let end = ((range as u128 * n as u128) / 100) as u64;
            let start = start.min(n - 1);
            spans.push((start, (end - start.min(end)).max(1)));
        }
        ZoneTable { by_percent, zones: spans }
    }

    #[inline]
    pub(crate) fn block(&self, rng: &mut Rng) -> u64 {
        let zone = self.by_percent[rng.below(100) as usize] as usize;
        let (start, len) = self.zones[zone];
        start + rng.below(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fio_forms_and_prints_them_back() {
        for (text, canon) in [
            ("random", "random"),
            ("uniform", "random"),
            ("zipf", "zipf:1.1"),
            ("zipf:1.2", "zipf:1.2"),
            ("zipf:1.2:0.25", "zipf:1.2:0.25"),
            ("pareto:0.3", "pareto:0.3"),
            ("normal:10", "normal:10"),
            ("normal", "normal:0"),
            (" zoned:60/10:30/20:10/70 ", "zoned:60/10:30/20:10/70"),
        ] {
            let d: RandomDistribution = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(d.to_string(), canon);
            assert_eq!(canon.parse::<RandomDistribution>().unwrap(), d);
        }
    }

    #[test]
    fn bad_forms_give_one_line_naming_the_option_and_forms() {
        for text in ["zipf:0", "zipf:x", "pareto:1", "pareto:0", "normal:100", "normal:-1", "zipf:1.2:1.5",
                     "zoned:60/10:30/20", "zoned:50/50:50/40", "zoned:50/50:50/0:0/50", "zoned:60-40",
                     "zoned:60/10:40/90,50/50:50/50", "zoned_abs:60/20G:40/100G", "lognormal", "random:1", ""] {
            let e = text.parse::<RandomDistribution>().unwrap_err();
            assert!(e.starts_with("random_distribution: "), "{e}");
            assert!(e.contains("zipf[:theta[:center]]") && !e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn deserialises_from_the_spec_string_with_the_rule() {
        let d: RandomDistribution = serde_json::from_str("\"zipf:0.9\"").unwrap();
        assert_eq!(d, RandomDistribution::Zipf { theta: 0.9, center: None });
        let e = serde_json::from_str::<RandomDistribution>("\"zipf:-1\"").unwrap_err().to_string();
        assert!(e.contains("random_distribution") && e.contains("theta"), "{e}");
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"zipf:0.9\"");
    }

    /// Zipf's law computed directly: share of the top k of n ranks = H(k, theta) / H(n, theta).
    fn zipf_share(k: u64, n: u64, theta: f64) -> f64 {
        let h = |m: u64| (1..=m).map(|i| (i as f64).powf(-theta)).sum::<f64>();
        h(k) / h(n)
    }

    #[test]
    fn zipf_ranks_follow_the_law() {
        let mut rng = Rng::new(11);
        for (n, theta) in [(1000u64, 1.2), (1000, 0.8), (50, 1.0), (4097, 2.0)] {
            let z = ZipfSampler::new(n, theta);
            let draws = 400_000;
            let mut hits = vec![0u32; n as usize];
            for _ in 0..draws {
                hits[z.rank(&mut rng) as usize] += 1;
            }
            for k in [1, n / 10, n / 2] {
                let got = hits[..k as usize].iter().map(|&h| h as f64).sum::<f64>() / draws as f64;
                let want = zipf_share(k, n, theta);
                assert!((got - want).abs() < 0.005, "n {n} theta {theta} top {k}: {got} vs {want}");
            }
        }
        assert_eq!(ZipfSampler::new(1, 1.1).rank(&mut rng), 0);
    }

    #[test]
    fn pareto_h_02_is_the_80_20_rule() {
        let (n, h) = (10_000u64, 0.2f64);
        let power = h.ln() / (1.0 - h).ln();
        let mut rng = Rng::new(5);
        let draws = 200_000;
        let top = (0..draws).filter(|_| pareto_rank(n, power, &mut rng) < n / 5).count() as f64 / draws as f64;
        // P(rank < k) = (k / (n-1))^(ln(1-h)/ln h): 0.2^(ln 0.8 / ln 0.2) = 0.8
        let want = ((n / 5) as f64 / (n - 1) as f64).powf((1.0 - h).ln() / h.ln());
        assert!((want - 0.8).abs() < 0.001 && (top - want).abs() < 0.005, "{top} vs {want}");
    }

    /// The spread of fio's normal draw, from its parts: the mean of 12 uniforms over n + 1 values
    /// has variance ((n+1)^2 - 1) / 144; the deviation, uniform over s integers, (s^2 - 1) / 12.
    #[test]
    fn normal_spread_is_fios() {
        let n = 100_000u64;
        let mut rng = Rng::new(9);
        for sigma in [0.0, 10.0, 40.0] {
            let s = normal_spread(n, sigma);
            let draws = 100_000;
            let vals: Vec<f64> = (0..draws).map(|_| normal_value(n, s, &mut rng) as f64).collect();
            let mean = vals.iter().sum::<f64>() / draws as f64;
            let sd = (vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / draws as f64).sqrt();
            let want = ((((n + 1) as f64).powi(2) - 1.0) / 144.0 + ((s as f64).powi(2) - 1.0).max(0.0) / 12.0).sqrt();
            assert!((mean - n as f64 / 2.0).abs() < 0.01 * n as f64, "sigma {sigma}: mean {mean}");
            assert!((sd / want - 1.0).abs() < 0.03, "sigma {sigma}: sd {sd} vs {want}");
        }
        assert_eq!(normal_spread(10, 80.0), 5, "capped at half the range");
        let mut rng = Rng::new(1);
        assert!((0..1000).all(|_| normal_value(3, 1, &mut rng) < 3));
    }

    #[test]
    fn zoned_shares_land_in_their_zones() {
        let zones = match "zoned:60/10:30/20:10/70".parse::<RandomDistribution>().unwrap() {
            RandomDistribution::Zoned(z) => z,
            other => panic!("{other:?}"),
        };
        let n = 1000;
        let t = ZoneTable::new(&zones, n);
        let mut rng = Rng::new(3);
        let mut per_zone = [0u32; 3];
        let draws = 100_000;
        for _ in 0..draws {
            let b = t.block(&mut rng);
            per_zone[match b { 0..=99 => 0, 100..=299 => 1, 300..=999 => 2, _ => panic!("{b}") }] += 1;
        }
        for (got, want) in per_zone.iter().zip([0.6, 0.3, 0.1]) {
            assert!((*got as f64 / draws as f64 - want).abs() < 0.01, "{per_zone:?}");
        }
        // two blocks, three zones: every zone still gets a block inside the range
        let tiny = ZoneTable::new(&zones, 2);
        assert!((0..1000).all(|_| tiny.block(&mut rng) < 2));
    }
}
