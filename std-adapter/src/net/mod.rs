//! Sockets for serve and mirror: setup (socket2) and batched datagram I/O.

pub mod mmsg;
pub mod sockets;
