//! [`CycleStamp`]: a cycle-counter timestamp with the CPU it was taken on, under ringfire's
//! name and fields, for stamping records at the producer and measuring push-to-read at the
//! reader. On x86-64 with `rdtscp` a stamp makes no system call; everywhere else the CPU
//! comes from `getcpu(2)`, one system call per stamp (ringfire leaves it 0 on AArch64).
//!
//! On x86-64 it is the TSC, read with `rdtscp`, which also returns the `TSC_AUX` value Linux
//! sets to `node << 12 | cpu`; a CPU without `rdtscp` (checked once with `cpuid`) gets
//! `rdtsc` and `getcpu(2)`. On AArch64 it is the generic timer's virtual count
//! `cntvct_el0` (after an `isb`, as ringfire reads it), which runs at the frequency in
//! `cntfrq_el0` that [`CycleStamp::counter_frequency_hz`] reports, with the CPU from
//! `getcpu(2)`. Elsewhere it counts nanoseconds of `CLOCK_MONOTONIC`, which every process of
//! the machine shares, with the CPU from `getcpu(2)`, so the frequency is 1 GHz.
//!
//! On x86-64 and AArch64 a stamp ringfire 0.5.2 took reads the same counter as ours, so
//! the two crates' stamps compare (ringfire leaves `core_id` and `numa_node` 0 on AArch64).
//! On other targets ringfire counts nanoseconds from each process's first stamp, which no
//! other process shares, so its stamps there do not compare with ours.

#[cfg(target_arch = "x86_64")]
use std::sync::atomic::{AtomicU8, Ordering};

use zerocopy::{FromBytes, Immutable, KnownLayout};

/// A counter reading and the CPU and NUMA node that took it.
///
/// ringfire's layout (`#[repr(C)]`: `tsc` at 0, `core_id` at 8, `numa_node` at 10; 16
/// bytes, the last 4 padding), so records carrying one that ringfire wrote read the same
/// here: it is [`FromBytes`], and a record type deriving `FromBytes` may hold it. The
/// padding keeps it from being `IntoBytes`: a record for ringwire's producer to write holds
/// the three fields and a `u32` for the padding instead (the same bytes for ringfire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, FromBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct CycleStamp {
    /// The counter: TSC cycles on x86-64, `cntvct_el0` ticks on AArch64, nanoseconds
    /// elsewhere.
    pub tsc: u64,
    /// The CPU the stamp was taken on.
    pub core_id: u16,
    /// That CPU's NUMA node.
    pub numa_node: u16,
}

/// `rdtscp` support: 0 not checked yet, 1 present, 2 absent.
#[cfg(target_arch = "x86_64")]
static RDTSCP: AtomicU8 = AtomicU8::new(0);

#[cfg(target_arch = "x86_64")]
fn has_rdtscp() -> bool {
    // Relaxed: the value is a pure function of the CPU; a race only repeats the check.
    match RDTSCP.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            use std::arch::x86_64::__cpuid;
            // RDTSCP is CPUID.80000001H:EDX bit 27; leaf 80000000H gives the highest
            // extended leaf.
            // `__cpuid` is an unsafe fn in Rust 1.88 (the declared MSRV) and a safe one in
            // later compilers (1.95): the block is for the first, the allow for the second.
            #[allow(unused_unsafe)]
            // SAFETY: CPUID exists on every x86-64 CPU and only reads identification leaves.
            let yes = unsafe {
                let max = __cpuid(0x8000_0000).eax;
                max >= 0x8000_0001 && __cpuid(0x8000_0001).edx & (1 << 27) != 0
            };
            RDTSCP.store(if yes { 1 } else { 2 }, Ordering::Relaxed);
            yes
        }
    }
}

/// The CPU and NUMA node of the calling thread, from `getcpu(2)`; (0, 0) if it fails.
fn getcpu() -> (u16, u16) {
    let (mut cpu, mut node) = (0u32, 0u32);
    // SAFETY: getcpu writes one unsigned int through each of the two valid pointers and
    // ignores the third argument (the unused cache), which may be null.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getcpu,
            &mut cpu as *mut u32,
            &mut node as *mut u32,
            std::ptr::null_mut::<libc::c_void>(),
        )
    };
    if r != 0 {
        return (0, 0);
    }
    (cpu as u16, node as u16)
}

/// `CLOCK_MONOTONIC` in nanoseconds, the counter where there is neither a TSC nor
/// `cntvct_el0`: one clock for every process of the machine (a count from each process's
/// first stamp would not compare a producer's stamp with the reader's), read through the
/// vDSO, not a system call.
#[cfg(any(test, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
fn clock_ns() -> u64 {
    crate::sys::clock_ns(libc::CLOCK_MONOTONIC)
}

/// The generic timer's virtual count, `cntvct_el0`, which Linux lets EL0 read; ringfire's
/// AArch64 counter.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn cntvct() -> u64 {
    let ticks: u64;
    // SAFETY: reads a system register EL0 may read on Linux and writes only `ticks`. The
    // `isb` (ringfire has it) keeps the read from running ahead of the instructions before
    // it; without `nomem` the compiler keeps it in order with the memory accesses around it.
    unsafe {
        core::arch::asm!(
            "isb",
            "mrs {}, cntvct_el0",
            out(reg) ticks,
            options(nostack, preserves_flags)
        )
    };
    ticks
}

