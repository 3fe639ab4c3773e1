//! Tests of the SPSC queues of byte strings: lengths kept, bounds checked, items left in
//! place on errors, durability, typed handles on such a queue, and datagrams received with
//! `recvmmsg` on loopback moved through one in batches.

use std::io;
use std::net::UdpSocket;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use ringwire_core::queue::{PopError, PushError, QueueExpect, QueueKind};
use ringwire_core::sync::Ordering;

use super::*;
use crate::net::mmsg::RecvBatch;
use crate::test_tmp::TmpPath;

#[test]
fn items_keep_their_lengths_and_bad_sizes_are_refused() {
    let (mut p, mut c) = spsc_bytes_channel(4, 100).unwrap();
    assert_eq!(p.max_len(), 100);
    let long = [7u8; 100];
    p.try_push(b"abc").unwrap();
    p.try_push(b"").unwrap();
    p.try_push(&long).unwrap();
    assert_eq!(
        p.try_push(&[0u8; 101]),
        Err(PushError::TooLong {
            index: 0,
            len: 101,
            max: 100
        })
    );
    let mut buf = [0u8; 100];
    assert_eq!(c.try_pop(&mut buf), Ok(Some(3)));
    assert_eq!(&buf[..3], b"abc");
    assert_eq!(c.try_pop(&mut buf), Ok(Some(0)));
    // A buffer too small for the next item leaves it in the queue.
    assert_eq!(
        c.try_pop(&mut buf[..99]),
        Err(PopError::BufferTooSmall { len: 99, need: 100 })
    );
    assert_eq!(c.try_pop(&mut buf), Ok(Some(100)));
    assert_eq!(buf, long);
    assert_eq!(c.try_pop(&mut buf), Ok(None));

    // Batches: as many as fit, in order, with their lengths.
    let items: [&[u8]; 5] = [b"1", b"22", b"333", b"4444", b"55555"];
    assert_eq!(p.push_slice(&items), Ok(4));
    assert_eq!(p.push_slice(&items[4..]), Ok(0));
    let mut bufs = [[0u8; 8]; 8];
    let mut lens = [0usize; 8];
    assert_eq!(c.pop_slice(&mut bufs, &mut lens), Ok(4));
    for (k, item) in items[..4].iter().enumerate() {
        assert_eq!(&bufs[k][..lens[k]], *item);
    }
    // One item too long fails the whole batch before anything is pushed.
    assert!(matches!(
        p.push_slice(&[&b"ok"[..], &[0u8; 101][..]]),
        Err(PushError::TooLong { index: 1, .. })
    ));
    assert_eq!(c.ready(), Ok(0));
}

#[test]
fn a_bytes_queue_file_survives_both_sides_and_refuses_a_second_producer() {
    let path = TmpPath::new("bytes-queue-durable");
    {
        let mut p = SpscBytesProducer::create(&path, 8, 1500).unwrap();
        assert!(matches!(
            SpscBytesProducer::open(&path),
            Err(QueueFileError::RoleTaken { .. })
        ));
        for n in [1usize, 1500, 40] {
            p.try_push(&vec![n as u8; n]).unwrap();
        }
        p.flush().unwrap();
    }
    let mut c = SpscBytesConsumer::open(&path).unwrap();
    assert_eq!(c.max_len(), 1500);
    let mut buf = vec![0u8; c.max_len()];
    for n in [1usize, 1500, 40] {
        assert_eq!(c.try_pop(&mut buf), Ok(Some(n)));
        assert!(buf[..n].iter().all(|&b| b == n as u8));
    }
    assert_eq!(c.try_pop(&mut buf), Ok(None));
}

