//! [`RingView`]: a validated ring in a [`Region`]. Initialisation (spec §1.2 step 5),
//! attachment (spec §1.3), and typed access to the header's atomic fields, the slots, the
//! registry and the arena at offsets that validation has proved in range.

use zerocopy::{FromBytes, FromZeros};

use crate::error::{AttachError, InitError};
use crate::futex::FutexPair;
use crate::layout::{
    Flags, Geometry, RING_MAGIC, RING_VERSION, RingHeader, SEQ_LIMIT, SLOT_WRITING, arena_off, hdr,
    reg,
};
use crate::region::Region;
use crate::sync::{A32, A64, Ordering, fence};

/// What an attacher knows about the records it expects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Expect {
    /// The caller's slot stride, if it knows its record type (§1.3 check 4).
    pub element_size: Option<u32>,
    /// The caller's schema signature; a header value of 0 accepts any type (§1.3 check 11).
    pub schema_sig: Option<u64>,
    /// The caller's slot alignment (8 for raw readers).
    pub slot_align: u64,
}

impl Expect {
    /// A raw reader: any record type, slot alignment 8.
    pub const RAW: Expect = Expect {
        element_size: None,
        schema_sig: None,
        slot_align: 8,
    };
}

/// Outcome of a tear-free slot read (spec §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotRead {
    /// The copy is the message that was asked for.
    Ok,
    /// Not published yet, or a write is in progress.
    Pending,
    /// The slot holds a newer message; `seen` is its sequence (0 if a write was in flight).
    Overwritten {
        /// The sequence seen in the slot.
        seen: u64,
    },
}

/// A ring in a region whose geometry has been validated.
#[derive(Clone, Debug)]
#[cfg_attr(not(loom), derive(Copy))]
pub struct RingView {
    region: Region,
    geo: Geometry,
    /// `geo.mask()`, kept beside the geometry: every slot access masks a sequence, and a
    /// loaded mask saves the per-access `capacity - 1`.
    mask: u64,
}

impl RingView {
    /// Initialises a ring in `region` (spec §1.2 step 5): the header with `magic = 0`, the
    /// registry, every slot's sequence word and the arena header, then a release fence, then
    /// the magic. MPMC rings start with `claim_seq = read_seq = 1` (§8.1).
    ///
    /// The caller must hold the region exclusively while this runs (a fresh file under the
    /// creator's lock, or a buffer nobody else uses yet).
    ///
    /// # Safety
    /// While this runs, nothing else may access the region's memory: no other view of it
    /// (a ring of this or another geometry, a queue, a blackboard) and no other access may
    /// be in use, in this thread or another. Other processes and devices, outside the Rust
    /// abstract machine, are the caller's protocol concern, as for
    /// [`Region::from_raw_parts`]. After it returns, no view of the memory made before it
    /// for another layout (a ring of another geometry, a queue, a blackboard) may be used
    /// again: the same bytes would then be accessed atomically at two sizes.
    ///
    /// A [`Region`] is `Copy` and [`Region::from_static`] is safe, so safe code could
    /// otherwise re-initialise a region under a live view; it cannot call this:
    ///
    /// ```compile_fail,E0133
    /// use ringwire_core::{Geometry, Region, RingView};
    /// let geo = Geometry::spmc(8, 16, 8, 0, false).unwrap();
    /// let words = geo.total_len().unwrap() as usize / 8;
    /// let region = Region::from_static(Box::leak(vec![0u64; words].into_boxed_slice())).unwrap();
    /// let _ = RingView::init(region, &geo);
    /// ```
    pub unsafe fn init(region: Region, geo: &Geometry) -> Result<RingView, InitError> {
        let len = region.len() as u64;
        let need = geo.total_len().ok_or(InitError::Geometry(
            // Name the part that overflows: the slots, or the arena after them.
            if geo.has_arena() && geo.slots_end().is_some() {
                AttachError::ArenaPastEnd { end: None, len }
            } else {
                AttachError::SlotsPastEnd { end: None, len }
            },
        ))?;
        if need > len {
            return Err(InitError::RegionTooSmall { need, len });
        }
        let mut h = RingHeader::new_zeroed();
        h.version = RING_VERSION;
        h.element_size = geo.element_size;
        h.capacity = geo.capacity;
        h.mask = geo.mask();
        h.flags = geo.flags.0;
        h.schema_sig = geo.schema_sig;
        h.arena_offset = geo.arena_offset;
        h.arena_size = geo.arena_size;
        h.reader_registry_offset = geo.registry_offset;
        h.reader_registry_count = geo.registry_count;
        h.slots_offset = geo.slots_offset;
        if geo.flags.has(Flags::MODE_MPMC) {
            h.claim_seq = 1;
            h.read_seq = 1;
        }
        // Validate what we are about to write with the same rules an attacher applies, so a
        // ring we create is always one we (and ringfire) can attach to.
        let geo = Geometry::from_header(&h, len, 8).map_err(InitError::Geometry)?;
        // SAFETY: the region holds at least `need >= 128` bytes (checked above).
        unsafe { region.a64(hdr::MAGIC) }.store(0, Ordering::Relaxed);
        // SAFETY: as above; we own the region during init.
        unsafe { store_header_fields(&region, &h) };
        let view = RingView {
            region,
            mask: geo.mask(),
            geo,
        };
        // Without a registry offset there is no registry, whatever the count says: a loop
        // over a hand-built count of up to 2^32 slots that are not there would do nothing
        // for a very long time.
        if geo.registry_offset != 0 {
            for i in 0..geo.registry_count {
                view.zero_registry_slot(i);
            }
        }
        for i in 0..geo.capacity {
            view.slot_seq_at(i as usize).store(0, Ordering::Relaxed);
        }
        if geo.has_arena() {
            let a = geo.arena_offset as usize;
            // SAFETY: from_header proved arena_offset + 64 + arena_size inside the region.
            unsafe {
                view.region.zero_words(a, arena_off::SIZE);
                view.region
                    .a64(a + arena_off::CAPACITY)
                    .store(geo.arena_size, Ordering::Relaxed);
                view.region
                    .a64(a + arena_off::MASK)
                    .store(geo.arena_size - 1, Ordering::Relaxed);
            }
        }
        // Everything above happens-before any attacher's acquire of the magic.
        fence(Ordering::Release);
        view.a64(hdr::MAGIC).store(RING_MAGIC, Ordering::Release);
        Ok(view)
    }

