//! One worker thread: keeps up to `qd` requests in flight on its target, stamps their times,
//! and records each completion in its own statistics. Request slots and their aligned buffers are
//! created once; the loop allocates nothing per I/O.
//!
//! Times, as fio defines them: `queued_at` when the request has been prepared and is handed to the
//! backend, `issued_at` after the submitting system call returned (asynchronous backends).
//! slat = issued_at - queued_at, clat = completion - issued_at, and the headline lat = slat + clat.
//! For a blocking backend (psync) the call is the whole request: clat = lat, slat = 0.
//! Under a rate limit, think time or a timed replay, the worker waits before it prepares a
//! request; the clock starts after that wait, so lat never includes it (fio measures from the
//! actual submission too). Trims are synchronous in every backend (slat = 0).

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::buffer::AlignedBuf;
use crate::engine::{self, Completion, EngineSetup, Queued, Request};
use crate::error::{Error, Result};
use crate::histogram::Histogram;
use crate::iolog;
use crate::pace::{wait_until_or_stop, Pacer, Think};
use crate::plan::{Plan, WorkerPlan};
use crate::rbw::{Gate, Role, WriterDone};
use crate::spec::Rw;
use crate::control::Control;
use crate::stats::{DirStats, ProgressLog};
use crate::verify::{self, Expect, VerifyKind, VerifyTally};
use crate::workload::{AccessMap, Dir, OffsetGenerator};

struct Slot {
    /// This slot's part of the worker's buffer region.
    buf: *mut u8,
    queued_at: Instant,
    issued_at: Instant,
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
    pub log: ProgressLog,
    pub verify: VerifyTally,
    pub readback: Readback,
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
    let g = plan.group(w);
    let target = &plan.targets[w.target];
    let qd = g.qd as usize;
    let bs = g.bs as usize;
    let fd = w.file.as_raw_fd();
    let replay = plan.replays[w.group].as_deref();
    // A replay's or a size split's requests may be longer than bs: every slot holds the longest.
    let longest = g.largest_request() as usize;
    let buf_len = replay.map_or(longest, |r| longest.max(r.max_len as usize));
    let count_sizes = g.sized_requests();

    // One region for all slots (page-aligned strides), allocated and filled once.
    let stride = buf_len.div_ceil(plan.buffer_align) * plan.buffer_align;
    let mut region = AlignedBuf::new(stride * qd, plan.buffer_align);
    // verify = fill: every slot carries the group's fill, which every reader of the seed knows
    let fill = (g.verify == VerifyKind::Fill).then(|| verify::fill_data(g.seed, buf_len));
    match &fill {
        Some(data) => region.as_mut_slice().chunks_mut(stride).for_each(|s| s[..buf_len].copy_from_slice(data)),
        None => region.fill_random(w.seed),
    }
    let now = Instant::now();
    let mut slots: Vec<Slot> = (0..qd)
        // SAFETY: i * stride + buf_len <= stride * qd, inside the region.
        .map(|i| Slot { buf: unsafe { region.as_mut_ptr().add(i * stride) }, queued_at: now, issued_at: now, dir: Dir::Read, offset: 0, len: bs as u32 })
        .collect();
    let buffers: Vec<(*mut u8, usize)> = slots.iter().map(|s| (s.buf, buf_len)).collect();
    let backend = engine::create(&EngineSetup { fd, buffers: &buffers, qd: g.qd, group: g, block_device: target.kind == "block" });
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
    // Every worker reaches the start line, even one whose set-up failed, so nobody waits forever.
    control.ready.wait();
    let mut backend = backend?;
    let mut iolog_writer = iolog_writer.transpose()?;
    let caps = backend.caps();
    let setup_flags = backend.setup_flags();

    let mut free: Vec<u32> = (0..qd as u32).rev().collect();
    let mut completions: Vec<Completion> = Vec::with_capacity(qd.max(64) * 2);
    let role = w.rbw.as_ref().map(|(r, _)| *r);
    let rw = if role == Some(Role::Reader) { Rw::Read } else { g.rw };
    let mut gen = OffsetGenerator::new(rw, g, w.map, w.seed);
    let batch = if g.uring_batch == 0 { qd } else { (g.uring_batch as usize).min(qd) };

