//! libnfs, the user-space NFS client library (Ronnie Sahlberg's; Debian `libnfs13`), loaded at run
//! time. No kernel client and no mount: the library speaks NFSv3 or NFSv4 itself, as fio's nfs
//! engine does.
//!
//! One `File` is one NFS context (its own TCP connection) with one open file. Its asynchronous
//! calls complete inside `service`, which runs their callbacks on the calling thread (libnfs's
//! event loop: poll the context's socket for `nfs_which_events`, then `nfs_service`). The functions
//! and their contracts are libnfs 5's C API (nfsc/libnfs.h).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

use super::dl::Library;

/// The soname of libnfs 5 (libnfs 6 changed the read and write calls' arguments: not loaded).
const SONAME: &str = "libnfs.so.13";
pub const PACKAGE: &str = "libnfs13 (Debian; libnfs on Fedora)";

type Context = *mut c_void;
type Fh = *mut c_void;

/// `nfs_cb`: `err` is the bytes transferred (or 0) on success, -errno on failure; `data` is the
/// read data for a read.
pub type Callback = unsafe extern "C" fn(err: c_int, nfs: Context, data: *mut c_void, private_data: *mut c_void);

#[repr(C)]
struct Url {
    server: *mut c_char,
    path: *mut c_char,
    file: *mut c_char,
}

#[repr(C)]
#[derive(Default)]
struct Stat64 {
    dev: u64,
    ino: u64,
    mode: u64,
    nlink: u64,
    uid: u64,
    gid: u64,
    rdev: u64,
    size: u64,
    blksize: u64,
    blocks: u64,
    atime: u64,
    mtime: u64,
    ctime: u64,
    atime_nsec: u64,
    mtime_nsec: u64,
    ctime_nsec: u64,
    used: u64,
}

struct Api {
    init_context: unsafe extern "C" fn() -> Context,
    destroy_context: unsafe extern "C" fn(Context),
    get_error: unsafe extern "C" fn(Context) -> *const c_char,
    parse_url_full: unsafe extern "C" fn(Context, *const c_char) -> *mut Url,
    destroy_url: unsafe extern "C" fn(*mut Url),
    mount: unsafe extern "C" fn(Context, *const c_char, *const c_char) -> c_int,
    stat64: unsafe extern "C" fn(Context, *const c_char, *mut Stat64) -> c_int,
    open: unsafe extern "C" fn(Context, *const c_char, c_int, *mut Fh) -> c_int,
    create: unsafe extern "C" fn(Context, *const c_char, c_int, c_int, *mut Fh) -> c_int,
    close: unsafe extern "C" fn(Context, Fh) -> c_int,
    unlink: unsafe extern "C" fn(Context, *const c_char) -> c_int,
    pread: unsafe extern "C" fn(Context, Fh, u64, u64, *mut c_void) -> c_int,
    pwrite: unsafe extern "C" fn(Context, Fh, u64, u64, *const c_void) -> c_int,
    pread_async: unsafe extern "C" fn(Context, Fh, u64, u64, Callback, *mut c_void) -> c_int,
    pwrite_async: unsafe extern "C" fn(Context, Fh, u64, u64, *const c_void, Callback, *mut c_void) -> c_int,
    fsync: unsafe extern "C" fn(Context, Fh) -> c_int,
    ftruncate: unsafe extern "C" fn(Context, Fh, u64) -> c_int,
    get_fd: unsafe extern "C" fn(Context) -> c_int,
    which_events: unsafe extern "C" fn(Context) -> c_int,
    service: unsafe extern "C" fn(Context, c_int) -> c_int,
    queue_length: unsafe extern "C" fn(Context) -> c_int,
}

// SAFETY: plain function pointers into a library that is never unloaded.
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

