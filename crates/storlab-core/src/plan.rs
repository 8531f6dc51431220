//! From a validated spec to an immutable plan: targets opened (files created, preallocated or laid
//! out with data when a read needs it), sizes resolved, O_DIRECT alignment checked, and the work of
//! every worker fixed (its target, block range and byte budget). All system access happens here,
//! before the timed part of the run. Every descriptor opened on a target is compared with what the
//! write-safety gate checked (`IdentityGate`), so what is checked is what is opened.
//!
//! Laying out can take minutes on a large file, so it checks the free space first (refusing with
//! the size needed instead of filling the file system), works in chunks that a cancel flag can
//! stop between, and removes every file it created when the build fails or is cancelled.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use serde::Serialize;

use crate::buffer::{AlignedBuf, Scrambler};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::iolog::Replay;
use crate::rbw::{Channel, Role};
use crate::remote::{self, RemoteKind};
use crate::spec::{CheckedPath, EngineKind, GroupSpec, Identity, OpenSync, PhaseSpec, RbwMode, ThreadLayout};
use crate::verify::{self, Expect, VerifyKind};
use crate::rng::Rng;
use crate::workload::{AccessMap, Dir};

/// What storlab found out about a target, reported in the result's environment.
#[derive(Debug, Clone, Serialize)]
pub struct TargetInfo {
    pub path: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub size_bytes: u64,
    pub created: bool,
    /// Bytes written before the run so a read phase reads real data (not holes).
    pub laid_out_bytes: u64,
    /// Alignment O_DIRECT needs for offsets and sizes on this target.
    pub direct_align_bytes: u64,
    /// The fsyncs the group asks for were not issued: the target is a character device, which
    /// has nothing to flush (fsync returns EINVAL there, which fails fio's job).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fsync_skipped: bool,
    /// An s3 target's endpoint(s), as the run reached them (never a credential).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

/// The work of one worker thread.
pub struct WorkerPlan {
    pub id: usize,
    pub group: usize,
    pub target: usize,
    /// The worker's descriptor on a local target; None on a remote one (nbd://), which the
    /// worker's backend connects to itself.
    pub file: Option<File>,
    /// The transfers this worker may do.
    pub map: AccessMap,
    /// Participant index (thread index within the group, shifted by participant_base).
    pub participant: u64,
    /// Read-behind-write role and the channel shared with the other side.
    pub rbw: Option<(Role, Arc<Channel>)>,
    /// Bytes to transfer; u64::MAX for "until the time runs out".
    pub io_limit: u64,
    pub seed: u64,
}

pub struct Plan {
    pub spec: PhaseSpec,
    pub targets: Vec<TargetInfo>,
    pub workers: Vec<WorkerPlan>,
    /// Alignment of the I/O buffers (O_DIRECT DMA alignment, at least a page).
    pub buffer_align: usize,
    /// Read-behind-write channels, one per target of an rbw group.
    pub rbw_channels: Vec<Arc<Channel>>,
    /// Per group: the parsed log it replays (read_iolog), shared by its workers.
    pub replays: Vec<Option<Arc<Replay>>>,
}

const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
const BLKSSZGET: libc::c_ulong = 0x1268;

fn block_device_size(f: &File) -> std::io::Result<u64> {
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), BLKGETSIZE64, &mut size as *mut u64) };
    if rc < 0 { Err(std::io::Error::last_os_error()) } else { Ok(size) }
}

fn block_logical_sector(f: &File) -> u64 {
    let mut ssz: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), BLKSSZGET, &mut ssz as *mut libc::c_int) };
    if rc < 0 || ssz <= 0 { 512 } else { ssz as u64 }
}

/// O_DIRECT offset alignment of a regular file from statx (STATX_DIOALIGN, Linux 6.1+), else 512.
fn file_direct_align(path: &str) -> u64 {
    let Ok(cpath) = std::ffi::CString::new(path) else { return 512 };
    // SAFETY: statx fills the zeroed struct; we only read it on success.
    unsafe {
        let mut stx: libc::statx = std::mem::zeroed();
        const STATX_DIOALIGN: u32 = 0x2000;
        if libc::statx(libc::AT_FDCWD, cpath.as_ptr(), 0, STATX_DIOALIGN, &mut stx) == 0
            && stx.stx_mask & STATX_DIOALIGN != 0
            && stx.stx_dio_offset_align > 0
        {
            return stx.stx_dio_offset_align as u64;
        }
    }
    512
}

/// The kernel's memory character devices (major 1), the only character devices a run may use:
/// /dev/null (1:3) discards writes and reads end of file, /dev/zero (1:5) discards writes and
/// reads zeros, /dev/full (1:7) fails writes with ENOSPC and reads zeros. Identified by device
/// number, never by name.
pub const MEMORY_DEVICES: [(u32, u32, &str); 3] = [(1, 3, "/dev/null"), (1, 5, "/dev/zero"), (1, 7, "/dev/full")];

/// The name of the memory device with device number `rdev`, or None for any other device.
pub fn memory_device(rdev: u64) -> Option<&'static str> {
    let (major, minor) = (libc::major(rdev as libc::dev_t), libc::minor(rdev as libc::dev_t));
    MEMORY_DEVICES.iter().find(|&&(ma, mi, _)| ma == major && mi == minor).map(|&(_, _, name)| name)
}

/// What a target of any other kind is not (the gate's description and the open's refusal).
const NOT_A_TARGET: &str = "neither a regular file, a block device nor /dev/null, /dev/zero or /dev/full";

/// The one-line refusal of a character device that is not a memory device.
fn other_char_device(rdev: u64) -> String {
    format!(
        "is character device {}:{}; the only character devices storlab uses are /dev/null (1:3), /dev/zero (1:5) and /dev/full (1:7)",
        libc::major(rdev as libc::dev_t), libc::minor(rdev as libc::dev_t)
    )
}

/// The identities the write-safety gate checked, by path. Each descriptor the plan opens is
/// fstat'ed and compared: a symlink re-pointed, or a device node replaced, between the check and
/// the open is refused before anything is written. A path checked as absent may become a regular
/// file the plan creates; that file's identity is then pinned for the later opens.
struct IdentityGate {
    expected: Option<HashMap<String, Identity>>,
}

fn identity_of(m: &std::fs::Metadata) -> Option<Identity> {
    let t = m.file_type();
    if t.is_block_device() {
        Some(Identity::Block { rdev: m.rdev() })
    } else if t.is_char_device() && memory_device(m.rdev()).is_some() {
        Some(Identity::Char { rdev: m.rdev() })
    } else if t.is_file() {
        Some(Identity::File { dev: m.dev(), ino: m.ino() })
    } else {
        None
    }
}

fn describe_identity(id: Option<Identity>) -> String {
    match id {
        Some(Identity::Block { rdev }) => {
            format!("block device {}:{}", libc::major(rdev as libc::dev_t), libc::minor(rdev as libc::dev_t))
        }
        Some(Identity::Char { rdev }) => format!(
            "character device {}:{} ({})",
            libc::major(rdev as libc::dev_t), libc::minor(rdev as libc::dev_t), memory_device(rdev).unwrap_or("?")
        ),
        Some(Identity::File { dev, ino }) => format!("regular file (device {dev}, inode {ino})"),
        Some(Identity::Absent) => "nothing (a file to create)".into(),
        Some(Identity::Remote { .. }) => "a network target".into(),
        None => NOT_A_TARGET.into(),
    }
}

impl IdentityGate {
    fn new(checked: &Option<Vec<CheckedPath>>) -> IdentityGate {
        IdentityGate {
            expected: checked.as_ref().map(|list| list.iter().map(|c| (c.path.clone(), c.identity)).collect()),
        }
    }

