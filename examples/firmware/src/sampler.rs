//! The ring's writer: the SysTick handler takes one sample per tick and pushes it.
//!
//! The [`Producer`] lives in a `critical_section::Mutex` because it needs `&mut` and both the
//! handler and `main` (which hands it over) can reach the static. Only the handler uses it once
//! sampling has started, so the lock never waits; readers never touch it (they read the ring).

use core::cell::RefCell;
use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::SYST;
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::exception;
use critical_section::Mutex;
use ringwire_core::broadcast::Producer;
use ringwire_core::replicate::Instant;

use crate::sample::Sample;

/// Core clock of QEMU's MPS2 boards (SysTick counts it).
const CORE_HZ: u32 = 25_000_000;
/// Sampling rate: one record per SysTick.
pub const TICK_HZ: u32 = 1_000;

/// SysTick interrupts so far; the example's only clock.
static TICKS: AtomicU32 = AtomicU32::new(0);
/// The writer, handed over by [`start`]; `None` before.
static PRODUCER: Mutex<RefCell<Option<Producer>>> = Mutex::new(RefCell::new(None));
/// The handler stops sampling after this many records (set by [`start`]).
static LIMIT: AtomicU32 = AtomicU32::new(0);

/// Hands `producer` to the handler and starts SysTick at [`TICK_HZ`]; the handler pushes
/// records 1..=`samples`, one per tick, then only counts ticks.
pub fn start(syst: &mut SYST, producer: Producer, samples: u32) {
    LIMIT.store(samples, Ordering::Relaxed);
    critical_section::with(|cs| *PRODUCER.borrow_ref_mut(cs) = Some(producer));
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(CORE_HZ / TICK_HZ - 1);
    syst.clear_current();
    syst.enable_counter();
    syst.enable_interrupt();
}

/// Stops the tick (and with it the clock): after this, waiting for a tick would hang.
pub fn stop(syst: &mut SYST) {
    syst.disable_interrupt();
    syst.disable_counter();
}

/// Ticks since [`start`].
pub fn ticks() -> u32 {
    TICKS.load(Ordering::Relaxed)
}

/// The state machines' clock: nanoseconds since start, at tick resolution.
pub fn now() -> Instant {
    Instant::from_nanos(u64::from(ticks()) * (1_000_000_000 / u64::from(TICK_HZ)))
}

/// Sleeps until the tick count moves past `seen` (WFI wakes on the SysTick interrupt; a tick
/// that lands between the load and the WFI only costs one more tick of sleep).
pub fn wait_past(seen: u32) {
    while ticks() == seen {
        cortex_m::asm::wfi();
    }
}

#[exception]
fn SysTick() {
    let tick = TICKS.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    let limit = u64::from(LIMIT.load(Ordering::Relaxed));
    critical_section::with(|cs| {
        if let Some(p) = PRODUCER.borrow_ref_mut(cs).as_mut()
            && p.next_seq() <= limit
        {
            let n = p.next_seq();
            // Refused only at sequence 2^63; the test above keeps `n` at most u32::MAX.
            let _ = p.push(&Sample::take(n, tick).to_bytes());
        }
    });
}
