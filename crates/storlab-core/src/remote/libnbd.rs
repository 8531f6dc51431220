//! libnbd, the user-space NBD client library (Red Hat's; Debian `libnbd0`), loaded at run time.
//!
//! storlab links no network client library: it builds and runs without them, and a target whose
//! library is missing is refused in one line naming the package. This module opens `libnbd.so.0`
//! with dlopen once per process, looks up the few functions the nbd engine calls, and wraps a
//! connection (`Connection`) so that the rest of the engine never touches a raw pointer.
//!
//! The functions and their contracts are libnbd's documented C API (libnbd(3), nbd_create(3),
//! nbd_aio_pread(3), nbd_poll(3)): a handle is used by one thread at a time; asynchronous commands
//! complete inside `nbd_poll`, which runs their completion callbacks on the calling thread.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

use super::dl::Library;
use std::sync::OnceLock;

/// The library's name as the dynamic loader finds it (the soname of libnbd 1.x).
const SONAME: &str = "libnbd.so.0";
/// What to install when it is missing (Debian's package name).
pub const PACKAGE: &str = "libnbd0 (Debian; libnbd on Fedora)";

/// `nbd_completion_callback`: called once per asynchronous command when it ends, on the thread
/// that polls. `*error` is 0 or the command's errno. Returning 1 retires the command at once.
#[repr(C)]
pub struct CompletionCallback {
    pub callback: Option<unsafe extern "C" fn(user_data: *mut c_void, error: *mut c_int) -> c_int>,
    pub user_data: *mut c_void,
    pub free: Option<unsafe extern "C" fn(user_data: *mut c_void)>,
}

type Handle = *mut c_void;

/// The functions of libnbd the engine uses, resolved from the loaded library.
struct Api {
    create: unsafe extern "C" fn() -> Handle,
    close: unsafe extern "C" fn(Handle),
    get_error: unsafe extern "C" fn() -> *const c_char,
    get_errno: unsafe extern "C" fn() -> c_int,
    connect_uri: unsafe extern "C" fn(Handle, *const c_char) -> c_int,
    get_size: unsafe extern "C" fn(Handle) -> i64,
    is_read_only: unsafe extern "C" fn(Handle) -> c_int,
    can_flush: unsafe extern "C" fn(Handle) -> c_int,
    can_trim: unsafe extern "C" fn(Handle) -> c_int,
    pread: unsafe extern "C" fn(Handle, *mut c_void, usize, u64, u32) -> c_int,
    pwrite: unsafe extern "C" fn(Handle, *const c_void, usize, u64, u32) -> c_int,
    flush: unsafe extern "C" fn(Handle, u32) -> c_int,
    aio_pread: unsafe extern "C" fn(Handle, *mut c_void, usize, u64, CompletionCallback, u32) -> i64,
    aio_pwrite: unsafe extern "C" fn(Handle, *const c_void, usize, u64, CompletionCallback, u32) -> i64,
    aio_trim: unsafe extern "C" fn(Handle, u64, u64, CompletionCallback, u32) -> i64,
    poll: unsafe extern "C" fn(Handle, c_int) -> c_int,
    aio_in_flight: unsafe extern "C" fn(Handle) -> c_int,
}

// SAFETY: the table holds plain function pointers into a library that is never unloaded.
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

fn load() -> Result<Api, String> {
    let lib = Library::open(SONAME, "nbd", PACKAGE)?;
    // SAFETY: each type is the Api field's, declared after libnbd.h (1.14 or later).
    unsafe {
        Ok(Api {
            create: lib.function("nbd_create")?,
            close: lib.function("nbd_close")?,
            get_error: lib.function("nbd_get_error")?,
            get_errno: lib.function("nbd_get_errno")?,
            connect_uri: lib.function("nbd_connect_uri")?,
            get_size: lib.function("nbd_get_size")?,
            is_read_only: lib.function("nbd_is_read_only")?,
            can_flush: lib.function("nbd_can_flush")?,
            can_trim: lib.function("nbd_can_trim")?,
            pread: lib.function("nbd_pread")?,
            pwrite: lib.function("nbd_pwrite")?,
            flush: lib.function("nbd_flush")?,
            aio_pread: lib.function("nbd_aio_pread")?,
            aio_pwrite: lib.function("nbd_aio_pwrite")?,
            aio_trim: lib.function("nbd_aio_trim")?,
            poll: lib.function("nbd_poll")?,
            aio_in_flight: lib.function("nbd_aio_in_flight")?,
        })
    }
}

fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// Whether libnbd can be loaded here (the bindings report it; tests skip without it).
pub fn available() -> Result<(), String> {
    api().map(|_| ())
}

/// One connection to an NBD export. Not shared between threads (libnbd handles may be, but each
/// worker has its own connection, as fio's nbd engine has one per job).
pub struct Connection {
    api: &'static Api,
    h: Handle,
}

// SAFETY: a handle may move to another thread; it is never used from two at once (&mut self).
unsafe impl Send for Connection {}

impl Connection {
    /// Connect to `uri` (nbd://HOST[:PORT]/EXPORT, nbds://, nbd+unix:///EXPORT?socket=PATH).
    pub fn connect(uri: &str) -> Result<Connection, String> {
        let api = api()?;
        // SAFETY: nbd_create has no preconditions; null means it failed.
        let h = unsafe { (api.create)() };
        if h.is_null() {
            return Err(last_error(api));
        }
        let conn = Connection { api, h };
        let c = CString::new(uri).map_err(|_| "the URI holds a NUL byte".to_string())?;
        // SAFETY: a live handle and a C string.
        if unsafe { (api.connect_uri)(h, c.as_ptr()) } < 0 {
            return Err(conn.error());
        }
        Ok(conn)
    }