    /// Attaches to an initialised ring with every check of spec §1.3, in order. Before the
    /// schema check, a blob ring's arena header (§10.1) must hold the ring header's
    /// `arena_size` as its capacity ([`AttachError::ArenaHeaderMismatch`]) and that
    /// capacity - 1 as its mask ([`AttachError::ArenaMaskMismatch`], as ringfire refuses it).
    pub fn attach(region: Region, expect: Expect) -> Result<RingView, AttachError> {
        let len = region.len() as u64;
        if len < hdr::SIZE as u64 {
            return Err(AttachError::TooShort { len });
        }
        // SAFETY: the region holds at least the 128-byte header (checked above).
        let magic = unsafe { region.a64(hdr::MAGIC) }.load(Ordering::Acquire);
        if magic != RING_MAGIC {
            return Err(AttachError::BadMagic { found: magic });
        }
        let h = Self::snapshot(&region);
        if h.version != RING_VERSION {
            return Err(AttachError::BadVersion { found: h.version });
        }
        if let Some(want) = expect.element_size
            && want != h.element_size
        {
            return Err(AttachError::ElementSizeMismatch {
                expected: want,
                found: h.element_size,
            });
        }
        let geo = Geometry::from_header(&h, len, expect.slot_align)?;
        if geo.has_arena() {
            // SAFETY: from_header proved the arena header inside the region.
            let cap = unsafe { region.a64(geo.arena_offset as usize + arena_off::CAPACITY) }
                .load(Ordering::Relaxed);
            if cap != geo.arena_size {
                return Err(AttachError::ArenaHeaderMismatch {
                    arena_size: geo.arena_size,
                    arena_capacity: cap,
                });
            }
            // Ours derive the mask, ringfire's readers index the arena with it: a wrong one is
            // corruption they refuse. Relaxed: written before the magic, acquired above.
            // SAFETY: as above; the mask is the arena header's second word.
            let mask = unsafe { region.a64(geo.arena_offset as usize + arena_off::MASK) }
                .load(Ordering::Relaxed);
            // `cap` equals arena_size, a power of two >= 64 (from_header): no underflow.
            if mask != cap - 1 {
                return Err(AttachError::ArenaMaskMismatch {
                    arena_capacity: cap,
                    mask,
                });
            }
        }
        if let Some(sig) = expect.schema_sig
            && h.schema_sig != 0
            && h.schema_sig != sig
        {
            return Err(AttachError::SchemaMismatch {
                expected: sig,
                found: h.schema_sig,
            });
        }
        Ok(RingView {
            region,
            mask: geo.mask(),
            geo,
        })
    }

    fn snapshot(region: &Region) -> RingHeader {
        // SAFETY: callers checked that the region holds the 128-byte header.
        unsafe { load_header_fields(region) }
    }

    /// A relaxed snapshot of the whole header (for `stat`, tests and diagnostics).
    pub fn header(&self) -> RingHeader {
        Self::snapshot(&self.region)
    }

    /// The validated geometry.
    #[inline(always)]
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// The region the ring lives in.
    #[inline(always)]
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// Number of slots.
    #[inline(always)]
    pub fn capacity(&self) -> u64 {
        self.geo.capacity
    }

