//! Atomics shim: portable-atomic normally, loom under `--cfg loom`.
//!
//! Ring memory is caller-supplied (a mapped file, a static buffer, a DMA region), so the
//! protocols never hold `AtomicU64` values of their own: they address words of a [`Region`]
//! through [`A64`] and [`A32`] handles. Normally a handle is a reference made with
//! `AtomicU64::from_ptr`; under loom the region is a table of loom atomics: one 64-bit atomic
//! per 8-byte word, and two 32-bit ones for a word whose halves are 32-bit fields.
//!
//! # Every access to a word is a dependency under loom
//!
//! loom 0.7.3's partial-order reduction remembers only the *last* access to each atomic: when
//! thread A loads a word, then thread B loads it and stores it, B's store is compared with
//! B's own load, not with A's, and the schedule in which B's store comes before A's load is
//! never run (tokio-rs/loom#392; a writer that loads a word before storing it, as a seqlock
//! writer or a claim loop does, is exactly this shape). So under loom each region word has a
//! second, dependency-only atomic, and every access to the word first does a relaxed *store*
//! to it: loom counts a store as dependent on the last access of any kind, so any two
//! accesses to the word from different threads are dependent and both orders are explored.
//! `core/tests/loom_blackboard.rs` has a model that explores one schedule without it.
//!
//! The companion is written and never read, so it cannot synchronise anything: C11
//! synchronisation needs a load that reads a store. It must not be an RMW: an RMW reads the
//! latest value and continues every release sequence on the companion, so a release fence
//! before one access and an acquire fence after a later access to the same word, in another
//! thread, would synchronise, ruling out outcomes C11 allows (`core/tests/loom_sync.rs`).
//! The word itself keeps loom's full weak-memory semantics (a load may read an older store).
//!
//! # The two 32-bit fields of one word are two atomics under loom
//!
//! As in C11. Emulated on one loom atomic for the word (a CAS loop per access, as before),
//! they were one location: every access to either field read the word's last store, so an
//! acquire load of one field synchronised with a release store to the other, and models of
//! fields sharing a word (the registry's `pid` and `active`, a queue's futex words and
//! waiter counts) ran against a stronger memory model than C11: weakening `live_reader`'s
//! acquire of `active` to relaxed passed every model, its acquire of `pid` next pairing with
//! `active`'s release store. A word is accessed at one width only (a model that mixes them
//! panics: its 64-bit value and its halves are separate atomics here).
//!
//! [`Region`]: crate::Region

#[cfg(not(loom))]
pub(crate) use portable_atomic::{AtomicU32, AtomicU64};
#[cfg(not(loom))]
pub use portable_atomic::{Ordering, fence};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::AtomicU64;

/// A region word under loom: its value as one 64-bit atomic or as two 32-bit ones, and its
/// dependency-only companion (module docs).
#[cfg(loom)]
pub(crate) struct Word {
    value: AtomicU64,
    halves: [loom::sync::atomic::AtomicU32; 2],
    dep: AtomicU64,
    /// The widths the word was accessed at (1: 64 bits, 2: 32 bits). Not a loom atomic: a
    /// check of the model, not part of it.
    widths: std::sync::atomic::AtomicU8,
}

#[cfg(loom)]
impl Word {
    pub(crate) fn new() -> Word {
        Word {
            value: AtomicU64::new(0),
            halves: [
                loom::sync::atomic::AtomicU32::new(0),
                loom::sync::atomic::AtomicU32::new(0),
            ],
            dep: AtomicU64::new(0),
            widths: std::sync::atomic::AtomicU8::new(0),
        }
    }

    /// Records an access at `width` (1 or 2), refusing a word accessed at both: its 64-bit
    /// value and its halves are separate atomics here.
    fn width(&self, width: u8) {
        let seen = self
            .widths
            .fetch_or(width, std::sync::atomic::Ordering::Relaxed)
            | width;
        assert!(
            seen != 3,
            "a region word accessed as 64 and as 32 bits under loom"
        );
    }

    /// The value, after marking this access as dependent on every other (module docs).
    fn touch(&self) -> &AtomicU64 {
        self.width(1);
        // A relaxed store that nothing loads: a dependency for loom's scheduler and nothing
        // else (an RMW here would extend release sequences, module docs).
        self.dep.store(0, Ordering::Relaxed);
        &self.value
    }

    /// The 32-bit field at bit `shift` (0 or 32), marked as `touch` marks the word.
    fn half(&self, shift: u32) -> &loom::sync::atomic::AtomicU32 {
        self.width(2);
        self.dep.store(0, Ordering::Relaxed);
        &self.halves[(shift / 32) as usize]
    }
}

/// A region word: an `AtomicU64` (under loom, with its dependency companion).
#[cfg(not(loom))]
pub(crate) type Word = AtomicU64;
#[cfg(loom)]
pub use loom::sync::atomic::{Ordering, fence};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicUsize};
/// Pointer-sized atomics for the crate's own tables (not region words): core's under
/// portable-atomic, which uses the native instructions wherever std has these types.
#[cfg(not(loom))]
pub(crate) use portable_atomic::{AtomicPtr, AtomicUsize};

/// An atomic `A` of the crate's own that, under loom, has a dependency-only companion like a
/// region [`Word`] (module docs): every access goes through [`Dep::get`], so that loom explores
/// both orders of any two accesses to it from different threads.
pub(crate) struct Dep<A> {
    value: A,
    #[cfg(loom)]
    dep: AtomicU64,
}