    let interval_ns = (g.interval * 1e9) as u64;
    let expected_intervals = g.time.map(|t| (t / g.interval) as usize + 2).unwrap_or(16);
    let mut dirs: [DirStats; 3] = std::array::from_fn(|_| DirStats::with_intervals(expected_intervals));
    let mut sync = Histogram::new();

    // All workers started together; the phase clock was set by the coordinator.
    let phase_start = control.phase_start();
    let measure_start = phase_start + Duration::from_secs_f64(g.ramp);
    let ramp_ns = ns_between(phase_start, measure_start);
    let progress = &control.progress[w.id];

    let mut issued_bytes: u64 = 0;
    let mut issued_requests: u64 = 0;
    let mut done_bytes: u64 = 0;
    let mut done_ops: u64 = 0;
    let mut inflight = 0usize;
    // Slots queued but not yet submitted, so their issue time can be stamped after the submit.
    let mut unsubmitted: Vec<u32> = Vec::with_capacity(qd);
    let mut writes_since_sync: u64 = 0;
    let mut wrote_any = false;
    let mut issuing = true;
    if g.start_delay > 0.0 {
        let go = phase_start + Duration::from_secs_f64(g.start_delay);
        while Instant::now() < go && !control.stop.load(Ordering::Relaxed) {
            std::thread::sleep((go - Instant::now()).min(Duration::from_millis(10)));
        }
    }
    let mut now = Instant::now();
    let start_instant = now;
    if let Some(wr) = iolog_writer.as_mut() {
        wr.set_start(start_instant);
    }
    let mut log = ProgressLog::new(ns_between(phase_start, start_instant.max(measure_start)));
    let verifying = g.verify != VerifyKind::Off;
    let pattern = g.verify.stamps().then(|| verify::Pattern::new(g.seed, bs));
    let mut tally = VerifyTally::default();
    let mut write_sequence: u64 = 0;
    // Read-behind-write: this worker's next record and the one in flight (qd is 1 there).
    let mut record: u64 = 0;
    let mut record_in_flight: u64 = 0;
    let writer_done = w.rbw.as_ref().filter(|(r, _)| *r == Role::Writer).map(|(_, ch)| WriterDone(ch));
    // A time-based worker runs for `time` from its own measured start (fio's startdelay semantics).
    let deadline = g.time.map(|t| start_instant.max(measure_start) + Duration::from_secs_f64(t));
    // Pacing: the rate schedule and think time run from this worker's own start.
    let mut pacer = Pacer::new(g, start_instant);
    // The rate may pick the other direction of a mixed pattern (not when verifying: the read-back
    // replays the generator's own choices).
    let switch_dirs = gen.mixed() && !verifying;
    let mut think = Think::new(g);
    // The direction drawn for the next request, kept while it waits for its issue time.
    let mut next_dir: Option<Dir> = None;
    let trimwrite = rw == Rw::Trimwrite;
    // A paced or replayed request is not due yet: wait for completions until then.
    let mut wait_for: Option<Instant>;
    // A replay's position.
    let mut replay_pos = 0usize;
    // An fsync is due once the queue is drained: a replayed sync asks for one, and fsync=N after
    // the Nth write since the last.
    let mut sync_due = false;
    let replay_first = replay.and_then(|r| r.entries.first()).map_or(0, |e| e.at_us);

