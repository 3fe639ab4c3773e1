//! ringwire-core running in firmware (Cortex-M4, QEMU `mps2-an386`, semihosting).
//!
//! * `sampler`: the SysTick handler writes one 24-byte sample per millisecond into a broadcast
//!   ring that lives in a `static` buffer.
//! * `reader`: the main loop reads the ring with the core's consumer and checks every record:
//!   in order, intact, and every record it missed counted as lapped. Midway the main loop
//!   stalls for longer than three laps of the ring, so loss and its accounting are exercised.
//! * `link`: the core's sans-IO replication source turns the ring into frames on a byte
//!   pipe (a UART stand-in), and the core's mirror applies them to a second static ring.
//! * `verify`: every record the mirror writes must be an intact sample for its sequence, in
//!   order, and read back from the mirror ring as written; at the end the mirror must hold
//!   the source's retained window slot for slot.
//!
//! The run prints a summary through semihosting and exits 0 only if every check held.

#![no_std]
#![no_main]

mod link;
mod reader;
mod sample;
mod sampler;
mod verify;

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use panic_semihosting as _;
use ringwire_core::broadcast::{Consumer, NoWake, Producer, StartMode};
use ringwire_core::error::{AttachError, InitError};
use ringwire_core::replicate::RingSource;
use ringwire_core::sync::Ordering;
use ringwire_core::{Geometry, Region, RegionError, RingView};
use static_cell::ConstStaticCell;

use link::{FRAME_BUDGET, ReplError, Replicator};
use reader::{ReadError, Reader};
use verify::Mismatch;

/// Ring slots (a power of two).
const CAPACITY: u64 = 64;
/// Slot stride: the sequence word plus one sample.
const STRIDE: usize = 8 + sample::LEN;
/// The ring's shape, checked at compile time: a bad capacity or stride fails the build.
const GEOMETRY: Geometry = match Geometry::spmc(CAPACITY, STRIDE, 8, 0, false) {
    Ok(g) => g,
    Err(_) => panic!("capacity must be a power of two and the stride a multiple of 8"),
};
/// Bytes of each ring's static buffer (header, then the slots).
const RING_BYTES: usize = match GEOMETRY.total_len() {
    Some(n) => n as usize,
    None => panic!("ring too large"),
};

/// Records the SysTick handler writes, one per tick.
const SAMPLES: u32 = 1_000;
/// The main loop stops reading and replicating for ticks `STALL_FROM..STALL_FROM + STALL_TICKS`
/// (busy elsewhere, say a flash erase): more than three laps of the ring, so records are lost.
const STALL_FROM: u32 = 400;
const STALL_TICKS: u32 = 200;

// Zero-initialised, so they go to .bss; `take` hands out the one `&'static mut` to each.
static SOURCE_MEM: ConstStaticCell<[u64; RING_BYTES / 8]> =
    ConstStaticCell::new([0; RING_BYTES / 8]);
static MIRROR_MEM: ConstStaticCell<[u64; RING_BYTES / 8]> =
    ConstStaticCell::new([0; RING_BYTES / 8]);
static RX_MEM: ConstStaticCell<[u8; FRAME_BUDGET]> = ConstStaticCell::new([0; FRAME_BUDGET]);

/// Why the run failed.
#[derive(Debug)]
#[allow(dead_code)] // the fields are read through Debug when the failure is printed
enum Failure {
    Region(RegionError),
    Init(InitError),
    Attach(AttachError),
    NoPeripherals,
    Handshake,
    Read(ReadError),
    Repl(ReplError),
    Mirror(Mismatch),
    Count {
        what: &'static str,
        got: u64,
        want: u64,
    },
}

/// What a successful run saw.
struct Summary {
    ticks: u32,
    reader_read: u64,
    reader_lapped: u64,
    bytes_down: u64,
    data_frames: u64,
    records_sent: u64,
    source_gaps: u64,
    heartbeats: u64,
    mirror_written: u64,
    mirror_checked: u64,
    mirror_gaps: u64,
    mirror_skipped: u64,
    window: (u64, u64),
}

#[entry]
fn main() -> ! {
    match run() {
        Ok(s) => {
            hprintln!(
                "ringwire firmware example: Cortex-M4, SysTick {} Hz, ring {} x {} B in static memory",
                sampler::TICK_HZ,
                CAPACITY,
                sample::LEN
            );
            hprintln!(
                "sampler: {} records pushed from the SysTick handler in {} ticks",
                SAMPLES,
                s.ticks
            );
            hprintln!(
                "reader:  {} read in order and intact, {} lapped during the {}-tick stall (read + lapped = {})",
                s.reader_read,
                s.reader_lapped,
                STALL_TICKS,
                s.reader_read + s.reader_lapped
            );
            hprintln!(
                "link:    {} bytes, {} DATA frames ({} records), {} GAP, {} HEARTBEAT",
                s.bytes_down,
                s.data_frames,
                s.records_sent,
                s.source_gaps,
                s.heartbeats
            );
            hprintln!(
                "mirror:  {} records written, {} checked as written, {} skipped at {} GAP; window {}..={} matches the source slot for slot",
                s.mirror_written,
                s.mirror_checked,
                s.mirror_skipped,
                s.mirror_gaps,
                s.window.0,
                s.window.1
            );
            hprintln!("PASS");
            debug::exit(debug::EXIT_SUCCESS);
        }
        Err(e) => {
            hprintln!("FAIL: {:?}", e);
            debug::exit(debug::EXIT_FAILURE);
        }
    }
    // Only reached on hardware without a debugger attached.
    loop {
        cortex_m::asm::wfi();
    }
}

