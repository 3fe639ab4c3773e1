//! [`QueueView`]: a validated native queue in a [`Region`]: init (magic last), attach (every
//! check, typed errors), and access to the cursors, slots and waiting words at offsets that
//! validation has proved in range.

use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::error::{QueueAttachError, QueueInitError};
use super::layout::{FLAG_FIXED, QUEUE_VERSION, QueueGeometry, QueueHeader, QueueKind, qhdr};
use crate::futex::FutexPair;
use crate::region::Region;
use crate::sync::{A32, A64, Ordering, fence};

/// What an attacher knows about the queue it expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueExpect {
    /// The protocol the caller speaks.
    pub kind: QueueKind,
    /// The caller's item size, if it has a fixed item type.
    pub item_size: Option<u32>,
    /// The caller's schema signature; a header value of 0 accepts any type.
    pub schema_sig: Option<u64>,
}

impl QueueExpect {
    /// Any item type, for a queue of `kind`.
    pub const fn raw(kind: QueueKind) -> QueueExpect {
        QueueExpect {
            kind,
            item_size: None,
            schema_sig: None,
        }
    }
}

/// A queue in a region whose layout has been validated.
#[derive(Clone, Debug)]
#[cfg_attr(not(loom), derive(Copy))]
pub struct QueueView {
    region: Region,
    geo: QueueGeometry,
    /// Where the slots and their items lie, decoded once from `geo`.
    slots: Slots,
    /// Under loom, one cell per slot, shared by the clones of this view: every payload
    /// access is recorded on its slot's cell, so loom checks that any two accesses to a
    /// payload by different threads, one of them a write, are ordered by happens-before.
    /// The payload words are relaxed atomics, and loom lets a load read only stores made
    /// before it in the execution, so without the cells a consumer's copy could never be
    /// seen to read the next lap's item: the orderings that keep a producer from reusing
    /// a slot still being read would go unchecked.
    #[cfg(loom)]
    cells: std::sync::Arc<[loom::cell::UnsafeCell<()>]>,
}

/// The payload cells of a view (see [`QueueView`]'s field); a view made by
/// [`QueueView::attach`] gets its own, so only clones of one view are checked against
/// each other.
#[cfg(loom)]
fn loom_cells(capacity: u64) -> std::sync::Arc<[loom::cell::UnsafeCell<()>]> {
    // Bounded so that a corrupt header cannot make a model allocate without end; a slot
    // past the bound is not tracked.
    (0..capacity.min(1 << 12))
        .map(|_| loom::cell::UnsafeCell::new(()))
        .collect()
}

/// The slots as the one-item paths need them, decoded from the geometry once (the
/// geometry's form costs a flag test, a subtraction and a payload offset on every item):
/// the first slot's control word, the first payload, the position mask, the stride, the
/// item size, the item size of a fixed-size SPSC queue, and that again if its items lie
/// back to back (`packed_len`, see [`QueueView::packed_len`]). `fixed_len` and
/// `packed_len` are `usize::MAX` on any other queue, so that no item matches them.
/// `ahead`: how many slots ahead of its cursor an SPSC consumer prefetches
/// ([`QueueView::prefetch_ahead`]); `ahead_write`: the same for a producer, or `u64::MAX`
/// (never) on a CPU without a prefetch for writing ([`QueueView::prefetch_ahead_write`]).
#[derive(Clone, Copy, Debug)]
struct Slots {
    words: usize,
    base: usize,
    mask: u64,
    stride: usize,
    item: usize,
    fixed_len: usize,
    packed_len: usize,
    ahead: u64,
    ahead_write: u64,
    /// Slots per prefetch in [`QueueView::prefetch_span`]: one per line, so as many slots
    /// as a line holds (1 for slots of a line or more), decoded here rather than divided
    /// out on every batch.
    line_slots: u64,
    /// A packed queue's spans are copied with [`copy_wide`] ([`has_wide_copy`]).
    wide: bool,
}

/// Whether this CPU has a prefetch for writing that an SPSC producer may issue. On
/// x86-64, `prefetchw` only where CPUID says so (leaf 0x8000_0001, ECX bit 8: PRFCHW, or
/// 3DNowPrefetch): older Intel cores lack it, and there its opcode may fault. A plain
/// `prefetcht0` is no substitute: issued for the producer's slots it made every push and
/// pop of the `spsc_throughput` bench about 10 times slower (23–28 ns a `u64` item against
/// 2.3–2.4 ns; the line comes in shared, and the store that follows must take it from the
/// consumer's core again). On AArch64, `prfm pstl1keep`, which every core decodes (a
/// prefetch it does not implement is a no-op). Nowhere else, nor under loom or Miri.
///
/// Public for code that measures what the queues do (the std crate's line-transfer floor
/// prefetches for writing where a producer would).
pub fn has_prefetch_write() -> bool {
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    {
        use core::arch::x86_64::__cpuid;
        // SAFETY: CPUID exists on every x86-64 CPU and only reads identification registers.
        #[allow(unused_unsafe)]
        let ecx = unsafe {
            if __cpuid(0x8000_0000).eax >= 0x8000_0001 {
                __cpuid(0x8000_0001).ecx
            } else {
                0
            }
        };
        ecx & (1 << 8) != 0
    }
    #[cfg(all(target_arch = "aarch64", not(loom), not(miri)))]
    {
        true
    }
    #[cfg(not(all(
        any(target_arch = "x86_64", target_arch = "aarch64"),
        not(loom),
        not(miri)
    )))]
    {
        false
    }
}

