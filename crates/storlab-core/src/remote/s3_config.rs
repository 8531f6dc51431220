//! Where an s3:// target lives and who may touch it: the bucket and prefix of its URL, the
//! endpoints, the region and the credentials, found as the AWS CLI finds them. Read when the plan
//! or an engine is set up, never put in the job spec (results record the spec; the secret key and
//! the session token must not be in them).

use std::collections::HashMap;

use rusty_s3::Credentials;

/// The objects an s3:// URL names: those under PREFIX in BUCKET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectSet {
    pub bucket: String,
    /// Without a trailing slash; empty for the bucket's top.
    pub prefix: String,
}

/// The form of an s3 target, for messages.
pub const URL_FORM: &str = "s3://BUCKET/PREFIX";

impl ObjectSet {
    /// Parse `s3://BUCKET[/PREFIX]`; the error says what is wrong with it, in words.
    pub fn parse(url: &str) -> Result<ObjectSet, String> {
        let rest = url.strip_prefix("s3://").ok_or_else(|| format!("is not of the form {URL_FORM}"))?;
        if rest.contains(['?', '#']) {
            return Err(format!("has a query or fragment; the form is {URL_FORM}"));
        }
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let bucket_ok = (3..=63).contains(&bucket.len())
            && bucket.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-' || b == b'_');
        if !bucket_ok {
            return Err(format!("names bucket '{bucket}'; a bucket name is 3 to 63 lowercase letters, digits, '.', '-' (form {URL_FORM})"));
        }
        let prefix = prefix.trim_end_matches('/');
        if prefix.split('/').any(|part| part == "." || part == "..") || prefix.starts_with('/') {
            return Err(format!("has prefix '{prefix}' with an empty, '.' or '..' part; the form is {URL_FORM}"));
        }
        Ok(ObjectSet { bucket: bucket.to_string(), prefix: prefix.to_string() })
    }

    /// The key of object `k`: PREFIX/obj-NNNNNNNNNNNN (twelve digits, so a LIST returns the
    /// objects in order).
    pub fn key(&self, k: u64) -> String {
        if self.prefix.is_empty() { format!("obj-{k:012}") } else { format!("{}/obj-{k:012}", self.prefix) }
    }

    /// What a LIST of this set asks for: the prefix and its slash (so s3://b/p is not s3://b/pq).
    pub fn list_prefix(&self) -> String {
        if self.prefix.is_empty() { String::new() } else { format!("{}/", self.prefix) }
    }

    /// The object number of a key of this set, None for any other object under the prefix.
    pub fn index_of(&self, key: &str) -> Option<u64> {
        let digits = key.strip_prefix(&self.list_prefix())?.strip_prefix("obj-")?;
        (digits.len() == 12 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
    }
}

/// How a client reaches the service: endpoints, region, credentials and TLS checking. Holds the
/// secret: it is never serialised and its Debug (rusty-s3's Credentials) hides it.
#[derive(Debug, Clone)]
pub struct Access {
    /// Endpoint URLs (scheme://host[:port]), workers dealt round-robin over them.
    pub endpoints: Vec<String>,
    pub region: String,
    pub credentials: Credentials,
    /// Skip the server certificate check (a self-signed test server).
    pub insecure: bool,
    /// Address the bucket as a host name (BUCKET.ENDPOINT) rather than a path (ENDPOINT/BUCKET).
    pub virtual_host: bool,
}

/// The environment and the AWS CLI's files, read once: variables by name, and the INI sections
/// of ~/.aws/credentials and ~/.aws/config (or the files AWS_SHARED_CREDENTIALS_FILE and
/// AWS_CONFIG_FILE name).
pub struct AwsEnvironment {
    vars: HashMap<String, String>,
    credentials_file: HashMap<String, HashMap<String, String>>,
    config_file: HashMap<String, HashMap<String, String>>,
}

impl AwsEnvironment {
    pub fn of_process() -> AwsEnvironment {
        let vars: HashMap<String, String> = std::env::vars().filter(|(k, _)| k.starts_with("AWS_") || k == "HOME").collect();
        let home = vars.get("HOME").cloned().unwrap_or_default();
        let read = |var: &str, default: &str| {
            let path = vars.get(var).cloned().unwrap_or_else(|| format!("{home}/.aws/{default}"));
            std::fs::read_to_string(path).map(|t| parse_ini(&t)).unwrap_or_default()
        };
        let credentials_file = read("AWS_SHARED_CREDENTIALS_FILE", "credentials");
        let config_file = read("AWS_CONFIG_FILE", "config");
        AwsEnvironment { vars, credentials_file, config_file }
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }

