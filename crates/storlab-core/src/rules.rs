//! The rules of the engine's job options, written once: each numeric option's bounds and unit,
//! each choice option's allowed values, and every option's default (`GroupSpec::default`; the
//! metadata benchmark's `MetaSpec` has its own table in meta/spec.rs, of the same `Bounds`).
//! `GroupSpec::validate` checks a spec against them; the Python bindings export them
//! (`storlab._core.option_rules`) and check single values with them (`check_option`), so the option
//! table (python/storlab/jobs/options.py) takes its defaults and bounds from here, and a bad value
//! reads the same whether it came from a flag, a TOML job file, an fio job file or a raw spec.

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::group::{CpusPolicy, EngineKind, FileLayout, FixedBuffers, GroupSpec, OpenSync, PerDir, RateProcess, RbwMode, Rw, ThreadLayout, MAX_BYTES, MAX_DURATION_S};
use crate::verify::VerifyKind;

/// The unit of a numeric option's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Bytes,
    Seconds,
    Percent,
    /// A rate in bytes per second (rate, rate_min).
    BytesPerSecond,
    /// A rate in requests per second (rate_iops, rate_iops_min).
    Iops,
}

impl Unit {
    /// As the option table writes it ("" for a plain count).
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "",
            Unit::Bytes => "bytes",
            Unit::Seconds => "s",
            Unit::Percent => "%",
            Unit::BytesPerSecond => "bytes/s",
            Unit::Iops => "IOPS",
        }
    }
}

/// A value of a numeric option: counts and byte counts exact, durations real.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Num {
    Int(u64),
    Real(f64),
}

impl Num {
    fn as_f64(self) -> f64 {
        match self {
            Num::Int(v) => v as f64,
            Num::Real(v) => v,
        }
    }

    /// `self <= other`, exact when both are whole numbers (seed bounds lie beyond 2^53).
    fn le(self, other: Num) -> bool {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => a <= b,
            _ => self.as_f64() <= other.as_f64(),
        }
    }
}

/// The inclusive bounds of one numeric option, and where a spec `S` holds its value.
pub struct Bounds<S: 'static> {
    pub field: &'static str,
    pub unit: Unit,
    pub min: Num,
    pub max: Num,
    value: fn(&S) -> Option<Num>,
}

pub const fn ints<S>(field: &'static str, unit: Unit, min: u64, max: u64, value: fn(&S) -> Option<Num>) -> Bounds<S> {
    Bounds { field, unit, min: Num::Int(min), max: Num::Int(max), value }
}

/// A duration: from `min` seconds to 10 years. Every duration is bounded before anything converts
/// it: Duration::from_secs_f64 panics past u64 seconds, and Instant + Duration on overflow.
pub const fn secs<S>(field: &'static str, min: f64, value: fn(&S) -> Option<Num>) -> Bounds<S> {
    Bounds { field, unit: Unit::Seconds, min: Num::Real(min), max: Num::Real(MAX_DURATION_S), value }
}

