//! [`BlobWriter`] and [`BlobReader`]: a blob ring's single writer (reserve, copy, publish
//! the descriptor, spec §10.3 step 4 and §4.2) and a reader (tear-free descriptor read,
//! §4.3 lap handling, §10.4 blob validation), built on the arena functions of the parent
//! module and the slot protocol of [`RingView`].

use super::{
    Arena, BLOB_REF_LEN, BlobError, BlobRead, read_blob, reserve, set_descriptor_ref,
    split_descriptor, write_blob,
};
use crate::broadcast::LOOKASIDE_POLLS;
use crate::broadcast::producer::{SINGLE_WRITER, many_writers};
use crate::broadcast::registry::{self, RegistryError};
use crate::layout::{
    BlobRef, Flags, LaterSeq, REGISTRY_NAME_LEN, SEQ_LIMIT, SLOT_WRITING, later_seq,
    next_write_seq, oldest_retained,
};
use crate::ring::{RingView, SlotRead};
use crate::sync::Ordering;

/// What a blob writer needs of a ring's flow control, as its `WrongKind` error names it.
const LATEST_WINS: &str = "a latest-wins ring";

/// The ring's flags if they carry `POLICY_LOSSLESS_BACKPRESSURE`: a gate on the registered
/// readers that only ringfire's `RingProducer` honours (spec §6); blob rings are
/// latest-wins (`0x0311`, spec §2.1), and a blob writer has no gate.
fn lossless(view: &RingView) -> Option<u32> {
    let flags = view.geometry().flags;
    flags
        .has(Flags::POLICY_LOSSLESS_BACKPRESSURE)
        .then_some(flags.0)
}

fn check_descriptor(view: &RingView, len: usize) -> Result<usize, BlobError> {
    let need = view.geometry().record_len();
    if len != need {
        return Err(BlobError::DescriptorLen { len, need });
    }
    Ok(need)
}

/// What [`BlobWriter::push`] published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Pushed {
    /// The message's sequence number.
    pub seq: u64,
    /// The descriptor it was published with.
    pub blob: BlobRef,
    /// Readers sleep on the futex: the caller must issue FUTEX_WAKE (spec §11).
    pub wake: bool,
}

/// The single writer of a blob ring: reserve, copy, publish a descriptor (spec §10.3
/// step 4 and §4.2).
#[derive(Debug)]
pub struct BlobWriter {
    view: RingView,
    next: u64,
    /// Publish with a full fence (see [`BlobWriter::set_fenced_publish`]).
    fenced: bool,
}

impl BlobWriter {
    /// A writer for `view`, continuing after its current `write_seq` (1 on a fresh ring).
    /// The caller must be the ring's only writer. A ring flagged `MODE_MPMC` is refused as
    /// [`Producer::new`](crate::broadcast::Producer::new) refuses it, and so is one flagged
    /// `POLICY_LOSSLESS_BACKPRESSURE`, whose registered readers expect a gate this writer
    /// does not keep (ringfire has no lossless blob ring, spec §2.1, §6): both
    /// [`BlobError::WrongKind`]. A `write_seq` that leaves no sequence below
    /// [`SEQ_LIMIT`] to write (`SEQ_LIMIT - 1` or more: a corrupt header,
    /// [`next_write_seq`]) is [`BlobError::WriteSeqExhausted`].
    pub fn new(view: RingView) -> Result<BlobWriter, BlobError> {
        if Arena::of(&view).is_none() {
            return Err(BlobError::NoArena);
        }
        if let Some(flags) = many_writers(&view) {
            return Err(BlobError::WrongKind {
                flags,
                need: SINGLE_WRITER,
            });
        }
        if let Some(flags) = lossless(&view) {
            return Err(BlobError::WrongKind {
                flags,
                need: LATEST_WINS,
            });
        }
        // Acquire: we continue after whatever an earlier writer of this ring published.
        let w = view.write_seq().load(Ordering::Acquire);
        let next = next_write_seq(w).map_err(|_| BlobError::WriteSeqExhausted { write_seq: w })?;
        Ok(BlobWriter {
            view,
            next,
            fenced: false,
        })
    }

    /// Publishes with [`RingView::publish_fenced`] instead of [`RingView::publish`]: for a
    /// process that could not register for membarrier, whose sleepers' barrier would not
    /// reach it (see [`RingView::bump_futex_if_waiting`]).
    pub fn set_fenced_publish(&mut self, fenced: bool) {
        self.fenced = fenced;
    }

    /// The ring.
    pub fn view(&self) -> &RingView {
        &self.view
    }

    /// The sequence the next push will get.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// Publishes one message: `descriptor` is the whole slot payload (`element_size - 8`
    /// bytes: the meta, after 8 padding bytes for a 16-aligned one); its last 16 bytes are
    /// overwritten with the new [`BlobRef`] (spec §10.2; meta types aligned to 32 or more
    /// break that rule, as in the reference, and ringwire's typed handles refuse them).
    ///
    /// Once the last sequence below [`SEQ_LIMIT`] is published, a push writes nothing (no
    /// arena space, no slot) and fails with [`BlobError::WriteSeqExhausted`].
    pub fn push(
        &mut self,
        descriptor: &mut [u8],
        blob: &[u8],
        flags: u32,
    ) -> Result<Pushed, BlobError> {
        check_descriptor(&self.view, descriptor.len())?;
        if self.next >= SEQ_LIMIT {
            return Err(BlobError::WriteSeqExhausted {
                write_seq: self.next - 1,
            });
        }
        let r = reserve(&self.view, blob.len(), flags)?;
        write_blob(&self.view, &r, blob)?;
        set_descriptor_ref(descriptor, &r);
        let seq = self.next;
        self.view.write_slot(seq, descriptor);
        let wake = self.view.publish_with(seq, self.fenced);
        self.next += 1;
        Ok(Pushed { seq, blob: r, wake })
    }
}

