//! Aligned I/O buffers, allocated once per worker (one per request slot), and the scrambling that
//! keeps the data written from them unique. O_DIRECT needs the memory aligned to the device's DMA
//! alignment; 4 KiB covers every common device.
//!
//! Scrambling (fio's scramble_buffers, on by default there too). A slot's buffer is filled with
//! pseudo-random bytes once and reused by every request the slot carries, so without it a run at
//! queue depth 32 would write only 32 distinct blocks, and a deduplicating target (ZFS dedup, VDO,
//! most all-flash arrays) would store almost nothing of what was "written". Before each write the
//! slot's bytes are changed a little, per 512-byte sector (layout of one sector, little-endian):
//!   bytes L..L+8   the sector's offset in the target, L = 64 x ((sequence ^ (offset / 512)) & 7),
//!                  one of the sector's first eight cache lines, the same for every sector of the
//!                  write (fio: the same rule from the issue time's nanoseconds);
//!   bytes 48..56   the writer's nonce, drawn once per writer from its seed and the wall clock;
//!   bytes 56..64   the writer's write sequence number, 1, 2, 3 ... (fio writes the issue time,
//!                  seconds and nanoseconds, here).
//! A counter and a nonce instead of fio's issue time: two writes of one writer can never carry the
//! same value however coarse the clock (fio's two writes of one offset within one clock tick would
//! be identical), no clock is read for it, and the nonce keeps writers, phases and runs apart. So
//! within a run no two sectors written are byte-identical: the same writer's sectors differ in
//! (sequence, offset), two writers' in their nonce. Cost: three 8-byte stores per 512 bytes. A
//! sector shorter than 64 bytes (the tail of an odd-sized request) is left as it is.
//!
//! Fresh data per write. The stamps alone keep a block-level deduplicator from matching two
//! writes, but not a compressor whose window spans two writes of one slot (zstd's is megabytes,
//! a ZFS record holds several small writes): the bytes between the stamps repeat. So before each
//! write the random bytes of the slot are XORed with a key of that write (from the writer's nonce
//! and the write's sequence; `rekey`), one pass over data the write is about to read anyway; two
//! writes then differ in nearly every byte and the data written compresses by nothing (fio's
//! refill_buffers makes new random data for the same end, at a higher cost). A buffer_pattern's
//! bytes are the user's and stay as given.
//!
//! Data patterns (fio's buffer_compress_percentage, buffer_compress_chunk, dedupe_percentage):
//! - compressible data: every chunk of `compress_chunk` bytes of a slot is random for its first
//!   (100 − P) % and fixed (zeros, or buffer_pattern's bytes) for the rest, as fio makes it, so a
//!   compressor keeps about (100 − P) % of it. The scrambling stamps then go to the start of each
//!   chunk, inside its random part (`DataShape::Chunked`): 24 bytes (offset, nonce, sequence,
//!   each mixed with a hash of the write's key and the chunk's offset, so they look as random as
//!   the bytes around them), so they change nothing a compressor could have saved while that part is at least
//!   24 bytes long (P ≤ 95 % at the default 512-byte chunk). Rekeyed random data is stamped the
//!   same way, in 512-byte chunks (`DataShape::Chunked`): at the same bytes every write, since an
//!   earlier write's stamp left elsewhere would not carry the new key;
//! - duplicate data: a share D of the writes re-create an earlier write of the same writer byte
//!   for byte (every slot holds the same base data, and the earlier write's offset and sequence
//!   are stamped again: `Scrambler::stamp_as`), as fio's dedupe_mode=repeat repeats earlier
//!   buffers; the rest are unique as above.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::rng::Rng;

const HUGE_PAGE: usize = 2 << 20;

pub struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

