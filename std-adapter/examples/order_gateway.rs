//! An order gateway in the shape of a batch-auction exchange: orders arrive as UDP
//! datagrams, an ingest thread has the kernel write them straight into an SPSC queue's free
//! slots with `recvmmsg` (`SpscBytesProducer::recv_mmsg`), and a matching thread drains the
//! queue every 100 ms and crosses the book at the bid. A simulator thread sends the orders
//! over loopback at a fixed rate.
//!
//! ```sh
//! cargo run --release -p ringwire --example order_gateway -- --orders 500000 --rate 200000
//! ```
//!
//! It prints what arrived (and what the socket lost, if the ingest fell behind), how many
//! datagrams each `recvmmsg` brought, and the auctions' totals. It exits with an error if an
//! order came twice or out of order.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use ringwire::queue::{SpscBytesConsumer, SpscBytesProducer, spsc_bytes_channel};
use ringwire::{FutexWait, bench::floor::pin_to};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

#[derive(Parser, Debug)]
#[command(about = "UDP orders → recvmmsg into an SPSC queue → a batch auction every interval")]
struct Args {
    /// Orders the simulator sends.
    #[arg(long, default_value_t = 500_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    orders: u64,
    /// Orders per second.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    rate: u64,
    /// Datagrams one `recvmmsg` may take.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=1024))]
    batch: u64,
    /// Slots in the queue (a power of two).
    #[arg(long, default_value_t = 65_536)]
    capacity: u64,
    /// Milliseconds between auctions.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    auction_ms: u64,
}

/// One order as it travels in a datagram.
#[derive(Clone, Copy, Debug, IntoBytes, FromBytes, Immutable, KnownLayout)]
#[repr(C)]
struct Order {
    seq: u64,
    /// In ticks.
    price: u64,
    qty: u32,
    /// 0 buy, 1 sell.
    side: u32,
}

/// The simulator's order `seq`: prices within ten ticks of 10,000, both sides.
fn order(seq: u64) -> Order {
    // A 64-bit mix of the sequence number, so a run is the same every time.
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    Order {
        seq,
        price: 9_990 + x % 21,
        qty: 1 + (x >> 8) as u32 % 100,
        side: (x >> 40) as u32 & 1,
    }
}

/// Sends `n` orders to `to` at `rate` per second, for at most a minute.
fn simulate(to: std::net::SocketAddr, n: u64, rate: u64) -> std::io::Result<(u64, Duration)> {
    let tx = UdpSocket::bind("127.0.0.1:0")?;
    tx.connect(to)?;
    let gap = Duration::from_nanos(1_000_000_000 / rate);
    let start = Instant::now();
    let mut sent = 0;
    while sent < n && start.elapsed() < Duration::from_secs(60) {
        let due = start + gap * sent as u32;
        while Instant::now() < due {
            std::hint::spin_loop();
        }
        tx.send(order(sent).as_bytes())?;
        sent += 1;
    }
    Ok((sent, start.elapsed()))
}

#[derive(Default)]
struct Ingest {
    received: u64,
    dropped: u64,
    calls: u64,
    full: u64,
}

/// Receives into the queue until the simulator is done and the socket stays quiet.
fn ingest(sock: &UdpSocket, p: &mut SpscBytesProducer, batch: usize, done: &AtomicBool) -> Ingest {
    let mut st = Ingest::default();
    let mut wait = FutexWait::default();
    loop {
        match p.recv_mmsg(sock, batch) {
            Ok(r) if r.pushed + r.dropped == 0 => {
                st.full += 1;
                p.wait_for_space(&mut wait, Duration::from_millis(100));
            }
            Ok(r) => {
                st.received += r.pushed as u64;
                st.dropped += r.dropped as u64;
                st.calls += 1;
            }
            // A signal while nothing had come: on Linux even a stop and continue (Ctrl-Z,
            // then `fg`) does this to a socket with a read timeout, handler or not. Nothing
            // was received, so the next call simply goes on.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // The read timeout: nothing for 50 ms.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if done.load(Ordering::Acquire) {
                    return st;
                }
            }
            Err(e) => {
                eprintln!("order_gateway: recvmmsg: {e}");
                return st;
            }
        }
    }
}

#[derive(Default)]
struct Book {
    buys: Vec<Order>,
    sells: Vec<Order>,
    auctions: u64,
    trades: u64,
    volume: u64,
    next_seq: u64,
    gaps: u64,
    out_of_order: u64,
}

impl Book {
    /// Takes one order off the queue, checking its place in the sequence.
    fn add(&mut self, bytes: &[u8]) {
        let Ok(o) = Order::read_from_bytes(bytes) else {
            self.out_of_order += 1;
            return;
        };
        if o.seq < self.next_seq {
            self.out_of_order += 1;
            return;
        }
        self.gaps += o.seq - self.next_seq;
        self.next_seq = o.seq + 1;
        if o.side == 0 {
            &mut self.buys
        } else {
            &mut self.sells
        }
        .push(o);
    }

    /// Crosses the book: highest bids against lowest offers, earliest first at a price,
    /// each trade at the bid. What does not cross rests for the next auction.
    fn auction(&mut self) {
        self.auctions += 1;
        self.buys
            .sort_by(|a, b| b.price.cmp(&a.price).then(a.seq.cmp(&b.seq)));
        self.sells
            .sort_by(|a, b| a.price.cmp(&b.price).then(a.seq.cmp(&b.seq)));
        let (mut b, mut s) = (0, 0);
        while b < self.buys.len()
            && s < self.sells.len()
            && self.buys[b].price >= self.sells[s].price
        {
            let q = self.buys[b].qty.min(self.sells[s].qty);
            self.trades += 1;
            self.volume += u64::from(q);
            self.buys[b].qty -= q;
            self.sells[s].qty -= q;
            b += usize::from(self.buys[b].qty == 0);
            s += usize::from(self.sells[s].qty == 0);
        }
        self.buys.drain(..b);
        self.sells.drain(..s);
    }
}

