//! One worker thread: keeps up to `qd` requests in flight on its target, stamps their times,
//! and records each completion in its own statistics. Request slots and their aligned buffers are
//! created once; the loop allocates nothing per I/O.
//!
//! Times: `queued_at` when the request is handed to the backend, `issued_at` after the submitting
//! system call returned (io_uring) — slat = issued_at - queued_at, and the completion latency
//! lat = completion - issued_at. For psync both stamps coincide and lat is the pread/pwrite call.

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::buffer::AlignedBuf;
use crate::engine::{self, Completion, EngineSetup, Queued, Request};
use crate::error::{Error, Result};
use crate::histogram::Histogram;
use crate::plan::{Plan, WorkerPlan};
use crate::rbw::{Gate, Role, WriterDone};
use crate::spec::Rw;
use crate::run::Control;
use crate::stats::{DirStats, ProgressLog};
use crate::verify::{self, Expect, VerifyKind, VerifyTally};
use crate::workload::OffsetGenerator;

struct Slot {
    /// This slot's part of the worker's buffer region.
    buf: *mut u8,
    queued_at: Instant,
    issued_at: Instant,
    is_read: bool,
    offset: u64,
}

/// Everything a finished worker hands back to the phase.
pub struct WorkerOutcome {
    pub id: usize,
    pub read: DirStats,
    pub write: DirStats,
    pub sync: Histogram,
    pub summary: WorkerSummary,
    pub setup_flags: Vec<String>,
    pub log: ProgressLog,
    pub verify: VerifyTally,
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
}

#[inline(always)]
fn ns_between(a: Instant, b: Instant) -> u64 {
    b.saturating_duration_since(a).as_nanos() as u64
}

