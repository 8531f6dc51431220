//! null: no kernel I/O. Completes at once, or after a fixed synthetic delay per request (then it
//! behaves like a device with that latency and unlimited parallelism, up to the queue depth).
//! Measures storlab's own overhead and lets orchestration tests run anywhere.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{Caps, Completion, Engine, Queued, Request};
use crate::error::Result;

pub struct Null {
    delay: Duration,
    /// In-flight requests in submission order; with a constant delay they finish in that order.
    pending: VecDeque<(Instant, Completion)>,
}

impl Null {
    pub fn new(delay_s: f64, qd: u32) -> Null {
        Null { delay: Duration::from_secs_f64(delay_s), pending: VecDeque::with_capacity(qd as usize) }
    }
}

use crate::pace::wait_until;

impl Engine for Null {
    fn caps(&self) -> Caps {
        Caps { asynchronous: !self.delay.is_zero() }
    }

    #[inline]
    unsafe fn queue(&mut self, r: &Request) -> Result<Queued> {
        if self.delay.is_zero() {
            return Ok(Queued::Completed(r.len as i64));
        }
        self.pending.push_back((Instant::now() + self.delay, Completion { slot: r.slot, result: r.len as i64 }));
        Ok(Queued::Pending)
    }

    fn reap_until(&mut self, deadline: Instant, out: &mut Vec<Completion>) -> Result<()> {
        if let Some(&(due, _)) = self.pending.front() {
            wait_until(due.min(deadline));
        }
        self.reap(0, out)
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<()> {
        let mut got = 0;
        while let Some(&(due, c)) = self.pending.front() {
            if got >= min && due > Instant::now() {
                break;
            }
            wait_until(due);
            self.pending.pop_front();
            out.push(c);
            got += 1;
        }
        Ok(())
    }
}
