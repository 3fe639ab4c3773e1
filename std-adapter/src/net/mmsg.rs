//! Batched datagram I/O: `recvmmsg` fills many buffers with one system call on the mirror, and
//! `sendmmsg` sends one frame to many unicast peers with one system call on the source.

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

/// Largest datagram a mirror accepts (spec §22).
pub const MAX_DATAGRAM: usize = 65_536;

/// The headers, iovecs and sender addresses of one `recvmmsg` call, kept between calls so
/// that a call allocates nothing. The raw pointers in them point at buffers they do not own:
/// [`MmsgScratch::recv`] re-points every one before the call, and they are dead values after.
pub(crate) struct MmsgScratch {
    iov: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_in>,
    hdrs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers inside are rewritten by `recv` before every use and only point at
// memory that call borrows; between calls nothing reads them, so another thread owning or
// sharing the scratch reaches no memory through them.
unsafe impl Send for MmsgScratch {}
// SAFETY: as for Send; `&MmsgScratch` reads only the lengths, flags and addresses the kernel
// wrote, never through the pointers.
unsafe impl Sync for MmsgScratch {}

impl std::fmt::Debug for MmsgScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MmsgScratch")
            .field("capacity", &self.hdrs.len())
            .finish_non_exhaustive()
    }
}

impl MmsgScratch {
    /// Room for `n` datagrams per call (1..=1024).
    pub(crate) fn new(n: usize) -> MmsgScratch {
        let n = n.clamp(1, 1024);
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        MmsgScratch {
            iov: vec![empty; n],
            // SAFETY: sockaddr_in and mmsghdr are plain C data for which all-zero is valid.
            names: vec![unsafe { std::mem::zeroed() }; n],
            // SAFETY: as above.
            hdrs: vec![unsafe { std::mem::zeroed() }; n],
        }
    }

    /// How many datagrams one call can take.
    pub(crate) fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Receives up to `bufs.len()` (at most [`MmsgScratch::capacity`]) datagrams with one
    /// `recvmmsg(MSG_WAITFORONE)`, datagram `i` into `bufs[i]` (an address and a length).
    /// Returns how many came; see [`MmsgScratch::len`], [`MmsgScratch::truncated`] and
    /// [`MmsgScratch::sender`] for each. A socket shut down for reading fails with
    /// [`io::ErrorKind::UnexpectedEof`] once the datagrams before the shutdown are taken.
    ///
    /// # Safety
    /// Every `(ptr, len)` must be valid for writes of `len` bytes for the duration of the
    /// call, with no other access to those bytes meanwhile.
    pub(crate) unsafe fn recv(
        &mut self,
        sock: &UdpSocket,
        bufs: impl IntoIterator<Item = (*mut u8, usize)>,
    ) -> io::Result<usize> {
        let mut n = 0;
        for (((b, iov), name), h) in bufs
            .into_iter()
            .zip(&mut self.iov)
            .zip(&mut self.names)
            .zip(&mut self.hdrs)
        {
            *iov = libc::iovec {
                iov_base: b.0.cast(),
                iov_len: b.1,
            };
            // SAFETY: all-zero is a valid mmsghdr; the fields that matter are set below.
            *h = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = (name as *mut libc::sockaddr_in).cast();
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            n += 1;
        }
        // SAFETY: the first n headers point at live iovecs over buffers the caller vouches
        // for and at live sockaddr_in values of the stated size; all outlive the call.
        let r = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // A socket shut down for reading (`shutdown(SHUT_RD)`, how another thread stops a
        // receiver blocked on it) makes the kernel end the call with one message of no
        // bytes and no sender: the end of the stream, not a datagram, and it comes again
        // on every call. A real datagram always has a sender, even an empty one. The
        // datagrams before it are returned; the next call then meets it first. One that
        // arrived after the shutdown and that this call took after the end (a window of a
        // few microseconds) goes with it: the caller is stopping.
        let r = r as usize;
        match self.hdrs[..r]
            .iter()
            .position(|h| h.msg_hdr.msg_namelen == 0)
        {
            Some(0) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the socket is shut down for reading: no datagram will come",
            )),
            Some(i) => Ok(i),
            None => Ok(r),
        }
    }

    /// The length of datagram `i` of the last call (the bytes written, if it was truncated).
    pub(crate) fn len(&self, i: usize) -> usize {
        self.hdrs[i].msg_len as usize
    }

    /// Whether datagram `i` of the last call was longer than its buffer.
    pub(crate) fn truncated(&self, i: usize) -> bool {
        self.hdrs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0
    }

    /// The IPv4 sender of datagram `i` of the last call.
    pub(crate) fn sender(&self, i: usize) -> Option<SocketAddrV4> {
        let h = &self.hdrs[i].msg_hdr;
        let sa = &self.names[i];
        (h.msg_namelen as usize >= size_of::<libc::sockaddr_in>()
            && sa.sin_family == libc::AF_INET as libc::sa_family_t)
            .then(|| {
                SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)),
                    u16::from_be(sa.sin_port),
                )
            })
    }
}