/// Whether [`copy_wide`] may run here: an x86-64 CPU with AVX whose 256-bit register state
/// the operating system saves (CPUID leaf 1, ECX bits 27 OSXSAVE and 28 AVX, and XCR0 bits 1
/// and 2). Never on other targets, nor under loom or Miri, where packed spans are copied
/// word by word.
pub(crate) fn has_wide_copy() -> bool {
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    {
        use core::arch::x86_64::__cpuid;
        // SAFETY: CPUID exists on every x86-64 CPU and only reads identification registers.
        #[allow(unused_unsafe)]
        let ecx = unsafe { __cpuid(1).ecx };
        if ecx & (1 << 27) == 0 || ecx & (1 << 28) == 0 {
            return false;
        }
        let xcr0: u32;
        // SAFETY: OSXSAVE (checked above) says the OS enabled XGETBV; with ECX = 0 it reads
        // XCR0 into EDX:EAX and touches nothing else.
        unsafe {
            core::arch::asm!(
                "xgetbv",
                in("ecx") 0u32,
                out("eax") xcr0,
                out("edx") _,
                options(nomem, nostack, preserves_flags)
            );
        }
        xcr0 & 0b110 == 0b110
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
    {
        false
    }
}

/// How many slots ahead of its cursor an SPSC handle prefetches, at most (see "Prefetching"
/// in the `spsc` module's docs).
pub(crate) const PREFETCH_SLOTS: u64 = 64;
/// How many bytes ahead of its cursor an SPSC handle prefetches, at most: slots larger than
/// 64 bytes are prefetched fewer slots ahead.
pub(crate) const PREFETCH_BYTES: u64 = 4096;
/// The cache line a prefetch brings in: a span is prefetched once per line.
const LINE: usize = 64;

/// [`Slots::ahead`] for slots of `stride` bytes: [`PREFETCH_SLOTS`], or as many slots as
/// fit in [`PREFETCH_BYTES`] when fewer, and at least 1.
pub(crate) fn prefetch_ahead_for(stride: u64) -> u64 {
    PREFETCH_BYTES
        .checked_div(stride)
        .unwrap_or(PREFETCH_SLOTS)
        .clamp(1, PREFETCH_SLOTS)
}

impl Slots {
    fn of(geo: &QueueGeometry) -> Slots {
        let ahead = prefetch_ahead_for(geo.slot_stride as u64);
        let fixed_spsc = geo.fixed && geo.kind == QueueKind::Spsc;
        // Items back to back: a fixed-size SPSC queue whose item size is the stride.
        let packed = fixed_spsc && geo.item_size == geo.slot_stride;
        Slots {
            words: geo.slots_offset as usize,
            base: geo.slots_offset as usize + geo.payload_offset(),
            mask: geo.mask(),
            stride: geo.slot_stride as usize,
            item: geo.item_size as usize,
            fixed_len: if fixed_spsc {
                geo.item_size as usize
            } else {
                usize::MAX
            },
            packed_len: if packed {
                geo.item_size as usize
            } else {
                usize::MAX
            },
            ahead,
            ahead_write: if has_prefetch_write() {
                ahead
            } else {
                u64::MAX
            },
            line_slots: (LINE / (geo.slot_stride as usize).max(1)).max(1) as u64,
            wide: packed && has_wide_copy(),
        }
    }
}

impl QueueView {
    /// The view of a queue whose geometry was validated against `region`.
    fn from_parts(region: Region, geo: QueueGeometry) -> QueueView {
        QueueView {
            region,
            geo,
            slots: Slots::of(&geo),
            #[cfg(loom)]
            cells: loom_cells(geo.capacity),
        }
    }

    /// Initialises a queue in `region`: the header with `magic = 0`, both cursors, every
    /// slot's control word (SPSC: length 0; MPMC: stamp = slot index), then a release fence,
    /// then the magic. Fails if the region is smaller than the geometry needs, or if the
    /// geometry (a hand-built one) breaks a rule [`QueueView::attach`] checks.
    ///
    /// The caller must hold the region exclusively while this runs (a fresh file under the
    /// creator's lock, or a buffer nobody else uses yet).
    ///
    /// # Safety
    /// While this runs, nothing else may access the region's memory: no other view of it
    /// (a queue of this or another geometry, a ring, a blackboard) and no other access may
    /// be in use, in this thread or another. Other processes and devices, outside the Rust
    /// abstract machine, are the caller's protocol concern, as for
    /// [`Region::from_raw_parts`]. After it returns, no view of the memory made before it
    /// for another layout (a queue of another geometry, a ring, a blackboard) may be used
    /// again: the same bytes would then be accessed atomically at two sizes.
    pub unsafe fn init(region: Region, geo: &QueueGeometry) -> Result<QueueView, QueueInitError> {
        let len = region.len() as u64;
        let need = geo.total_len();
        if need.is_none_or(|n| n > len) {
            return Err(QueueInitError::RegionTooSmall { need, len });
        }
        let h = geo.header();
        // Re-validate with the attacher's rules, so a queue we create is one we can attach.
        let geo = validate(&h, len).map_err(|reason| QueueInitError::BadGeometry { reason })?;
        // SAFETY: the region holds at least the 384-byte prefix (validate checked it).
        unsafe {
            // Relaxed: nobody may attach until the release store of the magic below.
            region.a64(qhdr::MAGIC).store(0, Ordering::Relaxed);
            store_header(&region, &h);
            region.zero_words(qhdr::SIZE, qhdr::MIN_SLOTS_OFFSET - qhdr::SIZE);
        }
        let view = QueueView::from_parts(region, geo);
        // A fixed-size SPSC queue has no control words (and no slot needs a value).
        if !geo.fixed {
            for i in 0..geo.capacity {
                let stamp = match geo.kind {
                    QueueKind::Spsc => 0,
                    QueueKind::Mpmc => i,
                };
                // Relaxed: published by the release fence before the magic.
                view.slot_word(i).store(stamp, Ordering::Relaxed);
            }
        }
        // Everything above happens-before any attacher's acquire of the magic.
        fence(Ordering::Release);
        view.hdr64(qhdr::MAGIC)
            .store(geo.kind.magic(), Ordering::Release);
        Ok(view)
    }

    /// Attaches to an initialised queue, checking magic, kind, length, version, geometry,
    /// (if given) item size and schema signature, and for an MPMC queue its cursors
    /// ([`MpmcQueue::check_cursors`](super::MpmcQueue::check_cursors)), in that order. The
    /// magic comes first so that a short file of another format (a small ringfire ring) is
    /// named as such.
    pub fn attach(region: Region, expect: QueueExpect) -> Result<QueueView, QueueAttachError> {
        let len = region.len() as u64;
        if len < 8 {
            return Err(QueueAttachError::TooShort { len });
        }
        // SAFETY: the region holds the 8-byte magic (checked above).
        let magic = unsafe { region.a64(qhdr::MAGIC) }.load(Ordering::Acquire);
        match QueueKind::from_magic(magic) {
            None => return Err(QueueAttachError::BadMagic { found: magic }),
            Some(found) if found != expect.kind => {
                return Err(QueueAttachError::WrongKind {
                    expected: expect.kind,
                    found,
                });
            }
            Some(_) => {}
        }
        if len < qhdr::MIN_SLOTS_OFFSET as u64 {
            return Err(QueueAttachError::TooShort { len });
        }
        // SAFETY: the region holds the 128-byte header.
        let h = unsafe { load_header(&region) };
        let geo = validate(&h, len)?;
        if let Some(want) = expect.item_size
            && want != geo.item_size
        {
            return Err(QueueAttachError::ItemSizeMismatch {
                expected: want,
                found: geo.item_size,
            });
        }
        if let Some(sig) = expect.schema_sig
            && geo.schema_sig != 0
            && geo.schema_sig != sig
        {
            return Err(QueueAttachError::SchemaMismatch {
                expected: sig,
                found: geo.schema_sig,
            });
        }
        let view = QueueView::from_parts(region, geo);
        if geo.kind == QueueKind::Mpmc {
            super::mpmc::check_cursors(&view)?;
        }
        Ok(view)
    }

    /// The validated geometry.
    #[inline(always)]
    pub fn geometry(&self) -> &QueueGeometry {
        &self.geo
    }

    /// A relaxed snapshot of the header (for `stat`, tests and diagnostics).
    pub fn header(&self) -> QueueHeader {
        // SAFETY: validation proved the region holds the header.
        unsafe { load_header(&self.region) }
    }

    /// The region the queue lives in.
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
    fn hdr64(&self, off: usize) -> A64<'_> {
        // SAFETY: only called with offsets below 384, 8-aligned; validation proved the
        // region holds them.
        unsafe { self.region.a64(off) }
    }

    #[inline(always)]
    fn hdr32(&self, off: usize) -> A32<'_> {
        // SAFETY: only called with header offsets below 128, 4-aligned, as for `hdr64`.
        unsafe { self.region.a32(off) }
    }

    /// The enqueue cursor (SPSC tail, MPMC enqueue position).
    #[inline(always)]
    pub fn enq(&self) -> A64<'_> {
        self.hdr64(qhdr::ENQ)
    }

    /// The dequeue cursor (SPSC head, MPMC dequeue position).
    #[inline(always)]
    pub fn deq(&self) -> A64<'_> {
        self.hdr64(qhdr::DEQ)
    }

    /// Byte offset of the slot holding position `pos`.
    #[inline(always)]
    pub fn slot_offset(&self, pos: u64) -> usize {
        let f = &self.slots;
        f.words + (pos & f.mask) as usize * f.stride
    }

    /// Byte offset of the payload of the slot holding `pos` (the control word's offset
    /// plus the payload offset, 0 or 8).
    #[inline(always)]
    fn payload_at(&self, pos: u64) -> usize {
        let f = &self.slots;
        f.base + (pos & f.mask) as usize * f.stride
    }

    /// The control word of the slot holding `pos` (SPSC: item length; MPMC: stamp). A
    /// fixed-size SPSC queue has none: there this is the item's first word.
    #[inline(always)]
    pub fn slot_word(&self, pos: u64) -> A64<'_> {
        // SAFETY: slot_offset masks pos, and validation proved every slot inside the region;
        // slots_offset and the stride are multiples of 8.
        unsafe { self.region.a64(self.slot_offset(pos)) }
    }

    /// Records an access to the payloads of the `n` slots from `pos` on (see the `cells`
    /// field). Called just before the copy: no release or acquire comes between, so the
    /// record stands for the copy.
    #[cfg(loom)]
    fn track(&self, pos: u64, n: u64, write: bool) {
        for i in 0..n.min(self.geo.capacity) {
            let slot = pos.wrapping_add(i) & self.geo.mask();
            if let Some(cell) = self.cells.get(slot as usize) {
                if write {
                    cell.with_mut(|_| ());
                } else {
                    cell.with(|_| ());
                }
            }
        }
    }

    /// The item size (every kind), decoded: the geometry's `item_size`.
    #[inline(always)]
    pub(crate) fn item_len(&self) -> usize {
        self.slots.item
    }

    /// The item size of a fixed-size SPSC queue; `usize::MAX` on any other queue. An item
    /// of this length can take [`QueueView::write_fixed`] and [`QueueView::read_fixed`].
    #[inline(always)]
    pub(crate) fn fixed_len(&self) -> usize {
        self.slots.fixed_len
    }

    /// How many slots ahead of its cursor an SPSC consumer prefetches: 64, or fewer for
    /// slots larger than 64 bytes, so as to reach at most 4 KiB ahead.
    #[inline(always)]
    pub(crate) fn prefetch_ahead(&self) -> u64 {
        self.slots.ahead
    }

    /// How many slots ahead of its cursor an SPSC producer prefetches (for writing): as
    /// [`QueueView::prefetch_ahead`], or `u64::MAX`, never, on a CPU without a prefetch
    /// for writing.
    #[inline(always)]
    pub(crate) fn prefetch_ahead_write(&self) -> u64 {
        self.slots.ahead_write
    }

    /// Asks the CPU to bring the line holding the payload of the slot of `pos` into this
    /// core's cache: owned, ready for stores, with `write` (x86-64 `prefetchw`, AArch64
    /// `prfm pstl1keep`); shared, for loads, without (`prefetcht0`, `prfm pldl1keep`). A
    /// hint: it reads and writes no memory, so it orders nothing and races with nothing, and
    /// a caller may name a slot another process is using (it may then cost that process a
    /// cache miss, never a wrong value). Nothing on other targets, and under loom and Miri,
    /// which have no caches to warm. Callers ask with `write` only for slots within
    /// [`QueueView::prefetch_ahead_write`], which is `u64::MAX` (no slot) on an x86-64 CPU
    /// without `prefetchw`.
    #[inline(always)]
    pub(crate) fn prefetch(&self, pos: u64, write: bool) {
        #[cfg(all(
            any(target_arch = "x86_64", target_arch = "aarch64"),
            not(loom),
            not(miri)
        ))]
        {
            // In bounds: `payload_at` masks `pos` into a validated slot.
            let p = self.region.as_ptr().wrapping_add(self.payload_at(pos)) as *const u8;
            // One hint instruction, its operand the slot's address.
            macro_rules! hint {
                ($ins:literal) => {
                    core::arch::asm!($ins, in(reg) p, options(nostack, readonly, preserves_flags))
                };
            }
            // SAFETY: a prefetch instruction is a hint: it neither reads nor writes memory
            // as the program sees it, never faults (not even on an unmapped address), and
            // leaves the stack and the flags alone.
            unsafe {
                #[cfg(target_arch = "x86_64")]
                if write {
                    hint!("prefetchw [{0}]")
                } else {
                    hint!("prefetcht0 [{0}]")
                }
                #[cfg(target_arch = "aarch64")]
                if write {
                    hint!("prfm pstl1keep, [{0}]")
                } else {
                    hint!("prfm pldl1keep, [{0}]")
                }
            }
        }
        #[cfg(not(all(
            any(target_arch = "x86_64", target_arch = "aarch64"),
            not(loom),
            not(miri)
        )))]
        let _ = (pos, write);
    }

    /// [`QueueView::prefetch`] of the lines holding the payloads of the `n` slots from
    /// `from` on: one prefetch per line (per slot for slots of 64 bytes or more).
    #[inline(always)]
    pub(crate) fn prefetch_span(&self, from: u64, n: u64, write: bool) {
        let mut k = 0;
        while k < n {
            self.prefetch(from.wrapping_add(k), write);
            k += self.slots.line_slots;
        }
    }

    /// [`QueueView::write_payload`] for an item of exactly [`QueueView::fixed_len`] bytes,
    /// with the slot's address from the decoded [`Slots`]. Writes nothing for an item
    /// of any other length.
    #[inline(always)]
    pub(crate) fn write_fixed(&self, pos: u64, item: &[u8]) {
        let f = &self.slots;
        if item.len() != f.fixed_len {
            return;
        }
        #[cfg(loom)]
        self.track(pos, 1, true);
        // SAFETY: as for write_payload: `f` was decoded from this view's validated geometry
        // (base = slots_offset + payload offset, the stride, the mask), the item is exactly
        // the item size, and the caller owns the slot under the queue protocol.
        unsafe { self.region.write_words(self.payload_at(pos), item) };
    }

    /// [`QueueView::read_payload`] for an item of exactly [`QueueView::fixed_len`] bytes (see
    /// [`QueueView::write_fixed`]). Reads nothing into a buffer of any other length.
    #[inline(always)]
    pub(crate) fn read_fixed(&self, pos: u64, dst: &mut [u8]) {
        let f = &self.slots;
        if dst.len() != f.fixed_len {
            return;
        }
        #[cfg(loom)]
        self.track(pos, 1, false);
        // SAFETY: as for write_fixed; the consumer owns this published slot.
        unsafe { self.region.read_words(self.payload_at(pos), dst) };
    }

    /// Copies `item` into the payload of the slot holding `pos` as relaxed words. Writes
    /// nothing if `item` is longer than the item size (callers check it first).
    ///
    /// The copy is exactly `item.len()` bytes, never a length read from the header: a caller
    /// whose item length is a compile-time constant (a typed handle) gets a fully unrolled
    /// run of word stores with the slot address computed once.
    #[inline(always)]
    pub(crate) fn write_payload(&self, pos: u64, item: &[u8]) {
        if item.len() > self.slots.item {
            return;
        }
        #[cfg(loom)]
        self.track(pos, 1, true);
        // SAFETY: [off + p, off + p + roundup(len, 8)) lies inside the slot, where p is the
        // payload offset (0 or 8): len <= item_size (checked above), stride >= p + item_size
        // and the stride is a multiple of 8 (validated); the caller owns the slot under the
        // queue protocol.
        unsafe { self.region.write_words(self.payload_at(pos), item) };
    }

    /// Copies the first `len` payload bytes (whole words) of the slot holding `from` into
    /// the slot holding `to`, as relaxed words. Copies nothing if `len` is over the item
    /// size. The caller owns both slots under the queue protocol.
    pub(crate) fn move_payload(&self, from: u64, to: u64, len: usize) {
        if len > self.geo.item_size as usize {
            return;
        }
        #[cfg(loom)]
        self.track(from, 1, false);
        #[cfg(loom)]
        self.track(to, 1, true);
        let (a, b) = (self.payload_at(from), self.payload_at(to));
        for o in (0..len.div_ceil(8) * 8).step_by(8) {
            // SAFETY: both spans of roundup(len, 8) bytes lie inside their slots (as for
            // write_payload) and start 8-aligned.
            let w = unsafe { self.region.a64(a + o) }.load(Ordering::Relaxed);
            // SAFETY: as above.
            unsafe { self.region.a64(b + o) }.store(w, Ordering::Relaxed);
        }
    }

    /// Copies the first `len` payload bytes of the slot holding `pos` into `dst[..len]`
    /// (`len <= dst.len()`; callers check it). When `len` is the whole buffer (a typed
    /// handle's fixed-size buffer), the buffer itself is passed, so the copy's length is a
    /// compile-time constant once inlined.
    #[inline(always)]
    pub(crate) fn read_payload_prefix(&self, pos: u64, dst: &mut [u8], len: usize) {
        if len == dst.len() {
            self.read_payload(pos, dst);
        } else if let Some(prefix) = dst.get_mut(..len) {
            self.read_payload(pos, prefix);
        }
    }

    /// Copies `dst.len()` payload bytes of the slot holding `pos` as relaxed words. Reads
    /// nothing if `dst` is longer than the item size (callers check it first); exactly
    /// `dst.len()` bytes otherwise (see [`QueueView::write_payload`] on why).
    #[inline(always)]
    pub(crate) fn read_payload(&self, pos: u64, dst: &mut [u8]) {
        if dst.len() > self.slots.item {
            return;
        }
        #[cfg(loom)]
        self.track(pos, 1, false);
        // SAFETY: as for write_payload.
        unsafe { self.region.read_words(self.payload_at(pos), dst) };
    }

    /// The item size of a fixed-size SPSC queue whose items lie back to back in the slots
    /// (the item size is the stride, a multiple of 8), so that a run of items is one
    /// contiguous span up to the wrap; `usize::MAX` on any other queue. Items of this
    /// length can take [`QueueView::write_items`] and [`QueueView::read_items`].
    #[inline(always)]
    pub(crate) fn packed_len(&self) -> usize {
        self.slots.packed_len
    }

    /// The two spans that `n` items of `item_len` bytes from `pos` on take in a packed
    /// queue (see [`QueueView::packed_len`]), as (region offset, bytes): the slots up to
    /// the wrap, then the rest from the first slot. `None` unless `item_len` is the packed
    /// item size and `n` at most the capacity.
    ///
    /// Counted in items, not bytes, and with `item_len` rather than the decoded stride
    /// (equal here), so that when the caller's item length is a compile-time constant (a
    /// typed handle's) every size is that constant times a count: the copies then need no
    /// partial last word, and the compiler knows it.
    #[inline(always)]
    fn item_spans(&self, pos: u64, n: usize, item_len: usize) -> Option<[(usize, usize); 2]> {
        let f = &self.slots;
        if item_len != f.packed_len || n as u64 > self.geo.capacity {
            return None;
        }
        let slot = (pos & f.mask) as usize;
        // The slots from `slot` to the end of the area: capacity - slot, at least 1.
        let first = n.min((f.mask as usize - slot) + 1);
        // Payloads from `base`, as `payload_at` has them (a packed queue's offset is 0).
        Some([
            (f.base + slot * item_len, first * item_len),
            (f.base, (n - first) * item_len),
        ])
    }

    /// Copies the whole items of `src` (items of `item_len` bytes, the packed item size of
    /// [`QueueView::packed_len`]; a trailing partial item is not copied) into the slots
    /// from `pos` on as relaxed words, one word loop per contiguous span instead of one
    /// call per item. Writes nothing if `item_len` is not the packed item size or if `src`
    /// holds more items than the queue has slots (callers never pass more than the free
    /// slots).
    #[inline(always)]
    pub(crate) fn write_items(&self, pos: u64, src: &[u8], item_len: usize) {
        if item_len == 0 {
            return;
        }
        let n = src.len() / item_len;
        let Some([(a, na), (b, nb)]) = self.item_spans(pos, n, item_len) else {
            return;
        };
        #[cfg(loom)]
        self.track(pos, n as u64, true);
        // SAFETY: both spans lie inside the slot area (`item_spans`: `slot + first` slots
        // from the start of the area, and `n - first <= capacity` from it, of `item_len`
        // = stride bytes each; validation proved the area inside the region), start
        // 8-aligned (slots_offset and the stride are multiples of 8) and hold whole items
        // of a multiple of 8 bytes, so no partial word is written past them; the producer
        // owns these free slots under the queue protocol.
        unsafe {
            write_span(&self.region, a, &src[..na], self.slots.wide);
            if nb > 0 {
                write_span(&self.region, b, &src[na..na + nb], self.slots.wide);
            }
        }
    }

    /// Copies whole items of a packed queue from the slots from `pos` on into `dst`, as
    /// relaxed words, span by span (see [`QueueView::write_items`]): `dst.len() /
    /// item_len` of them (a trailing partial item of `dst` is left alone). Reads nothing if
    /// `item_len` is not the packed item size or `dst` holds more items than the queue has
    /// slots.
    #[inline(always)]
    pub(crate) fn read_items(&self, pos: u64, dst: &mut [u8], item_len: usize) {
        if item_len == 0 {
            return;
        }
        let n = dst.len() / item_len;
        let Some([(a, na), (b, nb)]) = self.item_spans(pos, n, item_len) else {
            return;
        };
        #[cfg(loom)]
        self.track(pos, n as u64, false);
        let (x, y) = dst.split_at_mut(na);
        // SAFETY: as for write_items; the consumer owns these published slots.
        unsafe {
            read_span(&self.region, a, x, self.slots.wide);
            if nb > 0 {
                read_span(&self.region, b, &mut y[..nb], self.slots.wide);
            }
        }
    }

    /// `data_futex`: bumped after a push when consumers sleep.
    pub fn data_futex(&self) -> A32<'_> {
        self.hdr32(qhdr::DATA_FUTEX)
    }
    /// `data_waiters`: consumers asleep or about to sleep.
    pub fn data_waiters(&self) -> A32<'_> {
        self.hdr32(qhdr::DATA_WAITERS)
    }
    /// `space_futex`: bumped after a pop when producers sleep.
    pub fn space_futex(&self) -> A32<'_> {
        self.hdr32(qhdr::SPACE_FUTEX)
    }
    /// `space_waiters`: producers asleep or about to sleep.
    pub fn space_waiters(&self) -> A32<'_> {
        self.hdr32(qhdr::SPACE_WAITERS)
    }

    /// `data_futex` and `data_waiters`: consumers sleep on these (spec §11 handshake).
    #[inline(always)]
    pub fn data_pair(&self) -> FutexPair<'_> {
        FutexPair {
            word: self.data_futex(),
            waiters: self.data_waiters(),
        }
    }

    /// `space_futex` and `space_waiters`: producers of a full queue sleep on these.
    #[inline(always)]
    pub fn space_pair(&self) -> FutexPair<'_> {
        FutexPair {
            word: self.space_futex(),
            waiters: self.space_waiters(),
        }
    }

    /// Call after a push if consumers may sleep: when it returns `true`, `data_futex` has
    /// been bumped and the caller wakes the sleepers (FUTEX_WAKE on the std side). A sleeper
    /// increments `data_waiters` (SeqCst), re-checks the queue, then waits on the value of
    /// `data_futex` it read before incrementing.
    #[inline]
    pub fn notify_data(&self) -> bool {
        self.data_pair().notify()
    }

    /// Call after a pop if producers may sleep on a full queue; as [`QueueView::notify_data`].
    #[inline]
    pub fn notify_space(&self) -> bool {
        self.space_pair().notify()
    }

    /// [`QueueView::notify_data`] without the hardware fence: a compiler fence and one
    /// relaxed load of `data_waiters`, which stays in this core's cache while nobody sleeps.
    ///
    /// Only correct when the calling process is registered for
    /// `membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)` and every sleeper issues that
    /// membarrier between its SeqCst increment of `data_waiters` and its re-check of the
    /// queue (the broadcast ring's scheme, `RingView::bump_futex_if_waiting`): the barrier
    /// runs a full fence on this thread, so either the sleeper's re-check sees our push or
    /// our load sees its increment. Otherwise use the fenced [`QueueView::notify_data`].
    #[inline]
    pub fn notify_data_unfenced(&self) -> bool {
        self.data_pair().notify_unfenced()
    }

    /// [`QueueView::notify_space`] without the hardware fence; the same contract as
    /// [`QueueView::notify_data_unfenced`].
    #[inline]
    pub fn notify_space_unfenced(&self) -> bool {
        self.space_pair().notify_unfenced()
    }
}

