//! Rows of `ringwire bench stress` and `ringwire bench mirror`: one per (transport, rate,
//! configuration), rendered as a markdown table or JSON, with every error flagged.

use super::hist::{Summary, fmt_ns};
use super::stress::StressReport;

/// One measured run: what was sent, what the reader got, and push-to-read latency.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRow {
    /// Implementation measured (`ringwire`, `ringfire`).
    pub implementation: String,
    /// Transport name (`tcp`, `multicast`, `unicast`).
    pub transport: String,
    /// Waiting configuration (`default`, `spin`).
    pub config: String,
    /// Offered rate in records per second.
    pub rate: u64,
    /// Seconds of publishing scheduled.
    pub seconds: u64,
    /// The rate the producer achieved: records sent over the wall time from the first to
    /// the last publish (below `rate` when the producer fell behind its schedule).
    pub achieved_rate: f64,
    /// Sequence tracking of what arrived; `None` when the run could not track sequences.
    pub stream: Option<StressReport>,
    /// Records whose bytes differed from what was published.
    pub corrupt: u64,
    /// Push-to-read latency of the records that arrived.
    pub latency: Summary,
    /// How late the producer pushed each record after its scheduled time (push time − due):
    /// a producer that sleeps to each due time stamps at the push, so this is how much a
    /// producer stall could hide from `latency`. `None` when not measured.
    pub producer_lateness: Option<Summary>,
}

