//! Every variant of every public error type of the core, built with hostile field values
//! (0, 1, the maxima and their neighbours, 2^63), formats without a panic (debug builds
//! check overflow) and shows the values it carries. Each `*_variant` function numbers the
//! variants with an exhaustive `match`: a variant added later does not compile until it is
//! numbered, and then fails its test until it has samples.

extern crate std;

use std::vec::Vec;

use crate::blackboard::{BLACKBOARD_MAGIC, BlackboardError};
use crate::broadcast::blob::BlobError;
use crate::broadcast::registry::RegistryError;
use crate::broadcast::{Full, SeqExhausted, TryPushError};
use crate::fmt_check::{U16, U32, U64, USIZE, assert_every_variant, check_each, pairs};
use crate::layout::{BlobRef, RING_MAGIC};
use crate::queue::compat::{LossyHealError, SlotsPastClaim, TicketExhausted};
use crate::queue::layout::{MPMC_MAGIC, SPSC_MAGIC};
use crate::queue::{
    HealError, PopError, PushError, QueueAttachError, QueueGeometryError, QueueInitError,
    QueueKind, StuckKind,
};
use crate::region::RegionError;
use crate::replicate::holdback::HoldError;
use crate::replicate::{MirrorError, SinkError, SourceError, StreamEnd};
use crate::wire::{Kind, WireError};
use crate::{AttachError, GeometryError, InitError};

/// Magic values: hostile ones, and each kind of file's (which some texts name).
const MAGICS: [u64; 7] = [
    0,
    1,
    u64::MAX,
    RING_MAGIC,
    BLACKBOARD_MAGIC,
    SPSC_MAGIC,
    MPMC_MAGIC,
];

/// `f(i, j)` for each index of the hostile values and its mirror, so two fields differ.
fn hostile<E>(mut f: impl FnMut(usize, usize) -> Vec<E>) -> Vec<E> {
    pairs().flat_map(|(i, j)| f(i, j)).collect()
}

fn attach_variant(e: &AttachError) -> usize {
    use AttachError::*;
    match e {
        TooShort { .. } => 0,
        BadMagic { .. } => 1,
        BadVersion { .. } => 2,
        ElementSizeMismatch { .. } => 3,
        ElementSizeTooSmall { .. } => 4,
        CapacityNotPowerOfTwo { .. } => 5,
        BadMask { .. } => 6,
        BadSlotsOffset { .. } => 7,
        SlotsPastEnd { .. } => 8,
        RegistryMisaligned { .. } => 9,
        RegistryPastEnd { .. } => 10,
        ArenaMisaligned { .. } => 11,
        ArenaPastEnd { .. } => 12,
        BadArena { .. } => 13,
        ArenaHeaderMismatch { .. } => 14,
        ArenaMaskMismatch { .. } => 15,
        Overlap { .. } => 16,
        SchemaMismatch { .. } => 17,
        WrongKind { .. } => 18,
        ElementSizeMisaligned { .. } => 19,
        WriteSeqExhausted { .. } => 20,
        ClaimSeqExhausted { .. } => 21,
        ReadSeqPastClaimSeq { .. } => 22,
        WriteSeqPastClaimSeq { .. } => 23,
    }
}

