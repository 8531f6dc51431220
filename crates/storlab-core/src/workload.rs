//! What each worker does next: offsets (sequential with a cursor per direction; random as a seeded
//! permutation visiting every block once per pass, uniform draws with repeats, or a skewed law from
//! distribution.rs; always aligned to the block size, inside the worker's own block range) and the
//! read/write choice for mixed patterns. Offsets are computed here, per request, in a few
//! nanoseconds, without allocation and without per-block memory.

use crate::blocksize::SizeLaw;
use crate::distribution::{normal_spread, normal_value, pareto_rank, RandomDistribution, ZipfSampler, ZoneTable};
use crate::rng::{splitmix64, Rng};
use crate::spec::{GroupSpec, Rw};

/// The direction of a request, indexing per-direction arrays as fio's ddir does: read, write, trim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Read = 0,
    Write = 1,
    Trim = 2,
}

impl Dir {
    pub const ALL: [Dir; 3] = [Dir::Read, Dir::Write, Dir::Trim];

    #[inline(always)]
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name in results and in fio's iolog.
    pub fn name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
            Dir::Trim => "trim",
        }
    }
}

/// One request to issue: direction and byte offset in the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextIo {
    pub dir: Dir,
    pub offset: u64,
}

impl NextIo {
    #[cfg(test)]
    pub fn is_read(&self) -> bool {
        self.dir == Dir::Read
    }
}

/// How trim patterns choose their direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TrimMode {
    /// No trims: reads and writes by rwmix.
    None,
    /// trim, randtrim: every request a trim.
    Only,
    /// trimwrite: a trim, then a write of the same block (`pending` holds it).
    ThenWrite { pending: Option<u64> },
}

/// Which byte offsets a worker may touch, as a numbered list of transfers: transfer k of n.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessMap {
    /// Transfers of bs from byte `base` on: transfer k at base + k x bs, k < blocks. The base
    /// need not be a multiple of bs (fio's offset: requests at offset + k x bs).
    Contiguous { base: u64, blocks: u64 },
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
            AccessMap::Contiguous { base, .. } => base + k * bs,
            AccessMap::Segmented { base, participants, participant, block_bytes, .. } => {
                let per_block = block_bytes / bs;
                let (segment, within) = (k / per_block, k % per_block);
                base + (segment * participants + participant) * block_bytes + within * bs
            }
        }
    }
}

/// A seeded bijection of [0, n). It mixes x inside the next power of two m >= n with three keyed
/// rounds of xor, odd multiply and xor-shift (each a bijection of [0, m)); `at(i)` cycle-walks
/// results >= n back into the range (every value of [n, m) lies on one walk at most). A pass of
/// the random map instead takes mix(0), mix(1) ... mix(m - 1) and drops those >= n, in branch-free
/// batches (`MapCursor`): the same cost, m/n < 2 mixes per block, without a mispredicted branch
/// per block. State: keys only.
#[derive(Debug, Clone)]
pub(crate) struct Permutation {
    n: u64,
    mask: u64,
    shift: u32,
    keys: [(u64, u64); 3],
}

impl Permutation {
    pub(crate) fn new(n: u64, key: u64) -> Permutation {
        assert!(n > 0, "a permutation of at least one element");
        let bits = 64 - (n - 1).leading_zeros();
        assert!(bits < 64, "at most 2^63 blocks");
        let mut st = key;
        let mut k = || splitmix64(&mut st);
        // xor with any key and multiplication by an odd one are bijections modulo 2^bits
        let keys = [(k(), k() | 1), (k(), k() | 1), (k(), k() | 1)];
        Permutation { n, mask: (1u64 << bits) - 1, shift: (bits / 2).max(1), keys }
    }

    #[inline(always)]
    fn mix(&self, mut x: u64) -> u64 {
        for (add, mul) in self.keys {
            x = ((x ^ add).wrapping_mul(mul)) & self.mask;
            x ^= x >> self.shift;
        }
        x
    }

    /// Element i (i < n) of the permutation.
    #[inline(always)]
    pub(crate) fn at(&self, i: u64) -> u64 {
        let mut x = self.mix(i);
        while x >= self.n {
            x = self.mix(x);
        }
        x
    }
}

/// How the next block index is chosen.
// One per worker, built once: the map's batch lives inline rather than behind a pointer that every
// offset would follow.
#[allow(clippy::large_enum_variant)]
enum Order {
    /// Reads and writes each with their own cursor (fio's last_pos per direction), advancing by
    /// `stride` transfers: 1, or more with holes (fio's rw=read:SIZE).
    Sequential { next: [u64; 2], stride: u64 },
    /// seq_rewind (fio's rw=read:-SIZE): each direction's cursor moves `back` transfers back per
    /// request (0: the same block again), from the range's last block, wrapping to the end.
    Backward { next: [u64; 2], back: u64 },
    /// fio's random map: each block once per pass, in the order of a per-pass permutation shared
    /// by reads and writes (fio's map is per file, so a randrw pass reads or writes each block once).
    Mapped(MapCursor),
    /// norandommap: uniform draws with repeats.
    Uniform(Rng),
    /// A skewed law (fio turns the map off for these): popularity ranks scattered over the range
    /// by a fixed permutation, rotated so the most popular rank lands on `center` when given.
    Zipf { sampler: ZipfSampler, scatter: Scattered, rng: Rng },
    Pareto { power: f64, scatter: Scattered, rng: Rng },
    Normal { spread: u64, scatter: Scattered, rng: Rng },
    Zoned { table: ZoneTable, rng: Rng },
}

