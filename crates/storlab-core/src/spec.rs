//! The job spec: plain data handed over from Python (JSON), one field per engine-bound option of
//! python/storlab/jobs/options.py, with the same names. A phase holds one or more groups that run at
//! the same time (fio's jobs between two stonewalls); a group's fields and their types are in
//! `group` (re-exported here). Validation of values happens here (each option's bounds and allowed
//! values in `rules`, their combinations below); touching the system (opening, sizing, alignment)
//! happens in `plan`.

use serde::{Deserialize, Serialize};

use crate::blocksize::SizeLaw;
use crate::error::{Error, Result};
pub use crate::group::{EngineKind, FileLayout, FixedBuffers, GroupSpec, OpenSync, PerDir, RateProcess, RbwMode, Rw, ThreadLayout, DEFAULT_PART_SIZE, DEFAULT_WAIT_SPIN_S, MAX_BYTES, MAX_DURATION_S};
use crate::verify::{VerifyKind, MIN_BLOCK};

/// A phase: groups that run concurrently and are measured together.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    #[serde(default)]
    pub name: String,
    pub groups: Vec<GroupSpec>,
    /// What the write-safety gate checked for every path this phase opens (see `opened_paths`):
    /// the plan refuses any open whose descriptor is not that very object. None (the engine used
    /// directly, e.g. by Rust tests) compares nothing.
    #[serde(default)]
    pub checked: Option<Vec<CheckedPath>>,
}

/// The identity of a path as the write-safety gate saw it, compared with fstat of every
/// descriptor the plan opens on that path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Identity {
    /// A block device: its device number (st_rdev), so any link to it is the same device.
    Block { rdev: u64 },
    /// One of the kernel's memory character devices (/dev/null, /dev/zero, /dev/full): its
    /// device number, so a link named like one of them but pointing elsewhere does not pass.
    Char { rdev: u64 },
    /// A regular file: the file system's device number and the inode.
    File { dev: u64, ino: u64 },
    /// Nothing there yet: the plan may create a regular file, never open a device.
    Absent,
    /// A network target (nbd://): the gate cannot look inside it, so the plan does, over its own
    /// connection; `allow_destroy` says the user named it in --allow-destroy.
    Remote { allow_destroy: bool },
}

/// One entry of `PhaseSpec::checked`: `{"path", "kind", ...}` (flattened, so serde cannot also
/// deny unknown fields here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckedPath {
    pub path: String,
    #[serde(flatten)]
    pub identity: Identity,
}

/// A path the plan of a phase opens, and whether it may write there (a write pattern, or the
/// creation and layout of a file that a read needs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenedPath {
    pub path: String,
    pub writes: bool,
}

impl PhaseSpec {
    pub fn from_json(text: &str) -> Result<PhaseSpec> {
        let spec: PhaseSpec =
            serde_json::from_str(text).map_err(|e| Error::spec(format!("job spec: {e}")))?;
        spec.validate()?;
        Ok(spec)
    }

    /// Checks of values and combinations that need no system access.
    pub fn validate(&self) -> Result<()> {
        if self.groups.is_empty() {
            return Err(Error::spec("phase has no groups"));
        }
        let first = &self.groups[0];
        for g in &self.groups {
            g.validate()?;
            if g.ramp != first.ramp || g.interval != first.interval {
                return Err(Error::spec(format!(
                    "groups of one phase must share ramp and interval ({} has ramp={}s interval={}s, {} has ramp={}s interval={}s)",
                    first.name, first.ramp, first.interval, g.name, g.ramp, g.interval
                )));
            }
        }
        Ok(())
    }

    /// Every path the plan opens, in plan order, without duplicates: each target, or with
    /// `files = per_thread` each thread's PATH.N (N the participant index, so ranks sharing a
    /// target open distinct names). The write-safety gate checks exactly these.
    pub fn opened_paths(&self) -> Vec<OpenedPath> {
        let mut out: Vec<OpenedPath> = Vec::new();
        for g in &self.groups {
            // Trims are destructive: the gate treats them as writes.
            let writes = g.rw.read_percent(g.rwmix_read) < 100;
            for target in &g.target {
                for path in g.file_names(target) {
                    match out.iter_mut().find(|o| o.path == path) {
                        Some(o) => o.writes |= writes,
                        None => out.push(OpenedPath { path, writes }),
                    }
                }
            }
        }
        out
    }

    /// Names of the spec fields, as the option table must list them.
    pub fn group_field_names() -> Vec<String> {
        match serde_json::to_value(GroupSpec::default()) {
            Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }
}

impl GroupSpec {
    /// The file names the threads of this group open on `target`: the target itself, or with
    /// `files = per_thread` one PATH.N per thread, N the participant index.
    pub fn file_names(&self, target: &str) -> Vec<String> {
        match self.files {
            FileLayout::Shared => vec![target.to_string()],
            FileLayout::PerThread => (0..self.threads as u64)
                .map(|th| format!("{target}.{}", self.participant_base + th))
                .collect(),
        }
    }

