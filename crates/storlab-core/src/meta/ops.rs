//! The system calls of the metadata phases, each relative to a directory descriptor (openat,
//! mkdirat, fstatat, renameat, unlinkat — as mdtest-class tools do, so the kernel does not walk the
//! whole path from `/` for every operation) on NUL-terminated names built by `names`. They return
//! the failing step and the OS error; the caller adds the operation and the full path.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

use crate::histogram::Histogram;

/// A failed operation: which system call, and the OS error (or a description of a short
/// transfer / unexpected size).
#[derive(Debug)]
pub struct OpError {
    pub step: &'static str,
    pub err: io::Error,
}

impl OpError {
    fn last(step: &'static str) -> OpError {
        OpError { step, err: io::Error::last_os_error() }
    }
    /// The errno, if it was a system-call error.
    pub fn errno(&self) -> Option<i32> {
        self.err.raw_os_error()
    }
}

pub type OpResult<T> = std::result::Result<T, OpError>;

/// An open directory used as the anchor of relative paths (O_PATH: no read permission needed,
/// nothing but lookups).
pub struct Dir {
    fd: OwnedFd,
}

impl Dir {
    /// Open `path` (absolute or relative to the current directory).
    pub fn open(path: &str) -> io::Result<Dir> {
        let c = CString::new(path).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
        Dir::open_at(libc::AT_FDCWD, &c)
    }