    /// Refuse, before anything is opened or created, a path the gate did not check.
    fn require(&self, path: &str) -> Result<()> {
        match &self.expected {
            Some(expected) if !expected.contains_key(path) => {
                Err(Error::target(path, "was not checked by the write-safety gate; refusing to open it"))
            }
            _ => Ok(()),
        }
    }

    /// Whether the gate lets the plan write to a remote target that holds data: only one the user
    /// named in --allow-destroy. Without a gate (the engine's own tests) nothing is allowed.
    fn allows_overwrite(&self, path: &str) -> bool {
        matches!(self.expected.as_ref().and_then(|e| e.get(path)), Some(Identity::Remote { allow_destroy: true }))
    }

    /// Confirm that `f`, just opened on `path`, is the object the gate checked.
    fn confirm(&mut self, path: &str, f: &File) -> Result<()> {
        self.require(path)?;
        let Some(expected) = self.expected.as_mut() else { return Ok(()) };
        let want = expected[path];
        let got = f.metadata().map(|m| identity_of(&m)).map_err(|e| Error::target(path, format!("cannot fstat: {e}")))?;
        match (want, got) {
            (Identity::Absent, Some(file @ Identity::File { .. })) => {
                expected.insert(path.to_string(), file);
                Ok(())
            }
            (w, Some(g)) if w == g => Ok(()),
            _ => Err(Error::target(path, format!(
                "refusing to use it: the safety check saw {} but the open found {}; it changed between the check and the open",
                describe_identity(Some(want)), describe_identity(got)
            ))),
        }
    }
}

struct OpenTarget {
    info: TargetInfo,
    writes: bool,
    /// Start and length of the I/O range in bytes.
    range_start: u64,
    range_len: u64,
}

fn open_file(path: &str, writes: bool, direct: bool, sync: OpenSync, create: bool, gate: &mut IdentityGate) -> Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(writes).create(create && writes);
    o.custom_flags(if direct { libc::O_DIRECT } else { 0 } | sync.flag());
    let f = o.open(path).map_err(|e| {
        if direct && e.raw_os_error() == Some(libc::EINVAL) {
            Error::target(path, "cannot open with O_DIRECT: the file system does not support it (use --buffered)")
        } else {
            Error::target(path, format!("cannot open: {e}"))
        }
    })?;
    gate.confirm(path, &f)?;
    Ok(f)
}

/// Write data over [from, to) so reads hit allocated blocks (not holes), then flush it. With
/// verification on, every block of bs from `from` is stamped as a verified write would be;
/// `verify = fill` lays out the fill; otherwise, unless `scramble` is off, each chunk is scrambled
/// before it is written (buffer.rs), so no two laid-out sectors are alike and a deduplicating
/// target stores the whole file (reads from it are then not served from a few shared blocks).
fn lay_out(path: &str, from: u64, to: u64, g: &GroupSpec, build: &mut Build) -> Result<()> {
    let f = OpenOptions::new().write(true).open(path).map_err(|e| Error::target(path, format!("cannot open to lay out: {e}")))?;
    build.gate.confirm(path, &f)?;
    fill_range(path, from, to, g, build, &mut |chunk: &[u8], off: u64| {
        // SAFETY: chunk is valid for its length.
        let w = unsafe { libc::pwrite(f.as_raw_fd(), chunk.as_ptr() as *const libc::c_void, chunk.len(), off as libc::off_t) };
        if w <= 0 { Err(std::io::Error::last_os_error()) } else { Ok(w as usize) }
    })?;
    f.sync_all().map_err(|e| Error::target(path, format!("flushing laid-out data failed: {e}")))
}

/// The data a layout writes over [from, to), chunk by chunk, through `write_at` (which returns
/// the bytes written; EINTR is retried once the cancel flag has been looked at).
fn fill_range(path: &str, from: u64, to: u64, g: &GroupSpec, build: &mut Build,
              write_at: &mut dyn FnMut(&[u8], u64) -> std::io::Result<usize>) -> Result<()> {
    let chunk = if g.verify == VerifyKind::Off { 1 << 20 } else { (((1 << 20) / g.bs).max(1) * g.bs) as usize };
    let mut buf = AlignedBuf::new(chunk, 4096);
    if g.verify == VerifyKind::Fill {
        // every block holds the fill, as a verify = fill write leaves it
        let data = verify::fill_data(g.seed, g.bs as usize);
        buf.as_mut_slice()[..chunk].chunks_mut(g.bs as usize).for_each(|b| b.copy_from_slice(&data[..b.len()]));
    } else if g.compress_percentage > 0 && g.verify == VerifyKind::Off {
        // as the group's writes: compressible chunks, fixed part zeros or buffer_pattern's bytes
        let fixed = g.pattern_bytes().unwrap_or_default();
        crate::buffer::fill_compressible(buf.as_mut_slice(), Rng::derive(g.seed, 0xFEED), g.compress_percentage,
                                         g.compress_chunk as usize, &fixed, chunk);
    } else if let Some(bytes) = g.pattern_bytes() {
        crate::buffer::fill_pattern(buf.as_mut_slice(), &bytes, g.bs as usize);
    } else {
        buf.fill_random(Rng::derive(g.seed, 0xFEED));
    }
    build.scrambler.set_shape(g.data_shape());
    let mut held_key = 0u64; // the key the buffer's random bytes carry (buffer.rs `rekey`)
    let pattern = g.verify.stamps().then(|| verify::Pattern::shaped(g.seed, g.bs as usize, g.compress_percentage, g.compress_chunk as usize));
    let mut off = from;
    while off < to {
        check_cancel(path, build.cancel)?;
        let n = ((to - off) as usize).min(chunk);
        if let Some(pattern) = &pattern {
            for (i, block) in buf.as_mut_slice()[..n].chunks_exact_mut(g.bs as usize).enumerate() {
                let at = off + (i as u64) * g.bs;
                verify::stamp(block, pattern, g.verify, Expect { offset: at, seed: g.seed, pass: g.verify_pass }, 0);
            }
        } else if g.scrambles_writes() {
            let sequence = build.scrambler.next_sequence();
            if g.rekeys_writes() {
                build.scrambler.rekey(&mut buf.as_mut_slice()[..n], &mut held_key, sequence);
            }
            build.scrambler.stamp_as(&mut buf.as_mut_slice()[..n], off, sequence);
        }
        match write_at(&buf.as_mut_slice()[..n], off) {
            Ok(w) => off += w as u64,
            // a signal landed on this thread; the cancel flag says whether to stop
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(Error::target(path, format!("laying out data at offset {off} failed: {e}"))),
        }
    }
    Ok(())
}

/// Preallocation goes this many bytes at a time, so a cancel is seen within one chunk.
const PREALLOCATE_CHUNK: u64 = 256 << 20;

fn check_cancel(path: &str, cancel: &dyn Cancel) -> Result<()> {
    if cancel.requested() {
        return Err(Error::interrupted(format!("{path}: laying out stopped by a signal")));
    }
    Ok(())
}

/// Allocate [0, len) of the file in chunks (a file system without fallocate gets a plain size).
fn preallocate(f: &File, path: &str, len: u64, cancel: &dyn Cancel) -> Result<()> {
    let mut off = 0u64;
    while off < len {
        check_cancel(path, cancel)?;
        let n = (len - off).min(PREALLOCATE_CHUNK);
        // SAFETY: plain syscall on an open descriptor.
        let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), off as libc::off_t, n as libc::off_t) };
        match rc {
            0 => off += n,
            libc::EINTR => continue, // a signal landed on this thread; the cancel flag decides
            libc::EOPNOTSUPP | libc::EINVAL => {
                return f.set_len(len).map_err(|e| Error::target(path, format!("cannot size to {len} bytes: {e}")));
            }
            _ => {
                return Err(Error::target(path, format!(
                    "cannot preallocate {len} bytes: {}", std::io::Error::from_raw_os_error(rc)
                )))
            }
        }
    }
    Ok(())
}

