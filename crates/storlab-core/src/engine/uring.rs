//! io_uring: one ring per worker thread, requests batched into the submission queue, submitted by
//! `commit` and reaped in bulk. Set-up flags are probed from best to plainest and the ones the
//! kernel accepted are recorded (`setup_flags`), as are registered buffers and files.
//!
//! By default (`uring.fixed_buffers = auto`) the slot buffers are registered with the ring whenever
//! the kernel allows (READ/WRITE_FIXED): otherwise the kernel pins and unpins each request's pages
//! on every I/O (fio's default, `fixedbufs=0`), which costs the submitting thread about a seventh
//! of its time on 4 KiB reads and most of it on 1 MiB writes (a loop device on tmpfs;
//! benchmarks/vs_fio.py W2, W4). The requests themselves (sizes, offsets, queue depth, batches)
//! are unchanged, and the choice is recorded: FIXED_BUFFERS when registered; when not,
//! FIXED_BUFFERS_REFUSED(why) if the group required them (`on`, reported as a warning), else
//! FIXED_BUFFERS_UNAVAILABLE(why) (for example the locked-memory limit of an unprivileged user),
//! and the run uses the plain path. `off` never registers them (no io_uring_register call, plain
//! READ/WRITE, as fio without fixedbufs), to compare the two or to match fio.

use std::os::fd::RawFd;
use std::time::Instant;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::{trim, Caps, Completion, Engine, EngineSetup, Queued, Request};
use crate::error::{Error, Result};
use crate::group::FixedBuffers;
use crate::workload::Dir;

type Ring = IoUring<squeue::Entry, cqueue::Entry>;

pub struct Uring {
    ring: Ring,
    fd: RawFd,
    block_device: bool,
    fixed_buffers: bool,
    fixed_files: bool,
    queued: u32,
    flags: Vec<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Flag {
    SingleIssuer,
    DeferTaskrun,
    CoopTaskrun,
    Sqpoll,
}

impl Flag {
    fn name(self) -> &'static str {
        match self {
            Flag::SingleIssuer => "SINGLE_ISSUER",
            Flag::DeferTaskrun => "DEFER_TASKRUN",
            Flag::CoopTaskrun => "COOP_TASKRUN",
            Flag::Sqpoll => "SQPOLL",
        }
    }
}

/// Candidate flag sets, best first. DEFER_TASKRUN needs SINGLE_ISSUER and excludes SQPOLL.
fn candidates(sqpoll: bool) -> Vec<Vec<Flag>> {
    use Flag::*;
    let mut sets = Vec::new();
    if sqpoll {
        sets.push(vec![Sqpoll, SingleIssuer]);
        sets.push(vec![Sqpoll]);
    }
    sets.push(vec![SingleIssuer, DeferTaskrun]);
    sets.push(vec![SingleIssuer, CoopTaskrun]);
    sets.push(vec![CoopTaskrun]);
    sets.push(vec![]);
    sets
}

fn build_ring(entries: u32, flags: &[Flag]) -> std::io::Result<Ring> {
    let mut b = IoUring::<squeue::Entry, cqueue::Entry>::builder();
    for f in flags {
        match f {
            Flag::SingleIssuer => b.setup_single_issuer(),
            Flag::DeferTaskrun => b.setup_defer_taskrun(),
            Flag::CoopTaskrun => b.setup_coop_taskrun(),
            Flag::Sqpoll => b.setup_sqpoll(1000),
        };
    }
    b.build(entries)
}

