//! `ringwire stat --json` and the published `ringfire stat --json` (the 0.5.2 binary) agree on
//! capacity, element_size and write_seq, each run on the other project's ring.
//!
//! The ringfire binary is not a crate dependency: `.ci/run` installs it with
//! `cargo install ringfire --version 0.5.2 --no-default-features --root target/ringfire-bin`
//! and runs this test with `RINGFIRE_BIN` pointing at it, so it is `#[ignore]`d in a plain
//! `cargo test`.

use std::process::Command;

use ringwire::RingProducer;
use ringwire::cli::stat_json;
use ringwire_tests::records::Rec;
use ringwire_tests::shm::ShmPath;

fn ringfire_stat(path: &std::path::Path) -> serde_json::Value {
    let bin =
        std::env::var_os("RINGFIRE_BIN").expect("RINGFIRE_BIN names the ringfire 0.5.2 binary");
    let o = Command::new(bin)
        .arg("stat")
        .arg(path)
        .arg("--json")
        .output()
        .expect("run ringfire");
    assert!(
        o.status.success(),
        "ringfire stat failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("ringfire stat output: {e}: {:?}", o.stdout))
}

fn agree(ours: &serde_json::Value, theirs: &serde_json::Value) {
    for key in ["capacity", "element_size", "write_seq"] {
        assert_eq!(
            ours[key], theirs[key],
            "{key}: ringwire {ours} vs ringfire {theirs}"
        );
    }
}

#[test]
#[ignore = "needs the ringfire 0.5.2 binary (RINGFIRE_BIN): .ci/run installs it"]
fn ringfire_stat_on_a_ringwire_ring_agrees_with_ringwire_stat() {
    let p = ShmPath::new("stat-bin-rw");
    let mut prod = RingProducer::<Rec>::create(p.path(), 512).unwrap();
    for seq in 1..=777 {
        prod.push(&Rec::new(seq));
    }
    let theirs = ringfire_stat(p.path());
    let ours = stat_json(p.path()).unwrap();
    agree(&ours, &theirs);
    assert_eq!(theirs["write_seq"], 777);
    assert_eq!(theirs["capacity"], 512);
}

#[test]
#[ignore = "needs the ringfire 0.5.2 binary (RINGFIRE_BIN): .ci/run installs it"]
fn ringwire_stat_on_a_ringfire_ring_agrees_with_ringfire_stat() {
    let p = ShmPath::new("stat-bin-rf");
    let mut prod = ringfire::RingProducer::<Rec>::create(p.path(), 256).unwrap();
    for seq in 1..=300 {
        prod.push(&Rec::new(seq));
    }
    let theirs = ringfire_stat(p.path());
    let ours = stat_json(p.path()).unwrap();
    agree(&ours, &theirs);
    assert_eq!(ours["write_seq"], 300);
}
