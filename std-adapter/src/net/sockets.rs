//! Socket setup for replication (spec §25), over socket2 and hidden behind plain std types.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream, UdpSocket};
use std::time::Duration;

use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, TcpKeepalive, Type};

/// Receive buffer a mirror asks for (the kernel may cap it; spec §22).
pub const MIRROR_RCVBUF: usize = 8 << 20;
/// Source TCP write timeout (spec §24): a session ends once its mirror has taken no byte
/// of a frame for this long.
pub const TCP_WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// A source session's connection idle this long gets its first keep-alive probe.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
/// Time between keep-alive probes.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2);
/// Unanswered keep-alive probes that end a connection.
pub const KEEPALIVE_PROBES: u32 = 3;
/// TCP_USER_TIMEOUT of a source session: data the mirror's host has not acknowledged
/// this long ends the connection. It matches the keep-alive's own limit (idle, then every
/// probe unanswered), which it overrides on Linux when both are set.
pub const TCP_USER_TIMEOUT: Duration = Duration::from_secs(16);

/// A mirror's UDP socket: `SO_REUSEADDR`, so that the mirrors of one host share a
/// multicast port (spec §25).
fn udp_socket() -> io::Result<Socket> {
    let s = udp_socket_exclusive()?;
    s.set_reuse_address(true)?;
    Ok(s)
}

/// A UDP socket without `SO_REUSEADDR` (the source's, as ringfire's): binding a port another
/// socket holds fails with `EADDRINUSE` instead of sharing it, and stealing the PUNCHes and
/// NAKs of the unicast mirrors of the `serve` already there.
fn udp_socket_exclusive() -> io::Result<Socket> {
    Socket::new(Domain::IPV4, Type::DGRAM.cloexec(), Some(Protocol::UDP))
}

/// The mirror's multicast socket: bound to `0.0.0.0:port` (not the group), joined to `group`
/// on `iface` (unspecified = the kernel's choice), a large receive buffer, non-blocking.
/// On Linux it receives only `group` (IP_MULTICAST_ALL off): by default a socket bound to
/// the port gets every group any socket of the host joined there, and another stream's
/// datagrams with our session byte (1 in 256) would be written into the replica. Elsewhere
/// (no such option) use one port per stream.
pub fn multicast_receiver(group: Ipv4Addr, port: u16, iface: Ipv4Addr) -> io::Result<UdpSocket> {
    if !group.is_multicast() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{group} is not an IPv4 multicast address"),
        ));
    }
    let s = udp_socket()?;
    let _ = s.set_recv_buffer_size(MIRROR_RCVBUF);
    #[cfg(target_os = "linux")]
    s.set_multicast_all_v4(false)?;
    s.bind(&SockAddr::from(SocketAddrV4::new(
        Ipv4Addr::UNSPECIFIED,
        port,
    )))?;
    s.join_multicast_v4(&group, &iface)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// The mirror's unicast socket: bound to `0.0.0.0:0`, large receive buffer, non-blocking.
pub fn unicast_receiver() -> io::Result<UdpSocket> {
    let s = udp_socket()?;
    let _ = s.set_recv_buffer_size(MIRROR_RCVBUF);
    s.bind(&SockAddr::from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)))?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// Multicast sending options of the source.
#[derive(Clone, Copy, Debug)]
pub struct MulticastOut {
    /// Hop limit.
    pub ttl: u8,
    /// Sending interface (`None` = the kernel's choice).
    pub iface: Option<Ipv4Addr>,
}

/// The source's UDP socket bound to `0.0.0.0:udp_port` ([`source_udp_on`]).
pub fn source_udp(udp_port: u16, mcast: Option<MulticastOut>) -> io::Result<UdpSocket> {
    source_udp_on(Ipv4Addr::UNSPECIFIED, udp_port, mcast)
}

/// The source's UDP socket: bound to `ip:udp_port` (port 0 = ephemeral; `ip` is `serve
/// --bind`'s address, or `0.0.0.0`), non-blocking; with multicast it sets TTL, loop-back on
/// (mirrors on the same host) and the interface. An error names the step and the address
/// it failed on (`bind 10.9.9.9:0: …`, `multicast interface 10.9.9.9: …`), with a hint when
/// the address is not one of this host's.
pub fn source_udp_on(
    ip: Ipv4Addr,
    udp_port: u16,
    mcast: Option<MulticastOut>,
) -> io::Result<UdpSocket> {
    let s = udp_socket_exclusive()?;
    let addr = SocketAddrV4::new(ip, udp_port);
    s.bind(&SockAddr::from(addr))
        .map_err(|e| with_address(e, format!("bind {addr}")))?;
    if let Some(m) = mcast {
        s.set_multicast_ttl_v4(u32::from(m.ttl))
            .map_err(|e| with_address(e, format!("multicast TTL {}", m.ttl)))?;
        s.set_multicast_loop_v4(true)?;
        if let Some(i) = m.iface {
            s.set_multicast_if_v4(&i)
                .map_err(|e| with_address(e, format!("multicast interface {i}")))?;
        }
    }
    let _ = s.set_send_buffer_size(4 << 20);
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// `e` prefixed with `what` (an operation and its address), keeping its kind; an address
/// that is not this host's (EADDRNOTAVAIL) says so.
fn with_address(e: io::Error, what: String) -> io::Error {
    let hint = if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) {
        " (not an address of this host?)"
    } else {
        ""
    };
    io::Error::new(e.kind(), format!("{what}: {e}{hint}"))
}

