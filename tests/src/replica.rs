//! Settings shared by the loopback replication tests: one transport choice, the serve and
//! mirror options every such test starts from, and ringfire 0.5.2's server set up the same
//! way for the interop tests.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use ringfire::replication::{MulticastConfig as RfMulticast, ReplicaServer as RfServer};
use ringwire::ReadOnlyRing;
use ringwire::core::replicate::Start;
use ringwire::core::{SlotRead, oldest_retained};
use ringwire::replica::mirror::MirrorOptions;
use ringwire::replica::serve::ServeOptions;
use ringwire::{ReplicaError, ReplicaServer, ReplicaServerHandle};

/// A loopback address with a port nobody listens on now, for a server that must be able to
/// bind it again later: after a restart, or when the test starts it after other work (a
/// server bound to port 0 would get another port each time).
///
/// The port is not one the kernel hands out by itself. Ports of its ephemeral range (which
/// `bind` to port 0 and every `connect` draw from) are taken by the process's other tests
/// meanwhile: a client's local port (the server's bind then fails), or another test's
/// `free_addr` given the same port, whose server then serves that test's mirrors and this
/// one's. So the port is the next of one sequence per process (TCP and UDP alike), below
/// the ephemeral range, that can be bound now.
pub fn free_addr() -> SocketAddr {
    let port = free_port(|p| TcpListener::bind((Ipv4Addr::LOCALHOST, p)).is_ok());
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// A UDP port free right now on loopback (ringfire's unicast needs a fixed port), taken as
/// [`free_addr`] takes its TCP port.
pub fn free_udp_port() -> u16 {
    free_port(|p| UdpSocket::bind((Ipv4Addr::LOCALHOST, p)).is_ok())
}

/// The next port of one sequence per process (TCP and UDP alike), below the kernel's
/// ephemeral range, starting at a place chosen from the process id, for which `bindable`
/// holds: no two callers of the process get the same port.
fn free_port(bindable: impl Fn(u16) -> bool) -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (from, to) = ports_outside_ephemeral();
    let span = to - from;
    let start = std::process::id().wrapping_mul(2_654_435_761) % span;
    for _ in 0..span.min(1_000) {
        // Relaxed: a counter; each caller only needs a value no other caller got.
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (from + (start + k) % span) as u16;
        if bindable(port) {
            return port;
        }
    }
    panic!("no free loopback port in {from}..{to} after 1,000 tries");
}

/// Ports `[from, to)` outside the kernel's ephemeral range: below it (from 10,000, under
/// the many services registered lower), else above it.
fn ports_outside_ephemeral() -> (u32, u32) {
    const FLOOR: u32 = 10_000;
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok();
    let mut it = range
        .iter()
        .flat_map(|s| s.split_whitespace().map(str::parse::<u32>));
    let (low, high) = match (it.next(), it.next()) {
        (Some(Ok(l)), Some(Ok(h))) => (l, h),
        // Linux's default.
        _ => (32_768, 60_999),
    };
    if low >= FLOOR + 1_000 {
        (FLOOR, low)
    } else if high <= 64_535 {
        (high + 1, 65_536)
    } else {
        panic!("the ephemeral port range {low}-{high} leaves no room for test servers' ports")
    }
}

/// A UDP socket holding `port` on 0.0.0.0 without SO_REUSEADDR (std's default): until it is
/// dropped, a mirror's bind of that port for a multicast group fails (EADDRINUSE), a join
/// failure that can mend, which the mirror retries (an `--iface` address no interface of
/// this host has, used for this before, is now refused at start).
pub fn hold_udp_port(port: u16) -> UdpSocket {
    UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port))
        .unwrap_or_else(|e| panic!("hold UDP port {port}: {e}"))
}

/// How live data travels from serve to mirror.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// DATA over the TCP session.
    Tcp,
    /// UDP multicast on loopback (TTL 0).
    Multicast,
    /// UDP unicast to a punched port.
    Unicast,
}