/// Buffers for up to `n` datagrams received with one `recvmmsg`.
pub struct RecvBatch {
    bufs: Vec<Vec<u8>>,
    filled: usize,
    scratch: MmsgScratch,
}

impl RecvBatch {
    /// `n` buffers (clamped to 1 ..= 1024) of `buf_len` bytes each.
    ///
    /// # Panics
    /// As `vec!` does: when `buf_len` bytes cannot be allocated, `n` times over.
    pub fn new(n: usize, buf_len: usize) -> RecvBatch {
        let scratch = MmsgScratch::new(n);
        RecvBatch {
            bufs: (0..scratch.capacity())
                .map(|_| vec![0u8; buf_len.max(1)])
                .collect(),
            filled: 0,
            scratch,
        }
    }

    /// Receives up to the batch size, waiting only as the socket does (its own blocking
    /// mode and read timeout, with `MSG_WAITFORONE`: it returns as soon as at least one
    /// datagram is in). Returns the number received; `WouldBlock` when none was waiting on
    /// a non-blocking socket, `UnexpectedEof` once it is shut down for reading.
    /// Allocates nothing.
    pub fn recv(&mut self, sock: &UdpSocket) -> io::Result<usize> {
        self.filled = 0;
        let bufs = self.bufs.iter_mut().map(|b| (b.as_mut_ptr(), b.len()));
        // SAFETY: each pointer and length is one of our buffers, borrowed mutably for the
        // whole call.
        self.filled = unsafe { self.scratch.recv(sock, bufs) }?;
        Ok(self.filled)
    }

    /// The `i`-th datagram received by the last `recv`: its bytes and sender. `None` for a
    /// truncated datagram's bytes (longer than the buffer: garbage to a mirror, which must
    /// not parse a prefix) or an index past the batch.
    pub fn get(&self, i: usize) -> Option<(Option<&[u8]>, Option<SocketAddrV4>)> {
        if i >= self.filled {
            return None;
        }
        let bytes = match self.scratch.truncated(i) {
            true => None,
            false => self.bufs[i].get(..self.scratch.len(i)),
        };
        Some((bytes, self.scratch.sender(i)))
    }

    /// Datagrams in the last batch.
    pub fn len(&self) -> usize {
        self.filled
    }

    /// True when the last batch was empty.
    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }
}

fn sockaddr(a: &SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// Most headers one `sendmmsg` call takes (well under the kernel's `UIO_MAXIOV`).
const SEND_CHUNK: usize = 256;

/// Sends one frame to many unicast peers with `sendmmsg`, keeping its headers and socket
/// addresses between calls: a steady-state [`SendMany::send`] allocates nothing, and the
/// addresses are rebuilt only when the destination list differs from the previous call's
/// (the buffers grow only when a list is longer than any before, or than
/// [`SendMany::with_capacity`]). The raw pointers in the headers point at memory they do not
/// own: `send` re-points every one before the call, and they are dead values after.
pub struct SendMany {
    /// The destinations `names` was built from.
    to: Vec<SocketAddrV4>,
    /// The source addresses `ctrl` was built from.
    from: Vec<Option<Ipv4Addr>>,
    names: Vec<libc::sockaddr_in>,
    /// An IP_PKTINFO control message per destination with a source address.
    ctrl: Vec<PktInfo>,
    hdrs: Vec<libc::mmsghdr>,
}

/// Room for one `cmsghdr` carrying an `in_pktinfo` (CMSG_SPACE(12) = 32 on Linux), aligned
/// as a `cmsghdr`.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct PktInfo([u8; 32]);

/// `CMSG_SPACE(sizeof(struct in_pktinfo))`.
fn pktinfo_space() -> usize {
    // SAFETY: CMSG_SPACE only computes a length.
    unsafe { libc::CMSG_SPACE(size_of::<libc::in_pktinfo>() as libc::c_uint) as usize }
}

impl PktInfo {
    /// An IP_PKTINFO message asking the kernel to send from `ip` (`ipi_spec_dst`), by the
    /// routing table's interface (`ipi_ifindex` 0).
    fn new(ip: Ipv4Addr) -> PktInfo {
        let mut b = PktInfo([0; 32]);
        assert!(pktinfo_space() <= b.0.len());
        // SAFETY: all-zero is a valid msghdr; it only carries the buffer's address and
        // length for the CMSG_ macros below.
        let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
        m.msg_control = b.0.as_mut_ptr().cast();
        m.msg_controllen = pktinfo_space() as _;
        // SAFETY: `m` describes `b`, which is large enough (asserted) and aligned for a
        // cmsghdr; CMSG_FIRSTHDR then points into it, and CMSG_DATA at room for the
        // in_pktinfo (written unaligned, as the macro guarantees no more).
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&m);
            (*c).cmsg_level = libc::IPPROTO_IP;
            (*c).cmsg_type = libc::IP_PKTINFO;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<libc::in_pktinfo>() as libc::c_uint) as _;
            let info = libc::in_pktinfo {
                ipi_ifindex: 0,
                ipi_spec_dst: libc::in_addr {
                    s_addr: u32::from(ip).to_be(),
                },
                ipi_addr: libc::in_addr { s_addr: 0 },
            };
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::in_pktinfo>(), info);
        }
        b
    }
}