fn attach_samples() -> Vec<AttachError> {
    use AttachError::*;
    let mut all = hostile(|i, j| {
        let (a, b, x, y) = (U64[i], U64[j], U32[i], U32[j]);
        std::vec![
            TooShort { len: a },
            BadVersion { found: x },
            ElementSizeMismatch {
                expected: x,
                found: y,
            },
            ElementSizeTooSmall { found: x },
            CapacityNotPowerOfTwo { found: a },
            BadMask {
                capacity: a,
                mask: b,
            },
            BadSlotsOffset {
                offset: a,
                align: b,
            },
            SlotsPastEnd {
                end: Some(a),
                len: b,
            },
            SlotsPastEnd { end: None, len: a },
            RegistryMisaligned { offset: x },
            RegistryPastEnd { end: a, len: b },
            ArenaMisaligned { offset: a },
            ArenaPastEnd {
                end: Some(a),
                len: b,
            },
            ArenaPastEnd { end: None, len: a },
            BadArena {
                arena_size: a,
                element_size: x,
            },
            ArenaHeaderMismatch {
                arena_size: a,
                arena_capacity: b,
            },
            ArenaMaskMismatch {
                arena_capacity: a,
                mask: b,
            },
            SchemaMismatch {
                expected: a,
                found: b,
            },
            WrongKind {
                flags: x,
                need: "a lossless ring",
            },
            ElementSizeMisaligned { found: x },
            WriteSeqExhausted { write_seq: a },
            ClaimSeqExhausted { claim_seq: a },
            ReadSeqPastClaimSeq {
                read_seq: a,
                claim_seq: b,
            },
            WriteSeqPastClaimSeq {
                write_seq: a,
                claim_seq: b,
            },
        ]
    });
    all.extend(MAGICS.map(|found| BadMagic { found }));
    all.extend(hostile(|i, j| {
        ["", "registry"]
            .map(|what| Overlap {
                what,
                start: U64[i],
                end: U64[j],
                slots_offset: U64[j],
                slots_end: U64[i],
            })
            .to_vec()
    }));
    all
}

#[test]
fn attach_errors_format_every_variant() {
    let all = attach_samples();
    assert_every_variant(&all, 24, attach_variant);
    check_each(&all, &[]);
}

fn geometry_variant(e: &GeometryError) -> usize {
    match e {
        GeometryError::CapacityNotPowerOfTwo { .. } => 0,
        GeometryError::BadStride { .. } => 1,
        GeometryError::ArenaSize { .. } => 2,
        GeometryError::TooLarge { .. } => 3,
        GeometryError::BadSlotAlign { .. } => 4,
        GeometryError::StrideNotAligned { .. } => 5,
    }
}

fn init_variant(e: &InitError) -> usize {
    match e {
        InitError::RegionTooSmall { .. } => 0,
        InitError::Geometry(_) => 1,
        InitError::Region(_) => 2,
    }
}

fn region_variant(e: &RegionError) -> usize {
    match e {
        RegionError::Misaligned { .. } => 0,
        RegionError::TooLarge { .. } => 1,
    }
}

#[test]
fn geometry_init_and_region_errors_format_every_variant() {
    let mut geometry = Vec::new();
    let mut init = Vec::new();
    let mut region = Vec::new();
    for (i, j) in pairs() {
        let a = U64[i];
        geometry.extend([
            GeometryError::TooLarge {
                capacity: a,
                stride: U64[j],
                arena_size: U64[(i + j) % U64.len()],
            },
            GeometryError::CapacityNotPowerOfTwo { capacity: a },
            GeometryError::BadStride { stride: a },
            GeometryError::ArenaSize { arena_size: a },
            GeometryError::BadSlotAlign { slot_align: a },
            GeometryError::StrideNotAligned {
                stride: a,
                slot_align: U64[j],
            },
        ]);
        region.extend([
            RegionError::Misaligned { addr: USIZE[i] },
            RegionError::TooLarge { len: USIZE[i] },
        ]);
        init.push(InitError::RegionTooSmall {
            need: a,
            len: U64[j],
        });
    }
    init.extend(attach_samples().into_iter().map(InitError::Geometry));
    init.extend(region.iter().copied().map(InitError::Region));
    assert_every_variant(&geometry, 6, geometry_variant);
    assert_every_variant(&init, 3, init_variant);
    assert_every_variant(&region, 2, region_variant);
    check_each(&geometry, &[]);
    check_each(&init, &[]);
    check_each(&region, &[]);
}