    /// Transfers a sequential cursor advances per request: one, plus the hole's (seq_hole is a
    /// whole number of bs once validated).
    pub fn seq_stride(&self) -> u64 {
        1 + self.seq_hole / self.bs
    }

    /// Transfers a sequential cursor moves per request, signed: forward past a hole, or back with
    /// seq_rewind (0: the same block again).
    pub fn seq_step(&self) -> i64 {
        self.seq_stride() as i64 - (self.seq_rewind / self.bs) as i64
    }

    /// Participants sharing one target's layout.
    pub fn participant_count(&self) -> u64 {
        if self.participants == 0 { self.threads as u64 } else { self.participants }
    }

    pub fn validate(&self) -> Result<()> {
        let who = if self.name.is_empty() { String::new() } else { format!("{}: ", self.name) };
        let bad = |field: &str, msg: String| Error::spec(format!("{who}{field}: {msg}"));
        if self.target.is_empty() {
            return Err(bad("target", "no target given".into()));
        }
        // Bounds of every numeric option (rules.rs, exported to the Python option table).
        crate::rules::check_group(self).map_err(|e| Error::spec(format!("{who}{}", e.message)))?;
        if let Some(text) = &self.buffer_pattern {
            crate::buffer::parse_hex_pattern(text).map_err(|m| bad("buffer_pattern", m))?;
            if self.verify != VerifyKind::Off {
                return Err(bad("buffer_pattern", "verify writes its own data: use one or the other".into()));
            }
        }
        if let Some(text) = &self.cpus {
            crate::cpus::check(text).map_err(|m| bad("cpus", m))?;
        }
        self.validate_data_pattern(&bad)?;
        if self.percentage_random < 100 && self.sized_requests() {
            return Err(bad("percentage_random", "with mixed request sizes (bssplit, bsrange, blockalign) every request is drawn; use one bs".into()));
        }
        if self.verify.stamps() && self.bs < MIN_BLOCK {
            return Err(bad("bs", format!("{} bytes is too small to carry a verification header; verify needs bs >= {MIN_BLOCK}", self.bs)));
        }
        if self.rbw != RbwMode::Off {
            if self.rw != Rw::Write {
                return Err(bad("rbw", "read-behind-write needs rw=write: a writer, and storlab adds a reader per target".into()));
            }
            if self.qd != 1 || self.threads != 1 || self.files != FileLayout::Shared {
                return Err(bad("rbw", "read-behind-write runs one writer and one reader per target at qd 1: use threads=1, qd=1, files=shared".into()));
            }
        }
        if self.seq_hole > 0 {
            if self.rw.is_random() {
                return Err(bad("seq_hole", "skips bytes between sequential requests; a random pattern has none (use a sequential rw)".into()));
            }
            if !self.seq_hole.is_multiple_of(self.bs) {
                return Err(bad("seq_hole", format!("{} bytes is not a whole number of transfers of bs = {} bytes; allowed: 0 or a multiple of bs", self.seq_hole, self.bs)));
            }
            if matches!(self.thread_layout, ThreadLayout::Segmented | ThreadLayout::Strided) {
                return Err(bad("seq_hole", "holes are bytes of one contiguous range; they need thread_layout=region or shared".into()));
            }
        }
        if self.seq_rewind > 0 {
            let refuse = |why: String| Err(bad("seq_rewind", why));
            if self.rw.is_random() {
                return refuse("moves a sequential cursor back; a random pattern has none (use a sequential rw)".into());
            }
            if self.seq_hole > 0 {
                return refuse("a cursor moves forward (seq_hole) or back (seq_rewind), not both".into());
            }
            if self.rbw != RbwMode::Off {
                return refuse("read-behind-write follows the writer forward; use seq_rewind = 0".into());
            }
            if !self.seq_rewind.is_multiple_of(self.bs) {
                return refuse(format!("{} bytes is not a whole number of transfers of bs = {} bytes; allowed: 0 or a multiple of bs", self.seq_rewind, self.bs));
            }
            if self.sized_requests() || matches!(self.thread_layout, ThreadLayout::Segmented | ThreadLayout::Strided) {
                return refuse("needs one request size and one contiguous range (thread_layout region or shared)".into());
            }
        }
        if let Some(b) = self.block {
            if b % self.bs != 0 {
                return Err(bad("block", format!("{b} bytes is not a whole number of transfers of bs = {} bytes", self.bs)));
            }
        }
        let participants = self.participant_count();
        if self.participant_base + self.threads as u64 > participants {
            return Err(bad("participant_base", format!(
                "participants {}..{} do not fit in participants = {participants}",
                self.participant_base, self.participant_base + self.threads as u64
            )));
        }
        if self.files == FileLayout::PerThread && matches!(self.thread_layout, ThreadLayout::Segmented | ThreadLayout::Strided) {
            return Err(bad("thread_layout", "segmented and strided layouts share one file; they need files=shared".into()));
        }
        if self.io_size.is_some() && self.io_total.is_some() {
            return Err(bad("io_size", "give io_size (per thread) or io_total, not both".into()));
        }
        if let (Some(size), offset) = (self.size, self.offset) {
            if size.checked_add(offset).is_none_or(|end| end > MAX_BYTES) {
                return Err(bad("size", format!("offset {offset} + size {size} is out of range; allowed: up to {MAX_BYTES} bytes (1 EiB)")));
            }
        }
        if self.segments.checked_mul(self.block.unwrap_or(self.bs)).is_none_or(|b| b > MAX_BYTES) {
            return Err(bad("segments", format!("{} segments of {} bytes exceed {MAX_BYTES} bytes (1 EiB)", self.segments, self.block.unwrap_or(self.bs))));
        }
        let engine_scoped = [("uring.fixed_buffers", self.uring_fixed_buffers != FixedBuffers::Auto, EngineKind::IoUring),
            ("uring.fixed_files", self.uring_fixed_files, EngineKind::IoUring), ("uring.sqpoll", self.uring_sqpoll, EngineKind::IoUring),
            ("uring.batch", self.uring_batch > 0, EngineKind::IoUring), ("uring.wait_spin", self.uring_wait_spin != DEFAULT_WAIT_SPIN_S, EngineKind::IoUring), ("null_delay", self.null_delay > 0.0, EngineKind::Null),
            ("endpoint", self.endpoint.is_some(), EngineKind::S3), ("object_size", self.object_size.is_some(), EngineKind::S3),
            ("part_size", self.part_size != DEFAULT_PART_SIZE, EngineKind::S3), ("insecure", self.insecure, EngineKind::S3),
            ("virtual_host", self.virtual_host, EngineKind::S3)];
        if let Some((field, _, engine)) = engine_scoped.iter().find(|(_, set, engine)| *set && *engine != self.engine) {
            return Err(bad(field, format!("belongs to engine {}, but engine is {}", engine.as_str(), self.engine.as_str())));
        }
        self.validate_remote(&bad)?;
        if self.engine == EngineKind::Psync && self.qd > 1 {
            return Err(bad("qd", format!("psync does one request at a time; qd {} needs an asynchronous engine (io_uring or null)", self.qd)));
        }
        self.validate_pacing(&bad)?;
        self.validate_trim(&bad)?;
        self.validate_iolog(&bad)?;
        self.validate_sizes(&bad)?;
        Ok(())
    }