/// A queue file whose dequeue cursor was scribbled ahead of the tail reads as never
/// draining: the waits return at once with the error instead of sleeping to their deadline
/// (for ever without one), and `recv_mmsg` reports it.
#[test]
fn a_corrupt_cursor_is_an_error_for_the_producer_not_an_endless_wait() {
    use std::os::unix::fs::FileExt;
    let path = TmpPath::new("bytes-queue-corruptcursor");
    let mut p = SpscBytesProducer::create(&path, 4, 64).unwrap();
    // Full: the producer rereads the dequeue cursor on its next push.
    for _ in 0..4 {
        p.try_push(b"one").unwrap();
    }
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&7u64.to_le_bytes(), ringwire_core::queue::qhdr::DEQ as u64)
        .unwrap();
    let corrupt = PushError::CorruptCursors { tail: 4, head: 7 };
    let t0 = Instant::now();
    assert_eq!(
        p.push_blocking(b"two", Duration::from_secs(10)),
        Err(corrupt)
    );
    assert_eq!(
        p.wait_for_space(&mut crate::FutexWait::default(), Duration::from_secs(10)),
        0
    );
    let (rx, tx) = loopback_pair();
    tx.send(b"three").unwrap();
    let e = p.recv_mmsg(&rx, 32).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    assert!(e.to_string().contains("dequeue cursor 7"), "{e}");
    // Neither wait ran to its 10 s deadline.
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}

#[test]
fn bytes_roles_clear_the_waiter_count_they_sleep_on_when_taken() {
    let path = TmpPath::new("bytes-queue-rolewaiters");
    // The creator stays alive as the producer: only the role locks prove a count stale.
    let mut p = SpscBytesProducer::create(&path, 4, 100).unwrap();
    let raw = QueueMem::open(&path, QueueExpect::raw(QueueKind::Spsc)).unwrap();
    // SAFETY: `raw` outlives every use of its view.
    let view = unsafe { raw.view() };
    let counts = || {
        (
            view.data_waiters().load(Ordering::Relaxed),
            view.space_waiters().load(Ordering::Relaxed),
        )
    };
    // Left by a consumer that died asleep on data; the live producer's own count stays.
    view.data_waiters().store(1, Ordering::Relaxed);
    view.space_waiters().store(1, Ordering::Relaxed);
    let mut c = SpscBytesConsumer::open(&path).unwrap();
    assert_eq!(counts(), (0, 1));
    drop(p);
    view.data_waiters().store(1, Ordering::Relaxed);
    p = SpscBytesProducer::open(&path).unwrap();
    assert_eq!(counts(), (1, 0));
    p.try_push(b"ok").unwrap();
    let mut buf = [0u8; 100];
    assert_eq!(c.try_pop(&mut buf), Ok(Some(2)));
}

#[test]
fn typed_handles_refuse_a_bytes_queue_and_bytes_handles_read_a_typed_one() {
    let path = TmpPath::new("bytes-queue-typed");
    let mut p = SpscBytesProducer::create(&path, 4, 8).unwrap();
    p.try_push(b"abc").unwrap();
    // Same kind, item size and (absent) schema, but items of their own lengths: a typed
    // consumer would read "abc" as a u64.
    match SpscConsumer::<u64>::open(&path) {
        Err(e @ QueueFileError::NotFixedSize(_)) => {
            assert!(e.to_string().contains("byte strings"), "{e}")
        }
        other => panic!("expected NotFixedSize, got {other:?}"),
    }
    drop(p);
    assert!(matches!(
        SpscProducer::<u64>::open(&path),
        Err(QueueFileError::NotFixedSize(_))
    ));
    let mut c = SpscBytesConsumer::open(&path).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(c.try_pop(&mut buf), Ok(Some(3)));
    assert_eq!(&buf[..3], b"abc");
    drop(c);

    // A typed queue read and written with byte strings: every item is the item size.
    let typed = TmpPath::new("bytes-queue-typed2");
    let mut tp = SpscProducer::<u64>::create(&typed, 4).unwrap();
    tp.try_push(&9).unwrap();
    drop(tp);
    let mut bp = SpscBytesProducer::open(&typed).unwrap();
    assert_eq!(
        bp.try_push(b"abc"),
        Err(PushError::WrongLength {
            index: 0,
            len: 3,
            expected: 8
        })
    );
    // In a batch, the error names the item of the wrong length; nothing is pushed.
    let e = bp
        .push_slice(&[&[1u8; 8][..], &[2u8; 8][..], &[3u8; 5][..]])
        .unwrap_err();
    assert_eq!(
        e,
        PushError::WrongLength {
            index: 2,
            len: 5,
            expected: 8
        }
    );
    assert_eq!(
        e.to_string(),
        "item 2 is 5 bytes; this queue's items are exactly 8"
    );
    bp.try_push(&10u64.to_ne_bytes()).unwrap();
    let mut bc = SpscBytesConsumer::open(&typed).unwrap();
    let mut buf = [0u8; 16];
    for want in [9u64, 10] {
        assert_eq!(bc.try_pop(&mut buf), Ok(Some(8)));
        assert_eq!(buf[..8], want.to_ne_bytes());
    }
}

