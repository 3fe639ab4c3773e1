//! Turns repeated benchmark runs into BENCHMARKS.md tables and SVG charts. Run by
//! `scripts/bench.sh`, which runs every measurement several times (5 by default) and keeps
//! each run's output apart.
//!
//! ```text
//! bench_report criterion <out.md> <svg dir> <run dir>... [--cmd family=command]...
//! bench_report latency <out.md> <label>::<json pointer>::<command>::<run.json>[,<run.json>...]...
//! bench_report replication <out.md> <run.json>...
//! ```
//!
//! * `criterion`: each run dir is one criterion output tree (`<family>/<implementation>`
//!   ids, e.g. `push_drain/ringfire`). A run's figure for a benchmark is the median over that
//!   run's criterion samples (ns per iteration); the table gives the median of those run
//!   figures and their min–max across runs, ringwire's ratio to every peer, and the floor
//!   (`floor/*`) where the family is a round trip.
//! * `latency`: each `ringwire bench … --json` run file holds an HDR summary (`p50_ns`,
//!   `p99_ns`, …) at the JSON pointer; one table row per label with the median of the runs'
//!   p50 and p99 and their min–max.
//! * `replication`: each file is the `JSON: {...}` line of one run of the replication bench;
//!   one row per transport and configuration with both implementations' p50 and p99 (median
//!   over runs, min–max) and the ratio of the p50 medians.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use ringwire::bench::fmt_ns;
use ringwire::bench::median_min_max;
use ringwire::bench::plot::{Chart, Scale, Series};

/// Median (mean of the middle two for an even count) of the finite values; NaN if none.
fn median(xs: &[f64]) -> f64 {
    median_min_max(xs).map_or(f64::NAN, |m| m.0)
}

/// A figure measured in several runs: the median over runs and the min–max across them.
#[derive(Debug, Clone, PartialEq)]
struct Agg {
    median: f64,
    min: f64,
    max: f64,
    runs: usize,
}

impl Agg {
    fn of(per_run: &[f64]) -> Option<Agg> {
        let (median, min, max) = median_min_max(per_run)?;
        Some(Agg {
            median,
            min,
            max,
            runs: per_run.iter().filter(|x| x.is_finite()).count(),
        })
    }

    fn cell(&self) -> String {
        format!("{} | {} – {}", ns(self.median), ns(self.min), ns(self.max))
    }
}

fn ns(x: f64) -> String {
    if !x.is_finite() {
        "–".into()
    } else if x < 100.0 {
        format!("{x:.1} ns")
    } else {
        fmt_ns(x.round() as u64)
    }
}

// ---------------------------------------------------------------------------------------
// criterion

/// One benchmark in one criterion run: ns per iteration of every sample, sorted.
#[derive(Debug, Clone)]
struct Run {
    samples: Vec<f64>,
}

impl Run {
    fn median(&self) -> f64 {
        median(&self.samples)
    }
}

/// Parses one criterion benchmark (`new/benchmark.json` and `new/sample.json` texts).
fn parse_bench(meta: &str, sample: &str) -> Option<(String, Run)> {
    let meta: serde_json::Value = serde_json::from_str(meta).ok()?;
    let sample: serde_json::Value = serde_json::from_str(sample).ok()?;
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
    Some((meta["full_id"].as_str()?.to_string(), Run { samples: per }))
}