    fn profile(&self) -> &str {
        self.var("AWS_PROFILE").unwrap_or("default")
    }

    /// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN), else the profile's
    /// keys in the credentials file, as the AWS CLI looks.
    pub fn credentials(&self) -> Result<Credentials, String> {
        if let (Some(key), Some(secret)) = (self.var("AWS_ACCESS_KEY_ID"), self.var("AWS_SECRET_ACCESS_KEY")) {
            return Ok(with_token(key, secret, self.var("AWS_SESSION_TOKEN")));
        }
        let profile = self.profile();
        match self.credentials_file.get(profile) {
            Some(s) => match (s.get("aws_access_key_id"), s.get("aws_secret_access_key")) {
                (Some(key), Some(secret)) => Ok(with_token(key, secret, s.get("aws_session_token").map(String::as_str))),
                _ => Err(format!("profile '{profile}' of the credentials file has no aws_access_key_id and aws_secret_access_key")),
            },
            None => Err(format!(
                "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE naming a profile of ~/.aws/credentials (profile '{profile}' is not there)"
            )),
        }
    }

    /// AWS_REGION, AWS_DEFAULT_REGION, the profile's region in the config file, else us-east-1.
    pub fn region(&self) -> String {
        let profile = self.profile();
        let section = if profile == "default" { "default".to_string() } else { format!("profile {profile}") };
        self.var("AWS_REGION")
            .or_else(|| self.var("AWS_DEFAULT_REGION"))
            .or_else(|| self.config_file.get(&section).and_then(|s| s.get("region")).map(String::as_str))
            .unwrap_or("us-east-1")
            .to_string()
    }

    /// The endpoints: the option's (comma-separated), else AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL,
    /// else AWS's regional endpoint.
    pub fn endpoints(&self, option: Option<&str>, region: &str) -> Result<Vec<String>, String> {
        let text = option
            .or_else(|| self.var("AWS_ENDPOINT_URL_S3"))
            .or_else(|| self.var("AWS_ENDPOINT_URL"))
            .map(str::to_string)
            .unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
        text.split(',').map(|e| check_endpoint(e.trim())).collect()
    }

    /// Everything a client needs to reach the objects of a group's target.
    pub fn access(&self, endpoint: Option<&str>, insecure: bool, virtual_host: bool) -> Result<Access, String> {
        let region = self.region();
        let endpoints = self.endpoints(endpoint, &region)?;
        Ok(Access { endpoints, region, credentials: self.credentials()?, insecure, virtual_host })
    }
}

fn with_token(key: &str, secret: &str, token: Option<&str>) -> Credentials {
    match token {
        Some(t) => Credentials::new_with_token(key, secret, t),
        None => Credentials::new(key, secret),
    }
}

/// One endpoint: http:// or https://, a host, an optional port, no path, user or password (so
/// that nothing secret is ever in a message that names it).
pub fn check_endpoint(text: &str) -> Result<String, String> {
    let bad = |why: &str| format!("endpoint: '{}' {why}; allowed: http://HOST[:PORT] or https://HOST[:PORT], several separated by commas", shown_endpoint(text));
    let rest = text.strip_prefix("http://").or_else(|| text.strip_prefix("https://")).ok_or_else(|| bad("is not an http:// or https:// URL"))?;
    let rest = rest.trim_end_matches('/');
    if rest.is_empty() || rest.contains(['/', '?', '#', '@', ' ']) {
        return Err(bad("must be a scheme, a host and an optional port only"));
    }
    let (host, port) = super::host_and_port(rest).map_err(|m| bad(&m))?;
    if host.is_empty() {
        return Err(bad("names no host"));
    }
    if let Some(p) = port {
        super::check_port(p, "names port").map_err(|m| bad(&m))?;
    }
    Ok(text.trim_end_matches('/').to_string())
}

/// An endpoint as a message may show it: any user:password@ part cut off.
fn shown_endpoint(text: &str) -> String {
    match text.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
            format!("{scheme}://{host}")
        }
        None => text.to_string(),
    }
}

