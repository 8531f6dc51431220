//! One group of identical workers as a spec names it (fio: one job section with numjobs): its
//! fields, the choice types they take (`Rw`, `EngineKind`, `FileLayout` ...) and the limits every
//! value keeps (`MAX_BYTES`, `MAX_DURATION_S`). Plain data, below both checkers: `rules` holds each
//! option's bounds and allowed values, `spec` the combinations and the phase around the groups
//! (and re-exports these names, so `spec::GroupSpec` stays the spec's own).

use serde::{Deserialize, Serialize};

pub use crate::cpus::CpusPolicy;
use crate::distribution::RandomDistribution;
use crate::verify::VerifyKind;
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    Read,
    Write,
    Randread,
    Randwrite,
    Rw,
    Randrw,
    /// Discards (block devices) or punched holes (files), sequential / random: fio's trim, randtrim.
    Trim,
    Randtrim,
    /// fio's trimwrite: each block is trimmed, then written.
    Trimwrite,
}

impl Rw {
    /// Every pattern, in declaration order: the allowed values of `rw` (rules.rs).
    pub const ALL: [Rw; 9] = [Rw::Read, Rw::Write, Rw::Randread, Rw::Randwrite, Rw::Rw, Rw::Randrw, Rw::Trim, Rw::Randtrim, Rw::Trimwrite];

    pub fn is_random(self) -> bool {
        matches!(self, Rw::Randread | Rw::Randwrite | Rw::Randrw | Rw::Randtrim)
    }
    /// Percentage of reads implied by the pattern (mixed patterns use rwmix_read).
    pub fn read_percent(self, rwmix_read: u32) -> u32 {
        match self {
            Rw::Read | Rw::Randread => 100,
            Rw::Write | Rw::Randwrite | Rw::Trim | Rw::Randtrim | Rw::Trimwrite => 0,
            Rw::Rw | Rw::Randrw => rwmix_read,
        }
    }
    /// The pattern discards data (trim, randtrim, trimwrite): destructive like a write.
    pub fn trims(self) -> bool {
        matches!(self, Rw::Trim | Rw::Randtrim | Rw::Trimwrite)
    }
    /// The pattern writes data (trimwrite writes each block after trimming it).
    pub fn writes(self, rwmix_read: u32) -> bool {
        !matches!(self, Rw::Trim | Rw::Randtrim) && self.read_percent(rwmix_read) < 100
    }
}

/// A limit per direction, fio's `rate=R,W,T` layout: [read, write, trim]; 0 = none.
pub type PerDir = [u64; 3];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    Psync,
    #[serde(rename = "io_uring")]
    IoUring,
    Null,
    /// A network block device export through libnbd (targets nbd://HOST[:PORT]/EXPORT).
    Nbd,
    /// A file on an NFS export through libnfs (targets nfs://SERVER/EXPORT/FILE).
    Nfs,
    /// Objects in an S3 bucket over HTTP (targets s3://BUCKET/PREFIX).
    S3,
}

impl EngineKind {
    pub const ALL: [EngineKind; 6] = [EngineKind::Psync, EngineKind::IoUring, EngineKind::Null, EngineKind::Nbd, EngineKind::Nfs, EngineKind::S3];

    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Psync => "psync",
            EngineKind::IoUring => "io_uring",
            EngineKind::Null => "null",
            EngineKind::Nbd => "nbd",
            EngineKind::Nfs => "nfs",
            EngineKind::S3 => "s3",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThreadLayout {
    /// Each participant owns an equal, bs-aligned slice of the range.
    Region,
    /// Every participant covers the whole range.
    Shared,
    /// IOR segments: in each of `segments` segments, participant p owns the p-th `block`.
    Segmented,
    /// Round-robin transfers: participant p does transfers p, p+P, p+2P ... (segments of bs).
    Strided,
}

impl ThreadLayout {
    pub const ALL: [ThreadLayout; 4] = [ThreadLayout::Region, ThreadLayout::Shared, ThreadLayout::Segmented, ThreadLayout::Strided];
}

/// Read-behind-write: a writer and a reader per target, the reader following the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RbwMode {
    Off,
    /// The writer waits until the reader has read each record (Xdd's lockstep).
    Lockstep,
    /// The writer never waits; the reader never passes it and stays at most `rbw_lag` records
    /// behind, skipping ahead (counted) when it falls further back.
    Lag,
}