fn load(dir: &Path) -> Option<(String, Run)> {
    let meta = std::fs::read_to_string(dir.join("new/benchmark.json")).ok()?;
    let sample = std::fs::read_to_string(dir.join("new/sample.json")).ok()?;
    parse_bench(&meta, &sample)
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

/// family → implementation → that benchmark in every run that has it.
type Families = BTreeMap<String, BTreeMap<String, Vec<Run>>>;

/// Splits `family/implementation`, where the family may itself hold a `/` (spsc/u64).
fn split_id(id: &str) -> (&str, &str) {
    id.rsplit_once('/').unwrap_or((id, "ringwire"))
}

fn add_run(fams: &mut Families, id: &str, run: Run) {
    let (fam, imp) = split_id(id);
    fams.entry(fam.to_string())
        .or_default()
        .entry(imp.to_string())
        .or_default()
        .push(run);
}

/// Aggregates each benchmark over runs: the median of the run medians and their min–max.
fn aggregate(runs: &[Run]) -> Option<Agg> {
    Agg::of(&runs.iter().map(Run::median).collect::<Vec<_>>())
}

/// The markdown for every family; `svg(fam, imps)` draws the chart and returns its link.
fn criterion_tables(
    fams: &Families,
    commands: &BTreeMap<String, String>,
    mut svg: impl FnMut(&str, &BTreeMap<String, Vec<Run>>) -> Option<String>,
) -> String {
    let floor = fams
        .get("floor")
        .and_then(|f| f.values().next())
        .and_then(|r| aggregate(r))
        .map(|a| a.median);
    let mut md = String::new();
    for (fam, imps) in fams {
        let _ = writeln!(md, "### `{fam}`\n");
        let head = fam.split('/').next().unwrap_or(fam);
        if let Some(cmd) = commands.get(fam).or_else(|| commands.get(head)) {
            let _ = writeln!(md, "Reproduce: `{cmd}`\n");
        }
        let aggs: BTreeMap<&str, Agg> = imps
            .iter()
            .filter_map(|(k, r)| Some((k.as_str(), aggregate(r)?)))
            .collect();
        let rw = aggs.get("ringwire").map(|a| a.median);
        let with_floor = fam.contains("round_trip") && floor.is_some();
        let _ = write!(
            md,
            "| implementation | median of run medians | min – max across runs | runs | ringwire time ÷ this (below 1: ringwire faster) |"
        );
        if with_floor {
            let _ = write!(md, " this ÷ floor |");
        }
        let _ = write!(md, "\n|---|---:|---:|---:|---:|");
        if with_floor {
            let _ = write!(md, "---:|");
        }
        let _ = writeln!(md);
        for (imp, a) in &aggs {
            let ratio = rw.map_or("–".to_string(), |w| format!("{:.2}", w / a.median));
            let _ = write!(md, "| {imp} | {} | {} | {ratio} |", a.cell(), a.runs);
            if let (true, Some(f)) = (with_floor, floor) {
                let _ = write!(md, " {:.2} |", a.median / f);
            }
            let _ = writeln!(md);
        }
        if let Some(link) = svg(fam, imps) {
            let _ = writeln!(md, "\n![{fam}]({link})");
        }
        let _ = writeln!(md);
    }
    md
}

/// A chart of every sample of every run, per implementation, as a distribution.
fn chart(fam: &str, imps: &BTreeMap<String, Vec<Run>>) -> Chart {
    Chart {
        title: format!("{fam}: time per iteration, all criterion samples of all runs"),
        x_label: "share of samples at or below (%)".into(),
        y_label: "ns per iteration".into(),
        x_scale: Scale::Linear,
        y_scale: Scale::Log,
        series: imps
            .iter()
            .map(|(imp, runs)| {
                let mut all: Vec<f64> = runs.iter().flat_map(|r| r.samples.clone()).collect();
                all.sort_by(f64::total_cmp);
                let n = all.len() as f64;
                Series {
                    name: imp.clone(),
                    points: all
                        .iter()
                        .enumerate()
                        .map(|(i, &v)| (100.0 * (i + 1) as f64 / n, v))
                        .collect(),
                }
            })
            .collect(),
    }
}

fn cmd_criterion(args: &[String]) -> Result<(), String> {
    let mut pos = Vec::new();
    let mut commands = BTreeMap::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--cmd" {
            let kv = it.next().ok_or("--cmd needs family=command")?;
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("--cmd {kv:?}: expected family=command"))?;
            commands.insert(k.to_string(), v.to_string());
        } else {
            pos.push(PathBuf::from(a));
        }
    }
    if pos.len() < 3 {
        return Err("criterion: need <out.md> <svg dir> <run dir>...".into());
    }
    let (out_md, svg_dir, runs) = (&pos[0], &pos[1], &pos[2..]);
    let mut fams = Families::new();
    for run in runs {
        let dirs = bench_dirs(run);
        if dirs.is_empty() {
            eprintln!("{}: no criterion results (run skipped)", run.display());
        }
        for d in dirs {
            if let Some((id, r)) = load(&d) {
                add_run(&mut fams, &id, r);
            }
        }
    }
    if fams.is_empty() {
        return Err("no criterion results in any run".into());
    }
    let _ = std::fs::create_dir_all(svg_dir);
    let base = out_md.parent().unwrap_or(Path::new(".")).to_path_buf();
    let md = criterion_tables(&fams, &commands, |fam, imps| {
        let svg = svg_dir.join(format!("{}.svg", fam.replace('/', "_")));
        std::fs::write(&svg, chart(fam, imps).to_svg()).ok()?;
        let rel = svg.strip_prefix(&base).unwrap_or(&svg);
        Some(rel.display().to_string())
    });
    std::fs::write(out_md, md).map_err(|e| format!("{}: {e}", out_md.display()))
}

