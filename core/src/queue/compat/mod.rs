//! ringfire-compatible queue protocols over a [`RingView`](crate::RingView).

mod mpmc_lossy;

pub use mpmc_lossy::{
    LossyHealError, LossyMpmcConsumer, LossyMpmcProducer, LossyPush, SlotsPastClaim, TAKEOVER_NS,
    TicketExhausted, slots_past_claim,
};