/// One message received by [`BlobReader::recv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Received {
    /// The message's sequence number.
    pub seq: u64,
    /// Blob bytes written to the caller's buffer.
    pub len: usize,
}

/// A reader of a blob ring: starts at the oldest retained message, handles laps as spec
/// §4.3 says and skips lost blobs (§10.4), counting both as lapped. On a SPARSE (mirror)
/// ring it skips holes as §7 says, counting them as lapped too. Optionally registered
/// (spec §5, §9): it then publishes its cursor after every receive or skip and unregisters
/// when dropped.
#[derive(Debug)]
pub struct BlobReader {
    view: RingView,
    cursor: u64,
    lapped: u64,
    /// The registration while registered.
    registration: Option<registry::Owner>,
    /// The name it registered under (encoded), to register again if its slot is pruned.
    registry_name: [u8; REGISTRY_NAME_LEN],
    /// The incarnation its registrations' tokens carry ([`BlobReader::set_incarnation`]).
    incarnation: Option<registry::Incarnation>,
    /// The ring may have holes (mirror ring, spec §7).
    sparse: bool,
    /// Consecutive "pending" polls; the look past the slot runs on every
    /// [`LOOKASIDE_POLLS`]th.
    pending_polls: u32,
}

impl BlobReader {
    /// A reader starting at `oldest_retained(write_seq, C)` (spec §10.4 step 3).
    ///
    /// A ring flagged `MODE_MPMC` is refused ([`BlobError::WrongKind`]), as
    /// [`BlobWriter::new`] refuses it: a blob ring has one writer (flags `0x0311`, a
    /// mirror's `0x0711`, spec §2.1), so only a corrupt header or a wrong path carries the
    /// flag, and this reader's rules rest on one writer (a slot left mid-write below
    /// `write_seq` is passed as lost, which on an MPMC ring could be a ticket still being
    /// written; there this reader would stop at it for good instead).
    pub fn new(view: RingView) -> Result<BlobReader, BlobError> {
        if Arena::of(&view).is_none() {
            return Err(BlobError::NoArena);
        }
        if let Some(flags) = many_writers(&view) {
            return Err(BlobError::WrongKind {
                flags,
                need: SINGLE_WRITER,
            });
        }
        // Acquire: pairs with the writer's release of write_seq.
        let w = view.write_seq().load(Ordering::Acquire);
        let cursor = oldest_retained(w, view.capacity());
        let sparse = view.geometry().flags.has(Flags::SPARSE);
        Ok(BlobReader {
            view,
            cursor,
            lapped: 0,
            registration: None,
            registry_name: [0; REGISTRY_NAME_LEN],
            incarnation: None,
            sparse,
            pending_polls: 0,
        })
    }

    /// The incarnation of the registering process that the tokens of this reader's next
    /// registrations carry, as
    /// [`Consumer::set_incarnation`](crate::broadcast::Consumer::set_incarnation) describes.
    pub fn set_incarnation(&mut self, incarnation: Option<registry::Incarnation>) {
        self.incarnation = incarnation;
    }

    /// Registers this reader under `pid` with its current cursor (ringfire's
    /// `BlobConsumer` uses the name `"anonymous"`). Returns the slot; a second call returns
    /// the slot it already holds. The next [`recv`](Self::recv) re-runs the lap check.
    pub fn register(
        &mut self,
        pid: u32,
        name: &str,
        is_alive: impl Fn(u32, u64) -> bool,
    ) -> Result<u32, RegistryError> {
        if let Some(o) = self.registration {
            return Ok(o.slot);
        }
        let encoded = registry::encode_name(name);
        let o = registry::register_owner_as(
            &self.view,
            pid,
            &encoded,
            self.cursor,
            self.incarnation,
            is_alive,
        )?;
        self.registration = Some(o);
        self.registry_name = encoded;
        Ok(o.slot)
    }

    /// Registers this reader again under `pid` when it holds a registration of another
    /// process (a copy inherited through `fork`): the other process's slot is only
    /// forgotten, and the reader takes a slot of its own under `pid` and its name, at its
    /// cursor, as [`Consumer::register_as`](crate::broadcast::Consumer::register_as) does
    /// (the next [`recv`](Self::recv) reruns the lap check). Returns the slot now held
    /// (`None` when not registered); a full registry leaves the reader unregistered, with
    /// the error.
    pub fn register_as(
        &mut self,
        pid: u32,
        is_alive: impl Fn(u32, u64) -> bool,
    ) -> Result<Option<u32>, RegistryError> {
        match self.registration {
            Some(o) if o.pid != pid => self.registration = None,
            held => return Ok(held.map(|o| o.slot)),
        }
        let name = self.registry_name;
        let o = registry::register_owner_as(
            &self.view,
            pid,
            &name,
            self.cursor,
            self.incarnation,
            is_alive,
        )?;
        self.registration = Some(o);
        Ok(Some(o.slot))
    }

    /// The registry slot this reader holds, if registered.
    pub fn registry_slot(&self) -> Option<u32> {
        self.registration.map(|o| o.slot)
    }

    /// Gives the registry slot back (also done on drop). A no-op when not registered.
    pub fn unregister(&mut self) -> Result<(), RegistryError> {
        match self.registration.take() {
            Some(o) => registry::unregister_owner(&self.view, o),
            None => Ok(()),
        }
    }

    /// [`BlobReader::unregister`] when called from process `pid`, the one that registered;
    /// from any other process (a copy of this reader inherited through `fork`) the slot is
    /// only forgotten, left to the process that registered it. See
    /// [`Consumer::unregister_as`](crate::broadcast::Consumer::unregister_as).
    pub fn unregister_as(&mut self, pid: u32) -> Result<(), RegistryError> {
        match self.registration {
            Some(o) if o.pid != pid => {
                self.registration = None;
                Ok(())
            }
            _ => self.unregister(),
        }
    }

