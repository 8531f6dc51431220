//! One worker thread of one metadata phase: set-up outside the clock (a descriptor table of its
//! own, as each mdtest rank has; open its tree in the run's namespace, format its name stems,
//! shuffle its items), meet the others at the start barrier, then one operation per item (a
//! system call on a directory, a request on an object store: `namespace`) with its latency
//! recorded in the worker's own histogram. No lock per operation, and on a directory no
//! allocation; progress is published through relaxed stores to the worker's own cache line.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::histogram::Histogram;

use super::names::{self, NameBuf, Shape};
use super::namespace::{Namespace, Tree};
use super::ops::{self, OpError};
use super::control::MetaControl;
use super::spec::{DirMode, MetaPhase, MetaSpec, Order};

/// Largest single read/write of file data, and so the largest data buffer of a worker.
const MAX_CHUNK_BYTES: u64 = 1 << 20;

/// What exists of one worker's files and tree; carried from phase to phase so later phases (and
/// the clean-up) work on exactly what earlier ones finished.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerState {
    /// Directories of the tree this worker owns that exist: a prefix of the breadth-first order.
    pub dirs: u64,
    /// Items [0, created) were created ...
    pub created: u64,
    /// ... of which [0, renamed) carry the renamed name ...
    pub renamed: u64,
    /// ... and [0, removed) are gone again.
    pub removed: u64,
}

/// Everything the workers of a phase share (read-only).
pub struct PhaseCtx<'a> {
    pub spec: &'a MetaSpec,
    pub shape: &'a Shape,
    /// Where the names live: the target directory or the objects under an s3:// prefix.
    pub ns: &'a dyn Namespace,
    pub phase: MetaPhase,
    pub control: &'a MetaControl,
}

/// A worker's statistics of one phase.
pub struct WorkerPhase {
    pub id: usize,
    pub lat: Histogram,
    pub file_sync: Histogram,
    pub dir_sync: Histogram,
    pub ops: u64,
    /// Bytes written (create) or read (read).
    pub bytes: u64,
    /// LIST requests (list: `ops` counts the names they returned).
    pub requests: u64,
    pub start: Instant,
    pub end: Instant,
    pub stonewalled: bool,
    pub tree_root: String,
    /// The first item this phase worked on (its items are consecutive from here).
    first_item: u64,
}

/// Whether worker `w` makes and removes a tree.
pub fn owns_tree(spec: &MetaSpec, w: usize) -> bool {
    match spec.dir {
        DirMode::Unique => true,
        DirMode::Shared => w == 0 && spec.shared_tree_owner,
    }
}

fn nanos(a: Instant, b: Instant) -> u64 {
    b.saturating_duration_since(a).as_nanos() as u64
}

fn op_error(phase: MetaPhase, path: String, e: OpError) -> Error {
    Error::io(format!("{} of {path} failed at {}: {}", phase.name(), e.step, e.err))
}

/// Items in the order stat and read visit them.
pub(crate) fn visit_order(spec: &MetaSpec, phase: MetaPhase, w: usize, n: u64) -> Option<Vec<u32>> {
    if spec.order != Order::Random || !matches!(phase, MetaPhase::Stat | MetaPhase::Read) {
        return None;
    }
    let mut v: Vec<u32> = (0..n as u32).collect();
    // xorshift64* seeded per worker and phase; Fisher-Yates.
    let mut x = spec.seed ^ (0x9E37_79B9_7F4A_7C15u64.wrapping_mul(w as u64 + 1)) ^ ((phase as u64) << 56) | 1;
    for i in (1..v.len()).rev() {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        v.swap(i, (r % (i as u64 + 1)) as usize);
    }
    Some(v)
}

