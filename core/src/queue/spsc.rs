//! Single-producer single-consumer queue (Lamport): the producer owns the tail (enqueue
//! cursor), the consumer owns the head (dequeue cursor), and each keeps a cached copy of the
//! other's index, refreshed only when the cached value says full or empty. A batch moves
//! with one index store.
//!
//! Slot `i` holds the item's length in its control word and the item's bytes after it, so
//! items of any length up to the queue's item size (datagrams, say) can be mixed. A queue
//! made with [`QueueGeometry::spsc_fixed`](super::QueueGeometry::spsc_fixed) (header flag
//! [`FLAG_FIXED`](super::FLAG_FIXED)) carries items of exactly the item size and no length
//! word: a slot is just the item, so `u64`s pack 8 to a cache line and a 64-byte item fills
//! exactly one line instead of straddling two.
//!
//! # When a popped slot is handed back
//!
//! A batch pop ([`SpscConsumer::pop_slice`], [`SpscConsumer::pop_fixed`]) stores the head
//! once, at its end. A single-item [`SpscConsumer::try_pop`] stores it only when the
//! consumer has caught up with the tail it last read (it has popped everything it knows
//! of), or when [`SpscConsumer::release_every`] pops have gone by since the last store (by
//! default a sixteenth of the capacity, at least 1 and at most 64), much as the LMAX
//! Disruptor's batch consumer stores its sequence once per batch.
//!
//! Why: with the head stored after every pop, a producer that keeps finding the queue full
//! reloads the head after each pop, so every pop's store misses the consumer's cache and
//! every push writes the line next to the one the consumer reads. Storing it every 64th pop
//! halved the time per 64-byte item of the `spsc_throughput` benchmark on a 2-core VM
//! (about 20 ns to 11 ns; BENCHMARKS.md has the current figures).
//!
//! What it changes, and how to undo it:
//! - Up to `release_every - 1` popped slots are not free for the producer yet, and only
//!   while the consumer still has items it knows of. A consumer that has emptied the queue
//!   has stored its head. [`SpscConsumer::release`] stores it at once; dropping the consumer
//!   does too, and the std layer's consumers also do it after a pop that finds a producer
//!   asleep on the full queue.
//! - A consumer that dies without either (SIGKILL) leaves up to `release_every - 1` items
//!   it popped to be popped again by its successor: at least once, not exactly once,
//!   across a consumer crash. [`SpscConsumer::set_release_every`] with 1 stores the head
//!   after every pop, as before.
//!
//! # Prefetching
//!
//! The one-item paths of a fixed-size queue ([`SpscProducer::try_push`],
//! [`SpscConsumer::try_pop_fixed`]) and the batch paths of one whose items lie back to back
//! ([`SpscProducer::push_fixed`], [`SpscConsumer::pop_fixed`]) ask the CPU for the line of
//! a slot `ahead` slots past the cursor (64, or fewer for slots over 64 bytes, to reach at
//! most 4 KiB ahead): the producer for ownership of a free slot's line (x86-64
//! `prefetchw`, on CPUs whose CPUID has it; none on others), the consumer for a published
//! item's line (`prefetcht0`); AArch64 uses `prfm`, other targets nothing. A slot's line
//! last touched by the other side's core then crosses to this one while the cursor is
//! still `ahead` slots away, instead of when the item is stored or loaded. Only slots the
//! cached cursors show free (producer) or published (consumer) are named, and only while
//! more than `ahead` of them are: a consumer that keeps up with its producer, a producer
//! that keeps finding the queue full, and any handle of a queue of at most `ahead` slots
//! prefetch nothing. A prefetch is a hint that reads and writes no memory: it changes no
//! value any side sees, and the protocol above is unchanged.
//!
//! Measured with `cargo bench -p ringwire-tests --bench queues -- --paired --rounds 8
//! spsc_` (a 4096-slot queue, one thread per core, on a 2-core VM whose cores do not share
//! a cache), builds run alternately, three runs each: without prefetching ringwire took
//! 3.3–3.5 ns a `u64` item and 5.5–5.8 ns a 64-byte item (1.18–1.32× and 1.08–1.24×
//! rtrb's time in the same runs), with it 2.0–2.1 ns and 3.8–4.0 ns (1.70–2.31×,
//! 1.56–1.61×); a batch of 64 `u64` items went from 2.2 ns an item (0.73–0.74× rtrb) to
//! 0.96–0.98 ns (1.67–1.74×), and of 64-byte items from 5.7–6.0 ns (0.82–0.84×) to
//! 5.1–5.2 ns (0.92–0.93×). Prefetching 16 slots ahead gained little with `u64` items
//! (3.3–3.5 ns), as did 8 ahead with 64-byte ones (4.5–4.7 ns); BENCHMARKS.md has the
//! current figures.
//!
//! # Batches
//!
//! The batch paths of a queue whose items lie back to back copy a batch in steps of 512
//! bytes (8 lines, or one item if it is longer) and ask for the lines of as many slots after
//! each step, so that a batch's prefetches are spread through its copy instead of issued
//! together after it (64 of them for 64 items of 64 bytes). Their step loops are out of
//! line.
//!
//! Measured with `cargo bench -p ringwire-tests --bench queues -- --paired --rounds 8
//! spsc_batch64/64B` (and `spsc_throughput/64B`, `spsc_batch64/u64`) on the same VM, the
//! build before and builds of the change run alternately, two runs each: a batch of 64
//! 64-byte items took 3.6 ns an item instead of 3.9–4.0 (1.17–1.20× rtrb's time in the same
//! runs instead of 1.07–1.10). Steps of 256 bytes gave 3.6–3.7 ns, of 1 KiB 4.6 and of
//! 64 bytes 3.9; stepping on one side only, 3.8–3.9. One-item paths and batches of `u64`
//! items (one step) did not change: 3.5 and 0.83 ns. Inlined into the caller, the step
//! loops made the bench's one-item 64-byte loop, which does not run them, take 3.8 ns
//! instead of 3.5: a change of code layout, which keeping them out of line avoids.
//!
//! # Wide copies
//!
//! The batch paths of a queue whose items lie back to back copy a run of items as one span
//! up to the wrap and one after it. Where the CPU has AVX and the OS saves its registers
//! (x86-64, checked once per view with CPUID and XGETBV), each span's whole 128-byte steps
//! are copied with 32-byte `vmovdqu` loads and stores in an `asm!` block, and the rest word
//! by word as relaxed atomics; everywhere else, and under loom and Miri, the whole span
//! goes word by word. The block ends with `vzeroupper`: without it, the SSE code after it
//! paid a transition and a batch of `u64` items took 2.4–2.5 ns an item instead of 0.9. To
//! the compiler an `asm!` block is an opaque operation on the memory it is given, standing
//! here for the relaxed word accesses it replaces, so a copy races with nothing the word
//! copy would not.
//!
//! Measured with `cargo bench -p ringwire-tests --bench queues -- --paired --rounds 8
//! spsc_batch64/` on the same VM, builds run alternately, three runs each: a batch of 64
//! 64-byte items went from 5.1–5.3 ns an item (0.88–0.92× rtrb's time in the same runs) to
//! 4.3–4.5 ns (1.05–1.10×), and of `u64` items from 0.94–0.98 ns to 0.90–0.95 ns. A 64-byte
//! line took rtrb 4.5–4.9 ns there, and a throw-away build whose producer wrote its lines
//! with non-temporal stores (`movntdq`, `movdir64b`) took 12 ns. Moving the lines from core
//! to core bounds the 64-byte batch for every queue measured: BENCHMARKS.md compares each
//! queue with the line-transfer floor of `ringwire bench floor` (a bulk read of lines the
//! other core wrote, with no queue), measured in the same rounds.
//!
//! Contract: at most one [`SpscProducer`] and one [`SpscConsumer`] exist per queue at a
//! time, across all processes. The std layer enforces it with file locks. Through the
//! methods that copy items, breaking it loses, duplicates or tears items but is not
//! undefined behaviour (every access to the queue's memory is atomic, or a wide copy that
//! stands for atomic word accesses, above). Once a caller writes through the pointer
//! [`SpscProducer::free_payload`] returns (plain, non-atomic writes: the kernel's
//! `recvmmsg`, a copy), breaking it can be undefined behaviour: a second producer, or a
//! consumer that a second producer let past the tail, touching that slot at the same time
//! makes a data race.

