//! psync: pread/pwrite (and trims: BLKDISCARD or a punched hole), one request at a time,
//! completed inside `queue`.

use std::os::fd::RawFd;

use super::{neg_errno, trim, Caps, Engine, Queued, Request};
use crate::workload::Dir;
use crate::error::Result;

pub struct Psync {
    fd: RawFd,
    block_device: bool,
}

impl Psync {
    pub fn new(fd: RawFd, block_device: bool) -> Psync {
        Psync { fd, block_device }
    }
}

impl Engine for Psync {
    fn caps(&self) -> Caps {
        Caps { asynchronous: false }
    }

    #[inline]
    unsafe fn queue(&mut self, r: &Request) -> Result<Queued> {
        // SAFETY: buf points to a live slot buffer of at least len bytes owned by the worker.
        let n = unsafe {
            match r.dir {
                Dir::Read => libc::pread(self.fd, r.buf as *mut libc::c_void, r.len as usize, r.offset as libc::off_t),
                Dir::Write => libc::pwrite(self.fd, r.buf as *const libc::c_void, r.len as usize, r.offset as libc::off_t),
                Dir::Trim => return Ok(Queued::Completed(trim(self.fd, self.block_device, r.offset, r.len))),
            }
        };
        let result = if n < 0 { neg_errno() } else { n as i64 };
        Ok(Queued::Completed(result))
    }
}
