//! ringfire's names for the ring and blackboard header constants (spec §2, §14), the same
//! values as the core's [`RING_MAGIC`](ringwire_core::layout::RING_MAGIC) and
//! [`Flags`].

use ringwire_core::layout::{self, Flags};

/// The ring header's magic, "RINGFIRE" in ASCII.
pub const RINGFIRE_MAGIC: u64 = layout::RING_MAGIC;
/// The ring format version.
pub const RINGFIRE_VERSION: u32 = layout::RING_VERSION;
/// The blackboard header's magic.
pub const BLACKBOARD_MAGIC: u64 = ringwire_core::blackboard::BLACKBOARD_MAGIC;
/// The blackboard format version.
pub const BLACKBOARD_VERSION: u32 = ringwire_core::blackboard::BLACKBOARD_VERSION;
/// Flag: writers overwrite the oldest record.
pub const FLAG_POLICY_LATEST_WINS: u32 = Flags::POLICY_LATEST_WINS;
/// Flag: the producer waits for registered readers.
pub const FLAG_POLICY_LOSSLESS_BACKPRESSURE: u32 = Flags::POLICY_LOSSLESS_BACKPRESSURE;
/// Flag: one producer, many consumers.
pub const FLAG_MODE_SPMC: u32 = Flags::MODE_SPMC;
/// Flag: many producers claim tickets (the lossy MPMC ring).
pub const FLAG_MODE_MPMC: u32 = Flags::MODE_MPMC;
/// Flag: records are descriptors into a byte arena (blob rings).
pub const FLAG_WITH_ARENA: u32 = Flags::WITH_ARENA;
/// Flag: the ring has a reader registry.
pub const FLAG_WITH_REGISTRY: u32 = Flags::WITH_REGISTRY;
/// Flag: sequences may have holes (a mirror ring).
pub const FLAG_SPARSE: u32 = Flags::SPARSE;
/// A slot's sequence word while its record is being written.
pub const SLOT_WRITING: u64 = layout::SLOT_WRITING;
