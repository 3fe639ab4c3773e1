//! ringfire 0.5.2's other readers and writers against ringwire rings: its header-only C
//! reader (`include/ringfire.h`, compiled here with the system C compiler) and its pure
//! Python package (`python/ringfire`, run with `python3`), both taken from the published
//! crate's sources in the cargo registry. The C reader and the Python reader read a ring
//! that a ringwire producer fills while they poll; the Python writer fills a ring that a
//! ringwire consumer reads; the Python blob reader reads a ringwire blob ring; blackboards go
//! both ways. Readers print every record's fields, and the Rust side checks each one.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use ringwire::{BlackboardConsumer, BlackboardProducer, BlobProducer, RingConsumer, RingProducer};
use ringwire_tests::records::{Rec, blob_payload};
use ringwire_tests::shm::{ShmDir, ShmPath};
use zerocopy::IntoBytes;

const N: u64 = 10_000;

/// The published ringfire 0.5.2 sources in the cargo registry (a dev-dependency of this
/// crate, so cargo has fetched them).
fn ringfire_src() -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("CARGO_HOME or HOME");
    let reg = home.join("registry").join("src");
    std::fs::read_dir(&reg)
        .unwrap_or_else(|e| panic!("{}: {e}", reg.display()))
        .filter_map(|d| d.ok())
        .map(|d| d.path().join("ringfire-0.5.2"))
        .find(|p| p.join("include").join("ringfire.h").is_file())
        .unwrap_or_else(|| panic!("ringfire-0.5.2 sources not found under {}", reg.display()))
}

/// A Python prelude: the ringfire package on the path, the `Rec` layout as a ctypes
/// structure, and a printer of its fields as integers.
fn python(script: &str) -> Command {
    let mut c = Command::new("python3");
    c.env("PYTHONPATH", ringfire_src().join("python"));
    c.arg("-c").arg(format!(
        r#"
import ctypes, struct, sys, time
import ringfire
class Rec(ctypes.Structure):
    _fields_ = [("seq", ctypes.c_uint64), ("px", ctypes.c_double), ("qty", ctypes.c_uint32),
                ("side", ctypes.c_uint32), ("check", ctypes.c_uint64)]
def show(r):
    bits = struct.unpack("<Q", struct.pack("<d", r.px))[0]
    print(r.seq, bits, r.qty, r.side, r.check)
{script}
"#
    ));
    c
}

/// Checks lines `seq px_bits qty side check` for records 1..=n, in order, each intact.
fn check_records(out: &str, n: u64) {
    let mut next = 1u64;
    for line in out.lines() {
        let f: Vec<u64> = line
            .split_whitespace()
            .map(|x| x.parse().unwrap_or_else(|e| panic!("{line:?}: {e}")))
            .collect();
        assert_eq!(f.len(), 5, "{line:?}");
        let r = Rec {
            seq: f[0],
            px: f64::from_bits(f[1]),
            qty: f[2] as u32,
            side: f[3] as u32,
            check: f[4],
        };
        assert!(r.is_valid_for(next), "record {next}: {r:?}");
        next += 1;
    }
    assert_eq!(next, n + 1, "records read");
}

