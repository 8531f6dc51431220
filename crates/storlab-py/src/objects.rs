//! `ObjectStore`: a thin Python binding of the engine's S3 client (storlab_core::remote::s3), so
//! the Python workloads (`storlab workload` datasets and checkpoints, `storlab meta --mix`) reach
//! objects through the same requests, signing, retries and one-line messages as `storlab run`.
//! Keys are relative to the URL's prefix; every request runs with the GIL released. Errors are
//! CoreError: kind "target" when the store cannot be set up (URL, endpoint, credentials), kind
//! "io" when a request fails (access denied naming the key id, a missing bucket, an unreachable
//! endpoint), in the client's words: the secret key and signed URLs are never in them.

use std::sync::atomic::AtomicBool;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use storlab_core::group::DEFAULT_PART_SIZE;
use storlab_core::remote::s3::{Client, Failure};
use storlab_core::remote::s3_config::{AwsEnvironment, ObjectSet};
use storlab_core::Error;

use crate::to_py;

/// Connections kept alive when the caller does not say (one per thread of a small pool).
const DEFAULT_CONNECTIONS: usize = 8;
/// A PUT is never stopped between parts from Python: a signal is seen when the call returns.
static NEVER: AtomicBool = AtomicBool::new(false);

/// The objects under one s3://BUCKET/PREFIX, reached through one endpoint.
#[pyclass(module = "storlab._core", name = "ObjectStore", frozen)]
struct ObjectStore {
    client: Client,
    set: ObjectSet,
    url: String,
    part_size: u64,
}

impl ObjectStore {
    /// The full key of `key` (relative to the prefix).
    fn full(&self, key: &str) -> String {
        let key = key.trim_start_matches('/');
        if self.set.prefix.is_empty() { key.to_string() } else { format!("{}/{key}", self.set.prefix) }
    }

    /// A failed request as CoreError("io", one line naming the object and what to do).
    fn failed(&self, what: &str, key: &str, f: &Failure) -> PyErr {
        to_py(Error::io(self.client.explain(&format!("s3://{}/{}: {what}", self.set.bucket, self.full(key)), f)))
    }
}

#[pymethods]
impl ObjectStore {
    /// The objects of `url` (s3://BUCKET[/PREFIX]) at `endpoint` (else AWS_ENDPOINT_URL_S3,
    /// AWS_ENDPOINT_URL or AWS's regional endpoint; the first of several), with the credentials
    /// the AWS CLI would use. Nothing is sent yet.
    #[new]
    #[pyo3(signature = (url, endpoint=None, insecure=false, virtual_host=false, connections=DEFAULT_CONNECTIONS, part_size=DEFAULT_PART_SIZE))]
    fn new(url: &str, endpoint: Option<&str>, insecure: bool, virtual_host: bool, connections: usize, part_size: u64) -> PyResult<ObjectStore> {
        let set = ObjectSet::parse(url).map_err(|m| to_py(Error::target(url, m)))?;
        if !(5 << 20..=1 << 30).contains(&part_size) {
            return Err(to_py(Error::spec(format!("part_size: {part_size} is not allowed; use 5 MiB to 1 GiB (5242880..1073741824)"))));
        }
        let access = AwsEnvironment::of_process().access(endpoint, insecure, virtual_host).map_err(|m| to_py(Error::target(url, m)))?;
        let client = Client::new(&access, &access.endpoints[0], &set, connections.max(1)).map_err(|m| to_py(Error::target(url, m)))?;
        Ok(ObjectStore { client, set, url: url.trim_end_matches('/').to_string(), part_size })
    }

    /// The URL the store was opened with.
    #[getter]
    fn url(&self) -> &str {
        &self.url
    }

    /// The endpoint the requests go to (no credentials in it).
    #[getter]
    fn endpoint(&self) -> &str {
        &self.client.endpoint
    }

    #[getter]
    fn bucket(&self) -> &str {
        &self.set.bucket
    }

