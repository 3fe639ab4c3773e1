//! The impairment proxy the network-namespace tests put on the unicast path, checked on
//! loopback (no root needed, so these run with the ordinary test suite): punches go upstream
//! unchanged, data comes back from the proxy's listening address delayed and reordered, loss
//! and duplication match the proxy's own counts, and the TCP relay carries bytes both ways.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::Duration;

use ringwire_tests::netns::count_in;

const N: u32 = 300;

/// The proxy process, killed on drop.
struct Proxy {
    child: Child,
    stderr: BufReader<ChildStderr>,
    tcp: Option<SocketAddr>,
    udp: SocketAddr,
}

impl Proxy {
    fn start(args: &[String]) -> Proxy {
        let mut child = Command::new(env!("CARGO_BIN_EXE_impair_proxy"))
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn impair_proxy");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let (mut tcp, mut udp) = (None, None);
        while udp.is_none() {
            let mut line = String::new();
            assert!(
                stderr.read_line(&mut line).expect("read") > 0,
                "proxy exited"
            );
            let addr = || line.split_whitespace().nth(2).unwrap().parse().unwrap();
            if line.starts_with("impair_proxy: tcp ") {
                tcp = Some(addr());
            } else if line.starts_with("impair_proxy: udp ") {
                udp = Some(addr());
            }
        }
        Proxy {
            child,
            stderr,
            tcp,
            udp: udp.unwrap(),
        }
    }

    /// SIGTERM and the final counters line.
    fn finish(mut self) -> String {
        let st = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(st.success());
        let mut rest = String::new();
        self.stderr.read_to_string(&mut rest).expect("read");
        assert!(self.child.wait().expect("wait").success(), "{rest}");
        rest
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn udp_local() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    s
}

/// Punches through the proxy, sends `N` numbered datagrams back, returns the numbers the
/// client received (in arrival order) and the proxy's counters line.
fn run(extra: &[&str]) -> (Vec<u32>, String) {
    let upstream = udp_local();
    let mut args = vec![format!(
        "--udp=127.0.0.1:0={}",
        upstream.local_addr().unwrap()
    )];
    args.extend(extra.iter().map(|s| s.to_string()));
    let proxy = Proxy::start(&args);
    let client = udp_local();
    client.send_to(b"punch", proxy.udp).unwrap();
    let mut buf = [0u8; 64];
    // A read that a stop and continue of this process interrupts (EINTR even without a
    // signal handler, on a socket with a read timeout) is tried again.
    let (n, relay) = loop {
        match upstream.recv_from(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            r => break r.expect("the punch went upstream"),
        }
    };
    assert_eq!(&buf[..n], b"punch");
    assert_ne!(
        relay, proxy.udp,
        "upstream traffic uses the proxy's own socket"
    );
    // Receive concurrently: a burst of small datagrams would overflow an unread socket.
    // The receiver ends at its first read timeout (500 ms) after the last send, or after
    // 30 s in all; a timeout while datagrams are still being sent (a loaded machine that
    // stalled the proxy) and an interrupted read do not end it.
    let sent_all = std::sync::atomic::AtomicBool::new(false);
    let got = std::thread::scope(|sc| {
        let rx = sc.spawn(|| {
            let mut buf = [0u8; 64];
            let mut got = Vec::new();
            let t0 = std::time::Instant::now();
            while t0.elapsed() < Duration::from_secs(30) {
                // Acquire: loaded before the read, so a timeout after it covers the last send.
                let done = sent_all.load(std::sync::atomic::Ordering::Acquire);
                match client.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        assert_eq!(
                            from, proxy.udp,
                            "data comes from the address the client punched"
                        );
                        assert_eq!(n, 4);
                        got.push(u32::from_le_bytes(buf[..4].try_into().unwrap()));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        if done {
                            break;
                        }
                    }
                    Err(e) => panic!("recv_from: {e}"),
                }
            }
            got
        });
        for i in 0..N {
            upstream.send_to(&i.to_le_bytes(), relay).unwrap();
            if i % 50 == 49 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // Release: pairs with the receiver's acquire load.
        sent_all.store(true, std::sync::atomic::Ordering::Release);
        rx.join().unwrap()
    });
    (got, proxy.finish())
}

fn counter(log: &str, what: &str) -> u64 {
    count_in(log, "impair_proxy: done:", what).unwrap_or_else(|| panic!("{what} in {log}"))
}

#[test]
fn delays_and_reorders_without_losing() {
    let (got, log) = run(&[
        "--delay-us=1000",
        "--jitter-us=2000",
        "--reorder-pct=20",
        "--seed=3",
    ]);
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..N).collect::<Vec<_>>(), "every datagram once");
    assert_ne!(got, sorted, "some arrived out of order");
    assert_eq!(counter(&log, "received"), u64::from(N));
    assert_eq!(counter(&log, "forwarded"), u64::from(N));
    assert!(counter(&log, "reordered") > 0, "{log}");
    assert_eq!(counter(&log, "lost") + counter(&log, "duplicated"), 0);
}

#[test]
fn loss_and_duplication_match_the_counts() {
    let (got, log) = run(&["--loss-pct=30", "--dup-pct=30", "--seed=11"]);
    let (lost, dup) = (counter(&log, "lost"), counter(&log, "duplicated"));
    assert!(lost > 0 && dup > 0, "{log}");
    assert_eq!(
        counter(&log, "forwarded"),
        u64::from(N) - lost + dup,
        "{log}"
    );
    assert_eq!(got.len() as u64, u64::from(N) - lost + dup, "{log}");
    let mut distinct = got.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len() as u64, u64::from(N) - lost);
}

#[test]
fn tcp_is_relayed_both_ways() {
    let up = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = udp_local();
    let proxy = Proxy::start(&[
        format!("--tcp=127.0.0.1:0={}", up.local_addr().unwrap()),
        format!("--udp=127.0.0.1:0={}", upstream.local_addr().unwrap()),
    ]);
    let mut c = TcpStream::connect(proxy.tcp.expect("tcp address")).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (mut s, _) = up.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"hello source").unwrap();
    let mut b = [0u8; 12];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"hello source");
    s.write_all(b"hello mirror").unwrap();
    c.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"hello mirror");
    drop(s);
    assert_eq!(c.read(&mut b).unwrap(), 0, "the close is relayed");
    proxy.finish();
}

#[test]
fn bad_arguments_are_rejected() {
    for args in [
        &["--udp=127.0.0.1:0"][..],
        &["--udp=127.0.0.1:0=127.0.0.1:1", "--loss-pct=101"],
        &["--delay-us=5"],
        &["--udp=127.0.0.1:0=127.0.0.1:1", "--what=1"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_impair_proxy"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
}