impl RbwMode {
    pub const ALL: [RbwMode; 3] = [RbwMode::Off, RbwMode::Lockstep, RbwMode::Lag];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileLayout {
    /// All threads on the target itself.
    Shared,
    /// Each thread its own file, named PATH.N with N the participant index.
    PerThread,
}

impl FileLayout {
    pub const ALL: [FileLayout; 2] = [FileLayout::Shared, FileLayout::PerThread];
}

/// How the targets are opened for synchronous writes (fio's sync): every write returns only once
/// its data (O_DSYNC), or its data and metadata (O_SYNC), are on stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpenSync {
    /// Writes land in the page cache or the device's cache (fio's default).
    #[default]
    None,
    /// O_SYNC: data and the metadata to find it (fio's sync=1 or sync=sync).
    Sync,
    /// O_DSYNC: data and only the metadata needed to read it back (fio's sync=dsync).
    Dsync,
}

impl OpenSync {
    pub const ALL: [OpenSync; 3] = [OpenSync::None, OpenSync::Sync, OpenSync::Dsync];

    /// The open(2) flag.
    pub fn flag(self) -> i32 {
        match self {
            OpenSync::None => 0,
            OpenSync::Sync => libc::O_SYNC,
            OpenSync::Dsync => libc::O_DSYNC,
        }
    }
}

/// How the rate limiter spaces a direction's requests (fio's rate_process).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RateProcess {
    /// Evenly: request n at n / rate (fio's default).
    #[default]
    Linear,
    /// Exponentially distributed gaps of the same mean: a Poisson process's arrivals.
    Poisson,
}

impl RateProcess {
    pub const ALL: [RateProcess; 2] = [RateProcess::Linear, RateProcess::Poisson];
}

/// Whether io_uring registers the slot buffers with the ring (READ/WRITE_FIXED; fio's fixedbufs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FixedBuffers {
    /// Registered where the kernel allows; when not, the plain path, without a warning.
    Auto,
    /// Required: a refusal is reported (a warning) and the run takes the plain path.
    On,
    /// Never registered: plain READ/WRITE, the kernel pins each request's pages (fio's default).
    Off,
}

impl FixedBuffers {
    pub const ALL: [FixedBuffers; 3] = [FixedBuffers::Auto, FixedBuffers::On, FixedBuffers::Off];
}

fn percentage_random_default() -> u32 {
    100
}

fn compress_chunk_default() -> u64 {
    512
}

fn scramble_default() -> bool {
    true
}

fn preallocate_default() -> bool {
    true
}

fn part_size_default() -> u64 {
    DEFAULT_PART_SIZE
}

/// The s3 engine's multipart part size, and the object size above which a PUT becomes a multipart
/// upload: 8 MiB, the AWS CLI's multipart_threshold and multipart_chunksize.
pub const DEFAULT_PART_SIZE: u64 = 8 << 20;

