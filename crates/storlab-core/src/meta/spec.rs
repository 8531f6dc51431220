//! The metadata benchmark's spec: plain data from Python (JSON), one field per engine-bound option
//! of the meta option table in python/storlab/measure/meta.py, with the same names, plus the fields
//! an orchestrator (MPI) sets. Validation of values happens here (each numeric option's bounds in
//! `BOUNDS`, exported with the defaults by `option_rules`); the file system is touched only when
//! the run is built (`run::MetaRun::new`).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::rules::{self, ints, secs, Bounds, Num, Unit};
use crate::spec::MAX_BYTES;

/// The phases of a metadata run, in the only order they can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetaPhase {
    /// Make the directory tree(s).
    Mkdir,
    /// Create each file (open O_CREAT|O_EXCL, write `file_size` bytes, optional fsync, close).
    Create,
    /// fstatat each file.
    Stat,
    /// Open each file, read `file_size` bytes, close.
    Read,
    /// List the names of each tree a page at a time (s3 targets: ListObjectsV2).
    List,
    /// Rename each file to a second name in the same directory.
    Rename,
    /// Unlink each file.
    Remove,
    /// Remove the directory tree(s).
    Rmdir,
}

impl MetaPhase {
    pub const ALL: [MetaPhase; 8] = [
        MetaPhase::Mkdir,
        MetaPhase::Create,
        MetaPhase::Stat,
        MetaPhase::Read,
        MetaPhase::List,
        MetaPhase::Rename,
        MetaPhase::Remove,
        MetaPhase::Rmdir,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MetaPhase::Mkdir => "mkdir",
            MetaPhase::Create => "create",
            MetaPhase::Stat => "stat",
            MetaPhase::Read => "read",
            MetaPhase::List => "list",
            MetaPhase::Rename => "rename",
            MetaPhase::Remove => "remove",
            MetaPhase::Rmdir => "rmdir",
        }
    }

    /// Phases that work on files (as opposed to the directory tree).
    pub fn is_item_phase(self) -> bool {
        !matches!(self, MetaPhase::Mkdir | MetaPhase::Rmdir)
    }
}

/// Where the workers' files live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DirMode {
    /// One tree for all workers (and all MPI ranks): contention on the same directories.
    Shared,
    /// One tree per worker.
    Unique,
}

impl DirMode {
    pub const ALL: [DirMode; 2] = [DirMode::Shared, DirMode::Unique];
}

/// Order in which stat and read visit the files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Creation order.
    Sequential,
    /// A random permutation per worker (seeded).
    Random,
}

impl Order {
    pub const ALL: [Order; 2] = [Order::Sequential, Order::Random];
}

/// Longest file-name prefix: leaves room for the worker and item numbers within NAME_MAX (255).
pub const MAX_PREFIX_BYTES: usize = 200;
/// Upper bound on the directories of one tree, so a typo cannot ask for billions of them.
pub const MAX_TREE_DIRS: u64 = 1_000_000;
/// Upper bound on the tree depth (path length stays far below PATH_MAX).
pub const MAX_DEPTH: u32 = 64;

/// The bounds of every numeric meta option (rules.rs checks and exports them).
pub const BOUNDS: &[Bounds<MetaSpec>] = &[
    ints("threads", Unit::Count, 1, 4096, |m| Some(Num::Int(m.threads.into()))),
    ints("files", Unit::Count, 1, u32::MAX as u64, |m| Some(Num::Int(m.files))),
    ints("file_size", Unit::Bytes, 0, MAX_BYTES, |m| Some(Num::Int(m.file_size))),
    ints("depth", Unit::Count, 0, MAX_DEPTH as u64, |m| Some(Num::Int(m.depth.into()))),
    ints("fanout", Unit::Count, 1, MAX_TREE_DIRS, |m| Some(Num::Int(m.fanout.into()))),
    secs("stonewall", 0.001, |m| m.stonewall.map(Num::Real)),
    // i64's range: the largest seed a TOML job file can write
    ints("seed", Unit::Count, 0, i64::MAX as u64, |m| Some(Num::Int(m.seed))),
    ints("list_page", Unit::Count, 1, MAX_LIST_PAGE as u64, |m| Some(Num::Int(m.list_page.into()))),
];

