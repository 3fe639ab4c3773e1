//! Reader registry slots (spec §9).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Bytes of a registry name field (at most 31 used, NUL-padded).
pub const REGISTRY_NAME_LEN: usize = 32;

/// One 64-byte registry slot. Fields are accessed atomically through the region at the
/// offsets in [`reg`].
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegistrySlot {
    /// Owning process id, 0 = free (atomic).
    pub pid: u32,
    /// 1 = live reader (atomic).
    pub active: u32,
    /// Next sequence this reader will read (atomic).
    pub cursor_seq: u64,
    /// Always 0 (nothing writes it in the reference).
    pub heartbeat_tsc: u64,
    /// UTF-8 name, NUL-padded.
    pub name: [u8; REGISTRY_NAME_LEN],
    /// Zero.
    pub pad: [u8; 8],
}

/// Byte offsets inside a registry slot.
pub mod reg {
    /// `pid`.
    pub const PID: usize = 0;
    /// `active`.
    pub const ACTIVE: usize = 4;
    /// `cursor_seq`.
    pub const CURSOR_SEQ: usize = 8;
    /// `heartbeat_tsc`.
    pub const HEARTBEAT_TSC: usize = 16;
    /// `name`.
    pub const NAME: usize = 24;
    /// Slot size.
    pub const SIZE: usize = 64;
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<RegistrySlot>() == reg::SIZE);
    assert!(offset_of!(RegistrySlot, pid) == reg::PID);
    assert!(offset_of!(RegistrySlot, active) == reg::ACTIVE);
    assert!(offset_of!(RegistrySlot, cursor_seq) == reg::CURSOR_SEQ);
    assert!(offset_of!(RegistrySlot, heartbeat_tsc) == reg::HEARTBEAT_TSC);
    assert!(offset_of!(RegistrySlot, name) == reg::NAME);
    assert!(offset_of!(RegistrySlot, pad) == 56);
};