/// One group of identical workers (fio: one job section with numjobs).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    #[serde(default)]
    pub name: String,
    pub target: Vec<String>,
    pub size: Option<u64>,
    pub offset: u64,
    pub thread_layout: ThreadLayout,
    pub files: FileLayout,
    pub segments: u64,
    pub block: Option<u64>,
    /// Participants sharing the layout (0: this group's threads); more under MPI.
    pub participants: u64,
    /// Participant index of this process's first thread (rank × threads under MPI).
    pub participant_base: u64,
    pub rw: Rw,
    pub rwmix_read: u32,
    /// Random patterns visit every block once per pass (fio's random map; off = norandommap).
    pub random_map: bool,
    /// fio's random_distribution; parsed and validated by distribution.rs when deserialised.
    pub random_distribution: RandomDistribution,
    pub bs: u64,
    /// fio's bssplit: each request's size drawn from a split, per direction (blocksize.rs);
    /// None: every request of bs. With bssplit, bsrange or blockalign, bs is normalised by the
    /// plan to the unit of the random offsets (`GroupSpec::unit`).
    pub bssplit: Option<String>,
    /// fio's bsrange: each request's size drawn between a minimum and a maximum, per direction.
    pub bsrange: Option<String>,
    /// fio's blockalign: random offsets are multiples of this many bytes (0: the smallest request
    /// size). Another value turns the random map off, as in fio.
    pub blockalign: u64,
    /// Bytes skipped after each sequential request, a whole number of bs (fio's rw=read:SIZE).
    pub seq_hole: u64,
    /// Bytes the sequential cursor moves back after each request, from its end, a whole number of
    /// bs (fio's rw=read:-SIZE): 2 x bs reads backwards block by block, bs the same block again.
    #[serde(default)]
    pub seq_rewind: u64,
    pub threads: u32,
    pub qd: u32,
    pub seed: u64,
    pub io_size: Option<u64>,
    pub io_total: Option<u64>,
    pub fsync_every: u64,
    pub fsync_end: bool,
    pub rbw: RbwMode,
    pub rbw_lag: u64,
    /// Stamp written blocks and check read ones (see verify.rs).
    pub verify: VerifyKind,
    /// Pass number written into headers and, when not 0, required on reads.
    pub verify_pass: u32,
    /// Mismatches reported in full; the rest are counted.
    pub verify_report: u32,
    /// After writing with `verify`, read back and check every block written (fio's do_verify).
    pub verify_readback: bool,
    /// Make every 512-byte sector written unique (offset, writer nonce, write sequence; see
    /// buffer.rs), so deduplicating storage stores what was written (fio's scramble_buffers, on by
    /// default). Writes stamped by verify are unique already and `verify = fill` keeps its fill:
    /// neither is scrambled. Also applies to the data a layout writes. Absent from a spec written
    /// before the option existed: on.
    #[serde(default = "scramble_default")]
    pub scramble: bool,
    /// Written data: these bytes (`0x` and hex digits) repeated from the start of every request
    /// and of every laid-out block, instead of random data (fio's buffer_pattern; zero_buffers is
    /// `0x00`). Scrambling still applies unless turned off. None: random data.
    #[serde(default)]
    pub buffer_pattern: Option<String>,
    /// Written data compresses by about this share: every `compress_chunk` bytes are random for
    /// their first (100 − P) % and fixed for the rest (zeros, or buffer_pattern's bytes; fio's
    /// buffer_compress_percentage). 0: incompressible. Verified blocks carry it in their payload.
    #[serde(default)]
    pub compress_percentage: u32,
    /// The chunk compress_percentage shapes (fio's buffer_compress_chunk, 512 there too).
    #[serde(default = "compress_chunk_default")]
    pub compress_chunk: u64,
    /// In a random pattern, the share of requests (percent) at a random offset; the others follow
    /// on from the direction's last request (fio's percentage_random). 100: all random.
    #[serde(default = "percentage_random_default")]
    pub percentage_random: u32,
    /// This share of the writes repeat an earlier write of the same writer byte for byte (fio's
    /// dedupe_percentage with dedupe_mode=repeat). 0: every write unique.
    #[serde(default)]
    pub dedupe_percentage: u32,
    pub time: Option<f64>,
    pub ramp: f64,
    /// A request outstanding this long is reported as stalled (the studies' dropped-I/O rule).
    pub stall_after: f64,
    /// End the phase with an error on the first stall.
    pub stall_abort: bool,
    pub interval: f64,
    /// Wait this long after the phase start before issuing (staggered starts, fio's startdelay).
    pub start_delay: f64,
    pub engine: EngineKind,
    pub direct: bool,
    /// Allocate the new part of a file a writing group makes before the run (posix_fallocate,
    /// fio's default fallocate); off: only sized, sparse (fio's fallocate=none). Absent: on.
    #[serde(default = "preallocate_default")]
    pub preallocate: bool,
    /// Pin the group's worker threads to these CPUs (`0-3,6`; fio's cpus_allowed). None: not pinned.
    #[serde(default)]
    pub cpus: Option<String>,
    /// How the threads share `cpus` (fio's cpus_allowed_policy).
    #[serde(default)]
    pub cpus_policy: CpusPolicy,
    /// Open the targets with O_SYNC or O_DSYNC (fio's sync). Absent from older specs: none.
    #[serde(default)]
    pub open_sync: OpenSync,
    pub null_delay: f64,
    #[serde(rename = "uring.fixed_buffers")]
    pub uring_fixed_buffers: FixedBuffers,
    #[serde(rename = "uring.fixed_files")]
    pub uring_fixed_files: bool,
    #[serde(rename = "uring.sqpoll")]
    pub uring_sqpoll: bool,
    #[serde(rename = "uring.batch")]
    pub uring_batch: u32,
    /// Seconds a worker spins for a completion before it sleeps on the ring (0: always sleep).
    #[serde(rename = "uring.wait_spin")]
    pub uring_wait_spin: f64,
    /// s3: the endpoint URL(s), comma-separated, dealt round-robin to the workers. None: the
    /// environment's (AWS_ENDPOINT_URL), else AWS's regional endpoint. Never holds credentials.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// s3: the bytes of each object the range is cut into. None: bs.
    #[serde(default)]
    pub object_size: Option<u64>,
    /// s3: objects larger than this are written by multipart upload, in parts of this size.
    #[serde(default = "part_size_default")]
    pub part_size: u64,
    /// s3: do not check the server's TLS certificate (a self-signed test server).
    #[serde(default)]
    pub insecure: bool,
    /// s3: address the bucket as BUCKET.ENDPOINT-HOST (virtual-host style), not ENDPOINT/BUCKET.
    #[serde(default)]
    pub virtual_host: bool,
    /// Bandwidth cap per worker in bytes/s, [read, write, trim] (fio's rate; 0 = unlimited).
    pub rate: PerDir,
    /// IOPS cap per worker, [read, write, trim] (fio's rate_iops).
    pub rate_iops: PerDir,
    /// How the caps space the requests: evenly or as a Poisson process (fio's rate_process).
    #[serde(default)]
    pub rate_process: RateProcess,
    /// Bandwidth floor per worker over the phase; below it the phase fails (fio's rate_min).
    pub rate_min: PerDir,
    /// IOPS floor per worker over the phase (fio's rate_iops_min).
    pub rate_iops_min: PerDir,
    /// Pause after every `thinktime_blocks` requests, in seconds (fio's thinktime).
    pub thinktime: f64,
    /// The part of the pause spent spinning (fio's thinktime_spin).
    pub thinktime_spin: f64,
    /// Requests issued between pauses (fio's thinktime_blocks).
    pub thinktime_blocks: u64,
    /// Write fio's iolog v3 of the requests issued to this path (PATH.N per worker if several).
    pub write_iolog: Option<String>,
    /// Replay an fio iolog (v2 or v3) instead of generating offsets.
    pub read_iolog: Option<String>,
    /// Replay as fast as possible, ignoring the log's timestamps (fio's replay_no_stall).
    pub replay_no_stall: bool,
}