use super::error::{PopError, PushError, QueueAttachError};
use super::layout::QueueKind;
use super::view::QueueView;
use crate::sync::Ordering;

/// The bytes a batch copies between two rounds of prefetches ("Batches" in the module
/// docs): 8 lines.
const BATCH_STEP: usize = 512;

fn check_kind(q: &QueueView) -> Result<(), QueueAttachError> {
    match q.geometry().kind {
        QueueKind::Spsc => Ok(()),
        found => Err(QueueAttachError::WrongKind {
            expected: QueueKind::Spsc,
            found,
        }),
    }
}

/// Checks the cursors of the SPSC queue `view` (loads only): the enqueue cursor at most a
/// lap ahead of the dequeue cursor, counted modulo 2^64 as the handles count, so that a
/// reader such as `stat` reports a corrupt file instead of billions of items queued. The
/// dequeue cursor is loaded before and after the enqueue cursor, so that a live queue,
/// whose cursors only grow, always passes; a failing reading is retried a few times.
pub fn check_spsc_cursors(view: &QueueView) -> Result<(), QueueAttachError> {
    let cap = view.capacity();
    let mut last = None;
    for _ in 0..16 {
        // Acquire on the enqueue cursor: the producer's load of the dequeue cursor before it
        // stored that value then happens before `later`, which reads at least what it read.
        let dequeue = view.deq().load(Ordering::Acquire);
        let enqueue = view.enq().load(Ordering::Acquire);
        let later = view.deq().load(Ordering::Acquire);
        // `later - dequeue` is what the consumer popped between the loads: the enqueue
        // cursor was at most a lap ahead of `later` when it was loaded.
        let ahead = enqueue.wrapping_sub(dequeue);
        if ahead <= later.wrapping_sub(dequeue).saturating_add(cap) {
            return Ok(());
        }
        last = Some(QueueAttachError::BadSpscCursors {
            enqueue,
            dequeue,
            capacity: cap,
        });
        core::hint::spin_loop();
    }
    last.map_or(Ok(()), Err)
}

