//! fio's I/O logs: writing version 3 of the requests a worker issues (`write_iolog`) and reading
//! version 2 or 3 for replay (`read_iolog`), in the format of fio's iolog.c.
//!
//! Version 3: the line `fio version 3 iolog`, then `TIMESTAMP FILE add|open|close` and
//! `TIMESTAMP FILE read|write|trim|sync|datasync OFFSET LENGTH`, TIMESTAMP in microseconds since the
//! log was started (fio writes utime_since_now of its log start; its replay compares the
//! differences with microsecond clocks). Version 2 has no timestamps and may say
//! `FILE wait MICROSECONDS 0` instead. A replayed log drives one worker's requests: their
//! directions, offsets and lengths, and (unless replay_no_stall) their timing.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::workload::Dir;

pub const HEADER_V2: &str = "fio version 2 iolog";
pub const HEADER_V3: &str = "fio version 3 iolog";
/// The latest time a replayed request may have, in microseconds after the log's start.
const MAX_TIME_US: u64 = crate::spec::MAX_DURATION_S as u64 * 1_000_000;

/// What one replayed line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Io { dir: Dir, offset: u64, len: u32 },
    /// sync or datasync: an fsync once the requests before it are done.
    Sync,
}

/// One replayed request and when to issue it (microseconds after the log's first entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub at_us: u64,
    pub action: Action,
}

/// A parsed log, ready to drive workers.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    pub version: u8,
    /// File names in the order first named.
    pub files: Vec<String>,
    pub entries: Vec<Entry>,
    /// The longest request (the slot buffers' size), the end of the furthest one, and all bytes.
    pub max_len: u32,
    pub max_end: u64,
    pub bytes: u64,
}

impl Replay {
    pub fn load(path: &str) -> Result<Replay> {
        let f = File::open(path).map_err(|e| Error::spec(format!("read_iolog: cannot open {path}: {e}")))?;
        Replay::parse(BufReader::new(f), path)
    }

    pub fn parse(input: impl BufRead, path: &str) -> Result<Replay> {
        let mut lines = input.lines();
        let bad = |n: usize, msg: String| Error::spec(format!("read_iolog: {path} line {n}: {msg}"));
        let header = match lines.next() {
            Some(Ok(h)) => h,
            Some(Err(e)) => return Err(Error::spec(format!("read_iolog: cannot read {path}: {e}"))),
            None => return Err(Error::spec(format!("read_iolog: {path} is empty; expected the line '{HEADER_V3}' (or version 2)"))),
        };
        let version = if header.starts_with(HEADER_V3) {
            3
        } else if header.starts_with(HEADER_V2) {
            2
        } else {
            return Err(bad(1, format!("not an fio iolog: expected '{HEADER_V3}' or '{HEADER_V2}' (version 1 and blktrace files are not read)")));
        };
        let mut r = Replay { version, ..Default::default() };
        let mut first_us: Option<u64> = None;
        let mut clock_us = 0u64; // version 2: the sum of the waits so far
        for (i, line) in lines.enumerate() {
            let n = i + 2;
            let line = line.map_err(|e| Error::spec(format!("read_iolog: cannot read {path}: {e}")))?;
            let mut words = line.split_whitespace();
            let Some(first) = words.next() else { continue };
            let at = if version == 3 {
                let t: u64 = first.parse().map_err(|_| bad(n, format!("{first:?} is not a timestamp (microseconds)")))?;
                let base = *first_us.get_or_insert(t);
                Some(t.saturating_sub(base))
            } else {
                None
            };
            // Times become Instants in the worker: keep them where adding them cannot overflow.
            if at.unwrap_or(clock_us) > MAX_TIME_US {
                return Err(bad(n, format!("the time {} us is beyond 10 years after the log's start", at.unwrap_or(clock_us))));
            }
            let file = if version == 3 { words.next().ok_or_else(|| bad(n, "expected 'TIMESTAMP FILE ACTION [OFFSET LENGTH]'".into()))? } else { first };
            let action = words.next().ok_or_else(|| bad(n, "expected a file action (add, open, close) or an I/O action".into()))?;
            let numbers: Vec<&str> = words.collect();
            let number = |k: usize| -> Result<u64> {
                let w = numbers.get(k).ok_or_else(|| bad(n, format!("{action} needs OFFSET and LENGTH")))?;
                w.parse::<u64>().map_err(|_| bad(n, format!("{w:?} is not a whole number")))
            };
            if !r.files.iter().any(|f| f == file) {
                r.files.push(file.to_string());
            }
            let at_us = at.unwrap_or(clock_us);
            let dir = match action {
                "add" | "open" | "close" => continue,
                "wait" if version == 2 => {
                    clock_us = clock_us.saturating_add(number(0)?).min(MAX_TIME_US + 1);
                    continue;
                }
                "wait" => continue, // fio ignores wait in version 3 (the timestamps say it)
                "sync" | "datasync" => {
                    r.entries.push(Entry { at_us, action: Action::Sync });
                    continue;
                }
                "read" => Dir::Read,
                "write" => Dir::Write,
                "trim" => Dir::Trim,
                other => return Err(bad(n, format!("unknown action {other:?}; allowed: add, open, close, read, write, trim, sync, datasync, wait (version 2)"))),
            };
            let (offset, len) = (number(0)?, number(1)?);
            if len == 0 || len > 1 << 30 {
                return Err(bad(n, format!("length {len} is out of range; allowed: 1 byte to 1 GiB")));
            }
            let end = offset.checked_add(len).filter(|&e| e <= crate::spec::MAX_BYTES).ok_or_else(|| bad(n, format!("offset {offset} + length {len} is beyond 1 EiB")))?;
            r.max_len = r.max_len.max(len as u32);
            r.max_end = r.max_end.max(end);
            r.bytes += len;
            r.entries.push(Entry { at_us, action: Action::Io { dir, offset, len: len as u32 } });
        }
        if !r.entries.iter().any(|e| matches!(e.action, Action::Io { .. })) {
            return Err(Error::spec(format!("read_iolog: {path} has no read, write or trim to replay")));
        }
        Ok(r)
    }

