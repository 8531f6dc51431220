//! An S3 client over one endpoint: the requests the s3 engine, its plan and the metadata
//! benchmark make (GET whole or ranged, HEAD, PUT, multipart upload, paged LIST, DELETE,
//! DeleteObjects for clean-up), each signed with AWS Signature V4 by
//! rusty-s3 (query-string signing: nothing to sign in the body, so a PUT streams the slot's
//! buffer as it is) and sent by ureq over HTTP/1.1 connections it keeps alive.
//!
//! HTTP 503 (SlowDown) is retried with a doubling back-off and counted (`slowdowns`), so a
//! throttled run says so. A failure becomes one line naming the endpoint and what to do; the
//! access key id may be named, the secret and signed URLs never are.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusty_s3::actions::{CompleteMultipartUpload, CreateMultipartUpload, DeleteObjectsResponse, ListObjectsV2, ObjectIdentifier};
use rusty_s3::{Bucket, S3Action, UrlStyle};

use crate::cancel::Cancel;

use super::s3_config::{Access, AwsEnvironment, ObjectSet};

/// How long a signed URL is valid: one request's life, with room for a slow part upload.
const SIGNED_FOR: Duration = Duration::from_secs(3600);
/// Retries of a request answered 503 (SlowDown), the back-off doubling from 10 ms to 2 s.
const SLOWDOWN_RETRIES: u32 = 12;
/// How long a request may wait for the server's answer or for each part of a body.
const SILENCE: Duration = Duration::from_secs(120);
/// Redirects (307 Temporary Redirect, 301) followed per request.
const MAX_REDIRECTS: u32 = 3;

/// What went wrong with one request, before it is put in words.
#[derive(Debug)]
pub enum Failure {
    /// The server answered with this status and S3 error code (from the XML body, if any).
    Status { status: u16, code: String },
    /// No answer: connection, TLS, name resolution or I/O.
    Transport(ureq::Error),
    /// The answer was not what S3 sends (a short body, an unreadable XML).
    Protocol(String),
    /// The run is stopping: a multipart upload was abandoned (and aborted).
    Stopped,
}

/// What `get_each` hands each piece of a body to: its offset in the object and its bytes; an
/// Err (in words) ends the request.
pub type BodyChunk<'a> = &'a mut dyn FnMut(u64, &[u8]) -> Result<(), String>;

/// One object found by a LIST: its key and size.
pub struct Listed {
    pub key: String,
    pub size: u64,
}

pub struct Client {
    agent: ureq::Agent,
    bucket: Bucket,
    access: Access,
    /// The endpoint this client talks to, as messages name it (no credentials in it).
    pub endpoint: String,
    /// Requests answered 503 and retried, shared with whoever reports them.
    pub slowdowns: Arc<AtomicU64>,
}

impl Client {
    /// A client of `endpoint` (one of `access.endpoints`) for the set's bucket, keeping up to
    /// `connections` connections alive.
    pub fn new(access: &Access, endpoint: &str, set: &ObjectSet, connections: usize) -> Result<Client, String> {
        let url = format!("{endpoint}/").parse().map_err(|e| format!("endpoint: '{endpoint}' is not a URL: {e}"))?;
        let style = if access.virtual_host { UrlStyle::VirtualHost } else { UrlStyle::Path };
        let bucket = Bucket::new(url, style, set.bucket.clone(), access.region.clone())
            .map_err(|e| format!("endpoint: '{endpoint}' cannot address bucket '{}': {e}", set.bucket))?;
        let tls = ureq::tls::TlsConfig::builder().disable_verification(access.insecure).build();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .max_idle_connections_per_host(connections.max(1))
            .max_idle_connections(connections.max(1) * 2)
            .timeout_connect(Some(Duration::from_secs(10)))
            // a server silent this long fails the request: a hung server must not hang the run
            .timeout_recv_response(Some(SILENCE))
            .timeout_recv_body(Some(SILENCE))
            .timeout_send_body(Some(SILENCE))
            .tls_config(tls)
            .build()
            .new_agent();
        Ok(Client { agent, bucket, access: access.clone(), endpoint: endpoint.to_string(), slowdowns: Arc::new(AtomicU64::new(0)) })
    }