    #[inline(always)]
    fn a64(&self, off: usize) -> A64<'_> {
        // SAFETY: only called with header offsets (< 128, 8-aligned); the region holds the
        // header (checked at init/attach).
        unsafe { self.region.a64(off) }
    }

    #[inline(always)]
    fn a32(&self, off: usize) -> A32<'_> {
        // SAFETY: only called with header offsets (< 128, 4-aligned), as for `a64`.
        unsafe { self.region.a32(off) }
    }

    /// `write_seq`: highest published sequence.
    #[inline(always)]
    pub fn write_seq(&self) -> A64<'_> {
        self.a64(hdr::WRITE_SEQ)
    }
    /// `claim_seq` (MPMC).
    #[inline(always)]
    pub fn claim_seq(&self) -> A64<'_> {
        self.a64(hdr::CLAIM_SEQ)
    }
    /// `read_seq` (MPMC queue).
    #[inline(always)]
    pub fn read_seq(&self) -> A64<'_> {
        self.a64(hdr::READ_SEQ)
    }
    /// `futex_word`.
    #[inline(always)]
    pub fn futex_word(&self) -> A32<'_> {
        self.a32(hdr::FUTEX_WORD)
    }
    /// `waiting_consumers`.
    #[inline(always)]
    pub fn waiting_consumers(&self) -> A32<'_> {
        self.a32(hdr::WAITING_CONSUMERS)
    }

    /// Byte offset of the slot that holds sequence `seq`.
    #[inline(always)]
    pub fn slot_offset(&self, seq: u64) -> usize {
        self.geo.slots_offset as usize + (seq & self.mask) as usize * self.geo.element_size as usize
    }

    #[inline(always)]
    fn slot_seq_at(&self, index: usize) -> A64<'_> {
        let off = self.geo.slots_offset as usize + index * self.geo.element_size as usize;
        // SAFETY: index < capacity (callers mask it) and validation proved every slot inside
        // the region; slots_offset and element_size are multiples of 8.
        unsafe { self.region.a64(off) }
    }

    /// The sequence word of the slot holding `seq`.
    #[inline(always)]
    pub fn slot_seq(&self, seq: u64) -> A64<'_> {
        self.slot_seq_at((seq & self.mask) as usize)
    }

    /// `write_seq` (acquire-loaded), or the corrupt header it shows: at or past
    /// [`SEQ_LIMIT`] ([`AttachError::WriteSeqExhausted`], see
    /// [`check_write_seq`](crate::layout::check_write_seq)), or, on an MPMC-flagged ring, at
    /// or past `claim_seq` loaded after it ([`AttachError::WriteSeqPastClaimSeq`]). A
    /// producer claims its ticket before it publishes it (§8.1), so no ring in use shows
    /// the latter to this order of loads, even while pushes are in flight.
    pub fn checked_write_seq(&self) -> Result<u64, AttachError> {
        // Acquire: pairs with the publishing producer's release fetch_max, which follows its
        // claim of that ticket, so the claim_seq loaded next is past it.
        let w = crate::layout::check_write_seq(self.write_seq().load(Ordering::Acquire))?;
        if self.geo.flags.has(Flags::MODE_MPMC) {
            // Relaxed: ordered after the acquire load above.
            let claim_seq = self.claim_seq().load(Ordering::Relaxed);
            if w >= claim_seq {
                return Err(AttachError::WriteSeqPastClaimSeq {
                    write_seq: w,
                    claim_seq,
                });
            }
        }
        Ok(w)
    }

    /// The newest sequence a writer may have stored in a slot read before `write_seq`
    /// loaded `w`: the `newest` of [`later_seq`](crate::layout::later_seq), one bound for
    /// every reader. On an MPMC-flagged ring the larger of `w` and `claim_seq`, loaded
    /// after: a producer stores its ticket in the slot before its `fetch_max` of
    /// `write_seq` (§8.1), so with the tickets below it in flight, dropped or held by dead
    /// producers a slot may hold a ticket more than a lap past `w`, but never one at or
    /// past `claim_seq`. Otherwise `w`: no writer of another ring uses `claim_seq` (it is
    /// 0 there), and a `claim_seq` at or past [`SEQ_LIMIT`] (a corrupt header, from which
    /// no producer draws a ticket) bounds nothing either. Either value, taken as the bound,
    /// made a corrupt slot a lap to a sequence the ring never reaches.
    #[cold]
    pub fn newest_writable(&self, w: u64) -> u64 {
        if !self.geo.flags.has(Flags::MODE_MPMC) {
            return w;
        }
        // Relaxed: only a bound on the tickets handed out; the slot's load came first.
        let claim = self.claim_seq().load(Ordering::Relaxed);
        if claim < SEQ_LIMIT { w.max(claim) } else { w }
    }

    /// On a ring with one writer (not MPMC-flagged): `Some(write_seq)` when record `seq`,
    /// which that `write_seq` has passed, has the write marker in its slot. The writer
    /// stored `seq` there before it published `write_seq` past it, so the marker is a later
    /// lap's write of the slot, in progress or, if that writer died mid-write, for good:
    /// the record is gone. `None` otherwise (on an MPMC-flagged ring, where `write_seq` is
    /// the highest ticket published, a marker below it may be a ticket still being written;
    /// and for `seq` = the marker's own value). The readers' rule for such a slot (spec §4.3
    /// would wait at it for ever): the consumers count the record lapped, the replication
    /// source reports it overwritten.
    #[cold]
    pub fn rewritten_under(&self, seq: u64) -> Option<u64> {
        if self.geo.flags.has(Flags::MODE_MPMC) || seq == SLOT_WRITING {
            return None;
        }
        // Acquire, before the slot's load: the record's own publication, if write_seq has
        // passed it, is then visible, so a marker found below is a later lap's, not the
        // record's first write.
        let w = self.write_seq().load(Ordering::Acquire);
        // Acquire: as the §4.3 reader's first load.
        (seq <= w && self.slot_seq(seq).load(Ordering::Acquire) == SLOT_WRITING).then_some(w)
    }

    /// Writes a record into the slot of `seq` (spec §4.2 steps 1–4): marker, release fence,
    /// payload as relaxed words, release store of `seq`. `payload` is the raw slot bytes
    /// `[8, 8 + payload.len())`; it is truncated to `element_size - 8`.
    ///
    /// Only the ring's single writer (or an MPMC producer that owns the slot) may call this.
    #[inline]
    pub fn write_slot(&self, seq: u64, payload: &[u8]) {
        self.write_slot_at(seq, 8, payload);
    }

    /// [`RingView::write_slot`] for a payload that starts `poff` bytes into the slot: an
    /// over-aligned record type (spec §4.1: `align(T) > 8` puts the payload at `align`) is
    /// written at `poff = align`, and the slot bytes `[8, poff)` are left alone. `payload`
    /// is truncated to `element_size - poff`.
    ///
    /// `poff` must be a multiple of 8 between 8 and `element_size` (a typed producer's
    /// stride check guarantees it); any other value is taken as 8.
    #[inline]
    pub fn write_slot_at(&self, seq: u64, poff: usize, payload: &[u8]) {
        let (poff, room) = self.payload_span(poff);
        // `payload.len() <= room` (room = element_size - poff, poff <= element_size), asked
        // as `len + poff <= element_size`: with a constant length and offset that is one
        // compare with the element size, not a subtraction and a compare. In u64, where the
        // sum cannot overflow (a slice holds fewer than 2^63 bytes, poff < 2^32).
        let fits = payload.len() as u64 + poff as u64 <= self.geo.element_size as u64;
        debug_assert_eq!(fits, payload.len() <= room);
        self.write_marked(seq, |off| {
            // A record that fits (always, for a typed producer) is copied with its own
            // length, which is a constant after inlining: the copy unrolls into plain word
            // stores. The truncating copy stays out of line: inlined, the compiler merged the
            // two into one copy of `min(len, record_len)` words, a run-time loop on every push.
            if fits {
                // SAFETY: [off + poff, off + element_size) is this slot's payload; poff and
                // element_size are multiples of 8 so the rounded-up span stays inside the slot.
                unsafe { self.region.write_words(off + poff, payload) };
            } else {
                self.write_truncated(off + poff, room, payload);
            }
        });
    }

    /// [`RingView::write_slot`] for a payload given in two pieces, written as one record
    /// under one marker: `head` at the payload start, `tail` at the next word boundary after
    /// it. A blob ring's mirror writes the source's descriptor this way, its own
    /// [`BlobRef`](crate::layout::BlobRef) as the tail (spec §21.2). Both pieces are cut to
    /// the slot's payload room (`element_size - 8`).
    ///
    /// Only the ring's single writer may call this.
    pub fn write_slot_pieces(&self, seq: u64, head: &[u8], tail: &[u8]) {
        let room = self.geo.record_len();
        let h = head.len().min(room);
        let at = h.next_multiple_of(8);
        let t = tail.len().min(room.saturating_sub(at));
        self.write_marked(seq, |off| {
            // SAFETY: [off + 8, off + 8 + room) is this slot's payload: `h <= room`, and the
            // tail starts on a word at `at <= room` and ends by `room`; room is a multiple
            // of 8, so neither rounded-up span leaves the slot.
            unsafe {
                self.region.write_words(off + 8, &head[..h]);
                self.region.write_words(off + 8 + at, &tail[..t]);
            }
        });
    }

    /// Spec §4.2 steps 1–4 around `fill`, which stores the payload words of the slot at
    /// the region offset it is given: marker, release fence, `fill`, release store of `seq`.
    #[inline(always)]
    fn write_marked(&self, seq: u64, fill: impl FnOnce(usize)) {
        let off = self.slot_offset(seq);
        let seq_word = self.slot_seq(seq);
        // Relaxed: the fence below orders it before the payload stores.
        seq_word.store(SLOT_WRITING, Ordering::Relaxed);
        // Readers that see any payload word of this write also see the marker.
        fence(Ordering::Release);
        fill(off);
        // Release: a reader that acquires `seq` sees the whole payload.
        seq_word.store(seq, Ordering::Release);
    }

    /// `(poff, element_size - poff)` for a payload offset that is valid for this ring (a
    /// multiple of 8 in `8..=element_size`), else `(8, element_size - 8)`. For the constant
    /// 8 of the plain paths this folds away: validation proved `element_size >= 8`.
    #[inline(always)]
    fn payload_span(&self, poff: usize) -> (usize, usize) {
        let es = self.geo.element_size as usize;
        if poff == 8 || (poff >= 8 && poff.is_multiple_of(8) && poff <= es) {
            (poff, es - poff)
        } else {
            // Documented on the public callers: any other offset is taken as 8, in debug
            // builds too (no assertion: a caller's value is not an internal invariant).
            (8, self.geo.record_len())
        }
    }

    /// The payload copy of [`RingView::write_slot_at`] for a payload longer than the slot's:
    /// its first `room` bytes (the slot's payload room) are written at `off`, a slot's
    /// payload start.
    #[cold]
    #[inline(never)]
    fn write_truncated(&self, off: usize, room: usize, payload: &[u8]) {
        let rl = room.min(payload.len());
        // SAFETY: `off` is a slot's payload start and `rl` bytes are at most the slot's
        // payload (element_size and the offset are multiples of 8, so the span stays inside
        // the slot).
        unsafe { self.region.write_words(off, &payload[..rl]) };
    }

    /// Reads the record `want` into `dst` (at most `element_size - 8` bytes of the raw slot
    /// bytes `[8, S)`) with the tear-free protocol of spec §4.3. `want ==`
    /// [`SLOT_WRITING`] is never a record: it is always `Pending`. Sequences start at 1 and
    /// this hot path does not check `want == 0`, which matches the 0 of a slot never written
    /// (`Ok`, its bytes): ask for 1 and up, or use
    /// [`read_record`](crate::broadcast::raw::read_record), which refuses 0.
    #[inline]
    pub fn read_slot(&self, want: u64, dst: &mut [u8]) -> SlotRead {
        self.read_slot_at(want, 8, dst)
    }

    /// [`RingView::read_slot`] for a payload that starts `poff` bytes into the slot (an
    /// over-aligned record type, see [`RingView::write_slot_at`]): at most
    /// `element_size - poff` bytes from `[poff, S)`. `poff` as for `write_slot_at`.
    #[inline]
    pub fn read_slot_at(&self, want: u64, poff: usize, dst: &mut [u8]) -> SlotRead {
        let (poff, room) = self.payload_span(poff);
        let seq_word = self.slot_seq(want);
        // Acquire: pairs with the writer's release store of `want`.
        let s1 = seq_word.load(Ordering::Acquire);
        if s1 == want {
            self.copy_payload(self.slot_offset(want) + poff, room, dst);
            // Acquire fence: if any payload word came from a later write, the re-check below
            // sees that write's marker or sequence.
            fence(Ordering::Acquire);
            Self::recheck(seq_word.load(Ordering::Relaxed), want)
        } else {
            Self::classify_unexpected(s1, want)
        }
    }

    /// [`RingView::read_slot`] for a reader that polls the slot in a loop: the payload is
    /// copied on every call, whatever the first load of the sequence word returns, and the
    /// verdict is taken only after the copy and the re-check.
    ///
    /// The protocol is the one of spec §4.3 (acquire load of the sequence, copy, acquire
    /// fence, re-check) and the result is the same: `Ok` only when both loads saw `want`, so
    /// a torn or stale copy is never accepted. What changes is the timing: there is no branch
    /// between the sequence load and the copy, so while the record is not there yet the
    /// payload loads are issued in the same poll as the sequence load. When the writer
    /// publishes, a record whose slot spans two cache lines (a 64-byte record has a 72-byte
    /// slot) arrives as two line transfers in parallel instead of one after the other.
    ///
    /// `dst` is overwritten even when the result is not `Ok` (its bytes are then
    /// meaningless). Polling this way also keeps the payload lines shared in the reader's
    /// cache while it waits, which the writer must invalidate: use it when spinning on the
    /// next record, not for draining a backlog ([`RingView::read_slot`] does that).
    #[inline]
    pub fn read_slot_eager(&self, want: u64, dst: &mut [u8]) -> SlotRead {
        self.read_slot_eager_at(want, 8, dst)
    }

    /// [`RingView::read_slot_eager`] for a payload that starts `poff` bytes into the slot,
    /// as [`RingView::read_slot_at`].
    #[inline]
    pub fn read_slot_eager_at(&self, want: u64, poff: usize, dst: &mut [u8]) -> SlotRead {
        let (poff, room) = self.payload_span(poff);
        let seq_word = self.slot_seq(want);
        let off = self.slot_offset(want) + poff;
        // Acquire: pairs with the writer's release store of `want`; the copy below is
        // ordered after it.
        let s1 = seq_word.load(Ordering::Acquire);
        self.copy_payload(off, room, dst);
        // Acquire fence: if any payload word came from a later write, the re-check below
        // sees that write's marker or sequence (as in read_slot).
        fence(Ordering::Acquire);
        let s2 = seq_word.load(Ordering::Relaxed);
        if s1 == want {
            Self::recheck(s2, want)
        } else {
            Self::classify_unexpected(s1, want)
        }
    }

    /// The verdict on a copy whose first sequence load saw `want`: `Ok` when the re-check
    /// `s2` still does, otherwise the slot was overwritten during the copy (spec §4.3).
    /// [`SLOT_WRITING`] is the marker, never a record: asking for it is always `Pending`
    /// (a reader whose cursor a corrupt `write_seq` pushed there sees nothing more).
    #[inline(always)]
    fn recheck(s2: u64, want: u64) -> SlotRead {
        if want == SLOT_WRITING {
            SlotRead::Pending
        } else if s2 == want {
            SlotRead::Ok
        } else {
            SlotRead::Overwritten {
                seen: if s2 == SLOT_WRITING { 0 } else { s2 },
            }
        }
    }

    /// Copies `min(dst.len(), room)` payload bytes of the slot whose payload starts at `off`
    /// (and runs for `room` bytes to the slot's end) into `dst` as relaxed words. A `dst`
    /// that fits (always, for a typed reader) is copied with its own length, a constant
    /// after inlining, so the copy unrolls into plain word loads.
    #[inline(always)]
    fn copy_payload(&self, off: usize, room: usize, dst: &mut [u8]) {
        if dst.len() <= room {
            // SAFETY: `off` is a slot's payload start and the span is at most the slot's
            // payload, rounded up to whole words inside the slot (element_size and the
            // payload offset are multiples of 8).
            unsafe { self.region.read_words(off, dst) };
        } else {
            // SAFETY: as above, for exactly the slot's payload.
            unsafe { self.region.read_words(off, &mut dst[..room]) };
        }
    }

    /// The verdict on a slot whose sequence word held `s1 != want` (spec §4.3).
    #[inline(always)]
    fn classify_unexpected(s1: u64, want: u64) -> SlotRead {
        if s1 == SLOT_WRITING || s1 < want {
            SlotRead::Pending
        } else {
            SlotRead::Overwritten { seen: s1 }
        }
    }

    /// Publishes `seq` as the newest message (spec §4.2 step 5) and reports whether sleepers
    /// must be woken (step 6): when it returns `true`, `futex_word` has been bumped and the
    /// caller issues the wake (FUTEX_WAKE on the std side).
    #[inline]
    pub fn publish(&self, seq: u64) -> bool {
        // Release: readers that acquire write_seq see every slot written before it.
        self.write_seq().store(seq, Ordering::Release);
        self.bump_futex_if_waiting()
    }

    /// Spec §11 producer side: if anyone sleeps, bump `futex_word` and return `true`.
    ///
    /// The producer pays nothing when nobody sleeps: a compiler fence and one relaxed load
    /// ([`FutexPair::notify_unfenced`]). A lost wake-up is prevented by the sleeper, not
    /// here: it increments `waiting_consumers` (SeqCst), then calls
    /// `membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)`, which runs a full memory barrier on
    /// every running thread of every process registered for it (producers register at
    /// creation, spec §1.2), and only then re-checks `write_seq` ([`FutexPair::announce`]).
    /// So either the sleeper's re-check sees this publish, or this load sees the sleeper's
    /// increment. Where membarrier is unavailable (firmware, a failed registration) a
    /// sleeper's finite timeout bounds the delay; [`RingView::publish_fenced`] closes the
    /// window at the price of a full fence per publish.
    #[inline]
    pub fn bump_futex_if_waiting(&self) -> bool {
        self.futex().notify_unfenced()
    }

    /// [`RingView::publish`] for platforms without membarrier: a SeqCst fence between the
    /// `write_seq` store and the waiter-count load pairs with the sleeper's SeqCst
    /// increment (Dekker), so no wake-up is lost whatever the sleeper does.
    #[inline]
    pub fn publish_fenced(&self, seq: u64) -> bool {
        // Release: as in `publish`.
        self.write_seq().store(seq, Ordering::Release);
        self.futex().notify()
    }

    /// [`RingView::publish_fenced`] when `fenced`, else [`RingView::publish`]: a writer
    /// whose process could not register for membarrier passes `true`.
    #[inline(always)]
    pub fn publish_with(&self, seq: u64, fenced: bool) -> bool {
        if fenced {
            self.publish_fenced(seq)
        } else {
            self.publish(seq)
        }
    }

    /// [`RingView::write_slot_at`] of `seq`, then [`RingView::publish_with`] of the same
    /// `seq`, with the same stores, fences and orderings. The header words are located
    /// before the slot's release stores: after them the compiler would load the region's
    /// base a second time.
    #[inline(always)]
    pub(crate) fn write_publish_at(
        &self,
        seq: u64,
        poff: usize,
        payload: &[u8],
        fenced: bool,
    ) -> bool {
        let write_seq = self.write_seq();
        let futex = self.futex();
        self.write_slot_at(seq, poff, payload);
        // Release: as in `publish`.
        write_seq.store(seq, Ordering::Release);
        if fenced {
            futex.notify()
        } else {
            futex.notify_unfenced()
        }
    }

    /// `futex_word` and `waiting_consumers`, the ring's side of the §11 handshake.
    #[inline(always)]
    pub fn futex(&self) -> FutexPair<'_> {
        FutexPair {
            word: self.futex_word(),
            waiters: self.waiting_consumers(),
        }
    }

    /// Zeroes registry slot `i` field by field (each field keeps one access size, as every
    /// other access to it does).
    fn zero_registry_slot(&self, i: u32) {
        if let (Some(pid), Some(active)) = (
            self.registry_a32(i, reg::PID),
            self.registry_a32(i, reg::ACTIVE),
        ) {
            // Relaxed: init runs before the magic's release store publishes the ring.
            pid.store(0, Ordering::Relaxed);
            active.store(0, Ordering::Relaxed);
        }
        if let Some(off) = self.registry_slot_offset(i) {
            // SAFETY: words [8, 64) of a validated registry slot are in bounds, 8-aligned,
            // and always accessed as 64-bit words (cursor, heartbeat, name, padding).
            unsafe {
                self.region
                    .zero_words(off + reg::CURSOR_SEQ, reg::SIZE - reg::CURSOR_SEQ)
            };
        }
    }

    /// Offset of registry slot `i`, if the ring has one at that index.
    #[inline]
    pub fn registry_slot_offset(&self, i: u32) -> Option<usize> {
        (self.geo.registry_offset != 0 && i < self.geo.registry_count)
            .then(|| self.geo.registry_offset as usize + i as usize * reg::SIZE)
    }

    /// A 32-bit field of registry slot `i`: `field` is [`reg::PID`] or [`reg::ACTIVE`];
    /// `None` for another field, or when the ring has no slot `i`.
    #[inline]
    pub fn registry_a32(&self, i: u32, field: usize) -> Option<A32<'_>> {
        if field != reg::PID && field != reg::ACTIVE {
            return None;
        }
        let off = self.registry_slot_offset(i)?;
        // SAFETY: validation proved every registry slot inside the region; the two field
        // offsets are 4-aligned and inside the 64-byte slot.
        Some(unsafe { self.region.a32(off + field) })
    }

    /// A 64-bit field of registry slot `i`: `field` is [`reg::CURSOR_SEQ`] or
    /// [`reg::HEARTBEAT_TSC`]; `None` for another field, or when the ring has no slot `i`.
    #[inline]
    pub fn registry_a64(&self, i: u32, field: usize) -> Option<A64<'_>> {
        if field != reg::CURSOR_SEQ && field != reg::HEARTBEAT_TSC {
            return None;
        }
        let off = self.registry_slot_offset(i)?;
        // SAFETY: as for registry_a32, for the two 8-aligned fields at +8 and +16.
        Some(unsafe { self.region.a64(off + field) })
    }

    /// Reads the 32-byte name of registry slot `i`.
    pub fn registry_name(&self, i: u32) -> Option<[u8; 32]> {
        let off = self.registry_slot_offset(i)?;
        let mut name = [0u8; 32];
        // SAFETY: the name field [24, 56) lies inside the validated registry slot.
        unsafe { self.region.read_words(off + reg::NAME, &mut name) };
        Some(name)
    }

    /// Writes the 32-byte name of registry slot `i` (the slot's owner only).
    pub fn set_registry_name(&self, i: u32, name: &[u8; 32]) {
        if let Some(off) = self.registry_slot_offset(i) {
            // SAFETY: as for registry_name; the caller owns the slot (its pid CAS won).
            unsafe { self.region.write_words(off + reg::NAME, name) };
        }
    }

    /// The arena's `reserved` counter, if the ring has an arena.
    #[inline]
    pub fn arena_reserved(&self) -> Option<A64<'_>> {
        // SAFETY: validation proved the arena header inside the region.
        self.geo.has_arena().then(|| unsafe {
            self.region
                .a64(self.geo.arena_offset as usize + arena_off::RESERVED)
        })
    }

    /// Byte offset of arena data index 0.
    #[inline]
    pub fn arena_data_offset(&self) -> usize {
        self.geo.arena_offset as usize + arena_off::SIZE
    }
}