    /// The directions the log issues, as [read, write, trim].
    pub fn directions(&self) -> [bool; 3] {
        let mut seen = [false; 3];
        for e in &self.entries {
            if let Action::Io { dir, .. } = e.action {
                seen[dir.index()] = true;
            }
        }
        seen
    }

    /// Whether the log asks for an fsync (a sync or datasync entry).
    pub fn syncs(&self) -> bool {
        self.entries.iter().any(|e| e.action == Action::Sync)
    }
}

/// The file one worker writes its log to: PATH itself, or PATH.N when several workers log to PATH
/// (N the worker's number in the phase, shifted by rank x threads under MPI), one file per fio job.
pub fn worker_log_path(path: &str, worker: usize, sharing: usize) -> String {
    if sharing > 1 { format!("{path}.{worker}") } else { path.to_string() }
}

/// Writes one worker's version 3 log. Lines go through a 64 KiB buffer: a request costs one
/// formatted line in memory, a write(2) every few hundred requests.
pub struct Writer {
    out: BufWriter<File>,
    start: Instant,
    file: String,
    path: String,
}

impl Writer {
    /// Create (truncate) the log and write its header and the target's add and open lines.
    pub fn create(path: &str, file: &str, start: Instant) -> Result<Writer> {
        let f = File::create(path).map_err(|e| Error::spec(format!("write_iolog: cannot create {path}: {e}")))?;
        let mut w = Writer { out: BufWriter::with_capacity(1 << 16, f), start, file: file.to_string(), path: path.to_string() };
        writeln!(w.out, "{HEADER_V3}").map_err(|e| w.failed(e))?;
        w.line(start, format_args!("add"))?;
        w.line(start, format_args!("open"))?;
        Ok(w)
    }

    /// Count the times of the requests from `start` (the worker's start, once it is released):
    /// the file's add and open lines were stamped at creation, which is never later.
    pub fn set_start(&mut self, start: Instant) {
        self.start = start;
    }

    fn failed(&self, e: std::io::Error) -> Error {
        Error::io(format!("write_iolog: writing {} failed: {e}", self.path))
    }

    /// One line: `TIMESTAMP FILE ACTION...`, the time of `t` counted from the start.
    #[inline]
    fn line(&mut self, t: Instant, action: std::fmt::Arguments) -> Result<()> {
        let us = t.saturating_duration_since(self.start).as_micros() as u64;
        writeln!(self.out, "{us} {} {action}", self.file).map_err(|e| self.failed(e))
    }

    /// A request issued at `t`.
    #[inline]
    pub fn io(&mut self, t: Instant, dir: Dir, offset: u64, len: u32) -> Result<()> {
        self.line(t, format_args!("{} {offset} {len}", dir.name()))
    }

