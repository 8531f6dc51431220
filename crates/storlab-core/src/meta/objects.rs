//! The metadata benchmark's namespace on an s3:// prefix: each name of the local layout
//! (`names`) is a key under the run's own prefix, and each operation one request: create a PUT
//! (of an empty object, or of `file_size` bytes), stat a HEAD, read a GET, remove a DELETE, list
//! a ListObjectsV2 page. S3 has no directories (mkdir and rmdir skip) and no rename (the spec
//! refuses it). Each worker has a client of its own holding one keep-alive connection, kept from
//! phase to phase.

use std::ffi::CStr;
use std::io;
use std::sync::atomic::AtomicBool;

use crate::error::{Error, Result};
use crate::histogram::Histogram;
use crate::remote::s3::{Client, Failure};
use crate::remote::s3_config::{AwsEnvironment, ObjectSet};

use super::namespace::{Namespace, Tree};
use super::ops::{first_difference, OpError, OpResult};
use super::spec::MetaSpec;

/// Objects above this size are written by multipart upload, in parts of this size.
const PART_BYTES: u64 = 16 << 20;
/// Bytes of a GET's body handled at a time (read and, with verify_read, compared).
const READ_CHUNK: usize = 64 << 10;
/// Why mkdir and rmdir do nothing on an object store, as the result says.
pub const NO_DIRS: &str = "S3 has no directories (a key's slashes are part of its name): nothing to make or remove";

/// A metadata run's objects: those under the run's prefix (`target`, s3://BUCKET/PREFIX).
pub struct ObjectNamespace {
    set: ObjectSet,
    /// One client per worker (endpoints dealt round-robin), one connection each.
    clients: Vec<Client>,
    /// Whether the prefix held no object when the run was opened.
    empty_at_open: bool,
}

/// A PUT of a meta item is never abandoned half way (an interrupt waits for the operation).
static NEVER: AtomicBool = AtomicBool::new(false);

fn failed(step: &'static str, client: &Client, f: &Failure) -> OpError {
    OpError { step, err: io::Error::other(client.reason(f)) }
}

impl ObjectNamespace {
    /// Clients for every worker; one LIST of the prefix checks the endpoint, the credentials and
    /// the bucket before anything is written.
    pub fn open(spec: &MetaSpec) -> Result<ObjectNamespace> {
        let url = &spec.target;
        let set = ObjectSet::parse(url).map_err(|m| Error::target(url, m))?;
        let access = AwsEnvironment::of_process()
            .access(spec.endpoint.as_deref(), spec.insecure, spec.virtual_host)
            .map_err(|m| Error::target(url, m))?;
        let clients = (0..spec.threads as usize)
            .map(|w| Client::new(&access, &access.endpoints[w % access.endpoints.len()], &set, 1))
            .collect::<std::result::Result<Vec<_>, String>>()
            .map_err(|m| Error::target(url, m))?;
        let first = &clients[0];
        let (found, _) = first.list_page(&set.list_prefix(), None, Some(1)).map_err(|f| Error::target(url, first.reason(&f)))?;
        Ok(ObjectNamespace { set, empty_at_open: found.is_empty(), clients })
    }

    /// The endpoints the workers talk to, comma-separated (for the result; no credentials).
    pub fn server(&self) -> String {
        let mut seen: Vec<&str> = Vec::new();
        for c in &self.clients {
            if !seen.contains(&c.endpoint.as_str()) {
                seen.push(&c.endpoint);
            }
        }
        seen.join(",")
    }

    fn key(&self, rel: &str) -> String {
        format!("{}{rel}", self.set.list_prefix())
    }
}

impl Namespace for ObjectNamespace {
    fn no_dirs(&self) -> Option<&'static str> {
        Some(NO_DIRS)
    }

    /// Whether the prefix held no object when the run was opened (a run's own must be new).
    fn was_new(&self) -> bool {
        self.empty_at_open
    }

    fn tree(&self, worker: usize, root: &str) -> Result<Box<dyn Tree + '_>> {
        let client = self.clients.get(worker).ok_or_else(|| Error::engine(format!("meta: no S3 client for worker {worker}")))?;
        let head = format!("{}/", self.key(root));
        Ok(Box::new(ObjectTree { client, key: head.clone(), head, body: Vec::new(), chunk: vec![0; READ_CHUNK] }))
    }

    fn mkdir(&self, _path: &CStr) -> OpResult<()> {
        Err(OpError { step: "mkdir", err: io::Error::other(NO_DIRS) })
    }

    fn rmdir(&self, _path: &CStr) -> OpResult<()> {
        Err(OpError { step: "rmdir", err: io::Error::other(NO_DIRS) })
    }

    fn fsync_dir(&self, _path: &CStr, _sync: &mut Histogram) -> OpResult<()> {
        Err(OpError { step: "fsync", err: io::Error::other(NO_DIRS) })
    }

    fn full(&self, rel: &str) -> String {
        if rel == "." {
            return format!("s3://{}/{}", self.set.bucket, self.set.prefix);
        }
        format!("s3://{}/{}", self.set.bucket, self.key(rel))
    }

    /// Delete every object under the run's prefix whose name is one this run's workers make
    /// (`{name_prefix}f{worker}.{item}` or `…r…`), e.g. one whose PUT was cut short by a failure.
    fn sweep(&self, spec: &MetaSpec) -> Result<u64> {
        let c = &self.clients[0];
        let listed = c.list(&self.set.list_prefix()).map_err(|f| Error::io(c.explain(&format!("clean-up: listing {}", self.full(".")), &f)))?;
        let ours: Vec<String> = listed.into_iter().filter(|o| is_item_name(&o.key, &spec.name_prefix)).map(|o| o.key).collect();
        c.delete_many(&ours).map_err(|f| Error::io(c.explain(&format!("clean-up: removing objects under {}", self.full(".")), &f)))?;
        Ok(ours.len() as u64)
    }
}