fn wire_variant(e: &WireError) -> usize {
    use WireError::*;
    match e {
        Truncated { .. } => 0,
        TrailingBytes { .. } => 1,
        UnknownKind { .. } => 2,
        WrongKind { .. } => 3,
        BadLen { .. } => 4,
        FrameTooLarge { .. } => 5,
        BadMagic { .. } => 6,
        BadVersion { .. } => 7,
        ZeroCount => 8,
        DataLenMismatch { .. } => 9,
        BlobTruncated { .. } => 10,
        BadSeq { .. } => 11,
        SeqLimit { .. } => 12,
        DataTrailing { .. } => 13,
        BadRecordLen { .. } => 14,
        CapacityNotPowerOfTwo { .. } => 15,
        BadElementSize { .. } => 16,
        BadSlotsOffset { .. } => 17,
        SizeOverflow { .. } => 18,
        BadArenaOffset { .. } => 19,
        BadArenaSize { .. } => 20,
        BlobRecordTooSmall { .. } => 21,
        NotMulticast { .. } => 22,
        ZeroPort { .. } => 23,
        BufferTooSmall { .. } => 24,
        DataTooLarge { .. } => 25,
    }
}

fn wire_samples() -> Vec<WireError> {
    use WireError::*;
    let mut all = std::vec![ZeroCount];
    all.extend(hostile(|i, j| {
        let (a, b, x, y, n, m) = (U64[i], U64[j], U32[i], U32[j], USIZE[i], USIZE[j]);
        let (byte, group) = (U64[i] as u8, (U32[i] ^ 0x0102_0304).to_be_bytes());
        std::vec![
            Truncated { need: n, have: m },
            TrailingBytes {
                expected: n,
                have: m,
            },
            UnknownKind { kind: byte },
            WrongKind {
                expected: Kind::Hello,
                found: Kind::Punch,
            },
            BadLen {
                kind: Kind::Nak,
                expected: x,
                found: y,
            },
            FrameTooLarge { len: x, max: m },
            BadMagic { found: a },
            BadVersion { found: x },
            DataLenMismatch {
                count: U16[i],
                record_len: n,
                len: y,
            },
            BlobTruncated {
                index: U16[i],
                need: a,
                have: m,
            },
            BadSeq {
                seq: a,
                count: U16[j],
            },
            SeqLimit {
                kind: Kind::Data,
                seq: a,
            },
            DataTrailing { extra: n },
            BadRecordLen { record_len: n },
            CapacityNotPowerOfTwo { capacity: a },
            BadElementSize { element_size: x },
            BadSlotsOffset {
                slots_offset: x,
                registry_count: y,
            },
            BadArenaOffset {
                arena_offset: a,
                slots_end: b,
            },
            BadArenaSize { arena_size: a },
            SizeOverflow {
                capacity: a,
                element_size: y,
                slots_offset: b,
                arena_offset: b,
                arena_size: a,
            },
            BlobRecordTooSmall { element_size: x },
            NotMulticast { group },
            ZeroPort { group },
            ZeroPort { group: [0; 4] },
            BufferTooSmall { need: n, have: m },
            DataTooLarge { len: a },
        ]
    }));
    all
}

#[test]
fn wire_errors_format_every_variant() {
    let all = wire_samples();
    assert_every_variant(&all, 26, wire_variant);
    check_each(&all, &[]);
}

fn queue_geometry_variant(e: &QueueGeometryError) -> usize {
    match e {
        QueueGeometryError::CapacityNotPowerOfTwo { .. } => 0,
        QueueGeometryError::MpmcCapacityTooSmall { .. } => 1,
        QueueGeometryError::BadItemSize { .. } => 2,
        QueueGeometryError::BadStride { .. } => 3,
        QueueGeometryError::TooLarge { .. } => 4,
    }
}

fn queue_attach_variant(e: &QueueAttachError) -> usize {
    use QueueAttachError::*;
    match e {
        TooShort { .. } => 0,
        BadMagic { .. } => 1,
        WrongKind { .. } => 2,
        BadVersion { .. } => 3,
        KindMismatch { .. } => 4,
        BadCapacity { .. } => 5,
        BadStride { .. } => 6,
        BadFlags { .. } => 7,
        BadSlotsOffset { .. } => 8,
        SlotsPastEnd { .. } => 9,
        ItemSizeMismatch { .. } => 10,
        SchemaMismatch { .. } => 11,
        BadCursors { .. } => 12,
        BadSpscCursors { .. } => 13,
        StampOffLap { .. } => 14,
    }
}