    // Account one completion; returns an error for a failed or short transfer.
    let complete = |slot: &Slot, result: i64, t: Instant, split: bool,
                        dirs: &mut [DirStats; 3], log: &mut ProgressLog,
                        tally: &mut VerifyTally| -> Result<()> {
        let len = slot.len as usize;
        if result != len as i64 {
            let dir = slot.dir.name();
            return Err(if result < 0 {
                let err = std::io::Error::from_raw_os_error((-result) as i32);
                let hint = if g.direct && -result == libc::EINVAL as i64 {
                    format!(" (O_DIRECT needs offsets and sizes aligned to {} bytes)", target.direct_align_bytes)
                } else if slot.dir == Dir::Trim && matches!((-result) as i32, libc::EOPNOTSUPP | libc::ENOTTY) {
                    " (the target does not support discard / punching holes)".to_string()
                } else {
                    String::new()
                };
                Error::io(format!("{dir} of {len} bytes at offset {} on {} failed: {err}{hint}", slot.offset, target.path))
            } else {
                Error::io(format!(
                    "short {dir}: {result} of {len} bytes at offset {} on {} (end of the target?)",
                    slot.offset, target.path
                ))
            });
        }
        if verifying && slot.dir == Dir::Read {
            if let Some(data) = &fill {
                // SAFETY: the slot's buffer holds len bytes, just filled by the completed read.
                let block = unsafe { std::slice::from_raw_parts(slot.buf, len) };
                tally.record(verify::check_fill(block, data, slot.offset, &target.path), g.verify_report as usize);
            } else {
                // SAFETY: the slot's buffer holds bs bytes, just filled by the completed read.
                let block = unsafe { std::slice::from_raw_parts(slot.buf, bs) };
                let expect = Expect { offset: slot.offset, seed: g.seed, pass: g.verify_pass };
                let pattern = pattern.as_ref().expect("a pattern when verifying");
                tally.record(verify::check(block, pattern, g.verify, expect, &target.path), g.verify_report as usize);
            }
        }
        // Time-based runs measure exactly [ramp end, deadline]; what completes later is drained only.
        if t >= measure_start && deadline.is_none_or(|d| t <= d) {
            // One subtraction per completion: its time since the phase start (the interval
            // counts from the ramp's end, t >= measure_start here).
            let t_ns = ns_between(phase_start, t);
            let interval = ((t_ns - ramp_ns) / interval_ns) as usize;
            let stats = &mut dirs[slot.dir.index()];
            if count_sizes {
                stats.count_size(len as u64);
            }
            if split {
                let slat = ns_between(slot.queued_at, slot.issued_at);
                stats.record_split(len as u64, slat, ns_between(slot.issued_at, t), interval);
            } else {
                stats.record(len as u64, ns_between(slot.queued_at, t), interval);
            }
            log.record(t_ns, total_bytes(dirs));
        }
        Ok(())
    };