    /// An fsync issued at `t` (fio logs it with offset and length 0).
    pub fn sync(&mut self, t: Instant) -> Result<()> {
        self.line(t, format_args!("sync 0 0"))
    }

    /// The close line, and everything flushed to the file.
    pub fn finish(mut self, t: Instant) -> Result<()> {
        self.line(t, format_args!("close"))?;
        self.out.flush().map_err(|e| self.failed(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_3_lines_parse_with_times_from_the_first_entry() {
        let text = "fio version 3 iolog\n100 /f add\n100 /f open\n150 /f write 4096 4096\n\
                    400 /f read 0 8192\n450 /f trim 8192 4096\n460 /f sync 0 0\n500 /f close\n";
        let r = Replay::parse(text.as_bytes(), "log").unwrap();
        assert_eq!((r.version, r.files.clone(), r.max_len, r.max_end, r.bytes), (3, vec!["/f".to_string()], 8192, 12288, 16384));
        assert_eq!(r.entries[0], Entry { at_us: 50, action: Action::Io { dir: Dir::Write, offset: 4096, len: 4096 } });
        assert_eq!(r.entries[1].at_us, 300);
        assert_eq!(r.entries[3], Entry { at_us: 360, action: Action::Sync });
        assert_eq!(r.directions(), [true, true, true]);
    }

    #[test]
    fn version_2_waits_add_up_to_the_issue_times() {
        let text = "fio version 2 iolog\n/f add\n/f open\n/f read 0 4096\n/f wait 1000 0\n/f read 4096 4096\n/f close\n";
        let r = Replay::parse(text.as_bytes(), "log").unwrap();
        assert_eq!(r.entries.iter().map(|e| e.at_us).collect::<Vec<_>>(), vec![0, 1000]);
    }

    #[test]
    fn bad_logs_are_one_line_naming_file_and_line() {
        for (text, want) in [("fio version 1 iolog\n", "line 1: not an fio iolog"),
                             ("fio version 3 iolog\n10 /f frobnicate 0 1\n", "line 2: unknown action"),
                             ("fio version 3 iolog\n10 /f read 0\n", "line 2: read needs OFFSET and LENGTH"),
                             ("fio version 3 iolog\nx /f read 0 1\n", "line 2: \"x\" is not a timestamp"),
                             ("fio version 3 iolog\n10 /f add\n", "has no read, write or trim"),
                             ("fio version 3 iolog\n0 /f add\n18446744073709551615 /f read 0 1\n", "line 3: the time"),
                             ("fio version 2 iolog\n/f wait 18446744073709551615 0\n/f wait 5 0\n/f read 0 1\n", "line 3: the time")] {
            let e = Replay::parse(text.as_bytes(), "the.log").unwrap_err();
            assert!(e.message.contains(want) && e.message.contains("the.log") && !e.message.contains('\n'), "{}", e.message);
        }
    }

    #[test]
    fn a_written_log_reads_back_the_same_requests() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.log");
        let path = path.to_str().unwrap();
        let start = Instant::now();
        let mut w = Writer::create(path, "/dev/shm/target", start).unwrap();
        let ios = [(Dir::Write, 0u64, 4096u32), (Dir::Read, 8192, 512), (Dir::Trim, 1 << 40, 1 << 20)];
        for (k, &(d, o, l)) in ios.iter().enumerate() {
            w.io(start + std::time::Duration::from_micros(10 * k as u64 + 5), d, o, l).unwrap();
        }
        w.sync(start + std::time::Duration::from_micros(40)).unwrap();
        w.finish(start + std::time::Duration::from_micros(50)).unwrap();
        let text = std::fs::read_to_string(path).unwrap();
        assert!(text.starts_with("fio version 3 iolog\n0 /dev/shm/target add\n0 /dev/shm/target open\n5 /dev/shm/target write 0 4096\n"), "{text}");
        let r = Replay::load(path).unwrap();
        let back: Vec<(Dir, u64, u32)> = r.entries.iter().filter_map(|e| match e.action {
            Action::Io { dir, offset, len } => Some((dir, offset, len)),
            Action::Sync => None,
        }).collect();
        assert_eq!(back, ios.to_vec());
        assert_eq!(r.entries.iter().map(|e| e.at_us).collect::<Vec<_>>(), vec![5, 15, 25, 40]);
        assert_eq!(worker_log_path("x.log", 3, 2), "x.log.3");
        assert_eq!(worker_log_path("x.log", 0, 1), "x.log");
    }
}