    /// The ring.
    pub fn view(&self) -> &RingView {
        &self.view
    }

    /// The next sequence to read.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Messages skipped: overwritten before they were read, or whose blob was lost.
    pub fn lapped_count(&self) -> u64 {
        self.lapped
    }

    /// Receives the next message: its slot payload into `descriptor` (`element_size - 8`
    /// bytes; the meta is everything but the last 16) and its blob into `blob`. `Ok(None)`
    /// when caught up. A `blob` buffer that is too small is an error and the message stays
    /// unread.
    pub fn recv(
        &mut self,
        descriptor: &mut [u8],
        blob: &mut [u8],
    ) -> Result<Option<Received>, BlobError> {
        let before = self.cursor;
        let got = self.recv_inner(descriptor, blob);
        if self.cursor != before {
            self.pending_polls = 0;
            if let Some(o) = self.registration
                && registry::publish_cursor_as(&self.view, o, self.cursor).is_err()
            {
                self.register_again(o.pid);
            }
        }
        got
    }

    /// On every [`LOOKASIDE_POLLS`]th pending poll in a row: publishes the cursor again when
    /// the registry slot shows another one, as [`Consumer`](crate::broadcast::Consumer)
    /// does (a slot scribbled back a lap, with the reader caught up, held a lossless
    /// producer for good).
    #[cold]
    fn republish_stale_cursor(&mut self) {
        if let Some(o) = self.registration
            && registry::published_cursor(&self.view, o.slot) != Some(self.cursor)
            && registry::publish_cursor_as(&self.view, o, self.cursor).is_err()
        {
            self.register_again(o.pid);
        }
    }

    /// After this reader's registry slot was pruned (its pid judged dead, the slot perhaps
    /// another reader's now): takes a free slot under the same pid and name, pruning nobody,
    /// as [`Consumer`](crate::broadcast::Consumer)'s cursor publishing does. The next
    /// [`recv`](Self::recv) re-runs the lap check. With no free slot it goes on unregistered.
    #[cold]
    fn register_again(&mut self, pid: u32) {
        let name = self.registry_name;
        self.registration = registry::register_owner_as(
            &self.view,
            pid,
            &name,
            self.cursor,
            self.incarnation,
            |_, _| true,
        )
        .ok();
    }

    /// The slot at the cursor, a record `write_seq` has passed, holds the write marker: a
    /// later lap's write is overwriting the record, or its writer died mid-write and left
    /// the marker for good. The record is gone: counted as lapped, the cursor moves past it
    /// (as [`Consumer`](crate::broadcast::Consumer)'s receive does). Returns whether it
    /// moved.
    #[cold]
    fn rewritten_under(&mut self) -> bool {
        let want = self.cursor;
        let Some(w) = self.view.rewritten_under(want) else {
            return false;
        };
        // Past the oldest retained record too (a ring of markers is crossed a lap at a time;
        // `want` is below the marker's value).
        let next = (want + 1).max(oldest_retained(w, self.view.capacity()));
        self.lapped = self.lapped.saturating_add(next - want);
        self.cursor = next;
        true
    }

    /// Spec §7 hole detection on a sparse ring: when `write_seq` has reached the cursor but
    /// the cursor's slot holds an older message (a hole the mirror skipped), jump to the
    /// first retained sequence after it that is present, or past `write_seq`. Returns true
    /// if the cursor moved.
    fn skip_hole(&mut self) -> bool {
        // Acquire: pairs with the writer's release of write_seq.
        let w = self.view.write_seq().load(Ordering::Acquire);
        if w < self.cursor {
            return false;
        }
        // Acquire: pairs with the writer's release store of the sequence word.
        let seen = self.view.slot_seq(self.cursor).load(Ordering::Acquire);
        if seen == SLOT_WRITING || seen >= self.cursor {
            return false;
        }
        // Saturating: a corrupt write_seq may be u64::MAX.
        let start = oldest_retained(w, self.view.capacity()).max(self.cursor.saturating_add(1));
        let mut next = w.saturating_add(1);
        // At most C slots lie between oldest_retained(w) and w.
        for s in start..=w {
            // Acquire: as above; a present message is then read with the normal protocol.
            if self.view.slot_seq(s).load(Ordering::Acquire) == s {
                next = s;
                break;
            }
        }
        self.lapped = self.lapped.saturating_add(next - self.cursor);
        self.cursor = next;
        true
    }

    fn recv_inner(
        &mut self,
        descriptor: &mut [u8],
        blob: &mut [u8],
    ) -> Result<Option<Received>, BlobError> {
        check_descriptor(&self.view, descriptor.len())?;
        let cap = self.view.capacity();
        loop {
            match self.view.read_slot(self.cursor, descriptor) {
                SlotRead::Ok => {
                    // The length was checked above, so the split cannot fail.
                    let Some((_, r)) = split_descriptor(descriptor) else {
                        return Err(BlobError::DescriptorLen {
                            len: descriptor.len(),
                            need: BLOB_REF_LEN,
                        });
                    };
                    match read_blob(&self.view, &r, blob) {
                        BlobRead::Ok(len) => {
                            let seq = self.cursor;
                            self.cursor += 1;
                            return Ok(Some(Received { seq, len }));
                        }
                        BlobRead::Lost => {
                            self.lapped = self.lapped.saturating_add(1);
                            self.cursor += 1;
                        }
                        BlobRead::BufferTooSmall { need } => {
                            return Err(BlobError::BufferTooSmall {
                                len: blob.len(),
                                need,
                            });
                        }
                    }
                }
                SlotRead::Pending => {
                    // Every LOOKASIDE_POLLS-th pending poll in a row looks further, as
                    // `Consumer` does.
                    self.pending_polls = self.pending_polls.wrapping_add(1);
                    if self.pending_polls.is_multiple_of(LOOKASIDE_POLLS) {
                        if self.rewritten_under() || (self.sparse && self.skip_hole()) {
                            continue;
                        }
                        self.republish_stale_cursor();
                    }
                    return Ok(None);
                }
                SlotRead::Overwritten { seen } => {
                    // Acquire: pairs with the writer's release of write_seq.
                    let w = self.view.write_seq().load(Ordering::Acquire);
                    // `w` is the bound: blob rings have one writer.
                    let to = match later_seq(self.cursor, seen, w, w, cap) {
                        LaterSeq::Lap => oldest_retained(w.max(seen), cap),
                        LaterSeq::Behind { oldest } => oldest,
                        // A corrupt slot: its message alone is lost.
                        LaterSeq::Lost => self.cursor + 1,
                        LaterSeq::NotYet => return Ok(None),
                    };
                    if to <= self.cursor {
                        // A lap whose second load saw a write in flight: retried next poll.
                        return Ok(None);
                    }
                    // Saturating: a corrupt write_seq may claim 2^64 lost messages.
                    self.lapped = self.lapped.saturating_add(to - self.cursor);
                    self.cursor = to;
                }
            }
        }
    }
}