    // The loop's errors break out of this block (not `?`) so in-flight requests are always
    // drained below: the kernel may still be writing into their buffers.
    let loop_result: Result<()> = 'run: {
        macro_rules! attempt {
            ($e:expr) => {
                match $e {
                    Ok(v) => v,
                    Err(err) => break 'run Err(err),
                }
            };
        }
        loop {
            wait_for = None;
            // 1. Fill the queue.
            while issuing && inflight < qd {
                if issued_bytes >= w.io_limit
                    || deadline.is_some_and(|d| now >= d)
                    || control.stop.load(Ordering::Relaxed)
                {
                    issuing = false;
                    break;
                }
                if sync_due {
                    break; // drain first, then sync (below)
                }
                if let Some(t) = think.as_mut() {
                    if t.due() {
                        if inflight > 0 {
                            break; // fio quiesces before thinking: drain, then pause (below)
                        }
                        t.pause(deadline, &control.stop);
                        now = Instant::now();
                        continue;
                    }
                }
                if let Some((role, ch)) = &w.rbw {
                    let stopped = || control.stop.load(Ordering::Relaxed);
                    let gate = match role {
                        Role::Writer => ch.writer_gate(g.rbw, record, &stopped),
                        Role::Reader => ch.reader_gate(g.rbw, g.rbw_lag, record, &stopped),
                    };
                    match gate {
                        Gate::Finish => {
                            issuing = false;
                            break;
                        }
                        Gate::Go(k) if k != record => {
                            gen.seek(k);
                            record = k;
                        }
                        Gate::Go(_) => {}
                    }
                    now = Instant::now();
                }
                // What comes next, and from when it may be issued (None: now).
                let (dir, replayed, mut due) = match replay {
                    Some(r) => {
                        let Some(e) = r.entries.get(replay_pos) else {
                            issuing = false;
                            break;
                        };
                        let at = (!g.replay_no_stall).then(|| start_instant + Duration::from_micros(e.at_us.saturating_sub(replay_first)));
                        match e.action {
                            iolog::Action::Sync => {
                                replay_pos += 1;
                                sync_due = true;
                                continue;
                            }
                            iolog::Action::Io { dir, offset, len } => (dir, Some((offset, len)), at),
                        }
                    }
                    None => (next_dir.take().unwrap_or_else(|| gen.next_dir()), None, None),
                };
                let mut dir = dir;
                if let Some(p) = &pacer {
                    if switch_dirs {
                        dir = p.choose(dir, ns_between(p.start, now));
                    }
                    let paced = p.start + Duration::from_nanos(p.due_ns(dir));
                    due = Some(due.map_or(paced, |d| d.max(paced)));
                }
                if let Some(due) = due.filter(|&d| d > now) {
                    // Not due yet: keep the choice, and wait (a deadline ends the wait).
                    if replay.is_none() {
                        next_dir = Some(dir);
                    }
                    let until = deadline.map_or(due, |d| due.min(d));
                    if inflight > 0 {
                        wait_for = Some(until);
                        break;
                    }
                    wait_until_or_stop(until, &control.stop);
                    now = Instant::now();
                    continue;
                }
                let (offset, len) = match replayed {
                    Some(io) => {
                        replay_pos += 1;
                        io
                    }
                    None => gen.next_request(dir),
                };
                record_in_flight = record;
                record += 1;
                let slot_id = free.pop().expect("a free slot while inflight < qd");
                let slot = &mut slots[slot_id as usize];
                slot.dir = dir;
                slot.offset = offset;
                slot.len = len;
                let req = Request { slot: slot_id, dir, offset, len, buf: slot.buf };
                // trimwrite covers each block twice (fio: size=1m trims 1 MiB and writes 1 MiB):
                // the byte budget counts the writes only.
                if !(trimwrite && dir == Dir::Trim) {
                    issued_bytes += len as u64;
                }
                issued_requests += 1;
                if let Some(p) = pacer.as_mut() {
                    p.issued(dir, len as u64);
                }
                if let Some(t) = think.as_mut() {
                    t.issued();
                }
                if dir != Dir::Read {
                    wrote_any = true;
                    if dir == Dir::Write {
                        writes_since_sync += 1;
                        sync_due |= g.fsync_every > 0 && writes_since_sync >= g.fsync_every;
                        if let Some(pattern) = pattern.as_ref() {
                            write_sequence += 1;
                            // SAFETY: the slot's buffer holds bs bytes and no request is using it.
                            let block = unsafe { std::slice::from_raw_parts_mut(slot.buf, bs) };
                            verify::stamp(block, pattern, g.verify, Expect { offset, seed: g.seed, pass: g.verify_pass }, write_sequence);
                        }
                    }
                }
                // Latency runs from here, the actual issue, not from the paced schedule (fio's
                // definition too): a deliberate wait is never part of lat.
                let t0 = Instant::now();
                slot.queued_at = t0;
                slot.issued_at = t0;
                progress.issued(slot_id, ns_between(phase_start, t0), offset);
                if let Some(wr) = iolog_writer.as_mut() {
                    attempt!(wr.io(t0, dir, offset, len));
                }
                // SAFETY: the slot's buffer holds len bytes for this request alone: the slot left
                // the free list above and returns to it only once its completion is handled.
                match attempt!(unsafe { backend.queue(&req) }) {
                    Queued::Completed(res) => {
                        now = Instant::now();
                        progress.completed(slot_id);
                        attempt!(complete(&slots[slot_id as usize], res, now, caps.asynchronous, &mut dirs, &mut log, &mut tally));
                        rbw_published(w, record_in_flight);
                        free.push(slot_id);
                        done_bytes += len as u64;
                        done_ops += 1;
                        progress.publish(done_bytes, done_ops);
                    }
                    Queued::Pending => {
                        inflight += 1;
                        unsubmitted.push(slot_id);
                        if unsubmitted.len() >= batch {
                            attempt!(submit(&mut *backend, &mut slots, &mut unsubmitted));
                        }
                    }
                }
            }
            if !unsubmitted.is_empty() {
                attempt!(submit(&mut *backend, &mut slots, &mut unsubmitted));
            }

            // 2. Reap: at least one completion, or (paced) whatever arrives before the issue time.
            if inflight > 0 {
                completions.clear();
                match wait_for {
                    Some(t) => attempt!(backend.reap_until(t, &mut completions)),
                    None => attempt!(backend.reap(1, &mut completions)),
                }
                now = Instant::now();
                inflight -= completions.len();
                for c in completions.iter() {
                    free.push(c.slot);
                    progress.completed(c.slot);
                    rbw_published(w, record_in_flight); // rbw runs at qd 1: this is the one
                    let slot = &slots[c.slot as usize];
                    attempt!(complete(slot, c.result, now, true, &mut dirs, &mut log, &mut tally));
                    done_bytes += slot.len as u64;
                    done_ops += 1;
                }
                progress.publish(done_bytes, done_ops);
                continue;
            }

            // 3. Nothing in flight: sync if due, or finish. As fio's fsync=N, the sync comes before
            // the request that follows the Nth write: none after the last (fsync_end covers that).
            if issuing && sync_due {
                if let Some(wr) = iolog_writer.as_mut() {
                    attempt!(wr.sync(Instant::now()));
                }
                attempt!(fsync_timed(fd, &target.path, &mut sync));
                writes_since_sync = 0;
                sync_due = false;
                now = Instant::now();
                continue;
            }
            if !issuing {
                break 'run Ok(());
            }
        }
    };
    if let Err(e) = loop_result {
        // Let the kernel finish with every buffer before they are freed.
        let _ = backend.commit();
        while inflight > 0 {
            completions.clear();
            if backend.reap(1, &mut completions).is_err() {
                // Cannot prove the kernel is done with the buffers: leak them rather than free.
                std::mem::forget(region);
                break;
            }
            inflight = inflight.saturating_sub(completions.len());
        }
        return Err(e);
    }
    drop(writer_done); // the reader may finish now
    let mut end = match deadline {
        Some(d) if now > d => d,
        _ => now,
    };
    if g.fsync_end && wrote_any && control.error.lock().map(|e| e.is_none()).unwrap_or(true) {
        if let Some(wr) = iolog_writer.as_mut() {
            wr.sync(Instant::now())?;
        }
        fsync_timed(fd, &target.path, &mut sync)?;
        end = Instant::now();
    }
    if let Some(wr) = iolog_writer.take() {
        wr.finish(Instant::now())?;
    }

    if !caps.asynchronous {
        for d in dirs.iter_mut() {
            d.finish_unsplit();
        }
    }
    log.finish(ns_between(phase_start, end.max(measure_start)), total_bytes(&dirs));
    let rel = |t: Instant| t.saturating_duration_since(phase_start).as_secs_f64();
    let [r, wr, tr] = &dirs;
    let summary = WorkerSummary {
        id: w.id,
        group: g.name.clone(),
        target: target.path.clone(),
        start_s: rel(start_instant.max(measure_start)),
        end_s: rel(end.max(measure_start)),
        read_bytes: r.bytes,
        read_ops: r.ops,
        write_bytes: wr.bytes,
        write_ops: wr.ops,
        trim_bytes: tr.bytes,
        trim_ops: tr.ops,
    };
    drop(backend);
    let mut readback = Readback::default();
    if verifying && wrote_any && g.verify_readback && w.rbw.is_none() && !control.stop.load(Ordering::Relaxed) {
        let replay = OffsetGenerator::new(rw, g, w.map, w.seed);
        // SAFETY: every request has completed (the loop drained them), so no slot buffer is in use;
        // slot 0's buffer holds bs bytes and outlives this borrow.
        let buf = unsafe { std::slice::from_raw_parts_mut(slots[0].buf, bs) };
        // Every request drew one offset from `gen`, so the replay makes as many draws.
        let issued = issued_requests;
        readback = read_back(fd, &target.path, replay, issued, w.map, g.bs, buf, &control.stop, |offset, block| {
            let found = match (&fill, pattern.as_ref()) {
                (Some(data), _) => verify::check_fill(block, data, offset, &target.path),
                (None, Some(pattern)) => verify::check(block, pattern, g.verify, Expect { offset, seed: g.seed, pass: g.verify_pass }, &target.path),
                (None, None) => None,
            };
            tally.record(found, g.verify_report as usize);
        })?;
    }
    Ok(WorkerOutcome { dirs, sync, summary, setup_flags, log, verify: tally, readback })
}

