//! Data verification. With `verify` on, every written block starts with a header naming what it
//! should be (offset, pass, seed, sequence) and carries a checksum (crc32c or xxh3) over the header
//! and the payload; every read block is checked against the offset it was read from, the job's
//! seed and (when set) the pass. The payload is a deterministic function of (seed, offset, pass) —
//! a pseudo-random pattern made once per seed, XORed word by word with a key from (offset, pass),
//! cheap enough to vectorise — so a mismatch can be reported down to the first wrong byte with its
//! expected and found value.
//!
//! Block layout (little-endian):
//!   0 magic "SLV1" | 4 checksum kind | 8 offset | 16 pass | 20 block length | 24 seed
//!   | 32 sequence | 40 checksum | 48 payload ...
//! The checksum covers bytes 0..40 and 48..len, so one flipped byte anywhere in the block is caught
//! (CRC-32C detects every burst of up to 32 bits; xxh3 with overwhelming probability).
//!
//! What a failed check names (`Mismatch::field`):
//! - `payload`: the header is intact and a payload byte differs from the pattern (first one given);
//! - a header field (`magic`, `kind`, `offset`, `pass`, `length`, `seed`, `sequence`, `checksum`):
//!   the payload is what the expected block holds but that header field was changed; the byte is
//!   the first differing byte of the field. `sequence` has no expected value, so a checksum that
//!   fails with every other field as expected is put on it unless the stored checksum differs from
//!   the computed one in exactly one byte (then the checksum field itself was changed);
//! - `offset` / `seed` / `pass` with an intact checksum: a whole block from elsewhere or stale;
//! - `bs`: the data was written with another block size. That is not corruption and is counted
//!   apart (`VerifyTally::bs_mismatches`). The rule, for a read block of R bytes at offset O:
//!   * a header at its start saying length L < R (larger read): the R/L written blocks inside are
//!     each checked on their own (header and checksum over L bytes); any damage among them is
//!     reported as such, otherwise one `bs` mismatch "written with bs L, read with R";
//!   * a header saying L > R (smaller read, starting at a written block): the header fields and
//!     the R − 48 payload bytes present are checked against the pattern (the checksum covers bytes
//!     not read); if they hold, a `bs` mismatch;
//!   * no header at its start (smaller read starting inside a written block): the bytes are
//!     matched against the payload of a block written at O − d, for d = O mod L over candidate
//!     written sizes L (multiples of R up to 16 R and powers of two up to 16 MiB, blocks aligned to
//!     their size); a match is a `bs` mismatch naming the block it fell into (the written size is
//!     then only known to be at least d + R).
//!
//! A length field that is merely damaged (the checksum holds with length = R) is reported as
//! header field `length`, not as a block-size mismatch.

use std::cell::RefCell;

use serde::{Deserialize, Serialize};

use crate::rng::Rng;

pub const HEADER_LEN: usize = 48;
pub const MIN_BLOCK: u64 = 64;
const MAGIC: u32 = u32::from_le_bytes(*b"SLV1");
/// Largest written block size looked for when a read starts inside a written block.
const LARGEST_SEARCHED_BLOCK: u64 = 16 << 20;

/// Header fields: name, first byte, width in bytes.
const FIELDS: [(&str, usize, usize); 8] = [
    ("magic", 0, 4),
    ("kind", 4, 4),
    ("offset", 8, 8),
    ("pass", 16, 4),
    ("length", 20, 4),
    ("seed", 24, 8),
    ("sequence", 32, 8),
    ("checksum", 40, 8),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifyKind {
    Off,
    Crc32c,
    Xxh3,
    /// No header: every write carries the same seeded data (`fill_data`) and every read block is
    /// compared byte by byte with it (IOR -R with its timestamp pattern): damaged data or data
    /// written with another seed is caught, a block at the wrong offset is not. No cost on writes.
    Fill,
}

impl VerifyKind {
    /// Every kind, in declaration order: the allowed values of `verify` (rules.rs).
    pub const ALL: [VerifyKind; 4] = [VerifyKind::Off, VerifyKind::Crc32c, VerifyKind::Xxh3, VerifyKind::Fill];

    /// Whether written blocks carry a header and checksum (crc32c, xxh3).
    pub fn stamps(self) -> bool {
        matches!(self, VerifyKind::Crc32c | VerifyKind::Xxh3)
    }

    fn code(self) -> u32 {
        match self {
            VerifyKind::Off => 0,
            VerifyKind::Crc32c => 1,
            VerifyKind::Xxh3 => 2,
            VerifyKind::Fill => 3,
        }
    }

    fn from_code(code: u32) -> Option<VerifyKind> {
        match code {
            1 => Some(VerifyKind::Crc32c),
            2 => Some(VerifyKind::Xxh3),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            VerifyKind::Off => "off",
            VerifyKind::Crc32c => "crc32c",
            VerifyKind::Xxh3 => "xxh3",
            VerifyKind::Fill => "fill",
        }
    }
}

/// What the block at an offset is expected to hold.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    pub offset: u64,
    pub seed: u64,
    /// 0: any pass is accepted.
    pub pass: u32,
}

