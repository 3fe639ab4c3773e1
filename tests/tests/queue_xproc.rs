//! Cross-process proof of the lossless MPMC queue (issue 4): 2 producer processes and 2
//! consumer processes move N items through one file-backed queue, and the parent checks
//! that every item was delivered exactly once, in global FIFO order by ticket.
//!
//! # What "global FIFO by ticket" means here
//!
//! A push returns its *ticket*: the queue position it claimed (`MpmcQueue::try_push`), a
//! single counter over all producers. A pop returns the position it dequeued
//! (`core::queue::Popped::Item { pos }`). The test checks:
//!
//! 1. the tickets popped by all consumers together are exactly `0..N`, each once (no gap,
//!    no repeat), and the item popped at ticket `t` is the item whose push returned `t`;
//! 2. each producer's tickets increase with its own push order (counter `c` got a smaller
//!    ticket than counter `c + 1`): tickets order items as they were enqueued;
//! 3. each consumer popped its tickets in strictly increasing order: items leave in ticket
//!    order, so if A's ticket < B's ticket, A was enqueued first and no consumer takes B
//!    before A's position was taken.
//!
//! Items carry (producer id, per-producer counter, checksum); consumers verify the checksum
//! of each item they pop (a torn or misplaced copy fails it) and exit non-zero otherwise.
//!
//! One consumer pops through the std handle's blocking pop (`pop_timeout_with_pos` with a
//! `FutexWait`: healed positions reported, producers notified, futex sleeps woken by
//! pushes); the other spins on the core's `try_pop`.
//!
//! The kill half: a third producer process pushes some items, claims a position and is
//! killed with SIGKILL before publishing it; the parent finds that position with
//! `next_stuck_slot`, waits until the blocking consumer sleeps on the futex, heals the
//! position with `heal_stuck_slot`, and the consumer processes must drain past it (the
//! sleeper wakes at the heal's wake-up or, at the latest, when its 200 ms sleep ends: the
//! wake-up itself is timed by the std queue's unit tests), passing it as the only healed position, with every other item
//! delivered as above.
//!
//! Children are this test binary re-executed with `RINGWIRE_XPROC_ROLE` set, running the
//! ignored `xproc_child` entry point; guards kill them and remove the files even when an
//! assertion fails.
//!
//! `cargo test -p ringwire-tests --release --test queue_xproc` (1,000,000 items), and
//! `cargo test -p ringwire-tests --release --test queue_xproc -- --ignored --exact
//! two_producers_two_consumers_10m` for the 10,000,000-item run.

use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ringwire::FutexWait;
use ringwire::queue::{MpmcQueue, ReadOnlyQueue};
use ringwire_core::queue::{PopError, Popped, PushError, QueueKind, StuckKind, StuckSlot};
use ringwire_core::sync::Ordering;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

const ROLE: &str = "RINGWIRE_XPROC_ROLE";
const QUEUE: &str = "RINGWIRE_XPROC_QUEUE";
const OUT: &str = "RINGWIRE_XPROC_OUT";
const ID: &str = "RINGWIRE_XPROC_ID";
const COUNT: &str = "RINGWIRE_XPROC_COUNT";
const CAPACITY: u64 = 4096;
const PRODUCERS: u64 = 2;
const CONSUMERS: u64 = 2;
/// Producer id of the victim of the kill test.
const VICTIM: u64 = PRODUCERS;
/// A consumer's record for a healed position, in place of an item.
const HEALED: u64 = u64::MAX - 1;
/// The consumer that pops with the std handle's blocking pop (the other spins).
const BLOCKING_CONSUMER: u64 = 0;
/// That consumer's longest futex sleep, and the timeout of each of its pops.
const BLOCKING_SLEEP: Duration = Duration::from_millis(200);

/// One queued item: 24 bytes.
#[derive(IntoBytes, FromBytes, Immutable, KnownLayout, Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
struct Item {
    producer: u64,
    counter: u64,
    check: u64,
}

/// splitmix64 finaliser: every bit of the input moves the checksum.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn item(producer: u64, counter: u64) -> Item {
    Item {
        producer,
        counter,
        check: mix(producer.rotate_left(48) ^ counter ^ 0x5eed),
    }
}

/// An item packed as one word for the records: producer in the top byte.
fn pack(it: &Item) -> u64 {
    (it.producer << 56) | it.counter
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set by the parent test"))
}

fn write_words(path: &str, words: &[u64]) {
    let mut w = BufWriter::new(std::fs::File::create(path).expect("create record file"));
    for v in words {
        w.write_all(&v.to_le_bytes()).expect("write record");
    }
    w.flush().expect("flush record file");
}

