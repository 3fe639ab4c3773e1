//! Turns criterion's results into BENCHMARKS.md tables and SVG charts.
//!
//! `bench_report <criterion dir> <out.md> <svg dir> [title=command ...]`
//!
//! Benchmarks are named `<family>/<implementation>` (for example `push_drain/ringfire`).
//! Every figure is the median of criterion's samples (each sample is one timed run of many
//! iterations; criterion takes at least 10) with the min–max over those samples, in ns per
//! iteration. Each family's table gives ringwire's ratio to every peer, and the floor
//! (`floor/*`) where the family is a round trip. Run by `scripts/bench.sh`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use ringwire::bench::fmt_ns;
use ringwire::bench::plot::{Chart, Scale, Series};

struct Result {
    median: f64,
    min: f64,
    max: f64,
    samples: Vec<f64>,
}

fn load(dir: &Path) -> Option<(String, Result)> {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("new/benchmark.json")).ok()?)
            .ok()?;
    let sample: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("new/sample.json")).ok()?).ok()?;
    let iters = sample["iters"].as_array()?;
    let times = sample["times"].as_array()?;
    let mut per: Vec<f64> = iters
        .iter()
        .zip(times)
        .filter_map(|(i, t)| Some(t.as_f64()? / i.as_f64()?))
        .filter(|x| x.is_finite())
        .collect();
    if per.is_empty() {
        return None;
    }
    per.sort_by(f64::total_cmp);
    let n = per.len();
    let median = if n % 2 == 1 {
        per[n / 2]
    } else {
        (per[n / 2 - 1] + per[n / 2]) / 2.0
    };
    Some((
        meta["full_id"].as_str()?.to_string(),
        Result {
            median,
            min: per[0],
            max: per[n - 1],
            samples: per,
        },
    ))
}

/// Every benchmark directory below `root` (criterion nests `a/b/c` ids as directories).
fn bench_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        if d.join("new/benchmark.json").is_file() {
            out.push(d.clone());
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir()
                    && p.file_name()
                        .is_some_and(|n| n != "new" && n != "base" && n != "report")
                {
                    stack.push(p);
                }
            }
        }
    }
    out
}

fn ns(x: f64) -> String {
    if x < 100.0 {
        format!("{x:.1} ns")
    } else {
        fmt_ns(x.round() as u64)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: bench_report <criterion dir> <out.md> <svg dir> [family=command ...]");
        std::process::exit(2);
    }
    let (crit, out_md, svg_dir) = (
        PathBuf::from(&args[1]),
        PathBuf::from(&args[2]),
        PathBuf::from(&args[3]),
    );
    let commands: BTreeMap<String, String> = args[4..]
        .iter()
        .filter_map(|a| {
            a.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let mut families: BTreeMap<String, BTreeMap<String, Result>> = BTreeMap::new();
    let dirs = bench_dirs(&crit);
    if dirs.is_empty() {
        eprintln!("{}: no criterion results", crit.display());
        std::process::exit(1);
    }
    for d in dirs {
        if let Some((id, r)) = load(&d) {
            // `family/implementation`, where the family may itself hold a `/` (spsc/u64).
            let (fam, imp) = id.rsplit_once('/').unwrap_or((id.as_str(), "ringwire"));
            families
                .entry(fam.to_string())
                .or_default()
                .insert(imp.to_string(), r);
        }
    }
    let floor = families
        .get("floor")
        .and_then(|f| f.values().next())
        .map(|r| r.median);
    let _ = std::fs::create_dir_all(&svg_dir);
    let mut md = String::new();
    for (fam, imps) in &families {
        let _ = writeln!(md, "### `{fam}`\n");
        let head = fam.split('/').next().unwrap_or(fam);
        if let Some(cmd) = commands.get(fam).or_else(|| commands.get(head)) {
            let _ = writeln!(md, "Reproduce: `{cmd}`\n");
        }
        let rw = imps.get("ringwire").map(|r| r.median);
        let round_trip = fam.contains("round_trip");
        let _ = write!(
            md,
            "| implementation | median | min – max | ringwire time ÷ this (below 1: ringwire faster) |"
        );
        if round_trip && floor.is_some() {
            let _ = write!(md, " this ÷ floor |");
        }
        let _ = writeln!(md);
        let _ = write!(md, "|---|---:|---:|---:|");
        if round_trip && floor.is_some() {
            let _ = write!(md, "---:|");
        }
        let _ = writeln!(md);
        for (imp, r) in imps {
            let ratio = rw.map_or("–".to_string(), |w| format!("{:.2}", w / r.median));
            let _ = write!(
                md,
                "| {imp} | {} | {} – {} | {ratio} |",
                ns(r.median),
                ns(r.min),
                ns(r.max)
            );
            if let (true, Some(f)) = (round_trip, floor) {
                let _ = write!(md, " {:.2} |", r.median / f);
            }
            let _ = writeln!(md);
        }
        let svg = svg_dir.join(format!("{}.svg", fam.replace('/', "_")));
        let chart = Chart {
            title: format!("{fam}: time per iteration across criterion samples"),
            x_label: "share of samples at or below (%)".into(),
            y_label: "ns per iteration".into(),
            x_scale: Scale::Linear,
            y_scale: Scale::Log,
            series: imps
                .iter()
                .map(|(imp, r)| Series {
                    name: imp.clone(),
                    points: r
                        .samples
                        .iter()
                        .enumerate()
                        .map(|(i, &v)| (100.0 * (i + 1) as f64 / r.samples.len() as f64, v))
                        .collect(),
                })
                .collect(),
        };
        if std::fs::write(&svg, chart.to_svg()).is_ok() {
            let rel = svg
                .strip_prefix(out_md.parent().unwrap_or(Path::new(".")))
                .unwrap_or(&svg);
            let _ = writeln!(md, "\n![{fam}]({})\n", rel.display());
        }
    }
    if let Err(e) = std::fs::write(&out_md, md) {
        eprintln!("{}: {e}", out_md.display());
        std::process::exit(1);
    }
}