/// Every `every`, drains the queue into the book and runs an auction, until the ingest is
/// done and the queue is empty.
fn match_loop(c: &mut SpscBytesConsumer, every: Duration, done: &AtomicBool) -> Book {
    let mut book = Book::default();
    let mut bufs = vec![[0u8; 64]; 256];
    let mut lens = vec![0usize; 256];
    let mut tick = Instant::now() + every;
    loop {
        std::thread::sleep(tick.saturating_duration_since(Instant::now()));
        tick += every;
        let finished = done.load(Ordering::Acquire);
        loop {
            match c.pop_slice(&mut bufs, &mut lens) {
                Ok(0) => break,
                Ok(n) => (0..n).for_each(|i| book.add(&bufs[i][..lens[i]])),
                Err(e) => {
                    eprintln!("order_gateway: queue: {e}");
                    return book;
                }
            }
        }
        book.auction();
        if finished {
            return book;
        }
    }
}

fn main() -> std::process::ExitCode {
    match run(Args::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("order_gateway: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let sock = UdpSocket::bind("127.0.0.1:0")?;
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    // Room for bursts the ingest has not taken yet (capped by net.core.rmem_max).
    let _ = socket2::SockRef::from(&sock).set_recv_buffer_size(4 << 20);
    let to = sock.local_addr()?;
    let (mut p, mut c) = spsc_bytes_channel(a.capacity, 64)?;
    let (sim_done, ingest_done) = (AtomicBool::new(false), AtomicBool::new(false));

    let (sent, ingest, book) = std::thread::scope(|s| {
        let sim = s.spawn(|| {
            pin_to(1);
            let r = simulate(to, a.orders, a.rate);
            sim_done.store(true, Ordering::Release);
            r
        });
        let gateway = s.spawn(|| {
            pin_to(0);
            let st = ingest(&sock, &mut p, a.batch as usize, &sim_done);
            ingest_done.store(true, Ordering::Release);
            st
        });
        let matcher =
            s.spawn(|| match_loop(&mut c, Duration::from_millis(a.auction_ms), &ingest_done));
        (sim.join(), gateway.join(), matcher.join())
    });
    let (sent, secs) = sent.map_err(|_| "simulator panicked")??;
    let ingest = ingest.map_err(|_| "ingest panicked")?;
    let book = book.map_err(|_| "matcher panicked")?;

    println!(
        "order_gateway: {sent} orders sent at {}/s over loopback UDP in {:.2} s",
        a.rate,
        secs.as_secs_f64()
    );
    println!(
        "ingest: {} received ({:.2} %), {} lost in the socket, {} dropped as too long; {} recvmmsg calls, {:.1} datagrams per call; queue full {} times",
        ingest.received,
        100.0 * ingest.received as f64 / sent.max(1) as f64,
        sent.saturating_sub(ingest.received + ingest.dropped),
        ingest.dropped,
        ingest.calls,
        ingest.received as f64 / ingest.calls.max(1) as f64,
        ingest.full
    );
    println!(
        "auctions: {} every {} ms; {} trades, volume {}; resting: {} buys, {} sells",
        book.auctions,
        a.auction_ms,
        book.trades,
        book.volume,
        book.buys.len(),
        book.sells.len()
    );
    println!(
        "sequence: {} gaps (lost in the socket), {} out of order or twice",
        book.gaps, book.out_of_order
    );
    if book.out_of_order > 0 {
        return Err("orders came out of order or twice".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn on_usr1(_: libc::c_int) {}

    /// Signals landing while the ingest waits on the socket (`SIGUSR1` to its thread here;
    /// a stop and continue does the same) interrupt `recvmmsg` with EINTR, which must not
    /// end the ingest: the orders sent after them still all come in.
    #[test]
    fn the_ingest_goes_on_after_a_signal() {
        // SAFETY: a handler that does nothing, installed without SA_RESTART (which sockets
        // with a read timeout ignore anyway).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_usr1 as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
        }
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let to = sock.local_addr().unwrap();
        let (mut p, mut c) = spsc_bytes_channel(64, 64).unwrap();
        let done = AtomicBool::new(false);
        let st = std::thread::scope(|s| {
            let (tid_tx, tid_rx) = std::sync::mpsc::channel();
            let (p, done) = (&mut p, &done);
            let gateway = s.spawn(move || {
                // SAFETY: pthread_self has no preconditions.
                tid_tx.send(unsafe { libc::pthread_self() }).unwrap();
                ingest(&sock, p, 32, done)
            });
            let thread = tid_rx.recv().unwrap();
            // Many signals over 200 ms: most land while the ingest sleeps in recvmmsg.
            for _ in 0..200 {
                if gateway.is_finished() {
                    break;
                }
                // SAFETY: the thread is alive (joined only below) and handles SIGUSR1.
                unsafe { libc::pthread_kill(thread, libc::SIGUSR1) };
                std::thread::sleep(Duration::from_millis(1));
            }
            let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
            for seq in 0..10 {
                tx.send_to(order(seq).as_bytes(), to).unwrap();
            }
            std::thread::sleep(Duration::from_millis(100));
            done.store(true, Ordering::Release);
            gateway.join().unwrap()
        });
        assert_eq!(st.received, 10, "the ingest stopped early");
        let mut buf = [0u8; 64];
        for seq in 0..10 {
            let len = c.try_pop(&mut buf).unwrap().unwrap();
            assert_eq!(Order::read_from_bytes(&buf[..len]).unwrap().seq, seq);
        }
    }
}