impl CycleStamp {
    /// The counter now, and where this thread runs.
    #[inline(always)]
    pub fn now() -> CycleStamp {
        #[cfg(target_arch = "x86_64")]
        if has_rdtscp() {
            let mut aux = 0u32;
            // SAFETY: the CPU has rdtscp (checked above); it writes one u32 through `aux`.
            let tsc = unsafe { std::arch::x86_64::__rdtscp(&mut aux) };
            // Linux keeps TSC_AUX = node << 12 | cpu (12 bits of CPU).
            return CycleStamp {
                tsc,
                core_id: (aux & 0xfff) as u16,
                numa_node: ((aux >> 12) & 0xff) as u16,
            };
        }
        CycleStamp::without_rdtscp()
    }

    /// [`CycleStamp::now`] for a CPU without `rdtscp` (and every target but x86-64): the
    /// counter, then `getcpu(2)`.
    fn without_rdtscp() -> CycleStamp {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: rdtsc exists on every x86-64 CPU and has no operands.
        let tsc = unsafe { std::arch::x86_64::_rdtsc() };
        #[cfg(target_arch = "aarch64")]
        let tsc = cntvct();
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let tsc = clock_ns();
        let (core_id, numa_node) = getcpu();
        CycleStamp {
            tsc,
            core_id,
            numa_node,
        }
    }

    /// The counter's frequency in Hz when it is known: `None` on x86-64 (the TSC rate is not
    /// architecturally reported), `cntfrq_el0` on AArch64 (`None` if it reads 0, which
    /// firmware that never set it leaves, where ringfire says `Some(0)`), 1 GHz elsewhere
    /// (the counter is nanoseconds).
    pub fn counter_frequency_hz() -> Option<u64> {
        #[cfg(target_arch = "x86_64")]
        {
            None
        }
        #[cfg(target_arch = "aarch64")]
        {
            let hz: u64;
            // SAFETY: reads a system register EL0 may read on Linux and writes only `hz`.
            unsafe {
                core::arch::asm!(
                    "mrs {}, cntfrq_el0",
                    out(reg) hz,
                    options(nomem, nostack, preserves_flags)
                )
            };
            // 0 is no rate: a caller would divide by it.
            (hz != 0).then_some(hz)
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            Some(1_000_000_000)
        }
    }

    /// Counter ticks since this stamp (0 if the counter reads earlier, as it can across
    /// CPUs whose TSCs are not synchronised).
    #[inline(always)]
    pub fn elapsed_cycles(&self) -> u64 {
        CycleStamp::now().diff_cycles(self)
    }

    /// Counter ticks from `earlier` to this stamp, 0 if `earlier` is later.
    #[inline(always)]
    pub fn diff_cycles(&self, earlier: &CycleStamp) -> u64 {
        self.tsc.saturating_sub(earlier.tsc)
    }

