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
//!
//! A worker waiting for a completion first spins for up to `uring.wait_spin` (100 µs by default)
//! and only then sleeps in io_uring_enter (`WaitSpin`). A fast device completes within that, and
//! a sleeping thread leaves its CPU idle: in a virtual machine the CPU halts, and waking it costs
//! the hypervisor's round trip on every wait. On a 4 KiB random read at QD 32 through a loop device
//! (2 CPUs, benchmarks/vs_fio.py W2) the host sat idle a quarter of the time while the worker slept
//! and the kernel's stages waited on each other; spun, the requests are the same and the idle time
//! goes. fio's thread rarely sleeps there either: its own cost per request fills the wait. The
//! spinning thread yields its CPU to any other runnable thread between looks (sched_yield), so the
//! kernel threads completing its requests are not held up by it. The spin adapts: a wait that outlasted it makes the next wait sleep at once, until a sleep again
//! ends within the budget (or every 16th wait, to look again), so a slow device costs no CPU. It
//! is off where the phase's threads on the host (this process's, times the MPI ranks the launcher
//! placed there) outnumber the CPUs, recorded as WAIT_SPIN_OFF(why).

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

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
    spin: WaitSpin,
}

/// IORING_ENTER_GETEVENTS: with no minimum, an enter runs the completion work pending for this
/// thread (DEFER_TASKRUN, COOP_TASKRUN) and returns at once.
const ENTER_GETEVENTS: u32 = 1;

/// Spinning for completions before sleeping on the ring (`uring.wait_spin`, see the module).
struct WaitSpin {
    /// Zero: never spin.
    budget: Duration,
    /// Completions reach the ring only when this thread enters the kernel (DEFER_TASKRUN or
    /// COOP_TASKRUN); otherwise the kernel posts them while the thread runs.
    enter_to_post: bool,
    /// The kernel flags pending completion work in the submission ring (TASKRUN_FLAG), so the spin
    /// enters only when there is work.
    taskrun_flag: bool,
    /// The last wait outlasted the budget: sleep at once until a wait is short again.
    last_long: bool,
    waits: u32,
}

impl WaitSpin {
    /// Whether this wait spins first (the budget is not zero): the last wait was short, or it is
    /// time to look again.
    #[inline]
    fn worth_it(&mut self) -> bool {
        self.waits = self.waits.wrapping_add(1);
        !self.last_long || self.waits.is_multiple_of(16)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Flag {
    SingleIssuer,
    DeferTaskrun,
    CoopTaskrun,
    TaskrunFlagged,
    Sqpoll,
}

impl Flag {
    fn name(self) -> &'static str {
        match self {
            Flag::SingleIssuer => "SINGLE_ISSUER",
            Flag::DeferTaskrun => "DEFER_TASKRUN",
            Flag::CoopTaskrun => "COOP_TASKRUN",
            Flag::TaskrunFlagged => "TASKRUN_FLAG",
            Flag::Sqpoll => "SQPOLL",
        }
    }
}

/// Candidate flag sets, best first. DEFER_TASKRUN needs SINGLE_ISSUER and excludes SQPOLL;
/// TASKRUN_FLAG (5.19) goes with DEFER_TASKRUN or COOP_TASKRUN, and is tried first with each.
fn candidates(sqpoll: bool) -> Vec<Vec<Flag>> {
    use Flag::*;
    let mut sets = Vec::new();
    if sqpoll {
        sets.push(vec![Sqpoll, SingleIssuer]);
        sets.push(vec![Sqpoll]);
    }
    sets.push(vec![SingleIssuer, DeferTaskrun, TaskrunFlagged]);
    sets.push(vec![SingleIssuer, DeferTaskrun]);
    sets.push(vec![SingleIssuer, CoopTaskrun, TaskrunFlagged]);
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
            Flag::TaskrunFlagged => b.setup_taskrun_flag(),
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
        let spin = WaitSpin {
            budget: spin_budget(setup, &mut flags),
            enter_to_post: set.contains(&Flag::DeferTaskrun) || set.contains(&Flag::CoopTaskrun),
            taskrun_flag: set.contains(&Flag::TaskrunFlagged),
            last_long: false,
            waits: 0,
        };
        Ok(Uring { ring, fd: setup.fd, block_device: setup.block_device, fixed_buffers, fixed_files, queued: 0, flags, spin })
    }

    /// Spin until `min` completions are on the ring or the budget is spent; true if they came.
    fn spin_for(&mut self, min: usize) -> bool {
        let until = Instant::now() + self.spin.budget;
        loop {
            if self.ring.completion().len() >= min {
                return true;
            }
            if self.spin.enter_to_post && (!self.spin.taskrun_flag || self.ring.submission().taskrun()) {
                // SAFETY: no submissions and no minimum: the kernel only posts pending completions.
                // An error (EINTR) leaves the ring as it was; the loop looks again.
                let _ = unsafe { self.ring.submitter().enter::<libc::sigset_t>(0, 0, ENTER_GETEVENTS, None) };
            } else {
                // Give the CPU to whatever else is runnable on it (the softirq or loop worker that
                // completes these very requests); with nothing else, the call returns at once.
                // SAFETY: plain syscall without arguments.
                unsafe { libc::sched_yield() };
            }
            if Instant::now() >= until {
                return self.ring.completion().len() >= min;
            }
        }
    }