/// A buffer of `len` pseudo-random bytes (so compressing or deduplicating file systems get no
/// free ride).
fn data_buffer(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Remove this worker's files that still exist ([removed, created)), ignoring ones already gone.
/// Not timed: used before rmdir after a stonewalled remove, and by the clean-up. Returns the files
/// removed and the first error.
pub fn remove_leftover_files(spec: &MetaSpec, shape: &Shape, ns: &dyn Namespace, w: usize, st: &mut WorkerState) -> (u64, Option<Error>) {
    if st.removed >= st.created {
        return (0, None);
    }
    let root_name = names::tree_root(spec, w);
    let mut root = match ns.tree(w, &root_name) {
        Ok(t) => t,
        Err(e) => return (0, Some(Error::io(format!("clean-up: {}", e.message)))),
    };
    let (stem_f, stem_r) = names::stems(spec, w);
    let mut name = NameBuf::new();
    let (mut removed, mut first_err) = (0u64, None);
    for i in st.removed..st.created {
        let stem = if i < st.renamed { &stem_r } else { &stem_f };
        let p = name.file(shape, stem, i);
        match root.remove(p) {
            Ok(()) => removed += 1,
            Err(e) if e.errno() == Some(libc::ENOENT) => {}
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some(Error::io(format!(
                        "clean-up: {} of {} failed: {}",
                        e.step,
                        ns.full(&format!("{root_name}/{}", name.text())),
                        e.err
                    )));
                }
            }
        }
    }
    if first_err.is_none() {
        st.removed = st.created;
    }
    (removed, first_err)
}

/// Remove the directories of this worker's tree that exist, deepest first. Not timed.
pub fn remove_tree(spec: &MetaSpec, shape: &Shape, ns: &dyn Namespace, w: usize, st: &mut WorkerState) -> (u64, Option<Error>) {
    if ns.no_dirs().is_some() {
        return (0, None);
    }
    let mut name = NameBuf::new();
    name.set_head(names::tree_root(spec, w).as_bytes());
    let mut removed = 0;
    while st.dirs > 0 {
        let (level, index) = shape.bfs(st.dirs - 1);
        let p = name.dir(shape, level, index);
        match ns.rmdir(p) {
            Ok(()) => removed += 1,
            Err(e) if e.errno() == Some(libc::ENOENT) => {}
            Err(e) => {
                let msg = format!("clean-up: rmdir of {} failed: {}", ns.full(&name.text()), e.err);
                return (removed, Some(Error::io(msg)));
            }
        }
        st.dirs -= 1;
    }
    (removed, None)
}