    /// compress_percentage and dedupe_percentage shape the data writes carry: refused where the
    /// data is fixed by something else.
    fn validate_data_pattern(&self, bad: &dyn Fn(&str, String) -> Error) -> Result<()> {
        if self.compress_percentage > 0 && self.verify == VerifyKind::Fill {
            return Err(bad("compress_percentage", "verify = fill writes its fill; use verify = crc32c or xxh3 (their payload is shaped) or verify = off".into()));
        }
        if self.dedupe_percentage > 0 {
            if self.verify != VerifyKind::Off {
                return Err(bad("dedupe_percentage", "a verified block names its own offset, so no two are alike; use verify = off".into()));
            }
            if !self.scramble {
                return Err(bad("dedupe_percentage", "with scramble off every write repeats its slot's data already; turn scramble on".into()));
            }
        }
        Ok(())
    }

    /// A remote target (nbd://) is served by its own engine, and what only a local file has is
    /// refused for it in one line.
    fn validate_remote(&self, bad: &dyn Fn(&str, String) -> Error) -> Result<()> {
        use crate::remote::RemoteKind;
        let kinds: Vec<Option<RemoteKind>> = self.target.iter().map(|t| RemoteKind::of(t)).collect();
        for (t, k) in self.target.iter().zip(&kinds) {
            match k {
                Some(k) => k.check_url(t).map_err(|m| bad("target", format!("{t} {m}")))?,
                None => if let Some(scheme) = crate::remote::url_scheme(t) {
                    return Err(bad("target", format!("{t} names scheme '{scheme}', which no engine reads; allowed: {} or a local path (./{t} for a path of that name)", crate::remote::SCHEMES)));
                },
            }
        }
        if let Some((t, k)) = self.target.iter().zip(&kinds).find_map(|(t, k)| k.map(|k| (t, k))) {
            if self.engine != k.engine() {
                return Err(bad("engine", format!("{t} is read and written by engine {} (fio's ioengine={}); engine is {}", k.engine().as_str(), k.fio_engine(), self.engine.as_str())));
            }
            let local_only = [("files", self.files != FileLayout::Shared, "one file per thread"), ("open_sync", self.open_sync != OpenSync::None, "an O_SYNC/O_DSYNC open"),
                ("read_iolog", self.read_iolog.is_some(), "a replayed log"), ("rbw", self.rbw != RbwMode::Off, "read-behind-write")];
            if k == RemoteKind::Nfs && self.rw.trims() {
                return Err(bad("rw", format!("NFS has no trim; {t} is {}: use a pattern without trims", k.described())));
            }
            if let Some((field, _, what)) = local_only.iter().find(|(_, set, _)| *set) {
                return Err(bad(field, format!("{what} is for local files; {t} is {} (fsync_every makes writes stable there)", k.described())));
            }
            if k == RemoteKind::S3 {
                self.validate_objects(bad)?;
            }
        }
        if let Some(t) = kinds.iter().zip(&self.target).find_map(|(k, t)| k.is_none().then_some(t)) {
            if let Some(k) = [RemoteKind::Nbd, RemoteKind::Nfs, RemoteKind::S3].into_iter().find(|k| k.engine() == self.engine) {
                return Err(bad("target", format!("engine {} reads {} targets ({}); {t} is a local path", self.engine.as_str(), k.type_name(), k.url_form())));
            }
        }
        Ok(())
    }