impl RunRow {
    /// Every error of the run in one line (missing records, reorders, duplicates, gaps,
    /// bogus sequences, corrupt payloads, no sequence tracking), or `None` when clean.
    pub fn errors(&self) -> Option<String> {
        let mut parts = Vec::new();
        match &self.stream {
            Some(s) => parts.extend(s.errors()),
            None => parts.push("sequences not tracked".to_string()),
        }
        if self.corrupt > 0 {
            parts.push(format!("{} corrupt", self.corrupt));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// Delivered as a percentage of sent (0 when untracked).
    pub fn delivered_pct(&self) -> f64 {
        self.stream.map_or(0.0, |s| s.delivered_pct())
    }

    /// [`RunRow::delivered_pct`] to `decimals` places (at most 16; more are taken as 16),
    /// rounded down, as the table and the JSON print it: a run that lost records never reads
    /// 100 (2,999,999 of 3,000,000 is 99.99 to two places, not 100.00).
    pub fn delivered_pct_text(&self, decimals: u32) -> String {
        // A u64 count × 100 × 10^16 fits a u128 (× 10^18 would not).
        let decimals = decimals.min(16);
        let scale = 10u128.pow(decimals);
        let units = match self.stream {
            None => 0,
            Some(s) if s.sent == 0 => 100 * scale,
            Some(s) => u128::from(s.delivered) * 100 * scale / u128::from(s.sent),
        };
        if decimals == 0 {
            return units.to_string();
        }
        let width = decimals as usize;
        format!("{}.{:0width$}", units / scale, units % scale)
    }

    /// The row as one JSON object (a run that ran its whole time).
    pub fn to_json(&self) -> String {
        self.to_json_marked(false)
    }

    /// The row as one JSON object; `interrupted`: the run was cut short (SIGINT/SIGTERM/SIGHUP),
    /// its figures cover only part of its time. `"status"` is `ok`, `error` or
    /// `interrupted`.
    pub fn to_json_marked(&self, interrupted: bool) -> String {
        let s = self.stream.unwrap_or_default();
        let status = if interrupted {
            "interrupted"
        } else if self.errors().is_some() {
            "error"
        } else {
            "ok"
        };
        let err = match self.errors() {
            Some(e) => format!("\"{}\"", e.replace('"', "'")),
            None => "null".into(),
        };
        format!(
            "{{\"implementation\":\"{}\",\"transport\":\"{}\",\"config\":\"{}\",\"rate\":{},\"seconds\":{},\
             \"achieved_rate\":{:.0},\"sent\":{},\"delivered\":{},\"delivered_pct\":{},\"missing\":{},\"reorders\":{},\
             \"duplicates\":{},\"gaps\":{},\"bogus\":{},\"corrupt\":{},\"latency\":{},\"producer_lateness\":{},\"error\":{err},\
             \"interrupted\":{interrupted},\"status\":\"{status}\"}}",
            self.implementation,
            self.transport,
            self.config,
            self.rate,
            self.seconds,
            self.achieved_rate,
            s.sent,
            s.delivered,
            self.delivered_pct_text(4),
            s.missing,
            s.reorders,
            s.duplicates,
            s.gap_events,
            s.bogus,
            self.corrupt,
            self.latency.to_json(),
            self.producer_lateness
                .map_or("null".to_string(), |l| l.to_json())
        )
    }
}

/// The markdown table of `bench stress`: one row per run, errors flagged `ERROR: …`.
pub fn stress_table(rows: &[RunRow]) -> String {
    stress_table_marked(rows, None)
}

/// The status cell of a row: `ok`, `ERROR: …`, or for a run cut short by a signal
/// `INTERRUPTED: …` (with its errors, which may be records still in flight when it stopped).
pub fn status_cell(r: &RunRow, interrupted: bool) -> String {
    match (interrupted, r.errors()) {
        (true, None) => "INTERRUPTED: cut short by a signal".into(),
        (true, Some(e)) => format!("INTERRUPTED: cut short by a signal; {e}"),
        (false, Some(e)) => format!("ERROR: {e}"),
        (false, None) => "ok".into(),
    }
}

/// [`stress_table`] with row `cut_short` (if any) marked `INTERRUPTED`: a run a signal
/// stopped before its time was up.
pub fn stress_table_marked(rows: &[RunRow], cut_short: Option<usize>) -> String {
    let mut t = String::from(
        "| transport | config | rate (msg/s) | achieved | sent | delivered | reorders | duplicates | gaps | p50 | p99 | producer late p50 / p99 / max | status |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for (i, r) in rows.iter().enumerate() {
        let s = r.stream.unwrap_or_default();
        let status = status_cell(r, cut_short == Some(i));
        t.push_str(&format!(
            "| {} | {} | {} | {:.0} | {} | {}% | {} | {} | {} | {} | {} | {} | {status} |\n",
            r.transport,
            r.config,
            r.rate,
            r.achieved_rate,
            s.sent,
            r.delivered_pct_text(2),
            s.reorders,
            s.duplicates,
            s.gap_events,
            fmt_ns(r.latency.p50),
            fmt_ns(r.latency.p99),
            lateness_cell(r.producer_lateness.as_ref()),
        ));
    }
    t
}

/// "p50 / p99 / max" of a producer-lateness summary, or "–" when not measured.
pub fn lateness_cell(l: Option<&Summary>) -> String {
    l.map_or("–".into(), |l| {
        format!("{} / {} / {}", fmt_ns(l.p50), fmt_ns(l.p99), fmt_ns(l.max))
    })
}

/// How many rows have errors.
pub fn failures(rows: &[RunRow]) -> usize {
    rows.iter().filter(|r| r.errors().is_some()).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::stress::SeqTracker;

    fn row(seqs: &[u64], sent: u64, corrupt: u64) -> RunRow {
        let mut t = SeqTracker::new(sent);
        for &s in seqs {
            t.record(s);
        }
        RunRow {
            implementation: "ringwire".into(),
            transport: "tcp".into(),
            config: "default".into(),
            rate: 1000,
            seconds: 1,
            achieved_rate: 1000.0,
            stream: Some(t.finish(sent)),
            corrupt,
            latency: Summary {
                count: seqs.len() as u64,
                p50: 1_500,
                p90: 2_000,
                p99: 30_000,
                p999: 40_000,
                max: 50_000,
                mean: 1_700.0,
            },
            producer_lateness: None,
        }
    }

    #[test]
    fn clean_row_is_ok_everywhere() {
        let r = row(&[1, 2, 3, 4], 4, 0);
        assert_eq!(r.errors(), None);
        assert_eq!(failures(std::slice::from_ref(&r)), 0);
        let t = stress_table(std::slice::from_ref(&r));
        let line = t.lines().nth(2).unwrap();
        assert!(line.ends_with("| ok |"), "{line}");
        assert!(line.contains("| 100.00% |"), "{line}");
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["error"], serde_json::Value::Null);
        assert_eq!(v["sent"], 4);
        assert_eq!(v["delivered_pct"], 100.0);
        assert_eq!(v["latency"]["p99_ns"], 30_000);
        assert!(v["producer_lateness"].is_null());
        let mut late = r.clone();
        late.producer_lateness = Some(Summary {
            p50: 40_000,
            p99: 90_000,
            max: 2_000_000,
            ..Summary::default()
        });
        let v: serde_json::Value = serde_json::from_str(&late.to_json()).unwrap();
        assert_eq!(v["producer_lateness"]["p99_ns"], 90_000);
        let t = stress_table(std::slice::from_ref(&late));
        assert!(
            t.contains(&lateness_cell(late.producer_lateness.as_ref())),
            "{t}"
        );
    }

    #[test]
    fn reorder_duplicate_gap_and_corruption_are_errors() {
        let r = row(&[1, 3, 2, 2], 4, 1);
        let e = r.errors().unwrap();
        assert!(
            e.contains("1 reorders") && e.contains("1 duplicates"),
            "{e}"
        );
        assert!(e.contains("1 gaps") && e.contains("1 missing"), "{e}");
        assert!(e.contains("1 corrupt"), "{e}");
        let t = stress_table(std::slice::from_ref(&r));
        assert!(t.lines().nth(2).unwrap().contains("| ERROR: "), "{t}");
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(
            (v["reorders"].as_u64(), v["duplicates"].as_u64()),
            (Some(1), Some(1))
        );
        assert!(v["error"].as_str().unwrap().contains("corrupt"));
        assert_eq!(failures(&[r.clone(), row(&[1], 1, 0), r]), 2);
    }

    #[test]
    fn a_run_cut_short_is_marked_interrupted_not_ok() {
        let rows = [row(&[1, 2], 2, 0), row(&[1, 2], 2, 0)];
        let t = stress_table_marked(&rows, Some(1));
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[2].ends_with("| ok |"), "{t}");
        assert!(
            lines[3].ends_with("| INTERRUPTED: cut short by a signal |"),
            "{t}"
        );
        let v: serde_json::Value = serde_json::from_str(&rows[1].to_json_marked(true)).unwrap();
        assert_eq!(
            (v["interrupted"].as_bool(), v["status"].as_str()),
            (Some(true), Some("interrupted"))
        );
        let v: serde_json::Value = serde_json::from_str(&rows[0].to_json()).unwrap();
        assert_eq!(
            (v["interrupted"].as_bool(), v["status"].as_str()),
            (Some(false), Some("ok"))
        );
        let bad = row(&[2], 2, 0);
        assert!(
            status_cell(&bad, true).starts_with("INTERRUPTED: cut short by a signal; 1 missing")
        );
        let v: serde_json::Value = serde_json::from_str(&bad.to_json()).unwrap();
        assert_eq!(v["status"], "error");
    }

