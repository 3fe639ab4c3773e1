//! A helper process for the cross-process tests: a ring writer or a ring reader of
//! [`Rec`] records.
//!
//! ```text
//! shm_helper write <path> <count|0=forever> <capacity> [lossless] [readers=R] [persistent] [pause-us=P]
//! shm_helper read <path> <count> [name=X]
//! ```
//! The writer prints `created <inode>` once the ring exists, then `done <write_seq>`. The
//! reader prints `attached`, then `ok <received> lapped <n>`; a wrong record exits with 2.

use std::io::Write;
use std::time::{Duration, Instant};

use ringwire::core::broadcast::registry;
use ringwire::{CleanupMode, FlowControl, FutexWait, RingConsumer, RingProducer};
use ringwire_tests::records::Rec;

fn opt<'a>(args: &'a [String], key: &str) -> Option<&'a str> {
    args.iter()
        .find_map(|a| a.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

fn fail(msg: &str) -> ! {
    eprintln!("shm_helper: {msg}");
    std::process::exit(2)
}

fn num(s: Option<&String>, what: &str) -> u64 {
    s.and_then(|v| v.parse().ok())
        .unwrap_or_else(|| fail(&format!("bad or missing {what}")))
}

fn write(args: &[String]) {
    let path = &args[0];
    let count = num(args.get(1), "count");
    let cap = num(args.get(2), "capacity");
    let rest = &args[3..];
    let mut b = RingProducer::<Rec>::builder(cap).max_readers(8);
    if rest.iter().any(|a| a == "lossless") {
        b = b.flow_control(FlowControl::LosslessBackpressure);
    }
    if rest.iter().any(|a| a == "persistent") {
        b = b.cleanup_mode(CleanupMode::Persistent);
    }
    let mut prod = b
        .build::<Rec, _>(path)
        .unwrap_or_else(|e| fail(&e.to_string()));
    println!("created {}", prod.file().inode().1);
    let _ = std::io::stdout().flush();
    let want_readers: usize = opt(rest, "readers").map_or(0, |v| v.parse().unwrap_or(0));
    let deadline = Instant::now() + Duration::from_secs(60);
    // SAFETY: the view is borrowed for one registry scan while `prod` owns the file.
    while registry::live_readers(unsafe { prod.file().view() }).count() < want_readers {
        if Instant::now() > deadline {
            fail("readers never registered");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let pause: u64 = opt(rest, "pause-us").map_or(0, |v| v.parse().unwrap_or(0));
    let mut seq = 1u64;
    while count == 0 || seq <= count {
        prod.push(&Rec::new(seq));
        if pause > 0 {
            std::thread::sleep(Duration::from_micros(pause));
        }
        seq += 1;
    }
    println!("done {}", prod.sequence());
}

fn read(args: &[String]) {
    let path = &args[0];
    let count = num(args.get(1), "count");
    let name = opt(&args[2..], "name").unwrap_or("reader");
    let mut cons = RingConsumer::<Rec>::builder()
        .start_from_oldest()
        .consumer_name(name)
        .attach(path)
        .unwrap_or_else(|e| fail(&e.to_string()));
    println!("attached");
    let _ = std::io::stdout().flush();
    let mut w = FutexWait::default();
    let mut got = 0u64;
    while got < count {
        let seq = cons.cursor();
        match cons.recv_timeout(&mut w, Duration::from_secs(30)) {
            Some(r) => {
                // The record must be the one for the sequence it was delivered under (a
                // lossy ring may skip ahead; the skip is counted as lapped).
                let delivered = cons.cursor() - 1;
                if delivered < seq || !r.is_valid_for(delivered) {
                    fail(&format!("bad record at {delivered}: {r:?}"));
                }
                got += 1;
            }
            None => fail(&format!("no record for 30 s at {seq} (received {got})")),
        }
    }
    println!("ok {got} lapped {}", cons.lapped_count());
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("write") => write(&args[1..]),
        Some("read") => read(&args[1..]),
        _ => fail("usage: shm_helper write|read ..."),
    }
}
