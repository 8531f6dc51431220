//! s3: the objects under an s3:// prefix read and written over HTTP/1.1, up to `qd` requests in
//! flight per worker.
//!
//! Each request slot has a helper thread of its own, blocked in its HTTP call while the worker
//! goes on issuing (ureq is a blocking client: one call holds one connection, so qd requests in
//! flight need qd callers; a thread per slot is what an async runtime would cost without the
//! runtime, and keeps the engine's model the one of every other backend: queue, commit, reap).
//! The helpers share the worker's client, whose pool keeps their connections alive. A finished
//! request comes back through a channel of qd places (no allocation there); the request itself
//! allocates in the signer and the HTTP client (its URL and headers), as any HTTP client does.
//!
//! Object k of the range holds bytes [k x object_size, (k + 1) x object_size) of the target: a
//! request at offset o goes to object o / object_size at o % object_size. A write PUTs a whole
//! object (a multipart upload above part_size), a trim DELETEs one, a read GETs a whole object or
//! a byte range of one. A PUT is durable once answered, so `sync` has nothing to do.
//!
//! Time to first byte of each GET (from `queue`, the issue, to the first byte of the response
//! body read by the helper) is kept per slot and handed to the worker with the completion
//! (`first_byte_ns`), which records it in the read direction's `ttfb` histogram when the
//! completion is measured (not in a ramp): `ttfb_ns` of the result, merged like the latencies.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use super::{Caps, Completion, Engine, Queued, Request};
use crate::error::{Error, Result};
use crate::remote::s3::Client;
use crate::remote::s3_config::{AwsEnvironment, ObjectSet};
use crate::spec::GroupSpec;
use crate::workload::Dir;

/// One request handed to a slot's helper. The buffer is the slot's: the worker neither reads nor
/// writes it until the completion is reaped (the Engine::queue contract).
struct Job {
    dir: Dir,
    offset: u64,
    len: u32,
    buf: SlotBuffer,
    /// When the worker issued it (the start of its time to first byte).
    issued: Instant,
}

struct SlotBuffer(*mut u8);
// SAFETY: the pointer is the slot's buffer, used by exactly one helper between queue and reap.
unsafe impl Send for SlotBuffer {}

/// How objects are cut and written: what every helper needs besides the client.
#[derive(Clone)]
struct Layout {
    set: ObjectSet,
    object_size: u64,
    part_size: u64,
}

/// A finished request: its slot, its bytes or the failure in words, and a GET's time to first
/// byte in ns.
type Done = (u32, std::result::Result<i64, String>, Option<u64>);

pub struct S3 {
    /// One sender per slot, to that slot's helper.
    jobs: Vec<SyncSender<Job>>,
    done: Receiver<Done>,
    in_flight: usize,
    helpers: Vec<JoinHandle<()>>,
    /// Set when the engine is dropped: a multipart upload in progress stops and is aborted.
    stop: Arc<AtomicBool>,
    client: Arc<Client>,
    layout: Layout,
    /// Per slot: why its last request failed, in words (the completion carries -EIO; the worker
    /// asks for this to say what the server answered).
    failures: Vec<Option<String>>,
    /// Per slot: the time to first byte of its last completed GET (None for other requests).
    first_byte: Vec<Option<u64>>,
}

impl S3 {
    /// Connect worker `worker`'s engine to the endpoint dealt to it and start its helpers.
    pub fn new(url: &str, g: &GroupSpec, worker: usize, qd: u32) -> Result<S3> {
        let set = ObjectSet::parse(url).map_err(|m| Error::target(url, m))?;
        let access = AwsEnvironment::of_process().access(g.endpoint.as_deref(), g.insecure, g.virtual_host).map_err(|m| Error::target(url, m))?;
        let endpoint = &access.endpoints[worker % access.endpoints.len()];
        let client = Arc::new(Client::new(&access, endpoint, &set, qd as usize).map_err(|m| Error::target(url, m))?);
        let layout = Layout { set, object_size: g.object_size.unwrap_or(g.bs), part_size: g.part_size };
        let stop = Arc::new(AtomicBool::new(false));
        let (done_tx, done) = sync_channel::<Done>(qd as usize);
        let mut jobs = Vec::with_capacity(qd as usize);
        let mut helpers = Vec::with_capacity(qd as usize);
        for slot in 0..qd {
            let (tx, rx) = sync_channel::<Job>(1);
            let (client, layout, stop, done_tx) = (client.clone(), layout.clone(), stop.clone(), done_tx.clone());
            let helper = std::thread::Builder::new()
                .name(format!("s3-w{worker}-{slot}"))
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        let (result, ttfb) = serve(&client, &layout, &job, &stop);
                        if done_tx.send((slot, result, ttfb)).is_err() {
                            return;
                        }
                    }
                })
                .map_err(|e| Error::engine(format!("s3: cannot start a helper thread: {e}")))?;
            jobs.push(tx);
            helpers.push(helper);
        }
        Ok(S3 { jobs, done, in_flight: 0, helpers, stop, client, layout, failures: vec![None; qd as usize], first_byte: vec![None; qd as usize] })
    }

    /// Hand over one finished request; a failed one completes with -EIO, its words kept for
    /// `failure_message`.
    fn deliver(&mut self, (slot, result, ttfb): Done, out: &mut Vec<Completion>) {
        self.in_flight -= 1;
        self.first_byte[slot as usize] = ttfb;
        let result = match result {
            Ok(bytes) => bytes,
            Err(message) => {
                self.failures[slot as usize] = Some(message);
                -(libc::EIO as i64)
            }
        };
        out.push(Completion { slot, result });
    }
}