/// Bytes per step of [`write_span`] and [`read_span`]: 16 words, so a step's loop
/// counting (two additions, a compare and a branch) is spread over 32 loads and stores.
const SPAN_STEP: usize = 128;

/// Bytes per step of [`copy_wide`]: four 32-byte registers loaded, then stored.
#[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
const WIDE_STEP: usize = 128;

/// Copies `len` bytes, a multiple of [`WIDE_STEP`], from `src` to `dst` with 32-byte AVX
/// moves, four loads and then four stores a step, and ends with `vzeroupper`, so that the
/// SSE code after it pays no transition between the two encodings (without it, the
/// `spsc_batch64/u64` bench took 2.4–2.5 ns an item against 0.9).
///
/// This is the packed SPSC queue's batch copy where [`has_wide_copy`] says the CPU can
/// (see "Wide copies" in the `spsc` module's docs). One of the two spans is in a queue's
/// region, the other in the caller's buffer. To the compiler an `asm!` block is an opaque
/// operation on the memory its pointers reach: here it stands for the relaxed word loads
/// or stores of [`Region::read_words`] and [`Region::write_words`], which it replaces under
/// their contract, so it is no more a data race than they are. Under the queue protocol
/// nothing else touches the region's span during the copy; a misbehaving process that
/// writes there anyway can make the copy read wrong bytes, as with the word copy.
///
/// # Safety
/// The CPU has AVX and the OS saves its state ([`has_wide_copy`]); `src` is valid for
/// reads and `dst` for writes of `len` bytes, and the two do not overlap; the span in a
/// region is one that [`Region::read_words`] (`src`) or [`Region::write_words`] (`dst`)
/// may access, under the same contract.
#[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
#[target_feature(enable = "avx")]
unsafe fn copy_wide(src: *const u8, dst: *mut u8, len: usize) {
    let mut k = 0;
    while k < len {
        // SAFETY: `k + WIDE_STEP <= len` (`len` is a multiple of the step), inside both
        // spans; the moves are unaligned ones, so any address will do. The block reads
        // 128 bytes at `s` and writes 128 at `d` (no `nomem`: the compiler keeps the
        // caller's memory accesses on their side of it), and uses no stack.
        unsafe {
            let (s, d) = (src.add(k), dst.add(k));
            core::arch::asm!(
                "vmovdqu {a}, [{s}]",
                "vmovdqu {b}, [{s} + 32]",
                "vmovdqu {c}, [{s} + 64]",
                "vmovdqu {e}, [{s} + 96]",
                "vmovdqu [{d}], {a}",
                "vmovdqu [{d} + 32], {b}",
                "vmovdqu [{d} + 64], {c}",
                "vmovdqu [{d} + 96], {e}",
                s = in(reg) s,
                d = in(reg) d,
                a = out(ymm_reg) _,
                b = out(ymm_reg) _,
                c = out(ymm_reg) _,
                e = out(ymm_reg) _,
                options(nostack, preserves_flags)
            );
        }
        k += WIDE_STEP;
    }
    // SAFETY: clears the upper halves of the vector registers; `clobber_abi("C")` tells the
    // compiler that every call-clobbered register (all the vector ones) may change, so no
    // value it keeps in one is lost, even where this function is inlined into a caller
    // built with AVX.
    unsafe {
        core::arch::asm!(
            "vzeroupper",
            clobber_abi("C"),
            options(nomem, nostack, preserves_flags)
        )
    };
}