impl<A> Dep<A> {
    /// `value`, with its companion under loom.
    #[cfg(not(loom))]
    pub(crate) const fn new(value: A) -> Self {
        Dep { value }
    }

    /// `value`, with its companion under loom.
    #[cfg(loom)]
    pub(crate) fn new(value: A) -> Self {
        Dep {
            value,
            dep: AtomicU64::new(0),
        }
    }

    /// The atomic, after marking this access as dependent on every other under loom.
    #[inline(always)]
    pub(crate) fn get(&self) -> &A {
        // A relaxed store that nothing loads: a dependency for loom's scheduler and nothing
        // else (module docs).
        #[cfg(loom)]
        self.dep.store(0, Ordering::Relaxed);
        &self.value
    }
}

/// A 64-bit atomic word inside a region.
#[derive(Clone, Copy)]
pub struct A64<'a>(pub(crate) &'a Word);

impl<'a> A64<'a> {
    #[inline(always)]
    fn cell(self) -> &'a AtomicU64 {
        #[cfg(not(loom))]
        {
            self.0
        }
        #[cfg(loom)]
        {
            self.0.touch()
        }
    }

    /// Atomic load.
    #[inline(always)]
    pub fn load(self, o: Ordering) -> u64 {
        self.cell().load(o)
    }
    /// Atomic store.
    #[inline(always)]
    pub fn store(self, v: u64, o: Ordering) {
        self.cell().store(v, o)
    }
    /// Atomic fetch-add (wrapping).
    #[inline(always)]
    pub fn fetch_add(self, v: u64, o: Ordering) -> u64 {
        self.cell().fetch_add(v, o)
    }
    /// Atomic fetch-max.
    #[inline(always)]
    pub fn fetch_max(self, v: u64, o: Ordering) -> u64 {
        self.cell().fetch_max(v, o)
    }
    /// Strong compare-exchange.
    #[inline(always)]
    pub fn compare_exchange(
        self,
        cur: u64,
        new: u64,
        ok: Ordering,
        fail: Ordering,
    ) -> Result<u64, u64> {
        self.cell().compare_exchange(cur, new, ok, fail)
    }
    /// Weak compare-exchange (may fail spuriously).
    #[inline(always)]
    pub fn compare_exchange_weak(
        self,
        cur: u64,
        new: u64,
        ok: Ordering,
        fail: Ordering,
    ) -> Result<u64, u64> {
        self.cell().compare_exchange_weak(cur, new, ok, fail)
    }
}

/// A 32-bit atomic field inside a region.
#[derive(Clone, Copy)]
pub struct A32<'a> {
    #[cfg(not(loom))]
    pub(crate) cell: &'a AtomicU32,
    #[cfg(loom)]
    pub(crate) word: &'a Word,
    #[cfg(loom)]
    pub(crate) shift: u32,
}

#[cfg(not(loom))]
impl A32<'_> {
    /// Atomic load.
    #[inline(always)]
    pub fn load(self, o: Ordering) -> u32 {
        self.cell.load(o)
    }
    /// Atomic store.
    #[inline(always)]
    pub fn store(self, v: u32, o: Ordering) {
        self.cell.store(v, o)
    }
    /// Atomic fetch-add (wrapping).
    #[inline(always)]
    pub fn fetch_add(self, v: u32, o: Ordering) -> u32 {
        self.cell.fetch_add(v, o)
    }
    /// Atomic fetch-sub (wrapping).
    #[inline(always)]
    pub fn fetch_sub(self, v: u32, o: Ordering) -> u32 {
        self.cell.fetch_sub(v, o)
    }
    /// Atomic swap.
    #[inline(always)]
    pub fn swap(self, v: u32, o: Ordering) -> u32 {
        self.cell.swap(v, o)
    }
    /// Strong compare-exchange.
    #[inline(always)]
    pub fn compare_exchange(
        self,
        cur: u32,
        new: u32,
        ok: Ordering,
        fail: Ordering,
    ) -> Result<u32, u32> {
        self.cell.compare_exchange(cur, new, ok, fail)
    }
    /// The address of the field, for a futex system call on the std side.
    #[inline(always)]
    pub fn as_ptr(self) -> *mut u32 {
        self.cell.as_ptr()
    }
}

#[cfg(loom)]
impl<'a> A32<'a> {
    #[inline(always)]
    fn cell(self) -> &'a loom::sync::atomic::AtomicU32 {
        self.word.half(self.shift)
    }
    /// Atomic load.
    pub fn load(self, o: Ordering) -> u32 {
        self.cell().load(o)
    }
    /// Atomic store.
    pub fn store(self, v: u32, o: Ordering) {
        self.cell().store(v, o)
    }
    /// Atomic fetch-add (wrapping).
    pub fn fetch_add(self, v: u32, o: Ordering) -> u32 {
        self.cell().fetch_add(v, o)
    }
    /// Atomic fetch-sub (wrapping).
    pub fn fetch_sub(self, v: u32, o: Ordering) -> u32 {
        self.cell().fetch_sub(v, o)
    }
    /// Atomic swap.
    pub fn swap(self, v: u32, o: Ordering) -> u32 {
        self.cell().swap(v, o)
    }
    /// Strong compare-exchange.
    pub fn compare_exchange(
        self,
        cur: u32,
        new: u32,
        ok: Ordering,
        fail: Ordering,
    ) -> Result<u32, u32> {
        self.cell().compare_exchange(cur, new, ok, fail)
    }
}

/// A spin-loop hint (a loom yield under loom, so models with retry loops terminate).
#[inline(always)]
pub fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}