/// The producing side of an SPSC queue.
#[derive(Debug)]
pub struct SpscProducer {
    q: QueueView,
    tail: u64,
    cached_head: u64,
    // The tail at which the cached head shows the queue full (`cached_head + capacity`), or
    // the tail itself while the cached head is corrupt (ahead of the tail or more than a lap
    // behind it): `try_push` makes one compare with it for the room. Set again whenever the
    // cached head is read.
    room_end: u64,
}

impl SpscProducer {
    /// The producer of `q`, resuming at the tail stored in the queue (a queue in a file
    /// survives both sides exiting). See the module docs for the one-producer contract.
    pub fn new(q: QueueView) -> Result<SpscProducer, QueueAttachError> {
        check_kind(&q)?;
        // Acquire: a previous producer's slot writes before its tail store are ours now.
        let tail = q.enq().load(Ordering::Acquire);
        // Acquire: the consumer's reads of slots before `head` are done.
        let cached_head = q.deq().load(Ordering::Acquire);
        let mut p = SpscProducer {
            q,
            tail,
            cached_head,
            room_end: tail,
        };
        p.set_room_end();
        Ok(p)
    }

    /// Sets `room_end` from the tail and the cached head.
    ///
    /// Why `tail == room_end` is the old test (`tail - cached_head >= capacity`): with a
    /// sound cached head the tail is 0 ..= capacity ahead of it, and pushes move the tail on
    /// only while there is room (`commit` never passes the free slots), so the tail stays in
    /// that range and is a capacity ahead exactly at `room_end`. With a corrupt one no push
    /// goes through before the head is read again (which sets this again), and `room_end`
    /// is the tail, so the next push reads it.
    #[inline(always)]
    fn set_room_end(&mut self) {
        let cap = self.q.capacity();
        self.room_end = if self.tail.wrapping_sub(self.cached_head) <= cap {
            self.cached_head.wrapping_add(cap)
        } else {
            self.tail
        };
    }

    /// The queue.
    pub fn view(&self) -> &QueueView {
        &self.q
    }

    /// Position the next item will take.
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// Free slots, up to `want`, refreshing the cached head only if the cache shows fewer.
    #[inline]
    fn free_up_to(&mut self, want: u64) -> u64 {
        let cap = self.q.capacity();
        // A corrupt head ahead of the tail saturates to "full", never to a huge count.
        let free = cap.saturating_sub(self.tail.wrapping_sub(self.cached_head));
        if free >= want {
            return want;
        }
        // Acquire: pairs with the consumer's release store of head, so its reads of the
        // slots we are about to reuse happen before our writes.
        self.cached_head = self.q.deq().load(Ordering::Acquire);
        self.set_room_end();
        cap.saturating_sub(self.tail.wrapping_sub(self.cached_head))
            .min(want)
    }

    /// Free slots right now (0 also on a corrupt queue: see
    /// [`SpscProducer::cursors_corrupt`]).
    pub fn free(&mut self) -> u64 {
        self.free_up_to(self.q.capacity())
    }

    /// [`PushError::CorruptCursors`] when the dequeue cursor, as this producer last read
    /// it, is ahead of its tail or more than a lap behind it (a corrupt file, or a second
    /// producer): that reads as a full queue that never drains. Every push, and
    /// [`SpscProducer::free`], that finds no free slot reads the cursor again first. `None`
    /// on a sound queue.
    #[cold]
    pub fn cursors_corrupt(&self) -> Option<PushError> {
        (self.tail.wrapping_sub(self.cached_head) > self.q.capacity()).then_some(
            PushError::CorruptCursors {
                tail: self.tail,
                head: self.cached_head,
            },
        )
    }

    /// The error of a push that found no free slot: [`PushError::Full`], or
    /// [`PushError::CorruptCursors`].
    #[cold]
    fn no_room(&self) -> PushError {
        self.cursors_corrupt().unwrap_or(PushError::Full)
    }

    #[inline(always)]
    fn write(&self, pos: u64, item: &[u8]) {
        if !self.q.geometry().fixed {
            // Relaxed: published by the release store of the tail.
            self.q
                .slot_word(pos)
                .store(item.len() as u64, Ordering::Relaxed);
        }
        self.q.write_payload(pos, item);
    }

    #[inline(always)]
    fn commit(&mut self, n: u64) {
        self.tail = self.tail.wrapping_add(n);
        // Release: the consumer that acquires the tail sees the slots' lengths and bytes.
        self.q.enq().store(self.tail, Ordering::Release);
    }

    #[inline(always)]
    fn check_len(&self, index: usize, len: usize) -> Result<(), PushError> {
        let g = self.q.geometry();
        let max = g.item_size;
        if g.fixed && len != max as usize {
            return Err(PushError::WrongLength {
                index,
                len,
                expected: max,
            });
        }
        if len > max as usize {
            return Err(PushError::TooLong { index, len, max });
        }
        Ok(())
    }