impl GroupSpec {
    /// Whether each write's random bytes get a key of their own (buffer.rs `rekey`): scrambled
    /// writes, except of a buffer_pattern's bytes (the user's), whose compressible chunks' random
    /// parts still do.
    pub fn rekeys_writes(&self) -> bool {
        self.scrambles_writes() && (self.buffer_pattern.is_none() || self.compress_percentage > 0)
    }

    /// Whether this group's writes are scrambled: asked for, and the data not already unique
    /// (stamped by verify) or required as laid out (`verify = fill`).
    pub fn scrambles_writes(&self) -> bool {
        self.scramble && self.verify == VerifyKind::Off
    }

    /// How this group's unverified writes are stamped and rekeyed (buffer.rs): compressible
    /// chunks, rekeyed random data in 512-byte chunks, or a pattern's sectors.
    pub fn data_shape(&self) -> crate::buffer::DataShape {
        use crate::buffer::{random_part, DataShape, SCRAMBLE_SECTOR};
        if self.compress_percentage > 0 {
            let chunk = self.compress_chunk as usize;
            DataShape::Chunked { chunk, random: random_part(chunk, self.compress_percentage) }
        } else if self.rekeys_writes() {
            DataShape::Chunked { chunk: SCRAMBLE_SECTOR, random: SCRAMBLE_SECTOR }
        } else {
            DataShape::Sectors
        }
    }