/// Read back and check, in the order first written, every block a finished worker wrote: replay its
/// offset sequence (`issued` draws of a fresh generator with the same seed) and read each written
/// block once, however often it was written (time-based runs wrap; `random_map = off` repeats).
/// Synchronous preads into one slot buffer, so O_DIRECT alignment holds as it did for the writes.
#[allow(clippy::too_many_arguments)]
fn read_back(
    fd: i32,
    path: &str,
    mut replay: OffsetGenerator,
    issued: u64,
    map: AccessMap,
    bs: u64,
    buf: &mut [u8],
    stop: &std::sync::atomic::AtomicBool,
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
        // SAFETY: buf is a valid, writable buffer of buf.len() bytes.
        let n = unsafe { libc::pread(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), io.offset as libc::off_t) };
        if n != buf.len() as isize {
            let why = if n < 0 { std::io::Error::last_os_error().to_string() } else { format!("short read of {n} bytes") };
            return Err(Error::io(format!("verify read-back of {} bytes at offset {} on {path} failed: {why}", buf.len(), io.offset)));
        }
        check(io.offset, buf);
        blocks += 1;
    }
    Ok(Readback { blocks, seconds: t0.elapsed().as_secs_f64() })
}

/// Read-behind-write: tell the other side that record `k` is done.
#[inline]
fn rbw_published(w: &WorkerPlan, k: u64) {
    if let Some((role, ch)) = &w.rbw {
        let counter = if *role == Role::Writer { &ch.written } else { &ch.read };
        counter.store(k + 1, Ordering::Release);
    }
}

