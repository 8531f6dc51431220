//! One worker thread: keeps up to `qd` requests in flight on its target, stamps their times,
//! and records each completion in its own statistics. Request slots and their aligned buffers are
//! created once; the loop allocates nothing per I/O.
//!
//! Times, as fio defines them: `queued_at` when the request has been prepared and is handed to the
//! backend, `issued_at` after the submitting system call returned (asynchronous backends).
//! slat = issued_at - queued_at, clat = completion - issued_at, and the headline lat = slat + clat.
//! For a blocking backend (psync) the call is the whole request: clat = lat, slat = 0.

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
use crate::control::Control;
use crate::stats::{DirStats, ProgressLog};
use crate::verify::{self, Expect, VerifyKind, VerifyTally};
use crate::workload::{AccessMap, OffsetGenerator};

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
    pub read: DirStats,
    pub write: DirStats,
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
    let complete = |slot: &Slot, result: i64, t: Instant, split: bool,
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
            let stats = if slot.is_read { &mut *read } else { &mut *write };
            if split {
                let slat = ns_between(slot.queued_at, slot.issued_at);
                stats.record_split(bs as u64, slat, ns_between(slot.issued_at, t), interval);
            } else {
                stats.record(bs as u64, ns_between(slot.queued_at, t), interval);
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
                // SAFETY: the slot's buffer holds bs bytes for this request alone: the slot left
                // the free list above and returns to it only once its completion is handled.
                match attempt!(unsafe { backend.queue(&req) }) {
                    Queued::Completed(res) => {
                        now = Instant::now();
                        progress.completed(slot_id);
                        attempt!(complete(&slots[slot_id as usize], res, now, caps.asynchronous, &mut read, &mut write, &mut log, &mut tally));
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
                    attempt!(complete(&slots[c.slot as usize], c.result, now, true, &mut read, &mut write, &mut log, &mut tally));
                    done_bytes += bs as u64;
                    done_ops += 1;
                }
                progress.publish(done_bytes, done_ops);
                continue;
            }

            // 3. Nothing in flight: sync if due, or finish. As fio's fsync=N, the sync comes before
            // the request that follows the Nth write: none after the last (fsync_end covers that).
            if issuing && g.fsync_every > 0 && writes_since_sync >= g.fsync_every {
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

    if !caps.asynchronous {
        read.finish_unsplit();
        write.finish_unsplit();
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
    let mut readback = Readback::default();
    if verifying && wrote_any && g.verify_readback && w.rbw.is_none() && !control.stop.load(Ordering::Relaxed) {
        let replay = OffsetGenerator::new(rw, g, w.map, w.seed);
        let pattern = pattern.as_ref().expect("a pattern when verifying");
        // SAFETY: every request has completed (the loop drained them), so no slot buffer is in use;
        // slot 0's buffer holds bs bytes and outlives this borrow.
        let buf = unsafe { std::slice::from_raw_parts_mut(slots[0].buf, bs) };
        // Every request drew one offset from `gen`, so the replay makes as many draws.
        let issued = issued_bytes / g.bs;
        readback = read_back(fd, &target.path, replay, issued, w.map, g.bs, buf, &control.stop, |offset, block| {
            let expect = Expect { offset, seed: g.seed, pass: g.verify_pass };
            tally.record(verify::check(block, pattern, g.verify, expect, &target.path), g.verify_report as usize);
        })?;
    }
    Ok(WorkerOutcome { read, write, sync, summary, setup_flags, log, verify: tally, readback })
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
        if io.is_read {
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