    /// The bytes of `buffer_pattern` (validated: `0x` and an even count of hex digits).
    pub fn pattern_bytes(&self) -> Option<Vec<u8>> {
        self.buffer_pattern.as_deref().and_then(|p| crate::buffer::parse_hex_pattern(p).ok())
    }
}

impl Default for GroupSpec {
    fn default() -> Self {
        GroupSpec {
            name: String::new(),
            target: Vec::new(),
            size: None,
            offset: 0,
            thread_layout: ThreadLayout::Region,
            files: FileLayout::Shared,
            segments: 1,
            block: None,
            participants: 0,
            participant_base: 0,
            rw: Rw::Read,
            rwmix_read: 50,
            random_map: true,
            random_distribution: RandomDistribution::Uniform,
            bs: 4096,
            bssplit: None,
            bsrange: None,
            blockalign: 0,
            seq_hole: 0,
            seq_rewind: 0,
            threads: 1,
            qd: 1,
            seed: 0x5EED,
            io_size: None,
            io_total: None,
            fsync_every: 0,
            fsync_end: true,
            rbw: RbwMode::Off,
            rbw_lag: 8,
            verify: VerifyKind::Off,
            verify_pass: 0,
            verify_report: 10,
            verify_readback: true,
            scramble: true,
            buffer_pattern: None,
            compress_percentage: 0,
            compress_chunk: 512,
            percentage_random: 100,
            dedupe_percentage: 0,
            time: None,
            ramp: 0.0,
            stall_after: 60.0,
            stall_abort: false,
            interval: 1.0,
            start_delay: 0.0,
            engine: EngineKind::Psync,
            direct: false,
            preallocate: true,
            cpus: None,
            cpus_policy: CpusPolicy::Shared,
            open_sync: OpenSync::None,
            null_delay: 0.0,
            uring_fixed_buffers: FixedBuffers::Auto,
            uring_fixed_files: false,
            uring_sqpoll: false,
            uring_batch: 0,
            uring_wait_spin: DEFAULT_WAIT_SPIN_S,
            endpoint: None,
            object_size: None,
            part_size: DEFAULT_PART_SIZE,
            insecure: false,
            virtual_host: false,
            rate: [0; 3],
            rate_iops: [0; 3],
            rate_process: RateProcess::Linear,
            rate_min: [0; 3],
            rate_iops_min: [0; 3],
            thinktime: 0.0,
            thinktime_spin: 0.0,
            thinktime_blocks: 1,
            write_iolog: None,
            read_iolog: None,
            replay_no_stall: false,
        }
    }
}

/// How long an io_uring worker spins for a completion before it sleeps (`uring.wait_spin`): a
/// wait expected to end within it is cheaper spun than slept, above all in a virtual machine, where
/// waking a halted CPU costs tens of microseconds (engine/uring.rs).
pub const DEFAULT_WAIT_SPIN_S: f64 = 100e-6;

/// The longest duration any timing option may have (10 years): far beyond a real run, far below
/// where converting to std::time::Duration or adding it to an Instant would overflow.
pub const MAX_DURATION_S: f64 = 315_360_000.0;
/// The largest byte count (size, offset, io_size ...) a spec may name: 1 EiB, so sums and
/// products of offsets stay far inside u64.
pub const MAX_BYTES: u64 = 1 << 60;
