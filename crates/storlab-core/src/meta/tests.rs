//! Whole-run tests of the metadata benchmark on a temporary directory: what exists after every
//! phase, shared and unique trees, tree shapes, stonewall accounting, failures and clean-up.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::*;

fn spec(dir: &Path, extra: serde_json::Value) -> MetaSpec {
    let mut v = serde_json::json!({"target": dir.to_str().unwrap()});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    MetaSpec::from_json(&v.to_string()).unwrap()
}

/// Every file (with its size) and directory below `root`, as paths relative to it.
fn tree(root: &Path) -> (BTreeMap<String, u64>, Vec<String>) {
    let (mut files, mut dirs) = (BTreeMap::new(), Vec::new());
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let rel = e.path().strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if e.file_type().unwrap().is_dir() {
                dirs.push(rel);
                stack.push(e.path());
            } else {
                files.insert(rel, e.metadata().unwrap().len());
            }
        }
    }
    dirs.sort();
    (files, dirs)
}

fn step(run: &mut MetaRun) -> MetaPhaseResult {
    let control = MetaControl::new(run.workers(), run.next_phase().unwrap());
    run.run_next(&control).unwrap()
}

fn hist_count(r: &MetaPhaseResult) -> u64 {
    r.lat_hist.buckets.iter().map(|b| b[1]).sum()
}

#[test]
fn every_phase_leaves_exactly_what_it_should() {
    let tmp = tempfile::tempdir().unwrap();
    let mut run = MetaRun::new(spec(tmp.path(), serde_json::json!({
        "threads": 2, "files": 50, "file_size": 3000, "depth": 1, "fanout": 3
    })))
    .unwrap();

    let r = step(&mut run);
    assert_eq!((r.name, r.ops, r.items_per_worker.clone()), ("mkdir", 8, vec![4, 4]));
    let (files, dirs) = tree(tmp.path());
    assert!(files.is_empty());
    assert_eq!(dirs, ["w0", "w0/d0", "w0/d1", "w0/d2", "w1", "w1/d0", "w1/d1", "w1/d2"]);

    let r = step(&mut run);
    assert_eq!((r.name, r.ops, r.bytes), ("create", 100, 100 * 3000));
    assert_eq!(r.items_per_worker, vec![50, 50]);
    assert_eq!(hist_count(&r), 100);
    assert!(r.complete && !r.stonewalled && r.ops_per_s > 0.0);
    assert_eq!(r.workers[1].write_bytes, 50 * 3000);
    let (files, _) = tree(tmp.path());
    assert_eq!(files.len(), 100);
    assert!(files.values().all(|&s| s == 3000));
    assert!(files.contains_key("w0/d0/f0.0") && files.contains_key("w1/d1/f1.49"));

    for (name, bytes) in [("stat", 0), ("read", 100 * 3000)] {
        let r = step(&mut run);
        assert_eq!((r.name, r.ops, r.bytes, hist_count(&r)), (name, 100, bytes, 100));
        assert_eq!(tree(tmp.path()).0, files);
    }

    let r = step(&mut run);
    assert_eq!((r.name, r.ops), ("rename", 100));
    let (renamed, _) = tree(tmp.path());
    assert_eq!(renamed.len(), 100);
    assert!(renamed.contains_key("w0/d0/r0.0") && !renamed.contains_key("w0/d0/f0.0"));

    let r = step(&mut run);
    assert_eq!((r.name, r.ops), ("remove", 100));
    let (files, dirs) = tree(tmp.path());
    assert!(files.is_empty());
    assert_eq!(dirs.len(), 8);

    let r = step(&mut run);
    assert_eq!((r.name, r.ops), ("rmdir", 8));
    assert_eq!(tree(tmp.path()), (BTreeMap::new(), vec![]));
    assert!(run.next_phase().is_none());
    assert_eq!(run.cleanup().unwrap(), CleanupReport::default());
    assert!(run.states().iter().all(|s| s.dirs == 0 && s.removed == s.created));
}