    /// `cycles` in nanoseconds for a counter of `freq_ghz` GHz.
    #[inline]
    pub fn cycles_to_ns(cycles: u64, freq_ghz: f64) -> f64 {
        cycles as f64 / freq_ghz
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::floor::pin_to;

    /// The CPUs in this process's affinity mask (its cpuset), in order.
    fn allowed_cpus() -> Vec<usize> {
        // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size, and
        // CPU_ISSET reads inside it (i < CPU_SETSIZE).
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            let rc = libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
            assert_eq!(
                rc,
                0,
                "sched_getaffinity: {}",
                std::io::Error::last_os_error()
            );
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&i| libc::CPU_ISSET(i, &set))
                .collect()
        }
    }

    #[test]
    fn stamps_name_the_cpu_they_ran_on_and_do_not_go_back() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty(), "an empty affinity mask");
        let mut pinned = 0;
        for &cpu in cpus.iter().take(4) {
            pinned += std::thread::scope(|s| {
                s.spawn(|| {
                    if !pin_to(cpu) {
                        return 0; // the cpuset changed under us
                    }
                    // Both ways of taking a stamp, in turn: they read one counter.
                    let a = CycleStamp::now();
                    // Later instructions may run before rdtscp reads the counter (Intel SDM,
                    // RDTSCP), rdtsc among them: lfence keeps the two reads in order.
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: lfence is SSE2, which every x86-64 CPU has; it has no operands.
                    unsafe {
                        std::arch::x86_64::_mm_lfence()
                    };
                    let b = CycleStamp::without_rdtscp();
                    let c = CycleStamp::now();
                    for s in [a, b, c] {
                        assert_eq!(usize::from(s.core_id), cpu, "{s:?}");
                        assert_eq!(s.numa_node, getcpu().1, "{s:?}");
                    }
                    assert!(a.tsc <= b.tsc && b.tsc <= c.tsc, "{a:?} {b:?} {c:?}");
                    assert_eq!(c.diff_cycles(&a), c.tsc - a.tsc);
                    assert_eq!(a.diff_cycles(&c), 0);
                    1
                })
                .join()
                .unwrap()
            });
        }
        // Stamps were checked on at least one CPU, not skipped everywhere.
        assert!(pinned >= 1, "no CPU of {cpus:?} could be pinned");
    }

    /// The counter where there is no TSC reads one clock for every process of the machine,
    /// so a stamp a producer took compares with the reader's `now`. (It counted from each
    /// process's first stamp: a reader's later stamp read as earlier than the producer's.)
    #[test]
    fn the_counter_without_a_tsc_is_the_machines_monotonic_clock() {
        for _ in 0..1000 {
            let before = crate::sys::clock_ns(libc::CLOCK_MONOTONIC);
            let ns = clock_ns();
            let after = crate::sys::clock_ns(libc::CLOCK_MONOTONIC);
            assert!(before <= ns && ns <= after, "{before} {ns} {after}");
        }
    }

    /// ringfire 0.5.2's AArch64 reads (src/tsc.rs), as written there, to hold ours against.
    #[cfg(target_arch = "aarch64")]
    mod ringfire_0_5_2 {
        pub fn now_tsc() -> u64 {
            let tsc: u64;
            // SAFETY: cntvct_el0 is readable at EL0 on Linux; the asm only writes `tsc`.
            unsafe {
                core::arch::asm!(
                    "isb",
                    "mrs {}, cntvct_el0",
                    out(reg) tsc,
                    options(nomem, nostack)
                )
            };
            tsc
        }

        pub fn counter_frequency_hz() -> u64 {
            let freq: u64;
            // SAFETY: cntfrq_el0 is readable at EL0 on Linux; the asm only writes `freq`.
            unsafe {
                core::arch::asm!("mrs {}, cntfrq_el0", out(reg) freq, options(nomem, nostack))
            };
            freq
        }
    }

    /// On AArch64 a stamp reads the counter ringfire reads, at the frequency ringfire
    /// reports, so a record one crate stamped means the same to the other. (Ours counted
    /// `CLOCK_MONOTONIC` nanoseconds and said 1 GHz.)
    #[cfg(target_arch = "aarch64")]
    #[test]
    fn on_aarch64_a_stamp_reads_ringfires_counter_at_its_frequency() {
        for _ in 0..1000 {
            let before = ringfire_0_5_2::now_tsc();
            let ours = CycleStamp::now();
            let after = ringfire_0_5_2::now_tsc();
            assert!(
                before <= ours.tsc && ours.tsc <= after,
                "ringfire {before}, ours {ours:?}, ringfire {after}"
            );
        }
        assert_eq!(
            CycleStamp::counter_frequency_hz(),
            Some(ringfire_0_5_2::counter_frequency_hz())
        );
    }

    /// `CLOCK_MONOTONIC` in nanoseconds around a counter reading: the narrowest bracket of
    /// 100 tries, `(before, counter, after)`.
    #[cfg(not(target_arch = "x86_64"))]
    fn bracketed_reading() -> (u64, u64, u64) {
        (0..100)
            .map(|_| {
                let before = crate::sys::clock_ns(libc::CLOCK_MONOTONIC);
                let counter = CycleStamp::now().tsc;
                let after = crate::sys::clock_ns(libc::CLOCK_MONOTONIC);
                (before, counter, after)
            })
            .min_by_key(|&(before, _, after)| after - before)
            .unwrap()
    }

    /// Where the frequency is reported, the counter runs at it: its ticks over an interval,
    /// at that frequency, lie within the monotonic clock's bounds on the interval (1% for
    /// NTP's slewing of the clock, and a tick at each end for rounding).
    #[cfg(not(target_arch = "x86_64"))]
    #[test]
    fn the_counter_runs_at_the_frequency_it_reports() {
        let hz = CycleStamp::counter_frequency_hz().expect("a reported frequency");
        assert!(hz > 0);
        let (b1, c1, a1) = bracketed_reading();
        // The interval's length only narrows the bounds; nothing is checked against it.
        std::thread::sleep(std::time::Duration::from_millis(100));
        let (b2, c2, a2) = bracketed_reading();
        let tick_ns = 1e9 / hz as f64;
        let counted_ns = (c2 - c1) as f64 * tick_ns;
        let (shortest, longest) = ((b2 - a1) as f64, (a2 - b1) as f64);
        assert!(
            counted_ns >= shortest * 0.99 - 2.0 * tick_ns
                && counted_ns <= longest * 1.01 + 2.0 * tick_ns,
            "{} ticks at {hz} Hz are {counted_ns} ns; the clock says {shortest}..={longest} ns",
            c2 - c1
        );
    }

    #[test]
    fn the_counter_advances_with_time() {
        let a = CycleStamp::now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        // Any counter of at least 1 MHz has ticked 2,000 times in 2 ms.
        assert!(a.elapsed_cycles() > 2_000, "{a:?}");
        assert_eq!(CycleStamp::cycles_to_ns(3_000, 3.0), 1_000.0);
    }
}
