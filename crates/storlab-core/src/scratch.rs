//! Scratch files of the crate's own tests: a path in /dev/shm (or /tmp) named after the test
//! process, removed when the test lets go of it, also when an assertion fails half-way.

use std::ffi::OsStr;
use std::fmt;
use std::ops::Deref;
use std::path::Path;

/// A scratch path; the file (and nothing else) at it is removed on drop.
pub struct Scratch(String);

impl Scratch {
    /// `{dir}/storlab-{owner}-{pid}-{name}`: tests of one process never collide with another's.
    pub fn new(owner: &str, name: &str) -> Scratch {
        let dir = if Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
        Scratch(format!("{dir}/storlab-{owner}-{}-{name}", std::process::id()))
    }
}

impl Deref for Scratch {
    type Target = String;
    fn deref(&self) -> &String {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        Path::new(&self.0)
    }
}

impl AsRef<OsStr> for Scratch {
    fn as_ref(&self) -> &OsStr {
        OsStr::new(&self.0)
    }
}

impl fmt::Display for Scratch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0); // gone already when the test removed it itself
    }
}

#[cfg(test)]
mod tests {
    use super::Scratch;

    #[test]
    fn the_file_goes_when_the_scratch_does_even_after_a_panic() {
        let path = {
            let s = Scratch::new("scratch", "panic");
            std::fs::write(&s, b"x").unwrap();
            let path = s.to_string();
            let r = std::panic::catch_unwind(move || {
                let _held = s;
                panic!("an assertion failing half-way");
            });
            assert!(r.is_err());
            path
        };
        assert!(!std::path::Path::new(&path).exists());
    }
}