#[test]
fn a_shared_tree_holds_every_workers_files_and_is_made_by_one_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let mut run =
        MetaRun::new(spec(tmp.path(), serde_json::json!({"threads": 3, "files": 4, "dir": "shared", "depth": 1, "fanout": 2})))
            .unwrap();
    let r = step(&mut run);
    assert_eq!(r.items_per_worker, vec![3, 0, 0]);
    step(&mut run);
    let (files, dirs) = tree(tmp.path());
    assert_eq!(dirs, ["shared", "shared/d0", "shared/d1"]);
    for w in 0..3 {
        for i in 0..4 {
            assert!(files.contains_key(&format!("shared/d{}/f{w}.{i}", i % 2)), "{w}.{i} in {files:?}");
        }
    }
    while run.next_phase().is_some() {
        assert!(step(&mut run).complete);
    }
    assert_eq!(tree(tmp.path()), (BTreeMap::new(), vec![]));
}

#[test]
fn tree_shapes_have_every_directory_and_balanced_leaves() {
    for (depth, fanout, files) in [(0u32, 5u32, 7u64), (1, 1, 3), (2, 3, 20), (3, 2, 17)] {
        let tmp = tempfile::tempdir().unwrap();
        let s = spec(tmp.path(), serde_json::json!({"files": files, "depth": depth, "fanout": fanout}));
        let (leaves, total) = (s.leaves(), s.tree_dirs());
        let mut run = MetaRun::new(s).unwrap();
        assert_eq!(step(&mut run).ops, total);
        step(&mut run);
        let (found, dirs) = tree(tmp.path());
        assert_eq!(dirs.len() as u64, total, "depth {depth} fanout {fanout}");
        let mut per_leaf: BTreeMap<String, u64> = BTreeMap::new();
        for path in found.keys() {
            assert_eq!(path.matches('/').count() as u32, depth + 1, "{path} at the wrong depth");
            *per_leaf.entry(path.rsplit_once('/').unwrap().0.to_string()).or_default() += 1;
        }
        let (lo, hi) = (per_leaf.values().min().unwrap(), per_leaf.values().max().unwrap());
        assert!(hi - lo <= 1, "unbalanced leaves {per_leaf:?}");
        assert_eq!(per_leaf.len() as u64, leaves.min(files));
        run.cleanup().unwrap();
        assert_eq!(tree(tmp.path()), (BTreeMap::new(), vec![]));
    }
}

#[test]
fn stonewall_stops_each_phase_and_later_phases_work_on_what_was_finished() {
    let tmp = tempfile::tempdir().unwrap();
    let mut run = MetaRun::new(spec(tmp.path(), serde_json::json!({
        "threads": 2, "files": 2_000_000, "stonewall": 0.05
    })))
    .unwrap();
    let mkdir = step(&mut run);
    assert!(!mkdir.stonewalled && mkdir.stonewall_s.is_none(), "the tree is always complete");
    let create = step(&mut run);
    assert!(create.stonewalled && create.complete);
    assert_eq!(create.stonewall_s, Some(0.05));
    let created: Vec<u64> = run.states().iter().map(|s| s.created).collect();
    assert_eq!(create.items_per_worker, created);
    assert!(created.iter().all(|&c| c > 0 && c < 2_000_000), "{created:?}");
    assert!(create.seconds < 5.0, "workers stop at the stonewall, not at the end of their files");
    assert_eq!(tree(tmp.path()).0.len() as u64, created.iter().sum::<u64>());
    for _ in ["stat", "read", "rename"] {
        let r = step(&mut run);
        for (w, &n) in r.items_per_worker.iter().enumerate() {
            assert!(n <= created[w], "{} worked on {n} items of worker {w}, only {} exist", r.name, created[w]);
            if !r.workers[w].stonewalled {
                assert_eq!(n, created[w], "{}: a worker that was not stopped does all its items", r.name);
            }
        }
    }
    let renamed: Vec<u64> = run.states().iter().map(|s| s.renamed).collect();
    let remove = step(&mut run);
    let removed: Vec<u64> = run.states().iter().map(|s| s.removed).collect();
    assert_eq!(remove.items_per_worker, removed);
    let (files, _) = tree(tmp.path());
    assert_eq!(files.len() as u64, created.iter().sum::<u64>() - removed.iter().sum::<u64>());
    // renamed files carry the r-name, the rest the f-name
    for (name, _) in files.iter() {
        let (w, i): (usize, u64) = {
            let n = name.rsplit_once('/').unwrap().1;
            let (a, b) = n[1..].split_once('.').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        };
        assert_eq!(name.contains("/r"), i < renamed[w], "{name}");
    }
    let rmdir = step(&mut run);
    assert_eq!(rmdir.ops, 2);
    assert_eq!(tree(tmp.path()), (BTreeMap::new(), vec![]));
}

