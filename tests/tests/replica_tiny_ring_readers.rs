//! Readers of a mirror ring whose source ring is tiny (4 slots) and whose producer is fast.
//! A DATA frame then may carry more records than the ring holds (the source's collect keeps
//! pace with its producer), and the mirror writes them all (`Producer::write_raw`) before the
//! one `commit` of the frame: slots of records already published are overwritten by records
//! not published yet. Two readers of the mirror ring, a typed `RingConsumer` and a raw
//! reader that collects frames as a hub's serve does, must deliver every record under its
//! own sequence and unchanged, in increasing order, count every sequence they pass without
//! delivering it (lapped, or a hole of the sparse ring) exactly once, and reach the end of
//! the ring once the writer stops.
//!
//! Through a real serve and mirror (TCP, UDP unicast, multicast on loopback) the frames
//! longer than the ring are a matter of timing, and in a debug build mostly the source is
//! lapped and sends GAPs; so the same readers also run against a fake TCP source whose
//! frames carry up to three rings of records, and against the mirror's writes made
//! directly, frames of up to three rings with holes inside and between them.
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ringwire::core::broadcast::{Producer, Wake};
use ringwire::core::oldest_retained;
use ringwire::core::replicate::{RecordSource, RingSource, collect::Stop, collect::collect};
use ringwire::core::wire::HEADER_LEN;
use ringwire::core::{Expect, Flags, Geometry, RingView};
use ringwire::replica::mirror;
use ringwire::replica::serve::Server;
use ringwire::{CreateOptions, ReadOnlyRing, RingConsumer, RingFile};
use ringwire_tests::replica::{Mode, SetOnDrop, mirror_options, payload, serve_options};
use ringwire_tests::shm::ShmPath;
use ringwire_tests::wait_until;

/// Payload bytes per record.
const LEN: usize = 24;
/// Slots of the source ring, and so of the mirror ring.
const CAP: u64 = 4;
/// How long the producer publishes.
const PUBLISH: Duration = Duration::from_millis(600);

struct FutexWake;
impl Wake for FutexWake {
    fn wake(&self, view: &RingView) {
        ringwire::wait::wake_all(view);
    }
}

/// A multicast group and port private to this process and test.
fn mcast(idx: u16) -> SocketAddrV4 {
    let pid = std::process::id();
    SocketAddrV4::new(
        Ipv4Addr::new(239, 255, 102, idx as u8),
        44_000 + (pid % 4_000) as u16 * 4 + idx,
    )
}