/// Blocks handed out per batch of the random map.
const MAP_BATCH: usize = 64;

/// The random map's position: pass `pass` enumerates the permutation keyed by (seed, pass).
struct MapCursor {
    perm: Permutation,
    /// Next value of [0, m) to mix.
    counter: u64,
    ready: [u64; MAP_BATCH],
    head: usize,
    len: usize,
    pass: u64,
    seed: u64,
}

impl MapCursor {
    fn new(n: u64, seed: u64) -> MapCursor {
        MapCursor { perm: Permutation::new(n, Rng::derive(seed, 0)), counter: 0, ready: [0; MAP_BATCH], head: 0, len: 0, pass: 0, seed }
    }

    #[inline(always)]
    fn next(&mut self) -> u64 {
        while self.head == self.len {
            self.refill();
        }
        let b = self.ready[self.head];
        self.head += 1;
        b
    }

    fn refill(&mut self) {
        let domain = self.perm.mask + 1;
        if self.counter == domain {
            // A new pass, in a new order: fio's default (random map reset, generator running on).
            self.pass += 1;
            self.perm = Permutation::new(self.perm.n, Rng::derive(self.seed, self.pass));
            self.counter = 0;
        }
        let end = (self.counter + MAP_BATCH as u64).min(domain);
        let mut len = 0;
        for c in self.counter..end {
            // Branch-free compaction: every candidate is written, only those in range are kept.
            let y = self.perm.mix(c);
            self.ready[len] = y;
            len += (y < self.perm.n) as usize;
        }
        self.counter = end;
        self.head = 0;
        self.len = len;
    }
}

/// A rank's block: a permutation of [0, n) followed by a rotation.
struct Scattered {
    perm: Permutation,
    rotate: u64,
}

impl Scattered {
    /// `peak` is the rank of the most popular value; with a center it lands on floor(center * n).
    fn new(n: u64, key: u64, peak: u64, center: Option<f64>) -> Scattered {
        let perm = Permutation::new(n, key);
        let rotate = match center {
            Some(c) => {
                let anchor = ((c * n as f64) as u64).min(n - 1);
                (anchor + n - perm.at(peak)) % n
            }
            None => 0,
        };
        Scattered { perm, rotate }
    }

    #[inline(always)]
    fn block(&self, rank: u64) -> u64 {
        let b = self.perm.at(rank) + self.rotate;
        if b >= self.perm.n { b - self.perm.n } else { b }
    }
}

/// Generates the offsets of one worker: transfer indices (in order, permuted, or drawn from a
/// distribution) mapped to byte offsets by its `AccessMap`, and the read/write choice from a
/// stream of its own, so the mix share does not depend on the offsets.
pub struct OffsetGenerator {
    bs: u64,
    map: AccessMap,
    blocks: u64,
    read_percent: u32,
    trim: TrimMode,
    order: Order,
    mix_rng: Rng,
    /// Sizes drawn per request (bssplit, bsrange, blockalign); None: every request of bs.
    sized: Option<Box<SizedRequests>>,
    /// percentage_random below 100 in a random pattern: the share of requests (in percent) that
    /// follow on from the direction's last block instead of a random one, with their draws and
    /// the last block per direction [read, write] (fio's should_do_random and last_pos).
    sequential_share: u32,
    pick_rng: Rng,
    last_block: [Option<u64>; 2],
}

/// The state of requests whose size varies: a size law and its generator per direction, byte
/// cursors for sequential patterns, and fio's random map as a bitmap of units (bs, normalised to
/// the unit of offsets) when random offsets visit every block once per pass.
struct SizedRequests {
    laws: [SizeLaw; 3],
    rngs: [Rng; 3],
    /// Sequential cursors per direction [read, write], bytes from the range start.
    seq: [u64; 2],
    /// Bytes skipped after each sequential request.
    hole: u64,
    /// fio's random map: a bit per unit, set when a request covers it; cleared with each pass.
    covered: Vec<u64>,
    /// Units covered in this pass.
    covered_units: u64,
    /// trimwrite: the size of the trim whose write comes next.
    pending_len: u32,
}

impl SizedRequests {
    #[inline(always)]
    fn is_covered(&self, b: u64) -> bool {
        self.covered[(b / 64) as usize] & (1 << (b % 64)) != 0
    }

    /// Mark up to `units` units from `b` covered, stopping at one already covered or at `n`
    /// (fio's mark_random_map: a request is cut to the free run at its offset); the units marked.
    fn cover(&mut self, b: u64, units: u64, n: u64) -> u64 {
        let mut run = 0;
        while run < units && b + run < n && !self.is_covered(b + run) {
            let u = b + run;
            self.covered[(u / 64) as usize] |= 1 << (u % 64);
            run += 1;
        }
        self.covered_units += run;
        run
    }

    /// The first unit not covered after `b` (wrapping to 0 past `n`), as fio's axmap_next_free.
    fn next_free(&self, b: u64, n: u64) -> Option<u64> {
        let words = self.covered.len() as u64;
        let start = if b + 1 >= n { 0 } else { b + 1 };
        // the word of `start` with the bits before it masked as covered, then whole words, once
        // round
        for k in 0..=words {
            let w = (start / 64 + k) % words;
            let mut free = !self.covered[w as usize];
            if k == 0 {
                free &= u64::MAX << (start % 64);
            }
            if free != 0 {
                let u = w * 64 + free.trailing_zeros() as u64;
                if u < n {
                    return Some(u);
                }
            }
        }
        None
    }
}