fn queue_attach_samples() -> Vec<QueueAttachError> {
    use QueueAttachError::*;
    let mut all = hostile(|i, j| {
        let (a, b, c, x, y) = (U64[i], U64[j], U64[(i + 2) % 5], U32[i], U32[j]);
        std::vec![
            TooShort { len: a },
            WrongKind {
                expected: QueueKind::Spsc,
                found: QueueKind::Mpmc,
            },
            BadVersion { found: x },
            KindMismatch { kind: x },
            BadCapacity {
                capacity: a,
                mask: b,
            },
            BadStride {
                stride: x,
                item_size: y,
            },
            BadFlags { flags: x },
            BadSlotsOffset { offset: a },
            SlotsPastEnd {
                end: Some(a),
                len: b,
            },
            SlotsPastEnd { end: None, len: a },
            ItemSizeMismatch {
                expected: x,
                found: y,
            },
            SchemaMismatch {
                expected: a,
                found: b,
            },
            BadCursors {
                enqueue: a,
                dequeue: b,
                capacity: c,
            },
            BadSpscCursors {
                enqueue: a,
                dequeue: b,
                capacity: c,
            },
            StampOffLap {
                pos: a,
                stamp: b,
                enqueue: c,
                dequeue: U64[(i + 1) % 5],
            },
        ]
    });
    all.extend(MAGICS.map(|found| BadMagic { found }));
    all
}

#[test]
fn queue_geometry_attach_and_init_errors_format_every_variant() {
    let mut geometry = Vec::new();
    let mut init = Vec::new();
    for (i, j) in pairs() {
        let (a, b) = (U64[i], U64[j]);
        geometry.extend([
            QueueGeometryError::CapacityNotPowerOfTwo { capacity: a },
            QueueGeometryError::MpmcCapacityTooSmall { capacity: a },
            QueueGeometryError::BadItemSize { item_size: a },
            QueueGeometryError::BadStride {
                stride: a,
                item_size: U32[j],
            },
            QueueGeometryError::TooLarge {
                capacity: a,
                slot_stride: b,
            },
        ]);
        init.extend([
            QueueInitError::RegionTooSmall {
                need: Some(a),
                len: b,
            },
            QueueInitError::RegionTooSmall { need: None, len: a },
        ]);
    }
    let attach = queue_attach_samples();
    init.extend(
        attach
            .iter()
            .map(|&reason| QueueInitError::BadGeometry { reason }),
    );
    assert_every_variant(&geometry, 5, queue_geometry_variant);
    assert_every_variant(&attach, 15, queue_attach_variant);
    assert_every_variant(&init, 2, |e| match e {
        QueueInitError::RegionTooSmall { .. } => 0,
        QueueInitError::BadGeometry { .. } => 1,
    });
    check_each(&geometry, &[]);
    check_each(&attach, &[]);
    check_each(&init, &[]);
}

fn push_variant(e: &PushError) -> usize {
    match e {
        PushError::Full => 0,
        PushError::TooLong { .. } => 1,
        PushError::WrongLength { .. } => 2,
        PushError::Healed { .. } => 3,
        PushError::Corrupt { .. } => 4,
        PushError::CorruptCursors { .. } => 5,
        PushError::NotClaimed { .. } => 6,
        PushError::AlreadyPublished { .. } => 7,
    }
}

fn pop_variant(e: &PopError) -> usize {
    match e {
        PopError::Empty => 0,
        PopError::Pending { .. } => 1,
        PopError::BufferTooSmall { .. } => 2,
        PopError::LengthMismatch { .. } => 3,
        PopError::Corrupt { .. } => 4,
        PopError::CorruptCursors { .. } => 5,
    }
}

fn heal_variant(e: &HealError) -> usize {
    match e {
        HealError::BadPosition { .. } => 0,
        HealError::NotClaimed { .. } => 1,
        HealError::NotStuck { .. } => 2,
        HealError::KindChanged { .. } => 3,
    }
}

