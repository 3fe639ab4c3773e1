//! A userspace impairment proxy for the network-namespace tests: relays one TCP port
//! unchanged and one UDP port with delay, jitter, reordering, loss and duplication on the
//! upstream → client direction (the source's DATA towards a mirror). The client's datagrams
//! (PUNCHes) go upstream unchanged from a socket of the proxy's own, and what comes back on it
//! is released to the last client from the listening socket, so to the mirror the proxy *is*
//! the source.
//!
//! ```text
//! impair_proxy --tcp=LISTEN=UPSTREAM --udp=LISTEN=UPSTREAM [--delay-us=N] [--jitter-us=N]
//!              [--reorder-pct=N] [--loss-pct=N] [--dup-pct=N] [--seed=N] [--max-queue=N]
//! ```
//! A listen port 0 picks a free port; the bound addresses are printed first
//! (`impair_proxy: tcp ADDR -> UPSTREAM`, `impair_proxy: udp ADDR -> UPSTREAM`).
//! Runs until SIGINT/SIGTERM, then prints
//! `impair_proxy: done: N received, N forwarded, N delayed, N reordered, N duplicated, N lost, N overflowed`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(Debug)]
struct Opts {
    tcp: Option<(SocketAddr, SocketAddr)>,
    udp: (SocketAddr, SocketAddr),
    delay: Duration,
    jitter: Duration,
    reorder_pct: u64,
    loss_pct: u64,
    dup_pct: u64,
    seed: u64,
    max_queue: usize,
}

fn pair(v: &str) -> Result<(SocketAddr, SocketAddr), String> {
    let (a, b) = v
        .split_once('=')
        .ok_or_else(|| format!("'{v}' is not LISTEN=UPSTREAM"))?;
    let p = |s: &str| s.parse::<SocketAddr>().map_err(|e| format!("'{s}': {e}"));
    Ok((p(a)?, p(b)?))
}

fn parse(args: impl Iterator<Item = String>) -> Result<Opts, String> {
    let mut o = Opts {
        tcp: None,
        udp: ("0.0.0.0:0".parse().unwrap(), "0.0.0.0:0".parse().unwrap()),
        delay: Duration::ZERO,
        jitter: Duration::ZERO,
        reorder_pct: 0,
        loss_pct: 0,
        dup_pct: 0,
        seed: 1,
        max_queue: 4096,
    };
    let mut have_udp = false;
    for a in args {
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| format!("'{a}' is not --KEY=VALUE"))?;
        let num = || v.parse::<u64>().map_err(|e| format!("{k}: '{v}': {e}"));
        let pct = || {
            num().and_then(|n| {
                if n <= 100 {
                    Ok(n)
                } else {
                    Err(format!("{k}: {n} is not a percentage"))
                }
            })
        };
        match k {
            "--tcp" => o.tcp = Some(pair(v)?),
            "--udp" => {
                o.udp = pair(v)?;
                have_udp = true;
            }
            "--delay-us" => o.delay = Duration::from_micros(num()?),
            "--jitter-us" => o.jitter = Duration::from_micros(num()?),
            "--reorder-pct" => o.reorder_pct = pct()?,
            "--loss-pct" => o.loss_pct = pct()?,
            "--dup-pct" => o.dup_pct = pct()?,
            "--seed" => o.seed = num()?.max(1),
            "--max-queue" => o.max_queue = num()?.clamp(1, 1 << 20) as usize,
            _ => return Err(format!("unknown option {k}")),
        }
    }
    if !have_udp {
        return Err("--udp=LISTEN=UPSTREAM is required".into());
    }
    Ok(o)
}

/// xorshift64*: deterministic for a seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pct(&mut self, p: u64) -> bool {
        p > 0 && self.next() % 100 < p
    }
    fn upto(&mut self, d: Duration) -> Duration {
        let us = d.as_micros() as u64;
        if us == 0 {
            Duration::ZERO
        } else {
            Duration::from_micros(self.next() % (us + 1))
        }
    }
}

/// Copies one direction of a TCP relay until EOF or an error.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