/// One verification failure, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct Mismatch {
    pub target: String,
    /// Offset of the block read (for a larger read holding several written blocks: of the
    /// written block that failed).
    pub offset: u64,
    /// payload | magic | kind | offset | pass | length | seed | sequence | checksum | bs
    pub field: &'static str,
    pub expected: String,
    pub found: String,
    /// Byte position inside the block of the first differing byte, when known.
    pub first_bad_byte: Option<u64>,
    /// For `bs`: the block size the data was written with (None: only a lower bound is known).
    pub written_bs: Option<u64>,
    /// For `bs`: the block size it was read with.
    pub read_bs: Option<u64>,
    /// The whole finding in one line.
    pub message: String,
}

/// Where a finding was made: the target and the offset of the block.
#[derive(Clone, Copy)]
struct Site<'a> {
    target: &'a str,
    offset: u64,
}

impl Site<'_> {
    fn mismatch(self, field: &'static str, expected: String, found: String, first_bad_byte: Option<u64>,
                message: String) -> Mismatch {
        Mismatch { target: self.target.to_string(), offset: self.offset, field, expected, found, first_bad_byte,
                   written_bs: None, read_bs: None, message }
    }

    /// A changed header field: names it and its first differing byte.
    fn header_field(self, name: &'static str, expected: u64, found: u64, show: fn(u64) -> String, note: &str) -> Mismatch {
        let (_, at, _) = FIELDS.iter().find(|f| f.0 == name).copied().expect("a header field");
        let diff = expected ^ found;
        let byte = at + if diff == 0 { 0 } else { (diff.trailing_zeros() / 8) as usize };
        let (expected, found) = (show(expected), show(found));
        let message = format!("header field `{name}` at byte +{byte}: expected {expected}, found {found}{note}");
        self.mismatch(name, expected, found, Some(byte as u64), message)
    }

    fn payload_byte(self, at: usize, expected: u8, found: u8, note: &str) -> Mismatch {
        let (e, f) = (format!("byte {expected:#04x}"), format!("byte {found:#04x}"));
        let message = format!("payload byte +{at}: expected {expected:#04x}, found {found:#04x}{note}");
        self.mismatch("payload", e, f, Some(at as u64), message)
    }

    fn block_size(self, written: Option<u64>, read: u64, message: String) -> Mismatch {
        let expected = written.map_or_else(|| "unknown".to_string(), |w| w.to_string());
        let mut m = self.mismatch("bs", expected, read.to_string(), None, message);
        (m.written_bs, m.read_bs) = (written, Some(read));
        m
    }
}

fn decimal(v: u64) -> String {
    v.to_string()
}
fn hex(v: u64) -> String {
    format!("{v:#x}")
}

#[inline]
fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
#[inline]
fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The header as read.
struct Header {
    magic: u32,
    kind: u32,
    offset: u64,
    pass: u32,
    length: u32,
    seed: u64,
    checksum: u64,
}

impl Header {
    fn parse(b: &[u8]) -> Header {
        Header {
            magic: get_u32(b, 0),
            kind: get_u32(b, 4),
            offset: get_u64(b, 8),
            pass: get_u32(b, 16),
            length: get_u32(b, 20),
            seed: get_u64(b, 24),
            checksum: get_u64(b, 40),
        }
    }
}

fn checksum_of(kind: VerifyKind, head: &[u8], payload: &[u8]) -> u64 {
    match kind {
        VerifyKind::Crc32c => crc32c::crc32c_append(crc32c::crc32c(head), payload) as u64,
        VerifyKind::Xxh3 => {
            let mut h = xxhash_rust::xxh3::Xxh3::new();
            h.update(head);
            h.update(payload);
            h.digest()
        }
        VerifyKind::Off | VerifyKind::Fill => 0,
    }
}

/// The data every write of `verify = fill` carries: `len` pseudo-random bytes from `seed`, eight
/// at a time (the same stream `AlignedBuf::fill_random` writes).
pub fn fill_data(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(len);
    out
}

/// `verify = fill`: the block read at `offset` compared with the start of `expected` (the fill);
/// the first differing byte is reported.
pub fn check_fill(block: &[u8], expected: &[u8], offset: u64, target: &str) -> Option<Mismatch> {
    if block == &expected[..block.len()] {
        return None;
    }
    let at = block.iter().zip(expected).position(|(a, b)| a != b).unwrap_or(0);
    let (e, f) = (format!("{:#04x}", expected[at]), format!("{:#04x}", block[at]));
    Some(Mismatch {
        target: target.to_string(),
        offset,
        field: "payload",
        message: format!("payload byte +{at}: expected {e} (the fill written), found {f}"),
        expected: e,
        found: f,
        first_bad_byte: Some(at as u64),
        written_bs: None,
        read_bs: None,
    })
}

