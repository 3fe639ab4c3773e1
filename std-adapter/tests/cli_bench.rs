//! `ringwire bench`: the subcommands run end to end and report what they measured.

use std::process::Command;

fn ringwire(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ringwire"))
        .args(args)
        .output()
        .expect("run ringwire")
}

/// Fewer rounds than the floor times between two looks at its 30 s limit (4,096): a loaded
/// machine reached the limit with 20,000 rounds asked for, and the report rightly counted
/// the 12,288 timed. Here every round asked for is timed, however slow the machine.
#[test]
fn floor_reports_round_trips_and_datagrams_as_json() {
    let o = ringwire(&[
        "bench",
        "floor",
        "--rounds",
        "4000",
        "--datagrams",
        "2000",
        "--laps",
        "20",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["cacheline_round_trip"]["count"], 4000);
    assert!(v["cacheline_round_trip"]["p50_ns"].as_u64().unwrap() > 0);
    assert_eq!(v["moving_line_round_trip"]["count"], 4000);
    assert!(v["moving_line_round_trip"]["p50_ns"].as_u64().unwrap() > 0);
    assert_eq!(v["loopback_64b"]["sent"], 2000);
    let t = &v["line_transfer"];
    assert_eq!(t["lines"], 4096);
    assert_eq!(t["read"]["count"], 20, "{t}");
    assert!(t["read"]["p50_ns"].as_f64().unwrap() > 0.0, "{t}");
    // One pass's laps (the best distance's), less its writer's first, which nobody read.
    assert_eq!(t["write"]["count"], 19, "{t}");
    assert!(t["read_ahead_lines"].as_u64().is_some(), "{t}");
    assert!(t["write_ahead_lines"].as_u64().is_some(), "{t}");
}

#[test]
fn handoff_delivers_every_record_across_processes() {
    let dir = tempdir_plot();
    let plot = dir.join("handoff.svg");
    let o = ringwire(&[
        "bench",
        "handoff",
        "--rate",
        "2000",
        "--seconds",
        "1",
        "--json",
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["sent"], 2000);
    assert_eq!(v["reader"]["received"], 2000, "{v}");
    assert_eq!(v["reader"]["lapped"], 0);
    assert_eq!(v["reader"]["summary"]["count"], 2000);
    let svg = std::fs::read_to_string(&plot).expect("plot written");
    assert!(svg.contains("<polyline"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn handoff_with_a_sleeping_reader_is_woken_for_every_record() {
    let o = ringwire(&[
        "bench",
        "handoff",
        "--rate",
        "500",
        "--seconds",
        "1",
        "--wait",
        "futex",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["reader"]["received"], 500, "{v}");
    assert_eq!(v["reader"]["lapped"], 0);
}

#[test]
fn bad_values_are_errors_not_defaults() {
    for args in [
        &["bench", "handoff", "--rate", "0"][..],
        &["bench", "handoff", "--seconds", "x"][..],
        &["bench", "floor", "--rounds", "1e3"][..],
        &["bench", "floor", "--laps", "0"][..],
        &["bench", "handoff", "--wait", "nap"][..],
    ] {
        let o = ringwire(args);
        assert!(!o.status.success(), "{args:?} was accepted");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("invalid value"),
            "{args:?}"
        );
    }
}

fn tempdir_plot() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ringwire-cli-bench-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