/// Byte counts stop at 1 EiB (MAX_BYTES), so sums and products of offsets stay inside u64.
pub const BOUNDS: &[Bounds<GroupSpec>] = &[
    ints("size", Unit::Bytes, 1, MAX_BYTES, |g| g.size.map(Num::Int)),
    ints("offset", Unit::Bytes, 0, MAX_BYTES, |g| Some(Num::Int(g.offset))),
    ints("segments", Unit::Count, 1, 1 << 40, |g| Some(Num::Int(g.segments))),
    ints("block", Unit::Bytes, 1, MAX_BYTES, |g| g.block.map(Num::Int)),
    ints("participants", Unit::Count, 0, 1 << 32, |g| Some(Num::Int(g.participants))),
    ints("participant_base", Unit::Count, 0, 1 << 32, |g| Some(Num::Int(g.participant_base))),
    ints("rwmix_read", Unit::Percent, 0, 100, |g| Some(Num::Int(g.rwmix_read.into()))),
    ints("compress_percentage", Unit::Percent, 0, 100, |g| Some(Num::Int(g.compress_percentage.into()))),
    // a chunk holds at least the 24 bytes that keep it unique, and at most a large request
    ints("compress_chunk", Unit::Bytes, 64, 1 << 20, |g| Some(Num::Int(g.compress_chunk))),
    ints("dedupe_percentage", Unit::Percent, 0, 100, |g| Some(Num::Int(g.dedupe_percentage.into()))),
    ints("percentage_random", Unit::Percent, 0, 100, |g| Some(Num::Int(g.percentage_random.into()))),
    ints("bs", Unit::Bytes, 1, 1 << 30, |g| Some(Num::Int(g.bs))),
    ints("blockalign", Unit::Bytes, 0, 1 << 30, |g| Some(Num::Int(g.blockalign))),
    ints("seq_hole", Unit::Bytes, 0, MAX_BYTES, |g| Some(Num::Int(g.seq_hole))),
    ints("seq_rewind", Unit::Bytes, 0, MAX_BYTES, |g| Some(Num::Int(g.seq_rewind))),
    ints("threads", Unit::Count, 1, 4096, |g| Some(Num::Int(g.threads.into()))),
    ints("qd", Unit::Count, 1, 65536, |g| Some(Num::Int(g.qd.into()))),
    // i64's range: the largest seed a TOML job file can write
    ints("seed", Unit::Count, 0, i64::MAX as u64, |g| Some(Num::Int(g.seed))),
    ints("io_size", Unit::Bytes, 1, MAX_BYTES, |g| g.io_size.map(Num::Int)),
    ints("io_total", Unit::Bytes, 1, MAX_BYTES, |g| g.io_total.map(Num::Int)),
    ints("fsync_every", Unit::Count, 0, 1 << 32, |g| Some(Num::Int(g.fsync_every))),
    ints("rbw_lag", Unit::Count, 1, 1 << 32, |g| Some(Num::Int(g.rbw_lag))),
    ints("verify_pass", Unit::Count, 0, u32::MAX as u64, |g| Some(Num::Int(g.verify_pass.into()))),
    ints("verify_report", Unit::Count, 0, 100_000, |g| Some(Num::Int(g.verify_report.into()))),
    secs("time", 0.001, |g| g.time.map(Num::Real)),
    secs("ramp", 0.0, |g| Some(Num::Real(g.ramp))),
    secs("stall_after", 0.001, |g| Some(Num::Real(g.stall_after))),
    secs("interval", 0.01, |g| Some(Num::Real(g.interval))),
    secs("start_delay", 0.0, |g| Some(Num::Real(g.start_delay))),
    secs("null_delay", 0.0, |g| Some(Num::Real(g.null_delay))),
    ints("uring.batch", Unit::Count, 0, 65536, |g| Some(Num::Int(g.uring_batch.into()))),
    // a spin is a wait for a completion expected within microseconds: a second bounds it
    Bounds { field: "uring.wait_spin", unit: Unit::Seconds, min: Num::Real(0.0), max: Num::Real(1.0), value: |g| Some(Num::Real(g.uring_wait_spin)) },
    // s3 requests carry one object, or one part of a multipart upload: S3 parts are 5 MiB at least
    ints("object_size", Unit::Bytes, 1, 1 << 30, |g| g.object_size.map(Num::Int)),
    ints("part_size", Unit::Bytes, 5 << 20, 1 << 30, |g| Some(Num::Int(g.part_size))),
    // per direction [read, write, trim]: the largest of the three is checked
    ints("rate", Unit::BytesPerSecond, 0, MAX_BYTES, |g| Some(Num::Int(largest(g.rate)))),
    ints("rate_min", Unit::BytesPerSecond, 0, MAX_BYTES, |g| Some(Num::Int(largest(g.rate_min)))),
    ints("rate_iops", Unit::Iops, 0, 1 << 40, |g| Some(Num::Int(largest(g.rate_iops)))),
    ints("rate_iops_min", Unit::Iops, 0, 1 << 40, |g| Some(Num::Int(largest(g.rate_iops_min)))),
    secs("thinktime", 0.0, |g| Some(Num::Real(g.thinktime))),
    secs("thinktime_spin", 0.0, |g| Some(Num::Real(g.thinktime_spin))),
    ints("thinktime_blocks", Unit::Count, 1, 1 << 32, |g| Some(Num::Int(g.thinktime_blocks))),
];

