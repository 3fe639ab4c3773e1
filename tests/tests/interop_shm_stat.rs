//! `ringwire stat --json` on rings made by ringfire 0.5.2 agrees with what the ringfire
//! crate's own API reports (capacity, element_size, write_seq, readers, arena).

use ringwire::cli::{Cli, run, stat_json};
use ringwire_tests::records::Rec;
use ringwire_tests::shm::ShmPath;

use clap::Parser;

#[test]
fn stat_json_matches_ringfire_spmc_ring() {
    let p = ShmPath::new("stat-rf");
    // ringfire's named consumer keeps a default checkpoint next to the ring.
    let _checkpoint = p.sibling("_algo_1.offset");
    let mut prod = ringfire::RingProducerBuilder::new(256)
        .max_readers(4)
        .build::<Rec, _>(p.path())
        .unwrap();
    let mut cons = ringfire::RingConsumer::<Rec>::builder()
        .start_from_oldest()
        .consumer_name("algo 1")
        .attach(p.path())
        .unwrap();
    for seq in 1..=1000 {
        prod.push(&Rec::new(seq));
    }
    for _ in 0..10 {
        cons.try_recv().unwrap();
    }
    cons.commit_offset().ok();
    let v = stat_json(p.path()).unwrap();
    assert_eq!(v["capacity"], prod.capacity());
    assert_eq!(
        v["element_size"],
        size_of::<ringfire::header::Slot<Rec>>() as u64
    );
    assert_eq!(v["write_seq"], prod.published_sequence());
    assert_eq!(v["write_seq"], 1000);
    assert_eq!(v["oldest_seq"], 1000 - 256 + 1);
    assert_eq!(v["utilization_pct"], 100.0);
    assert_eq!(v["mode"], "SPMC");
    assert_eq!(v["flow_control"], "LossyLatestWins");
    assert_eq!(v["magic"], "0x52494E4746495245");
    assert_eq!(v["version"], 2);
    assert_eq!(v["has_registry"], true);
    assert_eq!(v["has_arena"], false);
    assert_eq!(v["file_size"], std::fs::metadata(p.path()).unwrap().len());
    let readers = v["readers"].as_array().unwrap();
    assert_eq!(readers.len(), 1, "{v}");
    assert_eq!(readers[0]["pid"], std::process::id());
    assert_eq!(readers[0]["name"], "algo 1");
    assert_eq!(readers[0]["cursor"], cons.cursor());
    assert_eq!(readers[0]["lag"], cons.lag());
    assert_eq!(readers[0]["alive"], true);
}

#[test]
fn stat_json_matches_ringfire_blob_ring() {
    let p = ShmPath::new("stat-rf-blob");
    let mut prod = ringfire::BlobProducer::<u32>::create(p.path(), 4, 256).unwrap();
    prod.push(&1, &[7u8; 5]).unwrap();
    prod.push(&2, &[9u8; 70]).unwrap();
    let v = stat_json(p.path()).unwrap();
    assert_eq!(v["capacity"], 4);
    assert_eq!(
        v["element_size"],
        size_of::<ringfire::header::Slot<ringfire::BlobPacket<u32>>>() as u64
    );
    assert_eq!(v["write_seq"], prod.sequence());
    assert_eq!(v["has_arena"], true);
    assert_eq!(v["arena_capacity"], 256);
    assert_eq!(v["arena_reserved"], 0xC0);
    assert_eq!(v["utilization_pct"], 50.0);
}

#[test]
fn stat_text_dump_and_prune_run_on_a_ringfire_ring() {
    let p = ShmPath::new("cli-rf");
    let mut prod = ringfire::RingProducer::<[u8; 64]>::create(p.path(), 8).unwrap();
    let mut rec = [b'x'; 64];
    rec[..5].copy_from_slice(b"hello");
    for _ in 0..3 {
        prod.push(&rec);
    }
    let path = p.path().to_str().unwrap();
    let mut out = Vec::new();
    run(
        Cli::try_parse_from(["ringwire", "stat", path]).unwrap(),
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("write_seq          3"), "{text}");
    assert!(text.contains("Readers: no registry"), "{text}");

    let mut out = Vec::new();
    run(
        Cli::try_parse_from(["ringwire", "dump", path, "--tail", "2"]).unwrap(),
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("seq 2 slot 2 seq_word 2 \"helloxxx"),
        "{text}"
    );
    assert!(lines[1].contains("(64 bytes)"), "{text}");

    let mut out = Vec::new();
    run(
        Cli::try_parse_from(["ringwire", "dump", path, "--hex", "--tail", "1"]).unwrap(),
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("68 65 6C 6C 6F 78"), "{text}");

    let mut out = Vec::new();
    run(
        Cli::try_parse_from(["ringwire", "prune", path]).unwrap(),
        &mut out,
    )
    .unwrap();
    assert!(
        String::from_utf8(out)
            .unwrap()
            .contains("no reader registry")
    );
}

#[test]
fn bad_flag_values_are_errors_not_defaults() {
    for args in [
        &["ringwire", "dump", "/x", "--tail", "0"][..],
        &["ringwire", "dump", "/x", "--tail", "ten"],
        &["ringwire", "top", "/x", "--interval-ms", "fast"],
        &["ringwire", "top", "/x", "--iterations", "0"],
        &["ringwire", "top", "/x", "--iterations", "-3"],
        &["ringwire", "stat"],
        &["ringwire", "frobnicate", "/x"],
    ] {
        let e = Cli::try_parse_from(args).expect_err(&format!("{args:?} parsed"));
        let msg = e.to_string();
        assert!(msg.starts_with("error:"), "{args:?}: {msg}");
    }
    let e = Cli::try_parse_from(["ringwire", "dump", "/x", "--tail", "ten"]).unwrap_err();
    assert!(e.to_string().contains("'ten'"), "{e}");
}

#[test]
fn dump_names_a_slot_left_mid_write_below_write_seq_as_lost() {
    use ringwire::core::layout::SLOT_WRITING;
    use ringwire::core::sync::Ordering;
    let p = ShmPath::new("dump-stuck");
    let mut prod = ringwire::RingProducer::<u64>::create(&p, 4).unwrap();
    for s in 1..=4u64 {
        prod.push(&s);
    }
    // The writer died writing record 5 over record 1's slot.
    ringwire_tests::shm::view(prod.file())
        .slot_seq(5)
        .store(SLOT_WRITING, Ordering::SeqCst);
    let mut out = Vec::new();
    run(
        Cli::try_parse_from(["ringwire", "dump", p.path().to_str().unwrap()]).unwrap(),
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[0].starts_with("seq 1 slot 1 seq_word WRITING (lost:"),
        "{text}"
    );
    assert!(lines[1].starts_with("seq 2 slot 2 seq_word 2 "), "{text}");
}