    /// An s3:// target is cut into objects of object_size: a write or a trim is one whole object
    /// (PUT, DELETE), a read stays inside one object (a GET, ranged when smaller), so the range
    /// starts and ends on object boundaries and every request is of bs.
    fn validate_objects(&self, bad: &dyn Fn(&str, String) -> Error) -> Result<()> {
        for endpoint in self.endpoint.iter().flat_map(|e| e.split(',')) {
            crate::remote::s3_config::check_endpoint(endpoint.trim()).map_err(Error::spec)?;
        }
        let object = self.object_size.unwrap_or(self.bs);
        let [_, writes, trims] = self.directions();
        if self.bssplit.is_some() || self.bsrange.is_some() || self.blockalign > 0 {
            let field = if self.bssplit.is_some() { "bssplit" } else if self.bsrange.is_some() { "bsrange" } else { "blockalign" };
            return Err(bad(field, format!("an s3 target takes requests of one size, bs, inside objects of object_size ({object} bytes)")));
        }
        if (writes || trims) && self.bs != object {
            let what = if writes { "a write is a PUT" } else { "a trim is a DELETE" };
            return Err(bad("object_size", format!("{what} of a whole object: bs ({} bytes) must equal object_size ({object} bytes)", self.bs)));
        }
        if !object.is_multiple_of(self.bs) {
            return Err(bad("object_size", format!("{object} bytes is not a multiple of bs ({} bytes): a read must stay inside one object", self.bs)));
        }
        if !self.offset.is_multiple_of(object) {
            return Err(bad("offset", format!("{} is not a multiple of object_size ({object} bytes): the range starts on an object", self.offset)));
        }
        if let Some(size) = self.size.filter(|s| !s.is_multiple_of(object)) {
            return Err(bad("size", format!("{size} bytes is not a whole number of objects of object_size ({object} bytes)")));
        }
        Ok(())
    }

    /// The request sizes per direction [read, write, trim] (bssplit, bsrange or bs).
    pub fn size_laws(&self) -> std::result::Result<[SizeLaw; 3], String> {
        crate::blocksize::laws(self.bs, self.bssplit.as_deref(), self.bsrange.as_deref())
    }

    /// The directions the pattern issues, as [read, write, trim].
    pub fn directions(&self) -> [bool; 3] {
        [self.rw.read_percent(self.rwmix_read) > 0 || self.rbw != RbwMode::Off, self.rw.writes(self.rwmix_read), self.rw.trims()]
    }

    /// The size laws of the directions the pattern issues.
    fn used_laws(&self) -> Vec<SizeLaw> {
        let laws = self.size_laws().unwrap_or_else(|_| std::array::from_fn(|_| SizeLaw::Fixed(self.bs)));
        laws.into_iter().zip(self.directions()).filter(|(_, used)| *used).map(|(l, _)| l).collect()
    }

    /// The unit of offsets: blockalign, else the smallest size any issued direction draws.
    pub fn unit(&self) -> u64 {
        if self.blockalign > 0 {
            return self.blockalign;
        }
        self.used_laws().iter().map(SizeLaw::min).min().unwrap_or(self.bs)
    }

