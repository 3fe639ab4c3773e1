//! Header flag bits (spec §2.1).

/// The `flags` field of the ring header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Flags(pub u32);

impl Flags {
    /// Writers overwrite the oldest record; readers detect being lapped.
    pub const POLICY_LATEST_WINS: u32 = 0x0001;
    /// The producer waits for registered readers (§6).
    pub const POLICY_LOSSLESS_BACKPRESSURE: u32 = 0x0002;
    /// Single producer, many consumers.
    pub const MODE_SPMC: u32 = 0x0010;
    /// Many producers claim tickets (§8).
    pub const MODE_MPMC: u32 = 0x0020;
    /// Records are descriptors into a byte arena (§10).
    pub const WITH_ARENA: u32 = 0x0100;
    /// The ring has a reader registry (§9).
    pub const WITH_REGISTRY: u32 = 0x0200;
    /// Mirror ring: sequences may have holes (§7).
    pub const SPARSE: u32 = 0x0400;

    /// True when every bit of `bit` is set.
    #[inline]
    pub const fn has(self, bit: u32) -> bool {
        self.0 & bit == bit
    }
}
