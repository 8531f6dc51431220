//! Where a metadata run's names live, behind one small trait: a local directory (system calls
//! relative to directory descriptors, `ops`) or the objects under an s3:// prefix (one request per
//! operation, `objects`). The worker loop, the names and the statistics are the same for both;
//! a namespace without directories (an object store) says so and the tree phases skip.

use std::ffi::CStr;

use crate::error::{Error, Result};
use crate::histogram::Histogram;

use super::ops::{self, Dir, OpError, OpResult};
use super::spec::MetaSpec;

/// The namespace of one run: shared (read-only) by its workers.
pub trait Namespace: Send + Sync {
    /// Why mkdir and rmdir are skipped here, or None where directories exist.
    fn no_dirs(&self) -> Option<&'static str>;
    /// Whether none of the run's names existed when it was opened, where the namespace can tell
    /// at no cost (an object store's opening LIST); a directory is checked by its maker.
    fn was_new(&self) -> bool {
        true
    }
    /// Worker `worker`'s handle on its tree `root` (a name relative to the namespace), made during
    /// a phase's set-up, outside the clock.
    fn tree(&self, worker: usize, root: &str) -> Result<Box<dyn Tree + '_>>;
    /// Make / remove directory `path` (relative to the namespace).
    fn mkdir(&self, path: &CStr) -> OpResult<()>;
    fn rmdir(&self, path: &CStr) -> OpResult<()>;
    /// fsync directory `path` (relative to the namespace), its duration into `sync`.
    fn fsync_dir(&self, path: &CStr, sync: &mut Histogram) -> OpResult<()>;
    /// The full name of `rel` as messages show it (a path, or an s3:// URL).
    fn full(&self, rel: &str) -> String;
    /// After every worker's own clean-up: remove whatever of this run's names is still there
    /// that the workers' states do not know of (an object store can list them). Returns the
    /// entries removed.
    fn sweep(&self, _spec: &MetaSpec) -> Result<u64> {
        Ok(0)
    }
}

/// One worker's operations on the items of its tree, names relative to the tree root.
pub trait Tree {
    /// Create `name` holding `size` bytes (`data` repeated), fsync'd into `fsync` when given.
    fn create(&mut self, name: &CStr, data: &[u8], size: u64, fsync: Option<&mut Histogram>) -> OpResult<()>;
    /// Check that `name` exists with `size` bytes.
    fn stat(&mut self, name: &CStr, size: u64) -> OpResult<()>;
    /// Read `name`'s `size` bytes through `buf`; with `expect`, compare them with it repeated.
    fn read(&mut self, name: &CStr, buf: &mut [u8], size: u64, expect: Option<&[u8]>) -> OpResult<()>;
    fn rename(&mut self, from: &CStr, to: &CStr) -> OpResult<()>;
    /// Remove `name`; a missing one fails with ENOENT where the namespace can tell.
    fn remove(&mut self, name: &CStr) -> OpResult<()>;
    /// fsync directory `path` (relative to the tree root).
    fn fsync_dir(&mut self, path: &CStr, sync: &mut Histogram) -> OpResult<()>;
    /// One LIST request over the tree: up to `page` names from `token` on. Returns the names
    /// listed and the token of the next page (None after the last).
    fn list_page(&mut self, token: Option<&str>, page: u32) -> OpResult<(u64, Option<String>)>;
}

/// A local directory: the target opened once (O_PATH), each worker's tree root opened by it.
pub struct LocalNamespace {
    base: Dir,
    target: String,
}

impl LocalNamespace {
    pub fn open(target: &str) -> Result<LocalNamespace> {
        let base = Dir::open(target).map_err(|e| Error::target(target, format!("cannot open the directory: {e}")))?;
        Ok(LocalNamespace { base, target: target.to_string() })
    }
}

fn cstring(s: &str) -> std::ffi::CString {
    std::ffi::CString::new(s).expect("names never contain NUL (checked in the spec)")
}

impl Namespace for LocalNamespace {
    fn no_dirs(&self) -> Option<&'static str> {
        None
    }

    fn tree(&self, _worker: usize, root: &str) -> Result<Box<dyn Tree + '_>> {
        let dir = Dir::open_at(self.base.fd(), &cstring(root)).map_err(|e| Error::io(format!("cannot open {}: {e}", self.full(root))))?;
        Ok(Box::new(LocalTree { dir }))
    }

    fn mkdir(&self, path: &CStr) -> OpResult<()> {
        ops::mkdir(self.base.fd(), path)
    }

    fn rmdir(&self, path: &CStr) -> OpResult<()> {
        ops::rmdir(self.base.fd(), path)
    }

    fn fsync_dir(&self, path: &CStr, sync: &mut Histogram) -> OpResult<()> {
        ops::fsync_dir(self.base.fd(), path, sync)
    }

    fn full(&self, rel: &str) -> String {
        if rel == "." {
            return self.target.clone();
        }
        format!("{}/{rel}", self.target.trim_end_matches('/'))
    }
}

/// A worker's tree root in a local directory.
struct LocalTree {
    dir: Dir,
}

impl Tree for LocalTree {
    fn create(&mut self, name: &CStr, data: &[u8], size: u64, fsync: Option<&mut Histogram>) -> OpResult<()> {
        ops::create(self.dir.fd(), name, data, size, fsync)
    }

    fn stat(&mut self, name: &CStr, size: u64) -> OpResult<()> {
        ops::stat(self.dir.fd(), name, size)
    }

    fn read(&mut self, name: &CStr, buf: &mut [u8], size: u64, expect: Option<&[u8]>) -> OpResult<()> {
        ops::read(self.dir.fd(), name, buf, size, expect)
    }

    fn rename(&mut self, from: &CStr, to: &CStr) -> OpResult<()> {
        ops::rename(self.dir.fd(), from, to)
    }

    fn remove(&mut self, name: &CStr) -> OpResult<()> {
        ops::unlink(self.dir.fd(), name)
    }

    fn fsync_dir(&mut self, path: &CStr, sync: &mut Histogram) -> OpResult<()> {
        ops::fsync_dir(self.dir.fd(), path, sync)
    }

    fn list_page(&mut self, _token: Option<&str>, _page: u32) -> OpResult<(u64, Option<String>)> {
        // the spec refuses a list phase on a directory; reaching here is a bug, said in words
        Err(OpError { step: "list", err: std::io::Error::other("list is for s3 targets only") })
    }
}
