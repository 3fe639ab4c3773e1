//! Datagram ingest: UDP datagrams waiting in a loopback socket go into an SPSC queue of
//! byte strings (the order gateway of issue 4: "UDP ingest with recvmmsg into an SPSC
//! ring"), three ways, in one run:
//!
//! * `ingest/{len}/ringwire`: [`SpscBytesProducer::recv_mmsg`], one `recvmmsg` per 32
//!   datagrams straight into the queue's free slots, then one index update.
//! * `ingest/{len}/recvmmsg_copy`: one `recvmmsg` per 32 datagrams into [`RecvBatch`]'s
//!   buffers, then one `push_slice` (one index update) per batch.
//! * `ingest/{len}/recv_from`: one `recv_from` per datagram into a buffer, then `try_push`;
//!   the plain way.
//!
//! Each round sends 128 datagrams of `len` bytes (not timed); they wait in the socket, whose
//! receive buffer is raised to hold them (loopback delivers during the send). The timed part
//! receives all of them into the empty queue on one thread. The consumer then drains the
//! queue (not timed) and checks every datagram's number and length, so a broken path fails
//! the run instead of producing a number. Time per datagram.
//!
//! `cargo bench -p ringwire-tests --bench ingest -- --warm-up-time 1 --measurement-time 3`

use std::io;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use ringwire::net::mmsg::RecvBatch;
use ringwire::queue::{SpscBytesConsumer, SpscBytesProducer, spsc_bytes_channel};

/// Datagrams per round: well inside a 1 MiB receive buffer even at 512 bytes each.
const ROUND: u64 = 128;
/// Datagrams per `recvmmsg`.
const BATCH: usize = 32;

/// One way of moving the datagrams waiting in `rx` into `p`: returns how many it moved in
/// one call (0 when none was waiting yet).
type Ingest = fn(&mut Paths, &UdpSocket, &mut SpscBytesProducer) -> io::Result<usize>;

/// The buffers of the copying paths.
struct Paths {
    one: Vec<u8>,
    batch: RecvBatch,
}

fn recv_from(b: &mut Paths, rx: &UdpSocket, p: &mut SpscBytesProducer) -> io::Result<usize> {
    let (n, _from) = rx.recv_from(&mut b.one)?;
    p.try_push(&b.one[..n])
        .map_err(|e| io::Error::other(format!("push: {e}")))?;
    Ok(1)
}

fn recv_batch_push_slice(
    b: &mut Paths,
    rx: &UdpSocket,
    p: &mut SpscBytesProducer,
) -> io::Result<usize> {
    let n = b.batch.recv(rx)?;
    let mut items = [&[][..]; BATCH];
    for (i, item) in items.iter_mut().enumerate().take(n) {
        *item = b.batch.get(i).and_then(|(bytes, _)| bytes).unwrap_or(&[]);
    }
    p.push_slice(&items[..n])
        .map_err(|e| io::Error::other(format!("push: {e}")))
}

fn recv_mmsg_in_place(
    _: &mut Paths,
    rx: &UdpSocket,
    p: &mut SpscBytesProducer,
) -> io::Result<usize> {
    Ok(p.recv_mmsg(rx, BATCH)?.pushed)
}

/// Datagram `seq`: its number, then filler, `len` bytes in all.
fn datagram(seq: u64, len: usize, buf: &mut [u8]) -> &[u8] {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    &buf[..len]
}

struct Rig {
    rx: UdpSocket,
    tx: UdpSocket,
    p: SpscBytesProducer,
    c: SpscBytesConsumer,
    paths: Paths,
    seq: u64,
    out: Vec<[u8; 1024]>,
    lens: Vec<usize>,
}

impl Rig {
    fn new() -> Rig {
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        rx.set_nonblocking(true).expect("nonblocking");
        // Best effort: the kernel caps it at net.core.rmem_max; a round that does not fit
        // fails the run below instead of timing a partial round.
        let _ = socket2::SockRef::from(&rx).set_recv_buffer_size(1 << 20);
        let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        tx.connect(rx.local_addr().expect("addr")).expect("connect");
        let (p, c) = spsc_bytes_channel(ROUND, 1024).expect("queue");
        Rig {
            rx,
            tx,
            p,
            c,
            paths: Paths {
                one: vec![0; 2048],
                batch: RecvBatch::new(BATCH, 2048),
            },
            seq: 0,
            out: vec![[0; 1024]; ROUND as usize],
            lens: vec![0; ROUND as usize],
        }
    }

    /// Sends `k` datagrams, times their ingest with `how`, drains and checks them.
    fn round(&mut self, k: u64, len: usize, how: Ingest) -> Duration {
        let mut buf = [0x5au8; 1024];
        for i in 0..k {
            self.tx
                .send(datagram(self.seq + i, len, &mut buf))
                .expect("send");
        }
        let start = Instant::now();
        let mut got = 0;
        while got < k as usize {
            match how(&mut self.paths, &self.rx, &mut self.p) {
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    assert!(
                        start.elapsed() < Duration::from_secs(1),
                        "only {got} of {k} datagrams arrived: the receive buffer dropped \
                         some (raise net.core.rmem_max)"
                    );
                }
                Err(e) => panic!("ingest: {e}"),
            }
        }
        let spent = start.elapsed();
        let n = self
            .c
            .pop_slice(&mut self.out, &mut self.lens)
            .expect("drain");
        assert_eq!(n as u64, k, "datagrams in the queue");
        for (out, &l) in self.out.iter().zip(&self.lens).take(n) {
            let seq = u64::from_le_bytes(out[..8].try_into().expect("8 bytes"));
            assert_eq!((seq, l), (self.seq, len), "datagram out of order or cut");
            self.seq += 1;
        }
        spent
    }
}

fn ingest(c: &mut Criterion) {
    let ways: [(&str, Ingest); 3] = [
        ("ringwire", recv_mmsg_in_place),
        ("recvmmsg_copy", recv_batch_push_slice),
        ("recv_from", recv_from),
    ];
    for len in [64usize, 512] {
        let mut g = c.benchmark_group(format!("ingest/{len}B"));
        g.throughput(Throughput::Elements(1));
        for (name, how) in ways {
            let mut rig = Rig::new();
            g.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    let mut spent = Duration::ZERO;
                    let mut left = iters;
                    while left > 0 {
                        let k = left.min(ROUND);
                        spent += rig.round(k, len, how);
                        left -= k;
                    }
                    spent
                })
            });
        }
        g.finish();
    }
}

criterion::criterion_group!(benches, ingest);
criterion::criterion_main!(benches);
