//! Names of trees, directories and files, formatted into one path buffer per worker that is
//! allocated once: the hot loop writes a few bytes and a NUL per operation, never allocates.
//!
//! Layout under the target directory (all names relative to it):
//!   unique: `{prefix}w{worker}/d{a}/d{b}/{prefix}f{worker}.{item}` — one tree per worker;
//!   shared: `shared/d{a}/d{b}/{prefix}f{worker}.{item}` — one tree for every worker and rank.
//! Renamed files are `{prefix}r{worker}.{item}` in the same directory. Item `i` lives in leaf
//! `i mod fanout^depth` (round-robin), so every leaf gets an equal share and a stonewalled run
//! still spreads over the tree.

use std::ffi::CStr;

use super::spec::{DirMode, MetaSpec};

/// Linux PATH_MAX: the buffer never grows past it.
pub const PATH_MAX: usize = 4096;

/// Name of a worker's tree root (relative to the target directory).
pub fn tree_root(spec: &MetaSpec, worker: usize) -> String {
    match spec.dir {
        DirMode::Unique => format!("{}w{worker}", spec.name_prefix),
        DirMode::Shared => "shared".to_string(),
    }
}

/// Shape of a tree: depth, fanout and the place values of the leaf index digits.
#[derive(Debug, Clone)]
pub struct Shape {
    pub depth: u32,
    pub fanout: u64,
    /// fanout^(depth-1), ..., fanout^0: the most significant digit first.
    powers: Vec<u64>,
    pub leaves: u64,
}

impl Shape {
    pub fn of(spec: &MetaSpec) -> Shape {
        let fanout = spec.fanout as u64;
        let powers = (0..spec.depth).rev().map(|l| fanout.pow(l)).collect();
        Shape { depth: spec.depth, fanout, powers, leaves: spec.leaves() }
    }

    /// All directories of the tree, root included.
    pub fn total_dirs(&self) -> u64 {
        (0..=self.depth).map(|l| self.fanout.pow(l)).sum()
    }

    /// (level, index within the level) of the directory at position `pos` of the breadth-first
    /// order (root first, then level 1 ...): mkdir goes forwards through it, rmdir backwards, so
    /// "the first n directories exist" is all the state a partial tree needs.
    pub fn bfs(&self, mut pos: u64) -> (u32, u64) {
        let mut width = 1u64;
        for level in 0..=self.depth {
            if pos < width {
                return (level, pos);
            }
            pos -= width;
            width *= self.fanout;
        }
        panic!("directory position beyond the tree");
    }
}

/// A NUL-terminated path built in place: a fixed head, then the per-operation tail.
pub struct NameBuf {
    buf: Vec<u8>,
    head: usize,
}

impl Default for NameBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl NameBuf {
    pub fn new() -> NameBuf {
        NameBuf { buf: Vec::with_capacity(PATH_MAX), head: 0 }
    }

    /// Set the fixed part every later path starts with (e.g. the tree root and a slash).
    pub fn set_head(&mut self, head: &[u8]) {
        self.buf.clear();
        self.buf.extend_from_slice(head);
        self.head = self.buf.len();
    }

    #[inline(always)]
    fn reset(&mut self) {
        self.buf.truncate(self.head);
    }

    #[inline(always)]
    fn push(&mut self, bytes: &[u8]) {
        debug_assert!(self.buf.len() + bytes.len() < PATH_MAX, "path longer than PATH_MAX");
        self.buf.extend_from_slice(bytes);
    }

