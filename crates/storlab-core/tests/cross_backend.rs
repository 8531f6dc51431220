//! The same job through every backend, buffered and O_DIRECT: identical byte and op counts, and
//! full offset coverage for sequential writes (every block of the file rewritten exactly once).

use storlab_core::spec::{EngineKind, GroupSpec, PhaseSpec, Rw};
use storlab_core::{run_phase, Control, Plan};

const SIZE: u64 = 2 << 20;
const BS: u64 = 16 << 10;

fn scratch(name: &str) -> String {
    let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
    format!("{dir}/storlab-xb-{}-{name}", std::process::id())
}

fn run(path: &str, rw: Rw, engine: EngineKind, qd: u32, direct: bool) -> storlab_core::PhaseResult {
    let g = GroupSpec {
        target: vec![path.to_string()],
        size: Some(SIZE),
        rw,
        bs: BS,
        threads: 3,
        qd,
        engine,
        direct,
        ..Default::default()
    };
    let plan = Plan::build(PhaseSpec { name: "x".into(), groups: vec![g] }).expect("plan");
    let control = Control::for_plan(&plan);
    let r = run_phase(&plan, &control).result;
    assert!(r.complete, "{engine:?} qd{qd} direct={direct}: {:?}", r.error);
    r
}

#[test]
fn every_backend_moves_the_same_bytes_and_covers_every_block() {
    let cases = [
        (EngineKind::Psync, 1, false),
        (EngineKind::Psync, 1, true),
        (EngineKind::IoUring, 1, false),
        (EngineKind::IoUring, 8, true),
        (EngineKind::IoUring, 8, false),
    ];
    let mut counts = Vec::new();
    for (i, &(engine, qd, direct)) in cases.iter().enumerate() {
        let path = scratch(&format!("w{i}"));
        std::fs::write(&path, vec![0u8; SIZE as usize]).unwrap();
        let w = run(&path, Rw::Write, engine, qd, direct).write.unwrap();
        let data = std::fs::read(&path).unwrap();
        let untouched = data.chunks(BS as usize).filter(|c| c.iter().all(|&b| b == 0)).count();
        assert_eq!(untouched, 0, "{engine:?} qd{qd} direct={direct} left blocks unwritten");
        let r = run(&path, Rw::Read, engine, qd, direct).read.unwrap();
        counts.push((w.ops, w.bytes, r.ops, r.bytes));
        std::fs::remove_file(&path).unwrap();
    }
    let blocks = SIZE / BS;
    assert!(counts.iter().all(|&c| c == (blocks, SIZE, blocks, SIZE)), "{counts:?}");
}
