//! A directory scan with find's criteria (io500's find phase, after pfind): the entries of a set
//! of directories (not below them), the sub-directories to look in next, how many files were
//! looked at, and how many match a name that contains a fixed string, an exact size and a
//! modification time later than a given one. The name is tested first, so only files whose name
//! matches are stat'ed (find -O1); directories are told apart by the entry's type, which the
//! kernel gives with the name (lstat only where the file system leaves it unknown).

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What a file must be to be found; `None` criteria match anything.
#[derive(Debug, Clone, Default)]
pub struct FindCriteria {
    /// A string the name must contain (find -name '*TEXT*').
    pub name_contains: Option<String>,
    /// The exact size in bytes (find -size Nc).
    pub size: Option<u64>,
    /// Seconds since the epoch the modification time must be later than (find -newer FILE), as a
    /// float the way Python's st_mtime is (seconds + nanoseconds x 1e-9).
    pub newer_than: Option<f64>,
}

/// What one scan saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanTotals {
    pub subdirs: Vec<PathBuf>,
    /// files (every entry not a directory) looked at
    pub looked: u64,
    pub found: u64,
    /// entries or directories that could not be read or stat'ed
    pub errors: u64,
}

/// Scan the entries of `dirs` (not below) against `criteria`.
pub fn scan_dirs(dirs: &[PathBuf], criteria: &FindCriteria) -> ScanTotals {
    let mut totals = ScanTotals::default();
    for dir in dirs {
        if scan_dir(dir, criteria, &mut totals).is_err() {
            totals.errors += 1;
        }
    }
    totals
}

/// One directory through opendir/readdir, each matching name stat'ed relative to the directory
/// (fstatat: no path walk per file, which costs as much as the rest of the scan).
fn scan_dir(dir: &Path, criteria: &FindCriteria, totals: &mut ScanTotals) -> std::io::Result<()> {
    let needle = criteria.name_contains.as_deref().map(str::as_bytes);
    let stat_needed = criteria.size.is_some() || criteria.newer_than.is_some();
    let c_dir = CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: a valid NUL-terminated path; the stream is closed below on every path out.
    let stream = unsafe { libc::opendir(c_dir.as_ptr()) };
    if stream.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    let fd = unsafe { libc::dirfd(stream) };
    loop {
        // SAFETY: `stream` is an open directory stream; the entry is read before the next call.
        let entry = unsafe { libc::readdir64(stream) };
        if entry.is_null() {
            break;      // the end (errno is not told apart from it: readdir fails only on a bad stream)
        }
        let entry = unsafe { &*entry };
        let name = unsafe { CStr::from_ptr(entry.d_name.as_ptr()) };
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let is_dir = match entry.d_type {
            libc::DT_DIR => true,
            libc::DT_UNKNOWN => match lstat_at(fd, name) {
                Some(st) => st.st_mode & libc::S_IFMT == libc::S_IFDIR,
                None => {
                    totals.errors += 1;
                    continue;
                }
            },
            _ => false,
        };
        if is_dir {
            totals.subdirs.push(dir.join(OsStr::from_bytes(bytes)));
            continue;
        }
        totals.looked += 1;
        if needle.is_some_and(|n| !contains(bytes, n)) {
            continue;
        }
        if !stat_needed {
            totals.found += 1;
            continue;
        }
        match lstat_at(fd, name) {
            Some(st) if matches(&st, criteria) => totals.found += 1,
            Some(_) => {}
            None => totals.errors += 1,
        }
    }
    // SAFETY: opened above, closed once.
    unsafe { libc::closedir(stream) };
    Ok(())
}

fn lstat_at(fd: libc::c_int, name: &CStr) -> Option<libc::stat64> {
    let mut st = std::mem::MaybeUninit::<libc::stat64>::uninit();
    // SAFETY: `fd` is the open directory's, `name` NUL-terminated, `st` written on success.
    let rc = unsafe { libc::fstatat64(fd, name.as_ptr(), st.as_mut_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
    (rc == 0).then(|| unsafe { st.assume_init() })
}

fn matches(st: &libc::stat64, criteria: &FindCriteria) -> bool {
    // as Python's st_mtime: seconds + nanoseconds x 1e-9, in a double
    let mtime = st.st_mtime as f64 + st.st_mtime_nsec as f64 * 1e-9;
    criteria.size.is_none_or(|size| st.st_size as u64 == size) && criteria.newer_than.is_none_or(|t| mtime > t)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tree() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("storlab-scan-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("sub")).unwrap();
        fs::write(dir.join("a01b"), vec![0u8; 3901]).unwrap();
        fs::write(dir.join("c01d"), vec![0u8; 10]).unwrap();
        fs::write(dir.join("zzz"), vec![0u8; 3901]).unwrap();
        fs::write(dir.join("sub").join("x01"), b"below").unwrap();
        dir
    }

    #[test]
    fn finds_by_name_then_size_and_time_and_lists_subdirs_without_descending() {
        let dir = tree();
        let all = scan_dirs(std::slice::from_ref(&dir), &FindCriteria::default());
        assert_eq!((all.looked, all.found, all.errors), (3, 3, 0));
        assert_eq!(all.subdirs, vec![dir.join("sub")]);
        let named = FindCriteria { name_contains: Some("01".into()), ..Default::default() };
        assert_eq!(scan_dirs(std::slice::from_ref(&dir), &named).found, 2);
        let hard = FindCriteria { name_contains: Some("01".into()), size: Some(3901), newer_than: Some(0.0) };
        assert_eq!(scan_dirs(std::slice::from_ref(&dir), &hard).found, 1);
        let later = FindCriteria { newer_than: Some(f64::MAX), ..hard };
        assert_eq!(scan_dirs(std::slice::from_ref(&dir), &later).found, 0);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error_not_a_panic() {
        let t = scan_dirs(&[PathBuf::from("/nonexistent/storlab-scan")], &FindCriteria::default());
        assert_eq!((t.looked, t.errors), (0, 1));
    }
}
