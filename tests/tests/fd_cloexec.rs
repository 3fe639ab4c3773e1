//! No descriptor of a ringwire handle leaks into a program its process execs: every ring,
//! queue, blackboard and checkpoint file, every lock file description, the serve and
//! mirror sockets, is opened close-on-exec. A leaked one would keep a ring's `flock` or a
//! queue's role lock (both belong to the open file description) in the exec'ed program for
//! its whole life, and a socket open there.

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

use ringwire::queue::{MpmcQueue, ReadOnlyQueue, SpscBytesProducer, SpscConsumer, SpscProducer};
use ringwire::{
    BlackboardConsumer, BlackboardProducer, BlobConsumer, BlobProducer, Mirror, MirrorStart,
    MpmcProducer, MpmcQueueConsumer, OffsetCheckpoint, ReadOnlyRing, ReplicaServer, RingConsumer,
    RingProducer,
};
use ringwire_tests::shm::ShmPath;
use ringwire_tests::wait_until;

/// The targets of this process's descriptors (`/proc/self/fd`), one per descriptor.
fn own_fds() -> Vec<String> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|t| t.display().to_string())
        .collect()
}

#[test]
fn an_execed_program_inherits_no_descriptor_of_any_handle() {
    let _one = ringwire_tests::one_at_a_time();
    let p = |tag: &str| ShmPath::new(&format!("cloexec-{tag}"));
    let (ring, blob, board, spsc, bytes, mpmc, lossy, ckpt, mirror_ring) = (
        p("ring"),
        p("blob"),
        p("board"),
        p("spsc"),
        p("bytes"),
        p("mpmc"),
        p("lossy"),
        p("ckpt"),
        p("mirror"),
    );
    let mut tx = RingProducer::<u64>::create(ring.path(), 64).unwrap();
    tx.push(&1);
    let rx = RingConsumer::<u64>::builder()
        .offset_file(ckpt.path())
        .attach(ring.path())
        .unwrap();
    let ro = ReadOnlyRing::open(ring.path()).unwrap();
    let btx = BlobProducer::<()>::create(blob.path(), 16, 4096).unwrap();
    let brx = BlobConsumer::<()>::attach(blob.path()).unwrap();
    let bb = BlackboardProducer::<u64>::create(board.path(), 4).unwrap();
    let bbr = BlackboardConsumer::<u64>::attach(board.path()).unwrap();
    let sp = SpscProducer::<u64>::create(spsc.path(), 64).unwrap();
    let sc = SpscConsumer::<u64>::open(spsc.path()).unwrap();
    let bp = SpscBytesProducer::create(bytes.path(), 64, 32).unwrap();
    let mq = MpmcQueue::<u64>::create(mpmc.path(), 64).unwrap();
    let mq2 = MpmcQueue::<u64>::open(mpmc.path()).unwrap();
    let rq = ReadOnlyQueue::open(spsc.path(), ringwire_core::queue::QueueKind::Spsc).unwrap();
    let lp = MpmcProducer::<u64>::create(lossy.path(), 64).unwrap();
    let lc = MpmcQueueConsumer::<u64>::attach(lossy.path()).unwrap();
    let cp = OffsetCheckpoint::open_or_create(ShmPath::new("cloexec-ckpt2").path(), "x");
    // Serve and mirror over loopback, live records by UDP unicast: the listener, the TCP
    // session's sockets, both ends' UDP sockets, the mirror's ring.
    let server = ReplicaServer::bind(ring.path(), (Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .unicast(0, 1400);
    let addr = server.local_addr().unwrap();
    let stop = server.shutdown_handle();
    let srv = server.spawn().unwrap();
    let mirror = Mirror::builder()
        .start(MirrorStart::Oldest)
        .unicast(true)
        .connect(addr, mirror_ring.path())
        .unwrap();
    wait_until("the mirror's first record", Duration::from_secs(20), || {
        mirror.sequence() >= 1
    });
    tx.push(&2);
    wait_until("a record by UDP", Duration::from_secs(20), || {
        mirror.sequence() >= 2 && mirror.datagrams() > 0
    });
    assert!(mirror.is_unicast());
    let ours = own_fds();
    for (what, needle) in [("ring files", "/dev/shm/"), ("sockets", "socket:[")] {
        assert!(
            ours.iter().any(|t| t.contains(needle)),
            "this process holds no {what}: {ours:?}"
        );
    }
    // What the exec'ed `ls` has open: its standard streams and the directory it lists.
    let out = Command::new("/bin/ls")
        .args(["-l", "/proc/self/fd/"])
        .output()
        .unwrap();
    assert!(out.status.success(), "ls: {out:?}");
    let listing = String::from_utf8_lossy(&out.stdout);
    let leaked: Vec<&str> = listing
        .lines()
        .filter(|l| {
            l.contains("/dev/shm/")
                || l.contains("socket:[")
                || l.contains("anon_inode:")
                || l.contains("ringwire")
        })
        .collect();
    assert!(
        leaked.is_empty(),
        "descriptors leaked into exec: {leaked:?}"
    );
    stop.shutdown();
    drop(mirror);
    let _ = srv.join();
    drop((
        tx, rx, ro, btx, brx, bb, bbr, sp, sc, bp, mq, mq2, rq, lp, lc, cp,
    ));
}

/// Every lock a handle holds belongs to its own open file description (`flock`, OFD
/// record locks), never to the process (POSIX `fcntl` locks, which any close of any
/// descriptor of the file in the process drops): a second handle on the same file, refused
/// or not, then dropped, leaves the first handle's lock held.
#[test]
fn a_second_handle_dropped_in_the_same_process_leaves_the_first_ones_lock() {
    let _one = ringwire_tests::one_at_a_time();
    let ring = ShmPath::new("samelock-ring");
    let board = ShmPath::new("samelock-board");
    let spsc = ShmPath::new("samelock-spsc");
    let _tx = RingProducer::<u64>::create(ring.path(), 16).unwrap();
    let _bb = BlackboardProducer::<u64>::create(board.path(), 4).unwrap();
    let _sp = SpscProducer::<u64>::create(spsc.path(), 16).unwrap();
    let _sc = SpscConsumer::<u64>::open(spsc.path()).unwrap();
    for round in 0..2 {
        // Attached handles (no lock of theirs), and refused second creators and roles.
        drop(RingConsumer::<u64>::attach(ring.path()).unwrap());
        drop(ReadOnlyRing::open(ring.path()).unwrap());
        drop(BlackboardConsumer::<u64>::attach(board.path()).unwrap());
        drop(ReadOnlyQueue::open(spsc.path(), ringwire_core::queue::QueueKind::Spsc).unwrap());
        assert!(
            matches!(
                RingProducer::<u64>::create(ring.path(), 16),
                Err(ringwire::Error::ProducerAlreadyExists { .. })
            ),
            "round {round}: a second ring producer was let in"
        );
        assert!(
            BlackboardProducer::<u64>::create(board.path(), 4).is_err(),
            "round {round}: a second blackboard producer was let in"
        );
        for (role, r) in [
            ("producer", SpscProducer::<u64>::open(spsc.path()).map(drop)),
            ("consumer", SpscConsumer::<u64>::open(spsc.path()).map(drop)),
        ] {
            assert!(
                matches!(r, Err(ringwire::queue::QueueFileError::RoleTaken { .. })),
                "round {round}: a second SPSC {role} was let in: {r:?}"
            );
        }
    }
    assert!(ring.path().exists() && board.path().exists());
}
