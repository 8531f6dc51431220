//! Request sizes that vary from one I/O to the next, as fio's `bssplit` and `bsrange` give them:
//! this module owns the two options' one rule (parsing in fio's syntax, validation, canonical text;
//! Python asks it through `_core`) and the draw of each request's size (fio's io_u.c,
//! get_next_buflen), per direction.
//!
//! - `bssplit=4k/50:64k/30:1m/20` gives each size its share of the requests (not of the bytes). An
//!   empty percentage shares what the others leave, evenly (`4k/50:1k/:32k/` is 50/25/25). Per
//!   direction as fio's blocksize: `R,W[,T]` (trims take W's when T is not given; an empty part
//!   keeps bs for that direction); one value applies to all three.
//! - `bsrange=1k-16k` (or `1k:16k`) draws sizes between the two, multiples of the smaller, each
//!   equally likely as fio's formula makes them; per direction the same way.
//!
//! The draw is fio's: a uniform number r, and the first entry (in the order of increasing
//! percentage, fio's sort) whose running percentage covers r and that still fits before the end of
//! the range; a size that fits nowhere is drawn again. Sizes are rounded down to a multiple of the
//! direction's smallest size and capped at its largest (fio without bs_unaligned).

use std::fmt;

use crate::rng::Rng;

/// The forms the two options accept, for error messages and help.
pub const SPLIT_FORMS: &str = "SIZE/PERCENT[:SIZE/PERCENT...] (percentages of the requests summing to 100; \
an empty percentage shares the rest evenly), optionally per direction as READ,WRITE[,TRIM]; sizes as 4k, 64k, 1m";
pub const RANGE_FORMS: &str = "MIN-MAX (or MIN:MAX), optionally per direction as READ,WRITE[,TRIM]; sizes as 4k, 1m";

/// fio's limit of entries per direction (BSSPLIT_MAX).
pub const MAX_ENTRIES: usize = 64;
/// The largest request size (the bound of bs).
pub const MAX_SIZE: u64 = 1 << 30;

/// How one direction's request sizes are chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeLaw {
    /// Every request of one size (bs).
    Fixed(u64),
    /// fio's bsrange: from min to max, multiples of min.
    Range { min: u64, max: u64 },
    /// fio's bssplit: (size, percent of the requests), in the order fio looks them up (increasing
    /// percentage; equal ones as written).
    Split(Vec<(u64, u32)>),
}

impl SizeLaw {
    pub fn min(&self) -> u64 {
        match self {
            SizeLaw::Fixed(b) => *b,
            SizeLaw::Range { min, .. } => *min,
            SizeLaw::Split(e) => e.iter().map(|&(b, _)| b).min().unwrap_or(0),
        }
    }

    pub fn max(&self) -> u64 {
        match self {
            SizeLaw::Fixed(b) => *b,
            SizeLaw::Range { max, .. } => *max,
            SizeLaw::Split(e) => e.iter().map(|&(b, _)| b).max().unwrap_or(0),
        }
    }

    /// The sizes it names: the one size, the range's ends, or the split's entries.
    pub fn sizes(&self) -> Vec<u64> {
        match self {
            SizeLaw::Fixed(b) => vec![*b],
            SizeLaw::Range { min, max } => vec![*min, *max],
            SizeLaw::Split(e) => e.iter().map(|&(b, _)| b).collect(),
        }
    }

    /// Every request has the same size.
    pub fn is_fixed(&self) -> bool {
        self.min() == self.max()
    }

    /// The size of the next request, at most `room` bytes (what is left before the end of the
    /// range); `room` must hold the smallest size. fio's get_next_buflen, with a 32-bit draw as
    /// fio's tausworthe generator gives it.
    pub fn draw(&self, rng: &mut Rng, room: u64) -> u64 {
        let (min, max) = (self.min(), self.max());
        if min == max {
            return min;
        }
        debug_assert!(room >= min, "the smallest size fits");
        const FRAND_MAX: u64 = u32::MAX as u64;
        loop {
            let r = rng.next_u64() >> 32;
            let mut len = match self {
                SizeLaw::Range { min, max } => min + (*max as f64 * (r as f64 / (FRAND_MAX as f64 + 1.0))) as u64,
                SizeLaw::Split(entries) => {
                    let mut len = 0;
                    let mut running = 0u64;
                    for &(bs, perc) in entries {
                        if perc == 0 {
                            continue;
                        }
                        len = bs;
                        running += perc as u64;
                        if r / running <= FRAND_MAX / 100 && bs <= room {
                            break;
                        }
                    }
                    len
                }
                SizeLaw::Fixed(b) => *b,
            };
            len -= len % min;
            len = len.min(max);
            if len <= room && len > 0 {
                return len;
            }
        }
    }
}