/// The largest of a per-direction option's values.
fn largest(v: PerDir) -> u64 {
    v.into_iter().max().unwrap_or(0)
}

impl<S> Bounds<S> {
    /// What the option accepts, in words: ">= 1 byte and <= 1 GiB".
    pub fn allowed(&self) -> String {
        format!(">= {} and <= {}", self.show(self.min), self.show(self.max))
    }

    /// A value in the option's unit: 4 KiB, 0.5 s, 10 years, 70 %.
    fn show(&self, v: Num) -> String {
        match (self.unit, v) {
            (Unit::Bytes, Num::Int(n)) => bytes_text(n),
            (Unit::BytesPerSecond, Num::Int(n)) => format!("{}/s", bytes_text(n)),
            (Unit::Seconds, Num::Real(s)) if s == MAX_DURATION_S => "10 years".into(),
            (Unit::Count, _) => number_text(v),
            (unit, _) => format!("{} {}", number_text(v), unit.as_str()),
        }
    }

    /// One value against the bounds; the error names the option and what it accepts.
    pub fn check(&self, v: Num) -> Result<()> {
        if !v.as_f64().is_finite() {
            return Err(Error::spec(format!("{}: {} is not a finite number; allowed: {}", self.field, self.show(v), self.allowed())));
        }
        if !(self.min.le(v) && v.le(self.max)) {
            return Err(Error::spec(format!("{}: {} is out of range; allowed: {}", self.field, self.show(v), self.allowed())));
        }
        Ok(())
    }
}

fn number_text(v: Num) -> String {
    match v {
        Num::Int(n) => n.to_string(),
        Num::Real(x) if x.is_finite() && x == x.trunc() && x.abs() < 1e15 => format!("{}", x as i64),
        Num::Real(x) if x.is_finite() && (x.abs() >= 1e15 || x.abs() < 1e-4) => format!("{x:e}"),
        Num::Real(x) => x.to_string(),
    }
}

/// Whole binary units where the count is one (1 GiB, 4 KiB), else bytes.
fn bytes_text(n: u64) -> String {
    if n == 1 {
        return "1 byte".into();
    }
    for (shift, unit) in [(60, "EiB"), (50, "PiB"), (40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{} {unit}", n >> shift);
        }
    }
    format!("{n} bytes")
}

/// The bounds of a numeric option of a group; None for any other option.
pub fn bounds(field: &str) -> Option<&'static Bounds<GroupSpec>> {
    BOUNDS.iter().find(|b| b.field == field)
}

/// Every numeric option of `spec` within its bounds in `table`; the first that is not is named.
pub fn check_all<S>(table: &[Bounds<S>], spec: &S) -> Result<()> {
    for b in table {
        if let Some(v) = (b.value)(spec) {
            b.check(v)?;
        }
    }
    Ok(())
}

/// Every numeric option of a group within its bounds.
pub fn check_group(g: &GroupSpec) -> Result<()> {
    check_all(BOUNDS, g)
}

/// The serde names of an enum's values, in the order given.
pub fn names<T: Serialize>(all: &[T]) -> Vec<String> {
    all.iter()
        .map(|v| match serde_json::to_value(v) {
            Ok(Value::String(s)) => s,
            _ => String::new(),
        })
        .collect()
}

/// The allowed values of a choice option, in the enum's order; None for any other option.
pub fn choices(field: &str) -> Option<Vec<String>> {
    Some(match field {
        "rw" => names(&Rw::ALL),
        "thread_layout" => names(&ThreadLayout::ALL),
        "files" => names(&FileLayout::ALL),
        "rbw" => names(&RbwMode::ALL),
        "verify" => names(&VerifyKind::ALL),
        "engine" => names(&EngineKind::ALL),
        "uring.fixed_buffers" => names(&FixedBuffers::ALL),
        "open_sync" => names(&OpenSync::ALL),
        "cpus_policy" => names(&CpusPolicy::ALL),
        "rate_process" => names(&RateProcess::ALL),
        _ => return None,
    })
}

