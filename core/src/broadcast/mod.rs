//! The single-writer broadcast ring (spec §4–§7, §9, §10).