fn checksum(kind: VerifyKind, block: &[u8]) -> u64 {
    checksum_of(kind, &block[..40], &block[HEADER_LEN..])
}

/// The checksum the block would have with the header bytes at `at` replaced by `value`.
fn checksum_with(kind: VerifyKind, block: &[u8], at: usize, value: &[u8]) -> u64 {
    let mut head = [0u8; 40];
    head.copy_from_slice(&block[..40]);
    head[at..at + value.len()].copy_from_slice(value);
    checksum_of(kind, &head, &block[HEADER_LEN..])
}

/// The key a block's payload words are XORed with.
#[inline]
fn payload_key(seed: u64, offset: u64, pass: u32) -> u64 {
    Rng::derive(seed ^ (pass as u64).rotate_left(48), offset)
}

/// The payload stream of a seed: random words, except, for compressible data (`shape` = (chunk,
/// random bytes at its start)), the words past each chunk's random part, which are 0 (under a
/// block's key they become that key repeated, which a compressor keeps as little as zeros).
fn pattern_stream(seed: u64, words: usize, shape: Option<(usize, usize)>) -> Vec<u64> {
    let mut rng = Rng::new(Rng::derive(seed, 0x5041_5454));
    (0..words)
        .map(|i| {
            let w = rng.next_u64();
            match shape {
                Some((chunk, random)) if (i * 8) % chunk >= random => 0,
                _ => w,
            }
        })
        .collect()
}

/// The pseudo-random payload pattern of a seed, made once per worker for its block size. The
/// stream does not depend on the block size, so a block's payload is a prefix of a longer
/// block's: that is what lets a read with another block size be recognised.
pub struct Pattern {
    seed: u64,
    /// Compressible payloads: (chunk bytes, random bytes at the start of each chunk).
    shape: Option<(usize, usize)>,
    words: Vec<u64>,
    /// The same stream made longer, only when a read is matched against larger written blocks.
    longer: RefCell<Vec<u64>>,
}

impl Pattern {
    #[cfg(test)]
    pub fn new(seed: u64, block_len: usize) -> Pattern {
        Pattern::shaped(seed, block_len, 0, 0)
    }

    /// The pattern of a group's verified blocks: compressible by `compress_percentage` in chunks
    /// of `chunk` payload bytes (0: random throughout).
    pub fn shaped(seed: u64, block_len: usize, compress_percentage: u32, chunk: usize) -> Pattern {
        let shape = (compress_percentage > 0).then(|| (chunk, crate::buffer::random_part(chunk, compress_percentage)));
        Pattern { seed, shape, words: pattern_stream(seed, (block_len - HEADER_LEN).div_ceil(8), shape), longer: RefCell::new(Vec::new()) }
    }

    /// The payload of the block at `offset` written in `pass`.
    #[inline]
    fn fill(&self, payload: &mut [u8], seed: u64, offset: u64, pass: u32) {
        self.fill_key(payload, payload_key(seed, offset, pass));
    }

    /// A payload (of at most the pattern's block size) under `key`.
    #[inline]
    fn fill_key(&self, payload: &mut [u8], key: u64) {
        let whole_words = payload.len() / 8;
        let mut chunks = payload.chunks_exact_mut(8);
        for (chunk, w) in (&mut chunks).zip(&self.words) {
            chunk.copy_from_slice(&(w ^ key).to_le_bytes());
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let w = (self.words[whole_words] ^ key).to_le_bytes();
            rest.copy_from_slice(&w[..rest.len()]);
        }
    }

    /// Position of the first byte of `payload` that differs from the payload under `key`.
    fn first_difference(&self, payload: &[u8], key: u64) -> Option<usize> {
        let mut expected = vec![0u8; payload.len()];
        self.fill_key(&mut expected, key);
        payload.iter().zip(&expected).position(|(a, b)| a != b)
    }

    /// The key a payload's first word was made with (assuming it is intact).
    fn key_of(&self, payload: &[u8]) -> u64 {
        get_u64(payload, 0) ^ self.words[0]
    }

    /// At least `n` words of the stream (the worker's own, or a longer one made on demand).
    fn stream(&self, n: usize) -> std::cell::Ref<'_, Vec<u64>> {
        {
            let mut longer = self.longer.borrow_mut();
            if longer.len() < n {
                *longer = pattern_stream(self.seed, n.max(self.words.len()), self.shape);
            }
        }
        self.longer.borrow()
    }
}