fn load() -> Result<Api, String> {
    let lib = Library::open(SONAME, "nfs", PACKAGE)?;
    // SAFETY: each type is the Api field's, declared after nfsc/libnfs.h of libnfs 5.
    unsafe {
        Ok(Api {
            init_context: lib.function("nfs_init_context")?,
            destroy_context: lib.function("nfs_destroy_context")?,
            get_error: lib.function("nfs_get_error")?,
            parse_url_full: lib.function("nfs_parse_url_full")?,
            destroy_url: lib.function("nfs_destroy_url")?,
            mount: lib.function("nfs_mount")?,
            stat64: lib.function("nfs_stat64")?,
            open: lib.function("nfs_open")?,
            create: lib.function("nfs_create")?,
            close: lib.function("nfs_close")?,
            unlink: lib.function("nfs_unlink")?,
            pread: lib.function("nfs_pread")?,
            pwrite: lib.function("nfs_pwrite")?,
            pread_async: lib.function("nfs_pread_async")?,
            pwrite_async: lib.function("nfs_pwrite_async")?,
            fsync: lib.function("nfs_fsync")?,
            ftruncate: lib.function("nfs_ftruncate")?,
            get_fd: lib.function("nfs_get_fd")?,
            which_events: lib.function("nfs_which_events")?,
            service: lib.function("nfs_service")?,
            queue_length: lib.function("nfs_queue_length")?,
        })
    }
}

fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

pub fn available() -> Result<(), String> {
    api().map(|_| ())
}

/// The URL as storlab hands it to libnfs: NFSv4 unless it names a version (the servers storlab is
/// tested against serve v4 without a portmapper, which v3 needs).
pub fn with_default_version(url: &str) -> String {
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    if query.split('&').any(|kv| kv.starts_with("version=")) {
        url.to_string()
    } else if url.contains('?') {
        format!("{url}&version=4")
    } else {
        format!("{url}?version=4")
    }
}

/// The NFS version a URL asks for (4 unless it names another).
pub fn version_of(url: &str) -> u32 {
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    query.split('&').find_map(|kv| kv.strip_prefix("version=")).and_then(|v| v.parse().ok()).unwrap_or(4)
}

/// Why this library cannot write to `url`, if it cannot: libnfs 4.0 (the only one loaded,
/// libnfs.so.13) fails every NFSv4 WRITE larger than about 2 KiB while encoding it ("Failed to
/// encode COMPOUND4args", or EIO), seen here against nfs-ganesha 4.3 with nfs-cp as with storlab;
/// its NFSv3 writes work.
pub fn cannot_write(url: &str) -> Option<String> {
    (version_of(url) == 4).then(|| format!(
        "{SONAME} (libnfs 4.0) cannot write over NFSv4: its WRITEs over about 2 KiB fail to encode; add ?version=3 to the URL (NFSv3 needs the server's portmapper)"
    ))
}

fn cstr(text: &str, what: &str) -> Result<CString, String> {
    CString::new(text).map_err(|_| format!("the {what} holds a NUL byte"))
}

fn text_of(p: *const c_char) -> String {
    if p.is_null() { String::new() } else { unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned() }
}

/// One NFS file, open over its own connection.
pub struct File {
    api: &'static Api,
    ctx: Context,
    fh: Fh,
    /// The file's path inside the mounted export.
    path: CString,
    pub size: u64,
    /// The file did not exist and was made by `open`.
    pub created: bool,
}

// SAFETY: a context may move to another thread; it is used from one at a time (&mut self).
unsafe impl Send for File {}

/// Why `File::open` did not open the file: it is not there (and was not to be made), or another
/// failure, in words.
#[derive(Debug)]
pub enum OpenError {
    Missing(String),
    Failed(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Missing(m) | OpenError::Failed(m) => f.write_str(m),
        }
    }
}

impl From<String> for OpenError {
    fn from(m: String) -> Self {
        OpenError::Failed(m)
    }
}

/// How `File::open` treats a file that does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    Refuse,
    Create,
}