    /// Sleep in the kernel until `min` completions are on the ring (submitting what is queued).
    fn sleep_for(&mut self, min: usize) -> Result<()> {
        loop {
            match self.ring.submit_and_wait(min) {
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => break,
                Err(e) => return Err(Error::engine(format!("io_uring wait failed: {e}"))),
            }
        }
        self.queued = 0;
        Ok(())
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

/// The spin budget of a worker: the group's `uring.wait_spin`, or none where the phase's threads
/// on this host (this process's, times the MPI ranks the launcher placed here) outnumber the CPUs
/// this process may use (recorded as WAIT_SPIN_OFF).
fn spin_budget(setup: &EngineSetup, flags: &mut Vec<String>) -> Duration {
    let wanted = Duration::from_secs_f64(setup.group.uring_wait_spin);
    if wanted.is_zero() {
        return wanted;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ranks = ranks_on_host();
    let threads = setup.phase_threads * ranks;
    if threads > cpus {
        let of_ranks = if ranks > 1 { format!(" ({ranks} ranks here)") } else { String::new() };
        flags.push(format!("WAIT_SPIN_OFF({threads} threads{of_ranks} on {cpus} CPUs)"));
        return Duration::ZERO;
    }
    flags.push(format!("WAIT_SPIN({}us)", wanted.as_micros()));
    wanted
}

/// The processes of this MPI job on this host, as the launcher says: MPICH's hydra
/// (MPI_LOCALNRANKS), Open MPI (OMPI_COMM_WORLD_LOCAL_SIZE), an srun step
/// (SLURM_STEP_TASKS_PER_NODE, "2(x3)": this node's count comes first for a uniform step); 1
/// outside MPI or where none says.
fn ranks_on_host() -> usize {
    let leading = |v: String| v.trim().split(|c: char| !c.is_ascii_digit()).next().and_then(|n| n.parse::<usize>().ok());
    ["MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_STEP_TASKS_PER_NODE"]
        .iter()
        .find_map(|k| std::env::var(k).ok().and_then(leading))
        .unwrap_or(1)
        .max(1)
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
            if self.spin.budget.is_zero() {
                self.sleep_for(min)?;
            } else if self.spin.worth_it() {
                self.commit()?;
                self.spin.last_long = !self.spin_for(min);
                if self.spin.last_long {
                    self.sleep_for(min)?;
                }
            } else {
                // asleep at once after a long wait: a sleep that ends within the budget says the
                // waits are short again
                let slept_from = Instant::now();
                self.sleep_for(min)?;
                self.spin.last_long = slept_from.elapsed() > self.spin.budget;
            }
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

    fn thread_cpu() -> Duration {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: fills the timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    /// Waits that outlast the spin (1 ms timeouts against a 200 us budget) make the following
    /// waits sleep at once, but for every 16th: 32 such waits spin 3 times, not 32 (6.4 ms of
    /// CPU). A wait that ends within the budget (a no-op) turns the spin back on.
    #[test]
    fn long_waits_stop_the_spin_and_a_short_one_restores_it() {
        let group = crate::group::GroupSpec { engine: crate::group::EngineKind::IoUring, uring_wait_spin: 200e-6, ..Default::default() };
        let setup = EngineSetup { fd: -1, remote: None, buffers: &[], qd: 1, group: &group, block_device: false, worker: 0, phase_threads: 1 };
        let Ok(mut ring) = Uring::new(&setup) else {
            eprintln!("io_uring unavailable here");
            return;
        };
        assert!(ring.flags.iter().any(|f| f == "WAIT_SPIN(200us)"), "{:?}", ring.flags);
        let timeout = types::Timespec::new().nsec(1_000_000);
        let mut out = Vec::new();
        let cpu_before = thread_cpu();
        for i in 0..32u64 {
            let e = opcode::Timeout::new(&timeout).build().user_data(i);
            // SAFETY: the timespec outlives the wait.
            unsafe { ring.ring.submission().push(&e) }.unwrap();
            ring.queued += 1;
            ring.reap(1, &mut out).unwrap();
            assert!(ring.spin.last_long, "wait {i} was not long");
        }
        let spent = thread_cpu() - cpu_before;
        assert_eq!(out.len(), 32);
        assert!(spent < Duration::from_micros(2500), "32 long waits cost {spent:?} of CPU");
        // a wait that ends at once (a no-op) says the waits are short again
        // SAFETY: a no-op has no buffer.
        unsafe { ring.ring.submission().push(&opcode::Nop::new().build().user_data(99)) }.unwrap();
        ring.queued += 1;
        ring.reap(1, &mut out).unwrap();
        assert!(!ring.spin.last_long);
    }

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