/// Register the slot buffers as `mode` asks, recording the outcome in `flags`; true when registered.
/// `off` never calls io_uring_register; `on` and `auto` try, and a refusal is FIXED_BUFFERS_REFUSED
/// (`on`: reported as a warning) or FIXED_BUFFERS_UNAVAILABLE (`auto`: the plain path, silently).
fn register_buffers(ring: &Ring, buffers: &[(*mut u8, usize)], mode: FixedBuffers, flags: &mut Vec<String>) -> bool {
    if mode == FixedBuffers::Off {
        return false;
    }
    let iovecs: Vec<libc::iovec> =
        buffers.iter().map(|&(p, len)| libc::iovec { iov_base: p as *mut libc::c_void, iov_len: len }).collect();
    // SAFETY: the buffers outlive the ring (the worker drops the engine before them).
    match unsafe { ring.submitter().register_buffers(&iovecs) } {
        Ok(()) => {
            flags.push("FIXED_BUFFERS".into());
            true
        }
        Err(e) if mode == FixedBuffers::On => {
            flags.push(format!("FIXED_BUFFERS_REFUSED({e})"));
            false
        }
        Err(e) => {
            flags.push(format!("FIXED_BUFFERS_UNAVAILABLE({e})"));
            false
        }
    }
}

impl Uring {
    pub fn new(setup: &EngineSetup) -> Result<Uring> {
        let g = setup.group;
        let entries = setup.qd.next_power_of_two().max(2);
        let mut last_err = None;
        let mut chosen = None;
        for set in candidates(g.uring_sqpoll) {
            match build_ring(entries, &set) {
                Ok(r) => {
                    chosen = Some((r, set));
                    break;
                }
                Err(e) => last_err = Some(e),
            }
        }
        let (ring, set) = chosen.ok_or_else(|| {
            Error::engine(format!(
                "io_uring set-up failed with every flag set ({}); is io_uring disabled (/proc/sys/kernel/io_uring_disabled)?",
                last_err.map(|e| e.to_string()).unwrap_or_default()
            ))
        })?;
        let mut flags: Vec<String> = set.iter().map(|f| f.name().to_string()).collect();
        if g.uring_sqpoll && !set.contains(&Flag::Sqpoll) {
            flags.push("SQPOLL_REFUSED".into());
        }

        let fixed_buffers = register_buffers(&ring, setup.buffers, g.uring_fixed_buffers, &mut flags);
        let mut fixed_files = false;
        if g.uring_fixed_files {
            match ring.submitter().register_files(&[setup.fd]) {
                Ok(()) => {
                    fixed_files = true;
                    flags.push("FIXED_FILES".into());
                }
                Err(e) => flags.push(format!("FIXED_FILES_REFUSED({e})")),
            }
        }
        Ok(Uring { ring, fd: setup.fd, block_device: setup.block_device, fixed_buffers, fixed_files, queued: 0, flags })
    }

    /// Append every completion the ring holds.
    #[inline]
    fn take_completions(&mut self, out: &mut Vec<Completion>) {
        for cqe in self.ring.completion() {
            out.push(Completion { slot: cqe.user_data() as u32, result: cqe.result() as i64 });
        }
    }

    fn entry(&self, r: &Request) -> squeue::Entry {
        let ud = r.slot as u64;
        macro_rules! build {
            ($target:expr) => {
                match (r.dir == Dir::Read, self.fixed_buffers) {
                    (true, false) => opcode::Read::new($target, r.buf, r.len).offset(r.offset).build(),
                    (false, false) => opcode::Write::new($target, r.buf, r.len).offset(r.offset).build(),
                    (true, true) => opcode::ReadFixed::new($target, r.buf, r.len, r.slot as u16).offset(r.offset).build(),
                    (false, true) => opcode::WriteFixed::new($target, r.buf, r.len, r.slot as u16).offset(r.offset).build(),
                }
            };
        }
        let e = if self.fixed_files { build!(types::Fixed(0)) } else { build!(types::Fd(self.fd)) };
        e.user_data(ud)
    }
}

impl Engine for Uring {
    fn caps(&self) -> Caps {
        Caps { asynchronous: true }
    }

    #[inline]
    unsafe fn queue(&mut self, r: &Request) -> Result<Queued> {
        if r.dir == Dir::Trim {
            // As fio's io_uring engine: a trim is done synchronously (there is no discard opcode
            // for regular descriptors), so it counts as completed at once, with slat 0.
            return Ok(Queued::Completed(trim(self.fd, self.block_device, r.offset, r.len)));
        }
        let e = self.entry(r);
        // SAFETY: the buffer stays valid and untouched until this request's completion is reaped.
        unsafe { self.ring.submission().push(&e) }
            .map_err(|_| Error::engine("io_uring submission queue full (more requests than the queue depth)"))?;
        self.queued += 1;
        Ok(Queued::Pending)
    }

