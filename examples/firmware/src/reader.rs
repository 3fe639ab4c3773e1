//! The main loop's reader: drains the ring with the core's [`Consumer`] and checks that every
//! record arrives in order and intact, and that every record it did not get is one the
//! consumer counted as lapped (overwritten before it was read).

use ringwire_core::broadcast::Consumer;

use crate::sample::{self, Sample};

/// What the reader found wrong.
#[derive(Debug)]
#[allow(dead_code)] // the fields are read through Debug when the failure is printed
pub enum ReadError {
    /// A sequence at or below one already delivered.
    OutOfOrder { seq: u64, expected: u64 },
    /// Sequences were skipped that the consumer's lap count does not account for.
    UncountedLoss {
        seq: u64,
        expected: u64,
        counted: u64,
    },
    /// The bytes under `seq` are not the sample written as record `seq`.
    BadRecord { seq: u64, got: Sample },
    /// A sample older than the one before it.
    TickWentBack { seq: u64, tick: u32, previous: u32 },
}

/// A consumer plus the running checks.
pub struct Reader {
    consumer: Consumer,
    /// The sequence the next record must have if nothing was lost.
    expected: u64,
    /// `consumer.lapped()` when the last record was delivered.
    lapped_seen: u64,
    last_tick: u32,
    /// Records delivered and checked.
    pub read: u64,
}

impl Reader {
    /// Checks what `consumer` delivers from its current cursor on.
    pub fn new(consumer: Consumer) -> Reader {
        Reader {
            expected: consumer.cursor(),
            lapped_seen: consumer.lapped(),
            consumer,
            last_tick: 0,
            read: 0,
        }
    }

    /// Records lost to laps so far (the consumer's own count).
    pub fn lapped(&self) -> u64 {
        self.consumer.lapped()
    }

    /// The sequence the next receive will deliver if nothing more is lost.
    pub fn cursor(&self) -> u64 {
        self.consumer.cursor()
    }

    /// Reads and checks everything published so far.
    pub fn drain(&mut self) -> Result<(), ReadError> {
        let mut buf = [0u8; sample::LEN];
        while let Some(seq) = self.consumer.try_recv(&mut buf) {
            let expected = self.expected;
            let Some(skipped) = seq.checked_sub(expected) else {
                return Err(ReadError::OutOfOrder { seq, expected });
            };
            // A lap moves the cursor and counts the records passed over, possibly in an
            // earlier call that then found nothing: compare against the count at the last
            // delivered record, not at the last call.
            let counted = self.consumer.lapped() - self.lapped_seen;
            if skipped != counted {
                return Err(ReadError::UncountedLoss {
                    seq,
                    expected,
                    counted,
                });
            }
            let got = Sample::from_bytes(&buf);
            if !got.is_valid_for(seq) {
                return Err(ReadError::BadRecord { seq, got });
            }
            if got.tick < self.last_tick {
                return Err(ReadError::TickWentBack {
                    seq,
                    tick: got.tick,
                    previous: self.last_tick,
                });
            }
            self.last_tick = got.tick;
            self.expected = seq + 1;
            self.lapped_seen = self.consumer.lapped();
            self.read += 1;
        }
        Ok(())
    }
}
