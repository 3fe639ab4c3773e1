//! ringfire-compatible queue protocols over a [`RingView`](crate::RingView).

mod mpmc_lossy;

pub use mpmc_lossy::{
    LossyHealError, LossyMpmcConsumer, LossyMpmcProducer, LossyPush, SlotScan, SlotsPastClaim,
    TAKEOVER_NS, TicketExhausted, scan_slots, slots_past_claim,
};