    /// libnbd's message for the last failed call on this thread.
    pub fn error(&self) -> String {
        last_error(self.api)
    }

    /// The errno of the last failed call (EIO when libnbd gives none).
    pub fn errno(&self) -> i32 {
        // SAFETY: thread-local state of the library.
        let e = unsafe { (self.api.get_errno)() };
        if e > 0 { e } else { libc::EIO }
    }

    pub fn size(&self) -> Result<u64, String> {
        // SAFETY: a connected handle.
        let n = unsafe { (self.api.get_size)(self.h) };
        if n < 0 { Err(self.error()) } else { Ok(n as u64) }
    }

    fn flag(&self, f: unsafe extern "C" fn(Handle) -> c_int) -> Result<bool, String> {
        // SAFETY: a connected handle.
        match unsafe { f(self.h) } {
            n if n < 0 => Err(self.error()),
            n => Ok(n > 0),
        }
    }

    pub fn read_only(&self) -> Result<bool, String> {
        self.flag(self.api.is_read_only)
    }

    pub fn can_flush(&self) -> Result<bool, String> {
        self.flag(self.api.can_flush)
    }

    pub fn can_trim(&self) -> Result<bool, String> {
        self.flag(self.api.can_trim)
    }

    /// Read `buf.len()` bytes at `offset`, waiting for them.
    pub fn pread(&mut self, buf: &mut [u8], offset: u64) -> Result<(), String> {
        // SAFETY: buf is valid for its length for the whole (synchronous) call.
        let rc = unsafe { (self.api.pread)(self.h, buf.as_mut_ptr().cast(), buf.len(), offset, 0) };
        if rc < 0 { Err(self.error()) } else { Ok(()) }
    }

    /// Write `buf` at `offset`, waiting for the server's reply.
    pub fn pwrite(&mut self, buf: &[u8], offset: u64) -> Result<(), String> {
        // SAFETY: buf is valid for its length for the whole (synchronous) call.
        let rc = unsafe { (self.api.pwrite)(self.h, buf.as_ptr().cast(), buf.len(), offset, 0) };
        if rc < 0 { Err(self.error()) } else { Ok(()) }
    }

    /// Ask the server to make written data stable (NBD_CMD_FLUSH), waiting for it.
    pub fn flush(&mut self) -> Result<(), String> {
        // SAFETY: a connected handle.
        if unsafe { (self.api.flush)(self.h, 0) } < 0 { Err(self.error()) } else { Ok(()) }
    }

    /// Start a read into `buf` (`len` bytes at `offset`); `done` is called from `poll` when it ends.
    ///
    /// # Safety
    /// `buf` must stay valid for `len` bytes, and `done.user_data` for the callback, until the
    /// callback has run.
    pub unsafe fn aio_pread(&mut self, buf: *mut u8, len: usize, offset: u64, done: CompletionCallback) -> Result<(), i64> {
        // SAFETY: the caller keeps buf and the callback's data alive until completion.
        let cookie = unsafe { (self.api.aio_pread)(self.h, buf.cast(), len, offset, done, 0) };
        if cookie < 0 { Err(-(self.errno() as i64)) } else { Ok(()) }
    }

    /// Start a write of `len` bytes from `buf` at `offset`.
    ///
    /// # Safety
    /// As `aio_pread`.
    pub unsafe fn aio_pwrite(&mut self, buf: *const u8, len: usize, offset: u64, done: CompletionCallback) -> Result<(), i64> {
        // SAFETY: the caller keeps buf and the callback's data alive until completion.
        let cookie = unsafe { (self.api.aio_pwrite)(self.h, buf.cast(), len, offset, done, 0) };
        if cookie < 0 { Err(-(self.errno() as i64)) } else { Ok(()) }
    }

    /// Start a trim (NBD_CMD_TRIM) of `len` bytes at `offset`.
    ///
    /// # Safety
    /// `done.user_data` must stay valid until the callback has run.
    pub unsafe fn aio_trim(&mut self, len: u64, offset: u64, done: CompletionCallback) -> Result<(), i64> {
        // SAFETY: the caller keeps the callback's data alive until completion.
        let cookie = unsafe { (self.api.aio_trim)(self.h, len, offset, done, 0) };
        if cookie < 0 { Err(-(self.errno() as i64)) } else { Ok(()) }
    }

    /// Run the connection's state machine until something happens or `timeout_ms` passes (-1:
    /// no limit). Completion callbacks run in here. Returns false on a time-out.
    pub fn poll(&mut self, timeout_ms: i32) -> Result<bool, String> {
        // SAFETY: a connected handle.
        match unsafe { (self.api.poll)(self.h, timeout_ms) } {
            n if n < 0 => Err(self.error()),
            n => Ok(n > 0),
        }
    }

    /// Commands sent and not yet completed.
    pub fn in_flight(&self) -> usize {
        // SAFETY: a connected handle.
        unsafe { (self.api.aio_in_flight)(self.h) }.max(0) as usize
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // SAFETY: the handle was made by nbd_create and is closed once (it sends NBD_CMD_DISC).
        unsafe { (self.api.close)(self.h) }
    }
}

fn last_error(api: &Api) -> String {
    // SAFETY: thread-local message of the library, or null.
    let p = unsafe { (api.get_error)() };
    if p.is_null() {
        return "libnbd failed without a message".into();
    }
    // libnbd prefixes the function name ("nbd_connect_uri: ..."); keep the message only.
    let text = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    match text.split_once(": ") {
        Some((func, rest)) if func.starts_with("nbd_") => rest.to_string(),
        _ => text,
    }
}