#[test]
fn push_pop_and_heal_errors_format_every_variant() {
    let mut push = std::vec![PushError::Full];
    let mut pop = std::vec![PopError::Empty];
    let mut heal = Vec::new();
    let kinds = [StuckKind::Claimed, StuckKind::MidWrite, StuckKind::MidPop];
    for (i, j) in pairs() {
        let (a, b, n, m) = (U64[i], U64[j], USIZE[i], USIZE[j]);
        let (index, x) = (USIZE[(i + 2) % 5], U32[j]);
        push.extend([
            PushError::TooLong {
                index,
                len: n,
                max: x,
            },
            PushError::WrongLength {
                index,
                len: n,
                expected: x,
            },
            PushError::Healed { pos: a },
            PushError::Corrupt { pos: a, word: b },
            PushError::CorruptCursors { tail: a, head: b },
            PushError::NotClaimed { pos: a, stamp: b },
            PushError::AlreadyPublished { pos: a },
        ]);
        pop.extend([
            PopError::Pending { pos: a },
            PopError::BufferTooSmall { len: n, need: m },
            PopError::LengthMismatch {
                len: n,
                expected: m,
            },
            PopError::Corrupt { pos: a, word: b },
            PopError::CorruptCursors { head: a, tail: b },
        ]);
        heal.extend([
            HealError::BadPosition { pos: a },
            HealError::NotClaimed { pos: a, enqueue: b },
            HealError::NotStuck { pos: a, stamp: b },
            HealError::KindChanged {
                pos: a,
                expected: kinds[i % 3],
                found: kinds[j % 3],
            },
        ]);
    }
    assert_every_variant(&push, 8, push_variant);
    assert_every_variant(&pop, 6, pop_variant);
    assert_every_variant(&heal, 4, heal_variant);
    check_each(&push, &[]);
    check_each(&pop, &[]);
    check_each(&heal, &[]);
}

fn blob_variant(e: &BlobError) -> usize {
    match e {
        BlobError::NoArena => 0,
        BlobError::TooLarge { .. } => 1,
        BlobError::ArenaExhausted { .. } => 2,
        BlobError::OutOfBounds { .. } => 3,
        BlobError::LenMismatch { .. } => 4,
        BlobError::DescriptorLen { .. } => 5,
        BlobError::WriteSeqExhausted { .. } => 6,
        BlobError::BufferTooSmall { .. } => 7,
        BlobError::WrongKind { .. } => 8,
    }
}

fn try_push_variant(e: &TryPushError) -> usize {
    match e {
        TryPushError::Full(_) => 0,
        TryPushError::Exhausted(_) => 1,
    }
}

fn registry_variant(e: &RegistryError) -> usize {
    match e {
        RegistryError::NoRegistry => 0,
        RegistryError::Full { .. } => 1,
        RegistryError::ZeroPid => 2,
        RegistryError::BadSlot { .. } => 3,
        RegistryError::NotOwner { .. } => 4,
    }
}

#[test]
fn blob_registry_and_producer_errors_format_every_variant() {
    let mut blob = std::vec![BlobError::NoArena];
    let mut registry = std::vec![RegistryError::NoRegistry, RegistryError::ZeroPid];
    let mut full = Vec::new();
    let mut exhausted = Vec::new();
    let mut try_push = Vec::new();
    for (i, j) in pairs() {
        let (a, b, n, m, x, y) = (U64[i], U64[j], USIZE[i], USIZE[j], U32[i], U32[j]);
        let descriptor = BlobRef {
            offset: a,
            len: x,
            flags: U32[(i + 2) % 5],
        };
        blob.extend([
            BlobError::TooLarge { len: n, max: b },
            BlobError::ArenaExhausted { reserved: a },
            BlobError::OutOfBounds {
                blob: descriptor,
                capacity: b,
            },
            BlobError::LenMismatch {
                len: n,
                expected: y,
            },
            BlobError::DescriptorLen { len: n, need: m },
            BlobError::WriteSeqExhausted { write_seq: a },
            BlobError::BufferTooSmall { len: n, need: y },
            BlobError::WrongKind {
                flags: x,
                need: "a single-writer ring",
            },
        ]);
        registry.extend([
            RegistryError::Full { count: x },
            RegistryError::BadSlot { slot: x, count: y },
            RegistryError::NotOwner {
                slot: x,
                pid: y,
                found: U32[(i + 2) % 5],
            },
        ]);
        full.push(Full {
            seq: a,
            gate_limit: b,
        });
        exhausted.push(SeqExhausted { seq: a });
        try_push.extend([
            TryPushError::Full(Full {
                seq: a,
                gate_limit: b,
            }),
            TryPushError::Exhausted(SeqExhausted { seq: b }),
        ]);
    }
    assert_every_variant(&blob, 9, blob_variant);
    assert_every_variant(&registry, 5, registry_variant);
    // A descriptor's flags play no part in whether it fits the arena.
    check_each(&blob, &["flags"]);
    check_each(&registry, &[]);
    check_each(&full, &[]);
    check_each(&exhausted, &[]);
    assert_every_variant(&try_push, 2, try_push_variant);
    check_each(&try_push, &[]);
}

