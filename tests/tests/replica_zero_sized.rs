//! A ring of zero-sized records (`RingProducer::<()>`: stride 8, the slot holds only its
//! sequence word) replicated serve → mirror over TCP on loopback. Its DATA frames carry
//! `len = count * 0 = 0`, which the mirror used to refuse (`BadRecordLen { record_len: 0 }`)
//! and then reconnect for ever.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ringwire::replica::mirror;
use ringwire::replica::serve::Server;
use ringwire::{ReadOnlyRing, RingProducer};
use ringwire_tests::replica::{Mode, SetOnDrop, mirror_options, serve_options};
use ringwire_tests::shm::ShmPath;

#[test]
fn zero_sized_records_mirror_over_tcp() {
    let src = ShmPath::new("zst-src");
    let dst = ShmPath::new("zst-dst");
    let mut producer = RingProducer::<()>::create(src.path(), 64).unwrap();
    for seq in 1..=10 {
        assert_eq!(producer.push(&()), seq);
    }
    let group = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
    let server = Server::bind(serve_options(src.path(), Mode::Tcp, group, 1)).unwrap();
    let mo = mirror_options(server.local_addr(), dst.path(), Mode::Tcp);
    let stop = AtomicBool::new(false);
    let (reached, summary) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        let t0 = Instant::now();
        let write_seq = || ReadOnlyRing::open(dst.path()).map_or(0, |r| r.write_seq());
        while write_seq() < 10 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let reached = write_seq();
        stop.store(true, Ordering::Relaxed);
        s.join().unwrap().unwrap();
        (reached, m.join().unwrap().unwrap())
    });
    assert_eq!(reached, 10, "mirror ring write_seq after 5 s; {summary:?}");
    assert_eq!(summary.connections, 1, "{summary:?}");
    let m = ReadOnlyRing::open(dst.path()).unwrap();
    assert_eq!(m.geometry().element_size, 8);
    drop(producer);
}