impl File {
    /// Mount the export the URL names and open its file for reading (and writing when `writes`).
    /// nfs://SERVER/EXPORT/PATH/FILE[?version=3|4&...]
    pub fn open(url: &str, writes: bool, missing: Missing) -> Result<File, OpenError> {
        let api = api()?;
        // SAFETY: no preconditions; null means it failed.
        let ctx = unsafe { (api.init_context)() };
        if ctx.is_null() {
            return Err(OpenError::Failed("cannot make an NFS context".into()));
        }
        let mut f = File { api, ctx, fh: std::ptr::null_mut(), path: CString::default(), size: 0, created: false };
        let c_url = cstr(&with_default_version(url), "URL")?;
        // SAFETY: a live context and a C string; the url is freed below.
        let parsed = unsafe { (api.parse_url_full)(ctx, c_url.as_ptr()) };
        if parsed.is_null() {
            return Err(OpenError::Failed(format!("not an NFS URL with a file (nfs://SERVER/EXPORT/FILE): {}", f.error())));
        }
        // SAFETY: parse_url_full returned a valid url whose strings live until destroy_url.
        let (server, export, file) = unsafe { (text_of((*parsed).server), text_of((*parsed).path), text_of((*parsed).file)) };
        unsafe { (api.destroy_url)(parsed) };
        if file.is_empty() || file == "/" {
            return Err(OpenError::Failed("names no file inside the export: give nfs://SERVER/EXPORT/FILE".into()));
        }
        let (c_server, c_export) = (cstr(&server, "server")?, cstr(&export, "export")?);
        // SAFETY: a live context and C strings.
        if unsafe { (api.mount)(ctx, c_server.as_ptr(), c_export.as_ptr()) } != 0 {
            return Err(OpenError::Failed(format!("cannot mount {server}:{export}: {}", f.error())));
        }
        f.path = cstr(&file, "path")?;
        let mut st = Stat64::default();
        // SAFETY: a mounted context, a C string and a stat buffer of libnfs's layout.
        let exists = unsafe { (api.stat64)(ctx, f.path.as_ptr(), &mut st) } == 0;
        let flags = if writes { libc::O_RDWR } else { libc::O_RDONLY };
        let mut fh: Fh = std::ptr::null_mut();
        if exists {
            if st.mode & libc::S_IFMT as u64 != libc::S_IFREG as u64 {
                return Err(OpenError::Failed(format!("{file} in {server}:{export} is not a regular file")));
            }
            // SAFETY: as above; fh receives the open file.
            if unsafe { (api.open)(ctx, f.path.as_ptr(), flags, &mut fh) } != 0 {
                return Err(OpenError::Failed(format!("cannot open {file}: {}", f.error())));
            }
            f.size = st.size;
        } else if missing == Missing::Create && writes {
            // SAFETY: as above; O_EXCL: never take over a file made in between.
            if unsafe { (api.create)(ctx, f.path.as_ptr(), libc::O_RDWR | libc::O_EXCL, 0o644, &mut fh) } != 0 {
                return Err(OpenError::Failed(format!("cannot create {file}: {}", f.error())));
            }
            f.created = true;
        } else {
            return Err(OpenError::Missing(format!("{file} does not exist in {server}:{export}")));
        }
        f.fh = fh;
        Ok(f)
    }

    pub fn error(&self) -> String {
        // SAFETY: a live context; the message belongs to it.
        text_of(unsafe { (self.api.get_error)(self.ctx) })
    }

    /// Set the file's length.
    pub fn truncate(&mut self, len: u64) -> Result<(), String> {
        // SAFETY: an open file.
        match unsafe { (self.api.ftruncate)(self.ctx, self.fh, len) } {
            0 => {
                self.size = len;
                Ok(())
            }
            _ => Err(self.error()),
        }
    }

    /// Read `buf.len()` bytes at `offset`, waiting; a short read is an error.
    pub fn pread(&mut self, buf: &mut [u8], offset: u64) -> Result<(), String> {
        let mut done = 0usize;
        while done < buf.len() {
            let rest = &mut buf[done..];
            // SAFETY: rest is valid for its length for the (synchronous) call.
            let n = unsafe { (self.api.pread)(self.ctx, self.fh, offset + done as u64, rest.len() as u64, rest.as_mut_ptr().cast()) };
            if n <= 0 {
                return Err(if n < 0 { self.error() } else { format!("end of file at offset {}", offset + done as u64) });
            }
            done += n as usize;
        }
        Ok(())
    }

    /// Write all of `buf` at `offset`, waiting.
    pub fn pwrite(&mut self, buf: &[u8], offset: u64) -> Result<(), String> {
        let mut done = 0usize;
        while done < buf.len() {
            let rest = &buf[done..];
            // SAFETY: rest is valid for its length for the (synchronous) call.
            let n = unsafe { (self.api.pwrite)(self.ctx, self.fh, offset + done as u64, rest.len() as u64, rest.as_ptr().cast()) };
            if n <= 0 {
                return Err(self.error());
            }
            done += n as usize;
        }
        Ok(())
    }