impl fmt::Display for SizeLaw {
    /// The canonical text of one direction: what the parser reads back to the same law.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeLaw::Fixed(b) => write!(f, "{}", size_text(*b)),
            SizeLaw::Range { min, max } => write!(f, "{}-{}", size_text(*min), size_text(*max)),
            SizeLaw::Split(entries) => {
                let parts: Vec<String> = entries.iter().map(|&(b, p)| format!("{}/{p}", size_text(b))).collect();
                write!(f, "{}", parts.join(":"))
            }
        }
    }
}

/// A size as fio reads it: a whole number with an optional binary unit (k, m, g, t; KiB, KB, K
/// alike, as fio's default kb_base=1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let n: u64 = number.parse().map_err(|_| format!("{text:?} is not a size"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(format!("{text:?} is not a size (units: k, m, g, t)")),
    };
    n.checked_mul(1 << shift).filter(|&v| v <= MAX_SIZE).ok_or_else(|| format!("{text:?} is larger than 1 GiB"))
}

/// A size written back the short way fio reads it: 4k, 1m, 1536.
fn size_text(n: u64) -> String {
    for (shift, unit) in [(30, "g"), (20, "m"), (10, "k")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

/// fio's per-direction layout of a value: one for all three; R,W (trims take W); R,W,T. An empty
/// part is None (that direction keeps bs).
fn per_direction(text: &str) -> Result<[Option<&str>; 3], String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    fn some(s: &str) -> Option<&str> {
        (!s.is_empty()).then_some(s)
    }
    match parts.as_slice() {
        [all] => Ok([some(all), some(all), some(all)]),
        [r, w] => Ok([some(r), some(w), some(w)]),
        [r, w, t] => Ok([some(r), some(w), some(t)]),
        _ => Err(format!("{} directions given; use one value or READ,WRITE[,TRIM]", parts.len())),
    }
}

/// One direction of bssplit, fio's split_parse_ddir and bssplit_ddir: entries `SIZE[/PERCENT]`
/// separated by ':'; a missing or 0 percentage shares what the others leave.
fn parse_split(part: &str) -> Result<SizeLaw, String> {
    let mut entries: Vec<(u64, Option<u32>)> = Vec::new();
    for entry in part.split(':') {
        let entry = entry.trim();
        if entry.is_empty() {
            break; // fio stops at an empty entry
        }
        let (size, perc) = match entry.split_once('/') {
            Some((s, p)) => (s, Some(p.trim())),
            None => (entry, None),
        };
        let bs = parse_size(size)?;
        if bs == 0 {
            return Err(format!("size {size:?} is 0"));
        }
        let perc = match perc {
            None | Some("") => None,
            Some(p) => match p.trim_end_matches('%').parse::<u32>() {
                Ok(0) => None,
                Ok(v) => Some(v.min(100)),
                Err(_) => return Err(format!("percentage {p:?} of {size} is not a whole number")),
            },
        };
        entries.push((bs, perc));
    }
    if entries.is_empty() {
        return Err("no SIZE/PERCENT entry".into());
    }
    if entries.len() > MAX_ENTRIES {
        return Err(format!("{} sizes; at most {MAX_ENTRIES} per direction", entries.len()));
    }
    let given: u32 = entries.iter().filter_map(|e| e.1).sum();
    let missing = entries.iter().filter(|e| e.1.is_none()).count() as u32;
    if given > 100 {
        return Err(format!("percentages add up to {given}, more than 100"));
    }
    if missing == 0 && given != 100 {
        return Err(format!("percentages add up to {given}; they must add up to 100 (or leave one empty to take the rest)"));
    }
    // fio's rounding: each empty one takes (100 - given) / missing; the few percent integer
    // division leaves fall to the last entry looked up, as fio's draw lets them.
    let share = (100 - given).checked_div(missing).unwrap_or(0);
    let mut split: Vec<(u64, u32)> = entries.into_iter().map(|(b, p)| (b, p.unwrap_or(share))).collect();
    split.sort_by_key(|&(_, p)| p); // stable: equal percentages keep the written order
    if split.iter().all(|&(_, p)| p == 0) {
        return Err("every percentage is 0".into());
    }
    Ok(if split.len() == 1 { SizeLaw::Fixed(split[0].0) } else { SizeLaw::Split(split) })
}

fn parse_range(part: &str) -> Result<SizeLaw, String> {
    let (lo, hi) = part.split_once('-').or_else(|| part.split_once(':')).ok_or_else(|| format!("{part:?} is not MIN-MAX"))?;
    let (a, b) = (parse_size(lo)?, parse_size(hi)?);
    let (min, max) = (a.min(b), a.max(b));
    if min == 0 {
        return Err(format!("{part:?} starts at 0 bytes"));
    }
    Ok(if min == max { SizeLaw::Fixed(min) } else { SizeLaw::Range { min, max } })
}

fn parse_dirs(option: &str, forms: &str, text: &str, one: fn(&str) -> Result<SizeLaw, String>) -> Result<[Option<SizeLaw>; 3], String> {
    let bad = |why: String| format!("{option}: {text:?} is not allowed ({why}); use {forms}");
    let parts = per_direction(text).map_err(bad)?;
    let mut out: [Option<SizeLaw>; 3] = [None, None, None];
    for (slot, part) in out.iter_mut().zip(parts) {
        if let Some(p) = part {
            *slot = Some(one(p).map_err(bad)?);
        }
    }
    if out.iter().all(Option::is_none) {
        return Err(bad("no direction given".into()));
    }
    Ok(out)
}

/// bssplit per direction [read, write, trim]; None where that direction keeps bs.
pub fn parse_bssplit(text: &str) -> Result<[Option<SizeLaw>; 3], String> {
    parse_dirs("bssplit", SPLIT_FORMS, text, parse_split)
}

/// bsrange per direction [read, write, trim]; None where that direction keeps bs.
pub fn parse_bsrange(text: &str) -> Result<[Option<SizeLaw>; 3], String> {
    parse_dirs("bsrange", RANGE_FORMS, text, parse_range)
}

/// The canonical text of a per-direction value: one law when all three agree, else R,W,T (an
/// empty part where a direction keeps bs). `range`: bsrange's form, a fixed size as SIZE-SIZE,
/// so that the text parses again as a bsrange.
pub fn canonical(laws: &[Option<SizeLaw>; 3], range: bool) -> String {
    let text = |l: &Option<SizeLaw>| match (l, range) {
        (Some(SizeLaw::Fixed(b)), true) => format!("{0}-{0}", size_text(*b)),
        (l, _) => l.as_ref().map_or(String::new(), |l| l.to_string()),
    };
    if laws[0] == laws[1] && laws[1] == laws[2] {
        return text(&laws[0]);
    }
    laws.iter().map(text).collect::<Vec<_>>().join(",")
}

/// The laws written back for every direction, so that they no longer depend on bs: bssplit's
/// form (`range` false) or bsrange's (`range` true, a fixed size as SIZE-SIZE).
pub fn explicit(laws: &[SizeLaw; 3], range: bool) -> String {
    let one = |l: &SizeLaw| match (l, range) {
        (SizeLaw::Fixed(b), true) => format!("{0}-{0}", size_text(*b)),
        (l, _) => l.to_string(),
    };
    laws.iter().map(one).collect::<Vec<_>>().join(",")
}

/// The request sizes of a group, per direction [read, write, trim]: bssplit where given, else
/// bsrange, else bs.
pub fn laws(bs: u64, bssplit: Option<&str>, bsrange: Option<&str>) -> Result<[SizeLaw; 3], String> {
    let given = match (bssplit, bsrange) {
        (Some(s), _) => parse_bssplit(s)?,
        (None, Some(r)) => parse_bsrange(r)?,
        (None, None) => [None, None, None],
    };
    Ok(given.map(|l| l.unwrap_or(SizeLaw::Fixed(bs))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_fio_reads_them() {
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("512"), Ok(512));
        assert!(parse_size("4x").is_err() && parse_size("2g").is_err() && parse_size("").is_err());
    }

    #[test]
    fn bssplit_parses_fios_syntax_per_direction() {
        let [r, w, t] = parse_bssplit("4k/50:64k/30:1m/20").unwrap();
        let want = SizeLaw::Split(vec![(1 << 20, 20), (65536, 30), (4096, 50)]);
        assert_eq!((r.as_ref(), w.as_ref(), t.as_ref()), (Some(&want), Some(&want), Some(&want)));
        // empty percentages share the rest: fio's own example
        let [r, ..] = parse_bssplit("4k/50:1k/:32k/").unwrap();
        assert_eq!(r, Some(SizeLaw::Split(vec![(1024, 25), (32768, 25), (4096, 50)])));
        // per direction, trims taking the writes' split; an empty part keeps bs
        let [r, w, t] = parse_bssplit("2k/50:4k/50,4k/90:8k/10").unwrap();
        assert_eq!(r, Some(SizeLaw::Split(vec![(2048, 50), (4096, 50)])));
        assert_eq!(w, Some(SizeLaw::Split(vec![(8192, 10), (4096, 90)])));
        assert_eq!(t, w);
        let [r, w, _] = parse_bssplit(",8k/100").unwrap();
        assert_eq!((r, w), (None, Some(SizeLaw::Fixed(8192))));
        assert_eq!(canonical(&parse_bssplit("4k/50:64k/30:1m/20").unwrap(), false), "1m/20:64k/30:4k/50");
        assert_eq!(canonical(&parse_bssplit("4k/100,8k/100").unwrap(), false), "4k,8k,8k");
        // fio reads a 0 % entry as an empty one: alone, it takes everything
        assert_eq!(parse_bssplit("4k/0").unwrap()[0], Some(SizeLaw::Fixed(4096)));
        for bad in ["4k/60:8k/60", "4k/50:8k/30", "4k/50,8k/50,1k/100,2k/1", "x/50:4k/50", "4k/a", ","] {
            let e = parse_bssplit(bad).unwrap_err();
            assert!(e.starts_with("bssplit: ") && e.contains("use SIZE/PERCENT"), "{bad}: {e}");
        }
    }

    #[test]
    fn bsrange_parses_min_max_per_direction() {
        let [r, w, t] = parse_bsrange("1k-4k,2k:8k").unwrap();
        assert_eq!(r, Some(SizeLaw::Range { min: 1024, max: 4096 }));
        assert_eq!(w, Some(SizeLaw::Range { min: 2048, max: 8192 }));
        assert_eq!(t, w);
        assert_eq!(parse_bsrange("4k-4k").unwrap()[0], Some(SizeLaw::Fixed(4096)));
        assert!(parse_bsrange("4k").unwrap_err().starts_with("bsrange: "));
        assert_eq!(canonical(&parse_bsrange("16k-4k").unwrap(), true), "4k-16k");
        // a range of one size is written back as one, and that text parses again
        let one = canonical(&parse_bsrange("4k-4k").unwrap(), true);
        assert_eq!(one, "4k-4k");
        assert_eq!(parse_bsrange(&one).unwrap()[0], Some(SizeLaw::Fixed(4096)));
        assert_eq!(canonical(&parse_bsrange("4k-4k,1k-8k").unwrap(), true), "4k-4k,1k-8k,1k-8k");
    }

    fn shares(law: &SizeLaw, room: u64, draws: u32) -> Vec<(u64, f64)> {
        let mut rng = Rng::new(7);
        let mut counts = std::collections::BTreeMap::new();
        for _ in 0..draws {
            *counts.entry(law.draw(&mut rng, room)).or_insert(0u32) += 1;
        }
        counts.into_iter().map(|(b, n)| (b, n as f64 / draws as f64)).collect()
    }

    /// Each size's share of the requests is its percentage (within 1 % over 200,000 draws).
    #[test]
    fn a_split_draws_each_size_by_its_share_of_the_requests() {
        let [Some(law), ..] = parse_bssplit("4k/50:64k/30:1m/20").unwrap() else { panic!() };
        let got = shares(&law, u64::MAX, 200_000);
        let want = [(4096, 0.5), (65536, 0.3), (1 << 20, 0.2)];
        assert_eq!(got.len(), 3);
        for ((b, s), (wb, ws)) in got.iter().zip(want) {
            assert_eq!(*b, wb);
            assert!((s - ws).abs() < 0.01, "{b}: {s} vs {ws}");
        }
        // near the end of the range a size that does not fit gives way to the next that does
        // (fio's order: 1m's 20 % go to 64k, the next entry by percentage)
        let near_end = shares(&law, 65536, 100_000);
        assert_eq!(near_end.len(), 2, "{near_end:?}");
        assert!((near_end[0].1 - 0.5).abs() < 0.01, "{near_end:?}");
    }

    /// fio's bsrange formula makes every multiple of the smallest size equally likely.
    #[test]
    fn a_range_draws_multiples_of_its_smallest_size_evenly() {
        let got = shares(&SizeLaw::Range { min: 4096, max: 65536 }, u64::MAX, 160_000);
        assert_eq!(got.len(), 16);
        for (i, (b, s)) in got.iter().enumerate() {
            assert_eq!(*b, 4096 * (i as u64 + 1));
            assert!((s - 1.0 / 16.0).abs() < 0.005, "{b}: {s}");
        }
        // sizes not a multiple of the smallest are rounded down to one, as fio does
        let law = SizeLaw::Split(vec![(6144, 50), (4096, 50)]);
        assert_eq!(shares(&law, u64::MAX, 1000), vec![(4096, 1.0)]);
    }
}