    /// Pushes one item, or fails with [`PushError::Full`] ([`PushError::CorruptCursors`] on
    /// a corrupt queue, which would never drain). On a fixed-size queue the item must be
    /// exactly the item size ([`PushError::WrongLength`]).
    #[inline(always)]
    pub fn try_push(&mut self, item: &[u8]) -> Result<(), PushError> {
        if item.len() == self.q.fixed_len() {
            // A fixed-size queue's item (every push of a typed handle): one compare for
            // the room while the cached head shows some (`set_room_end`), and the slot's
            // decoded address.
            let tail = self.tail;
            if tail == self.room_end && self.free_up_to(1) == 0 {
                return Err(self.no_room());
            }
            // `commit(1)`, with the new tail and the cursor's address taken before the
            // item's stores: the compiler cannot tell that those relaxed stores into the
            // slot leave this handle alone, and would load the tail and the region's base
            // again after them.
            let (next, enq) = (tail.wrapping_add(1), self.q.enq());
            // Ownership of a free slot's line `ahead` slots on is asked for now, so that the
            // push that gets there finds it here ("Prefetching" in the module docs).
            let ahead = self.q.prefetch_ahead_write();
            if self.room_end.wrapping_sub(tail) > ahead {
                self.q.prefetch(tail.wrapping_add(ahead), true);
            }
            self.q.write_fixed(tail, item);
            self.tail = next;
            // Release: the consumer that acquires the tail sees the item's bytes.
            enq.store(next, Ordering::Release);
            return Ok(());
        }
        self.check_len(0, item.len())?;
        if self.free_up_to(1) == 0 {
            return Err(self.no_room());
        }
        self.write(self.tail, item);
        self.commit(1);
        Ok(())
    }

    /// Pushes as many of `items` as fit, in order, with one tail store, and returns how many.
    /// Fails without pushing anything if one of them is longer than the item size, or on a
    /// corrupt queue ([`PushError::CorruptCursors`]).
    pub fn push_slice<I: AsRef<[u8]>>(&mut self, items: &[I]) -> Result<usize, PushError> {
        for (i, it) in items.iter().enumerate() {
            self.check_len(i, it.as_ref().len())?;
        }
        let n = self.free_up_to(items.len() as u64);
        if n == 0
            && !items.is_empty()
            && let Some(e) = self.cursors_corrupt()
        {
            return Err(e);
        }
        for (k, it) in items[..n as usize].iter().enumerate() {
            self.write(self.tail.wrapping_add(k as u64), it.as_ref());
        }
        if n > 0 {
            self.commit(n);
        }
        Ok(n as usize)
    }

    /// Pushes records of `item_len` bytes laid back to back in `records` (a typed slice
    /// seen as bytes) as far as they fit, with one tail store, and returns how many.
    /// A trailing partial record is ignored.
    ///
    /// Always inlined, for a caller whose `item_len` is a constant (a typed handle's): on a
    /// fixed-size queue whose items lie back to back (the item size is the stride) and
    /// records of its item size, the batch is then a count, at most two word loops (up to
    /// the wrap and after it) and the tail store. Any other queue or length takes the
    /// out-of-line `push_fixed_unpacked`.
    #[inline(always)]
    pub fn push_fixed(&mut self, records: &[u8], item_len: usize) -> Result<usize, PushError> {
        if item_len != self.q.packed_len() {
            return self.push_fixed_unpacked(records, item_len);
        }
        // The queue's own item size on a fixed-size queue, so `check_len` holds, and not 0
        // (validated).
        let want = (records.len() / item_len) as u64;
        let n = self.free_up_to(want);
        if n == 0 {
            if want > 0
                && let Some(e) = self.cursors_corrupt()
            {
                return Err(e);
            }
            return Ok(0);
        }
        // As in `try_push`: the new tail and the cursor's address are taken before the
        // items' stores, which the compiler cannot tell leave this handle alone.
        let (tail, enq) = (self.tail, self.q.enq());
        let next = tail.wrapping_add(n);
        // `n <= want`, so the records are there.
        self.write_packed(&records[..n as usize * item_len], item_len);
        self.tail = next;
        // Release: the consumer that acquires the tail sees the items' bytes.
        enq.store(next, Ordering::Release);
        Ok(n as usize)
    }

    /// Copies `records` (whole items of the packed size) into the free slots from the
    /// tail, a step of [`BATCH_STEP`] bytes at a time, asking after each step for the lines
    /// of as many free slots, `ahead` slots past it ("Prefetching" in the module docs).
    /// Out of line ("Batches" in the module docs).
    #[inline(never)]
    fn write_packed(&self, records: &[u8], item_len: usize) {
        let ahead = self.q.prefetch_ahead_write();
        let step = (BATCH_STEP / item_len).max(1) * item_len;
        let mut pos = self.tail;
        for chunk in records.chunks(step) {
            self.q.write_items(pos, chunk, item_len);
            pos = pos.wrapping_add((chunk.len() / item_len) as u64);
            let free = self
                .q
                .capacity()
                .saturating_sub(pos.wrapping_sub(self.cached_head));
            self.q.prefetch_span(
                pos.wrapping_add(ahead),
                ((chunk.len() / item_len) as u64).min(free.saturating_sub(ahead)),
                true,
            );
        }
    }

