//! Read-behind-write coordination between the writer and the reader of one target: two record
//! counters the threads publish with release stores and read with acquire loads, so a reader that
//! sees "record k written" also sees the write completed before it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::Serialize;

use crate::spec::RbwMode;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Writer,
    Reader,
}

#[derive(Default)]
pub struct Channel {
    /// Records whose write has completed.
    pub written: AtomicU64,
    /// Records whose read has completed (the reader's next record).
    pub read: AtomicU64,
    pub writer_done: AtomicBool,
    /// Records the reader skipped to stay within the lag.
    pub skipped: AtomicU64,
}

/// What a waiting side decided.
pub enum Gate {
    /// Go ahead with this record index.
    Go(u64),
    /// Nothing more to do.
    Finish,
}

/// Spin briefly, then yield, then nap: the other side is usually a few microseconds away.
fn pause(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else if *spins < 256 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}

impl Channel {
    /// Writer, before record k: in lockstep, wait until the reader has read records 0..k.
    pub fn writer_gate(&self, mode: RbwMode, k: u64, stop: &dyn Fn() -> bool) -> Gate {
        let mut spins = 0;
        while mode == RbwMode::Lockstep && self.read.load(Ordering::Acquire) < k {
            if stop() {
                return Gate::Finish;
            }
            pause(&mut spins);
        }
        Gate::Go(k)
    }

    /// Reader, wanting record k: wait until it is written; in lag mode skip ahead to stay at most
    /// `lag` records behind. Finish once the writer is done and everything written was read.
    pub fn reader_gate(&self, mode: RbwMode, lag: u64, k: u64, stop: &dyn Fn() -> bool) -> Gate {
        let mut spins = 0;
        loop {
            let written = self.written.load(Ordering::Acquire);
            if written > k {
                if mode == RbwMode::Lag && written - k > lag {
                    let to = written - lag;
                    self.skipped.fetch_add(to - k, Ordering::Relaxed);
                    return Gate::Go(to);
                }
                return Gate::Go(k);
            }
            if self.writer_done.load(Ordering::Acquire) && self.written.load(Ordering::Acquire) <= k {
                return Gate::Finish;
            }
            if stop() {
                return Gate::Finish;
            }
            pause(&mut spins);
        }
    }
}

/// Marks the writer done however it leaves its loop (also on errors), so the reader never waits
/// for records that will not come.
pub struct WriterDone<'a>(pub &'a Channel);

impl Drop for WriterDone<'_> {
    fn drop(&mut self) {
        self.0.writer_done.store(true, Ordering::Release);
    }
}

/// Reported with the phase.
#[derive(Debug, Clone, Serialize)]
pub struct RbwResult {
    pub mode: RbwMode,
    pub lag_records: u64,
    pub records_written: u64,
    pub records_read: u64,
    pub records_skipped: u64,
    /// Read plus write bytes over the phase window.
    pub duplex_bw_bytes: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn lockstep_alternates_and_lag_skips() {
        let ch = Arc::new(Channel::default());
        let never = || false;
        // lockstep: writer may write record 0 at once, record 1 only after the reader read 0
        assert!(matches!(ch.writer_gate(RbwMode::Lockstep, 0, &never), Gate::Go(0)));
        ch.written.store(1, Ordering::Release);
        let c2 = ch.clone();
        let t = std::thread::spawn(move || {
            let start = Instant::now();
            let g = c2.writer_gate(RbwMode::Lockstep, 1, &|| false);
            (matches!(g, Gate::Go(1)), start.elapsed())
        });
        std::thread::sleep(std::time::Duration::from_millis(30));
        ch.read.store(1, Ordering::Release);
        let (went, waited) = t.join().unwrap();
        assert!(went && waited.as_millis() >= 25, "writer must wait for the reader");
        // lag 2: with 10 written and the reader at 3, it jumps to 8 and counts 5 skipped
        ch.written.store(10, Ordering::Release);
        assert!(matches!(ch.reader_gate(RbwMode::Lag, 2, 3, &never), Gate::Go(8)));
        assert_eq!(ch.skipped.load(Ordering::Relaxed), 5);
        // writer done and all read: the reader finishes
        ch.writer_done.store(true, Ordering::Release);
        assert!(matches!(ch.reader_gate(RbwMode::Lag, 2, 10, &never), Gate::Finish));
    }
}
