//! nbd: a network block device export read and written through libnbd's asynchronous commands,
//! one connection per worker (as fio's nbd engine: one per job), up to `qd` commands in flight.
//!
//! Each request becomes one NBD command (NBD_CMD_READ, _WRITE or _TRIM); the server's reply ends
//! it. Replies arrive inside `nbd_poll`, which calls the command's completion callback on this
//! thread: the callback appends (slot, result) to the engine's `done` list, from which `reap` hands
//! completions to the worker. A request's tag (slot and length) lives in a table made once, so a
//! request allocates nothing.

use std::ffi::{c_int, c_void};
use std::time::Instant;

use super::inbox::{Inbox, Pump};
use super::{Caps, Completion, Engine, Queued, Request};
use crate::error::{Error, Result};
use crate::remote::libnbd::{CompletionCallback, Connection};
use crate::workload::Dir;

/// What a completion callback needs: where to put the completion, and the request it ends.
struct Tag {
    done: *mut Vec<Completion>,
    slot: u32,
    len: u32,
}

pub struct Nbd {
    conn: Connection,
    /// Completions delivered by callbacks and not yet reaped.
    inbox: Inbox,
    /// One tag per slot; boxed so the callbacks' pointers stay put.
    tags: Box<[Tag]>,
    uri: String,
}

unsafe extern "C" fn on_complete(user_data: *mut c_void, error: *mut c_int) -> c_int {
    // SAFETY: user_data is the slot's Tag, alive as long as the engine (which outlives its
    // commands: dropping the connection first ends them); done has capacity for qd entries.
    unsafe {
        let tag = &*(user_data as *const Tag);
        let err = *error;
        let result = if err != 0 { -(err as i64) } else { tag.len as i64 };
        (*tag.done).push(Completion { slot: tag.slot, result });
    }
    1 // retire the command now: nobody asks for it by cookie
}

impl Nbd {
    /// Connect to the worker's export.
    pub fn new(uri: &str, qd: u32) -> Result<Nbd> {
        let conn = Connection::connect(uri).map_err(|m| Error::target(uri, format!("cannot connect: {m}")))?;
        let mut inbox = Inbox::new(qd);
        let done = inbox.target();
        let tags = (0..qd).map(|slot| Tag { done, slot, len: 0 }).collect();
        Ok(Nbd { conn, inbox, tags, uri: uri.to_string() })
    }

    fn callback(&mut self, slot: u32, len: u32) -> CompletionCallback {
        let tag = &mut self.tags[slot as usize];
        tag.len = len;
        CompletionCallback { callback: Some(on_complete), user_data: (tag as *mut Tag).cast(), free: None }
    }

    fn failed(&self, what: &str) -> Error {
        Error::io(format!("{}: {what} failed: {}", self.uri, self.conn.error()))
    }
}

impl Pump for Connection {
    fn in_flight(&self) -> bool {
        Connection::in_flight(self) > 0
    }

    fn pump(&mut self, timeout_ms: i32) -> std::result::Result<(), String> {
        self.poll(timeout_ms).map(|_| ())
    }
}

impl Engine for Nbd {
    fn caps(&self) -> Caps {
        Caps { asynchronous: true }
    }

    unsafe fn queue(&mut self, r: &Request) -> Result<Queued> {
        let done = self.callback(r.slot, r.len);
        // SAFETY: r.buf is the slot's buffer, untouched until this slot's completion is reaped;
        // the tag lives in self.tags for the engine's life.
        let started = unsafe {
            match r.dir {
                Dir::Read => self.conn.aio_pread(r.buf, r.len as usize, r.offset, done),
                Dir::Write => self.conn.aio_pwrite(r.buf, r.len as usize, r.offset, done),
                Dir::Trim => self.conn.aio_trim(r.len as u64, r.offset, done),
            }
        };
        // A command libnbd refused to send fails like a request the kernel refused.
        Ok(match started {
            Ok(()) => Queued::Pending,
            Err(neg_errno) => Queued::Completed(neg_errno),
        })
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<()> {
        self.inbox.reap(min, out, &mut self.conn).map_err(|_| self.failed("waiting for replies"))
    }

    fn reap_until(&mut self, deadline: Instant, out: &mut Vec<Completion>) -> Result<()> {
        self.inbox.reap_until(deadline, out, &mut self.conn).map_err(|_| self.failed("waiting for replies"))
    }

    fn sync(&mut self) -> Result<()> {
        self.conn.flush().map_err(|_| self.failed("flush"))
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.conn.pread(buf, offset).map_err(|_| self.failed(&format!("read of {} bytes at offset {offset}", buf.len())))
    }
}