    /// [`SpscProducer::push_fixed`] on a queue whose items do not lie back to back, or with
    /// a length other than the packed item size: a word copy per item, with its length
    /// word on a queue of byte strings.
    #[inline(never)]
    fn push_fixed_unpacked(&mut self, records: &[u8], item_len: usize) -> Result<usize, PushError> {
        if item_len == 0 {
            return Ok(0);
        }
        self.check_len(0, item_len)?;
        let want = (records.len() / item_len) as u64;
        let n = self.free_up_to(want);
        if n == 0
            && want > 0
            && let Some(e) = self.cursors_corrupt()
        {
            return Err(e);
        }
        for (k, rec) in records.chunks_exact(item_len).take(n as usize).enumerate() {
            self.write(self.tail.wrapping_add(k as u64), rec);
        }
        if n > 0 {
            self.commit(n);
        }
        Ok(n as usize)
    }
}

/// Writing in place: a writer outside this crate's code fills free slots (the kernel's
/// `recvmmsg`, a DMA engine), then one commit publishes them with one tail store.
impl SpscProducer {
    /// The payload area of the free slot `k` places after the tail: its address and the
    /// item size. `None` unless at least `k + 1` slots are free. Nothing written there is
    /// seen by the consumer before [`SpscProducer::commit_in_place`] publishes it.
    ///
    /// Writing through the pointer is the caller's `unsafe`. It races with nothing as long
    /// as it stays within the item size and ends before the commit, or before any other
    /// push of this producer: the slot is free, so this producer alone owns it under the
    /// queue protocol (the consumer reads only slots before the tail). A push moves the
    /// tail on, so the slot may then be published (`k` 0 is at once) and the consumer may
    /// read it while the write goes on; ask again for the slots after a push. The address
    /// is 8-aligned.
    #[cfg(not(loom))]
    pub fn free_payload(&mut self, k: u64) -> Option<(*mut u8, usize)> {
        if self.free_up_to(k.checked_add(1)?) <= k {
            return None;
        }
        let off =
            self.q.slot_offset(self.tail.wrapping_add(k)) + self.q.geometry().payload_offset();
        // SAFETY: slot_offset masks the position and validation proved every slot (with
        // its payload of item_size bytes) inside the region, so `off` is in bounds.
        let at = unsafe { self.q.region().as_ptr().add(off) };
        Some((at, self.q.geometry().item_size as usize))
    }

    /// Publishes the free slots written in place (see [`SpscProducer::free_payload`]), slot
    /// `k` holding `lens[k]` bytes, with one tail store, and returns how many it published.
    /// `None` marks a slot whose bytes are to be dropped (a truncated datagram, say): the
    /// slots after it move down, so the published items stay contiguous and in order.
    ///
    /// Fails without publishing anything if `lens` names more slots than are free
    /// ([`PushError::Full`]), or if a length is over the item size ([`PushError::TooLong`])
    /// or, on a fixed-size queue, not the item size ([`PushError::WrongLength`]).
    pub fn commit_in_place(&mut self, lens: &[Option<usize>]) -> Result<usize, PushError> {
        if self.free_up_to(lens.len() as u64) < lens.len() as u64 {
            return Err(self.no_room());
        }
        for (i, len) in lens.iter().enumerate() {
            if let Some(len) = *len {
                self.check_len(i, len)?;
            }
        }
        let mut n = 0u64;
        for (k, len) in lens.iter().enumerate() {
            let Some(len) = *len else { continue };
            let to = self.tail.wrapping_add(n);
            let from = self.tail.wrapping_add(k as u64);
            if from != to {
                self.q.move_payload(from, to, len);
            }
            if !self.q.geometry().fixed {
                // Relaxed: published by the release store of the tail.
                self.q.slot_word(to).store(len as u64, Ordering::Relaxed);
            }
            n += 1;
        }
        if n > 0 {
            self.commit(n);
        }
        Ok(n as usize)
    }
}

/// The consuming side of an SPSC queue.
#[derive(Debug)]
pub struct SpscConsumer {
    q: QueueView,
    head: u64,
    cached_tail: u64,
    // The head as last stored in the queue: `head` minus the popped slots not handed back.
    released: u64,
    release_every: u64,
    // The head at which the next single-item pop stores the head: the nearer of
    // `cached_tail` and `released + release_every`, so that `commit_one` makes one compare
    // instead of two and a subtraction. Set again whenever one of those three changes.
    store_at: u64,
    // The head at which the cached tail shows no item: the cached tail itself, or the head
    // while the cached tail is corrupt (behind the head or more than a capacity ahead), so
    // that a single pop makes one compare for an item. Set again whenever the cached tail
    // is read.
    ready_end: u64,
}

