//! Sans-IO replication state machines (spec §19–§25): no clocks, no sockets, no allocation.