/// Whether the kernel takes the IPv4 address `addr` as a multicast interface now: the
/// lookup behind serve's `IP_MULTICAST_IF` and a mirror's join, asked on a scratch UDP
/// socket. It is `--iface`'s check at start. Beyond the interfaces' addresses (those
/// `getifaddrs` lists, secondary ones and a down interface's included) it takes the local
/// routing table's, which the kernel falls back on: all of 127/8 over a loopback that is
/// up, an AnyIP range (`ip route add local 10.0.0.0/24 dev lo`).
/// `Ok(false)` only for the kernel's "no such address" (`EADDRNOTAVAIL`).
pub fn multicast_if_usable(addr: Ipv4Addr) -> io::Result<bool> {
    match udp_socket_exclusive()?.set_multicast_if_v4(&addr) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A source session's TCP stream: TCP_NODELAY, TCP keep-alive ([`KEEPALIVE_IDLE`],
/// [`KEEPALIVE_INTERVAL`], [`KEEPALIVE_PROBES`]) and [`TCP_USER_TIMEOUT`].
///
/// No SO_SNDTIMEO: sessions write on a non-blocking socket, where the kernel ignores it;
/// the write timeout ([`TCP_WRITE_TIMEOUT`]) is kept by the writer
/// (`replica::io::write_all_unless`).
///
/// Why: a session whose live data goes over UDP writes on its connection only to answer a
/// NAK, so without keep-alive a mirror whose host crashed, lost power or left the network
/// would hold its session (one of `max_sessions`) and its unicast token forever. With it
/// the kernel ends the connection about 16 s after the host last answered, and the next
/// read of the session fails (ETIMEDOUT).
///
/// What it does not catch: a host that is alive answers the probes itself, whatever its
/// process does, so a mirror process that is stopped or hung, or a peer that holds the
/// connection open on purpose, keeps it. In multicast mode a mirror that sends nothing is
/// normal (it NAKs only what it lost). A unicast mirror PUNCHes every 5 s; the server ends
/// a session whose PUNCHes stop (`ServeOptions::punch_timeout`).
pub fn tune_tcp(stream: &TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let s = SockRef::from(stream);
    s.set_tcp_keepalive(
        &TcpKeepalive::new()
            .with_time(KEEPALIVE_IDLE)
            .with_interval(KEEPALIVE_INTERVAL)
            .with_retries(KEEPALIVE_PROBES),
    )?;
    s.set_tcp_user_timeout(Some(TCP_USER_TIMEOUT))
}

/// Connects to `addr` within `timeout`, with TCP_NODELAY.
pub fn connect_tcp(addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// True when `err` is EMSGSIZE (the datagram is larger than the path allows; spec §20.3).
pub fn is_emsgsize(err: &io::Error) -> bool {
    err.raw_os_error() == Some(libc::EMSGSIZE)
}

/// Whether `e`, from a receive on a UDP socket, is the kernel reporting an ICMP error (port,
/// host or network unreachable) for an earlier datagram sent from it (a mirror's PUNCH, a
/// source's DATA), rather than a failure of the socket. It is reported once, and the socket
/// goes on receiving. (Linux reports these only on a connected socket or one with
/// `IP_RECVERR`.)
pub fn reports_an_earlier_datagram(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EHOSTDOWN)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multicast_rejects_unicast_group() {
        let e =
            multicast_receiver(Ipv4Addr::new(10, 0, 0, 1), 0, Ipv4Addr::UNSPECIFIED).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("10.0.0.1"), "{e}");
    }

    #[test]
    fn unicast_source_to_mirror_on_loopback() {
        let src = source_udp(0, None).unwrap();
        let mir = unicast_receiver().unwrap();
        let port = mir.local_addr().unwrap().port();
        src.send_to(b"punch", (Ipv4Addr::LOCALHOST, port)).unwrap();
        mir.set_nonblocking(false).unwrap();
        mir.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 16];
        let (n, _) = mir.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"punch");
    }

    #[test]
    fn the_socket_binds_the_address_given() {
        let s = source_udp_on(Ipv4Addr::LOCALHOST, 0, None).unwrap();
        assert_eq!(s.local_addr().unwrap().ip(), Ipv4Addr::LOCALHOST);
        let s = source_udp(0, None).unwrap();
        assert_eq!(s.local_addr().unwrap().ip(), Ipv4Addr::UNSPECIFIED);
    }

    /// 198.51.100.0/24 (TEST-NET-2) is documentation space, no host's address: both the bind
    /// and the multicast interface errors name it.
    #[test]
    fn errors_name_the_address() {
        let foreign = Ipv4Addr::new(198, 51, 100, 199);
        let e = source_udp_on(foreign, 0, None).unwrap_err();
        assert!(e.to_string().contains("bind 198.51.100.199:0"), "{e}");
        let mc = MulticastOut {
            ttl: 1,
            iface: Some(foreign),
        };
        let e = source_udp_on(Ipv4Addr::UNSPECIFIED, 0, Some(mc)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrNotAvailable, "{e}");
        let m = e.to_string();
        assert!(m.contains("multicast interface 198.51.100.199"), "{m}");
        assert!(m.contains("not an address of this host"), "{m}");
    }

    /// The kernel takes this host's addresses and 127.0.0.2 (loopback's local route, which
    /// getifaddrs does not list) as a multicast interface, TEST-NET-1's 192.0.2.1 (RFC
    /// 5737) not.
    #[test]
    fn multicast_interfaces_are_judged_as_the_kernel_does() {
        assert!(multicast_if_usable(Ipv4Addr::LOCALHOST).unwrap());
        assert!(multicast_if_usable(Ipv4Addr::new(127, 0, 0, 2)).unwrap());
        assert!(!multicast_if_usable(Ipv4Addr::new(192, 0, 2, 1)).unwrap());
    }

    /// A session's socket has keep-alive with the short settings, and the user timeout. It
    /// has no SO_SNDTIMEO: the session makes it non-blocking, where that has no effect (the
    /// write timeout is `write_all_unless`'s), and a reader of the code took it for the one
    /// that ends a mirror that stops reading.
    #[test]
    fn session_sockets_get_keepalive_and_a_user_timeout() {
        let l = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, _) = l.accept().unwrap();
        let s = SockRef::from(&a);
        assert!(!s.keepalive().unwrap(), "off before tune_tcp");
        tune_tcp(&a).unwrap();
        assert!(s.keepalive().unwrap());
        assert_eq!(s.keepalive_time().unwrap(), KEEPALIVE_IDLE);
        assert_eq!(s.keepalive_interval().unwrap(), KEEPALIVE_INTERVAL);
        assert_eq!(s.keepalive_retries().unwrap(), KEEPALIVE_PROBES);
        assert_eq!(s.tcp_user_timeout().unwrap(), Some(TCP_USER_TIMEOUT));
        assert!(s.nodelay().unwrap());
        assert_eq!(a.write_timeout().unwrap(), None, "SO_SNDTIMEO set");
    }

    #[test]
    fn emsgsize_is_recognised() {
        assert!(is_emsgsize(&io::Error::from_raw_os_error(libc::EMSGSIZE)));
        assert!(!is_emsgsize(&io::Error::from_raw_os_error(libc::EAGAIN)));
    }
}

