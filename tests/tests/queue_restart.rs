//! Queue files across process restarts (issue 4):
//!
//! - durability (acceptance 3): a producer process pushes N items and exits (or is killed
//!   with SIGKILL), a consumer process pops some and exits (or is killed while its handle
//!   is open), and a new process opens the file and drains the remaining items, in order;
//!   SPSC and MPMC files. A killed SPSC consumer that had not yet handed its last popped
//!   slots back (it does so every `release_every` single pops) leaves those items to be
//!   drained again: exactly the ones after its last hand-back, never fewer; with
//!   `set_release_every(1)` exactly the remaining items;
//! - a sleeper that dies asleep (SIGKILL, or a process whose `main` returns while a thread
//!   waits) leaves its count in the file's `data_waiters` / `space_waiters`, which would make
//!   every later push or pop wake nobody with a system call: the next holder of an SPSC role
//!   clears its side's count, and an MPMC (or any) queue file opened by a handle alone on it
//!   is cleared too. "No wake" is checked on the futex word, which a push or pop bumps
//!   exactly when it sees a waiter count and issues `FUTEX_WAKE`.
//!
//! Children are this test binary re-executed with `RINGWIRE_RESTART_ROLE` set, running the
//! ignored `restart_child` entry point; guards kill them and remove the files even when an
//! assertion fails.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ringwire::FutexWait;
use ringwire::queue::{MpmcQueue, ReadOnlyQueue, SpscConsumer, SpscProducer};
use ringwire_core::queue::QueueKind;
use ringwire_core::sync::Ordering;
use ringwire_tests::shm::ShmPath;
use ringwire_tests::{one_at_a_time, wait_exit, wait_until};

const ROLE: &str = "RINGWIRE_RESTART_ROLE";
const KIND: &str = "RINGWIRE_RESTART_KIND";
const QUEUE: &str = "RINGWIRE_RESTART_QUEUE";
const COUNT: &str = "RINGWIRE_RESTART_COUNT";
const OUT: &str = "RINGWIRE_RESTART_OUT";
/// Set: the child waits to be killed once its work is recorded, instead of exiting.
const HANG: &str = "RINGWIRE_RESTART_HANG";
/// Set: the SPSC consumer's `set_release_every` (unset: the default).
const RELEASE_EVERY: &str = "RINGWIRE_RESTART_RELEASE_EVERY";
/// Capacity of the durability tests' queues: every item fits, no side ever waits.
const CAPACITY: u64 = 64;
/// Bound on every wait of the parent for a child.
const LIMIT: Duration = Duration::from_secs(30);

/// The `i`-th item: distinct for distinct `i` (an odd multiplier is a bijection), and
/// unlike its index, so an item read from the wrong slot shows.
fn value(i: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set by the parent test"))
}

fn kind() -> QueueKind {
    match env(KIND).as_str() {
        "spsc" => QueueKind::Spsc,
        "mpmc" => QueueKind::Mpmc,
        other => panic!("unknown kind {other}"),
    }
}