/// Seed streams of one worker.
const OFFSET_STREAM: u64 = 1;
const MIX_STREAM: u64 = 2;
const SCATTER_STREAM: u64 = 3;
/// Size streams, one per direction (fio's bsrange_state[ddir]).
const SIZE_STREAM: u64 = 4;
/// percentage_random's draws: random or sequential (after the size streams of three directions).
const PICK_STREAM: u64 = 8;

impl OffsetGenerator {
    /// `rw` is the worker's pattern (a read-behind-write reader reads although the group writes);
    /// the group gives rwmix_read, bs, random_map and random_distribution.
    pub fn new(rw: Rw, g: &GroupSpec, map: AccessMap, seed: u64) -> Self {
        let bs = g.bs;
        let blocks = map.transfers(bs);
        assert!(blocks > 0, "a worker needs at least one transfer");
        let offset_seed = Rng::derive(seed, OFFSET_STREAM);
        let scatter_key = Rng::derive(seed, SCATTER_STREAM);
        let sized = g.sized_requests().then(|| {
            let laws = g.size_laws().expect("size laws validated with the spec");
            // fio: blockalign other than the smallest size turns the random map off
            let aligned_apart = g.blockalign > 0 && laws.iter().zip(g.directions()).any(|(l, used)| used && l.min() != g.blockalign);
            let mapped = rw.is_random() && g.random_map && g.random_distribution.is_uniform() && !aligned_apart;
            Box::new(SizedRequests {
                laws,
                rngs: std::array::from_fn(|d| Rng::new(Rng::derive(seed, SIZE_STREAM + d as u64))),
                seq: [0, 0],
                hole: g.seq_hole,
                covered: if mapped { vec![0; blocks.div_ceil(64) as usize] } else { Vec::new() },
                covered_units: 0,
                pending_len: 0,
            })
        });
        // Sized requests keep fio's random map as a bitmap (uniform draws moved to the next free
        // unit, as fio's axmap), so the permutation is not used for them.
        let map_off = sized.is_some();
        let order = if !rw.is_random() {
            match g.seq_step() {
                step if step >= 1 => Order::Sequential { next: [0, 0], stride: step as u64 },
                step => Order::Backward { next: [blocks - 1; 2], back: step.unsigned_abs() },
            }
        } else {
            match &g.random_distribution {
                RandomDistribution::Uniform if g.random_map && !map_off => {
                    Order::Mapped(MapCursor::new(blocks, offset_seed))
                }
                RandomDistribution::Uniform => Order::Uniform(Rng::new(offset_seed)),
                RandomDistribution::Zipf { theta, center } => Order::Zipf {
                    sampler: ZipfSampler::new(blocks, *theta),
                    scatter: Scattered::new(blocks, scatter_key, 0, *center),
                    rng: Rng::new(offset_seed),
                },
                RandomDistribution::Pareto { h, center } => Order::Pareto {
                    power: h.ln() / (1.0 - h).ln(),
                    scatter: Scattered::new(blocks, scatter_key, 0, *center),
                    rng: Rng::new(offset_seed),
                },
                RandomDistribution::Normal { sigma_pct, center } => Order::Normal {
                    spread: normal_spread(blocks, *sigma_pct),
                    scatter: Scattered::new(blocks, scatter_key, blocks / 2, *center),
                    rng: Rng::new(offset_seed),
                },
                RandomDistribution::Zoned(zones) => {
                    Order::Zoned { table: ZoneTable::new(zones, blocks), rng: Rng::new(offset_seed) }
                }
            }
        };
        OffsetGenerator {
            bs,
            map,
            blocks,
            read_percent: rw.read_percent(g.rwmix_read),
            trim: match rw {
                Rw::Trim | Rw::Randtrim => TrimMode::Only,
                Rw::Trimwrite => TrimMode::ThenWrite { pending: None },
                _ => TrimMode::None,
            },
            order,
            mix_rng: Rng::new(Rng::derive(seed, MIX_STREAM)),
            sized,
            sequential_share: if rw.is_random() { 100 - g.percentage_random.min(100) } else { 0 },
            pick_rng: Rng::new(Rng::derive(seed, PICK_STREAM)),
            last_block: [None; 2],
        }
    }

    /// Continue a sequential pattern at transfer `k` (wrapping like `next_io`), in both
    /// directions. Random orders have no position to move (read-behind-write is sequential).
    pub fn seek(&mut self, k: u64) {
        if let Order::Sequential { next, .. } = &mut self.order {
            *next = [k % self.blocks; 2];
        }
    }

    #[inline(always)]
    pub fn next_io(&mut self) -> NextIo {
        let dir = self.next_dir();
        NextIo { dir, offset: self.next_offset(dir) }
    }

    /// The direction of the next request (a mixed pattern's draw), before its offset is drawn: a
    /// rate limiter may then take the other direction of a mixed pattern instead (fio's rate_ddir).
    #[inline(always)]
    pub fn next_dir(&mut self) -> Dir {
        match self.trim {
            TrimMode::Only => Dir::Trim,
            TrimMode::ThenWrite { pending: Some(_) } => Dir::Write,
            TrimMode::ThenWrite { pending: None } => Dir::Trim,
            TrimMode::None => match self.read_percent {
                100 => Dir::Read,
                0 => Dir::Write,
                p => if self.mix_rng.below(100) < p as u64 { Dir::Read } else { Dir::Write },
            },
        }
    }