/// Busy-waits `d`: a sleep or a yield on a loaded machine can take milliseconds.
fn spin_for(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// An empty poll of a reader: it spins, and yields every 64th time so that the writers of
/// a loaded machine still run.
fn idle(polls: &mut u32) {
    *polls = polls.wrapping_add(1);
    if polls.is_multiple_of(64) {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// What one reader saw.
#[derive(Debug, Default)]
struct Seen {
    delivered: u64,
    lost: u64,
    /// Records the raw reader's collect delivered past the first `CAP` of one frame.
    past_a_ring: u64,
    /// The raw reader's collects that stopped at a record lost alone (`Stop::Lost`: its slot
    /// holds a sequence more than a lap past `write_seq`, a frame longer than the ring).
    lost_alone: u64,
    end: u64,
}

impl Seen {
    /// Both readers of a run of frames longer than the ring reached `last`, delivered or
    /// counted lost every sequence to it, and delivered no more than the `written` records
    /// (a hole is never delivered).
    fn check_ends(typed: &Seen, raw: &Seen, last: u64, written: u64) {
        for (who, s) in [("typed", typed), ("raw", raw)] {
            assert_eq!(s.end, last, "{who} reached the last record");
            assert_eq!(
                s.delivered + s.lost,
                last,
                "{who}: every sequence delivered or lost"
            );
            assert!(s.delivered <= written, "{who}: a hole delivered");
        }
    }
}

/// The typed reader: every record equals the payload of its sequence, sequences increase,
/// and `lapped_count` accounts for every sequence it passed without delivering it. Reads
/// until `done` is set and it has reached the `write_seq` of its ring.
fn typed_reader(path: &std::path::Path, done: &AtomicBool) -> Seen {
    let mut r = RingConsumer::<[u8; LEN]>::builder()
        .start_from_sequence(1)
        .attach(path)
        .expect("typed reader on the mirror ring");
    let ring = ReadOnlyRing::open(path).expect("the mirror ring");
    let mut s = Seen::default();
    let mut last = 0u64;
    let mut polls = 0u32;
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        match r.try_recv_seq() {
            Some((seq, rec)) => {
                assert!(seq > last, "typed: {seq} after {last}");
                assert_eq!(rec, payload::<LEN>(seq), "typed: record {seq}");
                last = seq;
                s.delivered += 1;
                assert_eq!(
                    s.delivered + r.lapped_count(),
                    seq,
                    "typed: every sequence up to {seq} delivered or counted lapped"
                );
            }
            None => {
                // `done` first: the write_seq loaded after it is final for this ring.
                if done.load(Ordering::Acquire) && r.cursor() > ring.write_seq() {
                    break;
                }
                assert!(Instant::now() < give_up, "typed: stalled at {}", r.cursor());
                idle(&mut polls);
            }
        }
    }
    assert_eq!(
        s.delivered + r.lapped_count(),
        r.cursor() - 1,
        "typed: final count"
    );
    s.lost = r.lapped_count();
    s.end = r.cursor() - 1;
    s
}

/// The raw reader: frames collected from the mirror ring as a hub's serve collects them
/// (a record the ring lost is skipped as a GAP would skip it), each record checked.
fn raw_reader(path: &std::path::Path, done: &AtomicBool) -> Seen {
    let ring = RingFile::open(path, Expect::RAW).expect("raw reader on the mirror ring");
    // SAFETY: `ring` outlives `src`, used only in this function.
    let src = RingSource(*unsafe { ring.view() });
    let mut buf = vec![0u8; HEADER_LEN + 64 * LEN];
    let mut s = Seen::default();
    let mut cursor = 1u64;
    let mut polls = 0u32;
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        // Loaded before the collect: the write_seq its reads see is at least this one.
        let w0 = src.write_seq();
        let c = collect(&src, cursor, 64, buf.len(), &mut buf);
        for i in 0..u64::from(c.count) {
            let at = HEADER_LEN + i as usize * LEN;
            let seq = cursor + i;
            assert_eq!(
                buf[at..at + LEN],
                payload::<LEN>(seq),
                "raw: record {seq} of a frame from {cursor}"
            );
            if i >= CAP {
                s.past_a_ring += 1;
            }
        }
        s.delivered += u64::from(c.count);
        cursor += u64::from(c.count);
        let skip_to = match c.stop {
            Stop::Lapped { seen } => oldest_retained(src.write_seq().max(seen), CAP),
            Stop::Lost => {
                // Only a record of the ring's last lap is lost alone: one behind it is
                // skipped to the oldest record with one GAP.
                let oldest = oldest_retained(w0, CAP);
                assert!(
                    cursor >= oldest,
                    "raw: {cursor} lost alone, behind {oldest}"
                );
                s.lost_alone += 1;
                cursor + 1
            }
            Stop::Hole { next } => next,
            Stop::Pending | Stop::Full => cursor,
        };
        if skip_to > cursor {
            s.lost += skip_to - cursor;
            cursor = skip_to;
        }
        if c.count == 0 && skip_to == cursor {
            if done.load(Ordering::Acquire) && cursor > src.write_seq() {
                break;
            }
            assert!(
                Instant::now() < give_up,
                "raw: stalled at {cursor} ({:?})",
                c.stop
            );
            idle(&mut polls);
        }
    }
    s.end = cursor - 1;
    s
}

/// One run: the source ring, serve, a mirror in `mode` and the two readers, about 0.6 s of
/// publishing; returns what the readers saw and the number of records published.
fn run(mode: Mode, idx: u16) -> (Seen, Seen, u64) {
    let src = ShmPath::new(&format!("tiny-src-{idx}"));
    let dst = ShmPath::new(&format!("tiny-dst-{idx}"));
    let geo = Geometry::spmc(CAP, LEN + 8, 8, 0, false).unwrap();
    let ring = RingFile::create(src.path(), &geo, &CreateOptions::default()).unwrap();
    // SAFETY: `ring` outlives the producer built on its view (used only in this function).
    let mut producer = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    let server = Server::bind(serve_options(src.path(), mode, mcast(idx), 1)).unwrap();
    let mo = mirror_options(server.local_addr(), dst.path(), mode);
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let published = AtomicU64::new(0);
    std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let _done = SetOnDrop(&done);
        let s = sc.spawn(|| server.run(&stop));
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        // A first record, so that the mirror has a ring to create.
        producer.push(&payload::<LEN>(1)).unwrap();
        wait_until("the mirror ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(dst.path()).is_ok_and(|r| r.write_seq() >= 1)
        });
        let typed = sc.spawn(|| typed_reader(dst.path(), &done));
        let raw = sc.spawn(|| raw_reader(dst.path(), &done));
        // Bursts of 1 to 40 records and short sleeps: the source and the readers keep up
        // with some and are lapped by others.
        let t0 = Instant::now();
        let mut seq = 1;
        let mut round = 0usize;
        while t0.elapsed() < PUBLISH {
            round += 1;
            for _ in 0..[1, 1, 2, 3, 1, 5, 9, 40][round % 8] {
                seq += 1;
                producer.push(&payload::<LEN>(seq)).unwrap();
            }
            std::thread::sleep(Duration::from_micros(30));
        }
        published.store(seq, Ordering::Relaxed);
        wait_until(
            "the mirror to reach the last record",
            Duration::from_secs(10),
            || ReadOnlyRing::open(dst.path()).is_ok_and(|r| r.write_seq() >= seq),
        );
        done.store(true, Ordering::Release);
        let (typed, raw) = (typed.join().unwrap(), raw.join().unwrap());
        stop.store(true, Ordering::Relaxed);
        let srv = s.join().unwrap().unwrap();
        let mir = m.join().unwrap().unwrap();
        assert_eq!(mir.connections, 1, "one session: {mir:?} {srv:?}");
        eprintln!("{mode:?}: mirror {:?}", mir.counters);
        (typed, raw, published.load(Ordering::Relaxed))
    })
}