// ---------------------------------------------------------------------------------------
// latency runs of `ringwire bench … --json`

/// p50 and p99 (ns) of the HDR summary at `pointer` in one run's JSON text.
fn summary_at(text: &str, pointer: &str) -> Option<(f64, f64)> {
    let v: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    let s = v.pointer(pointer)?;
    Some((s["p50_ns"].as_f64()?, s["p99_ns"].as_f64()?))
}

/// One table row: label, command, and every run's JSON text.
fn latency_row(label: &str, cmd: &str, pointer: &str, runs: &[String]) -> String {
    let (p50, p99): (Vec<f64>, Vec<f64>) =
        runs.iter().filter_map(|t| summary_at(t, pointer)).unzip();
    match (Agg::of(&p50), Agg::of(&p99)) {
        (Some(a), Some(b)) => format!(
            "| {label} | {} | {} | {} of {} | `{cmd}` |\n",
            a.cell(),
            b.cell(),
            a.runs,
            runs.len()
        ),
        _ => format!(
            "| {label} | – | – | – | – | 0 of {} | `{cmd}` |\n",
            runs.len()
        ),
    }
}

fn cmd_latency(args: &[String]) -> Result<(), String> {
    let out_md = args.first().ok_or("latency: need <out.md> <spec>...")?;
    let mut md = String::from(
        "| measurement | p50: median of runs | p50 min – max | p99: median of runs | p99 min – max | runs | reproduce |\n\
         |---|---:|---:|---:|---:|---:|---|\n",
    );
    for spec in &args[1..] {
        let parts: Vec<&str> = spec.splitn(4, "::").collect();
        let [label, pointer, cmd, files] = parts[..] else {
            return Err(format!("{spec:?}: expected label::pointer::command::files"));
        };
        let runs: Vec<String> = files
            .split(',')
            .filter(|f| !f.is_empty())
            .map(|f| std::fs::read_to_string(f).unwrap_or_default())
            .collect();
        md.push_str(&latency_row(label, cmd, pointer, &runs));
    }
    std::fs::write(out_md, md).map_err(|e| format!("{out_md}: {e}"))
}

// ---------------------------------------------------------------------------------------
// replication runs

/// One row of one run: (implementation, transport, config, rate) → (p50, p99, error-free).
type ReplKey = (String, String, String, u64);

fn replication_rows(text: &str) -> Vec<(ReplKey, f64, f64, bool)> {
    let json = text.trim().strip_prefix("JSON: ").unwrap_or(text.trim());
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return Vec::new();
    };
    let Some(rows) = v["rows"].as_array() else {
        return Vec::new();
    };
    rows.iter()
        .filter_map(|r| {
            let key = (
                r["implementation"].as_str()?.to_string(),
                r["transport"].as_str()?.to_string(),
                r["config"].as_str()?.to_string(),
                r["rate"].as_u64()?,
            );
            let lat = &r["latency"];
            Some((
                key,
                lat["p50_ns"].as_f64()?,
                lat["p99_ns"].as_f64()?,
                r["error"].is_null(),
            ))
        })
        .collect()
}