#[test]
fn stonewall_create_only_stops_create_and_every_later_phase_does_all_files() {
    let tmp = tempfile::tempdir().unwrap();
    let mut run = MetaRun::new(spec(tmp.path(), serde_json::json!({
        "threads": 1, "files": 2_000_000, "stonewall": 0.05, "stonewall_create_only": true,
        "phases": ["mkdir", "create", "stat", "remove", "rmdir"]
    })))
    .unwrap();
    step(&mut run);
    let create = step(&mut run);
    assert!(create.stonewalled && create.items_per_worker[0] < 2_000_000);
    for name in ["stat", "remove"] {
        let r = step(&mut run);
        assert_eq!(r.name, name);
        assert!(!r.stonewalled && r.stonewall_s.is_none(), "{name} is not limited (mdtest -W limits create only)");
        assert_eq!(r.items_per_worker, create.items_per_worker, "{name} visits every file created");
    }
    step(&mut run);
    assert_eq!(tree(tmp.path()), (BTreeMap::new(), vec![]));
}

#[test]
fn random_order_visits_every_file_once() {
    let order = worker::visit_order(&MetaSpec { order: Order::Random, ..MetaSpec::default() }, MetaPhase::Stat, 1, 1000).unwrap();
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..1000).collect::<Vec<u32>>());
    assert_ne!(order, sorted, "a permutation, not the creation order");
    let other = worker::visit_order(&MetaSpec { order: Order::Random, ..MetaSpec::default() }, MetaPhase::Stat, 2, 1000).unwrap();
    assert_ne!(order, other, "each worker its own order");
    let random = |seed| MetaSpec { order: Order::Random, seed, ..MetaSpec::default() };
    assert_eq!(worker::visit_order(&random(7), MetaPhase::Read, 0, 500), worker::visit_order(&random(7), MetaPhase::Read, 0, 500));
    assert_ne!(worker::visit_order(&random(7), MetaPhase::Read, 0, 500), worker::visit_order(&random(8), MetaPhase::Read, 0, 500));
    assert!(worker::visit_order(&MetaSpec::default(), MetaPhase::Stat, 1, 10).is_none());
    assert!(worker::visit_order(&MetaSpec { order: Order::Random, ..MetaSpec::default() }, MetaPhase::Remove, 1, 10).is_none());

    let tmp = tempfile::tempdir().unwrap();
    let out = run_all(spec(tmp.path(), serde_json::json!({"threads": 2, "files": 300, "order": "random", "file_size": 10}))).unwrap();
    for p in &out.phases {
        assert!(p.complete, "{}: {:?}", p.name, p.error);
    }
    assert_eq!(out.phases[2].ops, 600);
    assert_eq!(out.phases[3].bytes, 6000);
}

#[test]
fn a_failed_create_names_the_path_and_cleanup_removes_only_what_the_run_made() {
    let tmp = tempfile::tempdir().unwrap();
    let mut run = MetaRun::new(spec(tmp.path(), serde_json::json!({"threads": 2, "files": 20}))).unwrap();
    step(&mut run);
    std::fs::write(tmp.path().join("w0/f0.5"), b"not ours").unwrap();
    let r = step(&mut run);
    assert_eq!((r.stop_reason, r.complete, r.error_kind.as_deref()), ("error", false, Some("io")));
    let msg = r.error.unwrap();
    let path = format!("{}/w0/f0.5", tmp.path().display());
    assert!(msg.contains(&path) && msg.contains("File exists") && msg.starts_with("create of "), "{msg}");
    assert_eq!(run.states()[0].created, 5);
    assert_eq!(r.items_per_worker[0], 5);
    assert!(run.next_phase().is_none(), "no phase after a failed one");
    let e = run.cleanup().unwrap_err();
    assert!(e.message.contains(&format!("{}/w0", tmp.path().display())) && e.message.contains("not empty"), "{}", e.message);
    let (files, dirs) = tree(tmp.path());
    assert_eq!(files.keys().collect::<Vec<_>>(), ["w0/f0.5"]);
    assert_eq!(dirs, ["w0"]);
}

