//! One worker thread: keeps up to `qd` requests in flight on its target, stamps their times,
//! and records each completion in its own statistics. Request slots and their aligned buffers are
//! created once; the loop allocates nothing per I/O.
//!
//! Times, as fio defines them: `queued_ns` when the request has been prepared and is handed to the
//! backend, `issued_ns` after the submitting system call returned (asynchronous backends).
//! slat = issued - queued, clat = completion - issued, and the headline lat = slat + clat. The
//! worker keeps them as nanoseconds since the phase start: one clock subtraction per stamp.
//! For a blocking backend (psync) the call is the whole request: clat = lat, slat = 0.
//! Under a rate limit, think time or a timed replay, the worker waits before it prepares a
//! request; the clock starts after that wait, so lat never includes it (fio measures from the
//! actual submission too). Trims are synchronous in every backend (slat = 0).

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::buffer::{AlignedBuf, Scrambler};
use crate::engine::{self, Completion, EngineSetup, Queued, Request};
use crate::group::GroupSpec;
use crate::error::{Error, Result};
use crate::histogram::Histogram;
use crate::iolog::{self, Replay};
use crate::pace::{wait_until_or_stop, Pacer, Think};
use crate::plan::{Plan, TargetInfo, WorkerPlan};
use crate::rbw::{Gate, Role, WriterDone};
use crate::spec::Rw;
use crate::control::Control;
use crate::stats::{DirStats, ProgressLog, WorkerProgress};
use crate::verify::{self, Expect, VerifyKind, VerifyTally};
use crate::workload::{AccessMap, Dir, OffsetGenerator};

struct Slot {
    /// This slot's part of the worker's buffer region.
    buf: *mut u8,
    /// Nanoseconds since the phase start.
    queued_ns: u64,
    issued_ns: u64,
    dir: Dir,
    offset: u64,
    len: u32,
}

/// Everything a finished worker hands back to the phase.
pub struct WorkerOutcome {
    /// Statistics per direction: read, write, trim.
    pub dirs: [DirStats; 3],
    pub sync: Histogram,
    pub summary: WorkerSummary,
    pub setup_flags: Vec<String>,
    /// The backend's own counters (Engine::counters).
    pub counters: Vec<(&'static str, u64)>,
    pub log: ProgressLog,
    pub verify: VerifyTally,
    pub readback: Readback,
    /// Writes issued as repeats of an earlier write (dedupe_percentage).
    pub repeated_writes: u64,
}

/// The read-back after a verified write (fio's do_verify): blocks read and checked, and how long it
/// took. It runs after the worker's measured window and is not part of its statistics.
#[derive(Debug, Serialize, Clone, Default)]
pub struct Readback {
    pub blocks: u64,
    pub seconds: f64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Per-worker line of the result: its window and totals (times relative to the phase start).
#[derive(Debug, Serialize, Clone, Default)]
pub struct WorkerSummary {
    pub id: usize,
    pub group: String,
    pub target: String,
    pub start_s: f64,
    pub end_s: f64,
    pub read_bytes: u64,
    pub read_ops: u64,
    pub write_bytes: u64,
    pub write_ops: u64,
    /// Only present for workers that trimmed.
    #[serde(skip_serializing_if = "is_zero")]
    pub trim_bytes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub trim_ops: u64,
}

impl WorkerSummary {
    pub fn bytes(&self) -> u64 {
        self.read_bytes + self.write_bytes + self.trim_bytes
    }
}

#[inline(always)]
fn ns_between(a: Instant, b: Instant) -> u64 {
    b.saturating_duration_since(a).as_nanos() as u64
}

fn total_bytes(dirs: &[DirStats; 3]) -> u64 {
    dirs.iter().map(|d| d.bytes).sum()
}

pub fn run_worker(plan: &Plan, w: &WorkerPlan, control: &Control) -> Result<WorkerOutcome> {
    let mut worker = Worker::start(plan, w, control)?;
    let writer_done = w.rbw.as_ref().filter(|(r, _)| *r == Role::Writer).map(|(_, ch)| WriterDone(ch));
    if let Err(e) = worker.run() {
        worker.drain_after_error();
        return Err(e);
    }
    drop(writer_done); // the reader may finish now
    worker.finish()
}

/// What `Worker::choose` decided.
enum Next {
    /// Issue this request now.
    Issue { dir: Dir, offset: u64, len: u32 },
    /// Issue nothing more for now and reap what is in flight: a sync or a think pause waits for
    /// the queue to drain, or the next request is not due before the given time.
    Hold(Option<Instant>),
    /// Nothing more to issue: the byte budget, the deadline, a stop, the end of a replay or the
    /// read-behind-write partner ended the run.
    Finish,
}

/// One worker's run. Its methods are the steps of an I/O, in the order an I/O takes them:
/// `choose` the next request, `issue` it (`stamp_write` first when verifying, else a write is
/// scrambled), `submit`, `reap`,
/// then `retire` each completion: check its result, `verify_read`, `account` it in the statistics.
/// `run` is the loop over them; `start` and `finish` are what comes before and after.
struct Worker<'a> {
    g: &'a GroupSpec,
    w: &'a WorkerPlan,
    target: &'a TargetInfo,
    control: &'a Control,
    progress: &'a WorkerProgress,
    replay: Option<&'a Replay>,
    /// The descriptor of a local target; -1 for a remote one, which the backend reaches itself.
    fd: RawFd,
    rw: Rw,
    qd: usize,
    bs: usize,
    /// Requests queued before a submit (uring.batch; the queue depth by default).
    batch: usize,
    /// The backend's requests complete in `reap`, so slat and clat are recorded apart.
    asynchronous: bool,
    count_sizes: bool,
    trimwrite: bool,
    /// The rate may pick the other direction of a mixed pattern.
    switch_dirs: bool,
    /// Reads are checked (verify is not off).
    verifying: bool,
    /// The verify pattern; Some exactly when writes are stamped (crc32c, xxh3).
    pattern: Option<verify::Pattern>,
    /// verify = fill: the group's fill, carried by every write and compared with every read.
    fill: Option<Vec<u8>>,
    /// Makes each write's sectors unique (buffer.rs); Some when the group scrambles its writes.
    scrambler: Option<Scrambler>,
    /// dedupe_percentage: which writes repeat an earlier one, and which one.
    dedupe: Option<Dedupe>,
    /// The key each slot's random bytes carry now (buffer.rs `rekey`); Some when writes get one.
    slot_keys: Option<Vec<u64>>,

    // The clock: all workers started together; the phase clock was set by the coordinator.
    phase_start: Instant,
    measure_start: Instant,
    ramp_ns: u64,
    interval_ns: u64,
    start_instant: Instant,
    /// A time-based worker runs for `time` from its own measured start (fio's startdelay semantics).
    deadline: Option<Instant>,
    /// The deadline in nanoseconds since the phase start (u64::MAX: none).
    deadline_ns: u64,
    /// The first timestamp of a replay: its requests are due relative to it.
    replay_first: u64,
    now: Instant,

    // Requests and the backend.
    backend: Box<dyn engine::Engine>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Slots queued but not yet submitted, so their issue time can be stamped after the submit.
    unsubmitted: Vec<u32>,
    completions: Vec<Completion>,
    inflight: usize,

    // Choosing the next request.
    gen: OffsetGenerator,
    pacer: Option<Pacer>,
    think: Option<Think>,
    /// The direction drawn for the next request, kept while it waits for its issue time.
    next_dir: Option<Dir>,
    replay_pos: usize,
    /// Read-behind-write: this worker's next record and the one in flight (qd is 1 there).
    record: u64,
    record_in_flight: u64,
    issuing: bool,
    /// An fsync is due once the queue is drained: a replayed sync asks for one, and fsync=N after
    /// the Nth write since the last.
    sync_due: bool,
    writes_since_sync: u64,
    write_sequence: u64,
    wrote_any: bool,
    issued_bytes: u64,
    issued_requests: u64,