    /// Send one request made by `send` (given a URL), retrying 503 with back-off and following
    /// redirects to the URL they give; a 2xx answer is returned, anything else is a Failure.
    fn exchange(&self, url: String, send: &dyn Fn(&str) -> Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<ureq::http::Response<ureq::Body>, Failure> {
        let (mut url, mut retries, mut redirects) = (url, 0, 0);
        loop {
            let mut response = send(&url).map_err(Failure::Transport)?;
            let status = response.status().as_u16();
            match status {
                200..=299 => return Ok(response),
                503 if retries < SLOWDOWN_RETRIES => {
                    self.slowdowns.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(10 << retries.min(8)));
                    retries += 1;
                }
                301 | 307 | 308 if redirects < MAX_REDIRECTS => match response.headers().get("location").and_then(|l| l.to_str().ok()) {
                    Some(location) => {
                        url = location.to_string();
                        redirects += 1;
                    }
                    None => return Err(Failure::Status { status, code: "redirect without a Location".into() }),
                },
                _ => {
                    let body = response.body_mut().with_config().limit(64 << 10).read_to_string().unwrap_or_default();
                    return Err(Failure::Status { status, code: error_code(&body) });
                }
            }
        }
    }

    /// GET `key` (the bytes [from, from + buf.len()) with a Range header unless `whole`) into `buf`.
    /// Returns when the first byte of the body arrived (time to first byte: ureq hands over the
    /// response once its headers are read; the first body read then returns what came with or
    /// after them).
    pub fn get_into(&self, key: &str, from: u64, buf: &mut [u8], whole: bool) -> Result<Instant, Failure> {
        let url = self.bucket.get_object(Some(&self.access.credentials), key).sign(SIGNED_FOR).to_string();
        let range = format!("bytes={from}-{}", from + buf.len() as u64 - 1);
        let mut response = self.exchange(url, &|u| {
            let r = self.agent.get(u);
            if whole { r.call() } else { r.header("range", &range).call() }
        })?;
        let mut reader = response.body_mut().as_reader();
        let short = |e: std::io::Error| Failure::Protocol(format!("object {key}: its body ended early ({e})"));
        let mut first_byte = Instant::now();
        let mut got = 0;
        while got < buf.len() {
            let n = reader.read(&mut buf[got..]).map_err(short)?;
            if n == 0 {
                return Err(short(std::io::ErrorKind::UnexpectedEof.into()));
            }
            if got == 0 {
                first_byte = Instant::now();
            }
            got += n;
        }
        let mut extra = [0u8; 1];
        match reader.read(&mut extra) {
            Ok(0) => Ok(first_byte),
            _ => Err(Failure::Protocol(format!("object {key} is longer than the {} bytes asked for", buf.len()))),
        }
    }

    /// GET the whole of `key` and hand its body to `chunk` a piece at a time (each piece at most
    /// `buf.len()` bytes, read into `buf`); returns the bytes the body held. `chunk` may refuse a
    /// piece (a verification failure), which ends the request with its words.
    pub fn get_each(&self, key: &str, buf: &mut [u8], chunk: BodyChunk<'_>) -> Result<u64, Failure> {
        let url = self.bucket.get_object(Some(&self.access.credentials), key).sign(SIGNED_FOR).to_string();
        let mut response = self.exchange(url, &|u| self.agent.get(u).call())?;
        let mut reader = response.body_mut().as_reader();
        let mut at = 0u64;
        loop {
            let n = reader.read(buf).map_err(|e| Failure::Protocol(format!("object {key}: reading its body failed ({e})")))?;
            if n == 0 {
                return Ok(at);
            }
            chunk(at, &buf[..n]).map_err(Failure::Protocol)?;
            at += n as u64;
        }
    }

    /// HEAD `key`: its size, or None when there is no such object (HTTP 404).
    pub fn head(&self, key: &str) -> Result<Option<u64>, Failure> {
        let url = self.bucket.head_object(Some(&self.access.credentials), key).sign(SIGNED_FOR).to_string();
        match self.exchange(url, &|u| self.agent.head(u).call()) {
            Ok(response) => {
                let length = response.headers().get("content-length").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
                length.map(Some).ok_or_else(|| Failure::Protocol(format!("HEAD of {key}: no Content-Length in the answer")))
            }
            Err(Failure::Status { status: 404, .. }) => Ok(None),
            Err(f) => Err(f),
        }
    }

    /// PUT `data` as `key`: one request up to `part_size`, a multipart upload above it (aborted
    /// if a part fails or `stop` is set between parts, so no unfinished upload is left).
    pub fn put(&self, key: &str, data: &[u8], part_size: u64, stop: &dyn Cancel) -> Result<(), Failure> {
        if data.len() as u64 <= part_size {
            let url = self.bucket.put_object(Some(&self.access.credentials), key).sign(SIGNED_FOR).to_string();
            self.exchange(url, &|u| self.agent.put(u).send(data))?;
            return Ok(());
        }
        let url = self.bucket.create_multipart_upload(Some(&self.access.credentials), key).sign(SIGNED_FOR).to_string();
        let mut response = self.exchange(url, &|u| self.agent.post(u).send_empty())?;
        let text = response.body_mut().read_to_string().map_err(Failure::Transport)?;
        let upload = CreateMultipartUpload::parse_response(&text).map_err(|e| Failure::Protocol(format!("CreateMultipartUpload's answer: {e}")))?;
        let upload_id = upload.upload_id();
        let uploaded = self.put_parts(key, upload_id, data, part_size, stop);
        if uploaded.is_err() {
            let url = self.bucket.abort_multipart_upload(Some(&self.access.credentials), key, upload_id).sign(SIGNED_FOR).to_string();
            let _ = self.exchange(url, &|u| self.agent.delete(u).call()); // best effort: the failure is what counts
        }
        uploaded
    }

