//! Replication of edge geometries across ringwire and ringfire 0.5.2, both ways (ringwire
//! server to ringfire mirror, ringfire server to ringwire mirror, and ringwire to itself),
//! over loopback TCP, UDP multicast and UDP unicast: capacities 1 and 2, records of 1 and 13
//! bytes, a page, records larger than a datagram and than the 1 MiB TCP frame budget, rings
//! with registries of 1 and 33 slots, blob rings whose 64-byte arena wraps on every record
//! and blobs over a MiB. Every record the mirror ring holds is checked against the bytes
//! the source wrote under its sequence, and the newest must be there. Then a mirror ring
//! made by one project is resumed by the other's mirror.
//!
//! ringfire's server cannot be stopped in UDP modes, so those threads are left to the end
//! of the test process, as in `replica_compat.rs`.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::time::{Duration, Instant};

use ringwire::ReadOnlyRing;
use ringwire::core::SlotRead;
use ringwire_tests::replica::{Mode, assert_served, ringfire_server, start_ringfire};
use ringwire_tests::shm::ShmPath;
use ringwire_tests::{blocked_in, wait_until};

const DEADLINE: Duration = Duration::from_secs(20);

/// A ringwire server of the ring at `path` for `mode` (multicast on test `idx`'s group,
/// unicast on any free port), bound to loopback and not yet running.
fn our_server(path: &Path, mode: Mode, idx: u16) -> ringwire::ReplicaServer {
    let s = ringwire::ReplicaServer::bind(path, (Ipv4Addr::LOCALHOST, 0)).unwrap();
    match mode {
        Mode::Tcp => s,
        Mode::Multicast => {
            let g = mcast(idx);
            s.multicast(
                ringwire::MulticastConfig::new(*g.ip(), g.port())
                    .interface(Ipv4Addr::LOCALHOST)
                    .ttl(0),
            )
        }
        Mode::Unicast => s.unicast(0, 1472),
    }
}

fn mcast(idx: u16) -> SocketAddrV4 {
    let pid = std::process::id();
    SocketAddrV4::new(
        Ipv4Addr::new(239, 255, 103, idx as u8),
        24_000 + (pid % 2_000) as u16 * 8 + idx % 8,
    )
}

/// Record `seq`'s bytes: byte i is `(seq * 0x9E37_79B9 >> (i % 8)) as u8 ^ i as u8`. An index
/// loop over the eight shifts, not an iterator chain: the records over a MiB took seconds
/// of a debug build to fill and check.
fn fill(seq: u64, out: &mut [u8]) {
    let k = seq.wrapping_mul(0x9E37_79B9);
    let shifted: [u8; 8] = std::array::from_fn(|s| (k >> s) as u8);
    let mut i = 0;
    while i < out.len() {
        out[i] = shifted[i & 7] ^ i as u8;
        i += 1;
    }
}

/// [`fill`] writes the bytes its doc names.
#[test]
fn fill_gives_the_defined_bytes() {
    for seq in [0, 1, 7, 1 << 33, u64::MAX] {
        let mut out = vec![0u8; 1000];
        fill(seq, &mut out);
        for (i, b) in out.iter().enumerate() {
            assert_eq!(
                *b,
                (seq.wrapping_mul(0x9E37_79B9) >> (i % 8)) as u8 ^ i as u8
            );
        }
    }
}

enum Src {
    Fixed {
        len: usize,
    },
    Blob {
        lens: fn(u64) -> usize,
    },
    /// 256-byte records aligned to 256: at +256 in 512-byte slots, after 256 - 8 bytes of
    /// padding in each wire record (spec §4.1).
    Aligned,
    /// A lossy MPMC ring (ringfire's `MpmcProducer`, spec §8) of 24-byte records.
    Mpmc,
}

#[repr(C, align(256))]
#[derive(Clone, Copy, zerocopy::IntoBytes, zerocopy::Immutable)]
struct A256([u8; 256]);

/// Producer abstraction over the source ring.
struct Prod(Box<dyn FnMut(u64)>);