#[cfg(test)]
mod multicast_loopback {
    use super::*;

    #[test]
    fn multicast_on_loopback_reaches_a_joined_receiver() {
        // A group and port private to this test run.
        let port = 20_000 + (std::process::id() % 20_000) as u16;
        let group = Ipv4Addr::new(239, 255, 77, 1);
        let rx = multicast_receiver(group, port, Ipv4Addr::LOCALHOST).unwrap();
        let tx = source_udp(
            0,
            Some(MulticastOut {
                ttl: 0,
                iface: Some(Ipv4Addr::LOCALHOST),
            }),
        )
        .unwrap();
        tx.send_to(b"tick", (group, port)).unwrap();
        rx.set_nonblocking(false).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 16];
        let (n, _) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"tick");
    }

    /// Two mirrors on one port, joined to different groups: each gets only its own group's
    /// datagrams. Linux's default (IP_MULTICAST_ALL on) delivered every group joined on the
    /// host to every socket bound to the port, where only the session byte told streams
    /// apart.
    #[test]
    fn a_receiver_gets_only_its_own_groups_datagrams() {
        let (g1, g2) = (
            Ipv4Addr::new(239, 255, 77, 11),
            Ipv4Addr::new(239, 255, 77, 12),
        );
        let rx1 = multicast_receiver(g1, 0, Ipv4Addr::LOCALHOST).unwrap();
        let port = rx1.local_addr().unwrap().port();
        let rx2 = multicast_receiver(g2, port, Ipv4Addr::LOCALHOST).unwrap();
        let tx = source_udp(
            0,
            Some(MulticastOut {
                ttl: 0,
                iface: Some(Ipv4Addr::LOCALHOST),
            }),
        )
        .unwrap();
        tx.send_to(b"group 2", (g2, port)).unwrap();
        let mut buf = [0u8; 16];
        rx2.set_nonblocking(false).unwrap();
        rx2.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let (n, _) = rx2.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"group 2");
        rx1.set_nonblocking(false).unwrap();
        rx1.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        match rx1.recv_from(&mut buf) {
            Ok((n, from)) => panic!(
                "the group {g1} receiver got {:?} from {from}, sent to {g2}",
                String::from_utf8_lossy(&buf[..n])
            ),
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ),
                "{e}"
            ),
        }
    }
}
