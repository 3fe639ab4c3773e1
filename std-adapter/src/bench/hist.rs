//! Latency recording in HDR histograms and the percentile summary every report uses.

use hdrhistogram::Histogram;

/// Percentiles reported everywhere: p50, p90, p99, p99.9 and max.
pub const QUANTILES: [(f64, &str); 4] = [
    (0.50, "p50"),
    (0.90, "p90"),
    (0.99, "p99"),
    (0.999, "p99.9"),
];

/// A latency recorder in nanoseconds: 1 ns to 100 s at 3 significant digits.
#[derive(Clone, Debug)]
pub struct Latency {
    h: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    /// An empty recorder.
    pub fn new() -> Latency {
        // 3 significant digits up to 100 s: bounds that hdrhistogram accepts by construction.
        let h = Histogram::new_with_bounds(1, 100_000_000_000, 3)
            .expect("static histogram bounds are valid");
        Latency { h }
    }

    /// Records one sample; values outside the range are clamped to it.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.h.saturating_record(ns.max(1));
    }

    /// Adds another recorder's samples.
    pub fn merge(&mut self, other: &Latency) {
        // Same bounds on both sides, so `add` cannot fail; ignore the impossible error.
        let _ = self.h.add(&other.h);
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.h.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }

    /// The value at quantile `q` (0..=1), in ns.
    pub fn quantile(&self, q: f64) -> u64 {
        self.h.value_at_quantile(q)
    }

    /// The summary: count, p50/p90/p99/p99.9, max, mean.
    pub fn summary(&self) -> Summary {
        Summary {
            count: self.h.len(),
            p50: self.quantile(0.50),
            p90: self.quantile(0.90),
            p99: self.quantile(0.99),
            p999: self.quantile(0.999),
            max: self.h.max(),
            mean: self.h.mean(),
        }
    }

    /// Points of the percentile curve (percentile, value in ns) for plotting, from p0 to
    /// p99.99 on a log-like scale.
    pub fn curve(&self) -> Vec<(f64, u64)> {
        let mut pts = Vec::new();
        for q in [
            0.0, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999,
        ] {
            pts.push((q * 100.0, self.quantile(q)));
        }
        pts.push((100.0, self.h.max()));
        pts
    }
}

/// Latency percentiles of one run, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest sample.
    pub max: u64,
    /// Mean.
    pub mean: f64,
}

impl Summary {
    /// As a JSON object (no external serializer needed for six numbers).
    pub fn to_json(&self) -> String {
        format!(
            "{{\"count\":{},\"p50_ns\":{},\"p90_ns\":{},\"p99_ns\":{},\"p999_ns\":{},\"max_ns\":{},\"mean_ns\":{:.1}}}",
            self.count, self.p50, self.p90, self.p99, self.p999, self.max, self.mean
        )
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "n={} p50={} p90={} p99={} p99.9={} max={}",
            self.count,
            fmt_ns(self.p50),
            fmt_ns(self.p90),
            fmt_ns(self.p99),
            fmt_ns(self.p999),
            fmt_ns(self.max)
        )
    }
}

/// Formats nanoseconds with a unit that keeps 3–4 significant digits.
pub fn fmt_ns(ns: u64) -> String {
    match ns {
        0..=9_999 => format!("{ns} ns"),
        10_000..=999_999 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..=9_999_999_999 => format!("{:.2} ms", ns as f64 / 1e6),
        _ => format!("{:.2} s", ns as f64 / 1e9),
    }
}

/// Median, min and max of repeated runs' figures (BENCHMARKS.md reports a median of at
/// least 5 runs with its min–max). `None` for an empty input.
pub fn median_min_max(xs: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let med = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some((med, v[0], v[n - 1]))
}

/// The `p`th and `(100 - p)`th percentiles (`p` at most 50) of `sorted` (ascending, not
/// empty), each by nearest rank counted from its own end: the ⌈p·n/100⌉-th smallest and the
/// ⌈p·n/100⌉-th largest, so both sit equally far from their ends for every n (counted from
/// the bottom for both, p90 would come one rank low whenever p·n/100 is whole).
pub fn nearest_rank_tails(sorted: &[f64], p: usize) -> (f64, f64) {
    let n = sorted.len();
    let k = (n * p).div_ceil(100).clamp(1, n);
    (sorted[k - 1], sorted[n - k])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_tails_sit_as_far_from_each_end() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(nearest_rank_tails(&v, 10), (1.0, 10.0));
        let v: Vec<f64> = (1..=16).map(f64::from).collect();
        assert_eq!(nearest_rank_tails(&v, 10), (2.0, 15.0));
        assert_eq!(nearest_rank_tails(&[7.0], 10), (7.0, 7.0));
        assert_eq!(nearest_rank_tails(&v, 50), (8.0, 9.0));
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        // 1..=10_000 ns, one sample each: the q-quantile is q * 10_000 within HDR's 0.1 %.
        let mut l = Latency::new();
        for ns in 1..=10_000u64 {
            l.record(ns);
        }
        let s = l.summary();
        assert_eq!(s.count, 10_000);
        let close = |got: u64, want: u64| got.abs_diff(want) <= want / 500 + 1;
        assert!(close(s.p50, 5_000), "p50 {}", s.p50);
        assert!(close(s.p90, 9_000), "p90 {}", s.p90);
        assert!(close(s.p99, 9_900), "p99 {}", s.p99);
        assert!(close(s.p999, 9_990), "p99.9 {}", s.p999);
        assert!(close(s.max, 10_000), "max {}", s.max);
        assert!((s.mean - 5_000.5).abs() < 10.0, "mean {}", s.mean);
    }

    #[test]
    fn a_single_outlier_moves_only_the_tail() {
        let mut l = Latency::new();
        for _ in 0..999 {
            l.record(100);
        }
        l.record(5_000_000);
        let s = l.summary();
        assert!(s.p50.abs_diff(100) <= 1 && s.p99.abs_diff(100) <= 1);
        assert!(
            s.p999.abs_diff(100) <= 1,
            "999 of 1000 samples are 100 ns: p99.9 {}",
            s.p999
        );
        assert!(s.max.abs_diff(5_000_000) <= 5_000_000 / 1000);
    }

    #[test]
    fn merge_adds_samples() {
        let (mut a, mut b) = (Latency::new(), Latency::new());
        a.record(10);
        b.record(1_000);
        a.merge(&b);
        assert_eq!(a.len(), 2);
        assert_eq!(a.summary().max, 1_000);
    }

    #[test]
    fn median_min_max_of_runs() {
        assert_eq!(
            median_min_max(&[3.0, 1.0, 2.0, 5.0, 4.0]),
            Some((3.0, 1.0, 5.0))
        );
        assert_eq!(median_min_max(&[4.0, 1.0, 2.0, 3.0]), Some((2.5, 1.0, 4.0)));
        assert_eq!(median_min_max(&[f64::NAN]), None);
        assert_eq!(median_min_max(&[]), None);
    }

    #[test]
    fn units() {
        assert_eq!(fmt_ns(950), "950 ns");
        assert_eq!(fmt_ns(12_345), "12.3 µs");
        assert_eq!(fmt_ns(999_999), "1000.0 µs");
        assert_eq!(fmt_ns(6_066_200), "6.07 ms");
        assert_eq!(fmt_ns(25_000_000), "25.00 ms");
    }
}