/// Run worker `w`'s part of a phase. Always reaches the start barrier exactly once, even when its
/// set-up fails, so no other thread waits forever. Returns the statistics of what was done also
/// when an operation failed, with the error beside them.
pub fn run(ctx: &PhaseCtx<'_>, w: usize, st: &mut WorkerState) -> (WorkerPhase, Option<Error>) {
    let (spec, shape, phase, control, ns) = (ctx.spec, ctx.shape, ctx.phase, ctx.control, ctx.ns);
    let root_name = names::tree_root(spec, w);
    let owner = owns_tree(spec, w);
    // a namespace without directories has no tree to make or remove: those phases skip
    let dirs = ns.no_dirs().is_none();

    // --- set-up, outside the clock -----------------------------------------------------------
    let setup: Result<Option<Box<dyn Tree + '_>>> = (|| {
        // first, so every descriptor this worker opens lives (and dies) in its own table
        ops::private_descriptor_table();
        if phase == MetaPhase::Rmdir && dirs {
            // A stonewalled remove left files behind; the directories must be empty for rmdir.
            if let (_, Some(e)) = remove_leftover_files(spec, shape, ns, w, st) {
                return Err(e);
            }
        }
        if phase.is_item_phase() {
            return ns.tree(w, &root_name).map(Some).map_err(|e| Error::io(format!("{} cannot start: {}", phase.name(), e.message)));
        }
        Ok(None)
    })();
    let items = match phase {
        MetaPhase::Create => spec.files,
        MetaPhase::Stat | MetaPhase::Read => st.created,
        MetaPhase::Rename => st.created - st.renamed,
        MetaPhase::Remove => st.created - st.removed,
        MetaPhase::Mkdir | MetaPhase::Rmdir | MetaPhase::List => 0,
    };
    let order = visit_order(spec, phase, w, items);
    let chunk = spec.file_size.min(MAX_CHUNK_BYTES) as usize;
    let mut data = match phase {
        MetaPhase::Create | MetaPhase::Read if chunk > 0 => data_buffer(chunk, spec.seed ^ w as u64),
        _ => Vec::new(),
    };
    // verify_read: what create wrote, which every read is compared with (a run of the same spec in
    // another process writes the same data, so a rank visiting another's files checks them too)
    let expect = (phase == MetaPhase::Read && spec.verify_read).then(|| data.clone());
    let (stem_f, stem_r) = names::stems(spec, w);
    let (mut name, mut name2) = (NameBuf::new(), NameBuf::new());
    let mut out = WorkerPhase {
        id: w,
        lat: Histogram::new(),
        file_sync: Histogram::new(),
        dir_sync: Histogram::new(),
        ops: 0,
        bytes: 0,
        requests: 0,
        start: Instant::now(),
        end: Instant::now(),
        stonewalled: false,
        tree_root: ns.full(&root_name),
        first_item: match phase {
            MetaPhase::Create => st.created,
            MetaPhase::Rename => st.renamed,
            MetaPhase::Remove => st.removed,
            _ => 0,
        },
    };
    let progress = &control.base.progress[w];
    progress.publish(0, 0, 0); // no completion latencies: steady state judges I/O phases

    control.base.ready.wait();
    let start = control.start();
    out.start = start.max(Instant::now());
    let mut root = match setup {
        Ok(r) => r,
        Err(e) => {
            out.end = out.start;
            return (out, Some(e));
        }
    };
    let mut failure: Option<Error> = None;
    let deadline = match (phase.is_item_phase(), spec.stonewall) {
        (true, Some(s)) if !spec.stonewall_create_only || phase == MetaPhase::Create => {
            Some(out.start + Duration::from_secs_f64(s))   // from the release, as the phase's time
        }
        _ => None,
    };
    let stop = &control.base.stop;
    let size = spec.file_size;

    // One timed operation: run `$op`, record its latency, advance the state with `$done`, and
    // leave the loop on a stop request or at the stonewall.
    macro_rules! timed {
        ($op:expr, $path:expr, $done:expr) => {{
            let t0 = Instant::now();
            let r = $op;
            let t1 = Instant::now();
            if let Err(e) = r {
                failure = Some(op_error(phase, $path, e));
                break;
            }
            out.lat.record(nanos(t0, t1));
            out.ops += 1;
            $done;
            progress.publish(out.bytes, out.ops, 0);
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if deadline.is_some_and(|d| t1 >= d) {
                out.stonewalled = true;
                break;
            }
        }};
    }

    match phase {
        MetaPhase::Mkdir if owner && dirs => {
            name.set_head(root_name.as_bytes());
            for pos in st.dirs..shape.total_dirs() {
                let (level, index) = shape.bfs(pos);
                let p = name.dir(shape, level, index);
                timed!(ns.mkdir(p), ns.full(&name.text()), st.dirs = pos + 1);
            }
        }
        MetaPhase::Rmdir if owner && dirs => {
            name.set_head(root_name.as_bytes());
            while st.dirs > 0 {
                let (level, index) = shape.bfs(st.dirs - 1);
                let p = name.dir(shape, level, index);
                timed!(ns.rmdir(p), ns.full(&name.text()), st.dirs -= 1);
            }
        }
        // a shared tree is made by its owner alone; an object store has no tree to make
        MetaPhase::Mkdir | MetaPhase::Rmdir => {}
        MetaPhase::Create => {
            let tree = root.as_mut().expect("item phases open the tree root");
            let fsync = spec.fsync_files;
            for i in st.created..spec.files {
                let p = name.file(shape, &stem_f, i);
                let sync = if fsync { Some(&mut out.file_sync) } else { None };
                timed!(
                    tree.create(p, &data, size, sync),
                    ns.full(&format!("{root_name}/{}", name.text())),
                    { st.created = i + 1; out.bytes += size }
                );
            }
        }
        MetaPhase::Stat | MetaPhase::Read => {
            let tree = root.as_mut().expect("item phases open the tree root");
            let is_read = phase == MetaPhase::Read;
            for k in 0..items {
                let i = order.as_ref().map_or(k, |o| o[k as usize] as u64);
                let stem = if i < st.renamed { &stem_r } else { &stem_f };
                let p = name.file(shape, stem, i);
                timed!(
                    if is_read { tree.read(p, &mut data, size, expect.as_deref()) } else { tree.stat(p, size) },
                    ns.full(&format!("{root_name}/{}", name.text())),
                    if is_read { out.bytes += size }
                );
            }
        }
        MetaPhase::List if owner => {
            // one request a page; the phase's operations are the names listed
            let tree = root.as_mut().expect("item phases open the tree root");
            let mut token: Option<String> = None;
            loop {
                let t0 = Instant::now();
                let r = tree.list_page(token.as_deref(), spec.list_page);
                let t1 = Instant::now();
                match r {
                    Ok((listed, next)) => {
                        out.lat.record(nanos(t0, t1));
                        out.requests += 1;
                        out.ops += listed;
                        token = next;
                    }
                    Err(e) => {
                        failure = Some(op_error(phase, ns.full(&root_name), e));
                        break;
                    }
                }
                progress.publish(out.bytes, out.ops, 0);
                if token.is_none() || stop.load(Ordering::Relaxed) {
                    break;
                }
                if deadline.is_some_and(|d| t1 >= d) {
                    out.stonewalled = true;
                    break;
                }
            }
        }
        MetaPhase::List => {} // a shared tree is listed by its owner alone
        MetaPhase::Rename => {
            let tree = root.as_mut().expect("item phases open the tree root");
            for i in st.renamed..st.created {
                let from = name.file(shape, &stem_f, i);
                let to = name2.file(shape, &stem_r, i);
                timed!(
                    tree.rename(from, to),
                    ns.full(&format!("{root_name}/{} -> {}", name.text(), name2.text())),
                    st.renamed = i + 1
                );
            }
        }
        MetaPhase::Remove => {
            let tree = root.as_mut().expect("item phases open the tree root");
            for i in st.removed..st.created {
                let stem = if i < st.renamed { &stem_r } else { &stem_f };
                let p = name.file(shape, stem, i);
                timed!(tree.remove(p), ns.full(&format!("{root_name}/{}", name.text())), st.removed = i + 1);
            }
        }
    }

    // --- directory fsync, inside the timed window ----------------------------------------------
    if spec.fsync_dirs && failure.is_none() && !stop.load(Ordering::Relaxed) {
        failure = fsync_changed_dirs(ctx, w, owner, &mut root, &mut name, &mut out).err();
    }
    out.end = Instant::now();
    progress.publish(out.bytes, out.ops, 0);
    (out, failure)
}