/// Serve `path` on an ephemeral loopback port, quietly, sending each datagram `dup` times;
/// `group` is the multicast group and port used in [`Mode::Multicast`].
pub fn serve_options(path: &Path, mode: Mode, group: SocketAddrV4, dup: u8) -> ServeOptions {
    let mut o = ServeOptions::new(path, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    o.log = false;
    o.dup = dup;
    match mode {
        Mode::Tcp => {}
        Mode::Multicast => {
            o.multicast = Some(group);
            o.iface = Some(Ipv4Addr::LOCALHOST);
            o.ttl = 0;
        }
        Mode::Unicast => o.udp = Some(0),
    }
    o
}

/// Mirror `source` into `path` from the oldest record, quietly, reconnecting after 50 ms.
pub fn mirror_options(source: SocketAddr, path: &Path, mode: Mode) -> MirrorOptions {
    let mut o = MirrorOptions::new(source, path);
    o.start = Start::Oldest;
    o.unicast = mode == Mode::Unicast;
    o.iface = Ipv4Addr::LOCALHOST;
    o.log = false;
    o.reconnect = Duration::from_millis(50);
    o
}

/// A replicated record of `N` bytes (at least 8) for `seq`: the sequence, then bytes derived
/// from it, so a record that arrives torn or under another sequence fails the comparison.
pub fn payload<const N: usize>(seq: u64) -> [u8; N] {
    let mut p = [0u8; N];
    p[..8].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in p[8..].iter_mut().enumerate() {
        *b = (seq.wrapping_mul(0x9E37_79B9) >> (i % 8)) as u8 ^ i as u8;
    }
    p
}

/// The mirror ring at `mirror` holds records 1..=n with the bytes of the source ring at
/// `source` (each starting with [`payload`] of its sequence), in the source's geometry, and
/// nothing past n.
pub fn assert_mirrored<const N: usize>(source: &Path, mirror: &Path, n: u64) {
    let s = ReadOnlyRing::open(source).expect("source ring");
    let m = ReadOnlyRing::open(mirror).expect("mirror ring");
    assert_eq!(m.geometry().capacity, s.geometry().capacity, "capacity");
    assert_eq!(
        m.geometry().element_size,
        s.geometry().element_size,
        "element size"
    );
    assert_eq!(m.write_seq(), n, "mirror write_seq");
    assert!(oldest_retained(n, m.geometry().capacity) <= 1);
    let len = s.geometry().record_len();
    let (mut a, mut b) = (vec![0u8; len], vec![0u8; len]);
    for seq in 1..=n {
        assert_eq!(s.read_slot(seq, &mut a), SlotRead::Ok, "source {seq}");
        assert_eq!(m.read_slot(seq, &mut b), SlotRead::Ok, "mirror {seq}");
        assert_eq!(a, b, "bytes of {seq}");
        assert_eq!(&a[..N], &payload::<N>(seq), "payload of {seq}");
    }
}

/// Shuts a facade [`ReplicaServer`] down when dropped, also on a failed assertion.
pub struct StopOnDrop(pub ReplicaServerHandle);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.shutdown();
    }
}

/// Sets a stop flag when dropped. Made the first statement of a `std::thread::scope` whose
/// threads run until the flag is set (`Server::run`, `mirror::run`), it stops them also when
/// an assertion in the scope fails, so the scope ends and the test fails instead of hanging.
pub struct SetOnDrop<'a>(pub &'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Starts `server` on its own thread: its address, a guard that shuts it down, the thread.
pub fn spawn_server(
    server: ReplicaServer,
) -> (SocketAddr, StopOnDrop, JoinHandle<Result<(), ReplicaError>>) {
    let addr = server.local_addr().unwrap();
    let stop = StopOnDrop(server.shutdown_handle());
    (addr, stop, server.spawn().unwrap())
}

/// ringfire 0.5.2's server of the ring at `path`, listening on `ip` (any port), for
/// `mode`: multicast to `group` out through loopback (TTL 0), or unicast from a UDP port
/// free now in datagrams of 1472 bytes. Not running yet.
pub fn ringfire_server(path: &Path, ip: Ipv4Addr, mode: Mode, group: SocketAddrV4) -> RfServer {
    let s = RfServer::bind(path, (ip, 0)).expect("ringfire ReplicaServer::bind");
    match mode {
        Mode::Tcp => s,
        Mode::Multicast => s.multicast(
            RfMulticast::new(*group.ip(), group.port())
                .interface(Ipv4Addr::LOCALHOST)
                .ttl(0),
        ),
        Mode::Unicast => s.unicast(free_udp_port(), 1472),
    }
}

