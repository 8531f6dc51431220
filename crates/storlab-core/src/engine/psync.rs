//! psync: pread/pwrite, one request at a time, completed inside `queue`.

use std::os::fd::RawFd;

use super::{Caps, Engine, Queued, Request};
use crate::error::Result;

pub struct Psync {
    fd: RawFd,
}

impl Psync {
    pub fn new(fd: RawFd) -> Psync {
        Psync { fd }
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
            if r.is_read {
                libc::pread(self.fd, r.buf as *mut libc::c_void, r.len as usize, r.offset as libc::off_t)
            } else {
                libc::pwrite(self.fd, r.buf as *const libc::c_void, r.len as usize, r.offset as libc::off_t)
            }
        };
        let result = if n < 0 { -(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) as i64) } else { n as i64 };
        Ok(Queued::Completed(result))
    }
}