/// How many leading bytes of a `len`-byte span go through [`copy_wide`]: its whole
/// [`WIDE_STEP`]s with `wide`, none without, nor where there is no wide copy (other
/// targets, loom, Miri).
#[inline(always)]
fn wide_len(len: usize, wide: bool) -> usize {
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    if wide {
        return len / WIDE_STEP * WIDE_STEP;
    }
    let _ = (len, wide);
    0
}

/// [`Region::write_words`] over a span of several items: with `wide` (a packed queue on a
/// CPU with [`has_wide_copy`]) the whole [`WIDE_STEP`]s through [`copy_wide`], then
/// [`SPAN_STEP`] bytes per step with the step's stores unrolled, then the rest word by word.
///
/// # Safety
/// As for [`Region::write_words`]; `wide` only where [`has_wide_copy`] is true.
#[inline(always)]
pub(super) unsafe fn write_span(region: &Region, off: usize, src: &[u8], wide: bool) {
    // A copy of the region's base and length in registers: the relaxed stores could, for
    // all the compiler knows, change the handle they would otherwise be read from, so it
    // would load the base again after every step.
    #[cfg(not(loom))]
    let region = &{ *region };
    let n = wide_len(src.len(), wide);
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    if n > 0 {
        // SAFETY: the caller's contract: `wide` on a CPU with AVX, and the region span
        // `[off, off + n)` inside the caller's span, which `write_words` may write (so
        // `off` is in bounds); `src` is the caller's own buffer, not in the region.
        unsafe { copy_wide(src.as_ptr(), region.as_ptr().add(off), n) };
    }
    let (off, src) = (off + n, &src[n..]);
    let mut steps = src.chunks_exact(SPAN_STEP);
    let mut o = off;
    for step in &mut steps {
        // SAFETY: the caller's span, a step at a time from its 8-aligned start.
        unsafe { region.write_words(o, step) };
        o += SPAN_STEP;
    }
    let rest = steps.remainder();
    if !rest.is_empty() {
        // SAFETY: the end of the caller's span.
        unsafe { region.write_words(o, rest) };
    }
}