/// Whether the last part of `key` is an item name of a run with this name prefix:
/// `{prefix}f{worker}.{item}` (or `r` for a renamed one).
pub(crate) fn is_item_name(key: &str, name_prefix: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    let Some(rest) = name.strip_prefix(name_prefix).and_then(|r| r.strip_prefix(['f', 'r'])) else { return false };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    matches!(rest.split_once('.'), Some((w, i)) if digits(w) && digits(i))
}

/// A worker's tree on S3: its key prefix, and buffers made once (the key in place, the body
/// of a PUT, a chunk of a GET).
struct ObjectTree<'a> {
    client: &'a Client,
    /// `PREFIX/ROOT/`: every key of the tree starts with it.
    head: String,
    key: String,
    /// The body every create PUTs (`data` repeated to `size` bytes), made at the first create.
    body: Vec<u8>,
    chunk: Vec<u8>,
}

impl ObjectTree<'_> {
    /// The key of `name` in the key buffer (no allocation once it has grown).
    fn key_of(&mut self, name: &CStr) -> &str {
        self.key.truncate(self.head.len());
        self.key.push_str(&name.to_string_lossy());
        &self.key
    }
}

impl Tree for ObjectTree<'_> {
    fn create(&mut self, name: &CStr, data: &[u8], size: u64, _fsync: Option<&mut Histogram>) -> OpResult<()> {
        if self.body.len() as u64 != size {
            self.body = data.iter().copied().cycle().take(size as usize).collect();
        }
        let client = self.client;
        let key = self.key_of(name).to_string();
        client.put(&key, &self.body, PART_BYTES, &NEVER).map_err(|f| failed("PUT", client, &f))
    }

    fn stat(&mut self, name: &CStr, size: u64) -> OpResult<()> {
        let client = self.client;
        match client.head(self.key_of(name)) {
            Ok(Some(n)) if n == size => Ok(()),
            Ok(Some(n)) => Err(OpError { step: "HEAD", err: io::Error::new(io::ErrorKind::InvalidData, format!("found {n} bytes, expected {size}")) }),
            Ok(None) => Err(OpError { step: "HEAD", err: io::Error::new(io::ErrorKind::NotFound, "no such object (HTTP 404)") }),
            Err(f) => Err(failed("HEAD", client, &f)),
        }
    }

    fn read(&mut self, name: &CStr, _buf: &mut [u8], size: u64, expect: Option<&[u8]>) -> OpResult<()> {
        let client = self.client;
        let key = self.key_of(name).to_string();
        let expect = expect.filter(|d| !d.is_empty());
        let mut check = |at: u64, got: &[u8]| -> std::result::Result<(), String> {
            if let Some(data) = expect {
                if let Some(i) = first_difference(got, data, (at % data.len() as u64) as usize) {
                    return Err(format!("byte {} differs from what create wrote (mdtest -X verification)", at + i as u64));
                }
            }
            Ok(())
        };
        let got = client.get_each(&key, &mut self.chunk, &mut check).map_err(|f| failed("GET", client, &f))?;
        if got != size {
            return Err(OpError { step: "GET", err: io::Error::new(io::ErrorKind::InvalidData, format!("the object holds {got} bytes, expected {size}")) });
        }
        Ok(())
    }

    fn rename(&mut self, _from: &CStr, _to: &CStr) -> OpResult<()> {
        Err(OpError { step: "rename", err: io::Error::other("S3 has no rename") })
    }

    fn remove(&mut self, name: &CStr) -> OpResult<()> {
        let client = self.client;
        client.delete(self.key_of(name)).map_err(|f| failed("DELETE", client, &f))
    }

    fn fsync_dir(&mut self, _path: &CStr, _sync: &mut Histogram) -> OpResult<()> {
        Err(OpError { step: "fsync", err: io::Error::other(NO_DIRS) })
    }

    fn list_page(&mut self, token: Option<&str>, page: u32) -> OpResult<(u64, Option<String>)> {
        let client = self.client;
        let (found, next) = client.list_page(&self.head, token, Some(page as usize)).map_err(|f| failed("LIST", client, &f))?;
        Ok((found.len() as u64, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_names_are_told_from_other_objects() {
        assert!(is_item_name("p/storlab-meta-1/w0/f0.12", ""));
        assert!(is_item_name("p/x/shared/d1/r3.f2.7", "r3."));
        assert!(is_item_name("p/x/w1/r1.0", ""));
        for other in ["p/x/w0/f0.", "p/x/w0/f.1", "p/x/w0/g0.1", "p/x/w0/f0.1x", "p/x/w0/r3.f2.7"] {
            assert!(!is_item_name(other, ""), "{other}");
        }
        assert!(!is_item_name("p/x/w0/f0.1", "r3."));
    }
}