    // Accounting.
    dirs: [DirStats; 3],
    sync: Histogram,
    log: ProgressLog,
    tally: VerifyTally,
    iolog_writer: Option<iolog::Writer>,
    done_bytes: u64,
    done_ops: u64,
    done_clat_ns: u64, // sum of the completion latencies of done_ops (published for steady state)
    /// The slots' buffers. Declared after `backend`, so it is dropped after it; None once leaked.
    region: Option<AlignedBuf>,
}

impl<'a> Worker<'a> {
    /// Set up (buffers, backend, I/O log), meet the other workers at the start line, then wait out
    /// a start delay. Every worker reaches the start line, even one whose set-up failed, so nobody
    /// waits forever.
    fn start(plan: &'a Plan, w: &'a WorkerPlan, control: &'a Control) -> Result<Worker<'a>> {
        let g = plan.group(w);
        if let Some(text) = &g.cpus {
            // the thread's place among its group's workers picks its CPU under the split policy
            let index = plan.workers.iter().filter(|x| x.group == w.group && x.id < w.id).count();
            let cpus = crate::cpus::parse_cpu_list(text).map_err(|m| Error::spec(format!("cpus: {m}")))?;
            crate::cpus::pin_thread(&cpus, g.cpus_policy, index)?;
        }
        let target = &plan.targets[w.target];
        let qd = g.qd as usize;
        let bs = g.bs as usize;
        let fd = w.file.as_ref().map_or(-1, |f| f.as_raw_fd());
        let replay = plan.replays[w.group].as_deref();
        // A replay's or a size split's requests may be longer than bs: every slot holds the longest.
        let longest = g.largest_request() as usize;
        let buf_len = replay.map_or(longest, |r| longest.max(r.max_len as usize));

        // One region for all slots (page-aligned strides), allocated and filled once.
        let stride = buf_len.div_ceil(plan.buffer_align) * plan.buffer_align;
        let mut region = AlignedBuf::new(stride * qd, plan.buffer_align);
        // verify = fill: every slot carries the group's fill, which every reader of the seed knows
        let fill = (g.verify == VerifyKind::Fill).then(|| verify::fill_data(g.seed, buf_len));
        match (&fill, g.pattern_bytes()) {
            (Some(data), _) => region.as_mut_slice().chunks_mut(stride).for_each(|s| s[..buf_len].copy_from_slice(data)),
            (None, pattern) if g.compress_percentage > 0 => crate::buffer::fill_compressible(
                region.as_mut_slice(), w.seed, g.compress_percentage, g.compress_chunk as usize, &pattern.unwrap_or_default(), stride),
            (None, Some(pattern)) => crate::buffer::fill_pattern(region.as_mut_slice(), &pattern, stride),
            (None, None) => region.fill_random(w.seed),
        }
        if g.dedupe_percentage > 0 {
            // a duplicate re-creates an earlier write from whichever slot it is issued in: every
            // slot holds the same base data (the stamps alone make the other writes unique)
            let (first, rest) = region.as_mut_slice().split_at_mut(stride);
            rest.chunks_mut(stride).for_each(|s| s.copy_from_slice(&first[..s.len()]));
        }
        let now = Instant::now();
        let slots: Vec<Slot> = (0..qd)
            // SAFETY: i * stride + buf_len <= stride * qd, inside the region.
            .map(|i| Slot { buf: unsafe { region.as_mut_ptr().add(i * stride) }, queued_ns: 0, issued_ns: 0, dir: Dir::Read, offset: 0, len: bs as u32 })
            .collect();
        let buffers: Vec<(*mut u8, usize)> = slots.iter().map(|s| (s.buf, buf_len)).collect();
        let remote = w.file.is_none().then_some(target.path.as_str());
        let backend = engine::create(&EngineSetup { fd, remote, buffers: &buffers, qd: g.qd, group: g, block_device: target.kind == "block", worker: w.id, phase_threads: plan.workers.len() });
        let iolog_path = g.write_iolog.as_ref().map(|p| {
            // Under MPI other processes log to the same name: their threads are numbered on from
            // participant_base (rank x threads), so the names stay apart.
            let mut sharing = plan.workers.iter().filter(|o| plan.group(o).write_iolog.as_ref() == Some(p)).count();
            if g.participant_count() > g.threads as u64 {
                sharing = sharing.max(2);
            }
            iolog::worker_log_path(p, g.participant_base as usize + w.id, sharing)
        });
        let iolog_writer = iolog_path.as_ref().map(|p| iolog::Writer::create(p, &target.path, now));
        control.ready.wait();
        control.wait_for_release();
        let backend = backend?;
        let mut iolog_writer = iolog_writer.transpose()?;

        let role = w.rbw.as_ref().map(|(r, _)| *r);
        let rw = if role == Some(Role::Reader) { Rw::Read } else { g.rw };
        let gen = OffsetGenerator::new(rw, g, w.map, w.seed);
        let interval_ns = (g.interval * 1e9) as u64;
        let expected_intervals = g.time.map(|t| (t / g.interval) as usize + 2).unwrap_or(16);
        let phase_start = control.phase_start();
        let measure_start = phase_start + Duration::from_secs_f64(g.ramp);
        if g.start_delay > 0.0 {
            let go = phase_start + Duration::from_secs_f64(g.start_delay);
            while Instant::now() < go && !control.stop.load(Ordering::Relaxed) {
                std::thread::sleep((go - Instant::now()).min(Duration::from_millis(10)));
            }
        }
        let now = Instant::now();
        let start_instant = now;
        if let Some(wr) = iolog_writer.as_mut() {
            wr.set_start(start_instant);
        }
        let verifying = g.verify != VerifyKind::Off;
        let deadline = g.time.map(|t| start_instant.max(measure_start) + Duration::from_secs_f64(t));
        Ok(Worker {
            g,
            w,
            target,
            control,
            progress: &control.progress[w.id],
            replay,
            fd,
            rw,
            qd,
            bs,
            batch: if g.uring_batch == 0 { qd } else { (g.uring_batch as usize).min(qd) },
            asynchronous: backend.caps().asynchronous,
            count_sizes: g.sized_requests(),
            trimwrite: rw == Rw::Trimwrite,
            // Not when verifying: the read-back replays the generator's own choices.
            switch_dirs: gen.mixed() && !verifying,
            verifying,
            pattern: g.verify.stamps().then(|| verify::Pattern::shaped(g.seed, bs, g.compress_percentage, g.compress_chunk as usize)),
            fill,
            scrambler: g.scrambles_writes().then(|| Scrambler::new(w.seed).shaped(g.data_shape())),
            dedupe: (g.dedupe_percentage > 0).then(|| Dedupe::new(g.dedupe_percentage, w.seed)),
            slot_keys: g.rekeys_writes().then(|| vec![0; qd]),
            phase_start,
            measure_start,
            ramp_ns: ns_between(phase_start, measure_start),
            interval_ns,
            start_instant,
            deadline,
            deadline_ns: deadline.map_or(u64::MAX, |d| ns_between(phase_start, d)),
            replay_first: replay.and_then(|r| r.entries.first()).map_or(0, |e| e.at_us),
            now,
            backend,
            slots,
            free: (0..qd as u32).rev().collect(),
            unsubmitted: Vec::with_capacity(qd),
            completions: Vec::with_capacity(qd.max(64) * 2),
            inflight: 0,
            gen,
            // Pacing: the rate schedule and think time run from this worker's own start.
            pacer: Pacer::new(g, start_instant, w.seed),
            think: Think::new(g),
            next_dir: None,
            replay_pos: 0,
            record: 0,
            record_in_flight: 0,
            issuing: true,
            sync_due: false,
            writes_since_sync: 0,
            write_sequence: 0,
            wrote_any: false,
            issued_bytes: 0,
            issued_requests: 0,
            dirs: std::array::from_fn(|_| DirStats::with_intervals(expected_intervals)),
            sync: Histogram::new(),
            log: ProgressLog::new(ns_between(phase_start, start_instant.max(measure_start))),
            tally: VerifyTally::default(),
            iolog_writer,
            done_bytes: 0,
            done_ops: 0,
            done_clat_ns: 0,
            region: Some(region),
        })
    }

    /// The loop: fill the queue, reap, and once nothing is in flight sync if due, or finish.
    /// An error returns at once; the caller drains what is still in flight (`drain_after_error`).
    fn run(&mut self) -> Result<()> {
        loop {
            let wait_for = self.fill()?;
            if self.inflight > 0 {
                self.reap(wait_for)?;
                continue;
            }
            // Nothing in flight: sync if due, or finish. As fio's fsync=N, the sync comes before
            // the request that follows the Nth write: none after the last (fsync_end covers that).
            if self.issuing && self.sync_due {
                self.sync_now()?;
                continue;
            }
            if !self.issuing {
                return Ok(());
            }
        }
    }

    /// Issue requests until the queue is full or `choose` holds or finishes, then submit what is
    /// queued. Returns the time a paced worker waits for (reaping meanwhile), if any.
    fn fill(&mut self) -> Result<Option<Instant>> {
        let mut wait_for = None;
        while self.issuing && self.inflight < self.qd {
            match self.choose() {
                Next::Issue { dir, offset, len } => self.issue(dir, offset, len)?,
                Next::Hold(until) => {
                    wait_for = until;
                    break;
                }
                Next::Finish => {
                    self.issuing = false;
                    break;
                }
            }
        }
        if !self.unsubmitted.is_empty() {
            self.submit()?;
        }
        Ok(wait_for)
    }

    /// Step 1: the next request, from the replay or the offset generator, once its limits, a
    /// think pause, the read-behind-write gate and its pacing allow. With nothing in flight it
    /// waits here; otherwise it holds, so the worker reaps while it waits.
    #[inline(always)]
    fn choose(&mut self) -> Next {
        loop {
            if self.issued_bytes >= self.w.io_limit
                || self.deadline.is_some_and(|d| self.now >= d)
                || self.control.stop.load(Ordering::Relaxed)
            {
                return Next::Finish;
            }
            if self.sync_due {
                return Next::Hold(None); // drain first, then sync (`run`)
            }
            if let Some(t) = self.think.as_mut() {
                if t.due() {
                    if self.inflight > 0 {
                        return Next::Hold(None); // fio quiesces before thinking: drain, then pause
                    }
                    t.pause(self.deadline, &self.control.stop);
                    self.now = Instant::now();
                    continue;
                }
            }
            if self.w.rbw.is_some() && !self.pass_rbw_gate() {
                return Next::Finish;
            }
            // What comes next, and from when it may be issued (None: now).
            let (dir, replayed, mut due) = match self.replay {
                Some(r) => {
                    let Some(e) = r.entries.get(self.replay_pos) else {
                        return Next::Finish;
                    };
                    let at = (!self.g.replay_no_stall)
                        .then(|| self.start_instant + Duration::from_micros(e.at_us.saturating_sub(self.replay_first)));
                    match e.action {
                        iolog::Action::Sync => {
                            self.replay_pos += 1;
                            self.sync_due = true;
                            continue;
                        }
                        iolog::Action::Io { dir, offset, len } => (dir, Some((offset, len)), at),
                    }
                }
                None => (self.next_dir.take().unwrap_or_else(|| self.gen.next_dir()), None, None),
            };
            let mut dir = dir;
            if let Some(p) = &self.pacer {
                if self.switch_dirs {
                    dir = p.choose(dir, ns_between(p.start, self.now));
                }
                let paced = p.start + Duration::from_nanos(p.due_ns(dir));
                due = Some(due.map_or(paced, |d| d.max(paced)));
            }
            if let Some(due) = due.filter(|&d| d > self.now) {
                // Not due yet: keep the choice, and wait (a deadline ends the wait).
                if self.replay.is_none() {
                    self.next_dir = Some(dir);
                }
                let until = self.deadline.map_or(due, |d| due.min(d));
                if self.inflight > 0 {
                    return Next::Hold(Some(until));
                }
                wait_until_or_stop(until, &self.control.stop);
                self.now = Instant::now();
                continue;
            }
            let (offset, len) = match replayed {
                Some(io) => {
                    self.replay_pos += 1;
                    io
                }
                None => self.gen.next_request(dir),
            };
            return Next::Issue { dir, offset, len };
        }
    }

    /// Read-behind-write: wait at the gate for the partner; false once the run is over for this
    /// worker. The gate may move this worker to another record.
    #[inline(never)]
    fn pass_rbw_gate(&mut self) -> bool {
        let Some((role, ch)) = &self.w.rbw else { return true };
        let stop = &self.control.stop;
        let stopped = || stop.load(Ordering::Relaxed);
        let gate = match role {
            Role::Writer => ch.writer_gate(self.g.rbw, self.record, &stopped),
            Role::Reader => ch.reader_gate(self.g.rbw, self.g.rbw_lag, self.record, &stopped),
        };
        self.now = Instant::now();
        match gate {
            Gate::Finish => false,
            Gate::Go(k) => {
                if k != self.record {
                    self.gen.seek(k);
                    self.record = k;
                }
                true
            }
        }
    }

    /// Step 2: issue the chosen request in a free slot. A blocking backend completes it here (it is
    /// retired at once); an asynchronous one queues it, submitted once `batch` are queued.
    #[inline(always)]
    fn issue(&mut self, dir: Dir, offset: u64, len: u32) -> Result<()> {
        self.record_in_flight = self.record;
        self.record += 1;
        let slot_id = self.free.pop().expect("a free slot while inflight < qd");
        self.count_issue(dir, len);
        if dir == Dir::Write {
            if self.pattern.is_some() {
                self.stamp_write(slot_id, offset);
            } else if let Some(s) = self.scrambler.as_mut() {
                // SAFETY: the slot's buffer holds at least len bytes and no request is using it
                // (it was just taken from the free list).
                let data = unsafe { std::slice::from_raw_parts_mut(self.slots[slot_id as usize].buf, len as usize) };
                let (at, sequence) = match self.dedupe.as_mut().and_then(|d| d.repeat()) {
                    Some(earlier) => earlier,
                    None => {
                        let sequence = s.next_sequence();
                        if let Some(d) = self.dedupe.as_mut() {
                            d.remember(offset, sequence);
                        }
                        (offset, sequence)
                    }
                };
                if let Some(keys) = self.slot_keys.as_mut() {
                    s.rekey(data, &mut keys[slot_id as usize], sequence);
                }
                s.stamp_as(data, at, sequence);
            }
        }
        // Latency runs from here, the actual issue, not from the paced schedule (fio's
        // definition too): a deliberate wait is never part of lat.
        let t0 = Instant::now();
        let t0_ns = ns_between(self.phase_start, t0);
        let slot = &mut self.slots[slot_id as usize];
        slot.dir = dir;
        slot.offset = offset;
        slot.len = len;
        slot.queued_ns = t0_ns;
        slot.issued_ns = t0_ns;
        let req = Request { slot: slot_id, dir, offset, len, buf: slot.buf };
        self.progress.issued(slot_id, t0_ns, offset);
        if let Some(wr) = self.iolog_writer.as_mut() {
            wr.io(t0, dir, offset, len)?;
        }
        // SAFETY: the slot's buffer holds len bytes for this request alone: the slot left the free
        // list above and returns to it only once its completion is retired.
        match unsafe { self.backend.queue(&req) }? {
            Queued::Completed(result) => {
                self.now = Instant::now();
                self.retire(slot_id, result, ns_between(self.phase_start, self.now), self.asynchronous)?;
                self.progress.publish(self.done_bytes, self.done_ops, self.done_clat_ns);
            }
            Queued::Pending => {
                self.inflight += 1;
                self.unsubmitted.push(slot_id);
                if self.unsubmitted.len() >= self.batch {
                    self.submit()?;
                }
            }
        }
        Ok(())
    }

    /// The issue side's counters: the byte budget, the pacing and think-time schedules, and when
    /// the next fsync is due.
    #[inline(always)]
    fn count_issue(&mut self, dir: Dir, len: u32) {
        // trimwrite covers each block twice (fio: size=1m trims 1 MiB and writes 1 MiB): the byte
        // budget counts the writes only.
        if !(self.trimwrite && dir == Dir::Trim) {
            self.issued_bytes += len as u64;
        }
        self.issued_requests += 1;
        if let Some(p) = self.pacer.as_mut() {
            p.issued(dir, len as u64);
        }
        if let Some(t) = self.think.as_mut() {
            t.issued();
        }
        if dir != Dir::Read {
            self.wrote_any = true;
            if dir == Dir::Write {
                self.writes_since_sync += 1;
                self.sync_due |= self.g.fsync_every > 0 && self.writes_since_sync >= self.g.fsync_every;
            }
        }
    }

    /// Verify, write side: stamp the block about to be written with its header and pattern.
    #[inline(never)]
    fn stamp_write(&mut self, slot_id: u32, offset: u64) {
        let Some(pattern) = self.pattern.as_ref() else { return };
        self.write_sequence += 1;
        // SAFETY: the slot's buffer holds bs bytes and no request is using it (it was just taken
        // from the free list).
        let block = unsafe { std::slice::from_raw_parts_mut(self.slots[slot_id as usize].buf, self.bs) };
        let expect = Expect { offset, seed: self.g.seed, pass: self.g.verify_pass };
        verify::stamp(block, pattern, self.g.verify, expect, self.write_sequence);
    }

    /// Submit queued requests and stamp their issue time after the system call returned.
    fn submit(&mut self) -> Result<()> {
        self.backend.commit()?;
        let t_ns = ns_between(self.phase_start, Instant::now());
        for &id in self.unsubmitted.iter() {
            self.slots[id as usize].issued_ns = t_ns;
        }
        self.unsubmitted.clear();
        Ok(())
    }

    /// Step 3: reap at least one completion, or (paced) whatever arrives before `wait_for`, and
    /// retire each.
    #[inline(always)]
    fn reap(&mut self, wait_for: Option<Instant>) -> Result<()> {
        self.completions.clear();
        match wait_for {
            Some(t) => self.backend.reap_until(t, &mut self.completions)?,
            None => self.backend.reap(1, &mut self.completions)?,
        }
        self.now = Instant::now();
        let now_ns = ns_between(self.phase_start, self.now);
        self.inflight -= self.completions.len();
        for i in 0..self.completions.len() {
            let c = self.completions[i];
            self.retire(c.slot, c.result, now_ns, true)?;
        }
        self.progress.publish(self.done_bytes, self.done_ops, self.done_clat_ns);
        Ok(())
    }

    /// A request is back: check its result, verify what a read brought, account it, and free its
    /// slot. `t_ns`: when it completed, in nanoseconds since the phase start. `split`: the backend
    /// is asynchronous, slat and clat are recorded apart.
    #[inline(always)]
    fn retire(&mut self, slot_id: u32, result: i64, t_ns: u64, split: bool) -> Result<()> {
        self.progress.completed(slot_id);
        let slot = &self.slots[slot_id as usize];
        if result != slot.len as i64 {
            return Err(self.failure(slot_id, result));
        }
        if self.verifying && slot.dir == Dir::Read {
            self.verify_read(slot_id);
        }
        self.account(slot_id, t_ns, split);
        rbw_published(self.w, self.record_in_flight); // rbw runs at qd 1: this is the one
        self.free.push(slot_id);
        let slot = &self.slots[slot_id as usize];
        self.done_bytes += slot.len as u64;
        self.done_ops += 1;
        self.done_clat_ns += t_ns.saturating_sub(slot.issued_ns);
        Ok(())
    }

    /// The error for a failed or short transfer, naming the request and the likely cause.
    #[cold]
    fn failure(&self, slot_id: u32, result: i64) -> Error {
        let slot = &self.slots[slot_id as usize];
        let (dir, len, path) = (slot.dir.name(), slot.len, &self.target.path);
        if let Some(words) = (result < 0).then(|| self.backend.failure_message(slot_id)).flatten() {
            return Error::io(words);
        }
        if result < 0 {
            let err = std::io::Error::from_raw_os_error((-result) as i32);
            let hint = if self.g.direct && -result == libc::EINVAL as i64 {
                format!(" (O_DIRECT needs offsets and sizes aligned to {} bytes)", self.target.direct_align_bytes)
            } else if slot.dir == Dir::Trim && matches!((-result) as i32, libc::EOPNOTSUPP | libc::ENOTTY) {
                " (the target does not support discard / punching holes)".to_string()
            } else {
                String::new()
            };
            Error::io(format!("{dir} of {len} bytes at offset {} on {path} failed: {err}{hint}", slot.offset))
        } else {
            Error::io(format!("short {dir}: {result} of {len} bytes at offset {} on {path} (end of the target?)", slot.offset))
        }
    }

    /// Step 4, verify, read side: check the block a completed read brought against its pattern
    /// (or, for verify = fill, against the group's fill).
    #[inline(never)]
    fn verify_read(&mut self, slot_id: u32) {
        let slot = &self.slots[slot_id as usize];
        let found = if let Some(data) = &self.fill {
            // SAFETY: the slot's buffer holds len bytes, just filled by the completed read.
            let block = unsafe { std::slice::from_raw_parts(slot.buf, slot.len as usize) };
            verify::check_fill(block, data, slot.offset, &self.target.path)
        } else {
            let Some(pattern) = self.pattern.as_ref() else { return };
            // SAFETY: the slot's buffer holds bs bytes, just filled by the completed read.
            let block = unsafe { std::slice::from_raw_parts(slot.buf, self.bs) };
            let expect = Expect { offset: slot.offset, seed: self.g.seed, pass: self.g.verify_pass };
            verify::check(block, pattern, self.g.verify, expect, &self.target.path)
        };
        self.tally.record(found, self.g.verify_report as usize);
    }

    /// Step 5: account a completion at `t_ns` (since the phase start) in its direction's
    /// statistics and the progress log. Time-based runs measure exactly [ramp end, deadline]; what
    /// completes later is drained only.
    #[inline(always)]
    fn account(&mut self, slot_id: u32, t_ns: u64, split: bool) {
        if t_ns < self.ramp_ns || t_ns > self.deadline_ns {
            return;
        }
        let slot = &self.slots[slot_id as usize];
        let len = slot.len as u64;
        // The interval counts from the ramp's end (t_ns >= ramp_ns here).
        let interval = ((t_ns - self.ramp_ns) / self.interval_ns) as usize;
        let stats = &mut self.dirs[slot.dir.index()];
        if self.count_sizes {
            stats.count_size(len);
        }
        // a remote backend may know when the answer's first byte came (s3's GETs)
        if self.fd < 0 {
            if let Some(ns) = self.backend.first_byte_ns(slot_id) {
                stats.ttfb.record(ns);
            }
        }
        if split {
            let slat = slot.issued_ns.saturating_sub(slot.queued_ns);
            stats.record_split(len, slat, t_ns.saturating_sub(slot.issued_ns), interval);
        } else {
            stats.record(len, t_ns.saturating_sub(slot.queued_ns), interval);
        }
        self.log.record(t_ns, total_bytes(&self.dirs));
    }

    /// Make the written data stable, timed: fsync a local target, the backend's flush for a remote
    /// one (NBD_CMD_FLUSH).
    fn sync_target(&mut self) -> Result<()> {
        let t0 = Instant::now();
        if self.fd < 0 {
            self.backend.sync()?;
        // SAFETY: plain syscall on an open descriptor.
        } else if unsafe { libc::fsync(self.fd) } != 0 {
            return Err(Error::io(format!("fsync of {} failed: {}", self.target.path, std::io::Error::last_os_error())));
        }
        self.sync.record(ns_between(t0, Instant::now()));
        Ok(())
    }

    /// A sync due with nothing in flight: fsync the target (logged when an I/O log is written).
    fn sync_now(&mut self) -> Result<()> {
        if let Some(wr) = self.iolog_writer.as_mut() {
            wr.sync(Instant::now())?;
        }
        if !self.target.fsync_skipped {
            self.sync_target()?;
        }
        self.writes_since_sync = 0;
        self.sync_due = false;
        self.now = Instant::now();
        Ok(())
    }

    /// After an error: let the kernel finish with every buffer before they are freed.
    fn drain_after_error(&mut self) {
        let _ = self.backend.commit();
        while self.inflight > 0 {
            self.completions.clear();
            if self.backend.reap(1, &mut self.completions).is_err() {
                // Cannot prove the kernel is done with the buffers: leak them rather than free.
                std::mem::forget(self.region.take());
                break;
            }
            self.inflight = self.inflight.saturating_sub(self.completions.len());
        }
    }

    /// After the loop: the final fsync, the I/O log's end, the worker's summary, and the read-back
    /// of a verified write.
    fn finish(mut self) -> Result<WorkerOutcome> {
        let g = self.g;
        let mut end = match self.deadline {
            Some(d) if self.now > d => d,
            _ => self.now,
        };
        // A character device has nothing to flush (the plan records the skip in its target).
        let syncs = g.fsync_end && !self.target.fsync_skipped;
        if syncs && self.wrote_any && self.control.error.lock().map(|e| e.is_none()).unwrap_or(true) {
            if let Some(wr) = self.iolog_writer.as_mut() {
                wr.sync(Instant::now())?;
            }
            self.sync_target()?;
            end = Instant::now();
        }
        if let Some(wr) = self.iolog_writer.take() {
            wr.finish(Instant::now())?;
        }
        if !self.asynchronous {
            for d in self.dirs.iter_mut() {
                d.finish_unsplit();
            }
        }
        let phase_start = self.phase_start;
        self.log.finish(ns_between(phase_start, end.max(self.measure_start)), total_bytes(&self.dirs));
        let rel = |t: Instant| t.saturating_duration_since(phase_start).as_secs_f64();
        let [r, wr, tr] = &self.dirs;
        let summary = WorkerSummary {
            id: self.w.id,
            group: g.name.clone(),
            target: self.target.path.clone(),
            start_s: rel(self.start_instant.max(self.measure_start)),
            end_s: rel(end.max(self.measure_start)),
            read_bytes: r.bytes,
            read_ops: r.ops,
            write_bytes: wr.bytes,
            write_ops: wr.ops,
            trim_bytes: tr.bytes,
            trim_ops: tr.ops,
        };
        let setup_flags = self.backend.setup_flags();
        let counters = self.backend.counters();
        let repeated_writes = self.dedupe.as_ref().map_or(0, |d| d.repeats);
        // A local target is read back through its descriptor, with the backend gone; a remote one
        // only has the backend's connection.
        let mut backend = (self.fd < 0).then_some(self.backend);
        let mut readback = Readback::default();
        if self.verifying && self.wrote_any && g.verify_readback && self.w.rbw.is_none()
            && !self.control.stop.load(Ordering::Relaxed)
        {
            let (pattern, fill) = (self.pattern.as_ref(), self.fill.as_deref());
            let replay = OffsetGenerator::new(self.rw, g, self.w.map, self.w.seed);
            // SAFETY: every request has completed (the loop drained them), so no slot buffer is
            // in use; slot 0's buffer holds bs bytes and outlives this borrow.
            let buf = unsafe { std::slice::from_raw_parts_mut(self.slots[0].buf, self.bs) };
            let (tally, path) = (&mut self.tally, &self.target.path);
            // Every request drew one offset from `gen`, so the replay makes as many draws.
            let fd = self.fd;
            let read_block = |block: &mut [u8], offset: u64| match backend.as_mut() {
                Some(remote) => remote.read_at(block, offset),
                None => pread_exact(fd, block, offset, path),
            };
            readback = read_back(replay, self.issued_requests, self.w.map, g.bs, buf, &self.control.stop, read_block, |offset, block| {
                let found = match (fill, pattern) {
                    (Some(data), _) => verify::check_fill(block, data, offset, path),
                    (None, Some(pattern)) => verify::check(block, pattern, g.verify, Expect { offset, seed: g.seed, pass: g.verify_pass }, path),
                    (None, None) => None,
                };
                tally.record(found, g.verify_report as usize);
            })?;
        }
        Ok(WorkerOutcome { dirs: self.dirs, sync: self.sync, summary, setup_flags, counters, log: self.log, verify: self.tally, readback, repeated_writes })
    }
}

/// Read back and check, in the order first written, every block a finished worker wrote: replay its
/// offset sequence (`issued` draws of a fresh generator with the same seed) and read each written
/// block once, however often it was written (time-based runs wrap; `random_map = off` repeats).
/// Synchronous preads into one slot buffer, so O_DIRECT alignment holds as it did for the writes.
#[allow(clippy::too_many_arguments)]
fn read_back(
    mut replay: OffsetGenerator,
    issued: u64,
    map: AccessMap,
    bs: u64,
    buf: &mut [u8],
    stop: &std::sync::atomic::AtomicBool,
    mut read_block: impl FnMut(&mut [u8], u64) -> Result<()>,
    mut check: impl FnMut(u64, &[u8]),
) -> Result<Readback> {
    let t0 = Instant::now();
    // One bit per bs-sized block between the map's first and last offsets (offsets grow with the
    // transfer number in every layout): the blocks already read back.
    let first = map.offset(0, bs);
    let last = map.offset(map.transfers(bs) - 1, bs);
    let mut seen = vec![0u64; ((last - first) / bs / 64 + 1) as usize];
    let mut blocks = 0u64;
    for _ in 0..issued {
        let io = replay.next_io();
        if io.dir != Dir::Write {
            continue;
        }
        let bit = (io.offset - first) / bs;
        let (word, mask) = ((bit / 64) as usize, 1u64 << (bit % 64));
        if seen[word] & mask != 0 {
            continue;
        }
        seen[word] |= mask;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        read_block(buf, io.offset)?;
        check(io.offset, buf);
        blocks += 1;
    }
    Ok(Readback { blocks, seconds: t0.elapsed().as_secs_f64() })
}

/// dedupe_percentage (fio's dedupe_mode=repeat): each write is, with that probability, a repeat
/// of an earlier unique write of this writer, drawn uniformly from the last `DEDUPE_MEMORY`
/// (fio draws from every earlier one; a bounded window keeps the worker's memory fixed).
struct Dedupe {
    percent: u32,
    rng: crate::rng::Rng,
    /// (offset, sequence) of earlier unique writes: a ring, `next` the slot to overwrite.
    earlier: Vec<(u64, u64)>,
    next: usize,
    /// Writes issued as repeats.
    pub repeats: u64,
}

const DEDUPE_MEMORY: usize = 4096;

impl Dedupe {
    fn new(percent: u32, seed: u64) -> Dedupe {
        Dedupe { percent, rng: crate::rng::Rng::new(crate::rng::Rng::derive(seed, 0xDED0)), earlier: Vec::with_capacity(DEDUPE_MEMORY), next: 0, repeats: 0 }
    }

