//! Loading a client library at run time (dlopen), so storlab builds and runs without it and a
//! target that needs it is refused in one line naming the package to install.

use std::ffi::{c_void, CStr, CString};

/// An opened shared library. Never closed: its functions are used for the life of the process.
pub struct Library {
    handle: *mut c_void,
    soname: &'static str,
}

// SAFETY: the handle is only passed to dlsym, which is thread-safe.
unsafe impl Send for Library {}
unsafe impl Sync for Library {}

fn dl_error() -> String {
    // SAFETY: dlerror returns a thread-local message or null.
    let p = unsafe { libc::dlerror() };
    if p.is_null() { "unknown error".into() } else { unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned() }
}

impl Library {
    /// Open `soname`; `engine` and `package` name what needs it and what to install, for the error.
    pub fn open(soname: &'static str, engine: &str, package: &str) -> Result<Library, String> {
        let name = CString::new(soname).expect("no NUL in a soname");
        // SAFETY: dlopen with a valid C string.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(format!("the {engine} engine needs {soname}, which cannot be loaded ({}); install {package}", dl_error()));
        }
        Ok(Library { handle, soname })
    }

    /// The function `name`, as the function pointer type `F`.
    ///
    /// # Safety
    /// `F` must be an `unsafe extern "C" fn` type matching the library's declaration of `name`.
    pub unsafe fn function<F: Copy>(&self, name: &str) -> Result<F, String> {
        assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>(), "F must be a function pointer");
        let c = CString::new(name).expect("no NUL in a symbol name");
        // SAFETY: dlsym on an open library.
        let p = unsafe { libc::dlsym(self.handle, c.as_ptr()) };
        if p.is_null() {
            return Err(format!("{} has no {name}: the library is too old", self.soname));
        }
        // SAFETY: the caller vouches that F is the symbol's type; sizes checked above.
        Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }
}