impl Drop for BlobReader {
    fn drop(&mut self) {
        // Nothing to do if the slot was already pruned and reused by another reader.
        let _ = self.unregister();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::tests::{pattern, reserved, ring, small};
    use super::*;
    use crate::layout::{Geometry, SEQ_LIMIT, arena_off};
    use std::vec;

    #[test]
    fn no_arena_is_an_error() {
        let mut buf = vec![];
        let v = ring(&mut buf, &Geometry::spmc(4, 32, 8, 0, false).unwrap());
        assert_eq!(BlobWriter::new(v).unwrap_err(), BlobError::NoArena);
        assert_eq!(BlobReader::new(v).unwrap_err(), BlobError::NoArena);
    }

    /// A blob ring whose header carries `MODE_MPMC` (a corrupt header: blob rings are
    /// `0x0311`, spec §2.1) is refused as `Producer` refuses an MPMC ring, before anything
    /// is written: the writer would share the ring with the MPMC producers that accept it.
    #[test]
    fn a_writer_refuses_an_mpmc_flagged_ring() {
        let mut geo = Geometry::blob(4, 32, 2, 256).unwrap();
        geo.flags = Flags(geo.flags.0 | Flags::MODE_MPMC);
        let mut buf = vec![];
        let v = ring(&mut buf, &geo);
        assert_eq!(
            BlobWriter::new(v).map(|_| ()),
            Err(BlobError::WrongKind {
                flags: 0x0331,
                need: "a single-writer ring"
            })
        );
        assert_eq!(v.write_seq().load(Ordering::Relaxed), 0);
        assert_eq!(reserved(&v), 0, "no arena space taken");
    }

    /// ringfire's lossless flow control is `RingProducer`'s alone (spec §6); a blob ring is
    /// `0x0311`, latest-wins (§2.1). The blob writer took a ring flagged lossless and
    /// overwrote what its registered readers had not read, where they count on the gate.
    /// It is refused, before anything is written, whether or not the latest-wins bit is
    /// set too.
    #[test]
    fn a_writer_refuses_a_lossless_flagged_ring() {
        for flags in [0x0312, 0x0313] {
            let mut geo = Geometry::blob(4, 32, 2, 256).unwrap();
            geo.flags = Flags(flags);
            let mut buf = vec![];
            let v = ring(&mut buf, &geo);
            assert_eq!(
                BlobWriter::new(v).map(|_| ()),
                Err(BlobError::WrongKind {
                    flags,
                    need: "a latest-wins ring"
                }),
                "{flags:#06x}"
            );
            assert_eq!(v.write_seq().load(Ordering::Relaxed), 0);
            assert_eq!(reserved(&v), 0, "no arena space taken");
            // A reader reads it as any blob ring: its protocol does not depend on the gate.
            assert!(BlobReader::new(v).is_ok());
        }
    }

    /// A blob ring flagged `MODE_MPMC` (only a corrupt header: no writer of either project
    /// makes one, and `BlobWriter` refuses it) is refused by the reader too. The reader
    /// took it and then stopped for good at a slot left mid-write below `write_seq`: it
    /// passes such a slot as lost only on a single-writer ring.
    #[test]
    fn a_reader_refuses_an_mpmc_flagged_ring() {
        let mut geo = Geometry::blob(4, 32, 2, 256).unwrap();
        geo.flags = Flags(geo.flags.0 | Flags::MODE_MPMC);
        let mut buf = vec![];
        let v = ring(&mut buf, &geo);
        v.write_seq().store(6, Ordering::Relaxed);
        // A slot left mid-write below write_seq: on this ring the reader waited there.
        v.slot_seq(3).store(SLOT_WRITING, Ordering::Relaxed);
        assert_eq!(v.rewritten_under(3), None, "MPMC: not passed as lost");
        assert_eq!(
            BlobReader::new(v).map(|_| ()),
            Err(BlobError::WrongKind {
                flags: 0x0331,
                need: "a single-writer ring"
            })
        );
    }

    /// A `write_seq` of 2^63 − 1 let the writer attach and publish sequence 2^63, which
    /// readers then refused as a corrupt header. It is refused at attach; one below it
    /// leaves one push, and the push after it takes no arena space and writes no slot.
    #[test]
    fn a_writer_writes_no_sequence_at_or_past_the_limit() {
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        v.write_seq().store(SEQ_LIMIT - 1, Ordering::Relaxed);
        assert_eq!(
            BlobWriter::new(v).map(|_| ()),
            Err(BlobError::WriteSeqExhausted {
                write_seq: SEQ_LIMIT - 1
            })
        );
        v.write_seq().store(SEQ_LIMIT - 2, Ordering::Relaxed);
        let mut w = BlobWriter::new(v).unwrap();
        let p = w.push(&mut [1; 24], b"one", 0).map(|p| p.seq);
        assert_eq!(p, Ok(SEQ_LIMIT - 1));
        let used = reserved(&v);
        assert_eq!(
            w.push(&mut [2; 24], b"two", 0),
            Err(BlobError::WriteSeqExhausted {
                write_seq: SEQ_LIMIT - 1
            })
        );
        assert_eq!(reserved(&v), used, "no arena space taken");
        assert_eq!(v.write_seq().load(Ordering::Relaxed), SEQ_LIMIT - 1);
        assert_eq!(v.slot_seq(SEQ_LIMIT).load(Ordering::Relaxed), 0);
        assert_eq!(w.next_seq(), SEQ_LIMIT);
    }

    #[test]
    fn fenced_and_unfenced_pushes_report_sleepers_alike() {
        for fenced in [false, true] {
            let mut buf = vec![];
            let v = small(&mut buf, 0);
            let mut w = BlobWriter::new(v).unwrap();
            w.set_fenced_publish(fenced);
            let mut d = [0u8; 24];
            assert!(!w.push(&mut d, b"a", 0).unwrap().wake, "nobody sleeps");
            v.waiting_consumers().store(1, Ordering::Relaxed);
            assert!(w.push(&mut d, b"b", 0).unwrap().wake, "fenced {fenced}");
            assert_eq!(v.futex_word().load(Ordering::Relaxed), 1);
            assert_eq!(v.write_seq().load(Ordering::Relaxed), 2);
        }
    }

    #[test]
    fn writer_and_reader_deliver_meta_and_blobs() {
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let mut w = BlobWriter::new(v).unwrap();
        let mut rd = BlobReader::new(v).unwrap();
        let mut desc = [0u8; 24];
        let mut out = [0u8; 256];
        assert_eq!(rd.recv(&mut desc, &mut out), Ok(None));
        for (i, n) in [5usize, 70, 0].into_iter().enumerate() {
            let mut d = [0u8; 24];
            d[..4].copy_from_slice(&(100 + i as u32).to_ne_bytes());
            let p = w.push(&mut d, &pattern(n, i as u8), 0).unwrap();
            assert_eq!((p.seq, p.blob.len, p.wake), (i as u64 + 1, n as u32, false));
        }
        for (i, n) in [5usize, 70, 0].into_iter().enumerate() {
            let got = rd.recv(&mut desc, &mut out).unwrap().unwrap();
            assert_eq!((got.seq, got.len), (i as u64 + 1, n));
            assert_eq!(&desc[..4], &(100 + i as u32).to_ne_bytes());
            assert_eq!(&out[..n], &pattern(n, i as u8)[..]);
        }
        assert_eq!(rd.recv(&mut desc, &mut out), Ok(None));
        assert_eq!((rd.cursor(), rd.lapped_count()), (4, 0));
        assert_eq!(
            rd.recv(&mut [0u8; 16], &mut out),
            Err(BlobError::DescriptorLen { len: 16, need: 24 })
        );
        // A buffer too small leaves the message unread.
        w.push(&mut [0u8; 24], &pattern(40, 9), 0).unwrap();
        assert_eq!(
            rd.recv(&mut desc, &mut out[..39]),
            Err(BlobError::BufferTooSmall { len: 39, need: 40 })
        );
        assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 4);
    }