/// [`Region::read_words`] over a span of several items, as [`write_span`].
///
/// # Safety
/// As for [`Region::read_words`]; `wide` only where [`has_wide_copy`] is true.
#[inline(always)]
pub(super) unsafe fn read_span(region: &Region, off: usize, dst: &mut [u8], wide: bool) {
    #[cfg(not(loom))]
    let region = &{ *region };
    let n = wide_len(dst.len(), wide);
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    if n > 0 {
        // SAFETY: as in write_span, the region span read as `read_words` may read it.
        unsafe { copy_wide(region.as_ptr().add(off), dst.as_mut_ptr(), n) };
    }
    let (off, dst) = (off + n, &mut dst[n..]);
    let mut steps = dst.chunks_exact_mut(SPAN_STEP);
    let mut o = off;
    for step in &mut steps {
        // SAFETY: as in write_span.
        unsafe { region.read_words(o, step) };
        o += SPAN_STEP;
    }
    let rest = steps.into_remainder();
    if !rest.is_empty() {
        // SAFETY: as in write_span.
        unsafe { region.read_words(o, rest) };
    }
}

/// The four 32-bit waiting words: always accessed as 32-bit atomics, so no byte of the
/// header is ever accessed at two sizes. Every other header byte is accessed as part of a
/// 64-bit word.
const WAIT_WORDS: [usize; 4] = [
    qhdr::DATA_FUTEX,
    qhdr::DATA_WAITERS,
    qhdr::SPACE_FUTEX,
    qhdr::SPACE_WAITERS,
];

