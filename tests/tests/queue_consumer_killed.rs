//! Cross-process: an MPMC consumer process killed with SIGKILL between taking a position
//! (its CAS of the dequeue cursor) and freeing the slot wedges a file-backed queue: the
//! producer of the same slot's next lap finds it full while other handles keep the file
//! open (a handle that opens it with none alive heals it: see the test at the end).
//! `next_stuck_slot` then reports the position as `StuckKind::MidPop`,
//! `heal_stuck_slot` frees the slot, a producer process asleep on the full queue is woken
//! by the heal, and the rest of the queue comes out in order.
//!
//! A kill cannot be landed between those two steps of a real pop from outside, so the
//! victim process makes the state itself, through the core queue: it moves the dequeue
//! cursor past position 0 as a pop does, then waits to be killed without freeing the slot.
//!
//! Children are this test binary re-executed with `RINGWIRE_QKILL_ROLE` set, running the
//! ignored `qkill_child` entry point; a guard kills them, and `ShmPath` removes the queue
//! file, even when an assertion fails.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ringwire::FutexWait;
use ringwire::queue::{MpmcQueue, ReadOnlyQueue};
use ringwire_core::queue::{PushError, QueueKind, StuckKind, StuckSlot};
use ringwire_core::sync::Ordering;
use ringwire_tests::shm::ShmPath;
use ringwire_tests::{one_at_a_time, wait_exit, wait_until};

const ROLE: &str = "RINGWIRE_QKILL_ROLE";
const QUEUE: &str = "RINGWIRE_QKILL_QUEUE";
/// The pusher's futex sleep and push timeout: only a wake-up ends its sleep sooner.
const PUSH_SLEEP: Duration = Duration::from_secs(20);

/// Entry point of the child processes; not a test by itself (without the role variable,
/// as under a plain `--ignored` run, it does nothing).
#[test]
#[ignore = "child process entry point of queue_consumer_killed"]
fn qkill_child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let q = MpmcQueue::<u64>::open(std::env::var(QUEUE).unwrap()).unwrap();
    match role.as_str() {
        "victim" => {
            // SAFETY: `q` lives until the process is killed.
            let core = unsafe { q.core() };
            core.view()
                .deq()
                .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed)
                .expect("position 0 is the next to pop");
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        "pusher" => {
            let mut wait = FutexWait::new(0, Some(PUSH_SLEEP));
            assert_eq!(q.push_timeout(&14, &mut wait, PUSH_SLEEP), Ok(4));
        }
        other => panic!("unknown role {other}"),
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

fn spawn(role: &str, queue: &Path) -> Kid {
    Kid(
        Command::new(std::env::current_exe().expect("test binary path"))
            .args(["--exact", "qkill_child", "--ignored", "--test-threads=1"])
            .env(ROLE, role)
            .env(QUEUE, queue)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn child"),
    )
}

/// Runs a victim that takes position 0 of the queue at `path` and never frees its slot,
/// waits until `ro` shows the dequeue cursor past it, then kills it with SIGKILL and reaps
/// it: a consumer known to have died mid-pop.
fn kill_a_victim_mid_pop(path: &Path, ro: &ReadOnlyQueue) {
    let mut victim = spawn("victim", path);
    wait_until(
        "the victim taking position 0",
        Duration::from_secs(20),
        || ro.snapshot().dequeue == 1,
    );
    victim.0.kill().expect("SIGKILL the victim");
    victim.0.wait().expect("reap the victim");
}

#[test]
fn consumer_killed_mid_pop_is_found_and_healed_across_processes() {
    let _one = one_at_a_time();
    let path = ShmPath::new("queue-consumer-killed");
    let q = MpmcQueue::<u64>::create(&path, 4).unwrap();
    for (pos, v) in (10..14).enumerate() {
        assert_eq!(q.try_push(&v), Ok(pos as u64));
    }
    let ro = ReadOnlyQueue::open(&path, QueueKind::Mpmc).unwrap();
    kill_a_victim_mid_pop(path.path(), &ro);
    // The creator's handle stays open, so a second handle heals nothing at open.
    let q2 = MpmcQueue::<u64>::open(&path).unwrap();
    assert_eq!(q2.healed_at_open(), 0);
    drop(q2);
    assert_eq!(q.len(), 3);
    assert_eq!(q.try_push(&99), Err(PushError::Full));
    let mut pusher = spawn("pusher", path.path());
    wait_until("the pusher asleep", Duration::from_secs(20), || {
        ro.snapshot().space_waiters > 0
    });
    let stuck = q.next_stuck_slot(0);
    assert_eq!(
        stuck,
        Some(StuckSlot {
            pos: 0,
            kind: StuckKind::MidPop
        })
    );
    assert_eq!(q.heal_stuck_slot(stuck.unwrap()), Ok(()));
    // Far less than its 20 s sleep: woken by the heal.
    wait_exit(&mut pusher.0, Duration::from_secs(10), "the pusher");
    assert!(pusher.0.wait().unwrap().success(), "the pusher failed");
    // Item 10 was lost with its consumer; the rest come out in order.
    for (pos, v) in (1..5).zip(11..15) {
        assert_eq!(q.try_pop_with_pos(|_| ()), Ok(Some((pos, v))));
    }
    assert_eq!(q.try_pop(), Ok((None, 0)));
    assert_eq!(q.next_stuck_slot(0), None);
}

/// After a restart (every handle closed, the victim killed mid-pop), the first handle to
/// open the file is alone on it and heals the dead consumer's slot: producers are not
/// stopped by a slot nobody will ever free.
#[test]
fn a_restarted_queue_heals_the_slot_of_a_consumer_killed_mid_pop() {
    let _one = one_at_a_time();
    let path = ShmPath::new("queue-consumer-killed-restart");
    let q = MpmcQueue::<u64>::create(&path, 4).unwrap();
    for v in 10..14 {
        q.try_push(&v).unwrap();
    }
    let ro = ReadOnlyQueue::open(&path, QueueKind::Mpmc).unwrap();
    kill_a_victim_mid_pop(path.path(), &ro);
    assert_eq!(ro.snapshot().taken_unfreed, Some(0));
    drop(q);
    // A read-only `stat` mapping is no handle: it neither blocks nor does the heal.
    let q = MpmcQueue::<u64>::open(&path).unwrap();
    assert_eq!(q.healed_at_open(), 1);
    assert_eq!(ro.snapshot().taken_unfreed, None);
    assert_eq!(q.next_stuck_slot(0), None);
    assert_eq!(q.try_push(&14), Ok(4));
    for (pos, v) in (1..5).zip(11..15) {
        assert_eq!(q.try_pop_with_pos(|_| ()), Ok(Some((pos, v))));
    }
}