#[test]
fn a_missing_file_fails_stat_with_its_path_and_cleanup_skips_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mut run = MetaRun::new(spec(tmp.path(), serde_json::json!({"files": 10, "depth": 1, "fanout": 2}))).unwrap();
    step(&mut run);
    step(&mut run);
    std::fs::remove_file(tmp.path().join("w0/d1/f0.3")).unwrap();
    let r = step(&mut run);
    let msg = r.error.unwrap();
    assert!(msg.contains(&format!("stat of {}/w0/d1/f0.3 failed at stat: No such file", tmp.path().display())), "{msg}");
    assert_eq!(r.ops, 3);
    let report = run.cleanup().unwrap();
    assert_eq!(report, CleanupReport { files_removed: 9, dirs_removed: 3 });
    assert_eq!(tree(tmp.path()), (BTreeMap::new(), vec![]));
}

#[test]
fn fsync_of_files_and_directories_is_measured() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_all(spec(tmp.path(), serde_json::json!({
        "threads": 2, "files": 6, "file_size": 100, "fsync_files": true, "fsync_dirs": true, "depth": 1, "fanout": 2
    })))
    .unwrap();
    let by: BTreeMap<&str, &MetaPhaseResult> = out.phases.iter().map(|p| (p.name, p)).collect();
    assert_eq!(by["create"].file_sync.as_ref().unwrap().ops, 12);
    assert!(by["stat"].file_sync.is_none() && by["stat"].dir_sync.is_none());
    // mkdir: the target and each tree root (its two children are new); create: both leaves of each
    assert_eq!(by["mkdir"].dir_sync.as_ref().unwrap().ops, 4);
    for p in ["create", "rename", "remove"] {
        assert_eq!(by[p].dir_sync.as_ref().unwrap().ops, 4, "{p}");
    }
    assert_eq!(by["rmdir"].dir_sync.as_ref().unwrap().ops, 2);
    assert_eq!(tree(tmp.path()), (BTreeMap::new(), vec![]));
}

#[test]
fn an_interrupt_stops_the_phase_and_cleanup_removes_everything() {
    let tmp = tempfile::tempdir().unwrap();
    let mut run = MetaRun::new(spec(tmp.path(), serde_json::json!({"threads": 2, "files": 4_000_000}))).unwrap();
    step(&mut run);
    let control = Arc::new(MetaControl::new(2, MetaPhase::Create));
    let c2 = control.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        c2.interrupt();
    });
    let r = run.run_next(&control).unwrap();
    stopper.join().unwrap();
    assert_eq!((r.stop_reason, r.complete), ("interrupted", false));
    assert!(r.ops > 0 && r.ops < 8_000_000);
    let (bytes, ops, _, done) = control.progress();
    assert_eq!((bytes, ops, done), (0, r.ops, 2));
    assert!(run.next_phase().is_none());
    let report = run.cleanup().unwrap();
    assert_eq!((report.files_removed, report.dirs_removed), (r.ops, 2));
    assert_eq!(tree(tmp.path()), (BTreeMap::new(), vec![]));
}

#[test]
fn name_prefix_marks_every_name_and_keep_leaves_the_files() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_all(spec(tmp.path(), serde_json::json!({
        "files": 2, "name_prefix": "r3.", "keep": true, "phases": ["mkdir", "create", "stat"]
    })))
    .unwrap();
    assert!(out.cleanup.is_none());
    let (files, dirs) = tree(tmp.path());
    assert_eq!(dirs, ["r3.w0"]);
    assert_eq!(files.keys().collect::<Vec<_>>(), ["r3.w0/r3.f0.0", "r3.w0/r3.f0.1"]);

    let tmp2 = tempfile::tempdir().unwrap();
    let out = run_all(spec(tmp2.path(), serde_json::json!({"files": 2, "phases": ["mkdir", "create", "stat"]}))).unwrap();
    assert_eq!(out.cleanup, Some(CleanupReport { files_removed: 2, dirs_removed: 1 }));
    assert_eq!(tree(tmp2.path()), (BTreeMap::new(), vec![]));
}

#[test]
fn the_target_must_be_an_existing_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    let e = MetaRun::new(spec(&missing, serde_json::json!({}))).err().unwrap();
    assert_eq!(e.kind, crate::ErrorKind::Target);
    assert!(e.message.contains(missing.to_str().unwrap()) && e.message.contains("No such file"), "{}", e.message);
    let e = MetaRun::new(MetaSpec { target: tmp.path().to_str().unwrap().into(), phases: vec![MetaPhase::Create], ..MetaSpec::default() })
        .err()
        .unwrap();
    assert!(e.message.starts_with("phases:"), "{}", e.message);
}