/// Do one request on a helper thread: bytes moved, or what went wrong in one line; and for a
/// GET that succeeded, its time to first byte in ns.
fn serve(client: &Client, layout: &Layout, job: &Job, stop: &AtomicBool) -> (std::result::Result<i64, String>, Option<u64>) {
    let (object, within) = (job.offset / layout.object_size, job.offset % layout.object_size);
    let key = layout.set.key(object);
    let len = job.len as usize;
    // SAFETY: the slot's buffer holds len bytes and is this helper's until the completion is reaped.
    let buf = unsafe { std::slice::from_raw_parts_mut(job.buf.0, len) };
    let mut ttfb = None;
    let outcome = match job.dir {
        Dir::Read => client.get_into(&key, within, buf, within == 0 && job.len as u64 == layout.object_size).map(|first_byte| {
            ttfb = Some(first_byte.saturating_duration_since(job.issued).as_nanos() as u64);
        }),
        Dir::Write => client.put(&key, buf, layout.part_size, stop),
        Dir::Trim => client.delete(&key),
    };
    let result = outcome.map(|()| len as i64).map_err(|f| {
        let what = match job.dir {
            Dir::Read if len as u64 == layout.object_size => "GET".to_string(),
            Dir::Read => format!("GET of bytes {within}-{}", within + len as u64 - 1),
            Dir::Write => format!("PUT of {len} bytes"),
            Dir::Trim => "DELETE".to_string(),
        };
        client.explain(&format!("s3://{}/{key}: {what}", layout.set.bucket), &f)
    });
    (result, ttfb)
}

impl Engine for S3 {
    fn caps(&self) -> Caps {
        Caps { asynchronous: true }
    }

    unsafe fn queue(&mut self, r: &Request) -> Result<Queued> {
        let job = Job { dir: r.dir, offset: r.offset, len: r.len, buf: SlotBuffer(r.buf), issued: Instant::now() };
        self.jobs[r.slot as usize].send(job).map_err(|_| Error::engine("s3: a helper thread has stopped"))?;
        self.in_flight += 1;
        Ok(Queued::Pending)
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<()> {
        let mut got = 0;
        while got < min && self.in_flight > 0 {
            let done = self.done.recv().map_err(|_| Error::engine("s3: the helper threads have stopped"))?;
            self.deliver(done, out);
            got += 1;
        }
        while let Ok(done) = self.done.try_recv() {
            self.deliver(done, out);
        }
        Ok(())
    }

    fn reap_until(&mut self, deadline: Instant, out: &mut Vec<Completion>) -> Result<()> {
        if self.in_flight == 0 {
            return Ok(());
        }
        match self.done.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(done) => self.deliver(done, out),
            Err(RecvTimeoutError::Timeout) => return Ok(()),
            Err(RecvTimeoutError::Disconnected) => return Err(Error::engine("s3: the helper threads have stopped")),
        }
        self.reap(0, out)
    }

    /// A PUT is durable once the server answers it: nothing is left to make stable.
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }

    /// The read-back after a verified write: ranged GETs, object by object.
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<()> {
        let size = self.layout.object_size;
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let (object, within) = (at / size, at % size);
            let n = ((size - within) as usize).min(buf.len() - done);
            let key = self.layout.set.key(object);
            self.client.get_into(&key, within, &mut buf[done..done + n], false).map(drop).map_err(|f| {
                Error::io(self.client.explain(&format!("s3://{}/{key}: read-back of {n} bytes at {within}", self.layout.set.bucket), &f))
            })?;
            done += n;
        }
        Ok(())
    }

    fn failure_message(&self, slot: u32) -> Option<String> {
        self.failures.get(slot as usize).cloned().flatten()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("slowdown_retries", self.client.slowdowns.load(Ordering::Relaxed))]
    }

    fn first_byte_ns(&self, slot: u32) -> Option<u64> {
        self.first_byte.get(slot as usize).copied().flatten()
    }
}

impl Drop for S3 {
    /// Stop the helpers: each finishes (or, a multipart upload, aborts) its request and ends.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.jobs.clear();
        while self.done.try_recv().is_ok() {}
        for helper in self.helpers.drain(..) {
            // a helper blocked sending its completion is freed as the receiver is drained
            while !helper.is_finished() {
                while self.done.try_recv().is_ok() {}
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let _ = helper.join();
        }
    }
}