    /// Open `path` relative to directory `parent`.
    pub fn open_at(parent: RawFd, path: &CStr) -> io::Result<Dir> {
        // SAFETY: `path` is a C string; the fd is owned from here on.
        let fd = unsafe { libc::openat(parent, path.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a freshly opened, valid descriptor.
        Ok(Dir { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    #[inline(always)]
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Give the calling thread a descriptor table of its own (unshare(CLONE_FILES)), as each rank of
/// a process-per-rank tool (mdtest) has. Threads sharing one table pay for it on every operation:
/// opening and closing a file take the table's lock and write its bitmap and slots, lines the
/// other workers write too, and while the table is shared every `*at` call takes and drops a
/// reference to the directory's open file (the kernel's single-owner shortcut is off). With a
/// private table each worker's open/close/stat touches only its own lines.
///
/// The new table starts as a copy (descriptors open now stay valid in both) and is released
/// when the thread exits, so a worker closes what it opened itself and opens its descriptors
/// only after this call. Returns whether it took effect; where unshare is refused (a seccomp
/// filter) the worker keeps the shared table: slower, never wrong.
pub fn private_descriptor_table() -> bool {
    // SAFETY: plain system call affecting only the calling thread's descriptor table.
    unsafe { libc::unshare(libc::CLONE_FILES) == 0 }
}

#[inline(always)]
pub fn mkdir(dir: RawFd, path: &CStr) -> OpResult<()> {
    // SAFETY: NUL-terminated path; plain system call.
    if unsafe { libc::mkdirat(dir, path.as_ptr(), 0o755) } != 0 {
        return Err(OpError::last("mkdir"));
    }
    Ok(())
}

#[inline(always)]
pub fn rmdir(dir: RawFd, path: &CStr) -> OpResult<()> {
    // SAFETY: as above.
    if unsafe { libc::unlinkat(dir, path.as_ptr(), libc::AT_REMOVEDIR) } != 0 {
        return Err(OpError::last("rmdir"));
    }
    Ok(())
}

#[inline(always)]
pub fn unlink(dir: RawFd, path: &CStr) -> OpResult<()> {
    // SAFETY: as above.
    if unsafe { libc::unlinkat(dir, path.as_ptr(), 0) } != 0 {
        return Err(OpError::last("unlink"));
    }
    Ok(())
}

#[inline(always)]
pub fn rename(dir: RawFd, from: &CStr, to: &CStr) -> OpResult<()> {
    // SAFETY: as above; both names are in separate buffers.
    if unsafe { libc::renameat(dir, from.as_ptr(), dir, to.as_ptr()) } != 0 {
        return Err(OpError::last("rename"));
    }
    Ok(())
}

fn close(fd: RawFd) -> OpResult<()> {
    // SAFETY: fd was opened by the caller and is closed exactly once here. A failed close (NFS
    // write-back errors surface here) is reported, not ignored.
    if unsafe { libc::close(fd) } != 0 {
        return Err(OpError::last("close"));
    }
    Ok(())
}

fn timed_fsync(fd: RawFd, sync: &mut Histogram) -> OpResult<()> {
    let t0 = Instant::now();
    // SAFETY: plain system call on an open descriptor.
    if unsafe { libc::fsync(fd) } != 0 {
        return Err(OpError::last("fsync"));
    }
    sync.record(t0.elapsed().as_nanos() as u64);
    Ok(())
}

/// Create a new file (O_EXCL), write `size` bytes from `data` (repeated), optionally fsync it,
/// close it. If anything after the open fails the file is unlinked again, so a failed create
/// leaves nothing behind.
#[inline(always)]
pub fn create(dir: RawFd, path: &CStr, data: &[u8], size: u64, fsync: Option<&mut Histogram>) -> OpResult<()> {
    // SAFETY: NUL-terminated path; plain system call.
    let fd = unsafe {
        libc::openat(dir, path.as_ptr(), libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC, 0o644 as libc::c_uint)
    };
    if fd < 0 {
        return Err(OpError::last("open"));
    }
    let body = (|| {
        let mut left = size;
        while left > 0 {
            let n = left.min(data.len() as u64) as usize;
            // SAFETY: data has at least n bytes.
            let w = unsafe { libc::write(fd, data.as_ptr().cast(), n) };
            if w < 0 {
                return Err(OpError::last("write"));
            }
            if w == 0 {
                return Err(OpError { step: "write", err: io::Error::new(io::ErrorKind::WriteZero, "wrote 0 bytes") });
            }
            left -= w as u64;
        }
        if let Some(h) = fsync {
            timed_fsync(fd, h)?;
        }
        Ok(())
    })();
    if let Err(e) = body {
        // SAFETY: fd is open; path NUL-terminated. Undo the create: the error is what matters.
        unsafe {
            libc::close(fd);
            libc::unlinkat(dir, path.as_ptr(), 0);
        }
        return Err(e);
    }
    if let Err(e) = close(fd) {
        // SAFETY: as above.
        unsafe { libc::unlinkat(dir, path.as_ptr(), 0) };
        return Err(e);
    }
    Ok(())
}

/// fstatat without following a symbolic link; checks that it is a regular file of `size` bytes.
#[inline(always)]
pub fn stat(dir: RawFd, path: &CStr, size: u64) -> OpResult<()> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: st is written by the kernel on success and read only then.
    if unsafe { libc::fstatat(dir, path.as_ptr(), st.as_mut_ptr(), libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return Err(OpError::last("stat"));
    }
    // SAFETY: fstatat returned 0, so st is initialised.
    let st = unsafe { st.assume_init() };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_size as u64 != size {
        return Err(OpError {
            step: "stat",
            err: io::Error::new(
                io::ErrorKind::InvalidData,
                format!("found mode {:o} and {} bytes, expected a regular file of {size} bytes", st.st_mode, st.st_size),
            ),
        });
    }
    Ok(())
}

/// Open a file read-only, read `size` bytes into `buf` (in pieces of at most its length), close.
#[inline(always)]
/// Open, read `size` bytes, close; with `expect` (the data create wrote, repeated from byte 0 of
/// the file), every byte read is compared with it and the first difference fails the read
/// (mdtest -X).
pub fn read(dir: RawFd, path: &CStr, buf: &mut [u8], size: u64, expect: Option<&[u8]>) -> OpResult<()> {
    // SAFETY: NUL-terminated path; plain system call.
    let fd = unsafe { libc::openat(dir, path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(OpError::last("open"));
    }
    let mut left = size;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        // SAFETY: buf has at least n bytes.
        let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), n) };
        if r <= 0 {
            let e = if r < 0 {
                OpError::last("read")
            } else {
                OpError {
                    step: "read",
                    err: io::Error::new(io::ErrorKind::UnexpectedEof, format!("file ended {left} bytes short of {size}")),
                }
            };
            // SAFETY: fd is open.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        if let Some(data) = expect.filter(|d| !d.is_empty()) {
            let at = size - left;
            if let Some(i) = first_difference(&buf[..r as usize], data, (at % data.len() as u64) as usize) {
                // SAFETY: fd is open.
                unsafe { libc::close(fd) };
                let msg = format!("byte {} differs from what create wrote (mdtest -X verification)", at + i as u64);
                return Err(OpError { step: "verify", err: io::Error::new(io::ErrorKind::InvalidData, msg) });
            }
        }
        left -= r as u64;
    }
    close(fd)
}

/// The index of the first byte of `got` that differs from `data` repeated, starting at `data[from]`;
/// compared a run at a time (memcmp), so a 3,901-byte file costs what its copy costs.
pub(crate) fn first_difference(got: &[u8], data: &[u8], from: usize) -> Option<usize> {
    let (mut i, mut pos) = (0, from);
    while i < got.len() {
        let n = (got.len() - i).min(data.len() - pos);
        if got[i..i + n] != data[pos..pos + n] {
            return (0..n).find(|&k| got[i + k] != data[pos + k]).map(|k| i + k);
        }
        i += n;
        pos = 0;
    }
    None
}

/// Open a directory, fsync it, close it; the fsync's duration goes to `sync`.
pub fn fsync_dir(dir: RawFd, path: &CStr, sync: &mut Histogram) -> OpResult<()> {
    // SAFETY: NUL-terminated path; plain system call.
    let fd = unsafe { libc::openat(dir, path.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(OpError::last("open"));
    }
    let r = timed_fsync(fd, sync);
    // SAFETY: fd is open.
    unsafe { libc::close(fd) };
    r
}

#[cfg(test)]
mod tests {
    #[test]
    fn first_difference_follows_the_repeated_data_across_its_wraps() {
        let data = [1u8, 2, 3, 4, 5];
        let got: Vec<u8> = (0..12).map(|i| data[(i + 3) % 5]).collect();
        assert_eq!(first_difference(&got, &data, 3), None);
        let mut bad = got.clone();
        bad[9] ^= 1;
        assert_eq!(first_difference(&bad, &data, 3), Some(9));
        assert_eq!(first_difference(&got, &data, 0), Some(0));
    }

    use super::*;
    use std::ffi::CString;

    #[test]
    fn create_stat_read_rename_unlink_round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        let d = Dir::open(tmp.path().to_str().unwrap()).unwrap();
        let (a, b) = (CString::new("a").unwrap(), CString::new("b").unwrap());
        let data = vec![7u8; 1000];
        let mut h = Histogram::new();
        create(d.fd(), &a, &data, 2500, Some(&mut h)).unwrap();
        assert_eq!(h.count(), 1);
        assert_eq!(std::fs::metadata(tmp.path().join("a")).unwrap().len(), 2500);
        stat(d.fd(), &a, 2500).unwrap();
        let e = stat(d.fd(), &a, 10).unwrap_err();
        assert!(e.err.to_string().contains("expected a regular file of 10 bytes"), "{}", e.err);
        let mut buf = vec![0u8; 64];
        read(d.fd(), &a, &mut buf, 2500, None).unwrap();
        let e = read(d.fd(), &a, &mut buf, 2600, None).unwrap_err();
        assert_eq!(e.step, "read");
        assert!(e.err.to_string().contains("100 bytes short"), "{}", e.err);
        let e = create(d.fd(), &a, &data, 0, None).unwrap_err();
        assert_eq!((e.step, e.errno()), ("open", Some(libc::EEXIST)));
        rename(d.fd(), &a, &b).unwrap();
        assert!(!tmp.path().join("a").exists() && tmp.path().join("b").exists());
        unlink(d.fd(), &b).unwrap();
        assert_eq!(unlink(d.fd(), &b).unwrap_err().errno(), Some(libc::ENOENT));
    }

    #[test]
    fn a_private_descriptor_table_keeps_the_threads_descriptors_to_itself() {
        let tmp = tempfile::tempdir().unwrap();
        let base = Dir::open(tmp.path().to_str().unwrap()).unwrap();
        let shared = base.fd();
        let x = CString::new("x").unwrap();
        create(shared, &x, &[], 0, None).unwrap();
        let (inner_fd, base_valid_inside) = std::thread::spawn(move || {
            assert!(private_descriptor_table());
            // SAFETY: fcntl only queries the descriptor; openat opens a file we made.
            let base_valid = unsafe { libc::fcntl(shared, libc::F_GETFD) } >= 0;
            let fd = unsafe { libc::openat(shared, x.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            assert!(fd >= 0);
            (fd, base_valid) // left open: the table goes with the thread
        })
        .join()
        .unwrap();
        assert!(base_valid_inside, "descriptors open before the unshare stay valid in the copy");
        // the thread's descriptor was in its own table only (released when it ended): whatever
        // this number names here (another test may have reused it), it is not our file
        let here = std::fs::read_link(format!("/proc/self/fd/{inner_fd}")).ok();
        assert_ne!(here, Some(tmp.path().join("x")), "the thread's descriptor leaked into the process table");
    }

    #[test]
    fn mkdir_rmdir_and_directory_fsync() {
        let tmp = tempfile::tempdir().unwrap();
        let d = Dir::open(tmp.path().to_str().unwrap()).unwrap();
        let sub = CString::new("sub").unwrap();
        mkdir(d.fd(), &sub).unwrap();
        assert_eq!(mkdir(d.fd(), &sub).unwrap_err().errno(), Some(libc::EEXIST));
        let mut h = Histogram::new();
        fsync_dir(d.fd(), &sub, &mut h).unwrap();
        assert_eq!(h.count(), 1);
        let inner = Dir::open_at(d.fd(), &sub).unwrap();
        assert!(inner.fd() >= 0);
        rmdir(d.fd(), &sub).unwrap();
        assert!(!tmp.path().join("sub").exists());
    }
}