/// The default of [`SpscConsumer::release_every`] for a queue of `capacity` slots: a
/// sixteenth of it, at least 1 and at most 64.
pub const fn default_release_every(capacity: u64) -> u64 {
    let n = capacity / 16;
    if n < 1 {
        1
    } else if n > 64 {
        64
    } else {
        n
    }
}

impl SpscConsumer {
    /// The consumer of `q`, resuming at the head stored in the queue. See the module docs
    /// for the one-consumer contract.
    pub fn new(q: QueueView) -> Result<SpscConsumer, QueueAttachError> {
        check_kind(&q)?;
        // Acquire: a previous consumer's reads are done before we reuse its position.
        let head = q.deq().load(Ordering::Acquire);
        // Acquire: slot writes before the tail are visible to us.
        let cached_tail = q.enq().load(Ordering::Acquire);
        let release_every = default_release_every(q.capacity());
        let mut c = SpscConsumer {
            q,
            head,
            cached_tail,
            released: head,
            release_every,
            store_at: head,
            ready_end: head,
        };
        c.set_store_at();
        c.set_ready_end();
        Ok(c)
    }

    /// Sets `ready_end` from the head and the cached tail.
    ///
    /// Why `head == ready_end` is the old test (`cached_tail - head - 1 >= capacity`, no item
    /// or a corrupt tail): with a sound cached tail the head is 0 ..= capacity behind it and
    /// pops move it on only over items the cached tail shows, so it stays in that range and
    /// shows no item exactly at the cached tail. With a corrupt one no pop goes through
    /// before the tail is read again (which sets this again), and `ready_end` is the head,
    /// so the next pop reads it.
    #[inline(always)]
    fn set_ready_end(&mut self) {
        self.ready_end = if self.cached_tail.wrapping_sub(self.head) <= self.q.capacity() {
            self.cached_tail
        } else {
            self.head
        };
    }

    /// Sets `store_at` from the head, the cached tail, `released` and `release_every`.
    ///
    /// Why one compare is enough in `commit_one`: a single-item pop runs only with 1 ..=
    /// capacity items ready by the cached tail, and the head moves on one at a time until
    /// the next store, which resets `released` (and this). So from here the head meets the
    /// cached tail before passing it, and `head - released` grows by one per pop from below
    /// `release_every` (at least 1), reaching it exactly at `released + release_every`: the
    /// first of the two positions the head meets is where the old test (`head ==
    /// cached_tail || head - released >= release_every`) first held. A cached tail that
    /// shows no item, or more than a capacity (corrupt), lets no pop through before it is
    /// read again, which sets this again.
    #[inline(always)]
    fn set_store_at(&mut self) {
        let to_tail = self.cached_tail.wrapping_sub(self.head);
        let to_release = self
            .released
            .wrapping_add(self.release_every)
            .wrapping_sub(self.head);
        self.store_at = self.head.wrapping_add(to_tail.min(to_release));
    }

    /// How many single-item pops may go by before the head is stored (see the module docs,
    /// "When a popped slot is handed back").
    pub fn release_every(&self) -> u64 {
        self.release_every
    }

    /// Sets [`SpscConsumer::release_every`], clamped to `1 ..= capacity`: 1 stores the head
    /// after every pop, so no popped item is ever popped again by a successor.
    pub fn set_release_every(&mut self, n: u64) {
        self.release_every = n.clamp(1, self.q.capacity());
        if self.head.wrapping_sub(self.released) >= self.release_every {
            self.release();
        }
        self.set_store_at();
    }

    /// Popped slots not yet handed back to the producer.
    pub fn unreleased(&self) -> u64 {
        self.head.wrapping_sub(self.released)
    }

    /// Hands the popped slots back only if that moves the queue's consumer index forward
    /// (by at most a capacity), and otherwise forgets them without a store; either way the
    /// drop that follows hands nothing back. For a copy of this consumer in another process
    /// (inherited through `fork`), whose head may be the one it had at the fork: stored
    /// after the original moved on, it would move the index back, and the next consumer
    /// would pop again items already popped (and, their slots refilled meanwhile, items
    /// out of order). A head ahead of the index is this copy's own progress (the original
    /// gone, say, as after a daemon's fork), or pops the original made before the fork and
    /// has not handed back yet, which it would hand back too. The same holds for the
    /// original, dropped after such a copy popped on: std's consumers hand back through
    /// this on every drop. Without a fork the index is the head last stored, so this is
    /// [`SpscConsumer::release`].
    pub fn release_if_ahead(&mut self) {
        // Relaxed: only compared; the store in `store_head` is the release as always.
        let index = self.q.deq().load(Ordering::Relaxed);
        let ahead = self.head.wrapping_sub(index);
        if ahead != 0 && ahead <= self.q.capacity() {
            self.store_head();
        } else {
            self.released = self.head;
            self.set_store_at();
        }
    }

    /// Hands every popped slot back to the producer now (one head store, none if there is
    /// nothing to hand back).
    #[inline]
    pub fn release(&mut self) {
        if self.released != self.head {
            self.store_head();
        }
    }