/// Bytes the file system holding `path` (or its folder, for a file not made yet) has free for an
/// unprivileged user; None when it does not say (some pseudo and network file systems).
fn free_bytes(path: &str) -> Option<u64> {
    let p = std::path::Path::new(path);
    let probe = if p.exists() { p.to_path_buf() } else { p.parent().filter(|d| !d.as_os_str().is_empty())?.to_path_buf() };
    let cpath = std::ffi::CString::new(probe.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs fills the zeroed struct; read only on success.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(cpath.as_ptr(), &mut st) } != 0 || st.f_blocks == 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Refuse up front, naming the size needed, when laying out `need` more bytes cannot fit.
fn check_free_space(path: &str, need: u64) -> Result<()> {
    match free_bytes(path) {
        Some(free) if need > free => Err(Error::target(path, format!(
            "needs {need} bytes ({:.1} GiB) more to lay out, but its file system has {free} bytes ({:.1} GiB) free; \
             use a smaller size or a target with more room",
            need as f64 / (1u64 << 30) as f64, free as f64 / (1u64 << 30) as f64
        ))),
        _ => Ok(()),
    }
}

/// What one plan build carries along: the cancel flag, the write-safety gate and the files it created (removed again if
/// the build fails or is cancelled, so nothing half-laid-out is left behind).
struct Build<'a> {
    cancel: &'a dyn Cancel,
    created: Vec<String>,
    gate: IdentityGate,
    /// Scrambles laid-out chunks: one for the whole build, so chunks of every file differ.
    scrambler: Scrambler,
}

/// Whether a group reads and whether it changes data (writes or trims): a replay as its log says.
fn reads_writes(g: &GroupSpec, replay: Option<&Replay>) -> (bool, bool) {
    match replay {
        Some(r) => {
            let [reads, writes, trims] = r.directions();
            (reads, writes || trims)
        }
        None => {
            let read_pct = g.rw.read_percent(g.rwmix_read);
            (read_pct > 0, read_pct < 100)
        }
    }
}

