//! What each worker does next: offsets (sequential or seeded uniform random, always aligned to the
//! block size, inside the worker's own block range) and the read/write choice for mixed patterns.
//! Offsets are computed here, per request, in a few nanoseconds and without allocation.

use crate::spec::Rw;

/// xoshiro256** seeded through splitmix64: fast, good quality, reproducible from one u64.
#[derive(Clone)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E3779B97F4A7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut st = seed;
        Rng { s: [splitmix64(&mut st), splitmix64(&mut st), splitmix64(&mut st), splitmix64(&mut st)] }
    }

    /// A seed for stream `stream` (e.g. worker index) derived from a job seed.
    pub fn derive(seed: u64, stream: u64) -> u64 {
        let mut st = seed ^ stream.wrapping_mul(0xD1B54A32D192ED03);
        splitmix64(&mut st)
    }

    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform integer in [0, n) without modulo bias (Lemire's multiply-and-reject).
    #[inline(always)]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = (self.next_u64() as u128) * (n as u128);
        let mut low = m as u64;
        if low < n {
            let threshold = n.wrapping_neg() % n;
            while low < threshold {
                m = (self.next_u64() as u128) * (n as u128);
                low = m as u64;
            }
        }
        (m >> 64) as u64
    }
}

/// One request to issue: direction and byte offset in the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextIo {
    pub is_read: bool,
    pub offset: u64,
}

/// Which byte offsets a worker may touch, as a numbered list of transfers: transfer k of n.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessMap {
    /// Transfers of bs over blocks [first_block, first_block + blocks).
    Contiguous { first_block: u64, blocks: u64 },
    /// IOR's layout: `segments` segments of `participants` blocks of `block_bytes`; this worker owns
    /// block `participant` of each segment, read or written in transfers of bs.
    Segmented { base: u64, segments: u64, participants: u64, participant: u64, block_bytes: u64 },
}

impl AccessMap {
    /// Number of distinct transfers.
    pub fn transfers(&self, bs: u64) -> u64 {
        match *self {
            AccessMap::Contiguous { blocks, .. } => blocks,
            AccessMap::Segmented { segments, block_bytes, .. } => segments * (block_bytes / bs),
        }
    }

    /// Byte offset of transfer k.
    #[inline(always)]
    pub fn offset(&self, k: u64, bs: u64) -> u64 {
        match *self {
            AccessMap::Contiguous { first_block, .. } => (first_block + k) * bs,
            AccessMap::Segmented { base, participants, participant, block_bytes, .. } => {
                let per_block = block_bytes / bs;
                let (segment, within) = (k / per_block, k % per_block);
                base + (segment * participants + participant) * block_bytes + within * bs
            }
        }
    }
}

/// Generates the offsets of one worker: transfer indices (in order or uniformly at random) mapped
/// to byte offsets by its `AccessMap`.
pub struct OffsetGenerator {
    bs: u64,
    map: AccessMap,
    blocks: u64,
    random: bool,
    read_percent: u32,
    next_seq: u64,
    offset_rng: Rng,
    mix_rng: Rng,
}

impl OffsetGenerator {
    pub fn new(rw: Rw, rwmix_read: u32, bs: u64, map: AccessMap, seed: u64) -> Self {
        let blocks = map.transfers(bs);
        assert!(blocks > 0, "a worker needs at least one transfer");
        OffsetGenerator {
            bs,
            map,
            blocks,
            random: rw.is_random(),
            read_percent: rw.read_percent(rwmix_read),
            next_seq: 0,
            // Separate streams so the read/write choice does not shift the offsets.
            offset_rng: Rng::new(Rng::derive(seed, 1)),
            mix_rng: Rng::new(Rng::derive(seed, 2)),
        }
    }

    /// Continue a sequential pattern at transfer `k` (wrapping like `next`).
    pub fn seek(&mut self, k: u64) {
        self.next_seq = k % self.blocks;
    }

    #[inline(always)]
    pub fn next_io(&mut self) -> NextIo {
        let block = if self.random {
            self.offset_rng.below(self.blocks)
        } else {
            let b = self.next_seq;
            self.next_seq += 1;
            if self.next_seq == self.blocks {
                self.next_seq = 0; // wrap around for time-based runs and io_size > range
            }
            b
        };
        let is_read = match self.read_percent {
            100 => true,
            0 => false,
            p => self.mix_rng.below(100) < p as u64,
        };
        NextIo { is_read, offset: self.map.offset(block, self.bs) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contiguous(first_block: u64, blocks: u64) -> AccessMap {
        AccessMap::Contiguous { first_block, blocks }
    }

    /// IOR's picture: 2 segments, 3 participants, blocks of 2 transfers; participant 1 owns the
    /// second block of each segment.
    #[test]
    fn segmented_map_follows_ior_layout() {
        let m = AccessMap::Segmented { base: 1000, segments: 2, participants: 3, participant: 1, block_bytes: 200 };
        assert_eq!(m.transfers(100), 4);
        let offs: Vec<u64> = (0..4).map(|k| m.offset(k, 100)).collect();
        assert_eq!(offs, vec![1200, 1300, 1800, 1900]);
        // strided = segments of one transfer: participant 1 of 3 does transfers 1, 4, 7 ...
        let s = AccessMap::Segmented { base: 0, segments: 3, participants: 3, participant: 1, block_bytes: 100 };
        assert_eq!((0..3).map(|k| s.offset(k, 100)).collect::<Vec<_>>(), vec![100, 400, 700]);
    }

    #[test]
    fn sequential_covers_range_in_order_and_wraps() {
        let mut g = OffsetGenerator::new(Rw::Read, 0, 4096, contiguous(10, 3), 1);
        let offs: Vec<u64> = (0..5).map(|_| g.next_io().offset).collect();
        assert_eq!(offs, vec![40960, 45056, 49152, 40960, 45056]);
    }

    #[test]
    fn random_is_aligned_in_range_reproducible_and_roughly_uniform() {
        let blocks = 64;
        let mut g1 = OffsetGenerator::new(Rw::Randread, 0, 512, contiguous(100, blocks), 42);
        let mut g2 = OffsetGenerator::new(Rw::Randread, 0, 512, contiguous(100, blocks), 42);
        let mut hits = vec![0u32; blocks as usize];
        for _ in 0..64_000 {
            let a = g1.next_io();
            assert_eq!(a, g2.next_io());
            assert_eq!(a.offset % 512, 0);
            let b = a.offset / 512 - 100;
            assert!(b < blocks);
            hits[b as usize] += 1;
        }
        // each block expected 1000 times; a fair generator stays well within +-20 %
        assert!(hits.iter().all(|&h| (800..1200).contains(&h)), "{hits:?}");
        let mut g3 = OffsetGenerator::new(Rw::Randread, 0, 512, contiguous(100, blocks), 43);
        let differs = (0..100).any(|_| g3.next_io() != g1.next_io());
        assert!(differs, "another seed must give other offsets");
    }

    #[test]
    fn mixed_honours_read_percentage() {
        let mut g = OffsetGenerator::new(Rw::Randrw, 70, 4096, contiguous(0, 1000), 7);
        let reads = (0..100_000).filter(|_| g.next_io().is_read).count();
        assert!((69_000..71_000).contains(&reads), "{reads}");
    }
}