    /// The largest request any issued direction draws (what each request buffer must hold).
    pub fn largest_request(&self) -> u64 {
        self.used_laws().iter().map(SizeLaw::max).max().unwrap_or(self.bs).max(self.bs)
    }

    /// Requests are not all of bs at bs-aligned offsets: sizes drawn per request, per direction, or
    /// offsets aligned to something else (workload.rs then works in bytes).
    pub fn sized_requests(&self) -> bool {
        let one_size = self.used_laws().iter().all(|l| *l == SizeLaw::Fixed(self.bs));
        !one_size || (self.blockalign > 0 && self.blockalign != self.bs)
    }

    /// The form the plan runs: with varying sizes, bs becomes the unit of offsets; a bssplit or
    /// bsrange of one size for every issued direction becomes that bs.
    pub fn normalised(mut self) -> GroupSpec {
        let used = self.used_laws();
        if let Some(SizeLaw::Fixed(b)) = used.first().cloned() {
            if used.iter().all(|l| *l == SizeLaw::Fixed(b)) && (self.blockalign == 0 || self.blockalign == b) {
                self.bs = b;
                self.bssplit = None;
                self.bsrange = None;
                self.blockalign = 0;
                return self;
            }
        }
        // bs becomes the unit of offsets: the sizes are written out for every direction first
        let Ok(laws) = self.size_laws() else { return self };
        if self.bsrange.is_some() {
            self.bsrange = Some(crate::blocksize::explicit(&laws, true));
        } else {
            self.bssplit = Some(crate::blocksize::explicit(&laws, false));
        }
        self.bs = self.unit();
        self
    }

    /// bssplit, bsrange, blockalign.
    fn validate_sizes(&self, bad: &dyn Fn(&str, String) -> Error) -> Result<()> {
        let option = if self.bssplit.is_some() { "bssplit" } else if self.bsrange.is_some() { "bsrange" } else { "blockalign" };
        if self.bssplit.is_some() && self.bsrange.is_some() {
            return Err(bad("bssplit", "give bssplit or bsrange, not both".into()));
        }
        self.size_laws().map_err(|e| Error::spec(format!("{}{e}", if self.name.is_empty() { String::new() } else { format!("{}: ", self.name) })))?;
        if !self.sized_requests() {
            return Ok(());
        }
        let refused = if self.verify != VerifyKind::Off {
            Some("verification checks blocks of one size (bs); use verify=off")
        } else if self.rbw != RbwMode::Off {
            Some("read-behind-write follows records of one size (bs)")
        } else if self.read_iolog.is_some() {
            Some("a replay takes each request's size from the log")
        } else if matches!(self.thread_layout, ThreadLayout::Segmented | ThreadLayout::Strided) {
            Some("segmented and strided layouts move transfers of one size; use thread_layout=region or shared")
        } else {
            None
        };
        if let Some(why) = refused {
            return Err(bad(option, why.into()));
        }
        let unit = self.unit();
        if self.seq_hole > 0 && !self.seq_hole.is_multiple_of(unit) {
            return Err(bad("seq_hole", format!("{} bytes is not a multiple of {unit} bytes, the unit of offsets (blockalign or the smallest request size)", self.seq_hole)));
        }
        if !self.offset.is_multiple_of(unit) {
            return Err(bad("offset", format!("{} is not a multiple of {unit} bytes, the unit of offsets (blockalign or the smallest request size)", self.offset)));
        }
        Ok(())
    }

    /// rate, rate_iops, rate_min, rate_iops_min, thinktime*: what relates two options (each
    /// option's own bounds are in rules.rs).
    fn validate_pacing(&self, bad: &dyn Fn(&str, String) -> Error) -> Result<()> {
        for d in 0..3 {
            let cap_bw = self.rate[d] > 0 && self.rate_min[d] > self.rate[d];
            let cap_iops = self.rate_iops[d] > 0 && self.rate_iops_min[d] > self.rate_iops[d];
            if cap_bw || cap_iops {
                let what = if cap_bw { "rate_min" } else { "rate_iops_min" };
                return Err(bad(what, format!("the floor of the {} direction is above its cap", ["read", "write", "trim"][d])));
            }
        }
        if self.rate_process == RateProcess::Poisson && self.rate.iter().chain(self.rate_iops.iter()).all(|&r| r == 0) {
            return Err(bad("rate_process", "poisson spaces the requests of a rate or rate_iops cap: give one".into()));
        }
        if self.thinktime_spin > self.thinktime {
            return Err(bad("thinktime_spin", format!("{} s is longer than thinktime ({} s), of which it is a part", self.thinktime_spin, self.thinktime)));
        }
        Ok(())
    }