fn resolve_target(path: &str, g: &GroupSpec, size: Option<u64>, replay: Option<&Replay>, build: &mut Build) -> Result<OpenTarget> {
    if let Some(kind) = RemoteKind::of(path) {
        return resolve_remote(path, kind, g, size, build);
    }
    let (reads, writes) = reads_writes(g, replay);
    let meta = std::fs::metadata(path);
    let mut created = false;
    let (kind, existing_size, align) = match &meta {
        Ok(m) if m.file_type().is_block_device() => {
            let f = File::open(path).map_err(|e| Error::target(path, format!("cannot open: {e}")))?;
            build.gate.confirm(path, &f)?;
            let size = block_device_size(&f).map_err(|e| Error::target(path, format!("cannot read the device size: {e}")))?;
            ("block", size, block_logical_sector(&f))
        }
        Ok(m) if m.is_file() => ("file", m.len(), 0),
        Ok(m) if m.file_type().is_char_device() => match memory_device(m.rdev()) {
            Some(name) => {
                check_memory_device(path, name, g, size, replay)?;
                ("char", 0, 0)
            }
            None => return Err(Error::target(path, other_char_device(m.rdev()))),
        },
        Ok(_) => return Err(Error::target(path, format!("is {NOT_A_TARGET}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if size.is_none() {
                return Err(Error::spec(format!("size: needed to create {path}, which does not exist")));
            }
            created = true;
            ("file", 0, 0)
        }
        Err(e) => return Err(Error::target(path, format!("cannot stat: {e}"))),
    };
    // Before anything is created: a path the gate did not see is never opened for writing.
    build.gate.require(path)?;
    let range_len = match size {
        Some(s) => s,
        None => existing_size.checked_sub(g.offset).filter(|&n| n > 0).ok_or_else(|| {
            Error::spec(format!("offset: {} is at or beyond the end of {path} ({existing_size} bytes)", g.offset))
        })?,
    };
    let end = g.offset + range_len;
    if kind == "block" && end > existing_size {
        return Err(Error::spec(format!(
            "size: offset {} + size {range_len} runs past the end of {path} ({existing_size} bytes)",
            g.offset
        )));
    }
    if kind == "file" && (created || end > existing_size) {
        // Create and size the file; a read needs real data, not holes. First: does it fit?
        let allocated = meta.as_ref().map(|m| m.blocks() * 512).unwrap_or(0);
        check_free_space(path, end.saturating_sub(allocated))?;
        let f = open_file(path, true, false, OpenSync::None, true, &mut build.gate)?;
        if created {
            build.created.push(path.to_string());
        }
        if g.engine == EngineKind::Null || (!reads && !g.preallocate) {
            // The null engine transfers nothing: the file is only sized (sparse), never written;
            // without preallocate a writing group's file is sized too (fio's fallocate=none).
            f.set_len(end)
                .map_err(|e| Error::target(path, format!("cannot size to {end} bytes: {e}")))?;
        } else if reads {
            drop(f);
            // Verified reads need every block of the range stamped, so lay out all of it.
            let from = if g.verify == VerifyKind::Off { existing_size.min(end) } else { g.offset };
            lay_out(path, from, end, g, build)?;
        } else {
            preallocate(&f, path, end, build.cancel)?;
        }
    }
    let laid_out_bytes = match (kind == "file" && reads && end > existing_size && g.engine != EngineKind::Null, g.verify) {
        (false, _) => 0,
        (true, VerifyKind::Off) => end - existing_size.min(end),
        (true, _) => range_len,
    };
    let align = if kind == "file" { file_direct_align(path) } else { align };
    let size_bytes = if kind == "file" { existing_size.max(end) } else { existing_size };
    let fsync_skipped = kind == "char" && writes && (g.fsync_end || g.fsync_every > 0 || replay.is_some_and(|r| r.syncs()));
    Ok(OpenTarget {
        info: TargetInfo { path: path.to_string(), kind, size_bytes, created, laid_out_bytes, direct_align_bytes: align, fsync_skipped, endpoint: None },
        writes,
        range_start: g.offset,
        range_len,
    })
}

/// A network target: its size and what the server allows, learnt over one connection of the
/// kind the workers then open, with the write-safety rule applied over that same connection.
fn resolve_remote(path: &str, kind: RemoteKind, g: &GroupSpec, size: Option<u64>, build: &mut Build) -> Result<OpenTarget> {
    build.gate.require(path)?;
    let connect_error = |m: String| {
        if m.contains("cannot be loaded") { Error::engine(m) } else { Error::target(path, format!("cannot connect: {m}")) }
    };
    let mut endpoint = None;
    let (existing_size, created, laid_out_bytes, fsync_skipped) = match kind {
        RemoteKind::Nbd => resolve_nbd(path, g, build, connect_error)?,
        RemoteKind::Nfs => resolve_nfs(path, g, size, build, connect_error)?,
        RemoteKind::S3 => {
            let (resolved, endpoints) = resolve_s3(path, g, size, build)?;
            endpoint = Some(endpoints);
            resolved
        }
    };
    let range_len = match size {
        Some(s) => s,
        None => existing_size.checked_sub(g.offset).filter(|&n| n > 0).ok_or_else(|| {
            Error::spec(format!("offset: {} is at or beyond the end of {path} ({existing_size} bytes)", g.offset))
        })?,
    };
    if g.offset + range_len > existing_size {
        return Err(Error::spec(format!(
            "size: offset {} + size {range_len} runs past the end of {path} ({existing_size} bytes)", g.offset
        )));
    }
    Ok(OpenTarget {
        info: TargetInfo { path: path.to_string(), kind: kind.type_name(), size_bytes: existing_size, created, laid_out_bytes, direct_align_bytes: 0, fsync_skipped, endpoint },
        writes: reads_writes(g, None).1,
        range_start: g.offset,
        range_len,
    })
}

/// A network block device export: like a block device it has its size, and a read of a blank one
/// reads zeros, so nothing is created or laid out. One that holds data (a non-zero byte where
/// `nbd_first_data` looks) is written only when named in --allow-destroy. Returns the size,
/// created, laid-out bytes and whether fsyncs are skipped (a server that refuses flushes).
fn resolve_nbd(path: &str, g: &GroupSpec, build: &mut Build, connect_error: impl Fn(String) -> Error) -> Result<(u64, bool, u64, bool)> {
    let writes = reads_writes(g, None).1;
    let refuse = |m: String| Error::target(path, m);
    let mut conn = remote::libnbd::Connection::connect(path).map_err(connect_error)?;
    let size = conn.size().map_err(|m| refuse(format!("cannot read the export's size: {m}")))?;
    if writes {
        if conn.read_only().map_err(&refuse)? {
            return Err(refuse("the server exports it read-only; it can only be read".into()));
        }
        if !build.gate.allows_overwrite(path) {
            if let Some(at) = remote::nbd_first_data(&mut conn, size).map_err(|m| refuse(format!("cannot read it to check for data: {m}")))? {
                return Err(refuse(format!(
                    "holds data (a non-zero byte at offset {at}); storlab writes to an export only when it is blank or named in --allow-destroy"
                )));
            }
        }
    }
    if g.rw.trims() && !conn.can_trim().map_err(&refuse)? {
        return Err(Error::spec(format!("rw: the server of {path} does not allow trims (NBD_CMD_TRIM); use a pattern without trims")));
    }
    let fsync_skipped = writes && (g.fsync_end || g.fsync_every > 0) && !conn.can_flush().map_err(&refuse)?;
    Ok((size, false, 0, fsync_skipped))
}

/// A file on an NFS export, as a local file is treated: made (with O_EXCL) and sized when it does
/// not exist, laid out with data over what a read needs, removed again if the build fails. One
/// that exists and holds data is written only when named in --allow-destroy (the export may be
/// shared; a local file's owner is the user who names it). Returns as `resolve_nbd`.
fn resolve_nfs(path: &str, g: &GroupSpec, size: Option<u64>, build: &mut Build, connect_error: impl Fn(String) -> Error) -> Result<(u64, bool, u64, bool)> {
    use remote::libnfs::{File as NfsFile, Missing, OpenError};
    let (reads, writes) = reads_writes(g, None);
    let refuse_writing = |why: String| Error::spec(format!("target: {path}: {why}"));
    if writes {
        if let Some(why) = remote::libnfs::cannot_write(path) {
            return Err(refuse_writing(why));
        }
    }
    let mut file = match NfsFile::open(path, writes, Missing::Refuse) {
        Ok(f) => f,
        Err(OpenError::Missing(m)) if size.is_some() => {
            if let Some(why) = remote::libnfs::cannot_write(path) {
                return Err(refuse_writing(format!("{m}, and it cannot be made: {why}")));
            }
            let f = NfsFile::open(path, true, Missing::Create).map_err(|e| connect_error(e.to_string()))?;
            build.created.push(path.to_string());
            f
        }
        Err(OpenError::Missing(m)) => return Err(Error::spec(format!("size: needed to create {path}: {m}"))),
        Err(OpenError::Failed(m)) => return Err(connect_error(m)),
    };
    let existing = if file.created { 0 } else { file.size };
    if writes && existing > 0 && !build.gate.allows_overwrite(path) {
        return Err(Error::target(path, format!(
            "holds data ({existing} bytes); storlab writes to an existing NFS file only when it is named in --allow-destroy"
        )));
    }
    let end = size.map_or(existing, |s| g.offset + s);
    let mut laid_out = 0;
    if end > existing {
        if let Some(why) = remote::libnfs::cannot_write(path) {
            return Err(refuse_writing(format!("it must grow from {existing} to {end} bytes: {why}")));
        }
        if reads && g.engine != EngineKind::Null {
            // Verified reads need every block of the range stamped, so lay out all of it.
            let from = if g.verify == VerifyKind::Off { existing } else { g.offset };
            file.truncate(end).map_err(|m| Error::target(path, format!("cannot size to {end} bytes: {m}")))?;
            fill_range(path, from, end, g, build, &mut |chunk: &[u8], off: u64| {
                file.pwrite(chunk, off).map(|()| chunk.len()).map_err(std::io::Error::other)
            })?;
            file.fsync().map_err(|m| Error::target(path, format!("flushing laid-out data failed: {m}")))?;
            laid_out = if g.verify == VerifyKind::Off { end - existing } else { end - g.offset };
        } else {
            file.truncate(end).map_err(|m| Error::target(path, format!("cannot size to {end} bytes: {m}")))?;
        }
    }
    Ok((existing.max(end), file.created, laid_out, false))
}

/// The objects under an s3:// prefix, object k holding bytes [k x object_size, (k + 1) x
/// object_size) of the target. One LIST tells what is there: a job that writes (or trims) a prefix
/// holding any object is refused unless the prefix is named in --allow-destroy; a read needs the
/// objects of its range, and those missing are laid out (PUT) first, as a local file's missing
/// part is. The prefix counts as made by this run when it held nothing: its objects are then
/// removed when the build fails (and by the front end at the end of the run, unless kept).
/// Returns as `resolve_nbd`, and the endpoints for the result's environment.
fn resolve_s3(path: &str, g: &GroupSpec, size: Option<u64>, build: &mut Build) -> Result<((u64, bool, u64, bool), String)> {
    use remote::s3::Client;
    use remote::s3_config::{AwsEnvironment, ObjectSet};
    let set = ObjectSet::parse(path).map_err(|m| Error::spec(format!("target: {path} {m}")))?;
    let access = AwsEnvironment::of_process().access(g.endpoint.as_deref(), g.insecure, g.virtual_host).map_err(|m| Error::target(path, m))?;
    let client = Client::new(&access, &access.endpoints[0], &set, 1).map_err(|m| Error::target(path, m))?;
    let (reads, writes) = reads_writes(g, None);
    let object = g.object_size.unwrap_or(g.bs);
    let listed = client.list(&set.list_prefix()).map_err(|f| Error::target(path, client.explain("listing the prefix", &f)))?;
    if writes && !build.gate.allows_overwrite(path) {
        if let Some(first) = listed.first() {
            return Err(Error::target(path, format!(
                "holds {} object(s) (the first: {}); storlab writes to a prefix only when it holds none or is named in --allow-destroy",
                listed.len(), first.key
            )));
        }
    }
    let sizes: HashMap<u64, u64> = listed.iter().filter_map(|o| set.index_of(&o.key).map(|k| (k, o.size))).collect();
    let first = g.offset / object;
    let count = match size {
        Some(s) => s / object,
        None => (first..).take_while(|k| sizes.get(k) == Some(&object)).count() as u64,
    };
    if count == 0 {
        return Err(Error::spec(format!(
            "size: needed for {path}: it holds no object of object_size ({object} bytes) from {} on", set.key(first)
        )));
    }
    if let Some((k, n)) = (first..first + count).find_map(|k| sizes.get(&k).filter(|&&n| n != object).map(|&n| (k, n))) {
        return Err(Error::target(path, format!(
            "object {} is {n} bytes, not object_size ({object} bytes); give that object_size or use another prefix", set.key(k)
        )));
    }
    let created = listed.is_empty();
    // removing what this run makes there reaches the prefix as the plan did
    remote::s3::remember(path, &access);
    if created {
        build.created.push(path.to_string());
    }
    let missing: Vec<u64> = if reads { (first..first + count).filter(|k| !sizes.contains_key(k)).collect() } else { Vec::new() };
    let mut data = vec![0u8; if missing.is_empty() { 0 } else { object as usize }];
    for &k in &missing {
        let base = k * object;
        fill_range(path, base, base + object, g, build, &mut |chunk: &[u8], off: u64| {
            let at = (off - base) as usize;
            data[at..at + chunk.len()].copy_from_slice(chunk);
            Ok(chunk.len())
        })?;
        client.put(&set.key(k), &data, g.part_size, build.cancel)
            .map_err(|f| Error::target(path, client.explain(&format!("laying out {}", set.key(k)), &f)))?;
    }
    Ok((((first + count) * object, created, missing.len() as u64 * object, false), access.endpoints.join(",")))
}

/// Remove a file a failed build made: a local path, a file on an NFS export, or the objects of an
/// s3:// prefix.
fn remove_created(path: &str) {
    // best effort: it may not have been made at all
    if RemoteKind::of(path).is_some() {
        let _ = remote::remove_file(path);
    } else {
        let _ = std::fs::remove_file(path);
    }
}

/// The descriptor a worker gets on its target: a local one opened (and checked by the gate), none
/// for a remote one, whose backend connects itself.
fn open_worker_file(t: &OpenTarget, writes: bool, g: &GroupSpec, gate: &mut IdentityGate) -> Result<Option<File>> {
    if RemoteKind::of(&t.info.path).is_some() {
        return Ok(None);
    }
    open_file(&t.info.path, writes, g.direct, g.open_sync, false, gate).map(Some)
}

/// What a memory device cannot do, refused in one line before it is opened: it has no size of its
/// own (fio wants `size` for it too), its reads cannot return what was written (no verify),
/// /dev/null's reads end at once (fio fails them with EIO), nothing can be discarded on it (no
/// trims), and the kernel refuses O_DIRECT on it (EINVAL at open, as fio reports).
fn check_memory_device(path: &str, name: &str, g: &GroupSpec, size: Option<u64>, replay: Option<&Replay>) -> Result<()> {
    let what = if path == name { path.to_string() } else { format!("{path} ({name})") };
    let refuse = |message: String| Err(Error::spec(message));
    let (reads, _) = reads_writes(g, replay);
    let trims = replay.map_or(g.rw.trims(), |r| r.directions()[2]);
    if size.is_none() {
        return refuse(format!("size: {what} is a character device with no size of its own; give size (fio needs size= for it too)"));
    }
    if g.verify != VerifyKind::Off {
        return refuse(format!("verify: reads from {what} cannot return what was written; use verify = off, or a file or block device"));
    }
    if g.direct {
        return refuse(format!("direct: the kernel refuses O_DIRECT on {what}, a character device (EINVAL, as fio reports); use --buffered (direct = false)"));
    }
    if trims {
        return refuse(format!("rw: {what} has no blocks to discard; on it use read, write, randread, randwrite, rw or randrw"));
    }
    if (reads || g.rbw != RbwMode::Off) && name == "/dev/null" {
        return refuse(format!("rw: reads from {what} return end of file at once (fio fails them with EIO); read from /dev/zero"));
    }
    Ok(())
}

/// The range length a group needs on a target it must create: its size, or for the segmented
/// layouts segments × participants × block when the block is known.
/// The bytes a worker with `transfers` in its range may move: io_size, its share of io_total,
/// unlimited when timed, else the range's bytes. With seq_hole the cursor wraps when a hole runs
/// past the end of the range, so those bytes may take several passes over the same offsets; fio
/// ends a sized job early when a request ends exactly at the end of the file (io_u.c,
/// get_next_seq_offset), which is after ceil(transfers / stride) requests: fio's count, either way.
fn io_limit(g: &GroupSpec, transfers: u64, group_workers: u64) -> u64 {
    match (g.io_size, g.io_total, g.time) {
        (Some(n), _, _) => (n / g.bs).max(1) * g.bs,
        (_, Some(n), _) => (n / group_workers / g.bs).max(1) * g.bs,
        (None, None, Some(_)) => u64::MAX,
        (None, None, None) => {
            let stride = g.seq_stride();
            let last_ends_range = transfers > 0 && (transfers - 1).is_multiple_of(stride);
            (if last_ends_range { transfers.div_ceil(stride) } else { transfers }) * g.bs
        }
    }
}

fn wanted_size(g: &GroupSpec, replay: Option<&Replay>) -> Option<u64> {
    let participants = g.participant_count();
    if let Some(r) = replay {
        // A replay's offsets are absolute: the range must reach its furthest request.
        let need = r.max_end.saturating_sub(g.offset).max(g.bs);
        return Some(g.size.map_or(need, |s| s.max(need)));
    }
    match (g.size, g.thread_layout, g.block) {
        (Some(s), _, _) => Some(s),
        (None, ThreadLayout::Segmented, Some(b)) => Some(g.segments * participants * b),
        _ => None,
    }
}

/// The access map of participant `p` on a resolved range, with the checks that go with it.
fn access_map(g: &GroupSpec, t: &OpenTarget, p: u64, participants: u64) -> Result<AccessMap> {
    let path = &t.info.path;
    let blocks = t.range_len / g.bs;
    if blocks == 0 {
        return Err(Error::spec(format!(
            "size: the range of {} bytes on {path} is smaller than bs ({} bytes)", t.range_len, g.bs
        )));
    }
    let per_participant = participants.max(1);
    Ok(match g.thread_layout {
        ThreadLayout::Shared => {
            check_sized_range(g, blocks * g.bs, path)?;
            AccessMap::Contiguous { base: t.range_start, blocks }
        }
        ThreadLayout::Region => {
            if blocks < per_participant {
                return Err(Error::spec(format!(
                    "threads: {per_participant} participants cannot each own a slice of {blocks} blocks of {} bytes on {path}; use a larger size or thread_layout=shared",
                    g.bs
                )));
            }
            let lo = blocks * p / per_participant;
            let hi = blocks * (p + 1) / per_participant;
            let map = AccessMap::Contiguous { base: t.range_start + lo * g.bs, blocks: hi - lo };
            check_sized_range(g, (hi - lo) * g.bs, path)?;
            map
        }
        ThreadLayout::Segmented | ThreadLayout::Strided => {
            let block_bytes = match (g.thread_layout, g.block) {
                (ThreadLayout::Strided, _) => g.bs,
                (_, Some(b)) => b,
                (_, None) => (t.range_len / (g.segments * per_participant) / g.bs) * g.bs,
            };
            let segments = if g.thread_layout == ThreadLayout::Strided {
                t.range_len / (per_participant * g.bs)
            } else {
                g.segments
            };
            if block_bytes == 0 || segments == 0 {
                return Err(Error::spec(format!(
                    "size: {} bytes on {path} cannot hold {} segment(s) of {per_participant} participants x one transfer of {} bytes",
                    t.range_len, g.segments, g.bs
                )));
            }
            let needed = segments * per_participant * block_bytes;
            if needed > t.range_len {
                return Err(Error::spec(format!(
                    "size: segments ({segments}) x participants ({per_participant}) x block ({block_bytes} bytes) = {needed} bytes exceeds the range of {} bytes on {path}",
                    t.range_len
                )));
            }
            AccessMap::Segmented { base: t.range_start, segments, participants: per_participant, participant: p, block_bytes }
        }
    })
}

/// With sized requests, each worker's range holds the smallest request of every direction.
fn check_sized_range(g: &GroupSpec, range_len: u64, path: &str) -> Result<()> {
    if !g.sized_requests() {
        return Ok(());
    }
    let laws = g.size_laws().map_err(Error::spec)?;
    let need = laws.iter().zip(g.directions()).filter(|(_, used)| *used).map(|(l, _)| l.min()).max().unwrap_or(g.bs);
    if range_len < need {
        return Err(Error::spec(format!(
            "size: a worker's range of {range_len} bytes on {path} is smaller than its smallest request ({need} bytes); use a larger size or thread_layout=shared"
        )));
    }
    Ok(())
}

fn check_direct(g: &GroupSpec, t: &OpenTarget, buffer_align: &mut usize) -> Result<()> {
    // A remote target has no page cache on this host to bypass: direct has no meaning there.
    if !g.direct || t.info.direct_align_bytes == 0 && RemoteKind::of(&t.info.path).is_some() {
        return Ok(());
    }
    let (a, path) = (t.info.direct_align_bytes, &t.info.path);
    if !g.bs.is_multiple_of(a) {
        return Err(Error::alignment(format!(
            "bs: {} bytes is not a multiple of {a} bytes, the O_DIRECT alignment of {path}", g.bs
        )));
    }
    if g.sized_requests() {
        let option = if g.bssplit.is_some() { "bssplit" } else { "bsrange" };
        let laws = g.size_laws().map_err(Error::spec)?;
        for (law, _) in laws.iter().zip(g.directions()).filter(|(_, used)| *used) {
            if let Some(b) = law.sizes().into_iter().find(|b| !b.is_multiple_of(a)) {
                return Err(Error::alignment(format!(
                    "{option}: {b} bytes is not a multiple of {a} bytes, the O_DIRECT alignment of {path}"
                )));
            }
        }
    }
    if !t.range_start.is_multiple_of(a) {
        return Err(Error::alignment(format!(
            "offset: {} is not a multiple of {a} bytes, the O_DIRECT alignment of {path}", t.range_start
        )));
    }
    *buffer_align = (*buffer_align).max(a as usize);
    Ok(())
}

/// Parse a group's replay log. Its requests go to the group's target(s): the log must name one
/// file (several files would need one descriptor per file and worker; storlab replays one).
fn load_replay(path: &str, g: &GroupSpec) -> Result<Replay> {
    let r = Replay::load(path)?;
    let [_, writes, trims] = r.directions();
    if (writes || trims) && g.rw.read_percent(g.rwmix_read) == 100 {
        return Err(Error::spec(format!(
            "read_iolog: {path} {}, but rw is {}: the write-safety gate checked the target for reads only; give a writing rw (storlab sets it from the log)",
            if writes { "writes" } else { "trims" }, format!("{:?}", g.rw).to_lowercase()
        )));
    }
    if r.files.len() > 1 {
        let shown: Vec<&str> = r.files.iter().take(3).map(String::as_str).collect();
        return Err(Error::spec(format!(
            "read_iolog: {path} names {} files ({}{}); storlab replays a log of one file onto the target",
            r.files.len(), shown.join(", "), if r.files.len() > 3 { ", ..." } else { "" }
        )));
    }
    if g.direct {
        if let Some(e) = r.entries.iter().find_map(|e| match e.action {
            crate::iolog::Action::Io { offset, len, .. } if offset % 512 != 0 || len % 512 != 0 => Some((offset, len)),
            _ => None,
        }) {
            return Err(Error::alignment(format!(
                "read_iolog: {path} has a request at offset {} of {} bytes, not 512-byte aligned as O_DIRECT needs (use --buffered)", e.0, e.1
            )));
        }
    }
    Ok(r)
}

impl Plan {
    /// Resolve every target and fix every worker's work. Touches the file system.
    pub fn build(spec: PhaseSpec) -> Result<Plan> {
        Plan::build_cancellable(spec, &AtomicBool::new(false))
    }

    /// `build`, stopped between layout chunks once `cancel` asks (an `Interrupted` error). On any
    /// error the files this build created are removed.
    pub fn build_cancellable(spec: PhaseSpec, cancel: &dyn Cancel) -> Result<Plan> {
        let gate = IdentityGate::new(&spec.checked);
        let mut build = Build { cancel, created: Vec::new(), gate, scrambler: Scrambler::new(0xFEED) };
        let plan = Plan::build_in(spec, &mut build);
        if plan.is_err() {
            for path in &build.created {
                remove_created(path);
            }
        }
        plan
    }

    fn build_in(mut spec: PhaseSpec, build: &mut Build) -> Result<Plan> {
        spec.validate()?;
        spec.groups = spec.groups.into_iter().map(GroupSpec::normalised).collect();
        let mut targets: Vec<TargetInfo> = Vec::new();
        let mut workers: Vec<WorkerPlan> = Vec::new();
        let mut buffer_align = 4096usize;
        let mut rbw_channels = Vec::new();
        let mut replays = Vec::new();
        for (gi, g) in spec.groups.iter().enumerate() {
            let replay = match &g.read_iolog {
                Some(path) => Some(Arc::new(load_replay(path, g)?)),
                None => None,
            };
            let group_workers = g.target.len() as u64 * g.threads as u64;
            let participants = g.participant_count();
            let size = wanted_size(g, replay.as_deref());
            replays.push(replay.clone());
            for (target_no, path) in g.target.iter().enumerate() {
                // One file per thread (PATH.N, N the participant index) or all threads on PATH.
                let names = g.file_names(path);
                let shared = match names.as_slice() {
                    [one] if one == path => Some(resolve_target(path, g, size, replay.as_deref(), build)?),
                    _ => None,
                };
                if let Some(t) = &shared {
                    check_direct(g, t, &mut buffer_align)?;
                }
                let shared_index = targets.len();
                if let Some(t) = &shared {
                    targets.push(t.info.clone());
                }
                for th in 0..g.threads as u64 {
                    let p = g.participant_base + th;
                    let own;
                    let (t, ti, map) = match &shared {
                        Some(t) => (t, shared_index, access_map(g, t, p, participants)?),
                        None => {
                            own = resolve_target(&names[th as usize], g, size, replay.as_deref(), build)?;
                            check_direct(g, &own, &mut buffer_align)?;
                            targets.push(own.info.clone());
                            let map = access_map(g, &own, 0, 1)?;
                            (&own, targets.len() - 1, map)
                        }
                    };
                    let io_limit = io_limit(g, map.transfers(g.bs), group_workers);
                    let file = open_worker_file(t, t.writes, g, &mut build.gate)?;
                    // Stable across processes: the same participant draws the same offsets.
                    let seed = Rng::derive(g.seed, ((gi as u64) << 48) | ((target_no as u64) << 32) | p);
                    let rbw = (g.rbw != RbwMode::Off).then(|| Arc::new(Channel::default()));
                    workers.push(WorkerPlan {
                        id: workers.len(),
                        group: gi,
                        target: ti,
                        file,
                        map,
                        participant: p,
                        rbw: rbw.clone().map(|ch| (Role::Writer, ch)),
                        io_limit,
                        seed,
                    });
                    if let Some(ch) = rbw {
                        // The reader follows the writer record by record; its own gate ends it.
                        workers.push(WorkerPlan {
                            id: workers.len(),
                            group: gi,
                            target: ti,
                            file: open_worker_file(t, false, g, &mut build.gate)?,
                            map,
                            participant: p,
                            rbw: Some((Role::Reader, ch.clone())),
                            io_limit: u64::MAX,
                            seed,
                        });
                        rbw_channels.push(ch);
                    }
                }
            }
        }
        Ok(Plan { spec, targets, workers, buffer_align, rbw_channels, replays })
    }

    pub fn group(&self, w: &WorkerPlan) -> &GroupSpec {
        &self.spec.groups[w.group]
    }

    /// Whether group `gi` issues requests of direction `d`: a replay what its log says, a pattern
    /// what it names (read-behind-write adds reads).
    pub fn group_does(&self, gi: usize, d: Dir) -> bool {
        let g = &self.spec.groups[gi];
        match (&self.replays[gi], d) {
            (Some(r), d) => r.directions()[d.index()],
            (None, Dir::Read) => g.rw.read_percent(g.rwmix_read) > 0 || g.rbw != RbwMode::Off,
            (None, Dir::Write) => g.rw.writes(g.rwmix_read),
            (None, Dir::Trim) => g.rw.trims(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::spec::{FileLayout, Rw};

    fn write_spec(target: &str, checked: Option<Vec<CheckedPath>>) -> PhaseSpec {
        let g = GroupSpec { target: vec![target.into()], size: Some(1 << 16), rw: Rw::Write, bs: 4096, ..Default::default() };
        PhaseSpec { name: "gate".into(), groups: vec![g], checked }
    }

    fn file_identity(path: &std::path::Path) -> Identity {
        let m = std::fs::metadata(path).unwrap();
        Identity::File { dev: m.dev(), ino: m.ino() }
    }

    /// fio 3.33 over 1 MiB in 4 KiB requests: rw=read:8k does 86 reads (the 86th ends at the end
    /// of the file, where fio stops), rw=write:4k 256 writes (its holes wrap: two passes).
    #[test]
    fn a_sized_job_with_holes_does_fios_request_count() {
        let g = GroupSpec { bs: 4096, seq_hole: 8192, ..Default::default() };
        assert_eq!(io_limit(&g, 256, 1), 86 * 4096);
        assert_eq!(io_limit(&GroupSpec { seq_hole: 4096, ..g.clone() }, 256, 1), 256 * 4096);
        assert_eq!(io_limit(&GroupSpec { seq_hole: 12288, ..g.clone() }, 256, 1), 256 * 4096);
        assert_eq!(io_limit(&GroupSpec { seq_hole: 4096, ..g.clone() }, 255, 1), 128 * 4096);
        assert_eq!(io_limit(&GroupSpec { seq_hole: 0, ..g.clone() }, 256, 1), 256 * 4096);
        // io_size counts bytes moved, holes or not
        assert_eq!(io_limit(&GroupSpec { io_size: Some(1 << 20), ..g }, 256, 1), 1 << 20);
    }

    #[test]
    fn a_path_swapped_for_another_file_after_the_check_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (checked_file, other) = (dir.path().join("checked"), dir.path().join("other"));
        std::fs::write(&checked_file, vec![0u8; 1 << 16]).unwrap();
        std::fs::write(&other, vec![0u8; 1 << 16]).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&other, &link).unwrap();
        let path = link.to_str().unwrap();
        let checked = vec![CheckedPath { path: path.into(), identity: file_identity(&checked_file) }];
        let err = Plan::build(write_spec(path, Some(checked))).err().expect("refused");
        assert!(err.message.contains("changed between the check and the open"), "{}", err.message);
    }

    #[test]
    fn a_path_the_gate_did_not_check_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let err = Plan::build(write_spec(path.to_str().unwrap(), Some(Vec::new()))).err().expect("refused");
        assert!(err.message.contains("was not checked by the write-safety gate"), "{}", err.message);
        assert!(!path.exists(), "nothing may be created for an unchecked path");
    }

    #[test]
    fn per_thread_names_are_checked_each_and_a_created_file_is_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("t").to_str().unwrap().to_string();
        let mut spec = write_spec(&base, None);
        spec.groups[0].files = FileLayout::PerThread;
        spec.groups[0].threads = 2;
        spec.groups[0].participant_base = 4;
        spec.groups[0].participants = 6;
        let names: Vec<String> = spec.opened_paths().into_iter().map(|o| o.path).collect();
        assert_eq!(names, vec![format!("{base}.4"), format!("{base}.5")]);
        // Only the first name checked: the second is refused before anything is written to it.
        spec.checked = Some(vec![CheckedPath { path: names[0].clone(), identity: Identity::Absent }]);
        let err = Plan::build(spec.clone()).err().expect("refused");
        assert!(err.message.starts_with(&names[1]) || err.message.contains(&names[1]), "{}", err.message);
        spec.checked = Some(names.iter().map(|n| CheckedPath { path: n.clone(), identity: Identity::Absent }).collect());
        let plan = Plan::build(spec).expect("both checked as absent: created, then pinned for the workers' opens");
        assert_eq!(plan.workers.len(), 2);
    }

    #[test]
    fn checked_identities_parse_from_the_json_python_sends() {
        let text = r#"{"groups": [], "checked": [{"path": "/a", "kind": "block", "rdev": 1793},
                       {"path": "/b", "kind": "file", "dev": 2049, "ino": 12}, {"path": "/c", "kind": "absent"}]}"#;
        let spec: PhaseSpec = serde_json::from_str(text).unwrap();
        assert_eq!(spec.checked.unwrap().iter().map(|c| c.identity).collect::<Vec<_>>(),
                   vec![Identity::Block { rdev: 1793 }, Identity::File { dev: 2049, ino: 12 }, Identity::Absent]);
    }

    fn mem_group(path: &str, rw: Rw) -> GroupSpec {
        GroupSpec { size: Some(1 << 20), ..group(path, 1 << 20, rw) }
    }

    fn refusal(g: GroupSpec, checked: Option<Vec<CheckedPath>>) -> String {
        Plan::build(PhaseSpec { name: "x".into(), groups: vec![g], checked }).err().expect("refused").message
    }

    /// /dev/null, /dev/zero and /dev/full are targets, known by device number: a link to
    /// /dev/null passes, a link named `null` to /dev/random does not, nor /dev/random itself
    /// (refused from stat alone: nothing is opened).
    #[test]
    fn only_the_memory_devices_pass_and_by_device_number() {
        let dir = tempfile::tempdir().unwrap();
        let (to_null, fake) = (dir.path().join("to-null"), dir.path().join("null"));
        std::os::unix::fs::symlink("/dev/null", &to_null).unwrap();
        std::os::unix::fs::symlink("/dev/random", &fake).unwrap();
        let plan = Plan::build(PhaseSpec { name: "x".into(), groups: vec![mem_group(to_null.to_str().unwrap(), Rw::Write)], checked: None }).expect("a link to /dev/null");
        assert_eq!((plan.targets[0].kind, plan.targets[0].size_bytes, plan.targets[0].laid_out_bytes), ("char", 0, 0));
        for path in [fake.to_str().unwrap(), "/dev/random"] {
            let m = refusal(mem_group(path, Rw::Write), None);
            assert_eq!(m, format!("{path}: is character device 1:8; the only character devices storlab uses are /dev/null (1:3), /dev/zero (1:5) and /dev/full (1:7)"));
        }
    }

    #[test]
    fn what_a_memory_device_cannot_do_is_refused_in_one_line() {
        let cases = [
            (GroupSpec { size: None, ..mem_group("/dev/null", Rw::Write) }, "size: /dev/null is a character device with no size of its own"),
            (GroupSpec { verify: VerifyKind::Crc32c, ..mem_group("/dev/zero", Rw::Randread) }, "verify: reads from /dev/zero cannot return what was written"),
            (GroupSpec { verify: VerifyKind::Crc32c, ..mem_group("/dev/zero", Rw::Write) }, "verify: "),
            (GroupSpec { direct: true, ..mem_group("/dev/zero", Rw::Read) }, "direct: the kernel refuses O_DIRECT on /dev/zero, a character device"),
            (mem_group("/dev/null", Rw::Read), "rw: reads from /dev/null return end of file"),
            (mem_group("/dev/zero", Rw::Trim), "rw: /dev/zero has no blocks to discard"),
        ];
        for (g, want) in cases {
            let m = refusal(g, None);
            assert!(m.starts_with(want) && !m.contains('\n'), "{m}");
        }
    }

    /// The gate's identity of a memory device is its device number: the JSON Python sends parses,
    /// and a path checked as /dev/zero that opens /dev/null is refused.
    #[test]
    fn a_memory_device_is_confirmed_by_device_number() {
        let spec: PhaseSpec = serde_json::from_str(r#"{"groups": [], "checked": [{"path": "/dev/null", "kind": "char", "rdev": 259}]}"#).unwrap();
        assert_eq!(spec.checked.unwrap()[0].identity, Identity::Char { rdev: 259 });
        let zero = std::fs::metadata("/dev/zero").unwrap().rdev();
        let checked = |rdev| Some(vec![CheckedPath { path: "/dev/null".into(), identity: Identity::Char { rdev } }]);
        let m = refusal(mem_group("/dev/null", Rw::Write), checked(zero));
        assert!(m.contains("the safety check saw character device 1:5 (/dev/zero) but the open found character device 1:3 (/dev/null)"), "{m}");
        let null = std::fs::metadata("/dev/null").unwrap().rdev();
        Plan::build(PhaseSpec { name: "x".into(), groups: vec![mem_group("/dev/null", Rw::Write)], checked: checked(null) }).expect("checked as itself");
    }

    fn scratch(name: &str) -> crate::scratch::Scratch {
        crate::scratch::Scratch::new("plan", name)
    }

    fn group(path: &str, size: u64, rw: Rw) -> GroupSpec {
        GroupSpec { target: vec![path.to_string()], size: Some(size), rw, bs: 4096, ..Default::default() }
    }

    #[test]
    fn the_null_engine_sizes_a_new_file_without_writing_it() {
        // fio's null engine does no file I/O; a read job used to lay the file out with real data
        let path = scratch("null");
        let g = GroupSpec { engine: EngineKind::Null, ..group(&path, 8 << 20, Rw::Read) };
        let plan = Plan::build(PhaseSpec { name: "null".into(), groups: vec![g], checked: None }).expect("plan");
        let m = std::fs::metadata(&path).unwrap();
        assert_eq!(m.len(), 8 << 20);
        assert_eq!(m.blocks(), 0, "no block of a null engine's file is written");
        drop(plan);
        std::fs::remove_file(&path).unwrap();
    }

    /// A writing group's new file is allocated before the run unless preallocate is off, when it
    /// is only sized (sparse, fio's fallocate=none); a reading group's is laid out either way.
    #[test]
    fn preallocate_off_leaves_a_writing_groups_new_file_sparse() {
        for (pre, rw, allocated) in [(true, Rw::Write, true), (false, Rw::Write, false), (false, Rw::Read, true)] {
            let path = scratch(&format!("prealloc-{pre}-{rw:?}"));
            let g = GroupSpec { preallocate: pre, ..group(&path, 4 << 20, rw) };
            let plan = Plan::build(PhaseSpec { name: "p".into(), groups: vec![g], checked: None }).expect("plan");
            let m = std::fs::metadata(&path).unwrap();
            assert_eq!(m.len(), 4 << 20);
            assert_eq!(m.blocks() * 512 >= 4 << 20, allocated, "preallocate {pre} {rw:?}: {} blocks", m.blocks());
            drop(plan);
        }
    }

    /// open_sync opens every worker's target with its flag (fio's sync), reads and writes alike.
    #[test]
    fn open_sync_opens_the_targets_with_o_sync_or_o_dsync() {
        use std::os::fd::AsRawFd;
        for (mode, flag) in [(OpenSync::None, 0), (OpenSync::Sync, libc::O_SYNC), (OpenSync::Dsync, libc::O_DSYNC)] {
            for rw in [Rw::Write, Rw::Read] {
                let path = scratch(&format!("sync-{mode:?}-{rw:?}"));
                let g = GroupSpec { open_sync: mode, threads: 2, ..group(&path, 1 << 20, rw) };
                let plan = Plan::build(PhaseSpec { name: "s".into(), groups: vec![g], checked: None }).expect("plan");
                for w in &plan.workers {
                    // SAFETY: F_GETFL only reads the status flags of a descriptor the plan owns.
                    let got = unsafe { libc::fcntl(w.file.as_ref().unwrap().as_raw_fd(), libc::F_GETFL) };
                    // O_SYNC includes the O_DSYNC bit: compare the whole of both
                    assert_eq!(got & (libc::O_SYNC | libc::O_DSYNC), flag, "{mode:?} {rw:?}");
                }
            }
        }
    }

    /// A laid-out file (a read of a new file) has no two 512-byte sectors alike, scrambled; with
    /// scramble off its 1 MiB chunks repeat.
    #[test]
    fn a_layout_is_scrambled_unless_asked_not_to() {
        for scramble in [true, false] {
            let path = scratch(&format!("layout-{scramble}"));
            let g = GroupSpec { scramble, ..group(&path, 3 << 20, Rw::Read) };
            let plan = Plan::build(PhaseSpec { name: "x".into(), groups: vec![g], checked: None }).expect("plan");
            drop(plan);
            let data = std::fs::read(&path).unwrap();
            std::fs::remove_file(&path).unwrap();
            let sectors: std::collections::HashSet<&[u8]> = data.chunks(512).collect();
            if scramble {
                assert_eq!(sectors.len(), data.len() / 512);
            } else {
                assert_eq!(sectors.len(), (1 << 20) / 512, "unscrambled: one chunk's sectors, repeated");
            }
        }
    }

    #[test]
    fn a_cancelled_layout_stops_and_removes_the_file_it_created() {
        let path = scratch("cancel");
        let cancel = AtomicBool::new(true);
        let spec = PhaseSpec { name: "x".into(), groups: vec![group(&path, 64 << 20, Rw::Read)], checked: None };
        let e = Plan::build_cancellable(spec, &cancel).err().expect("cancelled");
        assert_eq!(e.kind, ErrorKind::Interrupted);
        assert!(!std::path::Path::new(&path).exists());
    }

    #[test]
    fn a_failed_build_removes_the_files_it_created_but_not_existing_ones() {
        let (made, existing) = (scratch("made"), scratch("existing"));
        std::fs::write(&existing, vec![0u8; 8192]).unwrap();
        let mut bad = group(&existing, 8192, Rw::Read);
        bad.bs = 16384; // larger than its range: fails after the first group's file was made
        let spec = PhaseSpec { name: "x".into(), groups: vec![group(&made, 1 << 20, Rw::Write), bad], checked: None };
        let e = Plan::build(spec).err().expect("a range smaller than bs");
        assert_eq!(e.kind, ErrorKind::Spec, "{}", e.message);
        assert!(e.message.contains("smaller than bs"), "{}", e.message);
        assert!(!std::path::Path::new(&made).exists(), "the file this build made must go");
        assert!(std::path::Path::new(&existing).exists(), "a file the user had must stay");
        std::fs::remove_file(&existing).unwrap();
    }

    #[test]
    fn a_file_larger_than_the_free_space_is_refused_before_it_is_created() {
        let path = scratch("huge");
        let spec = PhaseSpec { name: "x".into(), groups: vec![group(&path, 1 << 60, Rw::Write)], checked: None };
        let e = Plan::build(spec).err().expect("refused");
        assert_eq!(e.kind, ErrorKind::Target);
        assert!(e.message.contains(&format!("needs {} bytes", 1u64 << 60)), "{}", e.message);
        assert!(!std::path::Path::new(&path).exists());
    }
}