fn replication_table(runs: &[String]) -> String {
    // (transport, config, rate) → implementation → (p50s, p99s, runs with errors)
    type Cell = (Vec<f64>, Vec<f64>, usize);
    let mut cells: BTreeMap<(u64, String, String), BTreeMap<String, Cell>> = BTreeMap::new();
    for text in runs {
        for ((imp, t, c, rate), p50, p99, ok) in replication_rows(text) {
            let e = cells
                .entry((rate, t, c))
                .or_default()
                .entry(imp)
                .or_default();
            e.0.push(p50);
            e.1.push(p99);
            e.2 += usize::from(!ok);
        }
    }
    let mut md = String::from(
        "| rate (msg/s) | transport | config | ringwire p50 | min – max | ringfire p50 | min – max | p50 ratio ringwire ÷ ringfire | ringwire p99 | ringfire p99 | runs (ringwire/ringfire) | runs with errors |\n\
         |---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for ((rate, t, c), imps) in &cells {
        let get = |imp: &str| imps.get(imp).map(|(a, b, e)| (Agg::of(a), Agg::of(b), *e));
        let (w50, w99, we) = get("ringwire").unwrap_or((None, None, 0));
        let (f50, f99, fe) = get("ringfire").unwrap_or((None, None, 0));
        let ratio = match (&w50, &f50) {
            (Some(w), Some(f)) => format!("{:.2}", w.median / f.median),
            _ => "–".into(),
        };
        let med = |a: &Option<Agg>| a.as_ref().map_or("–".into(), |a| ns(a.median));
        let range = |a: &Option<Agg>| {
            a.as_ref()
                .map_or("–".into(), |a| format!("{} – {}", ns(a.min), ns(a.max)))
        };
        let runs = |a: &Option<Agg>| a.as_ref().map_or(0, |a| a.runs);
        let _ = writeln!(
            md,
            "| {rate} | {t} | {c} | {} | {} | {} | {} | {ratio} | {} | {} | {}/{} | {} |",
            med(&w50),
            range(&w50),
            med(&f50),
            range(&f50),
            med(&w99),
            med(&f99),
            runs(&w50),
            runs(&f50),
            we + fe
        );
    }
    md
}