/// Writes `words` to the OUT file whole (through a rename), so a parent that sees the
/// file sees all of it; then, with HANG set, waits to be killed.
fn record_and_finish(words: &[u64]) {
    let out = env(OUT);
    let tmp = format!("{out}.tmp");
    let mut f = std::fs::File::create(&tmp).expect("create record file");
    for w in words {
        f.write_all(&w.to_le_bytes()).expect("write record");
    }
    drop(f);
    std::fs::rename(&tmp, &out).expect("publish record file");
    if std::env::var_os(HANG).is_some() {
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

fn read_words(path: &Path) -> Vec<u64> {
    let bytes = std::fs::read(path).expect("read record file");
    assert_eq!(bytes.len() % 8, 0, "{}: torn record file", path.display());
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// Creates the queue and pushes COUNT items.
fn run_produce() {
    let (path, n): (String, u64) = (env(QUEUE), env(COUNT).parse().expect("count"));
    match kind() {
        QueueKind::Spsc => {
            let mut p = SpscProducer::<u64>::create(&path, CAPACITY).expect("create");
            for i in 0..n {
                p.try_push(&value(i)).expect("push");
            }
            p.flush().expect("flush");
            record_and_finish(&[]);
        }
        QueueKind::Mpmc => {
            let q = MpmcQueue::<u64>::create(&path, CAPACITY).expect("create");
            for i in 0..n {
                q.try_push(&value(i)).expect("push");
            }
            q.flush().expect("flush");
            record_and_finish(&[]);
        }
    }
}

/// Pops COUNT items (already queued) and records them. The handle stays open until the
/// process exits or, with HANG, is killed.
fn run_consume() {
    let (path, n): (String, u64) = (env(QUEUE), env(COUNT).parse().expect("count"));
    let within = Duration::from_secs(10);
    match kind() {
        QueueKind::Spsc => {
            let mut c = SpscConsumer::<u64>::open(&path).expect("open");
            if let Ok(k) = std::env::var(RELEASE_EVERY) {
                c.set_release_every(k.parse().expect("release_every"));
            }
            let popped: Vec<u64> = (0..n)
                .map(|_| c.pop_blocking(within).expect("pop").expect("an item"))
                .collect();
            record_and_finish(&popped);
            drop(c);
        }
        QueueKind::Mpmc => {
            let q = MpmcQueue::<u64>::open(&path).expect("open");
            let popped: Vec<u64> = (0..n)
                .map(|_| match q.pop_blocking(within).expect("pop") {
                    (Some(v), 0) => v,
                    other => panic!("pop: {other:?}"),
                })
                .collect();
            record_and_finish(&popped);
            drop(q);
        }
    }
}

/// Pops everything queued and records it.
fn run_drain() {
    let path = env(QUEUE);
    let mut drained = Vec::new();
    match kind() {
        QueueKind::Spsc => {
            let mut c = SpscConsumer::<u64>::open(&path).expect("open");
            while let Some(v) = c.try_pop().expect("pop") {
                drained.push(v);
            }
        }
        QueueKind::Mpmc => {
            let q = MpmcQueue::<u64>::open(&path).expect("open");
            loop {
                match q.try_pop().expect("pop") {
                    (Some(v), 0) => drained.push(v),
                    (None, 0) => break,
                    other => panic!("pop: {other:?}"),
                }
            }
        }
    }
    record_and_finish(&drained);
}

/// One futex sleep as long as the test may last: the waiter count stays at 1 from the
/// sleeper's announcement to its death (a `pop_blocking` re-announces itself every 10 ms,
/// and a kill between two sleeps would leave no count to test).
fn long_sleep() -> FutexWait {
    FutexWait::new(0, Some(Duration::from_secs(120)))
}

/// Opens the consumer of an empty queue and sleeps in a pop until killed.
fn run_sleep_pop() {
    let path = env(QUEUE);
    let t = Duration::from_secs(120);
    match kind() {
        QueueKind::Spsc => {
            let mut c = SpscConsumer::<u64>::open(&path).expect("open");
            let r = c.pop_timeout(&mut long_sleep(), t);
            panic!("the sleeping pop returned: {r:?}");
        }
        QueueKind::Mpmc => {
            let q = MpmcQueue::<u64>::open(&path).expect("open");
            let r = q.pop_timeout(&mut long_sleep(), t);
            panic!("the sleeping pop returned: {r:?}");
        }
    }
}

/// Opens the producer of a full SPSC queue and sleeps in a push until killed.
fn run_sleep_push() {
    let mut p = SpscProducer::<u64>::open(env(QUEUE)).expect("open");
    let r = p.push_timeout(&0, &mut long_sleep(), Duration::from_secs(120));
    panic!("the sleeping push returned: {r:?}");
}

/// Opens an empty MPMC queue, leaves a thread asleep in a pop, and returns from `main`
/// (the process exits with the thread still asleep).
fn run_exit_asleep() {
    let q = MpmcQueue::<u64>::open(env(QUEUE)).expect("open");
    let sleeper = q.clone();
    std::thread::spawn(move || {
        let r = sleeper.pop_timeout(&mut long_sleep(), Duration::from_secs(120));
        panic!("the sleeping pop returned: {r:?}");
    });
    // SAFETY: `q` outlives this use of its core.
    let waiters = unsafe { q.core() }.view().data_waiters();
    wait_until("the thread to announce its sleep", LIMIT, || {
        waiters.load(Ordering::Relaxed) == 1
    });
}

/// Entry point of the child processes; not a test by itself (without the role variable,
/// as under a plain `--ignored` run, it does nothing).
#[test]
#[ignore = "child process entry point of the queue restart tests"]
fn restart_child() {
    match std::env::var(ROLE).as_deref() {
        Ok("produce") => run_produce(),
        Ok("consume") => run_consume(),
        Ok("drain") => run_drain(),
        Ok("sleep-pop") => run_sleep_pop(),
        Ok("sleep-push") => run_sleep_push(),
        Ok("exit-asleep") => run_exit_asleep(),
        Ok(other) => panic!("unknown role {other}"),
        Err(_) => {}
    }
}

/// Kills and reaps the child when dropped (a failed assertion included).
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Kid {
    /// Waits for a clean exit.
    fn exits(mut self, what: &str) {
        wait_exit(&mut self.0, LIMIT, what);
        let st = self.0.wait().expect("reap");
        assert!(st.success(), "{what} failed: {st}");
    }

    /// SIGKILL, and reap: the process is gone, its locks released.
    fn kill(mut self) {
        self.0.kill().expect("SIGKILL");
        self.0.wait().expect("reap");
    }
}

fn kind_name(kind: QueueKind) -> &'static str {
    match kind {
        QueueKind::Spsc => "spsc",
        QueueKind::Mpmc => "mpmc",
    }
}

fn spawn(role: &str, kind: QueueKind, queue: &Path, count: u64, out: &Path, hang: bool) -> Kid {
    spawn_with(role, kind, queue, count, out, hang, &[])
}

/// [`spawn`] with more environment variables for the child.
fn spawn_with(
    role: &str,
    kind: QueueKind,
    queue: &Path,
    count: u64,
    out: &Path,
    hang: bool,
    extra: &[(&str, String)],
) -> Kid {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary path"));
    cmd.args(["--exact", "restart_child", "--ignored", "--test-threads=1"])
        .env(ROLE, role)
        .env(KIND, kind_name(kind))
        .env(QUEUE, queue)
        .env(COUNT, count.to_string())
        .env(OUT, out)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    if hang {
        cmd.env(HANG, "1");
    }
    cmd.envs(extra.iter().map(|(k, v)| (*k, v)));
    Kid(cmd.spawn().expect("spawn child"))
}

/// Runs a child that records words to `out` and either exits or, with `kill`, is killed
/// with SIGKILL once its record is complete; returns the record. `release_every`: the SPSC
/// consumer's, if set.
fn run_to_end(
    role: &str,
    kind: QueueKind,
    queue: &Path,
    count: u64,
    out: &ShmPath,
    kill: bool,
    release_every: Option<u64>,
) -> Vec<u64> {
    let extra: Vec<(&str, String)> = release_every
        .map(|k| (RELEASE_EVERY, k.to_string()))
        .into_iter()
        .collect();
    let kid = spawn_with(role, kind, queue, count, out.path(), kill, &extra);
    if kill {
        wait_until(&format!("the {role} child's record"), LIMIT, || {
            out.path().exists()
        });
        kid.kill();
    } else {
        kid.exits(role);
    }
    read_words(out.path())
}

/// Acceptance 3 across processes: N items pushed by one process, K popped by another, the
/// rest drained by a third, each opening the file afresh.
fn survives_restart(kind: QueueKind, kill: bool) {
    survives_restart_with(kind, kill, None)
}

/// [`survives_restart`] with the SPSC consumer's `release_every` set (`None`: the default,
/// 4 for these 64-slot queues).
fn survives_restart_with(kind: QueueKind, kill: bool, release_every: Option<u64>) {
    const N: u64 = 40;
    const K: u64 = 15;
    let name = format!(
        "qrestart-{}-{kill}-r{}",
        kind_name(kind),
        release_every.unwrap_or(0)
    );
    let queue = ShmPath::new(&name);
    let outs = ["p", "c", "d"].map(|s| (queue.sibling(s), queue.sibling(&format!("{s}.tmp"))));
    let [(p_out, _p_tmp), (c_out, _c_tmp), (d_out, _d_tmp)] = &outs;
    assert_eq!(
        run_to_end("produce", kind, queue.path(), N, p_out, kill, None),
        Vec::<u64>::new()
    );
    let popped = run_to_end("consume", kind, queue.path(), K, c_out, kill, release_every);
    assert_eq!(popped, (0..K).map(value).collect::<Vec<_>>());
    let drained = run_to_end("drain", kind, queue.path(), 0, d_out, false, None);
    // A killed SPSC consumer handed its slots back after its 4th, 8th and 12th pops (all N
    // items were queued, so it never caught up): items 12, 13 and 14 come again. Every
    // other way out hands back all K.
    let from = match (kind, kill, release_every.unwrap_or(4)) {
        (QueueKind::Spsc, true, every) => K - K % every,
        _ => K,
    };
    assert_eq!(drained, (from..N).map(value).collect::<Vec<_>>());
}

#[test]
fn spsc_items_survive_both_processes_exiting() {
    let _one = one_at_a_time();
    survives_restart(QueueKind::Spsc, false);
}

#[test]
fn spsc_items_survive_both_processes_killed() {
    let _one = one_at_a_time();
    survives_restart(QueueKind::Spsc, true);
}

#[test]
fn spsc_items_survive_both_processes_killed_exactly_once_with_release_every_1() {
    let _one = one_at_a_time();
    survives_restart_with(QueueKind::Spsc, true, Some(1));
}

#[test]
fn mpmc_items_survive_both_processes_exiting() {
    let _one = one_at_a_time();
    survives_restart(QueueKind::Mpmc, false);
}

#[test]
fn mpmc_items_survive_both_processes_killed() {
    let _one = one_at_a_time();
    survives_restart(QueueKind::Mpmc, true);
}

#[test]
fn an_spsc_consumer_killed_asleep_leaves_no_waiter_for_the_next_consumer() {
    let _one = one_at_a_time();
    let queue = ShmPath::new("qrestart-spsc-pop-sleeper");
    // The creator stays alive as the producer: the file is never opened by a handle alone
    // on it, so only the consumer role lock can prove the count stale.
    let mut p = SpscProducer::<u64>::create(queue.path(), 8).expect("create");
    let ro = ReadOnlyQueue::open(queue.path(), QueueKind::Spsc).expect("read-only view");
    let kid = spawn(
        "sleep-pop",
        QueueKind::Spsc,
        queue.path(),
        0,
        queue.path(),
        false,
    );
    wait_until("the consumer to sleep", LIMIT, || {
        ro.snapshot().data_waiters == 1
    });
    kid.kill();
    assert_eq!(ro.snapshot().data_waiters, 1, "the dead sleeper's count");
    let mut c = SpscConsumer::<u64>::open(queue.path()).expect("reopen the consumer");
    assert_eq!(ro.snapshot().data_waiters, 0);
    let word = ro.snapshot().data_futex;
    p.try_push(&1).expect("push");
    assert_eq!(ro.snapshot().data_futex, word, "the push woke a sleeper");
    assert_eq!(c.try_pop(), Ok(Some(1)));
}

#[test]
fn an_spsc_producer_killed_asleep_leaves_no_waiter_for_the_next_producer() {
    let _one = one_at_a_time();
    let queue = ShmPath::new("qrestart-spsc-push-sleeper");
    {
        let mut p = SpscProducer::<u64>::create(queue.path(), 2).expect("create");
        p.try_push(&1).expect("push");
        p.try_push(&2).expect("push");
    }
    // Full; the consumer stays alive, so only the producer role lock can prove the count
    // stale.
    let mut c = SpscConsumer::<u64>::open(queue.path()).expect("consumer");
    let ro = ReadOnlyQueue::open(queue.path(), QueueKind::Spsc).expect("read-only view");
    let kid = spawn(
        "sleep-push",
        QueueKind::Spsc,
        queue.path(),
        0,
        queue.path(),
        false,
    );
    wait_until("the producer to sleep", LIMIT, || {
        ro.snapshot().space_waiters == 1
    });
    kid.kill();
    assert_eq!(ro.snapshot().space_waiters, 1, "the dead sleeper's count");
    let mut p = SpscProducer::<u64>::open(queue.path()).expect("reopen the producer");
    assert_eq!(ro.snapshot().space_waiters, 0);
    let word = ro.snapshot().space_futex;
    assert_eq!(c.try_pop(), Ok(Some(1)));
    assert_eq!(ro.snapshot().space_futex, word, "the pop woke a sleeper");
    p.try_push(&3).expect("push");
}

#[test]
fn an_mpmc_consumer_killed_asleep_leaves_no_waiter_once_the_file_is_reopened_alone() {
    let _one = one_at_a_time();
    let queue = ShmPath::new("qrestart-mpmc-pop-sleeper");
    // No creator left alive.
    drop(MpmcQueue::<u64>::create(queue.path(), 8).expect("create"));
    let ro = ReadOnlyQueue::open(queue.path(), QueueKind::Mpmc).expect("read-only view");
    let kid = spawn(
        "sleep-pop",
        QueueKind::Mpmc,
        queue.path(),
        0,
        queue.path(),
        false,
    );
    wait_until("the consumer to sleep", LIMIT, || {
        ro.snapshot().data_waiters == 1
    });
    let live = MpmcQueue::<u64>::open(queue.path()).expect("open");
    kid.kill();
    // While another handle lives, a dead sleeper cannot be told from a live one: the count
    // stays, and each push bumps the word for nobody (the documented cost).
    let again = MpmcQueue::<u64>::open(queue.path()).expect("open");
    assert_eq!(ro.snapshot().data_waiters, 1, "the dead sleeper's count");
    let word = ro.snapshot().data_futex;
    live.try_push(&1).expect("push");
    assert_eq!(ro.snapshot().data_futex, word.wrapping_add(1));
    drop((live, again));
    // Alone on the file: the count is cleared, and pushes wake nobody.
    let q = MpmcQueue::<u64>::open(queue.path()).expect("reopen");
    assert_eq!(ro.snapshot().data_waiters, 0);
    assert_eq!(ro.snapshot().space_waiters, 0);
    let word = ro.snapshot().data_futex;
    q.try_push(&2).expect("push");
    assert_eq!(ro.snapshot().data_futex, word, "the push woke a sleeper");
    assert_eq!(q.try_pop(), Ok((Some(1), 0)));
    assert_eq!(q.try_pop(), Ok((Some(2), 0)));
}

#[test]
fn a_process_exiting_with_a_thread_asleep_in_an_mpmc_pop_leaves_no_waiter() {
    let _one = one_at_a_time();
    let queue = ShmPath::new("qrestart-mpmc-exit-sleeper");
    drop(MpmcQueue::<u64>::create(queue.path(), 8).expect("create"));
    spawn(
        "exit-asleep",
        QueueKind::Mpmc,
        queue.path(),
        0,
        queue.path(),
        false,
    )
    .exits("the exiting consumer");
    let ro = ReadOnlyQueue::open(queue.path(), QueueKind::Mpmc).expect("read-only view");
    assert_eq!(ro.snapshot().data_waiters, 1, "the dead sleeper's count");
    let q = MpmcQueue::<u64>::open(queue.path()).expect("reopen");
    assert_eq!(ro.snapshot().data_waiters, 0);
    let word = ro.snapshot().data_futex;
    q.try_push(&1).expect("push");
    assert_eq!(ro.snapshot().data_futex, word, "the push woke a sleeper");
    assert_eq!(q.try_pop(), Ok((Some(1), 0)));
}