/// A ringwire producer of `kind` at `path`; record `s` carries the bytes of `s + generation`.
fn make_source(
    path: &Path,
    kind: &Src,
    cap: u64,
    readers: usize,
    arena: usize,
    generation: u64,
) -> Prod {
    let path = path.to_path_buf();
    match *kind {
        Src::Fixed { len } => {
            macro_rules! fixed {
                ($($n:literal),*) => {
                    match len {
                        $($n => {
                            let mut p = ringwire::RingProducer::<[u8; $n]>::builder(cap)
                                .max_readers(readers)
                                .build::<[u8; $n], _>(&path)
                                .unwrap();
                            Prod(Box::new(move |s| {
                                let mut r = [0u8; $n];
                                fill(s + generation, &mut r);
                                assert_eq!(p.push(&r), s);
                            }))
                        })*
                        _ => unreachable!(),
                    }
                };
            }
            fixed!(0, 1, 13, 24, 4096, 65600, 70000, 1100000)
        }
        Src::Aligned => {
            let mut p = ringwire::RingProducer::<A256>::builder(cap)
                .max_readers(readers)
                .build::<A256, _>(&path)
                .unwrap();
            Prod(Box::new(move |s| {
                let mut r = A256([0; 256]);
                fill(s + generation, &mut r.0);
                assert_eq!(p.push(&r), s);
            }))
        }
        Src::Mpmc => {
            let p = ringfire::MpmcProducer::<[u8; 24]>::create(&path, cap).unwrap();
            Prod(Box::new(move |s| {
                let mut r = [0u8; 24];
                fill(s + generation, &mut r);
                assert_eq!(p.push(&r), s);
            }))
        }
        Src::Blob { lens } => {
            let mut p = ringwire::BlobProducerBuilder::new(cap, arena)
                .max_readers(readers)
                .build::<u32, _>(&path)
                .unwrap();
            Prod(Box::new(move |s| {
                let mut b = vec![0u8; lens(s)];
                fill(s + generation, &mut b);
                assert_eq!(p.push(&((s + generation) as u32), &b).unwrap(), s);
            }))
        }
    }
}