/// Datagram `i`: its number, then `i % 200` bytes of `i as u8`.
fn datagram(i: u32) -> Vec<u8> {
    let mut d = i.to_le_bytes().to_vec();
    d.resize(4 + (i % 200) as usize, i as u8);
    d
}

/// Sends datagrams `0..3000` over loopback (bursts of 32, 1 ms apart) to a socket with a
/// 100 ms read timeout, has an ingest thread call `step(&rx, &mut p)` (which returns how many
/// datagrams it moved into the 64-slot queue) until all are in, and checks that every
/// datagram comes out whole and in order, and that some call moved more than one.
///
/// The sender stays at most [`AHEAD`] datagrams ahead of the ingest thread: loopback UDP
/// drops what overflows the receive buffer (about 270 datagrams this size by default), and
/// on a loaded machine the ingest thread can be off the CPU long enough for a free-running
/// sender to overflow it (seen once in a loop of test runs).
fn datagrams_through_a_queue(
    mut step: impl FnMut(&UdpSocket, &mut SpscBytesProducer) -> u32 + Send,
) {
    const N: u32 = 3000;
    const AHEAD: u32 = 128;
    let ingested = AtomicU32::new(0);
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let to = rx.local_addr().unwrap();
    let (mut p, mut c) = spsc_bytes_channel(64, 256).unwrap();
    std::thread::scope(|s| {
        let ingested = &ingested;
        s.spawn(move || {
            let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            for i in 0..N {
                // Relaxed: the count only paces the sender.
                while i >= ingested.load(Ordering::Relaxed) + AHEAD && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_micros(100));
                }
                tx.send_to(&datagram(i), to).unwrap();
                if i % 32 == 31 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        });
        s.spawn(move || {
            let (mut got, mut calls) = (0u32, 0u32);
            let deadline = Instant::now() + Duration::from_secs(30);
            while got < N && Instant::now() < deadline {
                let n = step(&rx, &mut p);
                got += n;
                ingested.store(got, Ordering::Relaxed);
                calls += u32::from(n > 0);
            }
            assert_eq!(got, N, "datagrams received");
            assert!(calls < N, "no call took more than one datagram");
        });
        let mut buf = [0u8; 256];
        let mut wait = crate::FutexWait::default();
        for i in 0..N {
            let len = c
                .pop_timeout(&mut buf, &mut wait, Duration::from_secs(30))
                .unwrap()
                .unwrap_or_else(|| panic!("datagram {i} never came"));
            assert_eq!(&buf[..len], &datagram(i)[..], "datagram {i}");
        }
    });
}

#[test]
fn datagrams_received_with_recvmmsg_move_through_in_batches() {
    // One recvmmsg per batch, one push_slice (one index update) per batch, the rest of a
    // batch that did not fit pushed once the consumer made room.
    let mut batch = RecvBatch::new(32, 256);
    datagrams_through_a_queue(|rx, p| {
        let Ok(n) = batch.recv(rx) else { return 0 };
        let items: Vec<&[u8]> = (0..n)
            .filter_map(|i| batch.get(i).and_then(|(bytes, _)| bytes))
            .collect();
        let mut k = 0;
        while k < items.len() {
            k += p.push_slice(&items[k..]).unwrap();
            if k < items.len() {
                let wait = &mut crate::YieldBackoff::default();
                p.push_timeout(items[k], wait, Duration::from_secs(10))
                    .unwrap();
                k += 1;
            }
        }
        items.len() as u32
    });
}