// SAFETY: the raw pointers inside are rewritten by `send` before every use and only point at
// memory that call borrows; between calls nothing reads them, so another thread owning or
// sharing the sender reaches no memory through them.
unsafe impl Send for SendMany {}
// SAFETY: as for Send; `&SendMany` gives access to nothing at all.
unsafe impl Sync for SendMany {}

impl std::fmt::Debug for SendMany {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendMany")
            .field("to", &self.to)
            .finish_non_exhaustive()
    }
}

impl Default for SendMany {
    fn default() -> SendMany {
        SendMany::with_capacity(0)
    }
}

impl SendMany {
    /// A sender with room for `n` destinations before its first allocation on a send.
    ///
    /// # Panics
    /// As [`Vec::with_capacity`] does: when room for `n` destinations cannot be allocated.
    pub fn with_capacity(n: usize) -> SendMany {
        SendMany {
            to: Vec::with_capacity(n),
            from: Vec::with_capacity(n),
            names: Vec::with_capacity(n),
            ctrl: Vec::with_capacity(n),
            hdrs: Vec::with_capacity(n),
        }
    }

    /// Sends `frame` to every address in `to` with as few `sendmmsg` calls as the kernel
    /// allows, and returns how many the kernel took. An address the kernel refuses (the call
    /// fails on it) is passed to `failed` with the error and skipped: the addresses after it
    /// are still tried, unless `failed` returns false (the caller decides about EMSGSIZE,
    /// spec §20.3, which no destination would take either). At most one call per address.
    pub fn send(
        &mut self,
        sock: &UdpSocket,
        frame: &[u8],
        to: &[SocketAddrV4],
        failed: impl FnMut(SocketAddrV4, io::Error) -> bool,
    ) -> usize {
        self.send_from(sock, frame, to, &[], failed)
    }