    #[test]
    fn lost_blobs_and_lapped_slots_are_counted_never_torn() {
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let mut w = BlobWriter::new(v).unwrap();
        let mut rd = BlobReader::new(v).unwrap();
        // Four 100-byte blobs (128 rounded) into a 256-byte arena: only the last two survive,
        // while all four descriptors are still in the 4-slot ring.
        for i in 0..4u8 {
            w.push(&mut [i; 24], &pattern(100, i), 0).unwrap();
        }
        let (mut desc, mut out) = ([0u8; 24], [0u8; 128]);
        let got = rd.recv(&mut desc, &mut out).unwrap().unwrap();
        assert_eq!((got.seq, rd.lapped_count()), (3, 2));
        assert_eq!(&out[..100], &pattern(100, 2)[..]);
        assert_eq!(desc[0], 2);
        // Lapped slots: six more small pushes put seq 5..10 in the ring; the reader at 4
        // is lapped to oldest_retained(10, 4) = 7.
        for i in 4..10u8 {
            w.push(&mut [i; 24], &pattern(8, i), 0).unwrap();
        }
        let got = rd.recv(&mut desc, &mut out).unwrap().unwrap();
        assert_eq!((got.seq, rd.lapped_count()), (7, 2 + 3));
        assert_eq!(&out[..8], &pattern(8, 6)[..]);
    }