    fn put_parts(&self, key: &str, upload_id: &str, data: &[u8], part_size: u64, stop: &dyn Cancel) -> Result<(), Failure> {
        let mut etags = Vec::new();
        for (i, part) in data.chunks(part_size as usize).enumerate() {
            if stop.requested() {
                return Err(Failure::Stopped);
            }
            let number = u16::try_from(i + 1).map_err(|_| Failure::Protocol("more than 10000 parts".into()))?;
            let url = self.bucket.upload_part(Some(&self.access.credentials), key, number, upload_id).sign(SIGNED_FOR).to_string();
            let response = self.exchange(url, &|u| self.agent.put(u).send(part))?;
            let etag = response.headers().get("etag").and_then(|e| e.to_str().ok()).unwrap_or_default();
            etags.push(etag.to_string());
        }
        let complete: CompleteMultipartUpload<'_, _> =
            self.bucket.complete_multipart_upload(Some(&self.access.credentials), key, upload_id, etags.iter().map(String::as_str));
        let url = complete.sign(SIGNED_FOR).to_string();
        let body = complete.body();
        self.exchange(url, &|u| self.agent.post(u).send(body.as_bytes()))?;
        Ok(())
    }

    /// DELETE `key` (a missing key is no error: S3 answers 204 either way).
    pub fn delete(&self, key: &str) -> Result<(), Failure> {
        let url = self.bucket.delete_object(Some(&self.access.credentials), key).sign(SIGNED_FOR).to_string();
        self.exchange(url, &|u| self.agent.delete(u).call()).map(drop)
    }

    /// DELETE `keys`, a thousand a request (DeleteObjects, S3's most); the first key the server
    /// could not delete is the failure.
    pub fn delete_many(&self, keys: &[String]) -> Result<(), Failure> {
        for batch in keys.chunks(1000) {
            let ids: Vec<ObjectIdentifier> = batch.iter().map(|k| ObjectIdentifier::new(k.clone())).collect();
            let mut action = self.bucket.delete_objects(Some(&self.access.credentials), ids.iter());
            action.set_quiet(true);
            let url = action.sign(SIGNED_FOR).to_string();
            let (body, md5) = action.body_with_md5();
            let mut response = self.exchange(url, &|u| self.agent.post(u).header("content-md5", &md5).send(body.as_bytes()))?;
            let text = response.body_mut().with_config().limit(64 << 20).read_to_string().map_err(Failure::Transport)?;
            let answer = DeleteObjectsResponse::parse(&text).map_err(|e| Failure::Protocol(format!("DeleteObjects' answer: {e}")))?;
            if let Some(e) = answer.errors.first() {
                return Err(Failure::Protocol(format!("{} of {} objects were not deleted (the first: {}, {})", answer.errors.len(), batch.len(), e.key, e.code)));
            }
        }
        Ok(())
    }