fn hold_variant(e: &HoldError) -> usize {
    match e {
        HoldError::Duplicate { .. } => 0,
        HoldError::Full { .. } => 1,
    }
}

#[test]
fn hold_errors_format_every_variant() {
    let all: Vec<HoldError> = hostile(|i, j| {
        std::vec![
            HoldError::Duplicate { seq: U64[i] },
            HoldError::Full {
                seq: U64[i],
                len: USIZE[j],
                held: USIZE[i],
                max_held: USIZE[j],
                bytes_free: USIZE[(i + 2) % 5],
            },
        ]
    });
    assert_every_variant(&all, 2, hold_variant);
    check_each(&all, &[]);
}

fn blackboard_variant(e: &BlackboardError) -> usize {
    use BlackboardError::*;
    match e {
        TooShort { .. } => 0,
        BadMagic { .. } => 1,
        BadVersion { .. } => 2,
        ValueSizeMismatch { .. } => 3,
        ValueTooLarge { .. } => 4,
        BadValueAlign { .. } => 5,
        BadSlotSize { .. } => 6,
        SlotSizeMismatch { .. } => 7,
        KeyOutOfRange { .. } => 8,
        ValueLen { .. } => 9,
    }
}

#[test]
fn blackboard_and_lossy_errors_format_every_variant() {
    use BlackboardError::*;
    let mut board: Vec<_> = MAGICS.map(|found| BadMagic { found }).into();
    let mut lossy = Vec::new();
    let mut tickets = Vec::new();
    let mut past_claims = Vec::new();
    for (i, j) in pairs() {
        let (a, b, n, x, y, z) = (U64[i], U64[j], USIZE[i], U32[i], U32[j], U32[(i + 2) % 5]);
        board.extend([
            TooShort { need: a, len: b },
            BadVersion { found: x },
            ValueSizeMismatch {
                expected: x,
                found: y,
            },
            ValueTooLarge { value_size: x },
            BadValueAlign { value_align: x },
            BadSlotSize {
                slot_size: x,
                value_size: y,
            },
            SlotSizeMismatch {
                expected: x,
                found: y,
                value_align: z,
            },
            KeyOutOfRange {
                key: n,
                slot_count: y,
            },
            ValueLen {
                len: n,
                value_size: y,
            },
        ]);
        lossy.extend([
            LossyHealError::BadIndex {
                index: a,
                capacity: b,
            },
            LossyHealError::NotMidWrite { index: a, seq: b },
        ]);
        tickets.push(TicketExhausted { ticket: a });
        past_claims.push(SlotsPastClaim {
            count: a,
            slot: b,
            seq: U64[(i + 2) % 5],
            claim_seq: U64[(j + 3) % 5],
        });
    }
    assert_every_variant(&board, 10, blackboard_variant);
    assert_every_variant(&lossy, 2, |e| match e {
        LossyHealError::BadIndex { .. } => 0,
        LossyHealError::NotMidWrite { .. } => 1,
    });
    check_each(&board, &[]);
    check_each(&lossy, &[]);
    check_each(&tickets, &[]);
    check_each(&past_claims, &[]);
}