/// Starts ringfire's `server` for one mirror of `mode`. TCP: `serve_one` on its own thread,
/// which returns once that mirror hangs up (join it with [`assert_served`]). UDP:
/// `serve_one` sends no datagrams, so `spawn`, whose threads cannot be stopped and are left
/// to the end of the test process: `None`.
pub fn start_ringfire(server: RfServer, mode: Mode) -> Option<JoinHandle<Result<(), String>>> {
    if mode == Mode::Tcp {
        Some(std::thread::spawn(move || {
            server.serve_one().map_err(|e| e.to_string())
        }))
    } else {
        drop(server.spawn().expect("spawn ringfire's server"));
        None
    }
}

/// Joins a thread that ran `serve_one` (ringfire's, as [`start_ringfire`] starts it, or
/// ringwire's): it ended cleanly, or with the disconnect error that ringfire's CLI swallows
/// (its heartbeat write met the mirror's closed socket). `what` names the run in a failure.
pub fn assert_served(served: JoinHandle<Result<(), String>>, what: &str) {
    if let Err(m) = served.join().expect("serve_one's thread") {
        assert!(
            m.contains("reset") || m.contains("Broken pipe"),
            "{what}: serve_one: {m}"
        );
    }
}

/// A fake source's answer announcing UDP delivery: [`geometry_frame`] of 64 slots with
/// `flags` and UDP_FOLLOWS, then MULTICAST for `group` (0.0.0.0: unicast from `port`) and
/// `port`, session byte 7, token 1.
pub fn udp_handshake(flags: u8, group: [u8; 4], port: u16) -> Vec<u8> {
    use ringwire::core::wire::{GEOMETRY_UDP_FOLLOWS, MulticastRepr};
    let mut reply = geometry_frame(64, flags | GEOMETRY_UDP_FOLLOWS);
    let mut mc = [0u8; 32];
    let n = MulticastRepr {
        group,
        port,
        mtu: 1472,
        ttl: 0,
        session: 7,
        token: 1,
    }
    .emit(&mut mc)
    .expect("emit MULTICAST");
    reply.extend_from_slice(&mc[..n]);
    reply
}

/// A GEOMETRY frame a fake source sends: a fixed ring of `capacity` slots of 32 bytes
/// (lossy SPMC flags, no registry), first sequence 1, with frame `flags` (1: RESET).
pub fn geometry_frame(capacity: u64, flags: u8) -> Vec<u8> {
    use ringwire::core::wire::GeometryRepr;
    let mut out = vec![0u8; 128];
    let g = GeometryRepr {
        flags,
        seq: 1,
        capacity,
        element_size: 32,
        ring_flags: 0x0011,
        schema_sig: 0,
        registry_count: 0,
        slots_offset: 128,
        arena_offset: 0,
        arena_size: 0,
    };
    let n = g.emit(&mut out).expect("emit GEOMETRY");
    out.truncate(n);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_bindable_and_outside_the_ephemeral_range() {
        let (from, to) = ports_outside_ephemeral();
        let addrs: Vec<SocketAddr> = (0..50).map(|_| free_addr()).collect();
        let mut ports: Vec<u16> = addrs.iter().map(|a| a.port()).collect();
        // UDP ports come from the same sequence.
        ports.push(free_udp_port());
        for &p in &ports {
            assert!(
                (from..to).contains(&u32::from(p)),
                "port {p} outside {from}..{to}"
            );
        }
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), addrs.len() + 1, "a port handed out twice");
        // Each can be bound again (the caller's server will), and none is one bind(0) gives.
        let held: Vec<TcpListener> = addrs
            .iter()
            .map(|a| TcpListener::bind(a).expect("bind a free_addr port"))
            .collect();
        let auto = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let auto = u32::from(auto.local_addr().unwrap().port());
        assert!(
            !(from..to).contains(&auto),
            "bind(0) gave {auto}, inside {from}..{to}"
        );
        drop(held);
    }
}