/// Write header, deterministic payload and checksum into a block about to be written.
pub fn stamp(block: &mut [u8], pattern: &Pattern, kind: VerifyKind, e: Expect, sequence: u64) {
    let len = block.len();
    pattern.fill(&mut block[HEADER_LEN..], e.seed, e.offset, e.pass);
    block[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    block[4..8].copy_from_slice(&kind.code().to_le_bytes());
    block[8..16].copy_from_slice(&e.offset.to_le_bytes());
    block[16..20].copy_from_slice(&e.pass.to_le_bytes());
    block[20..24].copy_from_slice(&(len as u32).to_le_bytes());
    block[24..32].copy_from_slice(&e.seed.to_le_bytes());
    block[32..40].copy_from_slice(&sequence.to_le_bytes());
    let sum = checksum(kind, block);
    block[40..48].copy_from_slice(&sum.to_le_bytes());
}

/// Check a block just read. Returns the first problem found, or None. The clean path is one
/// checksum over the block; everything else runs only for a block that failed.
pub fn check(block: &[u8], pattern: &Pattern, kind: VerifyKind, e: Expect, target: &str) -> Option<Mismatch> {
    let site = Site { target, offset: e.offset };
    let h = Header::parse(block);
    if h.magic != MAGIC {
        return Some(no_header(block, pattern, kind, e, &h, site));
    }
    if h.length as usize != block.len() {
        return length_differs(block, pattern, kind, e, &h, site);
    }
    let computed = checksum(kind, block);
    if computed != h.checksum {
        return Some(damaged(block, pattern, kind, e, &h, computed, site));
    }
    // An intact block: is it the one expected here?
    if h.kind != kind.code() {
        return Some(site.header_field("kind", kind.code() as u64, h.kind as u64, decimal, ""));
    }
    if h.offset != e.offset {
        let m = format!("a whole block from elsewhere: header offset {} at offset {}", h.offset, e.offset);
        return Some(site.mismatch("offset", e.offset.to_string(), format!("{} (a block from elsewhere)", h.offset), Some(8), m));
    }
    if h.seed != e.seed {
        let m = format!("block written with seed {}, read with seed {}", h.seed, e.seed);
        return Some(site.mismatch("seed", e.seed.to_string(), h.seed.to_string(), Some(24), m));
    }
    if e.pass != 0 && h.pass != e.pass {
        let m = format!("stale data: block of pass {} where pass {} was expected", h.pass, e.pass);
        return Some(site.mismatch("pass", e.pass.to_string(), format!("{} (stale data)", h.pass), Some(16), m));
    }
    None
}

/// A block of the read's length whose checksum fails: payload damage, or which header field changed.
fn damaged(block: &[u8], pattern: &Pattern, kind: VerifyKind, e: Expect, h: &Header, computed: u64, site: Site) -> Mismatch {
    if let Some(written_kind) = VerifyKind::from_code(h.kind).filter(|k| *k != kind) {
        if checksum(written_kind, block) == h.checksum {
            let m = format!("written with verify {}, read with verify {}", written_kind.name(), kind.name());
            return site.mismatch("kind", kind.name().to_string(), written_kind.name().to_string(), Some(4), m);
        }
    }
    let payload = &block[HEADER_LEN..];
    let pass = if e.pass != 0 { e.pass } else { h.pass };
    let Some(i) = pattern.first_difference(payload, payload_key(e.seed, e.offset, pass)) else {
        return header_damage(kind, e, h, computed, site);
    };
    if e.pass == 0 && i < 8 {
        // Any pass is accepted, so the key came from the header's pass: if the payload is intact
        // under a pass one byte away, the pass field is what changed.
        let found_key = pattern.key_of(payload);
        for byte in 0..4 {
            for v in 1..=255u32 {
                let original = h.pass ^ (v << (8 * byte));
                if payload_key(e.seed, e.offset, original) == found_key
                    && pattern.first_difference(payload, found_key).is_none()
                {
                    return site.header_field("pass", original as u64, h.pass as u64, decimal, "");
                }
            }
        }
    }
    let mut expected = vec![0u8; payload.len()];
    pattern.fill(&mut expected, e.seed, e.offset, pass);
    let note = format!(" (stored checksum {:#x}, computed {computed:#x})", h.checksum);
    site.payload_byte(HEADER_LEN + i, expected[i], payload[i], &note)
}

/// The payload is the expected one and the checksum fails: name the header field that changed.
fn header_damage(kind: VerifyKind, e: Expect, h: &Header, computed: u64, site: Site) -> Mismatch {
    if h.kind != kind.code() {
        return site.header_field("kind", kind.code() as u64, h.kind as u64, decimal, "");
    }
    if h.offset != e.offset {
        return site.header_field("offset", e.offset, h.offset, decimal, "");
    }
    if e.pass != 0 && h.pass != e.pass {
        return site.header_field("pass", e.pass as u64, h.pass as u64, decimal, "");
    }
    if h.seed != e.seed {
        return site.header_field("seed", e.seed, h.seed, decimal, "");
    }
    // Every field with an expected value is right: the checksum field or the sequence changed. A
    // changed checksum byte differs from the computed one in that byte alone; a changed sequence
    // changes the whole computed checksum.
    let diff = h.checksum ^ computed;
    if diff.to_le_bytes().iter().filter(|b| **b != 0).count() == 1 {
        return site.header_field("checksum", computed, h.checksum, hex, "");
    }
    let m = format!(
        "header field `sequence` (bytes +32..+40): the checksum ({:#x} stored, {computed:#x} computed) fails with \
         every other field as expected, and the sequence has no expected value",
        h.checksum
    );
    site.mismatch("sequence", "the sequence the checksum was made with".to_string(), "another".to_string(), None, m)
}

/// No magic at the block's start: a changed magic, a read starting inside a larger written block,
/// or data never stamped.
fn no_header(block: &[u8], pattern: &Pattern, kind: VerifyKind, e: Expect, h: &Header, site: Site) -> Mismatch {
    if h.length as usize == block.len() && checksum_with(kind, block, 0, &MAGIC.to_le_bytes()) == h.checksum {
        return site.header_field("magic", MAGIC as u64, h.magic as u64, |v| format!("{v:#010x}"), "");
    }
    if let Some(m) = inside_larger_block(block, pattern, e, site) {
        return m;
    }
    let m = format!(
        "no verification header: expected magic \"SLV1\", found {:#010x} (not written with --verify, overwritten, \
         or written with another bs)",
        h.magic
    );
    site.mismatch("magic", format!("{MAGIC:#010x} (\"SLV1\")"), format!("{:#010x}", h.magic), Some(0), m)
}

/// The header's length is not the read's: a changed length field, or another block size.
fn length_differs(block: &[u8], pattern: &Pattern, kind: VerifyKind, e: Expect, h: &Header, site: Site) -> Option<Mismatch> {
    let read_len = block.len();
    if checksum_with(kind, block, 20, &(read_len as u32).to_le_bytes()) == h.checksum {
        return Some(site.header_field("length", read_len as u64, h.length as u64, decimal, ""));
    }
    let written = h.length as usize;
    if (written as u64) < MIN_BLOCK {
        let m = format!("header field `length` at byte +20: {written} is below the smallest verified block ({MIN_BLOCK})");
        return Some(site.mismatch("length", read_len.to_string(), written.to_string(), Some(20), m));
    }
    let bs_message = format!("written with bs {written}, read with {read_len}");
    if written < read_len {
        // A larger read: check every whole written block inside it on its own.
        for k in 0..read_len / written {
            let sub = &block[k * written..(k + 1) * written];
            let at = Expect { offset: e.offset + (k * written) as u64, ..e };
            if let Some(m) = check(sub, pattern, kind, at, site.target).filter(|m| m.field != "bs") {
                return Some(m);
            }
        }
        return Some(site.block_size(Some(written as u64), read_len as u64, bs_message));
    }
    // A smaller read starting at a written block: its checksum covers bytes not read, so check
    // the header fields and the payload bytes present.
    let note = " (the block is longer than the read, so its checksum cannot be checked)";
    if h.kind != kind.code() {
        return Some(site.header_field("kind", kind.code() as u64, h.kind as u64, decimal, note));
    }
    if h.offset != e.offset {
        return Some(site.header_field("offset", e.offset, h.offset, decimal, note));
    }
    if h.seed != e.seed {
        return Some(site.header_field("seed", e.seed, h.seed, decimal, note));
    }
    if e.pass != 0 && h.pass != e.pass {
        return Some(site.header_field("pass", e.pass as u64, h.pass as u64, decimal, note));
    }
    let pass = if e.pass != 0 { e.pass } else { h.pass };
    let payload = &block[HEADER_LEN..];
    if let Some(i) = pattern.first_difference(payload, payload_key(e.seed, e.offset, pass)) {
        let mut expected = vec![0u8; payload.len()];
        pattern.fill(&mut expected, e.seed, e.offset, pass);
        return Some(site.payload_byte(HEADER_LEN + i, expected[i], payload[i], &format!(" (written with bs {written})")));
    }
    Some(site.block_size(Some(written as u64), read_len as u64, bs_message))
}

/// Written block sizes a read of `read_len` bytes may have started inside: multiples of the read
/// up to 16 of it and powers of two, up to LARGEST_SEARCHED_BLOCK.
fn candidate_written_sizes(read_len: u64) -> Vec<u64> {
    let mut sizes: Vec<u64> = (2..=16).map(|k| k * read_len).collect();
    let mut p = read_len.next_power_of_two();
    while p <= LARGEST_SEARCHED_BLOCK {
        sizes.push(p);
        p *= 2;
    }
    sizes.retain(|&l| l > read_len && l <= LARGEST_SEARCHED_BLOCK);
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// A read with no header at its start may begin `d` bytes into a larger written block at
/// `offset - d`: its bytes are then that block's payload from byte d on.
fn inside_larger_block(block: &[u8], pattern: &Pattern, e: Expect, site: Site) -> Option<Mismatch> {
    let read_len = block.len() as u64;
    for written in candidate_written_sizes(read_len) {
        let d = e.offset % written;
        if d < HEADER_LEN as u64 || !(d - HEADER_LEN as u64).is_multiple_of(8) {
            continue;
        }
        let first_word = ((d - HEADER_LEN as u64) / 8) as usize;
        let within = read_len.min(written - d) as usize; // bytes of the read inside that block
        if within < 16 {
            continue;
        }
        let words = pattern.stream(first_word + within.div_ceil(8));
        let key = get_u64(block, 0) ^ words[first_word];
        let start = e.offset - d;
        if get_u64(block, 8) ^ words[first_word + 1] != key || (e.pass != 0 && key != payload_key(e.seed, start, e.pass)) {
            continue;
        }
        let expected_byte = |j: usize| (words[first_word + j / 8] ^ key).to_le_bytes()[j % 8];
        if let Some(j) = (0..within).find(|&j| block[j] != expected_byte(j)) {
            let note = format!(" (the read starts {d} bytes into a block written at offset {start})");
            return Some(site.payload_byte(j, expected_byte(j), block[j], &note));
        }
        // Where the read runs past that block's end, the next block's header tells the written size.
        let next = &block[within..];
        let known = (within < block.len() && next.len() >= 24 && get_u32(next, 0) == MAGIC
            && get_u32(next, 20) as u64 == d + within as u64)
            .then_some(d + within as u64);
        let written_text = known.map_or_else(|| format!("a larger bs (at least {})", d + read_len), |w| format!("bs {w}"));
        let m = format!("written with {written_text}, read with {read_len}: the read starts {d} bytes into the block written at offset {start}");
        return Some(site.block_size(known, read_len, m));
    }
    None
}

/// A worker's verification counts and its first mismatches in full.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyTally {
    pub checked_blocks: u64,
    /// Blocks whose data is not what was written there: damaged, from elsewhere, or stale.
    pub mismatches: u64,
    pub first: Vec<Mismatch>,
    /// Blocks read with another block size than they were written with: not corruption, but
    /// not checked either.
    pub bs_mismatches: u64,
    /// The first of those, in full.
    pub first_bs_mismatch: Option<Mismatch>,
}

impl VerifyTally {
    pub fn record(&mut self, m: Option<Mismatch>, keep: usize) {
        self.checked_blocks += 1;
        match m {
            None => {}
            Some(m) if m.field == "bs" => {
                self.bs_mismatches += 1;
                self.first_bs_mismatch.get_or_insert(m);
            }
            Some(m) => {
                self.mismatches += 1;
                if self.first.len() < keep {
                    self.first.push(m);
                }
            }
        }
    }

    pub fn merge(&mut self, o: &VerifyTally, keep: usize) {
        self.checked_blocks += o.checked_blocks;
        self.mismatches += o.mismatches;
        self.bs_mismatches += o.bs_mismatches;
        if self.first_bs_mismatch.is_none() {
            self.first_bs_mismatch = o.first_bs_mismatch.clone();
        }
        for m in &o.first {
            if self.first.len() < keep {
                self.first.push(m.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: Expect = Expect { offset: 8192, seed: 42, pass: 3 };

    #[test]
    fn fill_is_compared_byte_by_byte() {
        let fill = fill_data(7, 47008);
        assert_eq!(fill.len(), 47008);
        assert_eq!(fill, fill_data(7, 47008), "deterministic");
        assert_ne!(fill[..64], fill_data(8, 64)[..], "another seed, other data");
        assert!(check_fill(&fill, &fill, 0, "f").is_none());
        assert!(check_fill(&fill[..4096], &fill, 0, "f").is_none(), "a shorter request compares its own bytes");
        let mut bad = fill.clone();
        bad[1234] ^= 0x10;
        let m = check_fill(&bad, &fill, 47008, "f").unwrap();
        assert_eq!((m.field, m.first_bad_byte, m.offset), ("payload", Some(1234), 47008));
        assert!(m.message.contains("byte +1234"), "{}", m.message);
    }

    fn pattern() -> Pattern {
        Pattern::new(E.seed, 4096)
    }

    fn block(kind: VerifyKind) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        stamp(&mut b, &pattern(), kind, E, 7);
        b
    }

    /// A file image of `blocks` blocks of `bs` bytes, each stamped at its offset.
    fn image(bs: usize, blocks: usize) -> Vec<u8> {
        let p = Pattern::new(E.seed, bs);
        let mut img = vec![0u8; bs * blocks];
        for (i, b) in img.chunks_exact_mut(bs).enumerate() {
            stamp(b, &p, VerifyKind::Crc32c, Expect { offset: (i * bs) as u64, ..E }, i as u64 + 1);
        }
        img
    }

    fn check_in(img: &[u8], offset: usize, len: usize) -> Option<Mismatch> {
        let e = Expect { offset: offset as u64, ..E };
        check(&img[offset..offset + len], &Pattern::new(E.seed, len), VerifyKind::Crc32c, e, "t")
    }

    fn field_at(byte: usize) -> &'static str {
        FIELDS.iter().find(|(_, at, width)| (*at..at + width).contains(&byte)).unwrap().0
    }

    #[test]
    fn a_stamped_block_checks_clean() {
        for kind in [VerifyKind::Crc32c, VerifyKind::Xxh3] {
            assert!(check(&block(kind), &pattern(), kind, E, "t").is_none());
        }
    }

    /// Every single byte of the block, flipped, is detected — payload and header alike.
    #[test]
    fn any_single_flipped_byte_is_detected() {
        for kind in [VerifyKind::Crc32c, VerifyKind::Xxh3] {
            let good = block(kind);
            for i in 0..good.len() {
                let mut b = good.clone();
                b[i] ^= 0x01;
                let m = check(&b, &pattern(), kind, E, "t").unwrap_or_else(|| panic!("flip at byte {i} missed ({kind:?})"));
                if i >= HEADER_LEN {
                    assert_eq!(m.first_bad_byte, Some(i as u64), "{m:?}");
                    assert_eq!(m.field, "payload");
                    assert!(m.message.starts_with(&format!("payload byte +{i}:")), "{}", m.message);
                }
            }
        }
    }

    /// A changed header byte is reported as its field, at its byte — not as payload damage —
    /// whether the pass is required or any pass is accepted.
    #[test]
    fn every_flipped_header_byte_names_its_field() {
        for kind in [VerifyKind::Crc32c, VerifyKind::Xxh3] {
            let good = block(kind);
            for expect in [E, Expect { pass: 0, ..E }] {
                for mask in [0x01u8, 0x80, 0xff] {
                    for i in 0..HEADER_LEN {
                        let mut b = good.clone();
                        b[i] ^= mask;
                        let m = check(&b, &pattern(), kind, expect, "t")
                            .unwrap_or_else(|| panic!("flip {mask:#x} at byte {i} missed ({kind:?})"));
                        let field = field_at(i);
                        assert_eq!(m.field, field, "byte {i} mask {mask:#x} {kind:?} pass {}: {}", expect.pass, m.message);
                        if field == "sequence" {
                            assert_eq!(m.first_bad_byte, None);
                        } else {
                            assert_eq!(m.first_bad_byte, Some(i as u64), "{}", m.message);
                            assert!(m.message.starts_with(&format!("header field `{field}` at byte +{i}: expected ")), "{}", m.message);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn header_field_report_gives_expected_and_found_values() {
        let mut b = block(VerifyKind::Crc32c);
        b[9] ^= 0x01; // offset 8192 -> 8448
        let m = check(&b, &pattern(), VerifyKind::Crc32c, E, "t").unwrap();
        assert_eq!(m.message, "header field `offset` at byte +9: expected 8192, found 8448");
        assert_eq!((m.expected.as_str(), m.found.as_str()), ("8192", "8448"));
    }

    #[test]
    fn wrong_offset_seed_and_stale_pass_are_named() {
        let b = block(VerifyKind::Crc32c);
        let m = check(&b, &pattern(), VerifyKind::Crc32c, Expect { offset: 0, ..E }, "t").unwrap();
        assert_eq!((m.field, m.expected.as_str()), ("offset", "0"));
        let m = check(&b, &pattern(), VerifyKind::Crc32c, Expect { seed: 1, ..E }, "t").unwrap();
        assert_eq!(m.field, "seed");
        let m = check(&b, &pattern(), VerifyKind::Crc32c, Expect { pass: 4, ..E }, "t").unwrap();
        assert_eq!(m.field, "pass");
        assert!(check(&b, &pattern(), VerifyKind::Crc32c, Expect { pass: 0, ..E }, "t").is_none());
        // blocks at other offsets differ (the key changes every word), same offset is reproducible
        let mut other = vec![0u8; 4096];
        stamp(&mut other, &pattern(), VerifyKind::Crc32c, Expect { offset: 0, ..E }, 7);
        assert_ne!(other[HEADER_LEN..], b[HEADER_LEN..]);
        let zeros = vec![0u8; 4096];
        assert_eq!(check(&zeros, &pattern(), VerifyKind::Crc32c, E, "t").unwrap().field, "magic");
    }

    #[test]
    fn data_checked_with_the_other_checksum_kind_is_named() {
        let b = block(VerifyKind::Xxh3);
        let m = check(&b, &pattern(), VerifyKind::Crc32c, E, "t").unwrap();
        assert_eq!((m.field, m.message.as_str()), ("kind", "written with verify xxh3, read with verify crc32c"));
    }

    #[test]
    fn a_larger_read_over_intact_blocks_is_a_block_size_mismatch() {
        let img = image(4096, 8);
        for at in [0, 8192, 16384] {
            let m = check_in(&img, at, 8192).expect("a mismatch");
            assert_eq!((m.field, m.written_bs, m.read_bs), ("bs", Some(4096), Some(8192)));
            assert_eq!(m.message, "written with bs 4096, read with 8192");
        }
        let m = check_in(&img, 0, 16384).unwrap();
        assert_eq!(m.message, "written with bs 4096, read with 16384");
    }

    #[test]
    fn damage_inside_a_larger_read_is_reported_as_damage_at_its_block() {
        let mut img = image(4096, 8);
        img[12288 + 100] ^= 0x20; // payload of the second written block of the read at 8192
        let m = check_in(&img, 8192, 8192).unwrap();
        assert_eq!((m.field, m.offset, m.first_bad_byte), ("payload", 12288, Some(100)));
        let mut img = image(4096, 8);
        img[12288 + 9] ^= 0x01; // its header offset field
        let m = check_in(&img, 8192, 8192).unwrap();
        assert_eq!((m.field, m.offset, m.first_bad_byte), ("offset", 12288, Some(9)));
    }

    #[test]
    fn a_smaller_read_at_a_written_block_is_a_block_size_mismatch() {
        let img = image(8192, 4);
        let m = check_in(&img, 8192, 4096).unwrap();
        assert_eq!((m.field, m.written_bs, m.read_bs), ("bs", Some(8192), Some(4096)));
        assert_eq!(m.message, "written with bs 8192, read with 4096");
        // its payload is still checked as far as it was read
        let mut img = image(8192, 4);
        img[8192 + 1000] ^= 0x04;
        let m = check_in(&img, 8192, 4096).unwrap();
        assert_eq!((m.field, m.first_bad_byte), ("payload", Some(1000)));
    }

    #[test]
    fn a_smaller_read_inside_a_written_block_is_a_block_size_mismatch() {
        let img = image(8192, 4);
        let m = check_in(&img, 12288, 4096).unwrap(); // second half of the block at 8192
        assert_eq!((m.field, m.written_bs, m.read_bs), ("bs", None, Some(4096)));
        assert_eq!(m.message, "written with a larger bs (at least 8192), read with 4096: the read starts 4096 bytes \
                               into the block written at offset 8192");
        // a power-of-two written size seen from a read of 3 KiB crossing into the next block
        let m = check_in(&img, 6144, 6144).unwrap();
        assert_eq!((m.field, m.written_bs), ("bs", Some(8192)), "{}", m.message);
        // a large written block, read in small pieces far inside it
        let img = image(1 << 20, 2);
        let m = check_in(&img, (1 << 20) + 300 * 512, 512).unwrap();
        assert_eq!((m.field, m.read_bs), ("bs", Some(512)), "{}", m.message);
        assert!(m.message.ends_with("starts 153600 bytes into the block written at offset 1048576"), "{}", m.message);
        // damage there is damage
        let mut img = image(8192, 4);
        img[12288 + 40] ^= 0x10;
        let m = check_in(&img, 12288, 4096).unwrap();
        assert_eq!((m.field, m.first_bad_byte), ("payload", Some(40)));
    }

    #[test]
    fn unstamped_data_is_still_no_header() {
        let zeros = vec![0u8; 1 << 16];
        let m = check_in(&zeros, 4096, 4096).unwrap();
        assert_eq!(m.field, "magic");
        assert!(m.message.starts_with("no verification header"), "{}", m.message);
    }

    #[test]
    fn block_size_mismatches_are_counted_apart_from_corruption() {
        let img = image(4096, 8);
        let mut tally = VerifyTally::default();
        tally.record(check_in(&img, 0, 8192), 10);
        tally.record(check_in(&img, 8192, 8192), 10);
        tally.record(None, 10);
        let mut damaged = image(4096, 2);
        damaged[200] ^= 1;
        tally.record(check_in(&damaged, 0, 4096), 10);
        assert_eq!((tally.checked_blocks, tally.mismatches, tally.bs_mismatches), (4, 1, 2));
        assert_eq!(tally.first.len(), 1);
        assert_eq!(tally.first_bs_mismatch.as_ref().unwrap().offset, 0);
        let mut merged = VerifyTally::default();
        merged.merge(&tally, 10);
        merged.merge(&tally, 10);
        assert_eq!((merged.mismatches, merged.bs_mismatches, merged.first.len()), (2, 4, 2));
    }
}