/// Header fields by access size: 64-bit words and 32-bit fields (the magic at 0 excluded).
const HDR_U64: [usize; 10] = [
    hdr::CAPACITY,
    hdr::MASK,
    hdr::WRITE_SEQ,
    hdr::CLAIM_SEQ,
    hdr::READ_SEQ,
    hdr::SCHEMA_SIG,
    hdr::ARENA_OFFSET,
    hdr::ARENA_SIZE,
    hdr::SLOTS_OFFSET,
    112,
];
const HDR_U32: [usize; 8] = [
    hdr::VERSION,
    hdr::ELEMENT_SIZE,
    hdr::FLAGS,
    hdr::FUTEX_WORD,
    hdr::WAITING_CONSUMERS,
    60,
    hdr::REGISTRY_OFFSET,
    hdr::REGISTRY_COUNT,
];
const _: () = assert!(8 + HDR_U64.len() * 8 + 8 + HDR_U32.len() * 4 == hdr::SIZE);

/// Writes every header field but the magic, each with an atomic store of its own size, so
/// that no byte is ever accessed at two sizes (32-bit fields such as `futex_word` are later
/// used as 32-bit atomics).
///
/// # Safety
/// The region must hold at least 128 bytes.
unsafe fn store_header_fields(region: &Region, h: &RingHeader) {
    let bytes = zerocopy::IntoBytes::as_bytes(h);
    for off in HDR_U64.into_iter().chain([120]) {
        let v = u64::from_ne_bytes(bytes[off..off + 8].try_into().unwrap_or([0; 8]));
        // SAFETY: off + 8 <= 128 <= len, 8-aligned. Relaxed: published by the magic's release.
        unsafe { region.a64(off) }.store(v, Ordering::Relaxed);
    }
    for off in HDR_U32 {
        let v = u32::from_ne_bytes(bytes[off..off + 4].try_into().unwrap_or([0; 4]));
        // SAFETY: off + 4 <= 128 <= len, 4-aligned. Relaxed: as above.
        unsafe { region.a32(off) }.store(v, Ordering::Relaxed);
    }
}