/// A receiving socket on loopback that never blocks, and a sender.
fn loopback_pair() -> (UdpSocket, UdpSocket) {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_nonblocking(true).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.connect(rx.local_addr().unwrap()).unwrap();
    (rx, tx)
}

/// Sends `datagrams`, then takes them with one `recv_mmsg`: (pushed, dropped).
fn send_then_recv_mmsg(
    tx: &UdpSocket,
    rx: &UdpSocket,
    p: &mut SpscBytesProducer,
    datagrams: &[&[u8]],
) -> (usize, usize) {
    for d in datagrams {
        tx.send(d).unwrap();
    }
    let Received { pushed, dropped } = p.recv_mmsg(rx, 32).unwrap();
    (pushed, dropped)
}

#[test]
fn recv_mmsg_fills_free_slots_drops_the_too_long_and_leaves_the_rest_in_the_socket() {
    let (rx, tx) = loopback_pair();
    let (mut p, mut c) = spsc_bytes_channel(8, 100).unwrap();
    let mut buf = [0u8; 100];
    assert_eq!(
        p.recv_mmsg(&rx, 32).unwrap_err().kind(),
        io::ErrorKind::WouldBlock,
        "nothing waiting"
    );

    // Loopback delivers during send, so all four wait in the socket.
    let datagrams = [&[1u8; 10][..], &[2u8; 150], &[3u8; 100], &[]];
    assert_eq!(send_then_recv_mmsg(&tx, &rx, &mut p, &datagrams), (3, 1));
    for want in [&[1u8; 10][..], &[3u8; 100], &[]] {
        let len = c.try_pop(&mut buf).unwrap().unwrap();
        assert_eq!(&buf[..len], want);
    }
    assert_eq!(c.try_pop(&mut buf), Ok(None));

    // Six free slots, ten datagrams: six come in, four stay in the socket.
    p.push_slice(&[b"a", b"b"]).unwrap();
    for i in 0..10u8 {
        tx.send(&[i; 7]).unwrap();
    }
    assert_eq!(p.recv_mmsg(&rx, 32).unwrap().pushed, 6);
    assert_eq!(
        p.recv_mmsg(&rx, 32).unwrap(),
        Received::default(),
        "a full queue returns at once"
    );
    let mut wait = crate::YieldBackoff::default();
    assert_eq!(p.wait_for_space(&mut wait, Duration::from_millis(20)), 0);
    assert_eq!(c.pop_slice(&mut [[0u8; 100]; 2], &mut [0; 2]), Ok(2));
    assert_eq!(p.wait_for_space(&mut wait, Duration::from_secs(10)), 2);
    assert_eq!(p.recv_mmsg(&rx, 0).unwrap(), Received::default());
    assert_eq!(p.recv_mmsg(&rx, 1).unwrap().pushed, 1, "max is a bound");
    assert_eq!(c.pop_slice(&mut [[0u8; 100]; 8], &mut [0; 8]), Ok(7));
    assert_eq!(p.recv_mmsg(&rx, 32).unwrap().pushed, 3);
    for i in 7..10u8 {
        assert_eq!(c.try_pop(&mut buf), Ok(Some(7)));
        assert_eq!(buf[..7], [i; 7]);
    }
    assert_eq!(
        p.recv_mmsg(&rx, 32).unwrap_err().kind(),
        io::ErrorKind::WouldBlock
    );

    // A queue of u64s takes only 8-byte datagrams.
    let path = TmpPath::new("bytes-queue-recv-mmsg-typed");
    drop(SpscProducer::<u64>::create(&path, 4).unwrap());
    let mut bp = SpscBytesProducer::open(&path).unwrap();
    let datagrams = [&5u64.to_ne_bytes()[..], b"short", &6u64.to_ne_bytes()];
    assert_eq!(send_then_recv_mmsg(&tx, &rx, &mut bp, &datagrams), (2, 1));
    let mut tc = SpscConsumer::<u64>::open(&path).unwrap();
    assert_eq!(
        (tc.try_pop(), tc.try_pop(), tc.try_pop()),
        (Ok(Some(5)), Ok(Some(6)), Ok(None))
    );
}