pub fn run_worker(plan: &Plan, w: &WorkerPlan, control: &Control) -> Result<WorkerOutcome> {
    let g = plan.group(w);
    let target = &plan.targets[w.target];
    let qd = g.qd as usize;
    let bs = g.bs as usize;
    let fd = w.file.as_raw_fd();

    // One region for all slots (page-aligned strides), allocated and filled once.
    let stride = bs.div_ceil(plan.buffer_align) * plan.buffer_align;
    let mut region = AlignedBuf::new(stride * qd, plan.buffer_align);
    region.fill_random(w.seed);
    let now = Instant::now();
    let mut slots: Vec<Slot> = (0..qd)
        // SAFETY: i * stride + bs <= stride * qd, inside the region.
        .map(|i| Slot { buf: unsafe { region.as_mut_ptr().add(i * stride) }, queued_at: now, issued_at: now, is_read: true, offset: 0 })
        .collect();
    let buffers: Vec<(*mut u8, usize)> = slots.iter().map(|s| (s.buf, bs)).collect();
    let backend = engine::create(&EngineSetup { fd, buffers: &buffers, qd: g.qd, group: g });
    // Every worker reaches the start line, even one whose set-up failed, so nobody waits forever.
    control.ready.wait();
    let mut backend = backend?;
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
    let mut read = DirStats::with_intervals(expected_intervals);
    let mut write = DirStats::with_intervals(expected_intervals);
    let mut sync = Histogram::new();

    // All workers started together; the phase clock was set by the coordinator.
    let phase_start = control.phase_start();
    let measure_start = phase_start + Duration::from_secs_f64(g.ramp);
    let progress = &control.progress[w.id];

    let mut issued_bytes: u64 = 0;
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
    let mut log = ProgressLog::new(ns_between(phase_start, start_instant.max(measure_start)));
    let verifying = g.verify != VerifyKind::Off;
    let pattern = verifying.then(|| verify::Pattern::new(g.seed, bs));
    let mut tally = VerifyTally::default();
    let mut write_sequence: u64 = 0;
    // Read-behind-write: this worker's next record and the one in flight (qd is 1 there).
    let mut record: u64 = 0;
    let mut record_in_flight: u64 = 0;
    let writer_done = w.rbw.as_ref().filter(|(r, _)| *r == Role::Writer).map(|(_, ch)| WriterDone(ch));
    // A time-based worker runs for `time` from its own measured start (fio's startdelay semantics).
    let deadline = g.time.map(|t| start_instant.max(measure_start) + Duration::from_secs_f64(t));

    // Account one completion; returns an error for a failed or short transfer.
    let complete = |slot: &Slot, result: i64, t: Instant, with_slat: bool,
                        read: &mut DirStats, write: &mut DirStats, log: &mut ProgressLog,
                        tally: &mut VerifyTally| -> Result<()> {
        if result != bs as i64 {
            let dir = if slot.is_read { "read" } else { "write" };
            return Err(if result < 0 {
                let err = std::io::Error::from_raw_os_error((-result) as i32);
                let hint = if g.direct && -result == libc::EINVAL as i64 {
                    format!(" (O_DIRECT needs offsets and sizes aligned to {} bytes)", target.direct_align_bytes)
                } else {
                    String::new()
                };
                Error::io(format!("{dir} of {bs} bytes at offset {} on {} failed: {err}{hint}", slot.offset, target.path))
            } else {
                Error::io(format!(
                    "short {dir}: {result} of {bs} bytes at offset {} on {} (end of the target?)",
                    slot.offset, target.path
                ))
            });
        }
        if verifying && slot.is_read {
            // SAFETY: the slot's buffer holds bs bytes, just filled by the completed read.
            let block = unsafe { std::slice::from_raw_parts(slot.buf, bs) };
            let expect = Expect { offset: slot.offset, seed: g.seed, pass: g.verify_pass };
            let pattern = pattern.as_ref().expect("a pattern when verifying");
            tally.record(verify::check(block, pattern, g.verify, expect, &target.path), g.verify_report as usize);
        }
        // Time-based runs measure exactly [ramp end, deadline]; what completes later is drained only.
        if t >= measure_start && deadline.is_none_or(|d| t <= d) {
            let interval = (ns_between(measure_start, t) / interval_ns) as usize;
            let lat = ns_between(slot.issued_at, t);
            let stats = if slot.is_read { &mut *read } else { &mut *write };
            stats.record(bs as u64, lat, interval);
            if with_slat {
                stats.slat.record(ns_between(slot.queued_at, slot.issued_at));
            }
            log.record(ns_between(phase_start, t), read.bytes + write.bytes);
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
            // 1. Fill the queue.
            while issuing && inflight < qd {
                if issued_bytes >= w.io_limit
                    || deadline.is_some_and(|d| now >= d)
                    || control.stop.load(Ordering::Relaxed)
                {
                    issuing = false;
                    break;
                }
                if g.fsync_every > 0 && writes_since_sync >= g.fsync_every {
                    break; // drain first, then sync (below)
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
                let io = gen.next_io();
                record_in_flight = record;
                record += 1;
                let slot_id = free.pop().expect("a free slot while inflight < qd");
                let slot = &mut slots[slot_id as usize];
                slot.is_read = io.is_read;
                slot.offset = io.offset;
                let req = Request { slot: slot_id, is_read: io.is_read, offset: io.offset, len: bs as u32, buf: slot.buf };
                issued_bytes += bs as u64;
                if !io.is_read {
                    writes_since_sync += 1;
                    wrote_any = true;
                    if verifying {
                        write_sequence += 1;
                        // SAFETY: the slot's buffer holds bs bytes and no request is using it.
                        let block = unsafe { std::slice::from_raw_parts_mut(slot.buf, bs) };
                        let pattern = pattern.as_ref().expect("a pattern when verifying");
                        verify::stamp(block, pattern, g.verify, Expect { offset: io.offset, seed: g.seed, pass: g.verify_pass }, write_sequence);
                    }
                }
                let t0 = Instant::now();
                slot.queued_at = t0;
                slot.issued_at = t0;
                progress.issued(slot_id, ns_between(phase_start, t0), io.offset);
                match attempt!(backend.queue(&req)) {
                    Queued::Completed(res) => {
                        now = Instant::now();
                        progress.completed(slot_id);
                        attempt!(complete(&slots[slot_id as usize], res, now, false, &mut read, &mut write, &mut log, &mut tally));
                        rbw_published(w, record_in_flight);
                        free.push(slot_id);
                        done_bytes += bs as u64;
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

            // 2. Reap.
            if inflight > 0 {
                completions.clear();
                attempt!(backend.reap(1, &mut completions));
                now = Instant::now();
                inflight -= completions.len();
                for c in completions.iter() {
                    free.push(c.slot);
                    progress.completed(c.slot);
                    rbw_published(w, record_in_flight); // rbw runs at qd 1: this is the one
                    attempt!(complete(&slots[c.slot as usize], c.result, now, caps.records_submit_latency, &mut read, &mut write, &mut log, &mut tally));
                    done_bytes += bs as u64;
                    done_ops += 1;
                }
                progress.publish(done_bytes, done_ops);
                continue;
            }

            // 3. Nothing in flight: sync if due, or finish.
            if g.fsync_every > 0 && writes_since_sync >= g.fsync_every {
                attempt!(fsync_timed(fd, &target.path, &mut sync));
                writes_since_sync = 0;
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
        fsync_timed(fd, &target.path, &mut sync)?;
        end = Instant::now();
    }

    log.finish(ns_between(phase_start, end.max(measure_start)), read.bytes + write.bytes);
    let rel = |t: Instant| t.saturating_duration_since(phase_start).as_secs_f64();
    let summary = WorkerSummary {
        id: w.id,
        group: g.name.clone(),
        target: target.path.clone(),
        start_s: rel(start_instant.max(measure_start)),
        end_s: rel(end.max(measure_start)),
        read_bytes: read.bytes,
        read_ops: read.ops,
        write_bytes: write.bytes,
        write_ops: write.ops,
    };
    drop(backend);
    Ok(WorkerOutcome { id: w.id, read, write, sync, summary, setup_flags, log, verify: tally })
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