fn tcp_relay(listen: SocketAddr, upstream: SocketAddr) -> std::io::Result<()> {
    let l = TcpListener::bind(listen)?;
    eprintln!("impair_proxy: tcp {} -> {upstream}", l.local_addr()?);
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let Ok(u) = TcpStream::connect_timeout(&upstream, Duration::from_secs(2)) else {
                continue; // dropping `c` closes it: the mirror retries
            };
            let _ = (c.set_nodelay(true), u.set_nodelay(true));
            let (Ok(c2), Ok(u2)) = (c.try_clone(), u.try_clone()) else {
                continue;
            };
            std::thread::spawn(move || pump(c, u));
            std::thread::spawn(move || pump(u2, c2));
        }
    });
    Ok(())
}

#[derive(Default)]
struct Counts {
    received: u64,
    forwarded: u64,
    delayed: u64,
    reordered: u64,
    duplicated: u64,
    lost: u64,
    overflowed: u64,
}

/// One queued datagram: release time, arrival index, bytes.
type Held = Reverse<(Instant, u64, Vec<u8>)>;

fn udp_relay(o: &Opts) -> std::io::Result<Counts> {
    let stop = ringwire::replica::signal::install();
    let down = UdpSocket::bind(o.udp.0)?;
    let up = UdpSocket::bind(SocketAddr::from(([0, 0, 0, 0], 0)))?;
    eprintln!("impair_proxy: udp {} -> {}", down.local_addr()?, o.udp.1);
    down.set_nonblocking(true)?;
    up.set_nonblocking(true)?;
    let mut rng = Rng(o.seed);
    let mut c = Counts::default();
    let mut client: Option<SocketAddr> = None;
    let mut queue: BinaryHeap<Held> = BinaryHeap::new();
    let mut buf = vec![0u8; 65536];
    let mut arrivals = 0u64;
    let mut max_sent: Option<u64> = None;
    // Relaxed: a plain flag set by the signal handler.
    while !stop.load(Ordering::Relaxed) {
        let mut busy = false;
        // Client → upstream, unchanged (bounded per round).
        for _ in 0..64 {
            match down.recv_from(&mut buf) {
                Ok((n, from)) => {
                    busy = true;
                    client = Some(from);
                    let _ = up.send_to(&buf[..n], o.udp.1);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => break,
            }
        }
        // Upstream → client, impaired.
        for _ in 0..256 {
            match up.recv_from(&mut buf) {
                Ok((n, from)) if from == o.udp.1 => {
                    busy = true;
                    c.received += 1;
                    if rng.pct(o.loss_pct) {
                        c.lost += 1;
                        continue;
                    }
                    let copies = if rng.pct(o.dup_pct) { 2 } else { 1 };
                    c.duplicated += copies - 1;
                    for _ in 0..copies {
                        if queue.len() >= o.max_queue {
                            c.overflowed += 1;
                            continue;
                        }
                        let mut d = o.delay + rng.upto(o.jitter);
                        if rng.pct(o.reorder_pct) {
                            d += o.jitter.max(Duration::from_millis(1)) * 2;
                        }
                        arrivals += 1;
                        queue.push(Reverse((Instant::now() + d, arrivals, buf[..n].to_vec())));
                    }
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => break,
            }
        }
        let now = Instant::now();
        while queue.peek().is_some_and(|Reverse((t, _, _))| *t <= now) {
            let Some(Reverse((_, idx, bytes))) = queue.pop() else {
                break;
            };
            busy = true;
            if let Some(to) = client {
                let _ = down.send_to(&bytes, to);
                c.forwarded += 1;
                if !o.delay.is_zero() || !o.jitter.is_zero() {
                    c.delayed += 1;
                }
                if max_sent.is_some_and(|m| idx < m) {
                    c.reordered += 1;
                }
                max_sent = Some(max_sent.map_or(idx, |m| m.max(idx)));
            }
        }
        if !busy {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    Ok(c)
}

fn main() -> ExitCode {
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("impair_proxy: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some((l, u)) = o.tcp
        && let Err(e) = tcp_relay(l, u)
    {
        eprintln!("impair_proxy: tcp {l}: {e}");
        return ExitCode::FAILURE;
    }
    match udp_relay(&o) {
        Ok(c) => {
            eprintln!(
                "impair_proxy: done: {} received, {} forwarded, {} delayed, {} reordered, {} duplicated, {} lost, {} overflowed",
                c.received, c.forwarded, c.delayed, c.reordered, c.duplicated, c.lost, c.overflowed
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("impair_proxy: udp {}: {e}", o.udp.0);
            ExitCode::FAILURE
        }
    }
}
