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

/// The schemes a target URL may name, for messages.
pub const SCHEMES: &str = "nbd://, nbds://, nbd+unix://, nbds+unix://, nfs://, s3://";

/// The URL arguments libnfs reads (libnfs.h, "Current URL arguments"; pagecache and debug are
/// read too): any other is a typo libnfs would pass over without a word.
const NFS_ARGUMENTS: [&str; 12] = ["version", "uid", "gid", "readahead", "pagecache", "debug", "tcp-syncnt",
    "auto-traverse-mounts", "dircache", "autoreconnect", "nfsport", "mountport"];

/// The scheme of a target written as a URL (RFC 3986: a letter, then letters, digits, '+', '-',
/// '.', before "://"), known to storlab or not; None for a path.
pub fn url_scheme(target: &str) -> Option<&str> {
    let scheme = target.split_once("://")?.0;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))).then_some(scheme)
}

/// A port as a URL gives it: ASCII digits naming 1 to 65535.
pub(crate) fn check_port(text: &str, what: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(port) if port > 0 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(port),
        _ => Err(format!("{what} '{text}' is not a port; allowed: 1 to 65535")),
    }
}

/// The host and port of a URL's authority (after any user@), IPv6 in brackets.
pub(crate) fn host_and_port(authority: &str) -> Result<(&str, Option<&str>), String> {
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(rest) = hostport.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(|| format!("host '{hostport}' opens '[' without closing it"))?;
        return match after {
            "" => Ok((host, None)),
            _ => after.strip_prefix(':').map(|p| (host, Some(p))).ok_or_else(|| format!("'{after}' after the host is not ':PORT'")),
        };
    }
    Ok(match hostport.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (hostport, None),
    })
}

impl RemoteKind {
    /// The URL's form checked before anything connects: the port in range, a server named where
    /// the protocol needs one, the socket of a +unix URL, and (NFS) only the arguments libnfs reads
    /// with values it takes. What follows "TARGET " in a refusal.
    pub fn check_url(self, url: &str) -> Result<(), String> {
        let (scheme, rest) = url.split_once("://").ok_or_else(|| format!("is not a URL; the form is {}", self.url_form()))?;
        let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
        let authority = before_query.split('/').next().unwrap_or("");
        let args: Vec<(&str, &str)> = query.split('&').filter(|a| !a.is_empty()).map(|a| a.split_once('=').unwrap_or((a, ""))).collect();
        match self {
            RemoteKind::S3 => s3_config::ObjectSet::parse(url).map(|_| ()),
            RemoteKind::Nbd if scheme.ends_with("+unix") => {
                if !authority.is_empty() {
                    return Err(format!("names host '{authority}', but {scheme}:// reaches a local socket; the form is {scheme}:///EXPORT?socket=PATH"));
                }
                match args.iter().find(|(k, _)| *k == "socket") {
                    Some((_, path)) if !path.is_empty() => Ok(()),
                    _ => Err(format!("names no socket; the form is {scheme}:///EXPORT?socket=PATH")),
                }
            }
            RemoteKind::Nbd => {
                let (_, port) = host_and_port(authority).map_err(|m| format!("{m}; the form is {}", self.url_form()))?;
                port.map_or(Ok(()), |p| check_port(p, "names port").map(|_| ()))
            }
            RemoteKind::Nfs => {
                let (host, port) = host_and_port(authority).map_err(|m| format!("{m}; the form is {}", self.url_form()))?;
                if host.is_empty() {
                    return Err(format!("names no server; the form is {}", self.url_form()));
                }
                if let Some(p) = port {
                    check_port(p, "names port")?;
                }
                for (key, value) in args {
                    if !NFS_ARGUMENTS.contains(&key) {
                        return Err(format!("has argument '{key}', which libnfs does not read; allowed: {}", NFS_ARGUMENTS.join(", ")));
                    }
                    let fits = match key {
                        "version" => matches!(value, "3" | "4"),
                        "nfsport" | "mountport" => check_port(value, key).is_ok(),
                        "autoreconnect" => value.strip_prefix('-').unwrap_or(value).bytes().all(|b| b.is_ascii_digit()) && !value.is_empty() && value != "-",
                        _ => !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) && value.parse::<u64>().is_ok(),
                    };
                    if !fits {
                        let allowed = match key {
                            "version" => "3 or 4",
                            "nfsport" | "mountport" => "a port, 1 to 65535",
                            "autoreconnect" => "-1 (for ever), 0 (never) or a count",
                            _ => "a whole number",
                        };
                        return Err(format!("has {key}='{value}'; allowed: {allowed}"));
                    }
                }
                Ok(())
            }
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
    fn a_url_is_checked_before_anything_connects() {
        for (url, words) in [
            ("nbd://127.0.0.1:99999/", "port '99999'"), ("nbd://127.0.0.1:0/", "port '0'"), ("nbd://h:x/", "port 'x'"),
            ("nbd://[::1/", "without closing"), ("nbd+unix:///e", "no socket"), ("nbd+unix://h/e?socket=/s", "local socket"),
            ("nfs:///export/f", "no server"), ("nfs://h:70000/e/f", "port '70000'"), ("nfs://h/e/f?version=7", "version='7'"),
            ("nfs://h/e/f?bogus=1", "argument 'bogus'"), ("nfs://h/e/f?nfsport=0", "nfsport='0'"), ("nfs://h/e/f?uid=-1", "uid='-1'"),
            ("nfs://h/e/f?uid=\u{0663}", "uid="),
        ] {
            let kind = RemoteKind::of(url).unwrap();
            let err = kind.check_url(url).expect_err(url);
            assert!(err.contains(words), "{url}: {err}");
        }
        for url in ["nbd://127.0.0.1/x", "nbd://[::1]:10809/", "nbds://u@h:1/", "nbd://", "nbd+unix:///e?socket=/tmp/s",
                    "nfs://srv/export/f?version=3&uid=0&autoreconnect=-1", "nfs://[::1]:2049/e/f", "s3://bench/p"] {
            RemoteKind::of(url).unwrap().check_url(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        }
    }

    #[test]
    fn a_scheme_is_a_letter_then_letters_digits_plus_minus_dot() {
        assert_eq!(url_scheme("ftp://h/x"), Some("ftp"));
        assert_eq!(url_scheme("nbd+unix:///e"), Some("nbd+unix"));
        for path in ["relative/nbd://x", "./ftp://h", "1ftp://h", "/abs", "://x"] {
            assert_eq!(url_scheme(path), None, "{path}");
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