    /// A slot whose sequence word no writer stores there (more than a lap past
    /// `write_seq`, or at or past `SEQ_LIMIT`) is one lost message, not a lap to that
    /// value's oldest retained sequence, after which the reader got nothing more.
    #[test]
    fn a_slot_holding_a_sequence_no_lap_stores_is_one_lost_message() {
        for bad in [3 + 4 + 1, 1 << 40, SEQ_LIMIT, u64::MAX - 1] {
            let mut buf = vec![];
            let v = small(&mut buf, 2);
            let mut w = BlobWriter::new(v).unwrap();
            let mut rd = BlobReader::new(v).unwrap();
            for i in 0..3u8 {
                w.push(&mut [i; 24], &pattern(8, i), 0).unwrap();
            }
            v.slot_seq(2).store(bad, Ordering::Relaxed);
            let (mut desc, mut out) = ([0u8; 24], [0u8; 128]);
            let mut got = std::vec::Vec::new();
            while let Some(r) = rd.recv(&mut desc, &mut out).unwrap() {
                got.push(r.seq);
            }
            assert_eq!(got, [1, 3], "{bad:#x}");
            assert_eq!((rd.cursor(), rd.lapped_count()), (4, 1), "{bad:#x}");
            // Past write_seq (the slot of 5 is 1's, read already): waited for.
            v.slot_seq(5).store(bad, Ordering::Relaxed);
            w.push(&mut [3; 24], &pattern(8, 3), 0).unwrap();
            assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 4);
            assert_eq!(rd.recv(&mut desc, &mut out), Ok(None), "{bad:#x}");
            w.push(&mut [4; 24], &pattern(8, 4), 0).unwrap();
            assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 5);
            assert_eq!(rd.lapped_count(), 1, "{bad:#x}");
        }
    }

    #[test]
    fn a_pruned_reader_leaves_its_old_slots_new_owner_alone_and_registers_again() {
        use crate::broadcast::registry::{live_readers, prune_dead};
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let mut w = BlobWriter::new(v).unwrap();
        let mut a = BlobReader::new(v).unwrap();
        assert_eq!(a.register(11, "a", |_, _| true), Ok(0));
        for i in 0..2u8 {
            w.push(&mut [i; 24], &pattern(8, i), 0).unwrap();
        }
        // A is judged dead and its slot taken by B, at cursor 1.
        assert_eq!(prune_dead(&v, |pid| pid != 11), 1);
        let mut b = BlobReader::new(v).unwrap();
        assert_eq!(b.register(12, "b", |pid, _| pid != 11), Ok(0));
        let readers = || {
            live_readers(&v)
                .map(|r| (r.slot, r.pid, r.cursor))
                .collect::<std::vec::Vec<_>>()
        };
        // A's receive leaves B's cursor as it is and takes the free slot.
        let (mut desc, mut out) = ([0u8; 24], [0u8; 8]);
        assert_eq!(a.recv(&mut desc, &mut out).unwrap().unwrap().seq, 1);
        assert_eq!(a.registry_slot(), Some(1));
        assert_eq!(readers(), [(0, 12, 1), (1, 11, 2)]);
        assert_eq!(a.recv(&mut desc, &mut out).unwrap().unwrap().seq, 2);
        assert_eq!(readers(), [(0, 12, 1), (1, 11, 3)]);
    }

    #[test]
    fn a_slot_left_mid_write_below_write_seq_is_passed_as_lost() {
        let mut buf = vec![];
        let v = small(&mut buf, 0);
        let mut w = BlobWriter::new(v).unwrap();
        for i in 0..6u8 {
            w.push(&mut [i; 24], &pattern(8, i), 0).unwrap();
        }
        // 1..=6 published in 4 slots (oldest 3); the writer dies writing 7 over 3's slot.
        v.slot_seq(7).store(SLOT_WRITING, Ordering::Relaxed);
        let mut rd = BlobReader::new(v).unwrap();
        assert_eq!(rd.cursor(), 3);
        let (mut desc, mut out) = ([0u8; 24], [0u8; 8]);
        // The marker is looked at on the 64th pending poll in a row.
        let mut got = std::vec::Vec::new();
        for _ in 0..66 {
            got.extend(rd.recv(&mut desc, &mut out).unwrap().map(|r| r.seq));
        }
        assert_eq!(got, [4, 5, 6]);
        assert_eq!(rd.lapped_count(), 1);
    }

    #[test]
    fn a_registered_reader_publishes_its_cursor_and_leaves_on_drop() {
        use crate::broadcast::registry::{gate_limit, live_reader, min_live_cursor};
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let mut w = BlobWriter::new(v).unwrap();
        let mut rd = BlobReader::new(v).unwrap();
        assert_eq!(rd.registry_slot(), None);
        assert_eq!(rd.register(4242, "anonymous", |_, _| true), Ok(0));
        assert_eq!(rd.register(4242, "anonymous", |_, _| true), Ok(0));
        assert_eq!(rd.registry_slot(), Some(0));
        assert_eq!(
            live_reader(&v, 0).map(|r| (r.pid, r.cursor)),
            Some((4242, 1))
        );
        assert_eq!(gate_limit(&v, 1), 3); // min(1 + 4, 1 + 2)
        for i in 0..3u8 {
            w.push(&mut [i; 24], &pattern(100, i), 0).unwrap();
        }
        let (mut desc, mut out) = ([0u8; 24], [0u8; 128]);
        // Blob 1 was overwritten by blob 3: skipped, then 2 delivered; cursor 3 published.
        assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 2);
        assert_eq!(rd.lapped_count(), 1);
        assert_eq!(min_live_cursor(&v), Some(3));
        assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 3);
        assert_eq!(min_live_cursor(&v), Some(4));
        // Caught up: nothing changes, nothing is published.
        assert_eq!(rd.recv(&mut desc, &mut out), Ok(None));
        assert_eq!(min_live_cursor(&v), Some(4));
        drop(rd);
        assert_eq!(min_live_cursor(&v), None);
        // Explicit unregister, then drop: the second release is a no-op.
        let mut rd = BlobReader::new(v).unwrap();
        assert_eq!(rd.register(7, "b", |_, _| true), Ok(0));
        assert_eq!(rd.unregister(), Ok(()));
        assert_eq!(rd.unregister(), Ok(()));
        assert_eq!(min_live_cursor(&v), None);
        // A ring with zero registry slots cannot take a registration.
        let mut buf0 = vec![];
        let v0 = small(&mut buf0, 0);
        let mut rd0 = BlobReader::new(v0).unwrap();
        assert_eq!(
            rd0.register(7, "c", |_, _| true),
            Err(crate::broadcast::registry::RegistryError::Full { count: 0 })
        );
    }

    #[test]
    fn an_idle_reader_publishes_its_cursor_again_over_a_scribbled_registry_slot() {
        // As the broadcast consumer's test of the same name: found by a corruption audit.
        use crate::broadcast::registry::{min_live_cursor, publish_cursor, published_cursor};
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let mut w = BlobWriter::new(v).unwrap();
        let mut rd = BlobReader::new(v).unwrap();
        assert_eq!(rd.register(4242, "idle", |_, _| true), Ok(0));
        w.push(&mut [1; 24], &pattern(100, 1), 0).unwrap();
        let (mut desc, mut out) = ([0u8; 24], [0u8; 128]);
        assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 1);
        publish_cursor(&v, 0, 0).unwrap();
        for _ in 0..LOOKASIDE_POLLS - 1 {
            assert_eq!(rd.recv(&mut desc, &mut out), Ok(None));
        }
        assert_eq!(published_cursor(&v, 0), Some(0));
        assert_eq!(rd.recv(&mut desc, &mut out), Ok(None));
        assert_eq!(published_cursor(&v, 0), Some(2));
        assert_eq!(min_live_cursor(&v), Some(2));
    }

    /// Publishes `seq` by hand (as a mirror does after a GAP), with a fresh blob.
    fn publish_at(v: &RingView, seq: u64, blob: &[u8]) {
        let r = reserve(v, blob.len(), 0).unwrap();
        write_blob(v, &r, blob).unwrap();
        let mut d = [seq as u8; 24];
        set_descriptor_ref(&mut d, &r);
        v.write_slot(seq, &d);
        v.publish(seq);
    }

    #[test]
    fn corrupt_write_seq_never_overflows() {
        // Found by fuzz/fuzz_targets/region.rs: BlobWriter::new on a write_seq of u64::MAX
        // started at the marker and its second push overflowed; the reader's lapped count
        // and hole detection overflowed on the same value.
        let mut geo = Geometry::blob(4, 32, 2, 256).unwrap();
        geo.flags = Flags(geo.flags.0 | Flags::SPARSE);
        let mut buf = vec![];
        let v = ring(&mut buf, &geo);
        v.write_seq().store(u64::MAX, Ordering::Relaxed);
        assert_eq!(
            BlobWriter::new(v).unwrap_err(),
            BlobError::WriteSeqExhausted {
                write_seq: u64::MAX
            }
        );
        let mut rd = BlobReader::new(v).unwrap();
        assert_eq!(rd.cursor(), u64::MAX - 3);
        let (mut desc, mut out) = ([0u8; 24], [0u8; 16]);
        // Slot words older than the cursor under a write_seq of u64::MAX: every 64th poll
        // runs hole detection, which must jump to the end without overflowing.
        for _ in 0..200 {
            assert_eq!(rd.recv(&mut desc, &mut out), Ok(None));
        }
        assert_eq!(rd.cursor(), u64::MAX);
        // A slot that claims a newer lap than a cursor near the end: saturating lapped count.
        v.slot_seq(0).store(u64::MAX - 1, Ordering::Relaxed);
        let mut rd = BlobReader::new(v).unwrap();
        rd.lapped = u64::MAX - 1;
        rd.cursor = 4;
        assert_eq!(rd.recv(&mut desc, &mut out), Ok(None));
        assert_eq!(rd.lapped_count(), u64::MAX);
    }

    #[test]
    fn sparse_rings_skip_holes_on_the_64th_pending_poll() {
        for (flags, skips) in [(0x0711u32, true), (0x0311, false)] {
            let mut geo = Geometry::blob(4, 32, 2, 256).unwrap();
            geo.flags = Flags(flags);
            let mut buf = vec![];
            let v = ring(&mut buf, &geo);
            publish_at(&v, 1, &pattern(8, 1));
            // The mirror skipped 2 (a GAP) and wrote 3.
            publish_at(&v, 3, &pattern(8, 3));
            let mut rd = BlobReader::new(v).unwrap();
            let (mut desc, mut out) = ([0u8; 24], [0u8; 16]);
            assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 1);
            for poll in 1..64 {
                assert_eq!(rd.recv(&mut desc, &mut out), Ok(None), "poll {poll}");
            }
            let got = rd.recv(&mut desc, &mut out).unwrap();
            if skips {
                assert_eq!(got.map(|m| m.seq), Some(3));
                assert_eq!(&out[..8], &pattern(8, 3)[..]);
                assert_eq!((rd.cursor(), rd.lapped_count()), (4, 1));
                // Caught up: write_seq < cursor is not a hole.
                for _ in 0..64 {
                    assert_eq!(rd.recv(&mut desc, &mut out), Ok(None));
                }
                assert_eq!((rd.cursor(), rd.lapped_count()), (4, 1));
            } else {
                // A ring without the SPARSE bit never skips.
                assert_eq!(got, None);
                assert_eq!((rd.cursor(), rd.lapped_count()), (2, 0));
            }
        }
        // A hole at the end: write_seq moved past a sequence that never arrives in the
        // retained window; the reader jumps past write_seq.
        let mut geo = Geometry::blob(4, 32, 2, 256).unwrap();
        geo.flags = Flags(0x0711);
        let mut buf = vec![];
        let v = ring(&mut buf, &geo);
        publish_at(&v, 1, &pattern(8, 1));
        v.publish(2); // 2 itself is missing
        let mut rd = BlobReader::new(v).unwrap();
        let (mut desc, mut out) = ([0u8; 24], [0u8; 16]);
        assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 1);
        for _ in 0..64 {
            assert_eq!(rd.recv(&mut desc, &mut out), Ok(None));
        }
        assert_eq!((rd.cursor(), rd.lapped_count()), (3, 1));
    }

    #[test]
    fn bogus_descriptor_in_a_slot_is_skipped_and_counted() {
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let mut w = BlobWriter::new(v).unwrap();
        w.push(&mut [1; 24], &pattern(8, 1), 0).unwrap();
        // A descriptor whose span runs past the end of the arena, written by someone else.
        let mut d = [2u8; 24];
        set_descriptor_ref(
            &mut d,
            &BlobRef {
                offset: 250,
                len: 8,
                flags: 0,
            },
        );
        v.write_slot(2, &d);
        v.publish(2);
        let mut w = BlobWriter::new(v).unwrap();
        w.push(&mut [3; 24], &pattern(8, 3), 0).unwrap();
        let mut rd = BlobReader::new(v).unwrap();
        let (mut desc, mut out) = ([0u8; 24], [0u8; 16]);
        assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 1);
        assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 3);
        assert_eq!(rd.lapped_count(), 1);
    }

    /// A scribbled arena counter off the 8-byte grid made every later push of a small blob
    /// fail with `OutOfBounds` (its start was off the grid, and so was every start after
    /// it): the writer could never publish again. It goes on, and readers get the blobs.
    #[test]
    fn a_writer_goes_on_after_its_arena_counter_is_scribbled_off_the_word_grid() {
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let mut w = BlobWriter::new(v).unwrap();
        let mut rd = BlobReader::new(v).unwrap();
        let (mut desc, mut out) = ([0u8; 24], [0u8; 16]);
        w.push(&mut [1; 24], &pattern(8, 1), 0).unwrap();
        v.arena_reserved().unwrap().store(64 + 3, Ordering::Relaxed);
        for i in 2..=6u8 {
            let p = w.push(&mut [i; 24], &pattern(8 + usize::from(i), i), 0);
            assert_eq!(p.map(|p| p.seq), Ok(u64::from(i)), "push {i}");
        }
        // The ring holds 3..=6 (capacity 4): 1 and 2 are lapped, the rest arrive whole.
        for i in 3..=6u8 {
            let got = rd.recv(&mut desc, &mut out).unwrap();
            let n = 8 + usize::from(i);
            assert_eq!(got.map(|g| (g.seq, g.len)), Some((u64::from(i), n)));
            assert_eq!(&out[..n], &pattern(n, i)[..]);
        }
        assert_eq!(rd.recv(&mut desc, &mut out), Ok(None));
        assert_eq!(rd.lapped_count(), 2);
    }

    // Ring memory holds its integers in the host's byte order (spec §0.1: native layout,
    // little-endian on every host ringfire runs on).
    fn le32(b: &[u8], at: usize) -> u32 {
        u32::from_ne_bytes(b[at..at + 4].try_into().unwrap())
    }

    fn le64(b: &[u8], at: usize) -> u64 {
        u64::from_ne_bytes(b[at..at + 8].try_into().unwrap())
    }

    /// The bytes of a blob ring built by RingView::init, against spec §2, §3 and §10.1.
    #[test]
    fn blob_ring_bytes_match_the_spec() {
        // (readers, slots_offset, arena_offset, file size): the verified examples of §3.
        for (readers, slots, arena, size) in [
            (32u32, 0x880u64, 0x900u64, 2624usize),
            (2, 0x100, 0x180, 704),
        ] {
            let mut buf = vec![];
            let geo = Geometry::blob(4, 32, readers, 256).unwrap();
            assert_eq!(geo.total_len(), Some(size as u64));
            let v = ring(&mut buf, &geo);
            // Publish one message so the slot and arena bytes can be checked too.
            let mut w = BlobWriter::new(v).unwrap();
            let mut d = [0u8; 24];
            d[..4].copy_from_slice(&0xDEAD_BEEFu32.to_ne_bytes());
            w.push(&mut d, b"hello", 0).unwrap();
            let b: &[u8] = zerocopy::IntoBytes::as_bytes(&buf[..]);
            assert_eq!(b.len(), size);
            assert_eq!(le64(b, 0), crate::layout::RING_MAGIC);
            if cfg!(target_endian = "little") {
                assert_eq!(&b[0..8], b"ERIFGNIR");
            }
            assert_eq!(le32(b, 8), 2, "version");
            assert_eq!(le32(b, 12), 32, "element_size");
            assert_eq!(le64(b, 16), 4, "capacity");
            assert_eq!(le64(b, 24), 3, "mask");
            assert_eq!(le64(b, 32), 1, "write_seq");
            assert_eq!(le64(b, 40), 0, "claim_seq");
            assert_eq!(le32(b, 48), 0x0311, "flags");
            assert_eq!(le64(b, 64), 0, "read_seq");
            assert_eq!(le64(b, 72), 0, "schema_sig");
            assert_eq!(le64(b, 80), arena, "arena_offset");
            assert_eq!(le64(b, 88), 256, "arena_size");
            assert_eq!(le32(b, 96), 128, "reader_registry_offset");
            assert_eq!(le32(b, 100), readers, "reader_registry_count");
            assert_eq!(le64(b, 104), slots, "slots_offset");
            assert!(b[112..128].iter().all(|&x| x == 0), "header padding");
            let reg_end = 128 + 64 * readers as usize;
            assert!(b[128..reg_end].iter().all(|&x| x == 0), "registry zeroed");
            // Slot of seq 1: sequence word, meta u32 + 4 padding, BlobRef {0, 5, 0}.
            let s1 = slots as usize + 32;
            assert_eq!(le64(b, s1), 1);
            assert_eq!(le32(b, s1 + 8), 0xDEAD_BEEF);
            assert_eq!(
                (le64(b, s1 + 16), le32(b, s1 + 24), le32(b, s1 + 28)),
                (0, 5, 0)
            );
            for i in [0usize, 2, 3] {
                assert_eq!(le64(b, slots as usize + 32 * i), 0, "slot {i} seq");
            }
            // Arena header: capacity, mask, reserved (one 64-byte span), zero padding.
            let a = arena as usize;
            assert_eq!(le64(b, a + arena_off::CAPACITY), 256);
            assert_eq!(le64(b, a + arena_off::MASK), 255);
            assert_eq!(le64(b, a + arena_off::RESERVED), 64);
            assert!(b[a + 24..a + 64].iter().all(|&x| x == 0));
            assert_eq!(&b[a + 64..a + 69], b"hello");
        }
        // A fresh ring's arena starts with reserved 0.
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        assert_eq!(reserved(&v), 0);
    }
}
