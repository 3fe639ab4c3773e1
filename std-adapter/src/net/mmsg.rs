//! Batched datagram I/O: `recvmmsg` fills many buffers with one system call on the mirror, and
//! `sendmmsg` sends one frame to many unicast peers with one system call on the source.

use std::io;
use std::mem::{MaybeUninit, size_of};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

/// Largest datagram a mirror accepts (spec §22).
pub const MAX_DATAGRAM: usize = 65_536;

/// Buffers for up to `n` datagrams received with one `recvmmsg`.
pub struct RecvBatch {
    bufs: Vec<Vec<u8>>,
    lens: Vec<usize>,
    addrs: Vec<Option<SocketAddrV4>>,
    filled: usize,
}

impl RecvBatch {
    /// `n` buffers of `buf_len` bytes each.
    pub fn new(n: usize, buf_len: usize) -> RecvBatch {
        let n = n.clamp(1, 1024);
        RecvBatch {
            bufs: (0..n).map(|_| vec![0u8; buf_len.max(1)]).collect(),
            lens: vec![0; n],
            addrs: vec![None; n],
            filled: 0,
        }
    }

    /// Receives up to the batch size without blocking (the socket's own blocking mode and
    /// `MSG_WAITFORONE` decide: it returns as soon as at least one datagram is in). Returns
    /// the number received; `WouldBlock` when none was waiting on a non-blocking socket.
    pub fn recv(&mut self, sock: &UdpSocket) -> io::Result<usize> {
        let n = self.bufs.len();
        let mut iov: Vec<libc::iovec> = self
            .bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        let mut names: Vec<MaybeUninit<libc::sockaddr_in>> = vec![MaybeUninit::zeroed(); n];
        let mut hdrs: Vec<libc::mmsghdr> = (0..n)
            .map(|i| {
                // SAFETY: mmsghdr is plain C data for which all-zero is a valid value.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_name = names[i].as_mut_ptr().cast();
                h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
                h.msg_hdr.msg_iov = &mut iov[i];
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        // SAFETY: every header points at a live iovec (into a live buffer of its stated
        // length) and a live sockaddr_in of the stated size; all outlive the call.
        let r = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            self.filled = 0;
            return Err(io::Error::last_os_error());
        }
        let got = r as usize;
        for i in 0..got {
            self.lens[i] = hdrs[i].msg_len as usize;
            let truncated = hdrs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            if truncated {
                // A datagram larger than the buffer is garbage to a mirror: report it with
                // its real length so the caller rejects it instead of parsing a prefix.
                self.lens[i] = self.bufs[i].len() + 1;
            }
            self.addrs[i] =
                if hdrs[i].msg_hdr.msg_namelen as usize >= size_of::<libc::sockaddr_in>() {
                    // SAFETY: the kernel wrote a sockaddr_in of at least that size.
                    let sa = unsafe { names[i].assume_init() };
                    (sa.sin_family == libc::AF_INET as libc::sa_family_t).then(|| {
                        SocketAddrV4::new(
                            Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)),
                            u16::from_be(sa.sin_port),
                        )
                    })
                } else {
                    None
                };
        }
        self.filled = got;
        Ok(got)
    }

    /// The `i`-th datagram received by the last `recv`: its bytes and sender. `None` for a
    /// truncated datagram's bytes (longer than the buffer) or an index past the batch.
    pub fn get(&self, i: usize) -> Option<(Option<&[u8]>, Option<SocketAddrV4>)> {
        if i >= self.filled {
            return None;
        }
        let len = self.lens[i];
        let bytes = (len <= self.bufs[i].len()).then(|| &self.bufs[i][..len]);
        Some((bytes, self.addrs[i]))
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

/// Sends `frame` to every address in `to` with as few `sendmmsg` calls as the kernel allows.
/// Returns how many were sent, and the first error if one stopped the batch (the caller
/// decides about EMSGSIZE; spec §20.3).
pub fn send_to_many(
    sock: &UdpSocket,
    frame: &[u8],
    to: &[SocketAddrV4],
) -> (usize, Option<io::Error>) {
    let mut sent = 0;
    for chunk in to.chunks(256) {
        let mut names: Vec<libc::sockaddr_in> = chunk.iter().map(sockaddr).collect();
        let mut iov = libc::iovec {
            iov_base: frame.as_ptr() as *mut libc::c_void,
            iov_len: frame.len(),
        };
        let mut hdrs: Vec<libc::mmsghdr> = names
            .iter_mut()
            .map(|n| {
                // SAFETY: mmsghdr is plain C data for which all-zero is a valid value.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_name = (n as *mut libc::sockaddr_in).cast();
                h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
                h.msg_hdr.msg_iov = &mut iov;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        let mut off = 0;
        while off < hdrs.len() {
            // SAFETY: headers point at live sockaddr_in values and one live iovec over
            // `frame`, which the kernel only reads; all outlive the call.
            let r = unsafe {
                libc::sendmmsg(
                    sock.as_raw_fd(),
                    hdrs[off..].as_mut_ptr(),
                    (hdrs.len() - off) as libc::c_uint,
                    0,
                )
            };
            if r < 0 {
                return (sent, Some(io::Error::last_os_error()));
            }
            if r == 0 {
                return (sent, Some(io::Error::from(io::ErrorKind::WriteZero)));
            }
            off += r as usize;
            sent += r as usize;
        }
    }
    (sent, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn send_to_many_then_recv_batch() {
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
        for i in 0..3u8 {
            let (n, err) = send_to_many(&tx, &[i; 100], &to);
            assert_eq!((n, err.map(|e| e.kind())), (2, None));
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