fn run() -> Result<Summary, Failure> {
    let mut cp = cortex_m::Peripherals::take().ok_or(Failure::NoPeripherals)?;
    let geo = GEOMETRY;
    let source_mem: &'static mut [u64] = SOURCE_MEM.take();
    let region = Region::from_static(source_mem).map_err(Failure::Region)?;
    // SAFETY: the static buffer is used by this ring alone (taken once just above): no other
    // view of it exists.
    let view = unsafe { RingView::init(region, &geo) }.map_err(Failure::Init)?;
    let producer = Producer::new(view, NoWake).map_err(Failure::Attach)?;
    let mut reader = Reader::new(Consumer::new(view, StartMode::Oldest));
    let mut repl = Replicator::new(
        RingSource(view),
        MIRROR_MEM.take(),
        RX_MEM.take(),
        sampler::now(),
    )
    .map_err(Failure::Region)?;

    // HELLO out, GEOMETRY back: the mirror creates its ring before the first sample.
    repl.pump(sampler::now()).map_err(Failure::Repl)?;
    if !repl.mirror().is_live() {
        return Err(Failure::Handshake);
    }

    sampler::start(&mut cp.SYST, producer, SAMPLES);
    let write_seq = || view.write_seq().load(Ordering::Acquire);
    let mut t = sampler::ticks();
    loop {
        if !(STALL_FROM..STALL_FROM + STALL_TICKS).contains(&t) {
            reader.drain().map_err(Failure::Read)?;
            repl.pump(sampler::now()).map_err(Failure::Repl)?;
        }
        if write_seq() >= u64::from(SAMPLES) {
            break;
        }
        sampler::wait_past(t);
        t = sampler::ticks();
    }
    sampler::stop(&mut cp.SYST);
    // The ring is still now: read and replicate what is left.
    reader.drain().map_err(Failure::Read)?;
    repl.pump(sampler::now()).map_err(Failure::Repl)?;

    let pushed = write_seq();
    expect("records pushed", pushed, u64::from(SAMPLES))?;
    // Every record was either read or counted as lost, and the reader is at the end.
    expect(
        "read + lapped",
        reader.read + reader.lapped(),
        u64::from(SAMPLES),
    )?;
    expect("reader cursor", reader.cursor(), pushed + 1)?;
    // The stall must show up as counted loss, not vanish.
    if reader.lapped() == 0 {
        return Err(Failure::Count {
            what: "records lapped during the stall",
            got: 0,
            want: u64::from(STALL_TICKS) - CAPACITY,
        });
    }

    let (src, mir) = (repl.source().counters(), repl.mirror().counters());
    // A lossless in-order link: everything the source sent, the mirror wrote.
    expect("records mirrored", mir.records_written, src.records)?;
    expect("mirror next sequence", repl.mirror().next(), pushed + 1)?;
    // Every sequence is either in the mirror ring or skipped by a GAP it counted.
    expect(
        "records mirrored + skipped",
        mir.records_written + mir.records_skipped,
        pushed,
    )?;
    // The source fell behind during the stall too; it must have said so with a GAP.
    if src.gaps == 0 || mir.gaps == 0 {
        return Err(Failure::Count {
            what: "GAP frames after the stall",
            got: src.gaps.min(mir.gaps),
            want: 1,
        });
    }
    // Every record the mirror wrote, not only the final window: those around the GAP too.
    let checked = repl.sink().result().map_err(Failure::Mirror)?;
    expect("records checked as mirrored", checked, mir.records_written)?;
    let mirror_ring = repl.mirror_ring().ok_or(Failure::Handshake)?;
    let window = verify::same_window(&view, mirror_ring).map_err(Failure::Mirror)?;
    expect("window length", window.1 - window.0 + 1, CAPACITY)?;

    Ok(Summary {
        ticks: sampler::ticks(),
        reader_read: reader.read,
        reader_lapped: reader.lapped(),
        bytes_down: repl.bytes_down,
        data_frames: src.data_frames,
        records_sent: src.records,
        source_gaps: src.gaps,
        heartbeats: src.heartbeats,
        mirror_written: mir.records_written,
        mirror_checked: checked,
        mirror_gaps: mir.gaps,
        mirror_skipped: mir.records_skipped,
        window,
    })
}

fn expect(what: &'static str, got: u64, want: u64) -> Result<(), Failure> {
    if got == want {
        Ok(())
    } else {
        Err(Failure::Count { what, got, want })
    }
}