// The buffer is plain memory owned by one worker; moving it to the worker thread is safe.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    pub fn new(len: usize, align: usize) -> AlignedBuf {
        // Large regions get 2 MiB alignment and a transparent-huge-page hint: the kernel's copy to
        // or from a 1 MiB request then walks one TLB entry instead of 256.
        let (len, align) = if len >= HUGE_PAGE / 2 {
            (len.div_ceil(HUGE_PAGE) * HUGE_PAGE, align.max(HUGE_PAGE))
        } else {
            (len.max(1), align.max(1))
        };
        let layout = Layout::from_size_align(len, align).expect("valid buffer layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        if len >= HUGE_PAGE {
            // SAFETY: advisory only, on memory we own; failure (THP disabled) is harmless.
            unsafe { libc::madvise(ptr as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
        }
        AlignedBuf { ptr, layout }
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len()) }
    }

    /// Fill with pseudo-random bytes so compressing storage cannot shortcut writes (a
    /// `Scrambler` keeps deduplicating storage from storing repeated writes of them once).
    pub fn fill_random(&mut self, seed: u64) {
        let mut rng = Rng::new(seed);
        for chunk in self.as_mut_slice().chunks_mut(8) {
            let v = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// The bytes of a pattern written as `0x` and hex digits (an odd count gets a leading 0, as fio
/// reads 0xABC); at most 4 KiB of them.
pub fn parse_hex_pattern(text: &str) -> Result<Vec<u8>, String> {
    let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"))
        .ok_or_else(|| format!("'{text}' is not hex bytes; use 0x and hex digits, e.g. 0xdeadbeef or 0x00"))?;
    if digits.is_empty() || digits.len() > 8192 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("'{text}' is not hex bytes; use 0x and 1 to 8192 hex digits, e.g. 0xdeadbeef or 0x00"));
    }
    let padded = if digits.len() % 2 == 1 { format!("0{digits}") } else { digits.to_string() };
    Ok((0..padded.len()).step_by(2).map(|i| u8::from_str_radix(&padded[i..i + 2], 16).expect("hex digits")).collect())
}

/// `pattern` repeated over `buf`, starting again every `period` bytes (each request slot, each
/// laid-out block), as fio fills an I/O buffer from its start.
pub fn fill_pattern(buf: &mut [u8], pattern: &[u8], period: usize) {
    for block in buf.chunks_mut(period.max(1)) {
        for (b, p) in block.iter_mut().zip(pattern.iter().cycle()) {
            *b = *p;
        }
    }
}

/// The unit scrambling works in: every 512 bytes of a write carry their own offset.
pub const SCRAMBLE_SECTOR: usize = 512;

/// Where a write's scrambling stamps go, and which bytes its key changes (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataShape {
    /// Data not rekeyed (a buffer_pattern's): in every 512-byte sector, the offset at one of its
    /// first eight cache lines and the nonce and sequence at bytes 48..64.
    Sectors,
    /// Chunks of `chunk` bytes whose first `random` bytes are random (all of them for random
    /// data, in 512-byte chunks): offset, nonce and sequence at bytes 0..24 of every chunk, the
    /// same bytes every write, so no earlier write's stamp is left behind when the key changes.
    Chunked { chunk: usize, random: usize },
}

/// One writer's scrambling state: its nonce and its write sequence (see the module comment).
pub struct Scrambler {
    nonce: u64,
    sequence: u64,
    shape: DataShape,
}

impl Scrambler {
    /// A writer's scrambler: the nonce from its seed and the wall clock, so the same job run twice
    /// (or the same participant in the next phase) writes other bytes.
    pub fn new(seed: u64) -> Scrambler {
        let clock = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        Scrambler::with_nonce(Rng::derive(seed, clock))
    }

    /// A scrambler with a given nonce (reproducible, for tests).
    pub fn with_nonce(nonce: u64) -> Scrambler {
        Scrambler { nonce, sequence: 0, shape: DataShape::Sectors }
    }

    /// The same scrambler, stamping data of this shape.
    pub fn shaped(mut self, shape: DataShape) -> Scrambler {
        self.set_shape(shape);
        self
    }

    /// Stamp data of this shape from now on.
    pub fn set_shape(&mut self, shape: DataShape) {
        self.shape = shape;
    }

