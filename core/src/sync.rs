//! Atomics shim: portable-atomic normally, loom under `--cfg loom`.
//!
//! Ring memory is caller-supplied (a mapped file, a static buffer, a DMA region), so the
//! protocols never hold `AtomicU64` values of their own: they address words of a [`Region`]
//! through [`A64`] and [`A32`] handles. Normally a handle is a reference made with
//! `AtomicU64::from_ptr`; under loom the region is a table of loom atomics (one per 8-byte
//! word) and a 32-bit field is emulated on its containing word with a CAS loop, which loom
//! explores like any other RMW.
//!
//! [`Region`]: crate::Region

#[cfg(not(loom))]
pub(crate) use portable_atomic::{AtomicU32, AtomicU64};
#[cfg(not(loom))]
pub use portable_atomic::{Ordering, fence};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::AtomicU64;
#[cfg(loom)]
pub use loom::sync::atomic::{Ordering, fence};

/// A 64-bit atomic word inside a region.
#[derive(Clone, Copy)]
pub struct A64<'a>(pub(crate) &'a AtomicU64);

impl A64<'_> {
    /// Atomic load.
    #[inline(always)]
    pub fn load(self, o: Ordering) -> u64 {
        self.0.load(o)
    }
    /// Atomic store.
    #[inline(always)]
    pub fn store(self, v: u64, o: Ordering) {
        self.0.store(v, o)
    }
    /// Atomic fetch-add (wrapping).
    #[inline(always)]
    pub fn fetch_add(self, v: u64, o: Ordering) -> u64 {
        self.0.fetch_add(v, o)
    }
    /// Atomic fetch-max.
    #[inline(always)]
    pub fn fetch_max(self, v: u64, o: Ordering) -> u64 {
        self.0.fetch_max(v, o)
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
        self.0.compare_exchange(cur, new, ok, fail)
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
        self.0.compare_exchange_weak(cur, new, ok, fail)
    }
}

/// A 32-bit atomic field inside a region.
#[derive(Clone, Copy)]
pub struct A32<'a> {
    #[cfg(not(loom))]
    pub(crate) cell: &'a AtomicU32,
    #[cfg(loom)]
    pub(crate) word: &'a AtomicU64,
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
impl A32<'_> {
    #[inline(always)]
    fn get(self, w: u64) -> u32 {
        (w >> self.shift) as u32
    }
    fn update(self, o: Ordering, f: impl Fn(u32) -> Option<u32>) -> Result<u32, u32> {
        let mask = 0xFFFF_FFFFu64 << self.shift;
        let fail = match o {
            Ordering::AcqRel | Ordering::SeqCst => Ordering::Acquire,
            Ordering::Release => Ordering::Relaxed,
            x => x,
        };
        self.word
            .fetch_update(o, fail, |w| {
                f(self.get(w)).map(|v| (w & !mask) | (u64::from(v) << self.shift))
            })
            .map(|w| self.get(w))
            .map_err(|w| self.get(w))
    }
    /// Atomic load.
    pub fn load(self, o: Ordering) -> u32 {
        self.get(self.word.load(o))
    }
    /// Atomic store (emulated with an RMW on the containing word).
    pub fn store(self, v: u32, o: Ordering) {
        let _ = self.update(o, |_| Some(v));
    }
    /// Atomic fetch-add (wrapping).
    pub fn fetch_add(self, v: u32, o: Ordering) -> u32 {
        self.update(o, |x| Some(x.wrapping_add(v))).unwrap_or(0)
    }
    /// Atomic fetch-sub (wrapping).
    pub fn fetch_sub(self, v: u32, o: Ordering) -> u32 {
        self.update(o, |x| Some(x.wrapping_sub(v))).unwrap_or(0)
    }
    /// Strong compare-exchange.
    pub fn compare_exchange(
        self,
        cur: u32,
        new: u32,
        ok: Ordering,
        _fail: Ordering,
    ) -> Result<u32, u32> {
        self.update(ok, |x| (x == cur).then_some(new))
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