    /// The prefix (no trailing slash; "" for the bucket's top).
    #[getter]
    fn prefix(&self) -> &str {
        &self.set.prefix
    }

    #[getter]
    fn part_size(&self) -> u64 {
        self.part_size
    }

    /// Requests answered 503 (SlowDown) and retried so far.
    #[getter]
    fn slowdowns(&self) -> u64 {
        self.client.slowdowns.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// PUT `data` as `key` (a multipart upload above part_size).
    fn put(&self, py: Python<'_>, key: &str, data: &[u8]) -> PyResult<()> {
        let full = self.full(key);
        py.detach(|| self.client.put(&full, data, self.part_size, &NEVER)).map_err(|f| self.failed("PUT", key, &f))
    }

    /// GET `length` bytes of `key` from `offset` (a ranged GET; with `whole`, `length` is the
    /// object's size and the GET has no Range); without `length`, the object from `offset` to its
    /// end (its size found by a LIST first).
    #[pyo3(signature = (key, offset=0, length=None, whole=false))]
    fn get<'py>(&self, py: Python<'py>, key: &str, offset: u64, length: Option<u64>, whole: bool) -> PyResult<Bound<'py, PyBytes>> {
        let full = self.full(key);
        let (length, whole) = match length {
            Some(n) => (n, whole && offset == 0),
            None => {
                let size = self.size_of(py, key)?.ok_or_else(|| {
                    self.failed("GET", key, &Failure::Status { status: 404, code: "NoSuchKey".into() })
                })?;
                (size.saturating_sub(offset), offset == 0)
            }
        };
        if length == 0 && !whole {
            return Ok(PyBytes::new(py, &[])); // an empty range: nothing to ask for (an empty object is still GET whole)
        }
        let mut buf = vec![0u8; length as usize];
        py.detach(|| self.client.get_into(&full, offset, &mut buf, whole)).map_err(|f| self.failed("GET", key, &f))?;
        Ok(PyBytes::new(py, &buf))
    }

    /// The size of `key`, None when there is no such object (a LIST of the key as prefix).
    fn size_of(&self, py: Python<'_>, key: &str) -> PyResult<Option<u64>> {
        let full = self.full(key);
        let listed = py.detach(|| self.client.list(&full)).map_err(|f| self.failed("LIST", key, &f))?;
        Ok(listed.into_iter().find(|o| o.key == full).map(|o| o.size))
    }

    /// Every object whose key (relative to the store's prefix) starts with `prefix`, in key
    /// order: [(key, size)], keys relative to the store's prefix.
    #[pyo3(signature = (prefix=""))]
    fn list(&self, py: Python<'_>, prefix: &str) -> PyResult<Vec<(String, u64)>> {
        let full = if self.set.prefix.is_empty() { prefix.to_string() } else { format!("{}/{prefix}", self.set.prefix) };
        let listed = py.detach(|| self.client.list(&full)).map_err(|f| self.failed("LIST", prefix, &f))?;
        let base = self.set.list_prefix();
        Ok(listed.into_iter().map(|o| (o.key.strip_prefix(&base).unwrap_or(&o.key).to_string(), o.size)).collect())
    }

    /// DELETE `key` (no error when it does not exist).
    fn delete(&self, py: Python<'_>, key: &str) -> PyResult<()> {
        let full = self.full(key);
        py.detach(|| self.client.delete(&full)).map_err(|f| self.failed("DELETE", key, &f))
    }

    /// DELETE `keys`, a thousand a request.
    fn delete_many(&self, py: Python<'_>, keys: Vec<String>) -> PyResult<()> {
        let full: Vec<String> = keys.iter().map(|k| self.full(k)).collect();
        let first = keys.first().cloned().unwrap_or_default();
        py.detach(|| self.client.delete_many(&full)).map_err(|f| self.failed(&format!("DeleteObjects of {} keys", keys.len()), &first, &f))
    }

    fn __repr__(&self) -> String {
        format!("ObjectStore({:?}, endpoint={:?})", self.url, self.client.endpoint)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ObjectStore>()
}