    /// Both directions are drawn by a mix (rw, randrw): a rate limiter may switch between them.
    pub fn mixed(&self) -> bool {
        self.trim == TrimMode::None && self.read_percent > 0 && self.read_percent < 100
    }

    /// The offset of the next request in direction `dir`.
    #[inline(always)]
    pub fn next_offset(&mut self, dir: Dir) -> u64 {
        if let TrimMode::ThenWrite { pending } = &mut self.trim {
            if let Some(offset) = pending.take() {
                return offset;
            }
            let offset = self.draw_offset(false);
            self.trim = TrimMode::ThenWrite { pending: Some(offset) };
            return offset;
        }
        self.draw_offset(dir == Dir::Read)
    }

    /// The next request in direction `dir`: its byte offset and size.
    #[inline(always)]
    pub fn next_request(&mut self, dir: Dir) -> (u64, u32) {
        if self.sized.is_none() {
            return (self.next_offset(dir), self.bs as u32);
        }
        self.next_sized(dir)
    }

    /// A request of a drawn size (fio's get_next_offset, then get_next_buflen, then the random
    /// map's cut to the free run at the offset). Offsets are multiples of the unit (bs).
    fn next_sized(&mut self, dir: Dir) -> (u64, u32) {
        if let TrimMode::ThenWrite { pending: Some(offset) } = self.trim {
            self.trim = TrimMode::ThenWrite { pending: None };
            return (offset, self.sized.as_ref().map_or(0, |s| s.pending_len));
        }
        let (unit, n) = (self.bs, self.blocks);
        let range = n * unit;
        let AccessMap::Contiguous { base, .. } = self.map else {
            unreachable!("sized requests need a contiguous range (validated)");
        };
        let rel_block = match &mut self.order {
            Order::Sequential { .. } => None,
            _ => Some(self.draw_block(dir == Dir::Read)),
        };
        let s = self.sized.as_deref_mut().expect("sized requests");
        let d = dir.index();
        let min = s.laws[d].min();
        let (offset, len) = match (&mut self.order, rel_block) {
            (Order::Sequential { .. }, _) => {
                let cursor = &mut s.seq[(dir != Dir::Read) as usize];
                if *cursor + min > range {
                    *cursor = 0; // wrap, as fio does for time-based runs
                }
                let off = *cursor;
                let len = s.laws[d].draw(&mut s.rngs[d], range - off);
                *cursor = off + len + s.hole;
                (off, len)
            }
            (Order::Uniform(rng), Some(drawn)) if !s.covered.is_empty() => {
                // fio's random map: a uniform unit, or the next free one after it; a full map
                // starts a new pass (fio resets it for time-based runs; a sized run ends there)
                let b = if !s.is_covered(drawn) {
                    drawn
                } else if let Some(free) = s.next_free(drawn, n) {
                    free
                } else {
                    s.covered.iter_mut().for_each(|w| *w = 0);
                    s.covered_units = 0;
                    rng.below(n)
                };
                let room = range - b * unit;
                let len = if room >= min { s.laws[d].draw(&mut s.rngs[d], room) } else { room };
                let units = s.cover(b, len.div_ceil(unit), n);
                (b * unit, len.min(units * unit))
            }
            (_, Some(b)) => {
                // fio's last block: the smallest request fits before the end
                let off = (b * unit).min((range - min) / unit * unit);
                (off, s.laws[d].draw(&mut s.rngs[d], range - off))
            }
            (_, None) => unreachable!("a block drawn for every other order"),
        };
        if let TrimMode::ThenWrite { .. } = self.trim {
            self.trim = TrimMode::ThenWrite { pending: Some(base + offset) };
            s.pending_len = len as u32;
        }
        (base + offset, len as u32)
    }

    #[inline(always)]
    fn draw_offset(&mut self, is_read: bool) -> u64 {
        let block = self.draw_block(is_read);
        self.map.offset(block, self.bs)
    }

    /// The next transfer index (a block of bs in a contiguous map).
    #[inline(always)]
    fn draw_block(&mut self, is_read: bool) -> u64 {
        if self.sequential_share == 0 {
            return self.draw_ordered_block(is_read);
        }
        // fio's percentage_random: a share of a random pattern's requests continue sequentially
        // from the direction's last block (wrapping), the rest are drawn as usual
        let d = !is_read as usize;
        let b = match self.last_block[d] {
            Some(last) if self.pick_rng.below(100) < self.sequential_share as u64 => (last + 1) % self.blocks,
            _ => self.draw_ordered_block(is_read),
        };
        self.last_block[d] = Some(b);
        b
    }