    fn commit(&mut self) -> Result<()> {
        while self.queued > 0 {
            match self.ring.submit() {
                Ok(n) => self.queued -= (n as u32).min(self.queued),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) || e.raw_os_error() == Some(libc::EBUSY) => {
                    // Completion queue pressure: the caller reaps, then commits again.
                    break;
                }
                Err(e) => return Err(Error::engine(format!("io_uring submit failed: {e}"))),
            }
            if self.ring.params().is_setup_sqpoll() {
                self.queued = 0; // the kernel thread consumes the queue
            }
        }
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<()> {
        if min > 0 && self.ring.completion().len() < min {
            loop {
                match self.ring.submit_and_wait(min) {
                    Ok(_) => break,
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => break,
                    Err(e) => return Err(Error::engine(format!("io_uring wait failed: {e}"))),
                }
            }
            self.queued = 0;
        }
        self.take_completions(out);
        Ok(())
    }

    fn reap_until(&mut self, deadline: Instant, out: &mut Vec<Completion>) -> Result<()> {
        if self.ring.completion().is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if !left.is_zero() {
                let ts = types::Timespec::from(left);
                let args = types::SubmitArgs::new().timespec(&ts);
                match self.ring.submitter().submit_with_args(1, &args) {
                    Ok(_) => {}
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)) => {}
                    // A kernel without timed waits (before 5.11): poll in short steps instead.
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                        crate::pace::wait_until(deadline.min(Instant::now() + std::time::Duration::from_micros(50)));
                    }
                    Err(e) => return Err(Error::engine(format!("io_uring wait failed: {e}"))),
                }
                self.queued = 0;
            }
        }
        self.take_completions(out);
        Ok(())
    }

    fn setup_flags(&self) -> Vec<String> {
        self.flags.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each mode against a real ring: `off` registers nothing and records nothing; `on` and `auto`
    /// register (or record why not, as a refusal for `on` only).
    #[test]
    fn fixed_buffers_off_on_auto() {
        let Ok(ring) = build_ring(4, &[]) else {
            eprintln!("io_uring unavailable here");
            return;
        };
        let mut bufs = [vec![0u8; 4096], vec![0u8; 4096]];
        let slots: Vec<(*mut u8, usize)> = bufs.iter_mut().map(|b| (b.as_mut_ptr(), b.len())).collect();
        let mut flags = Vec::new();
        assert!(!register_buffers(&ring, &slots, FixedBuffers::Off, &mut flags));
        assert!(flags.is_empty(), "{flags:?}");
        // nothing was registered: registering now succeeds (a second registration would be EBUSY)
        let registered = register_buffers(&ring, &slots, FixedBuffers::On, &mut flags);
        assert_eq!(flags.len(), 1);
        assert!(if registered { flags[0] == "FIXED_BUFFERS" } else { flags[0].starts_with("FIXED_BUFFERS_REFUSED(") }, "{flags:?}");
        if registered {
            // a second registration is refused (EBUSY): `auto` records it as unavailable, no warning
            let mut again = Vec::new();
            assert!(!register_buffers(&ring, &slots, FixedBuffers::Auto, &mut again));
            assert!(again[0].starts_with("FIXED_BUFFERS_UNAVAILABLE("), "{again:?}");
        }
        let fresh = build_ring(4, &[]).expect("a second ring");
        let mut flags = Vec::new();
        let registered = register_buffers(&fresh, &slots, FixedBuffers::Auto, &mut flags);
        assert!(if registered { flags == ["FIXED_BUFFERS"] } else { flags[0].starts_with("FIXED_BUFFERS_UNAVAILABLE(") }, "{flags:?}");
    }
}
