//! The single-writer broadcast ring (spec §4–§7, §9, §10).

pub mod blob;
pub mod registry;