/// Every record the mirror ring holds has the source's bytes for its sequence.
fn check_mirror(kind: &Src, mirror: &Path, n: u64) -> u64 {
    let m = ReadOnlyRing::open(mirror).expect("mirror ring");
    assert_eq!(m.write_seq(), n, "mirror write_seq");
    let len = m.geometry().record_len();
    let cap = m.geometry().capacity;
    let mut buf = vec![0u8; len];
    let mut ok = 0;
    for seq in n.saturating_sub(cap - 1).max(1)..=n {
        match m.read_slot(seq, &mut buf) {
            SlotRead::Ok => {}
            other => {
                assert!(seq < n, "last record {seq}: {other:?}");
                continue;
            }
        }
        match kind {
            Src::Fixed { len: l } => {
                let mut want = vec![0u8; *l];
                fill(seq, &mut want);
                assert_eq!(&buf[..*l], &want[..], "record {seq}");
            }
            Src::Mpmc => {
                let mut want = vec![0u8; 24];
                fill(seq, &mut want);
                assert_eq!(&buf[..24], &want[..], "record {seq}");
            }
            Src::Aligned => {
                let mut want = vec![0u8; 256];
                fill(seq, &mut want);
                assert_eq!(&buf[248..], &want[..], "record {seq}");
            }
            Src::Blob { lens } => {
                assert_eq!(u32::from_ne_bytes(buf[..4].try_into().unwrap()), seq as u32);
                match m.read_blob(&buf).unwrap() {
                    Ok(b) => {
                        let mut want = vec![0u8; lens(seq)];
                        fill(seq, &mut want);
                        assert_eq!(b, want, "blob {seq}");
                    }
                    Err(_) => assert!(seq < n, "last blob lost"),
                }
            }
        }
        ok += 1;
    }
    ok
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Side {
    Ours,
    Rf,
}

#[allow(clippy::too_many_arguments)]
fn run(
    idx: u16,
    server: Side,
    mirror: Side,
    mode: Mode,
    kind: Src,
    cap: u64,
    readers: usize,
    arena: usize,
    n: u64,
) {
    let src = ShmPath::new(&format!("redge-src-{idx}"));
    let dst = ShmPath::new(&format!("redge-dst-{idx}"));
    let mut prod = make_source(src.path(), &kind, cap, readers, arena, 0);
    let first = n / 2;
    for s in 1..=first {
        (prod.0)(s);
    }
    let mut stop_ours = None;
    let addr: SocketAddr = match server {
        Side::Ours => {
            let s = our_server(src.path(), mode, idx);
            let addr = s.local_addr().unwrap();
            let h = s.shutdown_handle();
            let j = s.spawn().unwrap();
            stop_ours = Some((h, j));
            addr
        }
        Side::Rf => {
            let s = ringfire_server(src.path(), Ipv4Addr::LOCALHOST, mode, mcast(idx));
            let addr = s.local_addr().unwrap();
            drop(s.spawn().unwrap());
            addr
        }
    };
    let t0 = Instant::now();
    let (seq, gaps) = match mirror {
        Side::Ours => {
            let mut m = ringwire::Mirror::builder()
                .start(ringwire::MirrorStart::Oldest)
                .interface(Ipv4Addr::LOCALHOST)
                .unicast(mode == Mode::Unicast)
                .connect(addr, dst.path())
                .unwrap();
            for s in first + 1..=n {
                (prod.0)(s);
                std::thread::sleep(Duration::from_micros(300));
            }
            while m.sequence() < n && t0.elapsed() < DEADLINE {
                std::thread::sleep(Duration::from_millis(2));
            }
            let r = (m.sequence(), m.gaps());
            m.handle().unwrap().shutdown().unwrap();
            let _ = m.run();
            r
        }
        Side::Rf => {
            use ringfire::replication::{Mirror as RfMirror, MirrorStart as RfStart};
            let mut m = RfMirror::builder()
                .start(RfStart::Oldest)
                .interface(Ipv4Addr::LOCALHOST)
                .unicast(mode == Mode::Unicast)
                .nak_timeout(Duration::from_millis(10))
                .connect(addr, dst.path())
                .unwrap();
            std::thread::scope(|sc| {
                let j = sc.spawn(|| {
                    while m.sequence() < n && t0.elapsed() < DEADLINE {
                        if !m.step().unwrap() {
                            break;
                        }
                    }
                    (m.sequence(), m.gaps())
                });
                for s in first + 1..=n {
                    (prod.0)(s);
                    std::thread::sleep(Duration::from_micros(300));
                }
                j.join().unwrap()
            })
        }
    };
    if let Some((h, j)) = stop_ours {
        h.shutdown();
        j.join().unwrap().unwrap();
    }
    assert_eq!(
        seq, n,
        "{idx}: {server:?}->{mirror:?} {mode:?} mirror at {seq} (gaps {gaps})"
    );
    let ok = check_mirror(&kind, dst.path(), n);
    eprintln!("{idx}: {server:?}->{mirror:?} {mode:?} cap {cap}: ok {ok} gaps {gaps}");
    drop(prod);
}

fn all(idx0: u16, mode: Mode, mk: impl Fn() -> (Src, u64, usize, usize, u64)) {
    for (k, (s, m)) in [
        (Side::Ours, Side::Rf),
        (Side::Rf, Side::Ours),
        (Side::Ours, Side::Ours),
    ]
    .into_iter()
    .enumerate()
    {
        let (kind, cap, readers, arena, n) = mk();
        run(idx0 + k as u16, s, m, mode, kind, cap, readers, arena, n);
    }
}

fn blob_small(s: u64) -> usize {
    [1, 64, 33, 0, 63, 17][(s % 6) as usize]
}
fn blob_big(s: u64) -> usize {
    [70_000, 10, 65_536, 3][(s % 4) as usize]
}

#[test]
fn tcp_cap1_odd() {
    all(0, Mode::Tcp, || (Src::Fixed { len: 13 }, 1, 0, 0, 50));
}
#[test]
fn tcp_cap2_1byte_registry1() {
    all(3, Mode::Tcp, || (Src::Fixed { len: 1 }, 2, 1, 0, 50));
}
#[test]
fn tcp_page() {
    all(6, Mode::Tcp, || (Src::Fixed { len: 4096 }, 8, 33, 0, 60));
}
#[test]
fn tcp_huge_record() {
    all(9, Mode::Tcp, || (Src::Fixed { len: 70000 }, 4, 0, 0, 20));
}
#[test]
fn tcp_blob_tiny_arena() {
    all(12, Mode::Tcp, || {
        (Src::Blob { lens: blob_small }, 4, 0, 64, 60)
    });
}
#[test]
fn tcp_blob_big() {
    all(15, Mode::Tcp, || {
        (Src::Blob { lens: blob_big }, 4, 2, 1 << 17, 20)
    });
}
#[test]
fn unicast_huge_record() {
    all(18, Mode::Unicast, || {
        (Src::Fixed { len: 70000 }, 4, 0, 0, 20)
    });
}
#[test]
fn unicast_record_just_over_datagram() {
    all(21, Mode::Unicast, || {
        (Src::Fixed { len: 65600 }, 4, 0, 0, 20)
    });
}
#[test]
fn multicast_blob_big() {
    all(24, Mode::Multicast, || {
        (Src::Blob { lens: blob_big }, 4, 2, 1 << 17, 20)
    });
}
#[test]
fn multicast_blob_tiny_arena() {
    all(27, Mode::Multicast, || {
        (Src::Blob { lens: blob_small }, 2, 0, 64, 60)
    });
}
#[test]
fn unicast_cap1() {
    all(30, Mode::Unicast, || (Src::Fixed { len: 24 }, 1, 0, 0, 60));
}

/// One mirror session with `side` from `start` until the mirror holds `until`.
fn session(
    side: Side,
    addr: SocketAddr,
    dst: &Path,
    resume: bool,
    until: u64,
    mode: Mode,
) -> (u64, bool, u64) {
    let t0 = Instant::now();
    match side {
        Side::Ours => {
            let mut m = ringwire::Mirror::builder()
                .start(if resume {
                    ringwire::MirrorStart::Resume
                } else {
                    ringwire::MirrorStart::Oldest
                })
                .interface(Ipv4Addr::LOCALHOST)
                .unicast(mode == Mode::Unicast)
                .nak_timeout(Duration::from_millis(10))
                .connect(addr, dst)
                .unwrap();
            while m.sequence() < until && t0.elapsed() < DEADLINE {
                std::thread::sleep(Duration::from_millis(2));
            }
            m.handle().unwrap().shutdown().unwrap();
            let _ = m.run();
            (m.first_sequence(), m.resumed(), m.sequence())
        }
        Side::Rf => {
            use ringfire::replication::{Mirror as RfMirror, MirrorStart as RfStart};
            let mut m = RfMirror::builder()
                .start(if resume {
                    RfStart::Resume
                } else {
                    RfStart::Oldest
                })
                .interface(Ipv4Addr::LOCALHOST)
                .unicast(mode == Mode::Unicast)
                .nak_timeout(Duration::from_millis(10))
                .connect(addr, dst)
                .unwrap();
            while m.sequence() < until && t0.elapsed() < DEADLINE {
                if !m.step().unwrap() {
                    break;
                }
            }
            (m.first_sequence(), m.resumed(), m.sequence())
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn cross_resume(
    idx: u16,
    first: Side,
    second: Side,
    mode: Mode,
    kind: Src,
    cap: u64,
    readers: usize,
    arena: usize,
) {
    let src = ShmPath::new(&format!("rres-src-{idx}"));
    let dst = ShmPath::new(&format!("rres-dst-{idx}"));
    let mut prod = make_source(src.path(), &kind, cap, readers, arena, 0);
    for s in 1..=40 {
        (prod.0)(s);
    }
    let s = our_server(src.path(), mode, idx);
    let addr = s.local_addr().unwrap();
    let h = s.shutdown_handle();
    let j = s.spawn().unwrap();
    let a = session(first, addr, dst.path(), false, 40, mode);
    for s in 41..=50 {
        (prod.0)(s);
    }
    let b = session(second, addr, dst.path(), true, 50, mode);
    h.shutdown();
    j.join().unwrap().unwrap();
    eprintln!("{idx} {first:?}->{second:?} {mode:?}: {a:?} {b:?}");
    assert_eq!(a.2, 40);
    assert_eq!(b, (41, true, 50), "{idx} {first:?}->{second:?} {mode:?}");
    check_mirror(&kind, dst.path(), 50);
}

#[test]
fn resume_across_implementations() {
    let mut idx = 40;
    for mode in [Mode::Tcp, Mode::Unicast] {
        for (a, b) in [(Side::Rf, Side::Ours), (Side::Ours, Side::Rf)] {
            cross_resume(idx, a, b, mode, Src::Fixed { len: 13 }, 64, 0, 0);
            cross_resume(idx + 1, a, b, mode, Src::Fixed { len: 24 }, 64, 3, 0);
            cross_resume(
                idx + 2,
                a,
                b,
                mode,
                Src::Blob { lens: blob_small },
                64,
                0,
                1024,
            );
            cross_resume(
                idx + 3,
                a,
                b,
                mode,
                Src::Blob { lens: blob_small },
                64,
                2,
                1024,
            );
            idx += 4;
        }
    }
}

fn blob_huge(s: u64) -> usize {
    [1_500_000, 10, 2_000_000, 0][(s % 4) as usize]
}
#[test]
fn tcp_record_over_a_mib() {
    all(60, Mode::Tcp, || (Src::Fixed { len: 1100000 }, 4, 0, 0, 10));
}
#[test]
fn unicast_record_over_a_mib() {
    all(63, Mode::Unicast, || {
        (Src::Fixed { len: 1100000 }, 4, 0, 0, 10)
    });
}
#[test]
fn tcp_blob_over_a_mib() {
    all(66, Mode::Tcp, || {
        (Src::Blob { lens: blob_huge }, 4, 0, 1 << 23, 10)
    });
}
#[test]
fn unicast_blob_over_a_mib() {
    all(69, Mode::Unicast, || {
        (Src::Blob { lens: blob_huge }, 4, 0, 1 << 23, 10)
    });
}

/// A ringwire server whose source ring is replaced under a connected ringfire mirror (a
/// restarted producer, numbering from 1 again): the mirror reconnects with `Resume`, as
/// ringfire's CLI does, is told RESET and copies the new ring's records.
fn restart_under_ringfire_mirror(idx: u16, mode: Mode, fixed: bool) {
    use ringfire::replication::{Mirror as RfMirror, MirrorStart as RfStart};
    let src = ShmPath::new(&format!("rrst-src-{idx}"));
    let dst = ShmPath::new(&format!("rrst-dst-{idx}"));
    let kind = || {
        if fixed {
            Src::Fixed { len: 24 }
        } else {
            Src::Blob { lens: blob_small }
        }
    };
    let mut old = make_source(src.path(), &kind(), 64, 0, 1024, 0);
    for s in 1..=50 {
        (old.0)(s);
    }
    let s = our_server(src.path(), mode, idx);
    let addr = s.local_addr().unwrap();
    let h = s.shutdown_handle();
    let j = s.spawn().unwrap();
    let connect = |start| {
        RfMirror::builder()
            .start(start)
            .interface(Ipv4Addr::LOCALHOST)
            .unicast(mode == Mode::Unicast)
            .nak_timeout(Duration::from_millis(10))
            .connect(addr, dst.path())
    };
    let mut m = connect(RfStart::Oldest).unwrap();
    let t0 = Instant::now();
    while m.sequence() < 50 && t0.elapsed() < DEADLINE {
        assert!(m.step().unwrap());
    }
    assert_eq!(m.sequence(), 50);
    // The producer restarts: a new ring at the path, 10 records of other bytes.
    drop(old);
    let new_kind = kind();
    let mut new = make_source(src.path(), &new_kind, 64, 0, 1024, 1000);
    for s in 1..=10 {
        (new.0)(s);
    }
    let mut reconnects = 0;
    let t0 = Instant::now();
    loop {
        assert!(
            t0.elapsed() < DEADLINE,
            "{idx} {mode:?}: mirror at {} after {reconnects} reconnects",
            m.sequence()
        );
        match m.step() {
            Ok(true) => {}
            Ok(false) | Err(_) => {
                reconnects += 1;
                std::thread::sleep(Duration::from_millis(20));
                // The old mirror holds its ring's lock until dropped. The server must
                // take the reconnection (ringfire's CLI retries every 500 ms; a few tries
                // cover a refusal while the new ring was being made).
                drop(m);
                let mut tries = 0;
                m = loop {
                    match connect(RfStart::Resume) {
                        Ok(m) => break m,
                        Err(e) => {
                            tries += 1;
                            assert!(tries < 10, "{idx} {mode:?}: reconnect: {e}");
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                };
            }
        }
        // Reconnected: the source said RESET and the mirror made a new ring, which starts
        // after the new ring's newest record (spec §19.1).
        if reconnects > 0 && !m.resumed() {
            break;
        }
    }
    assert_eq!(m.first_sequence(), 11, "{idx} {mode:?}");
    for s in 11..=20 {
        (new.0)(s);
    }
    while m.sequence() < 20 {
        assert!(
            t0.elapsed() < DEADLINE,
            "{idx} {mode:?}: mirror at {}",
            m.sequence()
        );
        assert!(m.step().unwrap());
    }
    drop(m);
    h.shutdown();
    j.join().unwrap().unwrap();
    let ring = ReadOnlyRing::open(dst.path()).unwrap();
    assert_eq!(ring.write_seq(), 20);
    let mut buf = vec![0u8; ring.geometry().record_len()];
    for s in 1..=20u64 {
        if s <= 10 {
            // None of the old ring's records is left in the new mirror ring.
            assert_ne!(ring.read_slot(s, &mut buf), SlotRead::Ok, "{s}");
            continue;
        }
        assert_eq!(ring.read_slot(s, &mut buf), SlotRead::Ok, "{s}");
        let mut want = vec![0u8; 24];
        fill(s + 1000, &mut want);
        if fixed {
            assert_eq!(buf[..24], want[..], "{idx} record {s}");
        } else {
            assert_eq!(
                u32::from_ne_bytes(buf[..4].try_into().unwrap()),
                (s + 1000) as u32
            );
        }
    }
    eprintln!("{idx} {mode:?}: {reconnects} reconnects");
}

#[test]
fn ringwire_source_restart_under_a_ringfire_mirror() {
    restart_under_ringfire_mirror(80, Mode::Tcp, true);
    restart_under_ringfire_mirror(81, Mode::Unicast, true);
    restart_under_ringfire_mirror(82, Mode::Multicast, true);
    restart_under_ringfire_mirror(83, Mode::Tcp, false);
    restart_under_ringfire_mirror(84, Mode::Unicast, false);
}

#[test]
fn tcp_over_aligned() {
    all(90, Mode::Tcp, || (Src::Aligned, 8, 1, 0, 40));
}
#[test]
fn unicast_over_aligned() {
    all(93, Mode::Unicast, || (Src::Aligned, 8, 0, 0, 40));
}
#[test]
fn tcp_mpmc_source() {
    all(96, Mode::Tcp, || (Src::Mpmc, 4, 0, 0, 40));
}
#[test]
fn multicast_mpmc_source() {
    all(99, Mode::Multicast, || (Src::Mpmc, 8, 0, 0, 40));
}

#[test]
fn tcp_zero_sized() {
    all(102, Mode::Tcp, || (Src::Fixed { len: 0 }, 64, 0, 0, 300));
}
#[test]
fn unicast_zero_sized() {
    all(105, Mode::Unicast, || {
        (Src::Fixed { len: 0 }, 64, 0, 0, 300)
    });
}
#[test]
fn multicast_zero_sized() {
    all(108, Mode::Multicast, || {
        (Src::Fixed { len: 0 }, 2, 0, 0, 100)
    });
}

/// A producer restart (a new ring numbering from 1, shorter than the old) under a ringwire
/// mirror that reconnects with `Resume`, against either project's server: the mirror is
/// told RESET and starts a new ring after the new ring's newest record, as ringfire's does.
fn restart_under_ringwire_mirror(idx: u16, server: Side) {
    let src = ShmPath::new(&format!("rrsw-src-{idx}"));
    let dst = ShmPath::new(&format!("rrsw-dst-{idx}"));
    let kind = Src::Fixed { len: 24 };
    let mut old = make_source(src.path(), &kind, 64, 0, 0, 0);
    for s in 1..=50 {
        (old.0)(s);
    }
    let mut stop_ours = None;
    let addr = match server {
        Side::Ours => {
            let s = ringwire::ReplicaServer::bind(src.path(), (Ipv4Addr::LOCALHOST, 0)).unwrap();
            let addr = s.local_addr().unwrap();
            stop_ours = Some((s.shutdown_handle(), s.spawn().unwrap()));
            addr
        }
        Side::Rf => {
            let s = ringfire_server(src.path(), Ipv4Addr::LOCALHOST, Mode::Tcp, mcast(idx));
            let addr = s.local_addr().unwrap();
            drop(s.spawn().unwrap());
            addr
        }
    };
    let a = session(Side::Ours, addr, dst.path(), false, 50, Mode::Tcp);
    assert_eq!(a, (1, false, 50));
    drop(old);
    let mut new = make_source(src.path(), &kind, 64, 0, 0, 1000);
    for s in 1..=10 {
        (new.0)(s);
    }
    let t0 = Instant::now();
    let mut m = ringwire::Mirror::builder()
        .start(ringwire::MirrorStart::Resume)
        .connect(addr, dst.path())
        .unwrap();
    for s in 11..=20 {
        (new.0)(s);
    }
    while m.sequence() < 20 && t0.elapsed() < DEADLINE {
        std::thread::sleep(Duration::from_millis(2));
    }
    m.handle().unwrap().shutdown().unwrap();
    let _ = m.run();
    let got = (m.first_sequence(), m.resumed(), m.sequence());
    drop(m);
    if let Some((h, j)) = stop_ours {
        h.shutdown();
        j.join().unwrap().unwrap();
    }
    assert_eq!(got, (11, false, 20), "{idx} {server:?}");
    let ring = ReadOnlyRing::open(dst.path()).unwrap();
    let mut buf = vec![0u8; ring.geometry().record_len()];
    for s in 1..=20u64 {
        if s <= 10 {
            assert_ne!(ring.read_slot(s, &mut buf), SlotRead::Ok, "{s}");
            continue;
        }
        assert_eq!(ring.read_slot(s, &mut buf), SlotRead::Ok, "{s}");
        let mut want = vec![0u8; 24];
        fill(s + 1000, &mut want);
        assert_eq!(buf[..24], want[..], "{idx} record {s}");
    }
}

#[test]
fn source_restart_under_a_ringwire_mirror() {
    restart_under_ringwire_mirror(111, Side::Ours);
    restart_under_ringwire_mirror(112, Side::Rf);
}

/// A hub: a ringwire mirror that joined at the newest record (its ring has holes below)
/// served by a ringwire server to a leaf of either project starting at the oldest: the
/// leaf is told past the holes and copies every record the hub holds.
fn hub_with_holes(idx: u16, leaf: Side, mode: Mode) {
    let src = ShmPath::new(&format!("rhub-src-{idx}"));
    let hub = ShmPath::new(&format!("rhub-hub-{idx}"));
    let dst = ShmPath::new(&format!("rhub-dst-{idx}"));
    let kind = Src::Fixed { len: 24 };
    let mut prod = make_source(src.path(), &kind, 64, 0, 0, 0);
    for s in 1..=100 {
        (prod.0)(s);
    }
    let s1 = ringwire::ReplicaServer::bind(src.path(), (Ipv4Addr::LOCALHOST, 0)).unwrap();
    let a1 = s1.local_addr().unwrap();
    let (h1, j1) = (s1.shutdown_handle(), s1.spawn().unwrap());
    let mut hm = ringwire::Mirror::builder()
        .start(ringwire::MirrorStart::Latest)
        .connect(a1, hub.path())
        .unwrap();
    for s in 101..=120 {
        (prod.0)(s);
        std::thread::sleep(Duration::from_micros(200));
    }
    let t0 = Instant::now();
    while hm.sequence() < 120 && t0.elapsed() < DEADLINE {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(hm.sequence(), 120);
    let s2 = our_server(hub.path(), mode, idx);
    let a2 = s2.local_addr().unwrap();
    let (h2, j2) = (s2.shutdown_handle(), s2.spawn().unwrap());
    let got = session(leaf, a2, dst.path(), false, 120, mode);
    h2.shutdown();
    j2.join().unwrap().unwrap();
    hm.handle().unwrap().shutdown().unwrap();
    let _ = hm.run();
    h1.shutdown();
    j1.join().unwrap().unwrap();
    eprintln!("{idx} {leaf:?} {mode:?}: {got:?}");
    assert_eq!(got.2, 120, "{idx} {leaf:?} {mode:?}: {got:?}");
    let ok = check_mirror(&kind, dst.path(), 120);
    assert!(ok >= 20, "{ok}");
}

#[test]
fn hub_with_holes_to_either_leaf() {
    hub_with_holes(113, Side::Rf, Mode::Tcp);
    hub_with_holes(114, Side::Ours, Mode::Tcp);
    hub_with_holes(115, Side::Rf, Mode::Unicast);
    hub_with_holes(116, Side::Ours, Mode::Unicast);
    hub_with_holes(117, Side::Rf, Mode::Multicast);
}

/// `serve_one` of a ring whose producer restarted after the server was bound: the mirror
/// that connects is served the new ring, as by ringfire's `serve_one`, which opens the ring
/// when the mirror connects.
fn serve_one_after_a_restart(idx: u16, server: Side, mirror: Side) {
    let src = ShmPath::new(&format!("rone-src-{idx}"));
    let dst = ShmPath::new(&format!("rone-dst-{idx}"));
    let kind = Src::Fixed { len: 24 };
    let mut old = make_source(src.path(), &kind, 64, 0, 0, 0);
    for s in 1..=50 {
        (old.0)(s);
    }
    let (addr, served): (SocketAddr, std::thread::JoinHandle<Result<(), String>>) = match server {
        Side::Ours => {
            let s = ringwire::ReplicaServer::bind(src.path(), (Ipv4Addr::LOCALHOST, 0)).unwrap();
            let addr = s.local_addr().unwrap();
            let h = s.shutdown_handle();
            let (tid_tx, tid) = std::sync::mpsc::channel();
            let j = std::thread::spawn(move || {
                // SAFETY: gettid has no preconditions.
                tid_tx.send(unsafe { libc::gettid() }).unwrap();
                let r = s.serve_one().map_err(|e| e.to_string());
                drop(h);
                r
            });
            // The server is waiting for its mirror when the producer restarts: ours opens
            // the ring as `serve_one` starts, then polls its listener (ppoll) for a mirror.
            let tid = tid.recv().expect("the server's thread id");
            wait_until(
                "serve_one to poll its listener",
                Duration::from_secs(30),
                || j.is_finished() || blocked_in(tid, libc::SYS_ppoll).is_some(),
            );
            (addr, j)
        }
        Side::Rf => {
            // ringfire's `serve_one` opens the ring once it has accepted the mirror, after
            // the restart whenever its thread gets there.
            let s = ringfire_server(src.path(), Ipv4Addr::LOCALHOST, Mode::Tcp, mcast(idx));
            let addr = s.local_addr().unwrap();
            (addr, start_ringfire(s, Mode::Tcp).expect("serve_one"))
        }
    };
    drop(old);
    let mut new = make_source(src.path(), &kind, 64, 0, 0, 1000);
    for s in 1..=10 {
        (new.0)(s);
    }
    let got = session(mirror, addr, dst.path(), false, 10, Mode::Tcp);
    assert_served(served, &format!("{idx}"));
    assert_eq!(got, (1, false, 10), "{idx} {server:?}->{mirror:?}");
    let ring = ReadOnlyRing::open(dst.path()).unwrap();
    let mut buf = vec![0u8; ring.geometry().record_len()];
    for s in 1..=10u64 {
        assert_eq!(ring.read_slot(s, &mut buf), SlotRead::Ok, "{s}");
        let mut want = vec![0u8; 24];
        fill(s + 1000, &mut want);
        assert_eq!(
            buf[..24],
            want[..],
            "{idx} {server:?}->{mirror:?} record {s}"
        );
    }
}

#[test]
fn serve_one_serves_the_ring_at_the_path_when_the_mirror_connects() {
    serve_one_after_a_restart(118, Side::Ours, Side::Rf);
    serve_one_after_a_restart(119, Side::Ours, Side::Ours);
    serve_one_after_a_restart(120, Side::Rf, Side::Ours);
}