fn read_words(path: &Path) -> Vec<u64> {
    let mut r = BufReader::new(std::fs::File::open(path).expect("open record file"));
    let mut bytes = Vec::new();
    r.read_to_end(&mut bytes).expect("read record file");
    assert_eq!(bytes.len() % 8, 0, "{}: torn record file", path.display());
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// Producer child: pushes `count` items, records the ticket each push returned.
fn run_producer() {
    let q = MpmcQueue::<Item>::open(env(QUEUE)).expect("producer opens the queue");
    let id: u64 = env(ID).parse().expect("id");
    let count: u64 = env(COUNT).parse().expect("count");
    let mut tickets = Vec::with_capacity(count as usize);
    for c in 0..count {
        let it = item(id, c);
        loop {
            match q.try_push(&it) {
                Ok(t) => {
                    tickets.push(t);
                    break;
                }
                // Two cores are shared by four processes: give the CPU away when blocked.
                Err(PushError::Full) => std::thread::yield_now(),
                Err(e) => panic!("producer {id}: push {c}: {e:?}"),
            }
        }
    }
    write_words(&env(OUT), &tickets);
}

/// Victim child: pushes `count` items, claims one more position and never publishes it;
/// records its tickets, the claimed one last, then waits to be killed.
fn run_victim() {
    let q = MpmcQueue::<Item>::open(env(QUEUE)).expect("victim opens the queue");
    let count: u64 = env(COUNT).parse().expect("count");
    let mut tickets = Vec::with_capacity(count as usize + 1);
    for c in 0..count {
        loop {
            match q.try_push(&item(VICTIM, c)) {
                Ok(t) => break tickets.push(t),
                Err(PushError::Full) => std::thread::yield_now(),
                Err(e) => panic!("victim: push {c}: {e:?}"),
            }
        }
    }
    let claimed = loop {
        match q.claim() {
            Ok(pos) => break pos,
            Err(PushError::Full) => std::thread::yield_now(),
            Err(e) => panic!("victim: claim: {e:?}"),
        }
    };
    tickets.push(claimed);
    write_words(&env(OUT), &tickets);
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Consumer child: pops until every one of `total` positions was taken, checking each
/// item's checksum, and records (ticket, packed item) pairs in pop order. Consumer
/// [`BLOCKING_CONSUMER`] pops through the std handle's blocking pop, asleep on the queue's
/// futex whenever nothing is ready; the other spins on the core's `try_pop`.
fn run_consumer() {
    let q = MpmcQueue::<Item>::open(env(QUEUE)).expect("consumer opens the queue");
    let total: u64 = env(COUNT).parse().expect("count");
    let id: u64 = env(ID).parse().expect("id");
    let records = if id == BLOCKING_CONSUMER {
        consume_blocking(&q, total)
    } else {
        consume_spinning(&q, total)
    };
    write_words(&env(OUT), &records);
}

/// Checks an item's checksum and records it under its ticket.
fn record_item(records: &mut Vec<u64>, pos: u64, it: &Item) {
    assert_eq!(
        *it,
        item(it.producer, it.counter),
        "ticket {pos}: bad checksum"
    );
    records.push(pos);
    records.push(pack(it));
}

/// Pops with `MpmcQueue::pop_timeout_with_pos` and a `FutexWait`: the std path of blocking
/// consumers (healed positions passed and reported, the producers woken after each pop,
/// futex sleeps woken by pushes and by the parent's heal).
fn consume_blocking(q: &MpmcQueue<Item>, total: u64) -> Vec<u64> {
    // SAFETY: `q` outlives this use of its core.
    let deq = unsafe { q.core() }.view().deq();
    let mut wait = FutexWait::new(64, Some(BLOCKING_SLEEP));
    let mut records = Vec::new();
    loop {
        let got = q
            .pop_timeout_with_pos(&mut wait, BLOCKING_SLEEP, |pos| {
                records.push(pos);
                records.push(HEALED);
            })
            .expect("consumer: pop");
        match got {
            Some((pos, it)) => record_item(&mut records, pos, &it),
            // Nothing wakes this consumer when the other one takes the last positions: it
            // finds that out when its sleep times out.
            // Relaxed: as in consume_spinning.
            None if deq.load(Ordering::Relaxed) >= total => break,
            None => {}
        }
    }
    records
}

/// Pops by spinning on the core's `try_pop`, giving the CPU away while nothing is ready.
fn consume_spinning(q: &MpmcQueue<Item>, total: u64) -> Vec<u64> {
    // SAFETY: `q` outlives this use of its core.
    let core = unsafe { q.core() };
    let mut records = Vec::new();
    let mut buf = Item {
        producer: 0,
        counter: 0,
        check: 0,
    };
    loop {
        match core.try_pop(buf.as_mut_bytes()) {
            Ok(Popped::Item { pos }) => record_item(&mut records, pos, &buf),
            Ok(Popped::Healed { pos }) => {
                records.push(pos);
                records.push(HEALED);
            }
            Err(PopError::Empty | PopError::Pending { .. }) => {
                // Relaxed: a snapshot; once every position is claimed by a consumer, the
                // ones still being copied belong to the other consumer.
                if core.view().deq().load(Ordering::Relaxed) >= total {
                    break;
                }
                std::thread::yield_now();
            }
            Err(e) => panic!("consumer: {e:?}"),
        }
    }
    records
}

/// Entry point of the child processes; not a test by itself (without the role variable,
/// as under a plain `--ignored` run, it does nothing).
#[test]
#[ignore = "child process entry point of the cross-process queue tests"]
fn xproc_child() {
    match std::env::var(ROLE).as_deref() {
        Ok("producer") => run_producer(),
        Ok("consumer") => run_consumer(),
        Ok("victim") => run_victim(),
        Ok(other) => panic!("unknown role {other}"),
        Err(_) => {}
    }
}

/// Kills and reaps every child still running when dropped (a failed assertion included).
struct Children(Vec<(String, Child)>);

impl Drop for Children {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Removes the files when dropped.
struct Files(Vec<PathBuf>);

impl Drop for Files {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn spawn(role: &str, id: u64, count: u64, queue: &Path, out: &Path) -> Child {
    Command::new(std::env::current_exe().expect("test binary path"))
        .args(["--exact", "xproc_child", "--ignored", "--test-threads=1"])
        .env(ROLE, role)
        .env(ID, id.to_string())
        .env(COUNT, count.to_string())
        .env(QUEUE, queue)
        .env(OUT, out)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child")
}

/// Runs the 2P/2C transfer of `n` items (an even number) and checks the three properties
/// of the module docs. With `victim: Some(k)`, a third producer pushes `k` items, claims a
/// position and is killed with SIGKILL there; the parent finds the stuck position with
/// `next_stuck_slot`, heals it, and the consumers must drain past it.
fn two_producers_two_consumers(n: u64, limit: Duration, victim: Option<u64>) {
    assert_eq!(n % PRODUCERS, 0);
    // Positions the consumers pass: the items, the victim's items and its healed claim.
    let total = n + victim.map_or(0, |k| k + 1);
    let tag = format!("{}-{n}", std::process::id());
    let shm = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let queue = shm.join(format!("rw-xproc-{tag}.q"));
    let out = |role: &str, i: u64| std::env::temp_dir().join(format!("rw-xproc-{tag}-{role}{i}"));
    let prod_out: Vec<_> = (0..PRODUCERS).map(|i| out("p", i)).collect();
    let cons_out: Vec<_> = (0..CONSUMERS).map(|i| out("c", i)).collect();
    let victim_out = out("v", 0);
    let mut files = vec![queue.clone(), victim_out.clone()];
    files.extend(prod_out.iter().cloned());
    files.extend(cons_out.iter().cloned());
    let _files = Files(files);

    let q = MpmcQueue::<Item>::create(&queue, CAPACITY).expect("create queue");
    let t0 = Instant::now();
    let mut children = Children(Vec::new());
    for (i, p) in cons_out.iter().enumerate() {
        let c = spawn("consumer", i as u64, total, &queue, p);
        children.0.push((format!("consumer {i}"), c));
    }
    for (i, p) in prod_out.iter().enumerate() {
        let c = spawn("producer", i as u64, n / PRODUCERS, &queue, p);
        children.0.push((format!("producer {i}"), c));
    }
    let mut claimed = None;
    if let Some(k) = victim {
        let mut c = spawn("victim", VICTIM, k, &queue, &victim_out);
        // Its record file, complete, says it has claimed; then kill -9 and reap it.
        let want = (k + 1) * 8;
        while std::fs::metadata(&victim_out).map_or(0, |m| m.len()) < want {
            assert!(t0.elapsed() < limit, "the victim never claimed");
            std::thread::sleep(Duration::from_millis(1));
        }
        c.kill().expect("SIGKILL the victim");
        c.wait().expect("reap the victim");
        let pos = *read_words(&victim_out).last().expect("claimed ticket");
        // Live producers' positions are stuck only for the length of a copy: scan until
        // the dead one's is the first stuck position, then heal it.
        while q.next_stuck_slot(0).map(|s| s.pos) != Some(pos) {
            assert!(t0.elapsed() < limit, "position {pos} never found stuck");
            std::thread::yield_now();
        }
        // The blocking consumer, stuck at that position too, goes to sleep there (once the
        // producers stop pushing, nothing but the heal or its sleep's end wakes it): heal
        // the position while it sleeps. The drain below checks what comes after; how soon
        // the heal wakes a sleeper is timed in the std queue's unit tests.
        let ro = ReadOnlyQueue::open(&queue, QueueKind::Mpmc).expect("read-only view");
        while ro.snapshot().data_waiters == 0 {
            assert!(t0.elapsed() < limit, "the blocking consumer never slept");
            std::thread::yield_now();
        }
        assert_eq!(
            q.heal_stuck_slot(StuckSlot {
                pos,
                kind: StuckKind::Claimed
            }),
            Ok(())
        );
        claimed = Some(pos);
    }
    // Wait for all, failing (and killing the rest) on a child's failure or the time limit.
    let mut left = children.0.len();
    while left > 0 {
        left = 0;
        for (name, c) in &mut children.0 {
            match c.try_wait().expect("wait for child") {
                Some(st) => assert!(st.success(), "{name} failed: {st}"),
                None => left += 1,
            }
        }
        assert!(
            t0.elapsed() < limit,
            "{left} children still running after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let elapsed = t0.elapsed();
    assert!(q.is_empty(), "{} items left in the queue", q.len());

    // 1. Tickets popped form 0..n exactly once; remember which item each carried.
    const NONE: u64 = u64::MAX;
    let mut by_ticket = vec![NONE; total as usize];
    for (i, p) in cons_out.iter().enumerate() {
        let recs = read_words(p);
        let mut last = None;
        for pair in recs.chunks_exact(2) {
            let (t, packed) = (pair[0], pair[1]);
            assert!(t < total, "consumer {i} popped ticket {t} >= {total}");
            // 3. Each consumer's tickets strictly increase.
            assert!(last < Some(t), "consumer {i}: ticket {t} after {last:?}");
            last = Some(t);
            let slot = &mut by_ticket[t as usize];
            assert_eq!(*slot, NONE, "ticket {t} popped twice");
            *slot = packed;
        }
    }
    if let Some(gap) = by_ticket.iter().position(|&v| v == NONE) {
        panic!("ticket {gap} was never popped");
    }
    // 2. In ticket order, each producer's counters run 0, 1, 2, ... (its push order), so
    // every item is there exactly once (n tickets, n / 2 distinct counters per producer).
    // Exactly the dead producer's claim was passed as healed.
    let healed: Vec<u64> = (0..total)
        .filter(|&t| by_ticket[t as usize] == HEALED)
        .collect();
    assert_eq!(healed, Vec::from_iter(claimed), "healed positions");
    let mut next = [0u64; PRODUCERS as usize + 1];
    for (t, &packed) in by_ticket.iter().enumerate() {
        if packed == HEALED {
            continue;
        }
        let (p, c) = (packed >> 56, packed & ((1 << 56) - 1));
        assert!(p <= VICTIM, "ticket {t}: producer {p}");
        assert_eq!(
            c, next[p as usize],
            "ticket {t}: producer {p} out of push order"
        );
        next[p as usize] += 1;
    }
    assert_eq!(
        next,
        [n / PRODUCERS, n / PRODUCERS, victim.unwrap_or(0)],
        "items per producer"
    );
    // 1 (cont.). The item popped at ticket t is the one whose push returned t.
    let mut all = prod_out.clone();
    if victim.is_some() {
        all.push(victim_out.clone());
    }
    for (p, path) in all.iter().enumerate() {
        let mut tickets = read_words(path);
        if p as u64 == VICTIM {
            tickets.pop(); // its claim, checked above
        }
        assert_eq!(tickets.len() as u64, next[p]);
        for (c, &t) in tickets.iter().enumerate() {
            assert_eq!(
                by_ticket[t as usize],
                ((p as u64) << 56) | c as u64,
                "producer {p} item {c} got ticket {t}"
            );
        }
    }
    eprintln!(
        "2P/2C cross-process: {n} items in {elapsed:?} ({:.1} ns/item)",
        elapsed.as_nanos() as f64 / n as f64
    );
}

#[test]
fn two_producers_two_consumers_1m() {
    two_producers_two_consumers(1_000_000, Duration::from_secs(120), None);
}

#[test]
fn producer_killed_after_claiming_is_healed_and_consumers_drain_past_it() {
    two_producers_two_consumers(200_000, Duration::from_secs(120), Some(5_000));
}

#[test]
#[ignore = "slow: 10,000,000 items through 4 processes; run it explicitly"]
fn two_producers_two_consumers_10m() {
    two_producers_two_consumers(10_000_000, Duration::from_secs(900), None);
}