/// Writes header bytes `[8, 128)`: 64-bit words, and the waiting words at their own size.
///
/// # Safety
/// The region must hold at least 128 bytes, and the caller owns it (init).
unsafe fn store_header(region: &Region, h: &QueueHeader) {
    let b = h.as_bytes();
    // SAFETY: [8, 64) and [80, 128) are in bounds and 8-aligned (caller's contract).
    unsafe {
        region.write_words(8, &b[8..qhdr::DATA_FUTEX]);
        region.write_words(qhdr::SPACE_WAITERS + 4, &b[qhdr::SPACE_WAITERS + 4..]);
    }
    for off in WAIT_WORDS {
        let v = u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]]);
        // SAFETY: 4-aligned and below 128. Relaxed: published by the magic's release store.
        unsafe { region.a32(off) }.store(v, Ordering::Relaxed);
    }
}

/// A relaxed snapshot of the header, each byte read at the size it is always accessed at.
///
/// # Safety
/// The region must hold at least 128 bytes.
unsafe fn load_header(region: &Region) -> QueueHeader {
    let mut b = [0u8; qhdr::SIZE];
    // SAFETY: as for store_header.
    unsafe {
        region.read_words(0, &mut b[..qhdr::DATA_FUTEX]);
        region.read_words(qhdr::SPACE_WAITERS + 4, &mut b[qhdr::SPACE_WAITERS + 4..]);
    }
    for off in WAIT_WORDS {
        // SAFETY: as in store_header. Relaxed: a diagnostic snapshot of a counter.
        let v = unsafe { region.a32(off) }.load(Ordering::Relaxed);
        b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    }
    QueueHeader::read_from_bytes(&b).unwrap_or_else(|_| QueueHeader::new_zeroed())
}

