//! The replication wire protocol version 1 (spec §17–§18): one file per frame kind.