fn check(mode: Mode, idx: u16) {
    let _one = ringwire_tests::one_at_a_time();
    let (typed, raw, n) = run(mode, idx);
    eprintln!("{mode:?}: {n} published; typed {typed:?}; raw {raw:?}");
    for (who, s) in [("typed", &typed), ("raw", &raw)] {
        assert_eq!(s.end, n, "{who} reached the last record");
        assert_eq!(
            s.delivered + s.lost,
            n,
            "{who}: every sequence delivered or lost"
        );
        assert!(s.delivered > 0, "{who} delivered records");
    }
}

#[test]
fn tcp_mirror_of_a_tiny_ring() {
    check(Mode::Tcp, 0);
}

#[test]
fn unicast_mirror_of_a_tiny_ring() {
    check(Mode::Unicast, 1);
}

#[test]
fn multicast_mirror_of_a_tiny_ring() {
    check(Mode::Multicast, 2);
}

/// A small xorshift generator: the frame lengths and holes of one run, from its seed.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// What the mirror writes, without the network: a sparse ring of `CAP` slots written with
/// `Producer::write_raw` and one `commit` per frame, frames of 1 to 3 rings of records with
/// holes inside them and between them (a GAP's `skip_to`), while both readers read. The
/// frames longer than the ring are certain here, which the loopback runs above reach only
/// when the source's collect keeps pace with its producer.
#[test]
fn readers_of_frames_longer_than_the_ring() {
    let _one = ringwire_tests::one_at_a_time();
    for seed in 1..=3u64 {
        let dst = ShmPath::new(&format!("tiny-raw-{seed}"));
        let mut geo = Geometry::spmc(CAP, LEN + 8, 8, 0, false).unwrap();
        geo.flags = Flags(geo.flags.0 | Flags::SPARSE);
        let ring = RingFile::create(dst.path(), &geo, &CreateOptions::default()).unwrap();
        // SAFETY: `ring` outlives the producer built on its view (used only in this scope).
        let mut mirror = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
        let done = AtomicBool::new(false);
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
        let (mut frames, mut long, mut written, mut last) = (0u64, 0u64, 0u64, 0u64);
        let (typed, raw) = std::thread::scope(|sc| {
            let _done = SetOnDrop(&done);
            let typed = sc.spawn(|| typed_reader(dst.path(), &done));
            let raw = sc.spawn(|| raw_reader(dst.path(), &done));
            let t0 = Instant::now();
            let mut next = 1u64;
            while t0.elapsed() < Duration::from_millis(400) {
                let n = 1 + rng.below(3 * CAP);
                for _ in 0..n {
                    if rng.below(8) == 0 {
                        // A hole inside the frame.
                        next += 1;
                    }
                    assert!(mirror.write_raw(next, &payload::<LEN>(next)));
                    written += 1;
                    last = next;
                    next += 1;
                }
                mirror.commit();
                frames += 1;
                long += u64::from(n > CAP);
                if rng.below(16) == 0 {
                    // A GAP: the sequences it skips are holes once later records come.
                    next += 1 + rng.below(2 * CAP);
                    mirror.skip_to(next);
                }
                if rng.below(4) == 0 {
                    spin_for(Duration::from_micros(rng.below(50)));
                }
            }
            done.store(true, Ordering::Release);
            (typed.join().unwrap(), raw.join().unwrap())
        });
        eprintln!(
            "seed {seed}: {frames} frames ({long} longer than the ring), {written} records \
             written up to {last}; typed {typed:?}; raw {raw:?}"
        );
        assert!(long > 0);
        Seen::check_ends(&typed, &raw, last, written);
    }
}