/// Runs `cmd` as a reader of a ring that `fill` then fills, and returns its stdout.
fn read_while_filling(mut cmd: Command, fill: impl FnOnce()) -> String {
    let child = cmd.stdout(Stdio::piped()).spawn().unwrap_or_else(|e| {
        panic!(
            "{}: {e} (these interop tests need python3 and a C compiler, `cc` or $CC)",
            cmd.get_program().to_string_lossy()
        )
    });
    fill();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "reader failed: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Pushes records 1..=N, a few at a time, while a reader polls.
fn fill_slowly(p: &mut RingProducer<Rec>) {
    for seq in 1..=N {
        p.push(&Rec::new(seq));
        if seq % 500 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[test]
fn ringfire_c_reader_reads_a_ringwire_ring() {
    let dir = ShmDir::new("c-reader");
    let src = dir.join("reader.c");
    std::fs::write(
        &src,
        r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "ringfire.h"
typedef struct { uint64_t seq; double px; uint32_t qty; uint32_t side; uint64_t check; } rec_t;
int main(int argc, char** argv) {
    uint64_t n = strtoull(argv[2], NULL, 10);
    ringfire_c_consumer_t c;
    int rc;
    time_t t0 = time(NULL);
    /* The ring may not exist yet: retry the attach for up to 10 s. */
    while ((rc = ringfire_c_consumer_attach(&c, argv[1], sizeof(rec_t))) != 0) {
        if (time(NULL) - t0 > 10) { fprintf(stderr, "attach: %d\n", rc); return 2; }
        struct timespec ts = {0, 1000000}; nanosleep(&ts, NULL);
    }
    uint64_t got = 0;
    rec_t r;
    while (got < n) {
        if (ringfire_c_consumer_try_recv(&c, &r)) {
            uint64_t bits; memcpy(&bits, &r.px, 8);
            printf("%llu %llu %u %u %llu\n", (unsigned long long)r.seq, (unsigned long long)bits,
                   r.qty, r.side, (unsigned long long)r.check);
            got++;
        } else if (time(NULL) - t0 > 30) {
            fprintf(stderr, "stalled after %llu\n", (unsigned long long)got); return 3;
        }
    }
    if (c.lapped_count != 0) { fprintf(stderr, "lapped %llu\n", (unsigned long long)c.lapped_count); return 4; }
    ringfire_c_consumer_detach(&c);
    return 0;
}
"#,
    )
    .unwrap();
    let bin = dir.join("reader");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .args(["-std=c11", "-O2", "-I"])
        .arg(ringfire_src().join("include"))
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .status()
        .unwrap_or_else(|e| panic!("{cc}: {e}"));
    assert!(st.success(), "compiling the C reader failed");

    let ring = dir.join("ring");
    let mut p = RingProducer::<Rec>::create(&ring, 1 << 14).unwrap();
    let mut cmd = Command::new(&bin);
    cmd.arg(&ring).arg(N.to_string());
    let out = read_while_filling(cmd, || fill_slowly(&mut p));
    check_records(&out, N);
}

#[test]
fn ringfire_python_reader_reads_a_ringwire_ring() {
    let p_ring = ShmPath::new("py-reader");
    let mut p = RingProducer::<Rec>::create(&p_ring, 1 << 14).unwrap();
    let cmd = python(&format!(
        r#"
c = ringfire.RingConsumer({path:?}, Rec, start_mode="oldest")
got, t0 = 0, time.time()
while got < {N}:
    r = c.try_recv()
    if r is None:
        assert time.time() - t0 < 30, "stalled after %d" % got
        continue
    show(r)
    got += 1
assert c.lapped_count == 0
"#,
        path = p_ring.path().to_str().unwrap()
    ));
    let out = read_while_filling(cmd, || fill_slowly(&mut p));
    check_records(&out, N);
}

#[test]
fn ringfire_python_writer_is_read_by_ringwire() {
    let p_ring = ShmPath::new("py-writer");
    let mut child = python(&format!(
        r#"
data = sys.stdin.buffer.read()
p = ringfire.RingProducer({path:?}, Rec, capacity=16384)
for i in range(len(data) // 32):
    p.push(Rec.from_buffer_copy(data, i * 32))
p.close()
"#,
        path = p_ring.path().to_str().unwrap()
    ))
    .stdin(Stdio::piped())
    .spawn()
    .unwrap();
    let mut input = Vec::new();
    for seq in 1..=N {
        input.extend_from_slice(Rec::new(seq).as_bytes());
    }
    child.stdin.take().unwrap().write_all(&input).unwrap();
    assert!(child.wait().unwrap().success());
    // The Python ring has no schema signature (spec §12: 0), so a typed attach accepts it.
    let mut c = RingConsumer::<Rec>::builder()
        .start_from_oldest()
        .attach(&p_ring)
        .unwrap();
    for seq in 1..=N {
        let r = c
            .try_recv()
            .unwrap_or_else(|| panic!("record {seq} missing"));
        assert!(r.is_valid_for(seq), "record {seq}: {r:?}");
    }
    assert_eq!(c.try_recv(), None);
    assert_eq!(c.lapped_count(), 0);
}

#[test]
fn ringfire_python_blob_reader_reads_a_ringwire_blob_ring() {
    const M: u64 = 2_000;
    let p_ring = ShmPath::new("py-blob");
    let mut p = BlobProducer::<u64>::create(&p_ring, 4096, 1 << 20).unwrap();
    let mut buf = [0u8; 256];
    for seq in 1..=M {
        let n = blob_payload(seq, 0, &mut buf);
        assert_eq!(p.push(&(seq * 3), &buf[..n]).unwrap(), seq);
    }
    let out = python(&format!(
        r#"
class Meta(ctypes.Structure):
    _fields_ = [("v", ctypes.c_uint64)]
c = ringfire.BlobConsumer({path:?}, Meta)
while True:
    r = c.try_recv_copy()
    if r is None:
        break
    print(r[0].v, r[1].hex())
assert c.lapped_count == 0
"#,
        path = p_ring.path().to_str().unwrap()
    ))
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut seq = 0u64;
    for line in text.lines() {
        seq += 1;
        let (meta, hex) = line.split_once(' ').unwrap_or((line, ""));
        assert_eq!(meta.parse::<u64>().unwrap(), seq * 3, "meta of {seq}");
        let n = blob_payload(seq, 0, &mut buf);
        let want: String = buf[..n].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, want, "payload of {seq}");
    }
    assert_eq!(seq, M);
}

#[test]
fn blackboards_with_ringfire_python_both_ways() {
    // ringwire writes, Python reads.
    let p_bb = ShmPath::new("py-bb-read");
    let mut w = BlackboardProducer::<Rec>::create(&p_bb, 16).unwrap();
    for k in 0..16u64 {
        w.write(k as usize, &Rec::new(k + 1)).unwrap();
    }
    let out = python(&format!(
        r#"
c = ringfire.BlackboardConsumer({path:?}, Rec)
for k in range(16):
    show(c.read(k))
"#,
        path = p_bb.path().to_str().unwrap()
    ))
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    check_records(&String::from_utf8(out.stdout).unwrap(), 16);

    // Python writes, ringwire reads.
    let p_bb = ShmPath::new("py-bb-write");
    let mut child = python(&format!(
        r#"
data = sys.stdin.buffer.read()
p = ringfire.BlackboardProducer({path:?}, Rec, slot_count=16)
for k in range(16):
    p.write(k, Rec.from_buffer_copy(data, k * 32))
p.close()
"#,
        path = p_bb.path().to_str().unwrap()
    ))
    .stdin(Stdio::piped())
    .spawn()
    .unwrap();
    let input: Vec<u8> = (0..16u64)
        .flat_map(|k| Rec::new(k + 1).as_bytes().to_vec())
        .collect();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    assert!(child.wait().unwrap().success());
    let r = BlackboardConsumer::<Rec>::attach(&p_bb).unwrap();
    for k in 0..16u64 {
        assert_eq!(
            r.read(k as usize).unwrap(),
            Some(Rec::new(k + 1)),
            "key {k}"
        );
    }
}