fn cmd_replication(args: &[String]) -> Result<(), String> {
    let out_md = args
        .first()
        .ok_or("replication: need <out.md> <run.json>...")?;
    let runs: Vec<String> = args[1..]
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap_or_default())
        .collect();
    std::fs::write(out_md, replication_table(&runs)).map_err(|e| format!("{out_md}: {e}"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let r = match args.get(1).map(String::as_str) {
        Some("criterion") => cmd_criterion(&args[2..]),
        Some("latency") => cmd_latency(&args[2..]),
        Some("replication") => cmd_replication(&args[2..]),
        _ => Err(
            "usage: bench_report criterion|latency|replication … (see the source header)".into(),
        ),
    };
    if let Err(e) = r {
        eprintln!("bench_report: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A criterion `sample.json` whose samples take `per_iter` ns per iteration each.
    fn sample_json(per_iter: &[f64]) -> String {
        let iters: Vec<String> = (1..=per_iter.len())
            .map(|i| format!("{}.0", i * 10))
            .collect();
        let times: Vec<String> = per_iter
            .iter()
            .enumerate()
            .map(|(i, t)| format!("{:?}", t * ((i + 1) * 10) as f64))
            .collect();
        format!(
            "{{\"sampling_mode\":\"Linear\",\"iters\":[{}],\"times\":[{}]}}",
            iters.join(","),
            times.join(",")
        )
    }

    fn meta_json(id: &str) -> String {
        format!("{{\"group_id\":\"x\",\"full_id\":\"{id}\",\"directory_name\":\"x\"}}")
    }

    #[test]
    fn median_odd_even_and_nan() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[f64::NAN, 5.0]), 5.0);
    }

    #[test]
    fn parse_bench_divides_time_by_iterations() {
        let (id, run) =
            parse_bench(&meta_json("spsc/u64/rtrb"), &sample_json(&[7.0, 5.0, 6.0])).unwrap();
        assert_eq!(id, "spsc/u64/rtrb");
        assert_eq!(run.samples, vec![5.0, 6.0, 7.0]);
        assert_eq!(run.median(), 6.0);
        assert_eq!(split_id(&id), ("spsc/u64", "rtrb"));
        assert!(parse_bench("{}", "not json").is_none());
        assert!(parse_bench(&meta_json("a/b"), "{\"iters\":[],\"times\":[]}").is_none());
    }

    /// Five runs: the figure is the median of the five run medians, min–max across runs,
    /// not over the pooled samples.
    #[test]
    fn aggregates_median_of_run_medians() {
        let runs: Vec<Run> = [
            vec![10.0, 11.0, 12.0],  // median 11
            vec![20.0, 21.0, 100.0], // median 21
            vec![9.0, 10.0, 10.5],   // median 10
            vec![1.0, 13.0, 14.0],   // median 13
            vec![12.0, 12.0, 12.0],  // median 12
        ]
        .into_iter()
        .map(|s| parse_bench(&meta_json("f/x"), &sample_json(&s)).unwrap().1)
        .collect();
        let a = aggregate(&runs).unwrap();
        assert_eq!(
            a,
            Agg {
                median: 12.0,
                min: 10.0,
                max: 21.0,
                runs: 5
            }
        );
        assert!(aggregate(&[]).is_none());
    }

    #[test]
    fn table_has_ratios_to_ringwire_and_floor() {
        let mut fams = Families::new();
        let r = |v: f64| Run {
            samples: vec![v, v, v],
        };
        for (w, p, i, f) in [
            (200.0, 100.0, 400.0, 100.0),
            (220.0, 110.0, 440.0, 90.0),
            (210.0, 105.0, 420.0, 110.0),
        ] {
            add_run(&mut fams, "round_trip_2proc/ringwire", r(w));
            add_run(&mut fams, "round_trip_2proc/ringfire", r(p));
            add_run(&mut fams, "round_trip_2proc/iceoryx2", r(i));
            add_run(&mut fams, "floor/cacheline_round_trip", r(f));
        }
        // iceoryx2 failed in one extra run of ringwire's: runs are counted per implementation.
        add_run(&mut fams, "round_trip_2proc/ringwire", r(210.0));
        let cmds = BTreeMap::from([(
            "round_trip_2proc".to_string(),
            "cargo bench -p ringwire-tests --bench handoff".to_string(),
        )]);
        let md = criterion_tables(&fams, &cmds, |f, _| Some(format!("{f}.svg")));
        assert!(md.contains("Reproduce: `cargo bench -p ringwire-tests --bench handoff`"));
        // ringwire: median of 200, 220, 210, 210 = 210; ringfire 105; iceoryx2 420; floor 100.
        assert!(
            md.contains("| ringwire | 210 ns | 200 ns – 220 ns | 4 | 1.00 | 2.10 |"),
            "{md}"
        );
        assert!(
            md.contains("| ringfire | 105 ns | 100 ns – 110 ns | 3 | 2.00 | 1.05 |"),
            "{md}"
        );
        assert!(
            md.contains("| iceoryx2 | 420 ns | 400 ns – 440 ns | 3 | 0.50 | 4.20 |"),
            "{md}"
        );
        // The floor's own table has no floor column.
        assert!(md.contains("| cacheline_round_trip | 100 ns | 90.0 ns – 110 ns | 3 | – |\n"));
        assert!(md.contains("![round_trip_2proc](round_trip_2proc.svg)"));
    }

    #[test]
    fn reads_criterion_run_dirs_from_disk() {
        let root = std::env::temp_dir().join(format!("bench-report-test-{}", std::process::id()));
        for (run, v) in [("run1", 10.0), ("run2", 30.0), ("run3", 20.0)] {
            let d = root.join(run).join("queues/spsc/u64/disruptor/new");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("benchmark.json"), meta_json("spsc/u64/disruptor")).unwrap();
            std::fs::write(d.join("sample.json"), sample_json(&[v, v + 1.0, v - 1.0])).unwrap();
            // criterion's `base` copy must not count as another run.
            let b = root.join(run).join("queues/spsc/u64/disruptor/base");
            std::fs::create_dir_all(&b).unwrap();
            std::fs::write(b.join("benchmark.json"), meta_json("spsc/u64/disruptor")).unwrap();
        }
        let mut fams = Families::new();
        for run in ["run1", "run2", "run3"] {
            for d in bench_dirs(&root.join(run)) {
                let (id, r) = load(&d).unwrap();
                add_run(&mut fams, &id, r);
            }
        }
        let _ = std::fs::remove_dir_all(&root);
        let a = aggregate(&fams["spsc/u64"]["disruptor"]).unwrap();
        assert_eq!((a.median, a.min, a.max, a.runs), (20.0, 10.0, 30.0, 3));
        let svg = chart("spsc/u64", &fams["spsc/u64"]).to_svg();
        assert!(svg.contains("<svg"));
    }

    #[test]
    fn latency_rows_from_json_runs() {
        let run = |p50: u64, p99: u64| {
            format!(
                "{{\"rate\":1000,\"reader\":{{\"received\":5,\"summary\":{{\"count\":5,\"p50_ns\":{p50},\"p90_ns\":1,\"p99_ns\":{p99},\"p999_ns\":1,\"max_ns\":1,\"mean_ns\":1.0}}}}}}"
            )
        };
        let runs = vec![
            run(300, 9000),
            run(100, 7000),
            run(200, 8000),
            "garbage".to_string(),
        ];
        let row = latency_row("wake", "ringwire bench x", "/reader/summary", &runs);
        assert_eq!(
            row,
            "| wake | 200 ns | 100 ns – 300 ns | 8000 ns | 7000 ns – 9000 ns | 3 of 4 | `ringwire bench x` |\n"
        );
        assert!(latency_row("x", "c", "/nope", &runs).contains("0 of 4"));
    }

    #[test]
    fn replication_medians_and_ratio() {
        let row = |imp: &str, t: &str, p50: u64, err: bool| {
            format!(
                "{{\"implementation\":\"{imp}\",\"transport\":\"{t}\",\"config\":\"default\",\"rate\":1000,\"seconds\":3,\"latency\":{{\"count\":1,\"p50_ns\":{p50},\"p90_ns\":0,\"p99_ns\":{},\"p999_ns\":0,\"max_ns\":0,\"mean_ns\":0.0}},\"error\":{}}}",
                p50 * 2,
                if err { "\"lost\"" } else { "null" }
            )
        };
        let run = |w: u64, f: u64, err: bool| {
            format!(
                "JSON: {{\"bench\":\"replication\",\"rows\":[{},{}]}}",
                row("ringwire", "tcp", w, err),
                row("ringfire", "tcp", f, false)
            )
        };
        let runs = vec![
            run(80_000, 30_000, false),
            run(60_000, 40_000, true),
            run(70_000, 35_000, false),
        ];
        let md = replication_table(&runs);
        assert!(
            md.contains("| 1000 | tcp | default | 70.0 µs | 60.0 µs – 80.0 µs | 35.0 µs | 30.0 µs – 40.0 µs | 2.00 | 140.0 µs | 70.0 µs | 3/3 | 1 |"),
            "{md}"
        );
        assert!(replication_rows("not json").is_empty());
    }
}