    /// Commit written data to stable storage on the server (NFS COMMIT), waiting.
    pub fn fsync(&mut self) -> Result<(), String> {
        // SAFETY: an open file.
        if unsafe { (self.api.fsync)(self.ctx, self.fh) } != 0 { Err(self.error()) } else { Ok(()) }
    }

    /// Start a read of `len` bytes at `offset`; `cb(…, private)` runs from `service` with the data.
    ///
    /// # Safety
    /// `private` must stay valid until the callback has run.
    pub unsafe fn pread_async(&mut self, offset: u64, len: u64, cb: Callback, private: *mut c_void) -> Result<(), i64> {
        // SAFETY: an open file; the caller keeps private alive.
        match unsafe { (self.api.pread_async)(self.ctx, self.fh, offset, len, cb, private) } {
            0 => Ok(()),
            _ => Err(-(libc::EIO as i64)),
        }
    }

    /// Start a write of `len` bytes from `buf` at `offset`.
    ///
    /// # Safety
    /// `buf` (for `len` bytes) and `private` must stay valid until the callback has run.
    pub unsafe fn pwrite_async(&mut self, buf: *const u8, len: u64, offset: u64, cb: Callback, private: *mut c_void) -> Result<(), i64> {
        // SAFETY: an open file; the caller keeps buf and private alive.
        match unsafe { (self.api.pwrite_async)(self.ctx, self.fh, offset, len, buf.cast(), cb, private) } {
            0 => Ok(()),
            _ => Err(-(libc::EIO as i64)),
        }
    }

    /// Wait until the connection has something to do (or `timeout_ms` passes; -1: no limit) and
    /// let libnfs do it: callbacks of finished calls run in here. False on a time-out.
    pub fn service(&mut self, timeout_ms: i32) -> Result<bool, String> {
        // SAFETY: a live context.
        let (fd, events) = unsafe { ((self.api.get_fd)(self.ctx), (self.api.which_events)(self.ctx)) };
        let mut pfd = libc::pollfd { fd, events: events as i16, revents: 0 };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return if e.kind() == std::io::ErrorKind::Interrupted { Ok(false) } else { Err(format!("poll: {e}")) };
        }
        if n == 0 {
            return Ok(false);
        }
        // SAFETY: a live context and the events poll returned.
        if unsafe { (self.api.service)(self.ctx, pfd.revents as c_int) } < 0 {
            return Err(self.error());
        }
        Ok(true)
    }

    /// Calls sent and not yet answered.
    pub fn queued(&self) -> usize {
        // SAFETY: a live context.
        unsafe { (self.api.queue_length)(self.ctx) }.max(0) as usize
    }

    /// Remove the file (one this run created, after a failure).
    pub fn unlink(mut self) -> Result<(), String> {
        self.close_file();
        // SAFETY: a mounted context and a C string.
        if unsafe { (self.api.unlink)(self.ctx, self.path.as_ptr()) } != 0 { Err(self.error()) } else { Ok(()) }
    }

    fn close_file(&mut self) {
        if !self.fh.is_null() {
            // SAFETY: an open file, closed once.
            unsafe { (self.api.close)(self.ctx, self.fh) };
            self.fh = std::ptr::null_mut();
        }
    }
}

impl Drop for File {
    fn drop(&mut self) {
        self.close_file();
        // SAFETY: the context was made by nfs_init_context and is destroyed once.
        unsafe { (self.api.destroy_context)(self.ctx) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_the_url_and_v4_writes_are_refused() {
        assert_eq!(version_of("nfs://h/e/f"), 4);
        assert_eq!(version_of("nfs://h/e/f?uid=0&version=3"), 3);
        assert!(cannot_write("nfs://h/e/f").is_some_and(|m| m.contains("version=3")));
        assert!(cannot_write("nfs://h/e/f?version=3").is_none());
    }

    #[test]
    fn nfs_v4_is_asked_for_unless_the_url_names_a_version() {
        assert_eq!(with_default_version("nfs://h/e/f"), "nfs://h/e/f?version=4");
        assert_eq!(with_default_version("nfs://h/e/f?uid=0"), "nfs://h/e/f?uid=0&version=4");
        assert_eq!(with_default_version("nfs://h/e/f?version=3"), "nfs://h/e/f?version=3");
        assert_eq!(with_default_version("nfs://h/e/f?uid=0&version=3"), "nfs://h/e/f?uid=0&version=3");
    }
}