/// The most keys one ListObjectsV2 request returns (S3's limit).
pub const MAX_LIST_PAGE: u32 = 1000;
/// The largest object a create PUTs on an s3 target: each thread holds one object's body.
pub const MAX_OBJECT_BYTES: u64 = 1 << 30;
/// What the spec says when rename is asked of an s3 target.
pub const NO_RENAME: &str = "rename: S3 has no rename (only a copy and a delete, two operations of other kinds); leave rename out of --phases for an s3:// target";

/// The allowed values of a choice option of the meta spec.
pub fn choices(field: &str) -> Option<Vec<String>> {
    match field {
        "dir" => Some(rules::names(&DirMode::ALL)),
        "order" => Some(rules::names(&Order::ALL)),
        _ => None,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetaSpec {
    /// Existing directory the trees are made in, or the s3://BUCKET/PREFIX the names are keys
    /// under (the run's own new prefix).
    pub target: String,
    /// Worker threads.
    pub threads: u32,
    /// Files each worker creates.
    pub files: u64,
    /// Bytes written to each file at create and read back by read.
    pub file_size: u64,
    pub dir: DirMode,
    /// Levels of subdirectories below each tree root (0: files in the root itself).
    pub depth: u32,
    /// Subdirectories per directory; files go into the leaves, round-robin.
    pub fanout: u32,
    pub order: Order,
    /// fsync each file after writing it (inside the create latency).
    pub fsync_files: bool,
    /// fsync every directory a worker changed at the end of mkdir, create, rename, remove and
    /// rmdir (inside the phase's timed window; reported separately as dir_sync).
    pub fsync_dirs: bool,
    /// Time limit of each file phase in seconds; a worker stops there and later phases work on
    /// exactly the items it finished.
    pub stonewall: Option<f64>,
    /// The stonewall limits create only (mdtest -W); stat, read, rename and remove then run over
    /// every file created.
    pub stonewall_create_only: bool,
    /// Phases to run, in order; must start with mkdir, create.
    pub phases: Vec<MetaPhase>,
    /// Recorded for the front end; the engine never removes anything on its own, `cleanup` is
    /// called by the front end unless this is set.
    pub keep: bool,
    /// Seed of the random stat/read order.
    pub seed: u64,
    /// read compares every byte with what create wrote; a difference fails the read (mdtest -X).
    pub verify_read: bool,
    /// Prefix of every file name and per-worker tree name (rank-unique under MPI, e.g. "r3.").
    pub name_prefix: String,
    /// Whether this process makes and removes the shared tree (only one MPI rank does).
    pub shared_tree_owner: bool,
    /// s3:// targets: the endpoint URL(s), comma-separated (else from the AWS environment).
    pub endpoint: Option<String>,
    /// s3:// targets: do not check the endpoint's TLS certificate.
    pub insecure: bool,
    /// s3:// targets: address the bucket as BUCKET.HOST.
    pub virtual_host: bool,
    /// s3:// targets: keys per ListObjectsV2 request of the list phase.
    pub list_page: u32,
}

impl Default for MetaSpec {
    fn default() -> Self {
        MetaSpec {
            target: String::new(),
            threads: 1,
            files: 10_000,
            file_size: 0,
            dir: DirMode::Unique,
            depth: 0,
            fanout: 10,
            order: Order::Sequential,
            fsync_files: false,
            fsync_dirs: false,
            stonewall: None,
            stonewall_create_only: false,
            // every phase but list, which is for s3 targets
            phases: MetaPhase::ALL.into_iter().filter(|p| *p != MetaPhase::List).collect(),
            keep: false,
            seed: 0x5EED,
            verify_read: false,
            name_prefix: String::new(),
            shared_tree_owner: true,
            endpoint: None,
            insecure: false,
            virtual_host: false,
            list_page: MAX_LIST_PAGE,
        }
    }
}

impl MetaSpec {
    pub fn from_json(text: &str) -> Result<MetaSpec> {
        let spec: MetaSpec = serde_json::from_str(text).map_err(|e| Error::spec(format!("meta spec: {e}")))?;
        spec.validate()?;
        Ok(spec)
    }

    /// Every meta option with its default and rule, as `rules::option_rules` gives a group's.
    pub fn option_rules() -> serde_json::Value {
        rules::rules_json(&MetaSpec::default(), BOUNDS, choices, &[])
    }

    /// Names of the spec's fields (for the test that keeps the option table in step).
    pub fn field_names() -> Vec<String> {
        match serde_json::to_value(MetaSpec::default()) {
            Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// Leaf directories of one tree: fanout^depth.
    pub fn leaves(&self) -> u64 {
        (self.fanout as u64).pow(self.depth)
    }

    /// All directories of one tree, root included: sum of fanout^level for level 0..=depth.
    pub fn tree_dirs(&self) -> u64 {
        (0..=self.depth).map(|l| (self.fanout as u64).pow(l)).sum()
    }

    /// Whether the target is the objects under an s3:// prefix rather than a directory.
    pub fn is_s3(&self) -> bool {
        self.target.starts_with("s3://")
    }

    pub fn validate(&self) -> Result<()> {
        if self.target.is_empty() {
            return Err(Error::spec("target: a directory or an s3://BUCKET/PREFIX is required"));
        }
        self.check_namespace()?;
        rules::check_all(BOUNDS, self)?;
        let dirs = (0..=self.depth)
            .try_fold(0u64, |acc, l| (self.fanout as u64).checked_pow(l).and_then(|n| acc.checked_add(n)));
        match dirs {
            Some(n) if n <= MAX_TREE_DIRS => {}
            _ => {
                return Err(Error::spec(format!(
                    "depth/fanout: a tree of depth {} and fanout {} has more than {MAX_TREE_DIRS} directories",
                    self.depth, self.fanout
                )))
            }
        }
        if self.name_prefix.len() > MAX_PREFIX_BYTES || self.name_prefix.bytes().any(|b| b == b'/' || b == 0) {
            return Err(Error::spec(format!(
                "name_prefix: {:?} must be at most {MAX_PREFIX_BYTES} bytes without '/' or NUL",
                self.name_prefix
            )));
        }
        if self.phases.first() != Some(&MetaPhase::Mkdir) || self.phases.get(1) != Some(&MetaPhase::Create) {
            return Err(Error::spec("phases: must start with mkdir, create (the files the other phases work on)"));
        }
        if self.phases.windows(2).any(|w| w[0] >= w[1]) {
            let names: Vec<&str> = MetaPhase::ALL.iter().map(|p| p.name()).collect();
            return Err(Error::spec(format!("phases: each at most once and in the order {}", names.join(", "))));
        }
        if self.phases.contains(&MetaPhase::Rmdir) && !self.phases.contains(&MetaPhase::Remove) {
            return Err(Error::spec("phases: rmdir needs remove before it (directories must be empty)"));
        }
        Ok(())
    }

    /// What an object store cannot do and a directory does not need, each refused in one line.
    fn check_namespace(&self) -> Result<()> {
        if !self.is_s3() {
            if self.phases.contains(&MetaPhase::List) {
                return Err(Error::spec("phases: list is a phase of s3:// targets (paged ListObjectsV2); leave it out for a directory"));
            }
            if self.endpoint.is_some() || self.insecure || self.virtual_host {
                return Err(Error::spec("endpoint, insecure, virtual_host: options of an s3:// target; the target is a directory"));
            }
            return Ok(());
        }
        if self.phases.contains(&MetaPhase::Rename) {
            return Err(Error::spec(NO_RENAME));
        }
        if self.fsync_files || self.fsync_dirs {
            let name = if self.fsync_files { "fsync_files" } else { "fsync_dirs" };
            return Err(Error::spec(format!("{name}: S3 has no fsync (a PUT is durable once answered) and no directories; leave it off for an s3:// target")));
        }
        if self.file_size > MAX_OBJECT_BYTES {
            return Err(Error::spec(format!("file_size: {} bytes is more than an s3:// target's meta run writes per object; allowed: <= {MAX_OBJECT_BYTES}", self.file_size)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> Result<MetaSpec> {
        let sep = if extra.is_empty() { "" } else { ", " };
        MetaSpec::from_json(&format!(r#"{{"target": "/tmp"{sep}{extra}}}"#))
    }

    #[test]
    fn bounds_cover_every_numeric_field_and_choices_every_variant() {
        let rules = MetaSpec::option_rules();
        for (name, rule) in rules.as_object().unwrap() {
            if rule["default"].is_number() {
                assert!(rule.get("min").is_some() && rule.get("max").is_some(), "{name}: numeric, without bounds");
            }
        }
        assert!(rules["stonewall"].get("min").is_some());
        for field in ["dir", "order"] {
            let e = spec(&format!(r#""{field}": "\u0001""#)).unwrap_err().message;
            let listed: Vec<String> = e[e.find("expected").unwrap()..].split('`').skip(1).step_by(2).map(String::from).collect();
            assert_eq!(choices(field).unwrap(), listed, "{field}");
        }
        assert_eq!(spec(r#""threads": 0"#).unwrap_err().message, "threads: 0 is out of range; allowed: >= 1 and <= 4096");
        assert!(spec(r#""stonewall": 0.0"#).unwrap_err().message.starts_with("stonewall: 0 s is out of range"));
    }

    #[test]
    fn defaults_are_valid_and_complete() {
        let s = spec("").unwrap();
        assert_eq!(s.phases.len(), 7, "every phase but list");
        assert_eq!(s.leaves(), 1);
        assert_eq!(s.tree_dirs(), 1);
        assert!(MetaSpec::field_names().contains(&"fsync_dirs".to_string()));
    }

    #[test]
    fn tree_counts() {
        let s = spec(r#""depth": 2, "fanout": 3"#).unwrap();
        assert_eq!(s.leaves(), 9);
        assert_eq!(s.tree_dirs(), 1 + 3 + 9);
    }

    #[test]
    fn errors_name_the_field() {
        for (extra, field) in [
            (r#""threads": 0"#, "threads"),
            (r#""files": 0"#, "files"),
            (r#""fanout": 0"#, "fanout"),
            (r#""depth": 40, "fanout": 10"#, "depth"),
            (r#""stonewall": -1"#, "stonewall"),
            (r#""name_prefix": "a/b""#, "name_prefix"),
            (r#""phases": ["create"]"#, "phases"),
            (r#""phases": ["mkdir", "create", "read", "stat"]"#, "phases"),
            (r#""phases": ["mkdir", "create", "rmdir"]"#, "rmdir"),
            (r#""dir": "sideways""#, "sideways"),
            (r#""filez": 3"#, "filez"),
        ] {
            let e = spec(extra).unwrap_err();
            assert!(e.message.contains(field), "{extra}: {}", e.message);
        }
        assert!(MetaSpec::from_json("{}").unwrap_err().message.contains("target"));
    }

    #[test]
    fn an_s3_target_refuses_what_an_object_store_cannot_do_and_a_directory_refuses_list() {
        let s3 = |extra: &str| MetaSpec::from_json(&format!(r#"{{"target": "s3://bench/p/x", "phases": ["mkdir", "create", "stat", "read", "list", "remove", "rmdir"]{extra}}}"#));
        assert!(s3("").unwrap().is_s3());
        let e = MetaSpec::from_json(r#"{"target": "s3://bench/p"}"#).unwrap_err().message;
        assert_eq!(e, NO_RENAME);
        assert!(e.starts_with("rename: S3 has no rename") && !e.contains('\n'));
        assert!(s3(r#", "fsync_files": true"#).unwrap_err().message.starts_with("fsync_files: S3 has no fsync"));
        assert!(s3(r#", "fsync_dirs": true"#).unwrap_err().message.starts_with("fsync_dirs:"));
        assert!(s3(r#", "file_size": 2147483648"#).unwrap_err().message.starts_with("file_size:"));
        assert!(s3(r#", "list_page": 1001"#).unwrap_err().message.starts_with("list_page:"));
        assert!(spec(r#""phases": ["mkdir", "create", "list"]"#).unwrap_err().message.contains("list is a phase of s3:// targets"));
        assert!(spec(r#""endpoint": "http://h:1""#).unwrap_err().message.starts_with("endpoint"));
    }
}