    /// The earlier write this one repeats, or None for a unique write.
    #[inline]
    fn repeat(&mut self) -> Option<(u64, u64)> {
        if self.earlier.is_empty() || self.rng.next_u64() % 100 >= self.percent as u64 {
            return None;
        }
        self.repeats += 1;
        Some(self.earlier[(self.rng.next_u64() % self.earlier.len() as u64) as usize])
    }

    #[inline]
    fn remember(&mut self, offset: u64, sequence: u64) {
        if self.earlier.len() < DEDUPE_MEMORY {
            self.earlier.push((offset, sequence));
        } else {
            self.earlier[self.next] = (offset, sequence);
            self.next = (self.next + 1) % DEDUPE_MEMORY;
        }
    }
}

/// Read-behind-write: tell the other side that record `k` is done.
#[inline]
fn rbw_published(w: &WorkerPlan, k: u64) {
    if let Some((role, ch)) = &w.rbw {
        let counter = if *role == Role::Writer { &ch.written } else { &ch.read };
        counter.store(k + 1, Ordering::Release);
    }
}

/// The verify read-back's read of one block of a local target: `buf.len()` bytes at `offset`.
fn pread_exact(fd: RawFd, buf: &mut [u8], offset: u64, path: &str) -> Result<()> {
    // SAFETY: buf is a valid, writable buffer of buf.len() bytes.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), offset as libc::off_t) };
    if n != buf.len() as isize {
        let why = if n < 0 { std::io::Error::last_os_error().to_string() } else { format!("short read of {n} bytes") };
        return Err(Error::io(format!("verify read-back of {} bytes at offset {offset} on {path} failed: {why}", buf.len())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// The read-back after a verified write reads each written block once, however often the
    /// sequence wrapped, and reports a block changed after it was written.
    #[test]
    fn read_back_checks_each_written_block_once() {
        let (bs, blocks, seed) = (4096u64, 64u64, 99u64);
        let path = crate::scratch::Scratch::new("worker", "readback");
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        let pattern = verify::Pattern::new(seed, bs as usize);
        let mut block = vec![0u8; bs as usize];
        for b in 0..blocks {
            let e = Expect { offset: b * bs, seed, pass: 0 };
            verify::stamp(&mut block, &pattern, VerifyKind::Crc32c, e, b + 1);
            file.write_all_at(&block, b * bs).unwrap();
        }
        let flipped = 5 * bs + 100;
        let mut byte = [0u8; 1];
        file.read_exact_at(&mut byte, flipped).unwrap();
        file.write_all_at(&[byte[0] ^ 0x10], flipped).unwrap();

        let map = AccessMap::Contiguous { base: 0, blocks };
        let spec = crate::spec::GroupSpec { rw: Rw::Write, bs, ..Default::default() };
        let replay = OffsetGenerator::new(Rw::Write, &spec, map, seed);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let mut bad = Vec::new();
        let mut checked = 0;
        let read_block = |b: &mut [u8], offset: u64| pread_exact(file.as_raw_fd(), b, offset, &path);
        let rb = read_back(replay, 3 * blocks, map, bs, &mut block, &stop, read_block, |offset, b| {
            checked += 1;
            let e = Expect { offset, seed, pass: 0 };
            if verify::check(b, &pattern, VerifyKind::Crc32c, e, &path).is_some() {
                bad.push(offset);
            }
        })
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!((rb.blocks, checked), (blocks, blocks));
        assert_eq!(bad, vec![5 * bs]);
    }
}

/// Whole phases through the worker loop: pacing, trims and logs.
#[cfg(test)]
mod phase_tests {
    use crate::iolog::{Action, Replay};
    use crate::spec::{EngineKind, FixedBuffers, GroupSpec, PhaseSpec, Rw};
    use crate::verify::VerifyKind;
    use crate::workload::Dir;
    use crate::{run_phase, Control, Plan, PhaseResult};

    fn scratch(name: &str) -> crate::scratch::Scratch {
        crate::scratch::Scratch::new("worker", name)
    }

    fn run(g: GroupSpec) -> PhaseResult {
        let plan = Plan::build(PhaseSpec { name: "t".into(), groups: vec![g], checked: None }).expect("plan");
        let control = Control::for_plan(&plan);
        let r = run_phase(&plan, &control).result;
        assert!(r.error.is_none(), "{:?}", r.error);
        r
    }

    fn logged(path: &str) -> Vec<(u64, Dir, u64, u32)> {
        Replay::load(path).unwrap().entries.iter().filter_map(|e| match e.action {
            Action::Io { dir, offset, len } => Some((e.at_us, dir, offset, len)),
            Action::Sync => None,
        }).collect()
    }

    /// The limiter's schedule, read from the issue times in the worker's own log: request n is never
    /// issued before n x bs / rate, and over the run no more than the rate allows are issued.
    #[test]
    fn rate_paces_issue_times_on_the_null_engine() {
        for (engine, qd) in [(EngineKind::Null, 1), (EngineKind::IoUring, 4)] {
            let (target, log) = (scratch(&format!("rate-{qd}")), scratch(&format!("rate-{qd}.log")));
            let rate = 4u64 << 20; // 1024 requests of 4 KiB per second
            let mut g = GroupSpec { target: vec![target.clone()], size: Some(1 << 20), rw: Rw::Randwrite, engine, qd,
                                    time: Some(0.5), rate: [rate; 3], write_iolog: Some(log.clone()), fsync_end: false, ..Default::default() };
            if engine == EngineKind::Null {
                g.null_delay = 0.0;
            }
            let r = run(g);
            let ios = logged(&log);
            // Log times count from the worker's start, as the schedule does.
            for (n, io) in ios.iter().enumerate() {
                let scheduled_us = n as u64 * 4096 * 1_000_000 / rate;
                assert!(io.0 + 1 >= scheduled_us, "qd {qd}: request {n} at {} us, scheduled at {scheduled_us} us", io.0);
            }
            let allowed = 0.5 * (rate / 4096) as f64 + 1.0;
            assert!((ios.len() as f64) <= allowed, "qd {qd}: {} requests in 0.5 s, the rate allows {allowed}", ios.len());
            assert!(ios.len() as f64 >= 0.8 * allowed, "qd {qd}: only {} of {allowed} requests", ios.len());
            // The log holds every issue; the statistics hold what completed by the deadline, so up
            // to a queue's worth issued just before it (and drained after it) are logged only.
            let measured = r.write.as_ref().unwrap().ops as usize;
            assert!(measured <= ios.len() && ios.len() - measured <= qd as usize,
                    "qd {qd}: {measured} measured, {} logged", ios.len());
            let _ = std::fs::remove_file(&target);
            let _ = std::fs::remove_file(&log);
        }
    }

    /// A paced asynchronous worker keeps requests in flight while it waits for the next issue time:
    /// with 10 ms per request and 400 IOPS allowed, 4 are in flight at a time. Draining the queue
    /// before every wait (fio's way) would allow only 100 IOPS.
    #[test]
    fn a_paced_queue_keeps_requests_in_flight() {
        let (target, log) = (scratch("paced-qd"), scratch("paced-qd.log"));
        let g = GroupSpec { target: vec![target.clone()], size: Some(1 << 20), rw: Rw::Randread, engine: EngineKind::Null,
                            null_delay: 0.01, qd: 8, time: Some(0.5), rate_iops: [400; 3], write_iolog: Some(log.clone()),
                            ..Default::default() };
        run(g);
        let ios = logged(&log);
        assert!((150..=201).contains(&ios.len()), "{} requests issued in 0.5 s at 400 IOPS", ios.len());
        // some request was issued while the one before it was still in flight (10 ms)
        assert!(ios.windows(2).any(|w| w[1].0 - w[0].0 < 5_000));
        std::fs::remove_file(&target).unwrap();
        std::fs::remove_file(&log).unwrap();
    }

    /// The progress counters carry the sum of the completion latencies: over a phase measured
    /// whole (no ramp, no deadline) it is the result's mean clat times its operations, so a reader
    /// of two readings gets the mean clat between them (steady state's lat criterion).
    #[test]
    fn progress_publishes_the_completion_latency_sum() {
        for (engine, qd, delay) in [(EngineKind::Null, 1, 0.0002), (EngineKind::Null, 4, 0.0001), (EngineKind::IoUring, 4, 0.0)] {
            let target = scratch(&format!("clat-{qd}-{delay}"));
            let g = GroupSpec { target: vec![target.clone()], size: Some(256 << 10), rw: Rw::Randread, engine, qd,
                                null_delay: delay, fsync_end: false, ..Default::default() };
            let plan = Plan::build(PhaseSpec { name: "t".into(), groups: vec![g], checked: None }).expect("plan");
            let control = Control::for_plan(&plan);
            let r = run_phase(&plan, &control).result;
            assert!(r.error.is_none(), "{:?}", r.error);
            let read = r.read.as_ref().unwrap();
            let (bytes, ops, clat_ns) = control.progress_totals();
            assert_eq!((bytes, ops), (read.bytes, read.ops));
            let mean = clat_ns as f64 / ops as f64;
            assert!((mean - read.clat_ns.mean).abs() <= 1e-6 * read.clat_ns.mean, "{engine:?} qd {qd}: {mean} vs {}", read.clat_ns.mean);
            assert!(mean >= delay * 1e9, "{engine:?} qd {qd}: mean clat {mean} ns below the engine's delay");
            let _ = std::fs::remove_file(&target);
        }
    }

    /// A held phase: its workers set up and wait at the start line, issuing nothing and with no
    /// clock, until the front end releases it; the clock starts at the release.
    #[test]
    fn a_held_phase_issues_nothing_until_released() {
        let target = scratch("held");
        let g = GroupSpec { target: vec![target.clone()], size: Some(64 << 12), rw: Rw::Read, engine: EngineKind::Null,
                            null_delay: 0.001, ..Default::default() };
        let plan = Plan::build(PhaseSpec { name: "t".into(), groups: vec![g], checked: None }).expect("plan");
        let control = Control::for_plan(&plan);
        control.hold();
        std::thread::scope(|s| {
            let running = s.spawn(|| run_phase(&plan, &control));
            std::thread::sleep(std::time::Duration::from_millis(150));
            assert_eq!(control.progress_totals(), (0, 0, 0), "nothing issued before the release");
            assert_eq!(control.elapsed_s(), 0.0, "no clock before the release");
            let released = std::time::Instant::now();
            control.release();
            let r = running.join().unwrap().result;
            assert!(r.complete, "{:?}", r.error);
            assert_eq!(r.read.as_ref().unwrap().bytes, 64 << 12);
            // 64 requests of 1 ms: the phase's time runs from the release, not from the spawn
            assert!(r.seconds <= released.elapsed().as_secs_f64() + 1e-3, "{} s", r.seconds);
        });
        std::fs::remove_file(&target).unwrap();
    }

    #[test]
    fn thinktime_pauses_every_thinktime_blocks_requests() {
        let (target, log) = (scratch("think"), scratch("think.log"));
        let g = GroupSpec { target: vec![target.clone()], size: Some(64 << 12), rw: Rw::Read, engine: EngineKind::Null,
                            thinktime: 0.002, thinktime_blocks: 4, write_iolog: Some(log.clone()), ..Default::default() };
        run(g);
        let ios = logged(&log);
        assert_eq!(ios.len(), 64);
        for k in (4..64).step_by(4) {
            assert!(ios[k].0 - ios[k - 1].0 >= 2000, "a pause of 2 ms before request {k}: {:?}", &ios[k - 1..=k]);
        }
        std::fs::remove_file(&target).unwrap();
        std::fs::remove_file(&log).unwrap();
    }

    fn allocated_bytes(path: &str) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().blocks() * 512
    }

    fn first_hole(path: &str) -> i64 {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(path).unwrap();
        // SAFETY: plain syscall on an open descriptor.
        unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_HOLE) }
    }

    /// rw=trim punches holes in a file (tmpfs supports it): the blocks are freed, SEEK_HOLE finds
    /// one at 0, the size stays; trimwrite trims and rewrites every block, so all stay allocated.
    #[test]
    fn trim_punches_holes_and_trimwrite_writes_back() {
        let target = scratch("trim");
        let size = 1u64 << 20;
        std::fs::write(&target, vec![7u8; size as usize]).unwrap();
        assert!(allocated_bytes(&target) >= size);
        let r = run(GroupSpec { target: vec![target.clone()], rw: Rw::Trim, bs: 64 << 10, fsync_end: false, ..Default::default() });
        let trim = r.trim.as_ref().expect("a trim direction");
        assert_eq!((trim.ops, trim.bytes), (16, size));
        assert!(r.read.is_none() && r.write.is_none(), "a trim phase reports only trims");
        assert_eq!(trim.slat_ns.max, 0, "psync trims are synchronous: slat 0");
        assert_eq!(allocated_bytes(&target), 0, "every block punched out");
        assert_eq!(first_hole(&target), 0);
        assert_eq!(std::fs::metadata(&target).unwrap().len(), size, "KEEP_SIZE");

        let r = run(GroupSpec { target: vec![target.clone()], rw: Rw::Trimwrite, bs: 64 << 10, ..Default::default() });
        let (t, w) = (r.trim.as_ref().unwrap(), r.write.as_ref().unwrap());
        assert_eq!((t.ops, w.ops), (16, 16), "trimwrite: a trim and a write per block of the range, as fio");
        assert_eq!((t.bytes, w.bytes), (size, size));
        let r = run(GroupSpec { target: vec![target.clone()], rw: Rw::Randtrim, bs: 4096, io_size: Some(64 << 10), ..Default::default() });
        assert_eq!(r.trim.as_ref().unwrap().ops, 16);
        std::fs::remove_file(&target).unwrap();
    }

    /// A log written by one run replays in another as the same requests, in the same order.
    #[test]
    fn an_iolog_written_by_a_run_replays_the_same_requests() {
        let (target, log, log2) = (scratch("rt"), scratch("rt.log"), scratch("rt2.log"));
        let r1 = run(GroupSpec { target: vec![target.clone()], size: Some(1 << 20), rw: Rw::Randrw, bs: 8192,
                                 write_iolog: Some(log.clone()), ..Default::default() });
        let r2 = run(GroupSpec { target: vec![target.clone()], rw: Rw::Randrw, read_iolog: Some(log.clone()), replay_no_stall: true,
                                 write_iolog: Some(log2.clone()), bs: 512, ..Default::default() });
        for (a, b) in [(&r1.read, &r2.read), (&r1.write, &r2.write)] {
            let (a, b) = (a.as_ref().unwrap(), b.as_ref().unwrap());
            assert_eq!((a.ops, a.bytes), (b.ops, b.bytes));
        }
        let strip = |v: Vec<(u64, Dir, u64, u32)>| v.into_iter().map(|(_, d, o, l)| (d, o, l)).collect::<Vec<_>>();
        assert_eq!(strip(logged(&log)), strip(logged(&log2)));
        for p in [&target, &log, &log2] {
            std::fs::remove_file(p).unwrap();
        }
    }

    /// A timed replay keeps the log's spacing: a request is not issued before its timestamp.
    #[test]
    fn a_timed_replay_waits_for_each_timestamp() {
        let (target, log, log2) = (scratch("timed"), scratch("timed.log"), scratch("timed2.log"));
        let lines: String = (0..20).map(|k| format!("{} {target} read {} 4096\n", 1000 + k * 5000, k * 4096)).collect();
        std::fs::write(&log, format!("fio version 3 iolog\n1000 {target} add\n1000 {target} open\n{lines}")).unwrap();
        std::fs::write(&target, vec![1u8; 1 << 20]).unwrap();
        let r = run(GroupSpec { target: vec![target.clone()], read_iolog: Some(log.clone()), write_iolog: Some(log2.clone()), ..Default::default() });
        assert_eq!(r.read.as_ref().unwrap().ops, 20);
        let ios = logged(&log2);
        for (k, io) in ios.iter().enumerate() {
            assert!(io.0 + 1 >= k as u64 * 5000, "request {k} at {} us, logged at {} us", io.0, k * 5000);
        }
        assert!(ios[19].0 < 95_000 + 50_000, "the replay keeps up with the log: last request at {} us", ios[19].0);
        for p in [&target, &log, &log2] {
            std::fs::remove_file(p).unwrap();
        }
    }

    /// The kernel's memory devices as targets, against fio 3.33 on the same jobs (bs=4k size=1m,
    /// psync and io_uring at iodepth 4, end_fsync on): /dev/zero reads and /dev/null and /dev/zero
    /// writes are 256 requests each (fio's total_ios); fsync is skipped, not failed (fio's
    /// end_fsync fails with EINVAL there) and the target records it; /dev/full's first write
    /// fails with ENOSPC, as fio's (err=28 after 1 write).
    #[test]
    fn memory_devices_move_fios_request_counts() {
        for engine in [EngineKind::Psync, EngineKind::IoUring] {
            for (target, rw) in [("/dev/zero", Rw::Read), ("/dev/zero", Rw::Randread), ("/dev/null", Rw::Write), ("/dev/zero", Rw::Randwrite)] {
                let g = GroupSpec { target: vec![target.into()], size: Some(1 << 20), rw, engine, qd: if engine == EngineKind::Psync { 1 } else { 4 }, bs: 4096, ..Default::default() };
                let plan = Plan::build(PhaseSpec { name: "t".into(), groups: vec![g], checked: None }).expect("plan");
                let r = run_phase(&plan, &Control::for_plan(&plan)).result;
                if r.error.as_deref().is_some_and(|e| e.contains("io_uring set-up failed")) {
                    eprintln!("io_uring unavailable here: {:?}", r.error);
                    continue;
                }
                assert!(r.error.is_none(), "{target} {rw:?} {engine:?}: {:?}", r.error);
                let d = if rw.read_percent(50) == 100 { r.read.as_ref() } else { r.write.as_ref() }.expect("a direction");
                assert_eq!((d.ops, d.bytes), (256, 1 << 20), "{target} {rw:?} {engine:?}");
                assert_eq!(r.targets[0].kind, "char");
                assert_eq!(r.targets[0].fsync_skipped, rw.read_percent(50) < 100, "{target} {rw:?}");
            }
            let g = GroupSpec { target: vec!["/dev/full".into()], size: Some(1 << 20), rw: Rw::Write, engine, qd: if engine == EngineKind::Psync { 1 } else { 4 }, bs: 4096, ..Default::default() };
            let plan = Plan::build(PhaseSpec { name: "t".into(), groups: vec![g], checked: None }).expect("plan");
            let r = run_phase(&plan, &Control::for_plan(&plan)).result;
            let e = r.error.expect("writes to /dev/full fail");
            assert!(e.contains("No space left on device") || e.contains("io_uring set-up failed"), "{e}");
        }
    }

    /// io_uring registers the slot buffers without being asked (`auto`), requires them (`on`) or
    /// never registers them (`off`), and records the choice: reads and writes through
    /// READ/WRITE_FIXED or plain READ/WRITE move the same bytes; a refusal not asked for is no warning.
    #[test]
    fn io_uring_fixed_buffers_auto_on_off_are_recorded() {
        for mode in FixedBuffers::ALL {
            let target = scratch("fixedbufs");
            let g = GroupSpec { target: vec![target.clone()], size: Some(1 << 20), rw: Rw::Randrw, engine: EngineKind::IoUring,
                                qd: 8, bs: 8192, fsync_end: false, uring_fixed_buffers: mode, ..Default::default() };
            let plan = Plan::build(PhaseSpec { name: "t".into(), groups: vec![g], checked: None }).expect("plan");
            let r = run_phase(&plan, &Control::for_plan(&plan)).result;
            let _ = std::fs::remove_file(&target);
            if r.error.as_deref().is_some_and(|e| e.contains("io_uring set-up failed")) {
                eprintln!("io_uring unavailable here: {:?}", r.error);
                return;
            }
            assert!(r.error.is_none(), "{mode:?}: {:?}", r.error);
            let flags = &r.engine.setup_flags;
            let buffer_flags: Vec<&String> = flags.iter().filter(|f| f.starts_with("FIXED_BUFFERS")).collect();
            match mode {
                FixedBuffers::Off => assert!(buffer_flags.is_empty(), "off: {flags:?}"),
                FixedBuffers::On => assert!(buffer_flags.len() == 1 && (buffer_flags[0] == "FIXED_BUFFERS"
                                            || buffer_flags[0].starts_with("FIXED_BUFFERS_REFUSED(")), "on: {flags:?}"),
                FixedBuffers::Auto => {
                    assert!(buffer_flags.len() == 1 && (buffer_flags[0] == "FIXED_BUFFERS"
                            || buffer_flags[0].starts_with("FIXED_BUFFERS_UNAVAILABLE(")), "auto: {flags:?}");
                    assert!(!flags.iter().any(|f| f.contains("REFUSED")), "not asked for: no refusal to report: {flags:?}");
                }
            }
            let (rd, wr) = (r.read.as_ref().unwrap(), r.write.as_ref().unwrap());
            assert_eq!(rd.bytes + wr.bytes, 1 << 20, "{mode:?}");
        }
    }

    /// How many distinct `unit`-byte pieces a file holds, and how many pieces.
    fn distinct(path: &str, unit: usize) -> (usize, usize) {
        let data = std::fs::read(path).unwrap();
        let set: std::collections::HashSet<&[u8]> = data.chunks(unit).collect();
        (set.len(), data.len() / unit)
    }

    /// A random write over few slots, several passes, final image: scrambled (the default), every
    /// 4 KiB block and every 512-byte sector of the file is unique; with scramble off the file is
    /// made of the queue depth's few blocks. On both engines that write.
    #[test]
    fn scrambled_writes_leave_no_two_sectors_alike() {
        for (engine, qd) in [(EngineKind::Psync, 1), (EngineKind::IoUring, 4)] {
            for scramble in [true, false] {
                let target = scratch(&format!("scramble-{qd}-{scramble}"));
                let g = GroupSpec { target: vec![target.clone()], size: Some(1 << 20), rw: Rw::Randwrite, engine, qd,
                                    io_size: Some(4 << 20), fsync_end: false, scramble, ..Default::default() };
                let plan = Plan::build(PhaseSpec { name: "t".into(), groups: vec![g], checked: None }).expect("plan");
                let r = run_phase(&plan, &Control::for_plan(&plan)).result;
                if r.error.as_deref().is_some_and(|e| e.contains("io_uring set-up failed")) {
                    eprintln!("io_uring unavailable here: {:?}", r.error);
                    let _ = std::fs::remove_file(&target);
                    continue;
                }
                assert!(r.error.is_none(), "{:?}", r.error);
                assert_eq!(r.write.as_ref().unwrap().bytes, 4 << 20);
                let (blocks, sectors) = (distinct(&target, 4096), distinct(&target, 512));
                std::fs::remove_file(&target).unwrap();
                if scramble {
                    assert_eq!(blocks, (256, 256), "{engine:?}");
                    assert_eq!(sectors, (2048, 2048), "{engine:?}");
                } else {
                    assert!(blocks.0 <= qd as usize, "{engine:?} unscrambled: {} distinct blocks", blocks.0);
                }
            }
        }
    }

    /// verify = fill keeps its fill: every written block is the fill byte for byte, scramble or
    /// not; stamped blocks (crc32c) are not scrambled and verify clean in the read-back.
    #[test]
    fn verified_writes_are_not_scrambled() {
        let target = scratch("scramble-fill");
        let g = GroupSpec { target: vec![target.clone()], size: Some(1 << 20), rw: Rw::Randwrite, engine: EngineKind::IoUring, qd: 4,
                            verify: VerifyKind::Fill, fsync_end: false, ..Default::default() };
        assert!(g.scramble);
        let seed = g.seed;
        let plan = Plan::build(PhaseSpec { name: "t".into(), groups: vec![g.clone()], checked: None }).expect("plan");
        let r = run_phase(&plan, &Control::for_plan(&plan)).result;
        if !r.error.as_deref().is_some_and(|e| e.contains("io_uring set-up failed")) {
            assert!(r.error.is_none(), "{:?}", r.error);
            let fill = crate::verify::fill_data(seed, 4096);
            let data = std::fs::read(&target).unwrap();
            assert!(data.chunks(4096).all(|b| b == fill.as_slice()), "every block holds the fill");
        }
        let _ = std::fs::remove_file(&target);
        let g = GroupSpec { engine: EngineKind::Psync, qd: 1, verify: VerifyKind::Crc32c, io_size: Some(3 << 20), ..g };
        let r = run(g);
        let v = r.verify.as_ref().unwrap();
        assert!(v.readback_blocks > 0 && v.tally.mismatches == 0 && v.tally.bs_mismatches == 0, "{v:?}");
        std::fs::remove_file(&target).unwrap();
    }

    #[test]
    fn rate_min_not_met_fails_the_phase_in_one_line() {
        let target = scratch("ratemin");
        let g = GroupSpec { target: vec![target.clone()], size: Some(1 << 20), rw: Rw::Read, engine: EngineKind::Null,
                            time: Some(0.3), rate: [1 << 20, 0, 0], rate_min: [1 << 20, 0, 0], thinktime: 0.1, ..Default::default() };
        let plan = Plan::build(PhaseSpec { name: "t".into(), groups: vec![g], checked: None }).unwrap();
        let r = run_phase(&plan, &Control::for_plan(&plan)).result;
        let e = r.error.expect("floor missed");
        assert!(e.starts_with("rate_min not met: read ") && e.contains("MiB/s < 1.0 MiB/s"), "{e}");
        assert_eq!(r.stop_reason, "error");
        std::fs::remove_file(&target).unwrap();
    }
}
