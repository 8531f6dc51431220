//! Targets behind a network: recognised by their URL, opened through a user-space client library
//! (no kernel client, no mount), as fio's nbd and nfs engines open theirs; S3 objects through a
//! built-in HTTP client (s3.rs, s3_config.rs).
//!
//! A remote target is described once here: which engine serves it, how the plan learns its size,
//! and how the write-safety rule is applied to it. The safety rule is the one of block devices:
//! a target that holds data is written only when the user named it (`--allow-destroy`); the plan
//! looks at the data over the same connection kind the workers then use, so what is checked is
//! what is opened.

mod dl;
pub mod libnbd;
pub mod libnfs;
pub mod s3;
pub mod s3_config;

use crate::group::EngineKind;

/// The kinds of remote target, by URL scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteKind {
    /// A network block device export: nbd://HOST[:PORT]/EXPORT, nbds:// (TLS), nbd+unix://.
    Nbd,
    /// A file on an NFS export: nfs://SERVER/EXPORT/FILE[?version=3] (NFSv4 by default).
    Nfs,
    /// The objects under a prefix of an S3 bucket: s3://BUCKET/PREFIX.
    S3,
}

impl RemoteKind {
    /// The kind a target names, or None for a local path.
    pub fn of(target: &str) -> Option<RemoteKind> {
        let scheme = target.split_once("://")?.0;
        match scheme {
            "nbd" | "nbds" | "nbd+unix" | "nbds+unix" => Some(RemoteKind::Nbd),
            "nfs" => Some(RemoteKind::Nfs),
            "s3" => Some(RemoteKind::S3),
            _ => None,
        }
    }

    /// The engine that reads and writes this kind (fio's engine of the same name).
    pub fn engine(self) -> EngineKind {
        match self {
            RemoteKind::Nbd => EngineKind::Nbd,
            RemoteKind::Nfs => EngineKind::Nfs,
            RemoteKind::S3 => EngineKind::S3,
        }
    }

    /// Whether this host can reach such a target: its client library loads (else why not).
    pub fn client_available(self) -> Result<(), String> {
        match self {
            RemoteKind::Nbd => libnbd::available(),
            RemoteKind::Nfs => libnfs::available(),
            // built in: its HTTP client and signer are crates of the engine
            RemoteKind::S3 => Ok(()),
        }
    }

    /// What such a target is, in words (after "is").
    pub fn described(self) -> &'static str {
        match self {
            RemoteKind::Nbd => "a network block device export",
            RemoteKind::Nfs => "a file on an NFS export",
            RemoteKind::S3 => "a set of objects in an S3 bucket",
        }
    }

    /// The URL form of such a target, for messages.
    pub fn url_form(self) -> &'static str {
        match self {
            RemoteKind::Nbd => "nbd://HOST[:PORT]/EXPORT",
            RemoteKind::Nfs => "nfs://SERVER/EXPORT/FILE",
            RemoteKind::S3 => s3_config::URL_FORM,
        }
    }

    /// fio's engine for such a target, for messages (fio reaches S3 through its http engine).
    pub fn fio_engine(self) -> &'static str {
        match self {
            RemoteKind::Nbd => "nbd",
            RemoteKind::Nfs => "nfs",
            RemoteKind::S3 => "http with http_mode=s3",
        }
    }

    /// The `type` recorded for the target in the result's environment.
    pub fn type_name(self) -> &'static str {
        match self {
            RemoteKind::Nbd => "nbd",
            RemoteKind::Nfs => "nfs",
            RemoteKind::S3 => "s3",
        }
    }
}

/// Remove a network file this run made (an NFS file, or the objects of an s3:// prefix; an NBD
/// export is never made, so never removed). Ok when it is already gone.
pub fn remove_file(url: &str) -> Result<(), String> {
    match RemoteKind::of(url) {
        Some(RemoteKind::S3) => s3::remove_objects(url),
        Some(RemoteKind::Nfs) => match libnfs::File::open(url, true, libnfs::Missing::Refuse) {
            Ok(f) => f.unlink(),
            Err(libnfs::OpenError::Missing(_)) => Ok(()),
            Err(e) => Err(e.to_string()),
        },
        _ => Err(format!("{url}: not a network file storlab makes")),
    }
}

/// Bytes looked at for data before a remote target is written: its first and last MiB and 62
/// spread between them (a file system, partition table or LVM label sits at either end).
const PROBE_BYTES: u64 = 1 << 20;
const PROBE_POINTS: u64 = 64;

/// The offsets of the blocks `holds_data` reads on a target of `size` bytes.
fn probe_offsets(size: u64) -> Vec<u64> {
    if size <= PROBE_BYTES * PROBE_POINTS {
        return (0..size.div_ceil(PROBE_BYTES)).map(|i| i * PROBE_BYTES).collect();
    }
    let last = size - PROBE_BYTES;
    (0..PROBE_POINTS).map(|i| (last / (PROBE_POINTS - 1) * i) / 4096 * 4096).chain([last]).collect()
}

/// Where the first non-zero byte of a sample of the export sits, if any: an export that is all
/// zeros where looked is blank (new, or trimmed); anything else holds data.
pub fn nbd_first_data(conn: &mut libnbd::Connection, size: u64) -> Result<Option<u64>, String> {
    let mut buf = vec![0u8; PROBE_BYTES as usize];
    for offset in probe_offsets(size) {
        let len = PROBE_BYTES.min(size - offset) as usize;
        conn.pread(&mut buf[..len], offset)?;
        if let Some(i) = buf[..len].iter().position(|&b| b != 0) {
            return Ok(Some(offset + i as u64));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_name_their_kind_and_local_paths_none() {
        for url in ["nbd://127.0.0.1/x", "nbds://h:10809/", "nbd+unix:///e?socket=/tmp/s"] {
            assert_eq!(RemoteKind::of(url), Some(RemoteKind::Nbd), "{url}");
        }
        assert_eq!(RemoteKind::of("nfs://srv/export/f?version=3"), Some(RemoteKind::Nfs));
        assert_eq!(RemoteKind::of("s3://bench/p"), Some(RemoteKind::S3));
        for path in ["/dev/nbd0", "relative/nbd://x", "nbd:/x", "file:///tmp/x", "nfs:/x"] {
            assert_eq!(RemoteKind::of(path), None, "{path}");
        }
    }

    #[test]
    fn the_probe_covers_both_ends_and_stays_inside() {
        for size in [4096u64, PROBE_BYTES, 3 * PROBE_BYTES + 7, 1 << 30, (1 << 40) + 4096] {
            let offs = probe_offsets(size);
            assert_eq!(offs[0], 0);
            let last = *offs.last().unwrap();
            assert!(last < size && last + PROBE_BYTES.min(size) >= size, "{size}: {last}");
            assert!(offs.len() as u64 <= PROBE_POINTS + 1);
        }
    }
}
