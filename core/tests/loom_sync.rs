//! loom models of the atomics shim itself (`core/src/sync.rs`): region words must be no
//! stronger than C11. Under loom every access to a region word also touches a companion
//! atomic so that loom explores both orders of any two accesses; that companion must not
//! create synchronisation of its own, nor may the two 32-bit fields of one word.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p ringwire-core
//! --release --test loom_sync` (preemption bound 3 unless LOOM_MAX_PREEMPTIONS is set).
#![cfg(loom)]

use loom::sync::atomic::{AtomicU64, Ordering::*, fence};
use loom::thread;
use ringwire_core::Region;

fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b
}

/// Three locations accessed relaxed, with fences:
///
/// W: `x = 1; fence(Release); y = 1`.  T: `if y == 1 { z = 1 }`.
/// R: `rz = z; ry = y; fence(Acquire); rx = x`.
///
/// C11 allows `rz == 1, ry == 0, rx == 0`: R's reads of `y` and `z` read no store that
/// follows W's release fence, so R's acquire fence synchronises with nothing. This runs
/// the pattern on `load`/`store` accessors and panics when that outcome shows up.
fn weak_fence_outcome<L>(mem: L, load: fn(&L, usize) -> u64, store: fn(&L, usize, u64))
where
    L: Clone + Send + 'static,
{
    let (x, y, z) = (0, 1, 2);
    let w = {
        let m = mem.clone();
        thread::spawn(move || {
            store(&m, x, 1);
            fence(Release);
            store(&m, y, 1);
        })
    };
    let t = {
        let m = mem.clone();
        thread::spawn(move || {
            if load(&m, y) == 1 {
                store(&m, z, 1);
            }
        })
    };
    let rz = load(&mem, z);
    let ry = load(&mem, y);
    fence(Acquire);
    let rx = load(&mem, x);
    if rz == 1 && ry == 0 && rx == 0 {
        panic!("weak outcome reachable");
    }
    w.join().unwrap();
    t.join().unwrap();
}

/// Control: loom finds the C11-allowed outcome with its own atomics.
#[test]
#[should_panic(expected = "weak outcome reachable")]
fn plain_loom_atomics_reach_the_weak_fence_outcome() {
    builder().check(|| {
        let a = loom::sync::Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
        weak_fence_outcome(
            a,
            |a, i| a[i].load(Relaxed),
            |a, i, v| a[i].store(v, Relaxed),
        );
    });
}

/// Region words must reach it too: a companion RMW per access (the shim before this model)
/// made R's acquire fence synchronise with W's release fence through the companion of `y`,
/// so loom never ran the outcome and every fence-based model was checked against a
/// stronger memory model than C11.
#[test]
#[should_panic(expected = "weak outcome reachable")]
fn region_words_reach_the_weak_fence_outcome() {
    builder().check(|| {
        let r = Region::loom_new(24);
        weak_fence_outcome(
            r,
            // SAFETY: offsets 0, 8 and 16 are 8-aligned words inside the 24-byte region.
            |r, i| unsafe { r.a64(i * 8) }.load(Relaxed),
            // SAFETY: as above.
            |r, i, v| unsafe { r.a64(i * 8) }.store(v, Relaxed),
        );
    });
}

/// The two 32-bit fields of one region word are two atomics, as in C11.
///
/// W: `c = 5; b.store(1, Release)`. R: `rb = b (relaxed); a.load(Acquire); rc = c`, with `a`
/// and `b` the two halves of one word (a registry slot's `pid` and `active`). R's acquire of
/// `a` reads no store of W, so `rb == 1, rc == 0` is allowed; emulated on one atomic for the
/// word, the acquire of `a` read `b`'s release store and loom never ran that outcome.
#[test]
#[should_panic(expected = "weak outcome reachable")]
fn region_half_words_reach_the_weak_message_passing_outcome() {
    use ringwire_core::sync::Ordering as O;
    builder().check(|| {
        let r = Region::loom_new(16);
        let w = {
            let r = r.clone();
            thread::spawn(move || {
                // SAFETY: word 8 and the field at 4 lie inside the 16-byte region, each
                // accessed at one width only.
                unsafe { r.a64(8) }.store(5, O::Relaxed);
                // SAFETY: as above.
                unsafe { r.a32(4) }.store(1, O::Release);
            })
        };
        // SAFETY: as above; 0 is the other field of word 0.
        let rb = unsafe { r.a32(4) }.load(O::Relaxed);
        // SAFETY: as above.
        unsafe { r.a32(0) }.load(O::Acquire);
        // SAFETY: as above.
        let rc = unsafe { r.a64(8) }.load(O::Relaxed);
        if rb == 1 && rc == 0 {
            panic!("weak outcome reachable");
        }
        w.join().unwrap();
    });
}