#[test]
fn replication_errors_format_every_variant() {
    let wire = wire_samples();
    let mut sink = std::vec![SinkError::Storage];
    sink.extend(
        attach_samples()
            .into_iter()
            .map(|e| SinkError::Init(InitError::Geometry(e))),
    );
    let mut source = std::vec![
        SourceError::Closed,
        SourceError::UnexpectedFrame {
            kind: Kind::Gap,
            seq: 7,
            expected: "NAK"
        }
    ];
    source.extend(wire.iter().copied().map(SourceError::Protocol));
    let mut mirror = std::vec![
        MirrorError::Closed,
        MirrorError::UnexpectedFrame {
            kind: Kind::Multicast,
            seq: 0,
            expected: "DATA, GAP or HEARTBEAT"
        },
        MirrorError::TruncatedFrame {
            end: StreamEnd::Closed,
            kind: Some(Kind::Data),
            got: 20,
            expected: Some(64),
            seq: Some(3),
            next: 3
        },
        MirrorError::TruncatedFrame {
            end: StreamEnd::Reset,
            kind: None,
            got: 3,
            expected: None,
            seq: None,
            next: 1
        },
        MirrorError::TruncatedFrame {
            end: StreamEnd::GivenUp,
            kind: Some(Kind::Heartbeat),
            got: 9,
            expected: Some(16),
            seq: None,
            next: 5
        }
    ];
    mirror.extend(wire.iter().copied().map(MirrorError::Protocol));
    mirror.extend(sink.iter().copied().map(MirrorError::Sink));
    assert_every_variant(&sink, 2, |e| match e {
        SinkError::Init(_) => 0,
        SinkError::Storage => 1,
    });
    assert_every_variant(&source, 3, |e| match e {
        SourceError::Protocol(_) => 0,
        SourceError::UnexpectedFrame { .. } => 1,
        SourceError::Closed => 2,
    });
    assert_every_variant(&mirror, 5, |e| match e {
        MirrorError::Protocol(_) => 0,
        MirrorError::UnexpectedFrame { .. } => 1,
        MirrorError::Sink(_) => 2,
        MirrorError::Closed => 3,
        MirrorError::TruncatedFrame { .. } => 4,
    });
    check_each(&sink, &[]);
    check_each(&source, &[]);
    check_each(&mirror, &[]);
}

/// Errors name a frame kind as the spec writes it (`GEOMETRY`), as `TruncatedFrame` does,
/// not by its Rust name (`Geometry`): `UnexpectedFrame`, `WrongKind`, `BadLen` and
/// `SeqLimit` printed the Debug name.
#[test]
fn frame_kinds_are_named_as_the_spec_writes_them() {
    use std::string::ToString;
    let mirror = MirrorError::UnexpectedFrame {
        kind: Kind::Geometry,
        seq: 77,
        expected: "DATA, GAP or HEARTBEAT",
    };
    assert_eq!(
        mirror.to_string(),
        "unexpected GEOMETRY frame (seq 77): expected DATA, GAP or HEARTBEAT"
    );
    let source = SourceError::UnexpectedFrame {
        kind: Kind::Heartbeat,
        seq: 5,
        expected: "NAK",
    };
    assert_eq!(
        source.to_string(),
        "unexpected HEARTBEAT frame (seq 5): expected NAK"
    );
    let wrong = WireError::WrongKind {
        expected: Kind::Hello,
        found: Kind::Multicast,
    };
    assert_eq!(wrong.to_string(), "expected a HELLO frame, got MULTICAST");
    let len = WireError::BadLen {
        kind: Kind::Nak,
        expected: 8,
        found: 3,
    };
    assert_eq!(len.to_string(), "NAK frame has len 3, must be 8");
    let limit = WireError::SeqLimit {
        kind: Kind::Punch,
        seq: u64::MAX,
    };
    assert_eq!(
        limit.to_string(),
        "PUNCH sequence 0xffffffffffffffff is at or past the sequence limit 0x8000000000000000"
    );
    // Every kind has its own name, in capitals.
    let names: std::collections::BTreeSet<&str> =
        (1..=8).filter_map(Kind::from_u8).map(Kind::name).collect();
    assert_eq!(names.len(), 8);
    assert!(
        names
            .iter()
            .all(|n| n.bytes().all(|b| b.is_ascii_uppercase()))
    );
}