impl QueueGeometry {
    /// The geometry the header `h` describes, checked against a file of `len` bytes by the
    /// rules of [`QueueView::attach`] (magic, version, kind, flags, capacity, stride, slots
    /// offset, length; not the MPMC cursors, which live past the header). A creator uses it
    /// to tell a queue whose creation never finished (header written, the magic, stored
    /// last, still 0: put the kind's magic in `h` first) from somebody's data.
    pub fn from_header(h: &QueueHeader, len: u64) -> Result<QueueGeometry, QueueAttachError> {
        validate(h, len)
    }
}

/// Checks a header snapshot against a region of `len` bytes.
fn validate(h: &QueueHeader, len: u64) -> Result<QueueGeometry, QueueAttachError> {
    let kind =
        QueueKind::from_magic(h.magic).ok_or(QueueAttachError::BadMagic { found: h.magic })?;
    if h.version != QUEUE_VERSION {
        return Err(QueueAttachError::BadVersion { found: h.version });
    }
    if h.kind != kind.code() {
        return Err(QueueAttachError::KindMismatch { kind: h.kind });
    }
    let fixed = h.flags == FLAG_FIXED;
    if h.flags & !FLAG_FIXED != 0 || (fixed && kind != QueueKind::Spsc) {
        return Err(QueueAttachError::BadFlags { flags: h.flags });
    }
    if !h.capacity.is_power_of_two()
        || h.mask != h.capacity - 1
        || (kind == QueueKind::Mpmc && h.capacity < 2)
    {
        return Err(QueueAttachError::BadCapacity {
            capacity: h.capacity,
            mask: h.mask,
        });
    }
    let word = if fixed { 0 } else { 8 };
    if h.item_size == 0
        || !h.slot_stride.is_multiple_of(8)
        || u64::from(h.slot_stride) < word + u64::from(h.item_size)
    {
        return Err(QueueAttachError::BadStride {
            stride: h.slot_stride,
            item_size: h.item_size,
        });
    }
    if h.slots_offset < qhdr::MIN_SLOTS_OFFSET as u64 || !h.slots_offset.is_multiple_of(64) {
        return Err(QueueAttachError::BadSlotsOffset {
            offset: h.slots_offset,
        });
    }
    let geo = QueueGeometry {
        kind,
        capacity: h.capacity,
        slot_stride: h.slot_stride,
        item_size: h.item_size,
        slots_offset: h.slots_offset,
        schema_sig: h.schema_sig,
        fixed,
    };
    match geo.total_len() {
        Some(end) if end <= len => Ok(geo),
        end => Err(QueueAttachError::SlotsPastEnd { end, len }),
    }
}