/// The sections of an INI file ([name] then key = value lines); '#' and ';' start comments.
fn parse_ini(text: &str) -> HashMap<String, HashMap<String, String>> {
    let mut sections: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut current = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.trim().to_string();
        } else if let Some((k, v)) = line.split_once('=') {
            sections.entry(current.clone()).or_default().insert(k.trim().to_lowercase(), v.trim().to_string());
        }
    }
    sections
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)], credentials: &str, config: &str) -> AwsEnvironment {
        AwsEnvironment {
            vars: vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            credentials_file: parse_ini(credentials),
            config_file: parse_ini(config),
        }
    }

    #[test]
    fn urls_name_a_bucket_and_a_prefix_or_say_what_is_wrong() {
        assert_eq!(ObjectSet::parse("s3://bench/p/q/").unwrap(), ObjectSet { bucket: "bench".into(), prefix: "p/q".into() });
        assert_eq!(ObjectSet::parse("s3://bench").unwrap().prefix, "");
        for bad in ["s3://", "s3://B/x", "s3://ab/x", "s3://bench/x?y=1", "s3://bench/../x", "s3://bench//x"] {
            assert!(ObjectSet::parse(bad).is_err(), "{bad}");
        }
        let set = ObjectSet::parse("s3://bench/p").unwrap();
        assert_eq!(set.key(7), "p/obj-000000000007");
        assert_eq!(set.index_of("p/obj-000000000007"), Some(7));
        assert_eq!(set.index_of("p/obj-7"), None);
        assert_eq!(set.index_of("pq/obj-000000000007"), None);
        assert_eq!(ObjectSet::parse("s3://bench").unwrap().key(1), "obj-000000000001");
    }

    #[test]
    fn credentials_and_region_are_found_as_the_aws_cli_finds_them() {
        let file = "[default]\naws_access_key_id = AKD\naws_secret_access_key = sd\n[other]\naws_access_key_id=AKO\naws_secret_access_key=so\naws_session_token=t\n";
        let config = "[profile other]\nregion = eu-west-3\n";
        assert_eq!(env(&[("AWS_ACCESS_KEY_ID", "AKE"), ("AWS_SECRET_ACCESS_KEY", "se")], file, "").credentials().unwrap().key(), "AKE");
        assert_eq!(env(&[], file, "").credentials().unwrap().key(), "AKD");
        let other = env(&[("AWS_PROFILE", "other")], file, config);
        assert_eq!((other.credentials().unwrap().token(), other.region().as_str()), (Some("t"), "eu-west-3"));
        assert_eq!(env(&[("AWS_REGION", "ap-south-1")], file, config).region(), "ap-south-1");
        assert_eq!(env(&[], "", "").region(), "us-east-1");
        let e = env(&[("AWS_PROFILE", "nope")], file, "").credentials().unwrap_err();
        assert!(e.contains("profile 'nope'"), "{e}");
        let debug = format!("{:?}", env(&[], file, "").credentials().unwrap());
        assert!(!debug.contains("sd"), "the secret is never shown: {debug}");
    }

    #[test]
    fn endpoints_come_from_the_option_the_environment_or_the_region() {
        let e = env(&[("AWS_ENDPOINT_URL", "http://10.0.0.1:7070")], "", "");
        assert_eq!(e.endpoints(None, "us-east-1").unwrap(), vec!["http://10.0.0.1:7070"]);
        assert_eq!(e.endpoints(Some("http://a:1, https://b/"), "x").unwrap(), vec!["http://a:1", "https://b"]);
        assert_eq!(env(&[], "", "").endpoints(None, "eu-west-1").unwrap(), vec!["https://s3.eu-west-1.amazonaws.com"]);
        let m = e.endpoints(Some("http://user:secret@h:1"), "x").unwrap_err();
        assert!(m.starts_with("endpoint: 'http://h:1'") && !m.contains("secret"), "{m}");
        assert!(e.endpoints(Some("ftp://h"), "x").is_err());
        assert!(e.endpoints(Some("http://h/path"), "x").is_err());
        for (bad, words) in [("http://h:99999", "port '99999'"), ("http://h:0", "port '0'"), ("http://:80", "no host"),
                             ("https://[::1", "without closing")] {
            let m = e.endpoints(Some(bad), "x").unwrap_err();
            assert!(m.contains(words), "{bad}: {m}");
        }
        assert_eq!(e.endpoints(Some("http://[::1]:9000"), "x").unwrap(), vec!["http://[::1]:9000"]);
    }
}
