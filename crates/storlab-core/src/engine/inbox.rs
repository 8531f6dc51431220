//! The completions a client library's callbacks deliver (nbd, nfs), and the wait for them that
//! both engines share: a library runs a request's callback on the worker's own thread while it is
//! pumped (`nbd_poll`, `nfs_service`); the callback appends to the inbox, `reap` moves the inbox
//! to the worker's list.

use std::time::Instant;

use super::Completion;

/// A connection whose replies arrive while it is pumped.
pub trait Pump {
    /// Requests sent and not yet answered.
    fn in_flight(&self) -> bool;
    /// Wait for replies (up to `timeout_ms`; -1: no limit), running their callbacks.
    fn pump(&mut self, timeout_ms: i32) -> Result<(), String>;
}

pub struct Inbox {
    /// Boxed: every request's tag holds a pointer to the Vec itself, which must not move when the
    /// engine does.
    #[allow(clippy::box_collection)]
    done: Box<Vec<Completion>>,
}

impl Inbox {
    /// Room for `qd` completions (no allocation when a callback appends).
    pub fn new(qd: u32) -> Inbox {
        Inbox { done: Box::new(Vec::with_capacity(qd as usize)) }
    }

    /// Where a callback appends its completion.
    pub fn target(&mut self) -> *mut Vec<Completion> {
        &mut *self.done
    }

    /// Move the completions delivered so far to `out`; how many.
    fn drain(&mut self, out: &mut Vec<Completion>) -> usize {
        let n = self.done.len();
        out.append(&mut self.done);
        n
    }

    /// At least `min` completions (or all there are to wait for) into `out`.
    pub fn reap(&mut self, min: usize, out: &mut Vec<Completion>, conn: &mut impl Pump) -> Result<(), String> {
        let mut got = self.drain(out);
        while got < min && conn.in_flight() {
            conn.pump(-1)?;
            got += self.drain(out);
        }
        Ok(())
    }

    /// The completions that arrive before `deadline` (none is fine) into `out`.
    pub fn reap_until(&mut self, deadline: Instant, out: &mut Vec<Completion>, conn: &mut impl Pump) -> Result<(), String> {
        if self.drain(out) > 0 || !conn.in_flight() {
            return Ok(());
        }
        let ms = deadline.saturating_duration_since(Instant::now()).as_millis().min(i32::MAX as u128) as i32;
        conn.pump(ms)?;
        self.drain(out);
        Ok(())
    }
}