    /// Stamp `data`, about to be written at `offset`, with the next sequence number: every 512-byte
    /// sector (every chunk, for compressible data) gets its own offset, the nonce and that number.
    /// Returns the number. (The worker and the layout call `next_sequence`, `rekey` and `stamp_as`
    /// themselves.)
    #[cfg(test)]
    pub fn scramble(&mut self, data: &mut [u8], offset: u64) -> u64 {
        let sequence = self.next_sequence();
        self.stamp_as(data, offset, sequence);
        sequence
    }

    /// The sequence number of the next write.
    #[inline]
    pub fn next_sequence(&mut self) -> u64 {
        self.sequence += 1;
        self.sequence
    }

    /// Give `data`'s random bytes the key of write `sequence` (`held` is the key they carry now,
    /// updated): over the same base data, the same bytes for the same write.
    #[inline]
    pub fn rekey(&self, data: &mut [u8], held: &mut u64, sequence: u64) {
        let key = Rng::derive(self.nonce, sequence);
        xor_random_part(data, *held ^ key, self.shape);
        *held = key;
    }

    /// Stamp `data` as the write (`offset`, `sequence`) of this writer was stamped: over the same
    /// base data, the same bytes (a duplicate write re-creates an earlier one).
    #[inline]
    pub fn stamp_as(&self, data: &mut [u8], offset: u64, sequence: u64) {
        let nonce = self.nonce;
        if let DataShape::Chunked { chunk, .. } = self.shape {
            // mixed with a hash of the write's key and the chunk's offset: as random as the bytes
            // around them (plain offsets and counters would give a compressor a few percent), and
            // still a function of (offset, sequence), which a repeated write stamps again
            let key = Rng::derive(nonce, sequence);
            let mut at = offset;
            for c in data.chunks_mut(chunk) {
                if c.len() >= 24 {
                    let h = Rng::derive(key, at);
                    c[0..8].copy_from_slice(&(at ^ h).to_le_bytes());
                    c[8..16].copy_from_slice(&(nonce ^ h.rotate_left(21)).to_le_bytes());
                    c[16..24].copy_from_slice(&(sequence ^ h.rotate_left(42)).to_le_bytes());
                }
                at = at.wrapping_add(chunk as u64);
            }
            return;
        }
        let line = ((sequence ^ (offset / SCRAMBLE_SECTOR as u64)) & 7) as usize * 64;
        let mut sectors = data.chunks_exact_mut(SCRAMBLE_SECTOR);
        let mut at = offset;
        for sector in &mut sectors {
            stamp_sector(sector, line, at, nonce, sequence);
            at = at.wrapping_add(SCRAMBLE_SECTOR as u64);
        }
        let tail = sectors.into_remainder();
        if tail.len() >= 64 {
            // a short last sector: its offset where it fits, else at its start
            let line = if line + 8 <= tail.len() { line } else { 0 };
            stamp_sector(tail, line, at, nonce, sequence);
        }
    }
}

/// Fill `buf` with compressible data: in each slot of `period` bytes, every `chunk` bytes start
/// with (100 − `percent`) % random bytes (from `seed`) and end with `fixed` repeated (zeros when
/// empty), as fio's buffer_compress_percentage fills its buffers.
pub fn fill_compressible(buf: &mut [u8], seed: u64, percent: u32, chunk: usize, fixed: &[u8], period: usize) {
    let mut rng = Rng::new(seed);
    let random_len = random_part(chunk, percent);
    for slot in buf.chunks_mut(period.max(1)) {
        for c in slot.chunks_mut(chunk.max(1)) {
            let cut = random_len.min(c.len());
            let (random, rest) = c.split_at_mut(cut);
            for w in random.chunks_mut(8) {
                let v = rng.next_u64().to_le_bytes();
                w.copy_from_slice(&v[..w.len()]);
            }
            if fixed.is_empty() {
                rest.fill(0);
            } else {
                for (b, p) in rest.iter_mut().zip(fixed.iter().cycle()) {
                    *b = *p;
                }
            }
        }
    }
}