    /// The next transfer index of the pattern's own order.
    #[inline(always)]
    fn draw_ordered_block(&mut self, is_read: bool) -> u64 {
        let n = self.blocks;
        match &mut self.order {
            Order::Sequential { next, stride } => {
                let cursor = &mut next[!is_read as usize];
                let b = *cursor;
                // wrap to the start for time-based runs and io_size > range, as fio does
                *cursor = if n - b <= *stride { 0 } else { b + *stride };
                b
            }
            Order::Backward { next, back } => {
                let cursor = &mut next[!is_read as usize];
                let b = *cursor;
                // fio wraps a backward cursor that passes the start to the end (io_u.c)
                *cursor = if b < *back { n - 1 - (*back - b - 1) % n } else { b - *back };
                b
            }
            Order::Mapped(cursor) => cursor.next(),
            Order::Uniform(rng) => rng.below(n),
            Order::Zipf { sampler, scatter, rng } => scatter.block(sampler.rank(rng)),
            Order::Pareto { power, scatter, rng } => scatter.block(pareto_rank(n, *power, rng)),
            Order::Normal { spread, scatter, rng } => scatter.block(normal_value(n, *spread, rng)),
            Order::Zoned { table, rng } => table.block(rng),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// seq_rewind (fio's rw=read:-SIZE): 2 x bs reads the range backwards from its last block and
    /// wraps to the end; bs reads the same block again; 3 x bs skips one block going back.
    #[test]
    fn a_rewound_cursor_reads_backwards_and_wraps_to_the_end() {
        let offsets = |rewind: u64| -> Vec<u64> {
            let g = GroupSpec { bs: 4096, rw: Rw::Read, seq_rewind: rewind, ..Default::default() };
            let mut gen = OffsetGenerator::new(Rw::Read, &g, contiguous(0, 4), 1);
            (0..6).map(|_| gen.next_io().offset / 4096).collect()
        };
        assert_eq!(offsets(8192), vec![3, 2, 1, 0, 3, 2]);
        assert_eq!(offsets(4096), vec![3, 3, 3, 3, 3, 3]);
        assert_eq!(offsets(12288), vec![3, 1, 3, 1, 3, 1]);
    }

    /// fio's percentage_random: 0 makes a random pattern sequential after its first draw, 100
    /// keeps it random, 70 follows on from the last block about 30 % of the time.
    #[test]
    fn percentage_random_mixes_sequential_requests_into_a_random_pattern() {
        let follow_ons = |pct: u32| -> usize {
            let g = GroupSpec { bs: 4096, rw: Rw::Randread, percentage_random: pct, ..Default::default() };
            let mut gen = OffsetGenerator::new(Rw::Randread, &g, contiguous(0, 1 << 16), 7);
            let offsets: Vec<u64> = (0..10_000).map(|_| gen.next_io().offset).collect();
            offsets.windows(2).filter(|w| w[1] == (w[0] + 4096) % (4096 << 16)).count()
        };
        assert_eq!(follow_ons(0), 9_999);
        assert!(follow_ons(100) < 10, "{}", follow_ons(100));
        let share = follow_ons(70) as f64 / 9_999.0;
        assert!((share - 0.30).abs() < 0.02, "{share}");
    }

    /// `blocks` transfers of 4 KiB from block `first_block` of 4 KiB on.
    fn contiguous(first_block: u64, blocks: u64) -> AccessMap {
        AccessMap::Contiguous { base: first_block * 4096, blocks }
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

    /// A group for the generator: pattern-independent fields at their defaults.
    fn group(rwmix_read: u32, bs: u64, random_map: bool, dist: &str) -> GroupSpec {
        GroupSpec { rwmix_read, bs, random_map, random_distribution: dist.parse().unwrap(), ..Default::default() }
    }

    fn generator(rw: Rw, bs: u64, map: AccessMap, seed: u64) -> OffsetGenerator {
        OffsetGenerator::new(rw, &group(50, bs, true, "random"), map, seed)
    }

    /// Block indices of the next `count` requests of a contiguous map starting at block 0.
    fn blocks(g: &mut OffsetGenerator, count: u64, bs: u64) -> Vec<u64> {
        (0..count).map(|_| g.next_io().offset / bs).collect()
    }

    /// fio's rw=read:8k with bs=4k: offsets 0, 12 KiB, 24 KiB ...; the cursor wraps to the start
    /// when the next stride would leave the range (time-based runs).
    #[test]
    fn sequential_with_holes_skips_the_hole_after_each_request_and_wraps() {
        let g = GroupSpec { rw: Rw::Read, bs: 4096, seq_hole: 8192, ..Default::default() };
        let mut gen = OffsetGenerator::new(Rw::Read, &g, contiguous(0, 8), 1);
        let offs: Vec<u64> = (0..5).map(|_| gen.next_io().offset).collect();
        assert_eq!(offs, vec![0, 12288, 24576, 0, 12288]);
        // writes have their own cursor, with the same stride
        let g = GroupSpec { rw: Rw::Rw, bs: 4096, seq_hole: 4096, rwmix_read: 50, ..Default::default() };
        let mut gen = OffsetGenerator::new(Rw::Rw, &g, contiguous(0, 7), 3);
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        for _ in 0..40 {
            let io = gen.next_io();
            if io.dir == Dir::Read { reads.push(io.offset / 4096) } else { writes.push(io.offset / 4096) }
        }
        for seen in [reads, writes] {
            let want: Vec<u64> = [0, 2, 4, 6].iter().cycle().take(seen.len()).copied().collect();
            assert_eq!(seen, want);
        }
    }

    #[test]
    fn sequential_covers_range_in_order_and_wraps() {
        let mut g = generator(Rw::Read, 4096, contiguous(10, 3), 1);
        let offs: Vec<u64> = (0..5).map(|_| g.next_io().offset).collect();
        assert_eq!(offs, vec![40960, 45056, 49152, 40960, 45056]);
    }

    #[test]
    fn permutation_is_a_bijection_for_any_size() {
        for n in [1u64, 2, 3, 4, 5, 7, 8, 9, 255, 256, 257, 1000, 4096, 4097, 65_537] {
            for key in [0u64, 1, 0x5EED, u64::MAX] {
                let p = Permutation::new(n, key);
                let mut seen = vec![false; n as usize];
                for i in 0..n {
                    let x = p.at(i);
                    assert!(x < n && !seen[x as usize], "n {n} key {key}: {x} twice or out of range");
                    seen[x as usize] = true;
                }
            }
        }
    }

    /// The regression behind issue 11: a size-based randwrite touched only ~63 % of the blocks.
    #[test]
    fn random_visits_every_block_once_per_pass_then_starts_another_order() {
        for n in [1u64, 2, 3, 7, 1000, 4097] {
            for seed in [1u64, 42, 0x5EED] {
                let mut g = generator(Rw::Randwrite, 512, contiguous(0, n), seed);
                let first = blocks(&mut g, n, 512);
                let second = blocks(&mut g, n, 512);
                for pass in [&first, &second] {
                    let mut sorted = pass.clone();
                    sorted.sort_unstable();
                    assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n {n} seed {seed}");
                }
                if n >= 7 {
                    assert_ne!(first, second, "n {n}: a new pass takes a new order");
                }
            }
        }
    }

    #[test]
    fn random_order_follows_the_seed_and_looks_random() {
        let n = 4097;
        let order = |seed| blocks(&mut generator(Rw::Randread, 4096, contiguous(0, n), seed), n, 4096);
        assert_eq!(order(7), order(7), "same seed, same order");
        let (a, b) = (order(7), order(8));
        assert_ne!(a, b);
        // Neither in order nor tied to each other: Pearson correlation of position and block,
        // and of two seeds' blocks, near 0 (|r| < 0.1 for 4097 values of an unrelated pair).
        let corr = |x: &[u64], y: &[u64]| {
            let m = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64;
            let (mx, my) = (m(x), m(y));
            let cov: f64 = x.iter().zip(y).map(|(&p, &q)| (p as f64 - mx) * (q as f64 - my)).sum();
            let var = |v: &[u64], mv: f64| v.iter().map(|&p| (p as f64 - mv).powi(2)).sum::<f64>();
            cov / (var(x, mx) * var(y, my)).sqrt()
        };
        let position: Vec<u64> = (0..n).collect();
        assert!(corr(&position, &a).abs() < 0.1, "{}", corr(&position, &a));
        assert!(corr(&a, &b).abs() < 0.1, "{}", corr(&a, &b));
        // successive offsets are not neighbours: the mean jump is about n/3 for a random order
        let mean_jump = a.windows(2).map(|w| w[0].abs_diff(w[1])).sum::<u64>() as f64 / (n - 1) as f64;
        assert!((mean_jump / (n as f64 / 3.0) - 1.0).abs() < 0.1, "{mean_jump}");
    }

    #[test]
    fn random_stays_aligned_inside_the_map() {
        let m = AccessMap::Segmented { base: 1000, segments: 5, participants: 3, participant: 2, block_bytes: 300 };
        let mut g = generator(Rw::Randread, 100, m, 3);
        let mut got: Vec<u64> = (0..15).map(|_| g.next_io().offset).collect();
        got.sort_unstable();
        let mut want: Vec<u64> = (0..15).map(|k| m.offset(k, 100)).collect();
        want.sort_unstable();
        assert_eq!(got, want);
    }

    #[test]
    fn norandommap_draws_uniformly_with_repeats() {
        let blocks_n = 64;
        let g = || OffsetGenerator::new(Rw::Randread, &group(0, 512, false, "random"), AccessMap::Contiguous { base: 100 * 512, blocks: blocks_n }, 42);
        let (mut g1, mut g2) = (g(), g());
        let mut hits = vec![0u32; blocks_n as usize];
        for _ in 0..64_000 {
            let a = g1.next_io();
            assert_eq!(a, g2.next_io());
            assert_eq!(a.offset % 512, 0);
            hits[(a.offset / 512 - 100) as usize] += 1;
        }
        // each block expected 1000 times; a fair generator stays well within +-20 %
        assert!(hits.iter().all(|&h| (800..1200).contains(&h)), "{hits:?}");
        // one pass' worth of draws repeats blocks (63 % distinct expected: 1 - 1/e)
        let mut g3 = OffsetGenerator::new(Rw::Randread, &group(0, 512, false, "random"), contiguous(0, 4096), 1);
        let mut first = blocks(&mut g3, 4096, 512);
        first.sort_unstable();
        first.dedup();
        assert!((2400..2800).contains(&first.len()), "{}", first.len());
    }

    /// Share of all hits taken by the `top` most-hit blocks.
    fn top_share(hits: &[u32], top: usize) -> f64 {
        let mut sorted = hits.to_vec();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        sorted[..top].iter().map(|&h| h as f64).sum::<f64>() / hits.iter().map(|&h| h as f64).sum::<f64>()
    }

    fn hits(dist: &str, n: u64, draws: u32, seed: u64) -> Vec<u32> {
        let mut g = OffsetGenerator::new(Rw::Randread, &group(0, 4096, true, dist), contiguous(0, n), seed);
        let mut hits = vec![0u32; n as usize];
        for _ in 0..draws {
            hits[(g.next_io().offset / 4096) as usize] += 1;
        }
        hits
    }

    #[test]
    fn zipf_skews_offsets_as_the_law_predicts_and_ignores_the_map() {
        let (n, theta) = (1000u64, 1.2f64);
        let h = hits(&format!("zipf:{theta}"), n, 500_000, 5);
        // Zipf's law: the top 10 % of ranks take H(100, theta) / H(1000, theta) of the accesses
        let harmonic = |m: u64| (1..=m).map(|i| (i as f64).powf(-theta)).sum::<f64>();
        let want = harmonic(n / 10) / harmonic(n);
        let got = top_share(&h, (n / 10) as usize);
        assert!((got - want).abs() < 0.01, "{got} vs {want}");
        // the hottest block sits where the center says
        let centered = hits("zipf:1.2:0.25", n, 100_000, 5);
        let hottest = (0..n as usize).max_by_key(|&b| centered[b]).unwrap();
        assert_eq!(hottest, 250);
    }

    #[test]
    fn pareto_skews_offsets_80_20() {
        let n = 1000u64;
        let h = hits("pareto:0.2", n, 500_000, 6);
        // fio's Pareto: P(rank < k) = (k/(n-1))^(ln(1-h)/ln h); for h = 0.2, 20 % of blocks take 80 %
        let want = ((n / 5) as f64 / (n - 1) as f64).powf(0.8f64.ln() / 0.2f64.ln());
        let got = top_share(&h, (n / 5) as usize);
        assert!((got - want).abs() < 0.01, "{got} vs {want}");
    }

    #[test]
    fn normal_spreads_like_fios_bell_and_zoned_fills_its_zones() {
        let n = 1000u64;
        let h = hits("normal:0:0.3", n, 200_000, 7);
        // a bell of sd n/12 (fio's mean of 12 uniforms) puts 2 * Phi(0.6) - 1 = 45 % of the
        // draws on the 10 % most-hit blocks, the values within n/20 of the peak
        let got = top_share(&h, (n / 10) as usize);
        assert!((got - 0.4515).abs() < 0.02, "{got}");
        // the bell's peak value n/2 lands on the center, whatever the scatter's key
        for key in [1u64, 2, 3] {
            assert_eq!(Scattered::new(n, key, n / 2, Some(0.3)).block(n / 2), 300);
        }
        let z = hits("zoned:60/10:30/20:10/70", n, 200_000, 8);
        let share = |r: std::ops::Range<usize>| z[r].iter().sum::<u32>() as f64 / 200_000.0;
        for (got, want) in [(share(0..100), 0.6), (share(100..300), 0.3), (share(300..1000), 0.1)] {
            assert!((got - want).abs() < 0.01, "{got} vs {want}");
        }
    }

    #[test]
    fn sequential_mix_keeps_a_position_per_direction() {
        let mut g = OffsetGenerator::new(Rw::Rw, &group(50, 4096, true, "random"), contiguous(0, 1000), 3);
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        for _ in 0..400 {
            let io = g.next_io();
            if io.is_read() { reads.push(io.offset) } else { writes.push(io.offset) }
        }
        assert!(reads.len() > 150 && writes.len() > 150);
        assert!(reads.iter().enumerate().all(|(i, &o)| o == i as u64 * 4096), "reads {:?}", &reads[..5]);
        assert!(writes.iter().enumerate().all(|(i, &o)| o == i as u64 * 4096), "writes {:?}", &writes[..5]);
        g.seek(7);
        assert_eq!(g.next_io().offset, 7 * 4096);
    }

    /// fio keeps one random map per file: a randrw pass reads or writes each block exactly once.
    #[test]
    fn random_mix_with_the_map_covers_the_range_once_across_directions() {
        let n = 4097;
        let mut g = OffsetGenerator::new(Rw::Randrw, &group(30, 512, true, "random"), contiguous(0, n), 9);
        let ios: Vec<NextIo> = (0..n).map(|_| g.next_io()).collect();
        let mut all: Vec<u64> = ios.iter().map(|io| io.offset / 512).collect();
        all.sort_unstable();
        assert_eq!(all, (0..n).collect::<Vec<_>>());
        let reads = ios.iter().filter(|io| io.is_read()).count() as f64 / n as f64;
        assert!((reads - 0.3).abs() < 0.03, "{reads}");
    }

    #[test]
    fn mix_share_does_not_depend_on_the_offsets() {
        let choices = |rw, dist: &str| {
            let mut g = OffsetGenerator::new(rw, &group(70, 4096, true, dist), contiguous(0, 1000), 7);
            (0..10_000).map(|_| g.next_io().is_read()).collect::<Vec<_>>()
        };
        let mixed = choices(Rw::Randrw, "random");
        assert_eq!(mixed, choices(Rw::Rw, "random"));
        assert_eq!(mixed, choices(Rw::Randrw, "zipf:1.1"));
    }

    /// A group with sized requests, normalised as the plan runs it.
    fn sized_group(rw: Rw, bssplit: &str, random_map: bool) -> GroupSpec {
        GroupSpec { rw, bssplit: Some(bssplit.into()), random_map, ..Default::default() }.normalised()
    }

    fn size_shares(ios: &[(u64, u32)]) -> std::collections::BTreeMap<u32, f64> {
        let mut m = std::collections::BTreeMap::new();
        for &(_, len) in ios {
            *m.entry(len).or_insert(0.0) += 1.0 / ios.len() as f64;
        }
        m
    }

    /// Without the map (and so, time-based, however long) each size's share of the requests is its
    /// percentage; offsets are multiples of the smallest size and every request ends in the range.
    #[test]
    fn sized_requests_draw_the_split_per_request_inside_the_range() {
        let g = sized_group(Rw::Randrw, "4k/50:64k/30:1m/20", false);
        assert_eq!(g.bs, 4096);
        let n = 1 << 20; // 4 GiB of 4 KiB units: a 1 MiB request rarely meets the end
        let mut gen = OffsetGenerator::new(Rw::Randrw, &g, contiguous(10, n), 5);
        let ios: Vec<(u64, u32)> = (0..100_000).map(|_| { let d = gen.next_dir(); gen.next_request(d) }).collect();
        let shares = size_shares(&ios);
        for (len, want) in [(4096u32, 0.5), (65536, 0.3), (1 << 20, 0.2)] {
            assert!((shares[&len] - want).abs() < 0.01, "{len}: {} vs {want}", shares[&len]);
        }
        for &(off, len) in &ios {
            assert_eq!(off % 4096, 0);
            assert!(off >= 10 * 4096 && off + len as u64 <= (10 + n) * 4096, "{off} + {len}");
        }
        // per direction: reads of 2 KiB and 4 KiB, writes of 8 KiB only
        let g = sized_group(Rw::Randrw, "2k/50:4k/50,8k/100", false);
        assert_eq!(g.bs, 2048);
        let mut gen = OffsetGenerator::new(Rw::Randrw, &g, contiguous(0, 1024), 5);
        for _ in 0..10_000 {
            let d = gen.next_dir();
            let (_, len) = gen.next_request(d);
            assert!(if d == Dir::Read { len == 2048 || len == 4096 } else { len == 8192 }, "{d:?} {len}");
        }
    }

    /// fio's random map with mixed sizes: each unit is covered exactly once per pass (a request is
    /// cut where its run meets a covered unit), so a pass moves exactly the range's bytes.
    #[test]
    fn sized_requests_with_the_map_cover_every_unit_once_per_pass() {
        let g = sized_group(Rw::Randwrite, "4k/50:16k/30:64k/20", true);
        let n = 2000u64;
        let mut gen = OffsetGenerator::new(Rw::Randwrite, &g, contiguous(0, n), 11);
        for pass in 0..3 {
            let mut hits = vec![0u32; n as usize];
            let mut bytes = 0u64;
            let mut full = 0usize;
            while bytes < n * 4096 {
                let (off, len) = gen.next_request(Dir::Write);
                bytes += len as u64;
                full += (len == 65536) as usize;
                for u in off / 4096..(off + len as u64) / 4096 {
                    hits[u as usize] += 1;
                }
            }
            assert_eq!(bytes, n * 4096, "pass {pass}");
            assert!(hits.iter().all(|&h| h == 1), "pass {pass}: a unit covered twice or never");
            assert!(full > 0);
        }
    }

    /// Sequential patterns advance by each request's size; the write of trimwrite repeats its
    /// trim's offset and size.
    #[test]
    fn sized_sequential_requests_follow_each_other_and_trimwrite_pairs_them() {
        let g = sized_group(Rw::Write, "4k/50:8k/50", true);
        let mut gen = OffsetGenerator::new(Rw::Write, &g, contiguous(0, 64), 2);
        let mut at = 0u64;
        for _ in 0..20 {
            let (off, len) = gen.next_request(Dir::Write);
            assert_eq!(off, at);
            at = (off + len as u64) % (64 * 4096);
        }
        let g = sized_group(Rw::Trimwrite, "4k/50:8k/50", true);
        let mut gen = OffsetGenerator::new(Rw::Trimwrite, &g, contiguous(0, 64), 2);
        for _ in 0..10 {
            let trim = { let d = gen.next_dir(); assert_eq!(d, Dir::Trim); gen.next_request(d) };
            let d = gen.next_dir();
            assert_eq!((d, gen.next_request(d)), (Dir::Write, trim));
        }
    }

    /// blockalign places random offsets on its own multiples (and turns the map off, as in fio).
    #[test]
    fn blockalign_sets_the_unit_of_random_offsets() {
        let g = GroupSpec { rw: Rw::Randread, bs: 8192, blockalign: 4096, ..Default::default() }.normalised();
        assert!(g.sized_requests());
        let mut gen = OffsetGenerator::new(Rw::Randread, &g, contiguous(0, 256), 3);
        let offs: Vec<(u64, u32)> = (0..5000).map(|_| gen.next_request(Dir::Read)).collect();
        assert!(offs.iter().all(|&(o, l)| o % 4096 == 0 && l == 8192 && o + 8192 <= 256 * 4096));
        assert!(offs.iter().any(|&(o, _)| o % 8192 != 0), "offsets between 8 KiB boundaries too");
    }

    #[test]
    fn mixed_honours_read_percentage() {
        let mut g = OffsetGenerator::new(Rw::Randrw, &group(70, 4096, true, "random"), contiguous(0, 1000), 7);
        let reads = (0..100_000).filter(|_| g.next_io().is_read()).count();
        assert!((69_000..71_000).contains(&reads), "{reads}");
    }
}