    /// [`SendMany::send`], the datagram to `to[i]` sent from this host's address `from[i]`
    /// when it is `Some` (IP_PKTINFO; the socket must be bound to `0.0.0.0`), else from the
    /// address the kernel picks. `from` may be shorter than `to` (empty: none chosen).
    pub fn send_from(
        &mut self,
        sock: &UdpSocket,
        frame: &[u8],
        to: &[SocketAddrV4],
        from: &[Option<Ipv4Addr>],
        mut failed: impl FnMut(SocketAddrV4, io::Error) -> bool,
    ) -> usize {
        let from = &from[..from.len().min(to.len())];
        if self.to != to || self.from != from {
            self.to.clear();
            self.to.extend_from_slice(to);
            self.from.clear();
            self.from.extend_from_slice(from);
            self.names.clear();
            self.names.extend(to.iter().map(sockaddr));
            self.ctrl.clear();
            self.ctrl.extend((0..to.len()).map(|i| {
                PktInfo::new(
                    from.get(i)
                        .copied()
                        .flatten()
                        .unwrap_or(Ipv4Addr::UNSPECIFIED),
                )
            }));
            // SAFETY: mmsghdr is plain C data for which all-zero is a valid value.
            self.hdrs.resize(to.len(), unsafe { std::mem::zeroed() });
        }
        let mut iov = libc::iovec {
            iov_base: frame.as_ptr() as *mut libc::c_void,
            iov_len: frame.len(),
        };
        // One pointer shared by every header (the kernel only reads through it).
        let iov: *mut libc::iovec = &mut iov;
        for (i, (h, n)) in self.hdrs.iter_mut().zip(&mut self.names).enumerate() {
            h.msg_hdr.msg_name = (n as *mut libc::sockaddr_in).cast();
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            if self.from.get(i).copied().flatten().is_some() {
                h.msg_hdr.msg_control = self.ctrl[i].0.as_mut_ptr().cast();
                h.msg_hdr.msg_controllen = pktinfo_space() as _;
            } else {
                h.msg_hdr.msg_control = std::ptr::null_mut();
                h.msg_hdr.msg_controllen = 0;
            }
        }
        // `next` is the first address not yet tried; every round moves it by at least one.
        let (mut next, mut sent) = (0, 0);
        while next < self.hdrs.len() {
            let n = (self.hdrs.len() - next).min(SEND_CHUNK);
            // SAFETY: the headers from `next` on point at live sockaddr_in values of the
            // stated size, at the one live iovec over `frame` and at live control messages
            // of the stated size or none, all of which the kernel only reads; all outlive
            // the call.
            let r = unsafe {
                libc::sendmmsg(
                    sock.as_raw_fd(),
                    self.hdrs[next..].as_mut_ptr(),
                    n as libc::c_uint,
                    0,
                )
            };
            if r > 0 {
                // The kernel stops at the first message that fails (and reports that error
                // only when it is the first): the next round starts with it.
                next += r as usize;
                sent += r as usize;
                continue;
            }
            let e = match r {
                0 => io::Error::from(io::ErrorKind::WriteZero),
                _ => io::Error::last_os_error(),
            };
            let at = self.to[next];
            next += 1;
            if !failed(at, e) {
                break;
            }
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// From a socket bound to 0.0.0.0, each datagram leaves from the address asked for
    /// (two of 127/8, all local on Linux), or from the kernel's choice without one; the
    /// choice follows a changed list.
    #[test]
    fn send_from_picks_each_datagrams_source_address() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let to = match rx.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            a => panic!("not v4: {a}"),
        };
        let tx = UdpSocket::bind("0.0.0.0:0").unwrap();
        let mut out = SendMany::default();
        let mut buf = [0u8; 8];
        for from in [
            Some(Ipv4Addr::new(127, 0, 0, 3)),
            Some(Ipv4Addr::new(127, 0, 0, 4)),
            None,
        ] {
            let n = out.send_from(&tx, b"x", &[to, to], &[from, None], |a, e| {
                panic!("{a}: {e}")
            });
            assert_eq!(n, 2);
            let (_, a) = rx.recv_from(&mut buf).unwrap();
            let want = from.unwrap_or(Ipv4Addr::LOCALHOST);
            assert_eq!(a.ip(), want, "first datagram, asked for {from:?}");
            let (_, a) = rx.recv_from(&mut buf).unwrap();
            assert_eq!(a.ip(), Ipv4Addr::LOCALHOST, "second datagram");
        }
    }

    #[test]
    fn send_many_then_recv_batch() {
        let rx1 = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx2 = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to: Vec<SocketAddrV4> = [&rx1, &rx2]
            .iter()
            .map(|s| match s.local_addr().unwrap() {
                std::net::SocketAddr::V4(a) => a,
                a => panic!("not v4: {a}"),
            })
            .collect();
        let mut out = SendMany::default();
        for i in 0..3u8 {
            let n = out.send(&tx, &[i; 100], &to, |a, e| panic!("{a}: {e}"));
            assert_eq!(n, 2);
        }
        rx1.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut batch = RecvBatch::new(8, 2048);
        let mut got = Vec::new();
        while got.len() < 3 {
            let n = batch.recv(&rx1).unwrap();
            for i in 0..n {
                let (bytes, from) = batch.get(i).unwrap();
                assert_eq!(
                    from,
                    Some(match tx.local_addr().unwrap() {
                        std::net::SocketAddr::V4(a) => a,
                        a => panic!("not v4: {a}"),
                    })
                );
                got.push(bytes.unwrap().to_vec());
            }
        }
        assert_eq!(got, vec![vec![0u8; 100], vec![1u8; 100], vec![2u8; 100]]);
        assert!(batch.get(3).is_none());
    }