#[test]
fn datagrams_received_into_the_slots_move_through_in_order() {
    // recvmmsg straight into the free slots, one index update per call; a full queue waits
    // for the consumer.
    let mut wait = crate::FutexWait::default();
    datagrams_through_a_queue(|rx, p| match p.recv_mmsg(rx, 32) {
        Ok(r) if r.pushed == 0 => {
            assert!(p.wait_for_space(&mut wait, Duration::from_secs(10)) > 0);
            0
        }
        Ok(r) => {
            assert_eq!(r.dropped, 0);
            r.pushed as u32
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
        Err(e) => panic!("recv_mmsg: {e}"),
    });
}

/// The item of position `i`: 0 to 20 bytes, each telling its position.
fn nth_item(i: u64) -> Vec<u8> {
    let len = (i.wrapping_mul(7919) % 21) as usize;
    (0..len)
        .map(|k| (i as u8).wrapping_add((k as u8).wrapping_mul(31)))
        .collect()
}

#[test]
fn mixed_lengths_move_in_order_through_batches_across_the_wrap_with_lazy_hand_backs() {
    // Random batches and single pushes and pops of items of 0 to 20 bytes into buffers of 0
    // to 23 bytes, on queues of 1 to 64 slots, with single pops handing their slots back at
    // once, every 3 or every 64: every item comes once, in order, with its length; a buffer
    // too small stops a batch at that item (an error only when it is the first) and leaves
    // it in the queue; the producer never gets more room than the items popped.
    for cap in [1u64, 2, 8, 64] {
        for every in [1u64, 3, 64] {
            let (mut p, mut c) = spsc_bytes_channel(cap, 20).unwrap();
            c.set_release_every(every);
            let (mut next_in, mut next_out) = (0u64, 0u64);
            let mut x = 0x1234_5678_9abc_def1 ^ cap ^ (every << 8);
            for _ in 0..3_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let room = cap - (next_in - next_out);
                let want = ((x >> 8) % (2 * cap + 2)) as usize;
                match x % 4 {
                    0 => {
                        let items: Vec<Vec<u8>> =
                            (next_in..next_in + want as u64).map(nth_item).collect();
                        let n = p.push_slice(&items).unwrap() as u64;
                        assert!(n <= room.min(want as u64), "{n} pushed, room {room}");
                        next_in += n;
                    }
                    1 => match p.try_push(&nth_item(next_in)) {
                        Ok(()) => {
                            assert!(room > 0);
                            next_in += 1;
                        }
                        Err(e) => assert_eq!(e, PushError::Full),
                    },
                    2 => {
                        let mut bufs: Vec<Vec<u8>> = (0..want)
                            .map(|k| vec![0xee; ((x >> (16 + k % 40)) % 24) as usize])
                            .collect();
                        let mut lens = vec![usize::MAX; want];
                        match c.pop_slice(&mut bufs, &mut lens) {
                            Ok(n) => {
                                for k in 0..n {
                                    assert_eq!(bufs[k][..lens[k]], nth_item(next_out));
                                    next_out += 1;
                                }
                                if n < want && next_out < next_in {
                                    assert!(bufs[n].len() < nth_item(next_out).len());
                                }
                                assert!(lens[n..].iter().all(|l| *l == usize::MAX));
                            }
                            Err(e) => assert_eq!(
                                e,
                                PopError::BufferTooSmall {
                                    len: bufs[0].len(),
                                    need: nth_item(next_out).len()
                                }
                            ),
                        }
                    }
                    _ => {
                        let mut buf = vec![0u8; want % 24];
                        match c.try_pop(&mut buf) {
                            Ok(Some(n)) => {
                                assert_eq!(buf[..n], nth_item(next_out));
                                next_out += 1;
                            }
                            Ok(None) => assert_eq!(next_in, next_out),
                            Err(e) => assert_eq!(
                                e,
                                PopError::BufferTooSmall {
                                    len: buf.len(),
                                    need: nth_item(next_out).len()
                                }
                            ),
                        }
                    }
                }
                if x % 97 == 0 {
                    c.release();
                    assert_eq!(p.free(), cap - (next_in - next_out));
                }
            }
            assert!(
                next_out > 150,
                "{cap} slots, every {every}: {next_out} moved"
            );
        }
    }
}

