//! Minimal SVG line charts for benchmark reports: a percentile curve or a rate sweep, one
//! line per series, so a reader can look rather than read. No plotting dependency: the
//! charts need axes, ticks, lines and a legend, nothing more.

use std::fmt::Write;

/// One named series of (x, y) points.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points in drawing order.
    pub points: Vec<(f64, f64)>,
}

/// Axis scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Linear.
    Linear,
    /// Base-10 logarithmic (non-positive values are clamped to the smallest positive one).
    Log,
}

/// A chart description.
#[derive(Clone, Debug)]
pub struct Chart {
    /// Title line.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// X scale.
    pub x_scale: Scale,
    /// Y scale.
    pub y_scale: Scale,
    /// The lines.
    pub series: Vec<Series>,
}

const W: f64 = 760.0;
const H: f64 = 440.0;
const L: f64 = 80.0;
const R: f64 = 190.0;
const T: f64 = 40.0;
const B: f64 = 60.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

fn tf(v: f64, s: Scale, floor: f64) -> f64 {
    match s {
        Scale::Linear => v,
        Scale::Log => v.max(floor).log10(),
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn label(v: f64) -> String {
    if v.abs() >= 1e6 || (v != 0.0 && v.abs() < 1e-2) {
        format!("{v:.0e}")
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

impl Chart {
    /// Renders the chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let pts = self.series.iter().flat_map(|s| s.points.iter().copied());
        let pos_floor = |sel: fn(&(f64, f64)) -> f64| {
            self.series
                .iter()
                .flat_map(|s| s.points.iter())
                .map(sel)
                .filter(|v| *v > 0.0)
                .fold(f64::INFINITY, f64::min)
                .min(1.0)
        };
        let (fx, fy) = (pos_floor(|p| p.0), pos_floor(|p| p.1));
        let (mut x0, mut x1, mut y0, mut y1) = (
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
        );
        for (x, y) in pts {
            let (x, y) = (tf(x, self.x_scale, fx), tf(y, self.y_scale, fy));
            if x.is_finite() && y.is_finite() {
                (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
            }
        }
        if !x0.is_finite() {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        if self.y_scale == Scale::Linear {
            y0 = y0.min(0.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        if y1 <= y0 {
            y1 = y0 + 1.0;
        }
        let px = |x: f64| L + (tf(x, self.x_scale, fx) - x0) / (x1 - x0) * (W - L - R);
        let py = |y: f64| H - B - (tf(y, self.y_scale, fy) - y0) / (y1 - y0) * (H - T - B);
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>"#,
            (W - R + L) / 2.0,
            esc(&self.title)
        );
        // Axes with 5 ticks each (in the transformed space, labelled in data units).
        for i in 0..=4 {
            let f = f64::from(i) / 4.0;
            let (xv, yv) = (x0 + f * (x1 - x0), y0 + f * (y1 - y0));
            let (xd, yd) = match (self.x_scale, self.y_scale) {
                (Scale::Log, Scale::Log) => (10f64.powf(xv), 10f64.powf(yv)),
                (Scale::Log, Scale::Linear) => (10f64.powf(xv), yv),
                (Scale::Linear, Scale::Log) => (xv, 10f64.powf(yv)),
                (Scale::Linear, Scale::Linear) => (xv, yv),
            };
            let gx = L + f * (W - L - R);
            let gy = H - B - f * (H - T - B);
            let _ = write!(
                s,
                r##"<line x1="{gx}" y1="{T}" x2="{gx}" y2="{}" stroke="#ddd"/><text x="{gx}" y="{}" text-anchor="middle">{}</text><line x1="{L}" y1="{gy}" x2="{}" y2="{gy}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
                H - B,
                H - B + 16.0,
                label(xd),
                W - R,
                L - 6.0,
                gy + 4.0,
                label(yd)
            );
        }
        let _ = write!(
            s,
            r##"<rect x="{L}" y="{T}" width="{}" height="{}" fill="none" stroke="#333"/><text x="{}" y="{}" text-anchor="middle">{}</text><text transform="translate(18 {}) rotate(-90)" text-anchor="middle">{}</text>"##,
            W - L - R,
            H - T - B,
            (W - R + L) / 2.0,
            H - 18.0,
            esc(&self.x_label),
            (H - B + T) / 2.0,
            esc(&self.y_label)
        );
        for (i, ser) in self.series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            let path: Vec<String> = ser
                .points
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
                path.join(" ")
            );
            for &(x, y) in &ser.points {
                let _ = write!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"/>"#,
                    px(x),
                    py(y)
                );
            }
            let ly = T + 14.0 + 18.0 * i as f64;
            let _ = write!(
                s,
                r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
                W - R + 12.0,
                W - R + 32.0,
                W - R + 38.0,
                ly + 4.0,
                esc(&ser.name)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_series_and_escapes_labels() {
        let c = Chart {
            title: "p50 <by> rate".into(),
            x_label: "msg/s".into(),
            y_label: "µs".into(),
            x_scale: Scale::Log,
            y_scale: Scale::Log,
            series: vec![
                Series {
                    name: "ringwire".into(),
                    points: vec![(1e3, 5.0), (1e6, 50.0)],
                },
                Series {
                    name: "ringfire".into(),
                    points: vec![(1e3, 9.0), (1e6, 0.0)],
                },
            ],
        };
        let svg = c.to_svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("p50 &lt;by&gt; rate"));
        assert!(svg.contains(">ringfire<"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    }

    #[test]
    fn empty_chart_is_still_valid() {
        let c = Chart {
            title: "empty".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            series: vec![],
        };
        let svg = c.to_svg();
        assert!(svg.contains("</svg>") && !svg.contains("NaN"));
    }
}