/// Reads the header field by field (relaxed), the mirror image of [`store_header_fields`].
///
/// # Safety
/// The region must hold at least 128 bytes.
unsafe fn load_header_fields(region: &Region) -> RingHeader {
    let mut bytes = [0u8; hdr::SIZE];
    for off in [hdr::MAGIC].into_iter().chain(HDR_U64).chain([120]) {
        // SAFETY: off + 8 <= 128 <= len, 8-aligned.
        let v = unsafe { region.a64(off) }.load(Ordering::Relaxed);
        bytes[off..off + 8].copy_from_slice(&v.to_ne_bytes());
    }
    for off in HDR_U32 {
        // SAFETY: off + 4 <= 128 <= len, 4-aligned.
        let v = unsafe { region.a32(off) }.load(Ordering::Relaxed);
        bytes[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    }
    RingHeader::read_from_bytes(&bytes).unwrap_or_else(|_| RingHeader::new_zeroed())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::testutil::HeapRegion;

    /// A hand-built geometry of capacity 0 made init compute the header's mask as
    /// `capacity - 1`, an overflow panic in debug builds, before validation could refuse it.
    #[test]
    fn init_refuses_a_hand_built_capacity_of_zero() {
        let mem = HeapRegion::new(4096);
        let geo = Geometry {
            capacity: 0,
            ..Geometry::spmc(4, 16, 8, 0, false).unwrap()
        };
        // SAFETY: a fresh heap buffer, used by nothing else.
        let e = unsafe { RingView::init(mem.region(), &geo) }.unwrap_err();
        assert_eq!(
            e,
            InitError::Geometry(AttachError::CapacityNotPowerOfTwo { found: 0 })
        );
    }

    /// A hand-built blob geometry whose arena size overflows was refused as "slots_offset +
    /// capacity * element_size overflows", naming the slots, which fit, not the arena.
    #[test]
    fn init_names_the_arena_when_the_arena_overflows() {
        use std::string::ToString;
        let mem = HeapRegion::new(4096);
        let geo = Geometry {
            arena_size: u64::MAX - 63,
            ..Geometry::blob(4, 32, 0, 256).unwrap()
        };
        // SAFETY: a fresh heap buffer, used by nothing else.
        let e = unsafe { RingView::init(mem.region(), &geo) }.unwrap_err();
        assert_eq!(
            e,
            InitError::Geometry(AttachError::ArenaPastEnd {
                end: None,
                len: 4096
            })
        );
        assert!(
            e.to_string()
                .contains("arena_offset + 64 + arena_size overflows"),
            "{e}"
        );
        // Slots that overflow are still named so.
        let geo = Geometry {
            capacity: 1 << 62,
            ..Geometry::spmc(4, 64, 8, 0, false).unwrap()
        };
        // SAFETY: as above.
        let e = unsafe { RingView::init(mem.region(), &geo) }.unwrap_err();
        assert_eq!(
            e,
            InitError::Geometry(AttachError::SlotsPastEnd {
                end: None,
                len: 4096
            })
        );
    }

    /// A hand-built geometry with no registry offset but a registry count of `u32::MAX`
    /// made init loop 2^32 times over slots that do not exist (over a minute in a debug
    /// build, without end under Miri) before it returned.
    #[test]
    fn init_does_not_loop_over_a_registry_count_without_a_registry() {
        let geo = Geometry {
            registry_count: u32::MAX,
            ..Geometry::spmc(4, 16, 8, 0, false).unwrap()
        };
        let mem = HeapRegion::new(geo.total_len().unwrap() as usize);
        // SAFETY: a fresh heap buffer, used by nothing else.
        let view = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
        assert_eq!(view.registry_slot_offset(0), None);
        assert_eq!(view.header().reader_registry_count, u32::MAX);
    }
}