/// Submit queued requests and stamp their issue time after the system call returned.
fn submit(backend: &mut dyn engine::Engine, slots: &mut [Slot], unsubmitted: &mut Vec<u32>) -> Result<()> {
    backend.commit()?;
    let t = Instant::now();
    for &id in unsubmitted.iter() {
        slots[id as usize].issued_at = t;
    }
    unsubmitted.clear();
    Ok(())
}

fn fsync_timed(fd: i32, path: &str, sync: &mut Histogram) -> Result<()> {
    let t0 = Instant::now();
    // SAFETY: plain syscall on an open descriptor.
    if unsafe { libc::fsync(fd) } != 0 {
        return Err(Error::io(format!("fsync of {path} failed: {}", std::io::Error::last_os_error())));
    }
    sync.record(ns_between(t0, Instant::now()));
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
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
        let path = format!("{dir}/storlab-readback-{}", std::process::id());
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

        let map = AccessMap::Contiguous { first_block: 0, blocks };
        let spec = crate::spec::GroupSpec { rw: Rw::Write, bs, ..Default::default() };
        let replay = OffsetGenerator::new(Rw::Write, &spec, map, seed);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let mut bad = Vec::new();
        let mut checked = 0;
        let rb = read_back(file.as_raw_fd(), &path, replay, 3 * blocks, map, bs, &mut block, &stop, |offset, b| {
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
    use crate::spec::{EngineKind, GroupSpec, PhaseSpec, Rw};
    use crate::workload::Dir;
    use crate::{run_phase, Control, Plan, PhaseResult};

    fn scratch(name: &str) -> String {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
        format!("{dir}/storlab-worker-{}-{name}", std::process::id())
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
            assert_eq!(r.write.as_ref().unwrap().ops as usize, ios.len());
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