/// One value of a choice option against its allowed values.
pub fn check_choice(field: &str, value: &str) -> Result<()> {
    match choices(field) {
        Some(allowed) if !allowed.iter().any(|a| a == value) => {
            Err(Error::spec(format!("{field}: '{value}' is not allowed; use one of: {}", allowed.join(", "))))
        }
        Some(_) => Ok(()),
        None => Err(Error::spec(format!("{field}: not a choice option of the engine"))),
    }
}

/// One value of a numeric option against its bounds.
pub fn check_number(field: &str, value: Num) -> Result<()> {
    match bounds(field) {
        Some(b) => b.check(value),
        None => Err(Error::spec(format!("{field}: not a numeric option of the engine"))),
    }
}

/// Every engine option (a group spec field) with its rule, as JSON:
/// `{name: {"default", "min", "max", "unit", "allowed", "choices"}}`; min, max and unit for
/// numeric options, choices for choice options, `allowed` in words for both.
pub fn option_rules() -> Value {
    rules_json(&GroupSpec::default(), BOUNDS, choices, &["name"])
}

/// The rules of every field of a spec (`defaults` its default value) as `option_rules` gives them.
pub fn rules_json<S: Serialize>(defaults: &S, table: &[Bounds<S>], choices: fn(&str) -> Option<Vec<String>>,
                                skip: &[&str]) -> Value {
    let Ok(Value::Object(defaults)) = serde_json::to_value(defaults) else {
        return Value::Object(Map::new());
    };
    let mut out = Map::new();
    for (name, default) in defaults {
        if skip.contains(&name.as_str()) {
            continue;
        }
        let mut rule = json!({ "default": default });
        if let Some(b) = table.iter().find(|b| b.field == name) {
            rule["min"] = json!(b.min);
            rule["max"] = json!(b.max);
            rule["unit"] = json!(b.unit.as_str());
            rule["allowed"] = json!(b.allowed());
        }
        if let Some(c) = choices(&name) {
            rule["allowed"] = json!(format!("one of {}", c.join(", ")));
            rule["choices"] = json!(c);
        }
        out.insert(name, rule);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::PhaseSpec;

    /// What serde accepts for a choice field: the names its "unknown variant" error lists.
    fn serde_variants(field: &str) -> Vec<String> {
        let mut v = serde_json::to_value(GroupSpec { target: vec!["/x".into()], ..Default::default() }).unwrap();
        v[field] = json!("\u{1}");
        let e = serde_json::from_value::<GroupSpec>(v).unwrap_err().to_string();
        let expected = &e[e.find("expected").unwrap_or_else(|| panic!("{field}: {e}"))..];
        expected.split('`').skip(1).step_by(2).map(String::from).collect()
    }

    #[test]
    fn choices_are_every_variant_serde_accepts() {
        let mut seen = 0;
        for (name, default) in serde_json::to_value(GroupSpec::default()).unwrap().as_object().unwrap() {
            if let Some(c) = choices(name) {
                assert_eq!(c, serde_variants(name), "{name}");
                assert!(c.contains(&default.as_str().unwrap().to_string()), "{name}: default {default}");
                seen += 1;
            }
        }
        assert_eq!(seen, 10);
        assert_eq!(names(&EngineKind::ALL), EngineKind::ALL.map(|e| e.as_str().to_string()));
    }

    /// Every numeric field has bounds: a field whose default is a number, or an optional one
    /// (null by default) that is not a text.
    #[test]
    fn every_numeric_field_has_bounds_and_its_default_is_inside() {
        let defaults = serde_json::to_value(GroupSpec::default()).unwrap();
        for (name, default) in defaults.as_object().unwrap() {
            if default.is_number() {
                let b = bounds(name).unwrap_or_else(|| panic!("{name}: numeric, without bounds"));
                let v = default.as_u64().map(Num::Int).unwrap_or(Num::Real(default.as_f64().unwrap()));
                b.check(v).unwrap();
            }
        }
        for optional in ["size", "block", "io_size", "io_total", "time"] {
            assert!(bounds(optional).is_some(), "{optional}");
        }
        let fields = PhaseSpec::group_field_names();
        for b in BOUNDS {
            assert!(fields.contains(&b.field.to_string()), "{}: not a spec field", b.field);
        }
    }

    #[test]
    fn messages_name_the_option_and_the_allowed_range_in_its_unit() {
        let e = check_number("bs", Num::Int(2 << 30)).unwrap_err();
        assert_eq!(e.message, "bs: 2 GiB is out of range; allowed: >= 1 byte and <= 1 GiB");
        let e = check_number("time", Num::Real(f64::NAN)).unwrap_err();
        assert_eq!(e.message, "time: NaN s is not a finite number; allowed: >= 0.001 s and <= 10 years");
        let e = check_number("rwmix_read", Num::Int(101)).unwrap_err();
        assert_eq!(e.message, "rwmix_read: 101 % is out of range; allowed: >= 0 % and <= 100 %");
        let e = check_number("ramp", Num::Real(1e300)).unwrap_err();
        assert!(e.message.starts_with("ramp: 1e300 s is out of range"), "{}", e.message);
        let e = check_choice("rw", "sideways").unwrap_err();
        assert_eq!(e.message, "rw: 'sideways' is not allowed; use one of: read, write, randread, randwrite, rw, randrw, trim, randtrim, trimwrite");
        assert!(check_number("seed", Num::Int(i64::MAX as u64)).is_ok());
        assert!(check_number("seed", Num::Int(i64::MAX as u64 + 1)).is_err());
        assert!(check_number("rw", Num::Int(1)).is_err() && check_choice("bs", "x").is_err());
        let e = check_number("rate", Num::Int(2 << 60)).unwrap_err();
        assert_eq!(e.message, "rate: 2 EiB/s is out of range; allowed: >= 0 bytes/s and <= 1 EiB/s");
        let e = check_number("rate_iops_min", Num::Int((1 << 40) + 1)).unwrap_err();
        assert_eq!(e.message, format!("rate_iops_min: {} IOPS is out of range; allowed: >= 0 IOPS and <= {} IOPS", (1u64 << 40) + 1, 1u64 << 40));
        assert!(check_number("thinktime_blocks", Num::Int(0)).is_err());
    }

    /// The per-direction rates are checked by their largest value: one direction out of range fails.
    #[test]
    fn per_direction_rates_check_the_largest_direction() {
        let g = GroupSpec { target: vec!["/x".into()], rate: [0, MAX_BYTES + 1, 0], ..Default::default() };
        let e = check_group(&g).unwrap_err();
        assert!(e.message.starts_with("rate: "), "{}", e.message);
        let g = GroupSpec { target: vec!["/x".into()], rate_iops: [1, 2, 3], ..Default::default() };
        assert!(check_group(&g).is_ok());
        let rules = option_rules();
        assert_eq!(rules["rate"]["unit"], json!("bytes/s"));
        assert_eq!(rules["rate_iops_min"]["unit"], json!("IOPS"));
        assert_eq!(rules["rate"]["default"], json!([0, 0, 0]));
        assert_eq!(rules["thinktime"]["min"], json!(0.0));
    }

    #[test]
    fn exported_rules_carry_defaults_bounds_and_choices() {
        let rules = option_rules();
        assert_eq!(rules["bs"], json!({"default": 4096, "min": 1, "max": 1u64 << 30, "unit": "bytes",
                                       "allowed": ">= 1 byte and <= 1 GiB"}));
        assert_eq!(rules["time"]["default"], Value::Null);
        assert_eq!(rules["engine"]["choices"], json!(["psync", "io_uring", "null", "nbd", "nfs", "s3"]));
        assert_eq!(rules["target"], json!({"default": []}));
        assert!(rules.get("name").is_none());
        assert_eq!(rules.as_object().unwrap().len(), PhaseSpec::group_field_names().len() - 1);
    }
}
