//! UDP unicast when the mirror dials the server at another of its addresses than the one
//! the kernel would send from: serve bound to 0.0.0.0, the mirror connects to 127.0.0.2
//! (all of 127/8 is local on Linux). The mirror accepts datagrams only from the address it
//! dialled; the server used to send them from 127.0.0.1 (the route's source), so every one
//! was dropped as udp_wrong_source and the mirror reconnected for ever.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ringwire::replica::mirror;
use ringwire::replica::serve::Server;
use ringwire::{ReadOnlyRing, RingProducer};
use ringwire_tests::replica::{Mode, SetOnDrop, mirror_options, serve_options};
use ringwire_tests::shm::ShmPath;

#[test]
fn unicast_reaches_a_mirror_that_dialled_another_local_address() {
    let src = ShmPath::new("uni-ip-src");
    let dst = ShmPath::new("uni-ip-dst");
    let mut producer = RingProducer::<[u8; 24]>::create(src.path(), 1024).unwrap();
    let group = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
    let mut so = serve_options(src.path(), Mode::Unicast, group, 1);
    so.bind = SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0));
    let server = Server::bind(so).unwrap();
    let port = server.local_addr().port();
    let dialled = SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), port));
    let mo = mirror_options(dialled, dst.path(), Mode::Unicast);
    let stop = AtomicBool::new(false);
    let (reached, summary) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        let write_seq = || ReadOnlyRing::open(dst.path()).map_or(0, |r| r.write_seq());
        let t0 = Instant::now();
        while ReadOnlyRing::open(dst.path()).is_err() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        for seq in 1..=100u64 {
            assert_eq!(producer.push(&ringwire_tests::replica::payload(seq)), seq);
        }
        let t0 = Instant::now();
        while write_seq() < 100 && t0.elapsed() < Duration::from_secs(4) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let reached = write_seq();
        stop.store(true, Ordering::Relaxed);
        s.join().unwrap().unwrap();
        (reached, m.join().unwrap().unwrap())
    });
    assert_eq!(reached, 100, "mirror ring write_seq; {summary:?}");
    assert_eq!(summary.counters.udp_wrong_source, 0, "{summary:?}");
    assert!(summary.counters.datagrams > 0, "{summary:?}");
    assert_eq!(summary.connections, 1, "{summary:?}");
    ringwire_tests::replica::assert_mirrored::<24>(src.path(), dst.path(), 100);
}