    /// rw = trim, randtrim, trimwrite.
    fn validate_trim(&self, bad: &dyn Fn(&str, String) -> Error) -> Result<()> {
        if !self.rw.trims() {
            return Ok(());
        }
        if self.verify != VerifyKind::Off {
            return Err(bad("verify", format!("trim patterns ({:?}) cannot be verified; use verify=off", self.rw).to_lowercase()));
        }
        Ok(())
    }

    /// write_iolog, read_iolog, replay_no_stall.
    fn validate_iolog(&self, bad: &dyn Fn(&str, String) -> Error) -> Result<()> {
        for (field, v) in [("write_iolog", &self.write_iolog), ("read_iolog", &self.read_iolog)] {
            if v.as_ref().is_some_and(|p| p.is_empty()) {
                return Err(bad(field, "expected a file path, got an empty text".into()));
            }
        }
        if self.read_iolog.is_none() {
            if self.replay_no_stall {
                return Err(bad("replay_no_stall", "only applies to read_iolog replays".into()));
            }
            return Ok(());
        }
        if self.verify != VerifyKind::Off || self.rbw != RbwMode::Off {
            return Err(bad("read_iolog", "a replay cannot be combined with verify or rbw".into()));
        }
        if self.files != FileLayout::Shared {
            return Err(bad("read_iolog", "a replay works on the log's file (or the one target): use files=shared".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase_json(extra: &str) -> String {
        let mut v = serde_json::to_value(GroupSpec { target: vec!["/tmp/x".into()], ..Default::default() }).unwrap();
        let extra: serde_json::Value = serde_json::from_str(extra).unwrap();
        for (k, val) in extra.as_object().unwrap() {
            v[k] = val.clone();
        }
        format!("{{\"name\":\"p\",\"groups\":[{v}]}}")
    }

    #[test]
    fn round_trip_and_field_names() {
        let p = PhaseSpec::from_json(&phase_json("{}")).unwrap();
        assert_eq!(p.groups[0].bs, 4096);
        let names = PhaseSpec::group_field_names();
        assert!(names.contains(&"uring.fixed_buffers".to_string()));
        assert!(names.contains(&"rwmix_read".to_string()));
    }

    /// scramble is on by default, off when asked, and on in a spec written before it existed;
    /// writes stamped by verify and verify = fill are never scrambled.
    #[test]
    fn scramble_defaults_on_and_a_spec_without_it_reads_as_on() {
        let g = |extra: &str| PhaseSpec::from_json(&phase_json(extra)).unwrap().groups[0].clone();
        assert!(g("{}").scramble && g("{}").scrambles_writes());
        assert!(!g(r#"{"scramble": false}"#).scrambles_writes());
        for kind in ["crc32c", "xxh3", "fill"] {
            let v = g(&format!(r#"{{"verify": "{kind}"}}"#));
            assert!(v.scramble && !v.scrambles_writes(), "{kind}");
        }
        let mut v: serde_json::Value = serde_json::from_str(&phase_json("{}")).unwrap();
        v["groups"][0].as_object_mut().unwrap().remove("scramble");
        assert!(PhaseSpec::from_json(&v.to_string()).unwrap().groups[0].scramble);
        assert!(PhaseSpec::from_json(&phase_json(r#"{"scramble": "yes"}"#)).is_err());
    }

    #[test]
    fn sized_requests_are_validated_and_normalised() {
        let e = PhaseSpec::from_json(&phase_json(r#"{"bssplit": "4k/50:8k/60"}"#)).unwrap_err();
        assert!(e.message.starts_with("bssplit: \"4k/50:8k/60\" is not allowed (percentages add up to 110"), "{}", e.message);
        let e = PhaseSpec::from_json(&phase_json(r#"{"bssplit": "4k/50:8k/50", "verify": "crc32c", "rw": "write"}"#)).unwrap_err();
        assert!(e.message.starts_with("bssplit: verification checks blocks of one size"), "{}", e.message);
        let e = PhaseSpec::from_json(&phase_json(r#"{"bsrange": "4k-8k", "bssplit": "4k/100"}"#)).unwrap_err();
        assert!(e.message.contains("not both"), "{}", e.message);
        let e = PhaseSpec::from_json(&phase_json(r#"{"bsrange": "4k-8k", "thread_layout": "strided"}"#)).unwrap_err();
        assert!(e.message.starts_with("bsrange: segmented and strided"), "{}", e.message);
        // one size per issued direction is plain bs; varying sizes make bs the unit of offsets
        let g = PhaseSpec::from_json(&phase_json(r#"{"bssplit": "8k/100,64k/100", "rw": "randread"}"#)).unwrap().groups.remove(0);
        let g = g.normalised();
        assert_eq!((g.bs, g.bssplit.as_deref(), g.sized_requests()), (8192, None, false));
        let g = PhaseSpec::from_json(&phase_json(r#"{"bssplit": "8k/50:64k/50", "rw": "randrw"}"#)).unwrap().groups.remove(0);
        let g = g.normalised();
        assert_eq!((g.bs, g.largest_request(), g.sized_requests()), (8192, 65536, true));
        assert_eq!(g.bssplit.as_deref(), Some("8k/50:64k/50,8k/50:64k/50,8k/50:64k/50"));
    }

    #[test]
    fn errors_name_the_field() {
        let e = PhaseSpec::from_json(&phase_json(r#"{"qd": 8}"#)).unwrap_err();
        assert!(e.message.contains("qd"), "{}", e.message);
        let e = PhaseSpec::from_json(&phase_json(r#"{"uring.sqpoll": true}"#)).unwrap_err();
        assert!(e.message.contains("uring"), "{}", e.message);
        let e = PhaseSpec::from_json(&phase_json(r#"{"rw": "sideways"}"#)).unwrap_err();
        assert!(e.message.contains("sideways"), "{}", e.message);
        let e = PhaseSpec::from_json(&phase_json(r#"{"bogus": 1}"#)).unwrap_err();
        assert!(e.message.contains("bogus"), "{}", e.message);
    }

    /// uring.fixed_buffers is auto, on or off (auto by default, on any engine); on and off are
    /// io_uring's; the old booleans are the option table's to translate, not the engine's.
    #[test]
    fn fixed_buffers_is_a_three_way_choice() {
        assert_eq!(PhaseSpec::from_json(&phase_json("{}")).unwrap().groups[0].uring_fixed_buffers, FixedBuffers::Auto);
        for (text, mode) in [("auto", FixedBuffers::Auto), ("on", FixedBuffers::On), ("off", FixedBuffers::Off)] {
            let p = PhaseSpec::from_json(&phase_json(&format!(r#"{{"engine": "io_uring", "uring.fixed_buffers": "{text}"}}"#))).unwrap();
            assert_eq!(p.groups[0].uring_fixed_buffers, mode, "{text}");
            assert_eq!(serde_json::to_value(mode).unwrap(), serde_json::json!(text));
        }
        let e = PhaseSpec::from_json(&phase_json(r#"{"engine": "io_uring", "uring.fixed_buffers": "sometimes"}"#)).unwrap_err();
        assert!(e.message.contains("sometimes") && e.message.contains("`auto`, `on`, `off`"), "{}", e.message);
        assert!(PhaseSpec::from_json(&phase_json(r#"{"engine": "io_uring", "uring.fixed_buffers": true}"#)).is_err());
        for text in ["on", "off"] {
            let e = PhaseSpec::from_json(&phase_json(&format!(r#"{{"uring.fixed_buffers": "{text}"}}"#))).unwrap_err();
            assert_eq!(e.message, "uring.fixed_buffers: belongs to engine io_uring, but engine is psync", "{text}");
        }
        assert!(PhaseSpec::from_json(&phase_json(r#"{"uring.fixed_buffers": "auto"}"#)).is_ok());
    }

    /// A trim is destructive: the write-safety gate must check its targets as written.
    #[test]
    fn trim_patterns_open_their_targets_for_writing() {
        for rw in ["trim", "randtrim", "trimwrite"] {
            let p = PhaseSpec::from_json(&phase_json(&format!(r#"{{"rw": "{rw}"}}"#))).unwrap();
            assert_eq!(p.opened_paths(), vec![OpenedPath { path: "/tmp/x".into(), writes: true }], "{rw}");
        }
        let e = PhaseSpec::from_json(&phase_json(r#"{"rw": "trim", "verify": "crc32c"}"#)).unwrap_err();
        assert!(e.message.starts_with("verify: trim patterns"), "{}", e.message);
    }

    #[test]
    fn pacing_and_iolog_fields_are_validated() {
        let e = PhaseSpec::from_json(&phase_json(r#"{"rate": [100, 0, 0], "rate_min": [200, 0, 0]}"#)).unwrap_err();
        assert!(e.message.starts_with("rate_min: the floor of the read direction is above its cap"), "{}", e.message);
        let e = PhaseSpec::from_json(&phase_json(r#"{"thinktime": 0.001, "thinktime_spin": 0.002}"#)).unwrap_err();
        assert!(e.message.starts_with("thinktime_spin:"), "{}", e.message);
        let e = PhaseSpec::from_json(&phase_json(r#"{"thinktime_blocks": 0}"#)).unwrap_err();
        assert!(e.message.starts_with("thinktime_blocks:"), "{}", e.message);
        let e = PhaseSpec::from_json(&phase_json(r#"{"replay_no_stall": true}"#)).unwrap_err();
        assert!(e.message.starts_with("replay_no_stall:"), "{}", e.message);
        let e = PhaseSpec::from_json(&phase_json(r#"{"read_iolog": "/x.log", "verify": "crc32c"}"#)).unwrap_err();
        assert!(e.message.starts_with("read_iolog:"), "{}", e.message);
        // [read, write, trim] always: the front end expands "R" and "R,W" (options.py)
        let e = PhaseSpec::from_json(&phase_json(r#"{"rate": [1, 2]}"#)).unwrap_err();
        assert!(e.message.contains("expected an array of length 3"), "{}", e.message);
    }

    #[test]
    fn huge_durations_and_sizes_are_refused_not_panicking() {
        for (field, value) in [("time", "1.8446744073709552e19"), ("start_delay", "9.223372036854776e18"),
                               ("ramp", "1e300"), ("stall_after", "315360001"), ("null_delay", "1e20"),
                               ("interval", "1e10")] {
            let e = PhaseSpec::from_json(&phase_json(&format!(r#"{{"{field}": {value}}}"#))).unwrap_err();
            assert!(e.message.contains(field), "{}", e.message);
        }
        let e = PhaseSpec::from_json(&phase_json(r#"{"size": 18446744073709551615, "offset": 1}"#)).unwrap_err();
        assert!(e.message.contains("size"), "{}", e.message);
        let e = PhaseSpec::from_json(&phase_json(r#"{"segments": 18446744073709551615}"#)).unwrap_err();
        assert!(e.message.contains("segments"), "{}", e.message);
        assert!(PhaseSpec::from_json(&phase_json(r#"{"time": 315360000}"#)).is_ok());
    }

    /// An s3 target is cut into whole objects: writes and trims are whole objects, reads stay
    /// inside one, one request size; its options belong to the s3 engine alone.
    #[test]
    fn s3_targets_take_whole_objects_and_their_options_only_there() {
        let s3 = |extra: &str| {
            let mut v: serde_json::Value = serde_json::from_str(&phase_json(extra)).unwrap();
            let g = &mut v["groups"][0];
            g["target"] = serde_json::json!(["s3://bench/p"]);
            if g["engine"] == "psync" {
                g["engine"] = "s3".into();
            }
            PhaseSpec::from_json(&v.to_string()).map(drop).map_err(|e| e.message)
        };
        assert!(s3(r#"{"rw": "write", "bs": 1048576, "size": 4194304}"#).is_ok());
        assert!(s3(r#"{"rw": "randread", "bs": 4096, "object_size": 1048576, "size": 4194304, "qd": 8}"#).is_ok());
        let refused = [
            (r#"{"rw": "write", "bs": 4096, "object_size": 1048576}"#, "object_size: a write is a PUT of a whole object"),
            (r#"{"rw": "trim", "bs": 4096, "object_size": 8192}"#, "object_size: a trim is a DELETE of a whole object"),
            (r#"{"rw": "read", "bs": 12288, "object_size": 16384}"#, "object_size: 16384 bytes is not a multiple of bs"),
            (r#"{"rw": "read", "offset": 4096, "object_size": 8192}"#, "offset: 4096 is not a multiple of object_size"),
            (r#"{"rw": "read", "size": 12288, "object_size": 8192}"#, "size: 12288 bytes is not a whole number of objects"),
            (r#"{"rw": "randread", "bssplit": "4k/50:8k/50"}"#, "bssplit: an s3 target takes requests of one size"),
            (r#"{"endpoint": "ftp://h"}"#, "endpoint: 'ftp://h' is not an http:// or https:// URL"),
            (r#"{"engine": "nbd"}"#, "engine: s3://bench/p is read and written by engine s3"),
            (r#"{"files": "per_thread"}"#, "files: one file per thread is for local files"),
        ];
        for (extra, want) in refused {
            let m = s3(extra).unwrap_err();
            assert!(m.starts_with(want) && !m.contains('\n'), "{extra}: {m}");
        }
        let e = PhaseSpec::from_json(&phase_json(r#"{"object_size": 8192}"#)).unwrap_err();
        assert_eq!(e.message, "object_size: belongs to engine s3, but engine is psync");
        let e = PhaseSpec::from_json(&phase_json(r#"{"part_size": 4096}"#)).unwrap_err();
        assert!(e.message.starts_with("part_size:"), "{}", e.message);
        let e = PhaseSpec::from_json(&phase_json(r#"{"engine": "s3"}"#)).unwrap_err();
        assert!(e.message.starts_with("target: engine s3 reads s3 targets (s3://BUCKET/PREFIX); /tmp/x is a local path"), "{}", e.message);
    }
}