    /// A run that lost one record in 3,000,000 is not shown as delivering 100 %: the table's
    /// two places and the JSON's four are rounded down.
    #[test]
    fn a_run_that_lost_records_never_reads_100_percent_delivered() {
        let sent = 3_000_000;
        let seqs: Vec<u64> = (1..sent).collect();
        let r = row(&seqs, sent, 0);
        assert!(r.errors().unwrap().contains("1 missing"));
        let t = stress_table(std::slice::from_ref(&r));
        let line = t.lines().nth(2).unwrap();
        assert!(line.contains("| 3000000 | 99.99% |"), "{line}");
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["delivered_pct"], 99.9999, "{v}");
        // Everything delivered: 100 to every place; half: 50; untracked: 0.
        let all = row(&[1, 2, 3], 3, 0);
        assert_eq!(all.delivered_pct_text(2), "100.00");
        assert_eq!(all.delivered_pct_text(0), "100");
        assert_eq!(row(&[1], 2, 0).delivered_pct_text(4), "50.0000");
        let mut none = all.clone();
        none.stream = None;
        assert_eq!(none.delivered_pct_text(2), "0.00");
        // Past 16 places (the product would not fit a u128): 16, not an overflow.
        assert_eq!(
            all.delivered_pct_text(40),
            format!("100.{}", "0".repeat(16))
        );
        let mut most = all.clone();
        most.stream = Some(StressReport {
            sent: u64::MAX,
            delivered: u64::MAX - 1,
            ..StressReport::default()
        });
        assert_eq!(most.delivered_pct_text(40), "99.9999999999999999");
    }

    #[test]
    fn untracked_run_is_an_error_not_a_pass() {
        let mut r = row(&[1], 1, 0);
        r.stream = None;
        assert_eq!(r.errors().as_deref(), Some("sequences not tracked"));
        assert_eq!(r.delivered_pct(), 0.0);
    }
}