    /// Every object whose key starts with `prefix`, in key order, page by page.
    pub fn list(&self, prefix: &str) -> Result<Vec<Listed>, Failure> {
        let mut found = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let (page, next) = self.list_page(prefix, token.as_deref(), None)?;
            found.extend(page);
            match next {
                Some(t) => token = Some(t),
                None => return Ok(found),
            }
        }
    }

    /// One ListObjectsV2 request: up to `max_keys` objects (the server's default, 1000, when
    /// None) under `prefix` from `token` on, and the token of the next page if there is one.
    pub fn list_page(&self, prefix: &str, token: Option<&str>, max_keys: Option<usize>) -> Result<(Vec<Listed>, Option<String>), Failure> {
        let mut action = self.bucket.list_objects_v2(Some(&self.access.credentials));
        action.with_prefix(prefix);
        if let Some(t) = token {
            action.with_continuation_token(t);
        }
        if let Some(n) = max_keys {
            action.with_max_keys(n);
        }
        let url = action.sign(SIGNED_FOR).to_string();
        let mut response = self.exchange(url, &|u| self.agent.get(u).call())?;
        let text = response.body_mut().with_config().limit(64 << 20).read_to_string().map_err(Failure::Transport)?;
        let page = ListObjectsV2::parse_response(&text).map_err(|e| Failure::Protocol(format!("ListObjectsV2's answer: {e}")))?;
        let listed = page.contents.into_iter().map(|c| Listed { key: c.key, size: c.size }).collect();
        Ok((listed, page.next_continuation_token))
    }

    /// A failure in one line: what was being done, on what, and what to do about it.
    pub fn explain(&self, what: &str, failure: &Failure) -> String {
        format!("{what}: {}", self.reason(failure))
    }

    /// Why a request failed and what to do about it, in words (no subject: the caller names it).
    pub fn reason(&self, failure: &Failure) -> String {
        let endpoint = &self.endpoint;
        match failure {
            Failure::Status { status: 403, code } => format!(
                "access denied ({}) at {endpoint} for access key id {}; check the secret key (AWS_SECRET_ACCESS_KEY or the profile's) and what the key may do",
                if code.is_empty() { "HTTP 403".to_string() } else { format!("HTTP 403 {code}") }, self.access.credentials.key()
            ),
            Failure::Status { code, .. } if code == "NoSuchBucket" => {
                format!("bucket '{}' does not exist at {endpoint}; create it first", self.bucket.name())
            }
            Failure::Status { status, code } => format!("{endpoint} answered HTTP {status} {code}").trim_end().to_string(),
            Failure::Transport(e) => self.transport(e),
            Failure::Protocol(m) => m.clone(),
            Failure::Stopped => "stopped by a signal (the multipart upload was aborted)".to_string(),
        }
    }

    /// A transport error in words, naming the endpoint (ureq's own text may carry the signed URL).
    fn transport(&self, e: &ureq::Error) -> String {
        let endpoint = &self.endpoint;
        match e {
            // rustls reports a refused certificate or a failed handshake as invalid data
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::InvalidData && endpoint.starts_with("https://") => {
                format!("TLS failure with {endpoint}: {io}; for a self-signed certificate use insecure (--insecure)")
            }
            ureq::Error::Io(io) => format!("cannot reach {endpoint}: {}", io.kind()),
            ureq::Error::ConnectionFailed => format!("cannot connect to {endpoint}"),
            ureq::Error::HostNotFound => format!("cannot resolve the host of {endpoint}"),
            ureq::Error::Timeout(t) => format!("{endpoint} did not answer in time ({t})"),
            ureq::Error::Tls(m) => format!("TLS failure with {endpoint}: {m}; for a self-signed certificate use insecure (--insecure)"),
            ureq::Error::Rustls(r) => format!("TLS failure with {endpoint}: {r}; for a self-signed certificate use insecure (--insecure)"),
            ureq::Error::Protocol(p) => format!("{endpoint} does not speak HTTP/1.1 as expected: {p}"),
            _ => format!("request to {endpoint} failed ({})", error_kind_name(e)),
        }
    }
}

/// How each prefix this process made objects in was reached, so that removing them (at the end of
/// the run, or after a failure) needs only the URL, as removing an NFS file does.
static MADE: Mutex<Vec<(String, Access)>> = Mutex::new(Vec::new());

/// Remember how the objects of `url` were reached (the plan made some there).
pub fn remember(url: &str, access: &Access) {
    let mut made = MADE.lock().unwrap_or_else(|p| p.into_inner());
    made.retain(|(u, _)| u != url);
    made.push((url.to_string(), access.clone()));
}

/// Remove the objects of an s3:// target (those named by storlab's key pattern under its prefix;
/// nothing else there is touched). Ok when there are none.
pub fn remove_objects(url: &str) -> Result<(), String> {
    let set = ObjectSet::parse(url).map_err(|m| format!("target: {url} {m}"))?;
    let remembered = MADE.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(u, _)| u == url).map(|(_, a)| a.clone());
    let access = match remembered {
        Some(a) => a,
        None => AwsEnvironment::of_process().access(None, false, false)?,
    };
    let client = Client::new(&access, &access.endpoints[0], &set, 1)?;
    let listed = client.list(&set.list_prefix()).map_err(|f| client.explain("listing the objects to remove", &f))?;
    let ours: Vec<String> = listed.into_iter().filter(|o| set.index_of(&o.key).is_some()).map(|o| o.key).collect();
    client.delete_many(&ours).map_err(|f| client.explain("removing the objects", &f))
}

/// The name of a ureq error's kind, without its text (which may hold the signed URL).
fn error_kind_name(e: &ureq::Error) -> String {
    let debug = format!("{e:?}");
    debug.split(['(', ' ', '{']).next().unwrap_or("error").to_string()
}

/// The S3 error code of an error answer's XML body (<Code>SlowDown</Code>), or "".
fn error_code(body: &str) -> String {
    body.split_once("<Code>").and_then(|(_, rest)| rest.split_once("</Code>")).map(|(code, _)| code.to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_code_is_read_from_the_xml_body() {
        assert_eq!(error_code("<?xml?><Error><Code>NoSuchBucket</Code><Message>x</Message></Error>"), "NoSuchBucket");
        assert_eq!(error_code(""), "");
    }
}