/// The mirror itself over TCP, fed by a fake source whose DATA frames carry up to three
/// rings of records (and GAPs between them): the frames longer than the ring that a real
/// source sends only when its collect keeps pace with its producer, on every run.
#[test]
fn tcp_mirror_of_frames_longer_than_the_ring() {
    use ringwire::core::wire::{GapRepr, HeaderRepr, Kind};
    use ringwire::replica::mirror::MirrorOptions;
    use std::io::{Read, Write};
    let _one = ringwire_tests::one_at_a_time();
    let dst = ShmPath::new("tiny-fake");
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let mut mo = MirrorOptions::new(listener.local_addr().unwrap(), dst.path());
    mo.start = ringwire::core::replicate::Start::Oldest;
    mo.log = false;
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let (typed, raw, last, long, written) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let _done = SetOnDrop(&done);
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        let (mut s, _) = listener.accept().unwrap();
        let mut hello = [0u8; 32];
        s.read_exact(&mut hello).unwrap();
        // 4 slots of 32 bytes: records of LEN bytes.
        s.write_all(&ringwire_tests::replica::geometry_frame(CAP, 0))
            .unwrap();
        s.write_all(&data_frame(1, 1)).unwrap();
        wait_until("the mirror ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(dst.path()).is_ok_and(|r| r.write_seq() >= 1)
        });
        let typed = sc.spawn(|| typed_reader(dst.path(), &done));
        let raw = sc.spawn(|| raw_reader(dst.path(), &done));
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        let (mut next, mut last, mut long, mut written) = (2u64, 1u64, 0u64, 1u64);
        let t0 = Instant::now();
        let mut out = Vec::new();
        while t0.elapsed() < Duration::from_millis(400) {
            out.clear();
            for _ in 0..16 {
                let n = 1 + rng.below(3 * CAP);
                out.extend_from_slice(&data_frame(next, n));
                next += n;
                written += n;
                long += u64::from(n > CAP);
                if rng.below(8) == 0 {
                    next += 1 + rng.below(2 * CAP);
                    let mut g = [0u8; 64];
                    let k = GapRepr { seq: next }.emit(&mut g).unwrap();
                    out.extend_from_slice(&g[..k]);
                }
            }
            // The last frame of a batch is DATA: the mirror ends at `last`.
            out.extend_from_slice(&data_frame(next, 1));
            last = next;
            next += 1;
            written += 1;
            s.write_all(&out).unwrap();
        }
        wait_until(
            "the mirror to reach the last record",
            Duration::from_secs(10),
            || ReadOnlyRing::open(dst.path()).is_ok_and(|r| r.write_seq() >= last),
        );
        done.store(true, Ordering::Release);
        let (typed, raw) = (typed.join().unwrap(), raw.join().unwrap());
        stop.store(true, Ordering::Relaxed);
        drop(s);
        let sum = m.join().unwrap().unwrap();
        assert_eq!(sum.connections, 1, "{sum:?}");
        (typed, raw, last, long, written)
    });
    eprintln!(
        "fake source: {written} records sent up to {last}, {long} frames longer than the \
         ring; typed {typed:?}; raw {raw:?}"
    );
    assert!(long > 0);
    Seen::check_ends(&typed, &raw, last, written);

    /// A DATA frame of records `seq..seq + n`.
    fn data_frame(seq: u64, n: u64) -> Vec<u8> {
        let mut f = vec![0u8; HEADER_LEN];
        HeaderRepr {
            kind: Kind::Data,
            flags: 0,
            count: n as u16,
            len: (n as usize * LEN) as u32,
            seq,
        }
        .emit(&mut f)
        .unwrap();
        for s in seq..seq + n {
            f.extend_from_slice(&payload::<LEN>(s));
        }
        f
    }
}
