//! Hand-off round trip through iceoryx2 publish/subscribe between two processes, the same
//! shape as `round_trip_2proc` in tests/benches/handoff.rs: a 64-byte record (its first
//! 8 bytes a sequence number) is published on a `ping` service, an echo process on the
//! other core (pinned to core 1, this one to core 0) receives it and publishes the same
//! bytes on a `pong` service, and this process polls (with a PAUSE hint) until that
//! sequence comes back; time per round trip.
//!
//! The result is a criterion benchmark `round_trip_2proc/iceoryx2`, so with
//! `CRITERION_HOME` pointing at the same directory as the handoff bench it lands in the
//! same table. iceoryx2 runs with its default configuration (`ipc::Service`, zero-copy
//! loans, subscriber buffer 2, no history); both services are created by this process
//! before the echo starts, and the first round trip is repeated until the two processes
//! are connected (iceoryx2 drops samples published before a subscriber connects). A failed
//! send or receive, or an echo process that exits, while measuring panics inside the timed
//! routine: criterion then writes no result and the process exits non-zero (scripts/bench.sh
//! then deletes that run's `round_trip_2proc/iceoryx2` directory).
//!
//! ```text
//! cd bench-peers && cargo build --release
//! CRITERION_HOME=../target/criterion target/release/ringwire-bench-peers --bench \
//!     --warm-up-time 1 --measurement-time 2
//! ```

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use criterion::Criterion;
use iceoryx2::prelude::*;

type Rec = [u8; 64];
const STOP: u64 = u64::MAX;

fn rec(seq: u64) -> Rec {
    let mut r = [0u8; 64];
    r[..8].copy_from_slice(&seq.to_ne_bytes());
    r
}

fn seq_of(r: &Rec) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&r[..8]);
    u64::from_ne_bytes(b)
}

/// Pins the calling thread to `cpu` (best effort: a machine with one CPU runs unpinned).
fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

type Error = Box<dyn std::error::Error>;

/// The node and the two services' ports of one side.
struct Side {
    _node: Node<ipc::Service>,
    publisher: iceoryx2::port::publisher::Publisher<ipc::Service, Rec, ()>,
    subscriber: iceoryx2::port::subscriber::Subscriber<ipc::Service, Rec, ()>,
}

fn open_side(publish_on: &str, subscribe_to: &str) -> Result<Side, Error> {
    let node = NodeBuilder::new().create::<ipc::Service>()?;
    let service = |name: &str| -> Result<_, Error> {
        Ok(node
            .service_builder(&name.try_into()?)
            .publish_subscribe::<Rec>()
            .open_or_create()?)
    };
    let out = service(publish_on)?;
    let inp = service(subscribe_to)?;
    let publisher = out.publisher_builder().create()?;
    let subscriber = inp.subscriber_builder().create()?;
    Ok(Side {
        _node: node,
        publisher,
        subscriber,
    })
}

impl Side {
    fn send(&self, r: Rec) -> Result<(), Error> {
        self.publisher.loan_uninit()?.write_payload(r).send()?;
        Ok(())
    }

    fn try_recv(&self) -> Result<Option<Rec>, Error> {
        Ok(self.subscriber.receive()?.map(|s| *s))
    }
}

/// The echo process: receive on `ping`, publish the same record on `pong`, until STOP.
fn echo(ping: &str, pong: &str) -> Result<(), Error> {
    pin_to(1);
    let side = open_side(pong, ping)?;
    let deadline = Instant::now() + Duration::from_secs(600);
    while Instant::now() < deadline {
        if let Some(r) = side.try_recv()? {
            side.send(r)?;
            if seq_of(&r) == STOP {
                break;
            }
        } else {
            std::hint::spin_loop();
        }
    }
    Ok(())
}

/// The echo process; reaped (killed if it does not exit) on drop.
struct EchoChild(Child);

impl EchoChild {
    /// Panics if the echo process has exited: the record `seq` would never come back. Called
    /// only after many empty polls, so the round trips it times never pay for it.
    fn check_alive(&mut self, seq: u64) {
        if let Ok(Some(status)) = self.0.try_wait() {
            panic!(
                "round_trip_2proc/iceoryx2: the echo process exited ({status}) before echoing record {seq}"
            );
        }
    }
}

impl Drop for EchoChild {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn round_trip_iceoryx2(c: &mut Criterion) -> Result<(), Error> {
    let pid = std::process::id();
    let (ping, pong) = (
        format!("ringwire-peers/{pid}/ping"),
        format!("ringwire-peers/{pid}/pong"),
    );
    let side = open_side(&ping, &pong)?;
    let mut child = EchoChild(
        Command::new(std::env::current_exe()?)
            .env("RW_PEERS_ECHO_PING", &ping)
            .env("RW_PEERS_ECHO_PONG", &pong)
            .spawn()?,
    );
    pin_to(0);
    // Start-up barrier: repeat the first ping until it comes back (samples published before
    // the echo's subscriber connected are dropped by iceoryx2).
    let deadline = Instant::now() + Duration::from_secs(20);
    'connect: loop {
        side.send(rec(1))?;
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(5) {
            if side.try_recv()?.is_some_and(|r| seq_of(&r) == 1) {
                break 'connect;
            }
        }
        if Instant::now() > deadline {
            return Err("iceoryx2 echo process did not answer within 20 s".into());
        }
    }
    let mut seq = 1u64;
    c.bench_function("round_trip_2proc/iceoryx2", |b| {
        b.iter_custom(|iters| {
            // Any failure panics here, inside the routine: criterion then writes no result
            // for this benchmark, rather than the time of round trips that never ran (a
            // failed send) or that did not wait for the echo (a failed receive).
            let t0 = Instant::now();
            for _ in 0..iters {
                seq += 1;
                if let Err(e) = side.send(rec(seq)) {
                    panic!("round_trip_2proc/iceoryx2: send of record {seq}: {e}");
                }
                let mut polls = 0u32;
                loop {
                    match side.try_recv() {
                        Ok(Some(r)) if seq_of(&r) == seq => break,
                        Ok(_) => {
                            polls = polls.wrapping_add(1);
                            if polls.is_multiple_of(1 << 20) {
                                child.check_alive(seq);
                            }
                            std::hint::spin_loop();
                        }
                        Err(e) => {
                            panic!("round_trip_2proc/iceoryx2: receive of record {seq}: {e}")
                        }
                    }
                }
            }
            t0.elapsed()
        })
    });
    let _ = side.send(rec(STOP));
    drop(child);
    Ok(())
}

fn main() -> std::process::ExitCode {
    if let (Ok(ping), Ok(pong)) = (
        std::env::var("RW_PEERS_ECHO_PING"),
        std::env::var("RW_PEERS_ECHO_PONG"),
    ) {
        return match echo(&ping, &pong) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("iceoryx2 echo: {e}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    let mut c = Criterion::default().configure_from_args();
    let r = round_trip_iceoryx2(&mut c);
    c.final_summary();
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("round_trip_2proc/iceoryx2: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
