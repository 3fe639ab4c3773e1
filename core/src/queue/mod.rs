//! Lossless queues in the same memory model: SPSC and Vyukov MPMC, plus ringfire's lossy
//! MPMC ring (spec §8) for interop.