/// XOR `delta` into every 8 bytes of `data`'s random part: all of it for random data, each chunk's
/// first part for compressible data (its fixed part stays as it is).
#[inline]
fn xor_random_part(data: &mut [u8], delta: u64, shape: DataShape) {
    if delta == 0 {
        return;
    }
    let xor = |part: &mut [u8]| {
        let mut words = part.chunks_exact_mut(8);
        for w in &mut words {
            let v = u64::from_le_bytes(w.try_into().expect("8 bytes")) ^ delta;
            w.copy_from_slice(&v.to_le_bytes());
        }
        for (b, d) in words.into_remainder().iter_mut().zip(delta.to_le_bytes()) {
            *b ^= d;
        }
    };
    match shape {
        DataShape::Sectors => xor(data),
        DataShape::Chunked { chunk, random } => {
            for c in data.chunks_mut(chunk) {
                let cut = random.min(c.len());
                xor(&mut c[..cut]);
            }
        }
    }
}

/// The random bytes at the start of a chunk of compressible data: (100 − percent) % of it,
/// rounded to the nearest byte.
pub fn random_part(chunk: usize, percent: u32) -> usize {
    (chunk * (100 - percent.min(100)) as usize + 50) / 100
}

/// One sector (at least 64 bytes; `line` + 8 inside it): offset at `line`, nonce and sequence at
/// bytes 48..64.
#[inline(always)]
fn stamp_sector(sector: &mut [u8], line: usize, offset: u64, nonce: u64, sequence: u64) {
    sector[48..56].copy_from_slice(&nonce.to_le_bytes());
    sector[56..64].copy_from_slice(&sequence.to_le_bytes());
    sector[line..line + 8].copy_from_slice(&offset.to_le_bytes());
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this exact layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_hex_bytes_repeated_from_each_block_start() {
        assert_eq!(parse_hex_pattern("0xdeadbeef").unwrap(), vec![0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(parse_hex_pattern("0xABC").unwrap(), vec![0x0a, 0xbc]);
        assert_eq!(parse_hex_pattern("0x00").unwrap(), vec![0]);
        for bad in ["deadbeef", "0x", "0xzz"] {
            assert!(parse_hex_pattern(bad).unwrap_err().contains("is not hex bytes"), "{bad}");
        }
        let mut buf = vec![0xffu8; 10];
        fill_pattern(&mut buf, &[1, 2, 3], 5);
        assert_eq!(buf, vec![1, 2, 3, 1, 2, 1, 2, 3, 1, 2]);
    }

    #[test]
    fn aligned_and_filled() {
        let mut b = AlignedBuf::new(8192 + 3, 4096);
        assert_eq!(b.as_mut_ptr() as usize % 4096, 0);
        b.fill_random(1);
        assert!(b.as_mut_slice().iter().filter(|&&x| x == 0).count() < 200);
    }

    fn sectors(data: &[u8]) -> std::collections::HashSet<&[u8]> {
        data.chunks(SCRAMBLE_SECTOR).collect()
    }

    /// The same buffer written again at the same offset differs, and only in the stamped bytes.
    #[test]
    fn two_writes_of_one_slot_differ() {
        let mut b = AlignedBuf::new(4096, 4096);
        b.fill_random(3);
        let mut s = Scrambler::with_nonce(0xABCD);
        s.scramble(b.as_mut_slice(), 8192);
        let first = b.as_mut_slice().to_vec();
        s.scramble(b.as_mut_slice(), 8192);
        let second = b.as_mut_slice().to_vec();
        assert_ne!(first, second);
        for (a, b) in first.chunks(SCRAMBLE_SECTOR).zip(second.chunks(SCRAMBLE_SECTOR)) {
            assert_ne!(a, b, "every sector changes");
            assert_eq!(a[56..64], 1u64.to_le_bytes());
            assert_eq!(b[56..64], 2u64.to_le_bytes());
            assert_eq!(a[48..56], 0xABCDu64.to_le_bytes());
            let changed = a.iter().zip(b).filter(|(x, y)| x != y).count();
            assert!(changed <= 24, "a few stores per sector, not a refill: {changed} bytes changed");
        }
    }

    /// The layout of one sector: its offset in one of its first eight cache lines, the same line
    /// for every sector of a write; nonce and sequence at bytes 48..64.
    #[test]
    fn each_sector_carries_its_offset_nonce_and_sequence() {
        let mut data = vec![0u8; 8 * SCRAMBLE_SECTOR];
        let mut s = Scrambler::with_nonce(7);
        for write in 1..=16u64 {
            let offset = 1 << 20;
            s.scramble(&mut data, offset);
            let line = ((write ^ (offset / 512)) & 7) as usize * 64;
            for (i, sector) in data.chunks(SCRAMBLE_SECTOR).enumerate() {
                assert_eq!(sector[line..line + 8], (offset + 512 * i as u64).to_le_bytes(), "write {write} sector {i}");
                assert_eq!(sector[48..56], 7u64.to_le_bytes());
                assert_eq!(sector[56..64], write.to_le_bytes());
            }
        }
    }

    /// Every 512-byte sector of a region written through few slots, many times over, is unique,
    /// as are those of two writers with other nonces; without scrambling only the slots' worth is.
    #[test]
    fn every_sector_of_a_written_region_is_unique() {
        let (slots, bs, region) = (4usize, 4096usize, 1usize << 20);
        let write_all = |scramble: bool, nonce: u64| -> Vec<u8> {
            let mut bufs: Vec<AlignedBuf> = (0..slots).map(|i| { let mut b = AlignedBuf::new(bs, 4096); b.fill_random(i as u64); b }).collect();
            let mut s = Scrambler::with_nonce(nonce);
            let mut image = Vec::with_capacity(2 * region);
            for pass in 0..2 {
                for (n, offset) in (0..region).step_by(bs).enumerate() {
                    let b = &mut bufs[(n + pass) % slots];
                    if scramble {
                        s.scramble(b.as_mut_slice(), offset as u64);
                    }
                    image.extend_from_slice(b.as_mut_slice()); // both passes: every write kept
                }
            }
            image
        };
        let image = write_all(true, 1);
        assert_eq!(sectors(&image).len(), image.len() / SCRAMBLE_SECTOR);
        let other = write_all(true, 2);
        let both: Vec<u8> = image.iter().chain(&other).copied().collect();
        assert_eq!(sectors(&both).len(), both.len() / SCRAMBLE_SECTOR, "two writers never collide");
        let plain = write_all(false, 1);
        assert_eq!(sectors(&plain).len(), slots * bs / SCRAMBLE_SECTOR, "unscrambled: only the slots' sectors");
    }

    /// Odd-sized requests: whole sectors as usual, a tail of 64 bytes or more stamped with its
    /// offset where it fits, a shorter tail untouched.
    #[test]
    fn a_short_tail_is_stamped_when_it_can_be() {
        let mut s = Scrambler::with_nonce(9);
        let mut data = vec![0u8; 512 + 100];
        s.scramble(&mut data, 4096); // sequence 1, sector 8: line 64 (1 ^ 8 = 9, & 7 = 1)
        assert_eq!(data[64..72], 4096u64.to_le_bytes());
        assert_eq!(data[512 + 48..512 + 56], 9u64.to_le_bytes());
        assert_eq!(data[512 + 64..512 + 72], 4608u64.to_le_bytes(), "line 64 fits a tail of 100 bytes");
        let mut data = vec![0u8; 512 + 70];
        s.scramble(&mut data, 4096); // sequence 2: line 64 x ((2 ^ 8) & 7) = 128
        assert_eq!(data[128..136], 4096u64.to_le_bytes());
        assert_eq!(data[512 + 56..512 + 64], 2u64.to_le_bytes());
        assert_eq!(data[512..520], 4608u64.to_le_bytes(), "line 128 does not fit 70 bytes: at the start");
        let mut short = vec![0u8; 512 + 40];
        s.scramble(&mut short, 0);
        assert!(short[512..].iter().all(|&b| b == 0));
        let mut tiny = vec![0u8; 63];
        s.scramble(&mut tiny, 0);
        assert!(tiny.iter().all(|&b| b == 0));
    }
}