    #[inline(always)]
    fn push_u64(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    /// `d{a}/d{b}/` for the leaf holding `item`.
    #[inline(always)]
    fn push_leaf_dirs(&mut self, shape: &Shape, item: u64) {
        if shape.depth == 0 {
            return;
        }
        let leaf = item % shape.leaves;
        for &p in &shape.powers {
            self.push(b"d");
            self.push_u64((leaf / p) % shape.fanout);
            self.push(b"/");
        }
    }

    /// Path of file `item` with the given stem (`{prefix}f{worker}.`), NUL-terminated.
    #[inline(always)]
    pub fn file(&mut self, shape: &Shape, stem: &[u8], item: u64) -> &CStr {
        self.reset();
        self.push_leaf_dirs(shape, item);
        self.push(stem);
        self.push_u64(item);
        self.finish()
    }

    /// Path of directory `index` at `level` of a tree (the root is level 0): `/d{a}/d{b}` after
    /// the head (which holds the tree root's name).
    pub fn dir(&mut self, shape: &Shape, level: u32, index: u64) -> &CStr {
        self.reset();
        let fanout = shape.fanout;
        for l in (0..level).rev() {
            self.push(b"/d");
            self.push_u64((index / fanout.pow(l)) % fanout);
        }
        self.finish()
    }

    /// Path of leaf directory `leaf` (for its fsync), after the head.
    pub fn leaf_dir(&mut self, shape: &Shape, leaf: u64) -> &CStr {
        self.dir(shape, shape.depth, leaf)
    }

    #[inline(always)]
    fn finish(&mut self) -> &CStr {
        self.buf.push(0);
        // SAFETY: names are made of the prefix (checked to hold no NUL), digits and fixed ASCII,
        // so the only NUL is the one just pushed, at the end.
        unsafe { CStr::from_bytes_with_nul_unchecked(&self.buf) }
    }

    /// The path last built, for error messages.
    pub fn text(&self) -> String {
        let end = self.buf.len() - usize::from(self.buf.last() == Some(&0));
        String::from_utf8_lossy(&self.buf[..end]).into_owned()
    }
}

/// The stems of a worker's file names: created and renamed.
pub fn stems(spec: &MetaSpec, worker: usize) -> (Vec<u8>, Vec<u8>) {
    (
        format!("{}f{worker}.", spec.name_prefix).into_bytes(),
        format!("{}r{worker}.", spec.name_prefix).into_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(p: &CStr) -> String {
        p.to_string_lossy().into_owned()
    }

    fn shape(depth: u32, fanout: u32) -> Shape {
        Shape::of(&MetaSpec { depth, fanout, ..MetaSpec::default() })
    }

    #[test]
    fn flat_tree_puts_files_in_the_root() {
        let s = shape(0, 10);
        let mut b = NameBuf::new();
        assert_eq!(text_of(b.file(&s, b"r1.f3.", 0)), "r1.f3.0");
        assert_eq!(text_of(b.file(&s, b"f3.", 1234567)), "f3.1234567");
        assert_eq!(b.text(), "f3.1234567");
    }

    #[test]
    fn files_go_round_robin_over_the_leaves() {
        let s = shape(2, 3);
        assert_eq!(s.leaves, 9);
        let mut b = NameBuf::new();
        assert_eq!(text_of(b.file(&s, b"f0.", 0)), "d0/d0/f0.0");
        assert_eq!(text_of(b.file(&s, b"f0.", 5)), "d1/d2/f0.5");
        assert_eq!(text_of(b.file(&s, b"f0.", 9)), "d0/d0/f0.9");
        assert_eq!(text_of(b.file(&s, b"f0.", 17)), "d2/d2/f0.17");
    }

    #[test]
    fn directories_are_named_from_the_root() {
        let s = shape(2, 3);
        let mut b = NameBuf::new();
        b.set_head(b"w0");
        assert_eq!(text_of(b.dir(&s, 0, 0)), "w0");
        assert_eq!(text_of(b.dir(&s, 1, 2)), "w0/d2");
        assert_eq!(text_of(b.dir(&s, 2, 7)), "w0/d2/d1");
        assert_eq!(text_of(b.leaf_dir(&s, 5)), "w0/d1/d2");
        assert_eq!(b.text(), "w0/d1/d2");
    }

    #[test]
    fn the_buffer_is_not_reallocated_per_name() {
        let s = shape(3, 4);
        let mut b = NameBuf::new();
        b.set_head(b"");
        let p0 = b.file(&s, b"f0.", 0).as_ptr();
        for i in 0..10_000 {
            assert_eq!(b.file(&s, b"f0.", i).as_ptr(), p0);
        }
    }

    #[test]
    fn breadth_first_positions_cover_every_level() {
        let s = shape(2, 3);
        assert_eq!(s.total_dirs(), 13);
        let got: Vec<(u32, u64)> = (0..13).map(|p| s.bfs(p)).collect();
        assert_eq!(got[0], (0, 0));
        assert_eq!(&got[1..4], &[(1, 0), (1, 1), (1, 2)]);
        assert_eq!(got[4], (2, 0));
        assert_eq!(got[12], (2, 8));
        let flat = shape(0, 10);
        assert_eq!((flat.total_dirs(), flat.bfs(0)), (1, (0, 0)));
    }

    #[test]
    fn roots_and_stems_carry_the_prefix() {
        let spec = MetaSpec { name_prefix: "r7.".into(), ..MetaSpec::default() };
        assert_eq!(tree_root(&spec, 2), "r7.w2");
        assert_eq!(stems(&spec, 2), (b"r7.f2.".to_vec(), b"r7.r2.".to_vec()));
        let shared = MetaSpec { dir: DirMode::Shared, ..spec };
        assert_eq!(tree_root(&shared, 2), "shared");
    }
}