#[test]
fn an_existing_tree_fails_mkdir_without_touching_it() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("w1")).unwrap();
    let mut run = MetaRun::new(spec(tmp.path(), serde_json::json!({"threads": 2}))).unwrap();
    let r = step(&mut run);
    assert!(r.error.unwrap().contains(&format!("mkdir of {}/w1 failed at mkdir: File exists", tmp.path().display())));
    run.cleanup().unwrap();
    assert_eq!(tree(tmp.path()).1, ["w1"], "the directory that was there before stays");
}

#[test]
fn a_phase_is_timed_from_the_release_of_its_workers_not_from_their_set_up() {
    // random order: each worker shuffles its items in its set-up, before the start barrier
    let tmp = tempfile::tempdir().unwrap();
    let mut run = MetaRun::new(spec(tmp.path(), serde_json::json!({"threads": 3, "files": 2000, "order": "random"}))).unwrap();
    while run.next_phase().is_some() {
        let r = step(&mut run);
        let first = r.workers.iter().map(|w| w.start_s).fold(f64::INFINITY, f64::min);
        let last = r.workers.iter().map(|w| w.end_s).fold(0.0, f64::max);
        assert_eq!(first, 0.0, "{}: the first worker released starts the phase", r.name);
        assert_eq!(r.seconds, last, "{}: the phase ends with its last worker", r.name);
        assert!(r.start_unix_s > 0.0);
    }
}

#[test]
fn a_second_run_adopts_the_files_another_made_and_carries_on_from_there() {
    let tmp = tempfile::tempdir().unwrap();
    let s = spec(tmp.path(), serde_json::json!({"files": 20, "file_size": 100, "name_prefix": "r1.",
                                               "phases": ["mkdir", "create", "stat", "read", "remove", "rmdir"]}));
    let mut maker = MetaRun::new(s.clone()).unwrap();
    step(&mut maker);
    step(&mut maker);
    // another process's run of the same spec takes the files over and stats, reads, removes them
    let mut visitor = MetaRun::new(s.clone()).unwrap();
    assert!(visitor.adopt(vec![WorkerState::default(); 2], MetaPhase::Stat).is_err(), "worker count");
    assert!(visitor.adopt(maker.states().to_vec(), MetaPhase::Create).is_err(), "create cannot be adopted");
    let too_many = vec![WorkerState { created: 21, ..maker.states()[0].clone() }];
    assert!(visitor.adopt(too_many, MetaPhase::Stat).is_err(), "more files than the spec");
    visitor.adopt(maker.states().to_vec(), MetaPhase::Stat).unwrap();
    assert_eq!(visitor.next_phase(), Some(MetaPhase::Stat));
    let r = step(&mut visitor);
    assert_eq!((r.name, r.ops), ("stat", 20));
    let r = step(&mut visitor);
    assert_eq!((r.name, r.ops, r.bytes), ("read", 20, 2000));
    // the maker takes the state back and removes them
    maker.adopt(visitor.states().to_vec(), MetaPhase::Remove).unwrap();
    assert_eq!(step(&mut maker).ops, 20);
    step(&mut maker);
    assert_eq!(tree(tmp.path()), (BTreeMap::new(), vec![]));
}

#[test]
fn verify_read_fails_a_file_whose_data_changed_and_passes_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let s = spec(tmp.path(), serde_json::json!({"files": 5, "file_size": 3901, "verify_read": true,
                                               "phases": ["mkdir", "create", "read", "remove", "rmdir"]}));
    let mut run = MetaRun::new(s.clone()).unwrap();
    step(&mut run);
    step(&mut run);
    let r = step(&mut run);
    assert!(r.complete && r.ops == 5, "{r:?}");
    // one byte of the fourth file changed: a second read fails there, naming the file and the byte
    let path = tmp.path().join("w0/f0.3");
    let mut data = std::fs::read(&path).unwrap();
    data[2000] ^= 1;
    std::fs::write(&path, &data).unwrap();
    let mut again = MetaRun::new(s).unwrap();
    again.adopt(run.states().to_vec(), MetaPhase::Read).unwrap();
    let r = step(&mut again);
    assert!(!r.complete && r.ops == 3, "{r:?}");
    let msg = format!("{r:?}");
    assert!(msg.contains("f0.3") && msg.contains("byte 2000 differs"), "{msg}");
    run.cleanup().unwrap();
}