/// A socket shut down for reading (how another thread stops a receiver blocked on it)
/// hands `recvmmsg` an end of stream, which the kernel reports as one zero-length message
/// with no sender: that is no datagram, and must neither be pushed as an empty item nor
/// come again on every call, but end the ingest with an error that says so.
#[test]
fn recv_mmsg_on_a_socket_shut_down_for_reading_pushes_nothing_and_says_so() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.send_to(b"before", rx.local_addr().unwrap()).unwrap();
    tx.send_to(b"", rx.local_addr().unwrap()).unwrap();
    let (mut p, mut c) = spsc_bytes_channel(8, 64).unwrap();
    // A real empty datagram is still an item.
    assert_eq!(
        p.recv_mmsg(&rx, 32).unwrap(),
        Received {
            pushed: 2,
            dropped: 0
        }
    );
    // Unconnected UDP: the call reports ENOTCONN, yet marks the socket shut down.
    // SAFETY: shutdown on a socket we own changes only its state.
    let _ = unsafe { libc::shutdown(std::os::fd::AsRawFd::as_raw_fd(&rx), libc::SHUT_RD) };
    let t0 = Instant::now();
    for _ in 0..3 {
        let e = p.recv_mmsg(&rx, 32).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        assert!(e.to_string().contains("shut down"), "{e}");
    }
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let mut buf = [0u8; 64];
    assert_eq!(c.try_pop(&mut buf), Ok(Some(6)));
    assert_eq!(c.try_pop(&mut buf), Ok(Some(0)));
    assert_eq!(
        c.try_pop(&mut buf),
        Ok(None),
        "the end of stream became an item"
    );

    let mut batch = RecvBatch::new(4, 64);
    let e = batch.recv(&rx).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
    assert!(batch.is_empty());
}

/// An IPv6 socket works as an IPv4 one: its datagrams (even empty ones, whose sender is
/// all that tells them from a shutdown) come into the queue, and `RecvBatch`, which keeps
/// IPv4 senders only, reports none rather than a garbled one from the longer address.
#[test]
fn recv_mmsg_takes_datagrams_on_an_ipv6_socket() {
    let Ok(rx) = UdpSocket::bind("[::1]:0") else {
        eprintln!("no IPv6 loopback here: skipped");
        return;
    };
    rx.set_nonblocking(true).unwrap();
    let tx = UdpSocket::bind("[::1]:0").unwrap();
    tx.connect(rx.local_addr().unwrap()).unwrap();
    let (mut p, mut c) = spsc_bytes_channel(4, 16).unwrap();
    for d in [&b"six"[..], b"", &[9u8; 17]] {
        tx.send(d).unwrap();
    }
    assert_eq!(
        p.recv_mmsg(&rx, 32).unwrap(),
        Received {
            pushed: 2,
            dropped: 1
        }
    );
    let mut buf = [0u8; 16];
    assert_eq!(c.try_pop(&mut buf), Ok(Some(3)));
    assert_eq!(&buf[..3], b"six");
    assert_eq!(c.try_pop(&mut buf), Ok(Some(0)));
    assert_eq!(c.try_pop(&mut buf), Ok(None));

    tx.send(b"v6").unwrap();
    let mut batch = RecvBatch::new(4, 16);
    assert_eq!(batch.recv(&rx).unwrap(), 1);
    assert_eq!(batch.get(0), Some((Some(&b"v6"[..]), None)));
}