    fn v4(s: &UdpSocket) -> SocketAddrV4 {
        match s.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            a => panic!("not v4: {a}"),
        }
    }

    /// One sender through lists that grow, shrink, reorder and empty: each frame reaches
    /// exactly the list it was sent with, and within its capacity the sender never moves
    /// its buffers (no allocation).
    #[test]
    fn send_many_follows_a_changing_destination_list() {
        let rx: Vec<UdpSocket> = (0..3)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        for r in &rx {
            r.set_nonblocking(true).unwrap();
        }
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let a: Vec<SocketAddrV4> = rx.iter().map(v4).collect();
        let lists: [&[usize]; 7] = [&[0, 1], &[0, 1], &[1, 2], &[2], &[], &[2, 1, 0], &[0]];
        let mut out = SendMany::with_capacity(3);
        let bufs = (out.to.as_ptr(), out.names.as_ptr(), out.hdrs.as_ptr());
        let mut want: Vec<Vec<u8>> = vec![Vec::new(); 3];
        let mut to = Vec::with_capacity(3);
        for (i, list) in lists.iter().enumerate() {
            to.clear();
            to.extend(list.iter().map(|&k| a[k]));
            let n = out.send(&tx, &[i as u8; 40], &to, |a, e| panic!("{a}: {e}"));
            assert_eq!(n, list.len(), "list {i}");
            for &k in *list {
                want[k].push(i as u8);
            }
        }
        assert_eq!(
            (out.to.as_ptr(), out.names.as_ptr(), out.hdrs.as_ptr()),
            bufs,
            "a send within capacity reallocated"
        );
        let mut buf = [0u8; 64];
        for (k, r) in rx.iter().enumerate() {
            let mut got = Vec::new();
            let t0 = std::time::Instant::now();
            while got.len() < want[k].len() && t0.elapsed() < Duration::from_secs(2) {
                match r.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        assert_eq!((n, from), (40, tx.local_addr().unwrap()));
                        assert!(buf[..n].iter().all(|&b| b == buf[0]));
                        got.push(buf[0]);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(1))
                    }
                    Err(e) => panic!("receiver {k}: {e}"),
                }
            }
            assert_eq!(got, want[k], "frames at receiver {k}");
            // Nothing more than its own list sent it.
            std::thread::sleep(Duration::from_millis(5));
            assert_eq!(
                r.recv_from(&mut buf).unwrap_err().kind(),
                io::ErrorKind::WouldBlock,
                "receiver {k} got a frame of a list it was not in"
            );
        }
    }

    /// A destination the kernel refuses (port 0: EINVAL at once) is reported and skipped;
    /// the ones before and after it still get the frame. A `failed` that returns false
    /// stops the batch there.
    #[test]
    fn a_failing_destination_does_not_stop_the_others() {
        let rx: Vec<UdpSocket> = (0..2)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let bad = SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 0);
        let to = [v4(&rx[0]), bad, v4(&rx[1])];
        let mut out = SendMany::default();
        let mut errors = Vec::new();
        let n = out.send(&tx, &[9u8; 40], &to, |a, e| {
            errors.push((a, e.raw_os_error()));
            true
        });
        assert_eq!(n, 2);
        assert_eq!(errors, [(bad, Some(libc::EINVAL))]);
        let mut buf = [0u8; 64];
        for r in &rx {
            r.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            assert_eq!(r.recv_from(&mut buf).unwrap().0, 40);
        }
        // Stopping at the failure: the address after it is not tried.
        let n = out.send(&tx, &[8u8; 40], &to, |_, _| false);
        assert_eq!(n, 1);
        rx[1].set_nonblocking(true).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            rx[1].recv_from(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
    }

    #[test]
    fn oversized_datagram_is_reported_not_truncated() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(&[7u8; 300], rx.local_addr().unwrap()).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut batch = RecvBatch::new(4, 128);
        assert_eq!(batch.recv(&rx).unwrap(), 1);
        let (bytes, _) = batch.get(0).unwrap();
        assert!(
            bytes.is_none(),
            "a 300-byte datagram in a 128-byte buffer must not parse as a prefix"
        );
    }

    #[test]
    fn nonblocking_empty_socket_would_block() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        let mut batch = RecvBatch::new(4, 128);
        assert_eq!(
            batch.recv(&rx).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        assert!(batch.is_empty());
    }
}