/// fsync every directory whose entries this worker changed in the phase.
fn fsync_changed_dirs(ctx: &PhaseCtx<'_>, w: usize, owner: bool, root: &mut Option<Box<dyn Tree + '_>>, name: &mut NameBuf, out: &mut WorkerPhase) -> Result<()> {
    let (spec, shape, phase, ns) = (ctx.spec, ctx.shape, ctx.phase, ctx.ns);
    let root_name = names::tree_root(spec, w);
    let fail = |path: String, e: OpError| Error::io(format!("{} of {path} failed at directory fsync: {}", phase.name(), e.err));
    let dot = std::ffi::CString::new(".").expect("no NUL");
    match phase {
        MetaPhase::Mkdir | MetaPhase::Rmdir if owner && out.ops > 0 => {
            // the target holds the tree root's entry
            ns.fsync_dir(&dot, &mut out.dir_sync).map_err(|e| fail(spec.target.clone(), e))?;
            if phase == MetaPhase::Mkdir {
                // every directory above the leaves got new entries
                name.set_head(root_name.as_bytes());
                let inner = shape.total_dirs() - shape.leaves;
                for pos in 0..inner {
                    let (level, index) = shape.bfs(pos);
                    let p = name.dir(shape, level, index);
                    ns.fsync_dir(p, &mut out.dir_sync).map_err(|e| fail(ns.full(&name.text()), e))?;
                }
            }
        }
        MetaPhase::Create | MetaPhase::Rename | MetaPhase::Remove if out.ops > 0 => {
            let tree = root.as_mut().expect("item phases open the tree root");
            name.set_head(b".");
            // consecutive items go round-robin over the leaves
            for k in 0..shape.leaves.min(out.ops) {
                let p = name.leaf_dir(shape, (out.first_item + k) % shape.leaves);
                tree.fsync_dir(p, &mut out.dir_sync).map_err(|e| fail(ns.full(&format!("{root_name}/{}", name.text())), e))?;
            }
        }
        _ => {}
    }
    Ok(())
}
