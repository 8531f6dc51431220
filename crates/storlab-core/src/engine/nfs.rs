//! nfs: a file on an NFS export read and written through libnfs's asynchronous calls, one
//! connection per worker (as fio's nfs engine: one per job), up to `qd` calls in flight.
//!
//! A request becomes one READ or WRITE call (libnfs splits one larger than the server's maximum
//! transfer); the reply ends it inside `service`, which runs the call's callback on this thread.
//! A read's data arrives in libnfs's buffer and is copied into the slot's (as fio's nfs engine
//! copies it). Each slot's tag is made once, so a request allocates nothing.

use std::ffi::{c_int, c_void};
use std::time::Instant;

use super::inbox::{Inbox, Pump};
use super::{Caps, Completion, Engine, Queued, Request};
use crate::error::{Error, Result};
use crate::remote::libnfs::{File, Missing};
use crate::workload::Dir;

struct Tag {
    done: *mut Vec<Completion>,
    slot: u32,
    len: u32,
    /// Where a read's data goes.
    buf: *mut u8,
}

pub struct Nfs {
    file: File,
    /// Completions delivered by callbacks, not yet reaped.
    inbox: Inbox,
    tags: Box<[Tag]>,
    url: String,
}

unsafe extern "C" fn on_read(err: c_int, _nfs: *mut c_void, data: *mut c_void, private: *mut c_void) {
    // SAFETY: private is the slot's Tag (alive for the engine's life, which outlives its calls);
    // on success data holds err bytes and the slot's buffer has room for len >= err.
    unsafe {
        let tag = &*(private as *const Tag);
        let result = if err < 0 { err as i64 } else { (err as u32).min(tag.len) as i64 };
        if result > 0 {
            std::ptr::copy_nonoverlapping(data as *const u8, tag.buf, result as usize);
        }
        (*tag.done).push(Completion { slot: tag.slot, result });
    }
}

unsafe extern "C" fn on_write(err: c_int, _nfs: *mut c_void, _data: *mut c_void, private: *mut c_void) {
    // SAFETY: as on_read.
    unsafe {
        let tag = &*(private as *const Tag);
        (*tag.done).push(Completion { slot: tag.slot, result: err as i64 });
    }
}

impl Nfs {
    /// Mount the export and open the worker's file (the plan made it, when it had to).
    pub fn new(url: &str, writes: bool, qd: u32) -> Result<Nfs> {
        let file = File::open(url, writes, Missing::Refuse).map_err(|e| Error::target(url, e))?;
        let mut inbox = Inbox::new(qd);
        let done = inbox.target();
        let tags = (0..qd).map(|slot| Tag { done, slot, len: 0, buf: std::ptr::null_mut() }).collect();
        Ok(Nfs { file, inbox, tags, url: url.to_string() })
    }

    fn failed(&self, what: &str) -> Error {
        Error::io(format!("{}: {what} failed: {}", self.url, self.file.error()))
    }
}

impl Pump for File {
    fn in_flight(&self) -> bool {
        self.queued() > 0
    }

    fn pump(&mut self, timeout_ms: i32) -> std::result::Result<(), String> {
        self.service(timeout_ms).map(|_| ())
    }
}

impl Engine for Nfs {
    fn caps(&self) -> Caps {
        Caps { asynchronous: true }
    }

    unsafe fn queue(&mut self, r: &Request) -> Result<Queued> {
        let tag = &mut self.tags[r.slot as usize];
        tag.len = r.len;
        tag.buf = r.buf;
        let private = (tag as *mut Tag).cast();
        // SAFETY: the slot's buffer and tag stay put until this slot's completion is reaped.
        let started = unsafe {
            match r.dir {
                Dir::Read => self.file.pread_async(r.offset, r.len as u64, on_read, private),
                Dir::Write => self.file.pwrite_async(r.buf, r.len as u64, r.offset, on_write, private),
                Dir::Trim => return Err(Error::spec(format!("rw: {} is an NFS file; NFS has no trim (use a pattern without trims)", self.url))),
            }
        };
        Ok(match started {
            Ok(()) => Queued::Pending,
            Err(neg_errno) => Queued::Completed(neg_errno),
        })
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<()> {
        self.inbox.reap(min, out, &mut self.file).map_err(|_| self.failed("waiting for replies"))
    }

    fn reap_until(&mut self, deadline: Instant, out: &mut Vec<Completion>) -> Result<()> {
        self.inbox.reap_until(deadline, out, &mut self.file).map_err(|_| self.failed("waiting for replies"))
    }

    fn sync(&mut self) -> Result<()> {
        self.file.fsync().map_err(|_| self.failed("fsync (COMMIT)"))
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<()> {
        let len = buf.len();
        self.file.pread(buf, offset).map_err(|m| Error::io(format!("{}: read of {len} bytes at offset {offset} failed: {m}", self.url)))
    }
}