    #[inline(always)]
    fn store_head(&mut self) {
        self.released = self.head;
        self.set_store_at();
        // Release: our reads of the slots happen before the producer reuses them.
        self.q.deq().store(self.head, Ordering::Release);
    }

    /// The queue.
    pub fn view(&self) -> &QueueView {
        &self.q
    }

    /// Position of the next item to pop.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Items ready, up to `want`, refreshing the cached tail only if the cache shows fewer.
    #[inline]
    fn ready_up_to(&mut self, want: u64) -> Result<u64, PopError> {
        let ready = self.cached_tail.wrapping_sub(self.head);
        if ready >= want && ready <= self.q.capacity() {
            return Ok(want);
        }
        // Acquire: pairs with the producer's release store of the tail, so the slots
        // before it are fully written when we read them.
        self.cached_tail = self.q.enq().load(Ordering::Acquire);
        self.set_store_at();
        self.set_ready_end();
        let ready = self.cached_tail.wrapping_sub(self.head);
        if ready > self.q.capacity() {
            return Err(PopError::CorruptCursors {
                head: self.head,
                tail: self.cached_tail,
            });
        }
        Ok(ready.min(want))
    }

    /// Items ready right now.
    pub fn ready(&mut self) -> Result<u64, PopError> {
        self.ready_up_to(self.q.capacity())
    }

    /// Length of the item at `pos`, checked against the item size.
    #[inline(always)]
    fn item_len(&self, pos: u64) -> Result<usize, PopError> {
        if self.q.geometry().fixed {
            return Ok(self.q.geometry().item_size as usize);
        }
        // Relaxed: ordered by the acquire load of the tail.
        let word = self.q.slot_word(pos).load(Ordering::Relaxed);
        if word > u64::from(self.q.geometry().item_size) {
            return Err(PopError::Corrupt { pos, word });
        }
        Ok(word as usize)
    }

    /// After a batch: the head moves on by `n` and is stored.
    #[inline(always)]
    fn commit(&mut self, n: u64) {
        self.head = self.head.wrapping_add(n);
        self.store_head();
    }

    /// After a single-item pop: the head moves on by one and is stored if the consumer has
    /// caught up with the tail it last read, or `release_every` pops have gone by.
    #[inline(always)]
    fn commit_one(&mut self) {
        self.head = self.head.wrapping_add(1);
        // The head reached the cached tail or `released + release_every` (`set_store_at`).
        if self.head == self.store_at {
            self.store_head();
        }
    }

    /// Pops one item into `dst` and returns its length. The slot goes back to the producer
    /// at once or a few pops later (see the module docs, "When a popped slot is handed
    /// back").
    #[inline(always)]
    pub fn try_pop(&mut self, dst: &mut [u8]) -> Result<usize, PopError> {
        if dst.len() == self.q.fixed_len() {
            return match self.try_pop_fixed(dst) {
                Ok(true) => Ok(dst.len()),
                Ok(false) => Err(PopError::Empty),
                Err(e) => Err(e),
            };
        }
        self.try_pop_sized(dst)
    }

    /// [`SpscConsumer::try_pop`] into a buffer of exactly a fixed-size queue's item size
    /// (every pop of a typed handle): `Ok(true)` with the item in `dst`, `Ok(false)` when the
    /// queue is empty. A buffer of any other length pops nothing and fails with
    /// [`PopError::LengthMismatch`] (so does every buffer on a queue of byte strings, which
    /// has no fixed item size; `expected` is then its largest item size).
    ///
    /// Why a typed handle calls this rather than `try_pop`: there a buffer of another
    /// length goes to the out-of-line `try_pop_sized`, and a buffer whose address goes to a
    /// call must live in memory, so the item would be zeroed, copied in and read back
    /// through the stack on every pop; here it stays in registers.
    #[inline(always)]
    pub fn try_pop_fixed(&mut self, dst: &mut [u8]) -> Result<bool, PopError> {
        if dst.len() != self.q.fixed_len() {
            return Err(PopError::LengthMismatch {
                len: dst.len(),
                expected: self.q.geometry().item_size as usize,
            });
        }
        // One compare while the cached tail shows an item (`set_ready_end`), and the
        // slot's decoded address.
        if self.head == self.ready_end && self.ready_up_to(1)? == 0 {
            return Ok(false);
        }
        self.q.read_fixed(self.head, dst);
        // The line of a published item `ahead` slots on is fetched now, so that the pop
        // that gets there finds it here ("Prefetching" in the module docs).
        let ahead = self.q.prefetch_ahead();
        if self.ready_end.wrapping_sub(self.head) > ahead {
            self.q.prefetch(self.head.wrapping_add(ahead), false);
        }
        self.commit_one();
        Ok(true)
    }

    /// [`SpscConsumer::try_pop`] into a buffer whose length is not the fixed item size,
    /// out of line so that the fixed-size path stays small enough to inline into a
    /// caller's polling loop.
    #[inline(never)]
    fn try_pop_sized(&mut self, dst: &mut [u8]) -> Result<usize, PopError> {
        if self.ready_up_to(1)? == 0 {
            return Err(PopError::Empty);
        }
        let len = self.item_len(self.head)?;
        if dst.len() < len {
            return Err(PopError::BufferTooSmall {
                len: dst.len(),
                need: len,
            });
        }
        self.q.read_payload_prefix(self.head, dst, len);
        self.commit_one();
        Ok(len)
    }

