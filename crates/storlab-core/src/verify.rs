//! Data verification. With `verify` on, every written block starts with a header naming what it
//! should be (offset, pass, seed, sequence) and carries a checksum (crc32c or xxh3) over the header
//! and the payload; every read block is checked against the offset it was read from, the job's
//! seed and (when set) the pass. The payload is a deterministic function of (seed, offset, pass) —
//! a pseudo-random pattern made once per (seed, block size), XORed word by word with a key from
//! (offset, pass), cheap enough to vectorise — so a mismatch can be reported down to the first
//! wrong byte with its expected and found value.
//!
//! Block layout (little-endian):
//!   0 magic "SLV1" | 4 checksum kind | 8 offset | 16 pass | 20 block length | 24 seed
//!   | 32 sequence | 40 checksum | 48 payload ...
//! The checksum covers bytes 0..40 and 48..len, so one flipped byte anywhere in the block is caught
//! (CRC-32C detects every burst of up to 32 bits; xxh3 with overwhelming probability).

use serde::{Deserialize, Serialize};

use crate::workload::Rng;

pub const HEADER_LEN: usize = 48;
pub const MIN_BLOCK: u64 = 64;
const MAGIC: u32 = u32::from_le_bytes(*b"SLV1");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifyKind {
    Off,
    Crc32c,
    Xxh3,
}

impl VerifyKind {
    fn code(self) -> u32 {
        match self {
            VerifyKind::Off => 0,
            VerifyKind::Crc32c => 1,
            VerifyKind::Xxh3 => 2,
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
    pub offset: u64,
    /// magic | kind | offset | seed | pass | length | checksum
    pub field: &'static str,
    pub expected: String,
    pub found: String,
    /// Byte position inside the block of the first differing payload byte, when known.
    pub first_bad_byte: Option<u64>,
}

#[inline]
fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
#[inline]
fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn checksum(kind: VerifyKind, block: &[u8]) -> u64 {
    let (head, payload) = (&block[..40], &block[HEADER_LEN..]);
    match kind {
        VerifyKind::Crc32c => crc32c::crc32c_append(crc32c::crc32c(head), payload) as u64,
        VerifyKind::Xxh3 => {
            let mut h = xxhash_rust::xxh3::Xxh3::new();
            h.update(head);
            h.update(payload);
            h.digest()
        }
        VerifyKind::Off => 0,
    }
}

/// The pseudo-random payload pattern of a (seed, block size), made once per worker.
pub struct Pattern {
    words: Vec<u64>,
}

impl Pattern {
    pub fn new(seed: u64, block_len: usize) -> Pattern {
        let mut rng = Rng::new(Rng::derive(seed, 0x5041_5454));
        Pattern { words: (0..(block_len - HEADER_LEN).div_ceil(8)).map(|_| rng.next_u64()).collect() }
    }

    /// The payload of the block at `offset` written in `pass`.
    #[inline]
    fn fill(&self, payload: &mut [u8], seed: u64, offset: u64, pass: u32) {
        let key = Rng::derive(seed ^ (pass as u64).rotate_left(48), offset);
        let mut chunks = payload.chunks_exact_mut(8);
        for (chunk, w) in (&mut chunks).zip(&self.words) {
            chunk.copy_from_slice(&(w ^ key).to_le_bytes());
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let w = (self.words[self.words.len() - 1] ^ key).to_le_bytes();
            rest.copy_from_slice(&w[..rest.len()]);
        }
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

/// Check a block just read. Returns the first problem found, or None.
pub fn check(block: &[u8], pattern: &Pattern, kind: VerifyKind, e: Expect, target: &str) -> Option<Mismatch> {
    let bad = |field: &'static str, expected: String, found: String, first_bad_byte: Option<u64>| {
        Some(Mismatch { target: target.to_string(), offset: e.offset, field, expected, found, first_bad_byte })
    };
    let magic = get_u32(block, 0);
    if magic != MAGIC {
        return bad("magic", format!("{MAGIC:#010x} (\"SLV1\")"), format!("{magic:#010x}"), Some(0));
    }
    let stored_sum = get_u64(block, 40);
    let computed = checksum(kind, block);
    if stored_sum != computed {
        // Find the first payload byte that differs from what the header says was written; if the
        // payload is intact, a header byte was changed.
        let (off, pass, seed) = (get_u64(block, 8), get_u32(block, 16), get_u64(block, 24));
        let mut expected_payload = vec![0u8; block.len() - HEADER_LEN];
        if seed == e.seed {
            pattern.fill(&mut expected_payload, seed, off, pass);
        } else {
            Pattern::new(seed, block.len()).fill(&mut expected_payload, seed, off, pass);
        }
        let first = block[HEADER_LEN..].iter().zip(&expected_payload).position(|(a, b)| a != b);
        return match first {
            Some(i) => bad(
                "checksum",
                format!("byte {:#04x}", expected_payload[i]),
                format!("byte {:#04x} (stored checksum {stored_sum:#x}, computed {computed:#x})", block[HEADER_LEN + i]),
                Some((HEADER_LEN + i) as u64),
            ),
            None => bad(
                "checksum",
                format!("{computed:#x} over the header as read"),
                format!("{stored_sum:#x}: a header byte was changed"),
                None,
            ),
        };
    }
    let found_kind = get_u32(block, 4);
    if found_kind != kind.code() {
        return bad("kind", format!("{}", kind.code()), format!("{found_kind}"), Some(4));
    }
    let found_off = get_u64(block, 8);
    if found_off != e.offset {
        return bad("offset", format!("{}", e.offset), format!("{found_off} (a block from elsewhere)"), Some(8));
    }
    let found_len = get_u32(block, 20) as usize;
    if found_len != block.len() {
        return bad("length", format!("{}", block.len()), format!("{found_len}"), Some(20));
    }
    let found_seed = get_u64(block, 24);
    if found_seed != e.seed {
        return bad("seed", format!("{}", e.seed), format!("{found_seed}"), Some(24));
    }
    let found_pass = get_u32(block, 16);
    if e.pass != 0 && found_pass != e.pass {
        return bad("pass", format!("{}", e.pass), format!("{found_pass} (stale data)"), Some(16));
    }
    None
}

/// A worker's verification counts and its first mismatches in full.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyTally {
    pub checked_blocks: u64,
    pub mismatches: u64,
    pub first: Vec<Mismatch>,
}

impl VerifyTally {
    pub fn record(&mut self, m: Option<Mismatch>, keep: usize) {
        self.checked_blocks += 1;
        if let Some(m) = m {
            self.mismatches += 1;
            if self.first.len() < keep {
                self.first.push(m);
            }
        }
    }

    pub fn merge(&mut self, o: &VerifyTally, keep: usize) {
        self.checked_blocks += o.checked_blocks;
        self.mismatches += o.mismatches;
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

    fn pattern() -> Pattern {
        Pattern::new(E.seed, 4096)
    }

    fn block(kind: VerifyKind) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        stamp(&mut b, &pattern(), kind, E, 7);
        b
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
                    assert_eq!(m.field, "checksum");
                }
            }
        }
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
}
