//! The I/O backend trait (after fio's `ioengine_ops`) and its implementations: psync, io_uring and
//! null on local files and devices, nbd on a network block device export, nfs on a file of an NFS
//! export, s3 on the objects under an S3 prefix.
//!
//! A backend only talks to the kernel: the worker (`worker.rs`) stamps times, counts bytes and
//! keeps statistics. A blocking backend (psync) completes inside `queue`; an asynchronous one
//! (io_uring, null with a delay) returns `Queued::Pending` and hands completions back from `reap`.

mod inbox;
pub mod nbd;
pub mod nfs;
pub mod null;
pub mod psync;
pub mod s3;
pub mod uring;

use std::os::fd::RawFd;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::spec::{EngineKind, GroupSpec};
use crate::workload::Dir;

/// One request. `slot` identifies the request slot (and its buffer) in the worker. A trim has no
/// data: its buffer is not touched.
#[derive(Debug, Clone, Copy)]
pub struct Request {
    pub slot: u32,
    pub dir: Dir,
    pub offset: u64,
    pub len: u32,
    pub buf: *mut u8,
}

/// Outcome of `queue`: completed at once with a result (bytes or -errno), or in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queued {
    Completed(i64),
    Pending,
}

/// A finished request: its slot and result (bytes transferred, or -errno).
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub slot: u32,
    pub result: i64,
}

/// What the worker needs to know about a backend.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// `queue` may return Pending; `commit` and `reap` must be called. Submission is then a step of
    /// its own, and the worker records slat and clat apart.
    pub asynchronous: bool,
}

/// Required of every backend.
pub trait Engine {
    fn caps(&self) -> Caps;
    /// Required. Start one request. Blocking backends do the I/O here.
    ///
    /// # Safety
    /// `req.buf` must point to `req.len` bytes that stay valid, and are neither read nor written
    /// by anyone else, until the request's completion has been returned (by `queue` itself for a
    /// blocking backend, by `reap` otherwise): the kernel reads or fills them in the meantime.
    unsafe fn queue(&mut self, req: &Request) -> Result<Queued>;
    /// Asynchronous backends: submit everything queued so far. Blocking ones: nothing.
    fn commit(&mut self) -> Result<()> {
        Ok(())
    }
    /// Asynchronous backends: wait for at least `min` completions and append all available ones
    /// to `out` (which has capacity for the queue depth; no allocation). Blocking ones: nothing.
    fn reap(&mut self, _min: usize, _out: &mut Vec<Completion>) -> Result<()> {
        Ok(())
    }
    /// Asynchronous backends: append the completions that arrive before `deadline` (none is
    /// fine), returning at the first ones or at the deadline. Used by a paced worker waiting for
    /// its next issue time with requests in flight. Blocking ones never have any in flight.
    fn reap_until(&mut self, _deadline: Instant, _out: &mut Vec<Completion>) -> Result<()> {
        Ok(())
    }
    /// Remote targets: make the written data stable, as fsync does for a file (NBD_CMD_FLUSH).
    /// A local target is synced by the worker through its descriptor and never calls this.
    fn sync(&mut self) -> Result<()> {
        Err(Error::engine("this engine has no sync of its own: its target is synced through its descriptor"))
    }
    /// Remote targets: read `buf.len()` bytes at `offset` and wait for them (the read-back after a
    /// verified write). A local target is read through its descriptor.
    fn read_at(&mut self, _buf: &mut [u8], _offset: u64) -> Result<()> {
        Err(Error::engine("this engine has no read of its own: its target is read through its descriptor"))
    }
    /// Set-up flags actually in use (io_uring), recorded in every result.
    fn setup_flags(&self) -> Vec<String> {
        Vec::new()
    }
    /// Why the request of `slot` that completed with an error failed, in the backend's words
    /// (s3: what the server answered), where it knows more than the errno says.
    fn failure_message(&self, _slot: u32) -> Option<String> {
        None
    }
    /// Events of the backend's own worth counting, summed over the workers into the result's
    /// engine section (s3: requests the server throttled and that were retried).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// The time to first byte, in ns, of the request of `slot` that just completed, where the
    /// backend sees it apart from the whole request (s3: from `queue` to the first byte of a
    /// GET's body); the worker records it with the completion, in the measured window only.
    fn first_byte_ns(&self, _slot: u32) -> Option<u64> {
        None
    }
}

/// What a backend gets at set-up: the worker's open target and its slot buffers.
pub struct EngineSetup<'a> {
    /// The worker's descriptor on a local target (-1 for a remote one).
    pub fd: RawFd,
    /// A remote target's URL (the engine connects to it itself), None for a local one.
    pub remote: Option<&'a str>,
    pub buffers: &'a [(*mut u8, usize)],
    pub qd: u32,
    pub group: &'a GroupSpec,
    /// The target is a block device: trims are BLKDISCARD, not punched holes.
    pub block_device: bool,
    /// The worker's number in the phase (an s3 worker's endpoint is dealt by it).
    pub worker: usize,
    /// Worker threads of this phase in this process: where they outnumber the CPUs it may use, an
    /// engine does not spin (a spinning thread would only take a CPU from another).
    pub phase_threads: usize,
}

const BLKDISCARD: libc::c_ulong = 0x1277;

/// Trim [offset, offset + len) synchronously: BLKDISCARD on a block device, a punched hole
/// (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) in a regular file. Returns len, or -errno.
pub fn trim(fd: RawFd, block_device: bool, offset: u64, len: u32) -> i64 {
    let rc = if block_device {
        let range: [u64; 2] = [offset, len as u64];
        // SAFETY: BLKDISCARD reads one [start, length] pair of u64.
        unsafe { libc::ioctl(fd, BLKDISCARD, range.as_ptr()) }
    } else {
        // SAFETY: plain syscall on an open descriptor.
        unsafe {
            libc::fallocate(fd, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, offset as libc::off_t, len as libc::off_t)
        }
    };
    if rc < 0 { neg_errno() } else { len as i64 }
}

/// The failed system call's error as a result: -errno, as io_uring reports a failed request.
#[cold]
pub fn neg_errno() -> i64 {
    -(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) as i64)
}

/// Create the backend a group asks for. Called on the worker thread (io_uring rings are per thread).
pub fn create(setup: &EngineSetup) -> Result<Box<dyn Engine>> {
    Ok(match setup.group.engine {
        EngineKind::Psync => Box::new(psync::Psync::new(setup.fd, setup.block_device)),
        EngineKind::Null => Box::new(null::Null::new(setup.group.null_delay, setup.qd)),
        EngineKind::IoUring => Box::new(uring::Uring::new(setup)?),
        EngineKind::Nbd => {
            let uri = setup.remote.ok_or_else(|| Error::spec("engine: nbd reads nbd:// targets only"))?;
            Box::new(nbd::Nbd::new(uri, setup.qd)?)
        }
        EngineKind::Nfs => {
            let url = setup.remote.ok_or_else(|| Error::spec("engine: nfs reads nfs:// targets only"))?;
            Box::new(nfs::Nfs::new(url, setup.group.directions()[1], setup.qd)?)
        }
        EngineKind::S3 => {
            let url = setup.remote.ok_or_else(|| Error::spec("engine: s3 reads s3:// targets only"))?;
            Box::new(s3::S3::new(url, setup.group, setup.worker, setup.qd)?)
        }
    })
}