    /// Pops up to `min(bufs.len(), lens.len())` items, item `k` into `bufs[k]` with its length
    /// in `lens[k]`, with one head store, and returns how many. An item that cannot be
    /// delivered (buffer too small, corrupt) stops the batch; its error is returned only if
    /// it is the first item, so nothing popped is ever lost.
    pub fn pop_slice<B: AsMut<[u8]>>(
        &mut self,
        bufs: &mut [B],
        lens: &mut [usize],
    ) -> Result<usize, PopError> {
        let want = bufs.len().min(lens.len()) as u64;
        let n = self.ready_up_to(want)? as usize;
        let mut done = 0;
        let mut err = None;
        for (buf, out) in bufs.iter_mut().zip(lens.iter_mut()).take(n) {
            let pos = self.head.wrapping_add(done as u64);
            let buf = buf.as_mut();
            match self.item_len(pos) {
                Ok(len) if len <= buf.len() => {
                    self.q.read_payload(pos, &mut buf[..len]);
                    *out = len;
                    done += 1;
                }
                Ok(len) => {
                    err = Some(PopError::BufferTooSmall {
                        len: buf.len(),
                        need: len,
                    });
                    break;
                }
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        if done > 0 {
            self.commit(done as u64);
            return Ok(done);
        }
        match err {
            Some(e) => Err(e),
            None => Ok(0),
        }
    }

    /// Pops records of exactly `item_len` bytes back to back into `dst` (a typed slice seen
    /// as bytes) with one head store, and returns how many. An item of another length stops
    /// the batch and stays in the queue ([`PopError::LengthMismatch`] if it is the first).
    ///
    /// Always inlined, as [`SpscProducer::push_fixed`]: on a queue whose items lie back to
    /// back and records of its item size (every item has that size: no per-item length to
    /// check), the batch is a count, at most two word loops and the head store. Any other
    /// queue or length takes the out-of-line `pop_fixed_unpacked`.
    #[inline(always)]
    pub fn pop_fixed(&mut self, dst: &mut [u8], item_len: usize) -> Result<usize, PopError> {
        if item_len != self.q.packed_len() {
            return self.pop_fixed_unpacked(dst, item_len);
        }
        let n = self.ready_up_to((dst.len() / item_len) as u64)? as usize;
        if n > 0 {
            // `n` is at most what `dst` holds.
            self.read_packed(&mut dst[..n * item_len], item_len);
            self.commit(n as u64);
        }
        Ok(n)
    }

    /// Copies the published items from the head into `dst` (whole items of the packed
    /// size), a step of [`BATCH_STEP`] bytes at a time, fetching after each step the lines
    /// of as many published items, `ahead` slots past it ("Prefetching" in the module
    /// docs). Out of line, as [`SpscProducer::write_packed`].
    #[inline(never)]
    fn read_packed(&self, dst: &mut [u8], item_len: usize) {
        let ahead = self.q.prefetch_ahead();
        let step = (BATCH_STEP / item_len).max(1) * item_len;
        let mut pos = self.head;
        for chunk in dst.chunks_mut(step) {
            self.q.read_items(pos, chunk, item_len);
            pos = pos.wrapping_add((chunk.len() / item_len) as u64);
            let ready = self.cached_tail.wrapping_sub(pos);
            if ready <= self.q.capacity() {
                self.q.prefetch_span(
                    pos.wrapping_add(ahead),
                    ((chunk.len() / item_len) as u64).min(ready.saturating_sub(ahead)),
                    false,
                );
            }
        }
    }

    /// [`SpscConsumer::pop_fixed`] on a queue whose items do not lie back to back, or with
    /// a length other than the packed item size: item by item, each length checked.
    #[inline(never)]
    fn pop_fixed_unpacked(&mut self, dst: &mut [u8], item_len: usize) -> Result<usize, PopError> {
        if item_len == 0 {
            return Ok(0);
        }
        let n = self.ready_up_to((dst.len() / item_len) as u64)? as usize;
        let mut done = 0;
        let mut err = None;
        for rec in dst.chunks_exact_mut(item_len).take(n) {
            let pos = self.head.wrapping_add(done as u64);
            match self.item_len(pos) {
                Ok(len) if len == item_len => {
                    self.q.read_payload(pos, rec);
                    done += 1;
                }
                Ok(len) => {
                    err = Some(PopError::LengthMismatch {
                        len,
                        expected: item_len,
                    });
                    break;
                }
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        if done > 0 {
            self.commit(done as u64);
            return Ok(done);
        }
        match err {
            Some(e) => Err(e),
            None => Ok(0),
        }
    }
}

/// Hands the popped slots back (see [`SpscConsumer::release`]), so that a successor
/// resumes after the last item this consumer popped.
impl Drop for SpscConsumer {
    fn drop(&mut self) {
        self.release();
    }
}
