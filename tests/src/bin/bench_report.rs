//! Turns repeated benchmark runs into BENCHMARKS.md tables and SVG charts. Run by
//! `scripts/bench.sh`, which runs every measurement several times (5 by default) and keeps
//! each run's output apart.
//!
//! ```text
//! bench_report criterion <out.md> <svg dir> <run dir>... [--cmd family=command]... [--note family=text]... [--runs-json <file>]
//! bench_report criterion-json <out.md> <runs.json> [--cmd family=command]... [--note family=text]...
//! bench_report latency <out.md> <label>::<json pointer>::<command>::<run.json>[,<run.json>...]...
//! bench_report replication <out.md> <run.json>...
//! bench_report queue-targets <out.md> <queues_paired.json>
//! bench_report queue-target-runs <out.md> <name>=<queues_paired.json>...
//! bench_report queue-target-states <out.md> <split ns> <queues_paired.json>...
//! ```
//!
//! * `criterion`: each run dir is one criterion output tree (`<family>/<implementation>`
//!   ids, e.g. `push_drain/ringfire`). A run's figure for a benchmark is the median over that
//!   run's criterion samples (ns per iteration); the table gives the median of those run
//!   figures and their min–max across runs, ringwire's ratio to every peer and each
//!   implementation's ratio to the floor where the family is a round trip. The floor is the
//!   p50 cache-line round trip of `ringwire bench floor --json` (each round trip timed on
//!   its own, the timer's cost included), read from `ringwire_bench_floor.json` in the run
//!   dir: scripts/bench.sh runs it in each criterion run, right after that run's benches.
//!   Every ratio is computed within one run (both figures from run k) and the table gives
//!   the median of the per-run ratios with their min–max; no run is left out of it.
//!   `ringwire_core` (the core MPMC queue) gets a ratio column of its own. `--runs-json`
//!   writes every run's figures (each benchmark's median per run, the floor per run) to a
//!   file that scripts/bench.sh keeps in docs/bench/.
//! * `criterion-json`: the same tables from such a file, without the charts.
//! * `latency`: each `ringwire bench … --json` run file holds an HDR summary (`p50_ns`,
//!   `p99_ns`, …) at the JSON pointer; one table row per label with the median of the runs'
//!   p50 and p99 and their min–max. A run without a summary, or a hand-off run whose reader
//!   did not get every record once and in order, is a run with errors and left out.
//! * `replication`: each file is the `JSON: {...}` line of one run of the replication bench;
//!   one row per transport and configuration with both implementations' p50 and p99 (median
//!   over the runs without errors, min–max), the p50 ratio within each run (median and
//!   min–max of the per-run ratios), the producer's lateness and the CPU each side used
//!   (`cpu_cores`, median of the clean runs). Runs with errors are left out of every
//!   figure; with fewer than half the runs clean a figure is "–". A configuration whose
//!   child process crashed (listed under `failed`, no row) is a run with errors too.
//! * `queue-targets`: issue 4's queue targets against the paired queue run (the `--json`
//!   file of `cargo bench -p ringwire-tests --bench queues -- --paired`): for each target,
//!   the peer's time ÷ ringwire's within each round, the median over the rounds with
//!   p10 – p90, how many rounds reach the target, and the verdict (met when the median
//!   does; a median just under the target is shown with the decimals that keep it under,
//!   1.4996 and not "1.50"). A case or queue missing from the file is "not measured", never
//!   a pass. A run that measured the line-transfer floor (its `line_transfer`) also gets
//!   that floor (per round, the larger of its read and write figures: a queue makes both
//!   moves at once) and rtrb's time per 64-byte line of items ÷ it in the SPSC cases: the
//!   most a queue moving each line in the time of the floor could reach against rtrb.
//! * `queue-target-runs`: the same targets over several paired runs, one column per run
//!   (each the median of its per-round ratios) and how many runs meet each target, with a
//!   row of ringwire's SPSC round trip per run, which shows the host's state (this VM's
//!   two cores sometimes share a cache and sometimes do not, and the ratios follow), a row
//!   of its line-transfer floor and, under the targets, rtrb ÷ that floor in the SPSC
//!   cases ("–" for a run without a floor).
//! * `queue-target-states`: the same targets over the rounds of several paired runs pooled,
//!   each round put with the host state it ran in: ringwire's SPSC round trip in that round
//!   below `split ns` (the two cores shared a cache) or not. For each state: its rounds,
//!   the median round trip, the medians of the line-transfer floor's read and write
//!   figures, per target the median, p10 – p90 and the rounds reaching it of the
//!   per-round ratios, and under the targets rtrb ÷ the floor in the SPSC cases with the
//!   rounds where it reaches 1.5 (where it does not, no queue at the floor would have met
//!   1.5× rtrb). A round without a round trip is left out.

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
    /// Which run (run directory, in command-line order) it came from: ratios pair the
    /// figures of one run.
    run: usize,
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
    Some((
        meta["full_id"].as_str()?.to_string(),
        Run {
            run: 0,
            samples: per,
        },
    ))
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

/// `num ÷ den` within each run that measured both (figures of the same run `k`), one ratio
/// per such run. Never a ratio of medians taken from different runs: on a host with two
/// states those can pair a figure of one state with a figure of the other.
fn per_run_ratios(num: &[Run], den: &[Run]) -> Vec<f64> {
    num.iter()
        .filter_map(|n| {
            let d = den.iter().find(|d| d.run == n.run)?;
            Some(n.median() / d.median())
        })
        .filter(|x| x.is_finite())
        .collect()
}

/// "median (min – max)" of per-run ratios; "–" when no run had both figures.
fn ratio_cell(xs: &[f64]) -> String {
    match Agg::of(xs) {
        None => "–".into(),
        Some(a) if a.runs == 1 => format!("{:.2}", a.median),
        Some(a) => format!("{:.2} ({:.2} – {:.2})", a.median, a.min, a.max),
    }
}

/// The floor the round-trip tables divide by: per run, the p50 of `ringwire bench floor
/// --json`'s cache-line round trip (a [`Run`] of one sample), and that run's
/// `timer_overhead_ns` (the `Instant::now()` pair each of its round trips includes).
#[derive(Debug, Clone, Default)]
struct Floor {
    runs: Vec<Run>,
    timer_ns: Vec<f64>,
}

/// Where scripts/bench.sh leaves each criterion run's `ringwire bench floor --json` output.
const FLOOR_FILE: &str = "ringwire_bench_floor.json";

/// The floor p50 and timer overhead (ns) of one `ringwire bench floor --json` output.
fn parse_floor(text: &str) -> Option<(f64, Option<f64>)> {
    let v: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    let p50 = v.pointer("/cacheline_round_trip/p50_ns")?.as_f64()?;
    (p50 > 0.0).then_some((p50, v["timer_overhead_ns"].as_f64()))
}

/// The "this ÷ floor" cell: the ratio in every run that has both figures (none left out,
/// whatever its value), and how many of those ratios are below 1.
fn floor_ratio_cell(mine: &[Run], floor: &[Run]) -> (String, usize) {
    let all = per_run_ratios(mine, floor);
    let below = all.iter().filter(|&&x| x < 1.0).count();
    let mut cell = ratio_cell(&all);
    if !all.is_empty() && all.len() < mine.len() {
        let _ = write!(
            cell,
            ", {} of {} runs (no floor figure in the others)",
            all.len(),
            mine.len()
        );
    }
    (cell, below)
}

/// The implementation a row's "ringwire time ÷ this" divides: rows of the 64-byte-aligned
/// record (`*_a64`) against `ringwire_a64` (same record layout) where it was measured.
fn reference_for<'a>(imp: &str, imps: &BTreeMap<String, Vec<Run>>) -> &'a str {
    if imp.ends_with("_a64") && imps.contains_key("ringwire_a64") {
        "ringwire_a64"
    } else {
        "ringwire"
    }
}

/// Implementations that get a ratio column of their own beside ringwire's, in the
/// families that measured them: `ringwire_core` (the core `MpmcQueue` on bytes, without the
/// std handle's waiting) in `mpmc_2p2c*`.
const EXTRA_REFERENCES: &[&str] = &["ringwire_core"];

/// The markdown for every family; `svg(fam, imps)` draws the chart and returns its link.
/// `notes` (family → text) are printed under that family's table.
fn criterion_tables(
    fams: &Families,
    floor: &Floor,
    commands: &BTreeMap<String, String>,
    notes: &BTreeMap<String, Vec<String>>,
    mut svg: impl FnMut(&str, &BTreeMap<String, Vec<Run>>) -> Option<String>,
) -> String {
    let floor_runs: Option<&[Run]> = (!floor.runs.is_empty()).then_some(&floor.runs[..]);
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
        let floor_of = floor_runs.filter(|_| fam.contains("round_trip"));
        let a64 = imps.contains_key("ringwire_a64");
        let _ = write!(
            md,
            "| implementation | median of run medians | min – max across runs | runs | ringwire time ÷ this, within each run: median (min – max){} (below 1: ringwire faster) |",
            if a64 {
                "; `*_a64` rows: ringwire_a64's time"
            } else {
                ""
            }
        );
        let extra: Vec<&str> = EXTRA_REFERENCES
            .iter()
            .copied()
            .filter(|r| imps.contains_key(*r))
            .collect();
        for r in &extra {
            let _ = write!(
                md,
                " {r} time ÷ this, within each run: median (min – max) |"
            );
        }
        if floor_of.is_some() {
            let _ = write!(
                md,
                " this ÷ floor (`ringwire bench floor` p50), within each run: median (min – max) |"
            );
        }
        let _ = write!(md, "\n|---|---:|---:|---:|---:|");
        for _ in &extra {
            let _ = write!(md, "---:|");
        }
        if floor_of.is_some() {
            let _ = write!(md, "---:|");
        }
        let _ = writeln!(md);
        let mut below_floor = Vec::new();
        for (imp, a) in &aggs {
            let mine = &imps[*imp];
            let ratio = imps
                .get(reference_for(imp, imps))
                .map_or("–".to_string(), |w| ratio_cell(&per_run_ratios(w, mine)));
            let _ = write!(md, "| {imp} | {} | {} | {ratio} |", a.cell(), a.runs);
            for r in &extra {
                let _ = write!(md, " {} |", ratio_cell(&per_run_ratios(&imps[*r], mine)));
            }
            if let Some(f) = floor_of {
                let (cell, low) = floor_ratio_cell(mine, f);
                if low > 0 {
                    let both = per_run_ratios(mine, f).len();
                    below_floor.push(format!("{imp} ({low} of {both} runs)"));
                }
                let _ = write!(md, " {cell} |");
            }
            let _ = writeln!(md);
        }
        if floor_of.is_some() {
            let timer = Agg::of(&floor.timer_ns).map_or(String::new(), |a| {
                format!(", {} in these runs", ns(a.median))
            });
            let _ = writeln!(
                md,
                "\n\"this ÷ floor\": the row's figure in run k (criterion's median time per round trip, the round trips timed back to back as a whole) divided by run k's floor: the p50 of `ringwire bench floor --json`'s cache-line round trip, run in the same run right after its handoff bench (scripts/bench.sh). The floor times each round trip on its own, so its p50 includes one `Instant::now()` pair (`timer_overhead_ns`{timer}), which the criterion figures do not. The median and min – max cover every run with both figures, whatever the ratio; the criterion `floor/cacheline_round_trip` bench (its own table) is not used here."
            );
        }
        if !below_floor.is_empty() {
            let _ = writeln!(
                md,
                "\nBelow 1 (the figure under that run's floor p50) in: {}; those ratios are in the column as computed.",
                below_floor.join(", ")
            );
        }
        if imps.contains_key("ringfire_lossy") {
            let _ = writeln!(
                md,
                "\n`ringfire_lossy`: ringfire's MPMC ring is lossy (a producer never waits, it overwrites); items it dropped count as moved, so its time per item is not a lossless figure and does not compare with the other rows' time per delivered item."
            );
        }
        for n in notes.get(fam).into_iter().flatten() {
            let _ = writeln!(md, "\n{n}");
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

/// Every run's figures as JSON, the file `--runs-json` writes and `criterion-json` reads:
/// per benchmark id, each run's figure (the median of that run's samples, ns per
/// iteration, the number every table cell and ratio is computed from) and its sample
/// count; per run, the floor p50, and the floor runs' timer overheads. Runs are numbered as the run
/// directories were given (0 for the first).
fn runs_json(fams: &Families, floor: &Floor) -> String {
    let mut benches = serde_json::Map::new();
    for (fam, imps) in fams {
        for (imp, runs) in imps {
            let rows: Vec<serde_json::Value> = runs
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "run": r.run,
                        "median_ns": r.median(),
                        "samples": r.samples.len(),
                    })
                })
                .collect();
            benches.insert(format!("{fam}/{imp}"), rows.into());
        }
    }
    let floor_rows: Vec<serde_json::Value> = floor
        .runs
        .iter()
        .map(|r| serde_json::json!({"run": r.run, "p50_ns": r.median()}))
        .collect();
    let v = serde_json::json!({
        "about": "scripts/bench.sh criterion runs: per benchmark id, each run's median time per iteration (ns) over its criterion samples; per run, `ringwire bench floor --json`'s cache-line round trip p50. `bench_report criterion-json <out.md> <this file>` recomputes the BENCHMARKS.md criterion tables from it.",
        "benches": benches,
        "floor": floor_rows,
        "floor_timer_overhead_ns": floor.timer_ns,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// Reads what [`runs_json`] wrote: each run's figure becomes a run of one sample, whose
/// median (all the tables use) is that figure.
fn parse_runs_json(text: &str) -> Result<(Families, Floor), String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let benches = v["benches"].as_object().ok_or("no \"benches\" object")?;
    let run_of = |row: &serde_json::Value, key: &str| -> Result<Run, String> {
        let run = row["run"]
            .as_u64()
            .ok_or_else(|| format!("a row without \"run\": {row}"))?;
        let x = row[key]
            .as_f64()
            .ok_or_else(|| format!("a row without \"{key}\": {row}"))?;
        Ok(Run {
            run: usize::try_from(run).map_err(|e| e.to_string())?,
            samples: vec![x],
        })
    };
    let mut fams = Families::new();
    for (id, rows) in benches {
        for row in rows.as_array().ok_or_else(|| format!("{id}: not a list"))? {
            add_run(&mut fams, id, run_of(row, "median_ns")?);
        }
    }
    let mut floor = Floor::default();
    for row in v["floor"].as_array().into_iter().flatten() {
        floor.runs.push(run_of(row, "p50_ns")?);
    }
    let timers = v["floor_timer_overhead_ns"]
        .as_array()
        .into_iter()
        .flatten();
    floor.timer_ns = timers.filter_map(serde_json::Value::as_f64).collect();
    Ok((fams, floor))
}

/// `--cmd family=command` and `--note family=text` options, and the other arguments.
struct TableArgs {
    pos: Vec<PathBuf>,
    commands: BTreeMap<String, String>,
    notes: BTreeMap<String, Vec<String>>,
    runs_json: Option<PathBuf>,
}

fn table_args(args: &[String]) -> Result<TableArgs, String> {
    let mut t = TableArgs {
        pos: Vec::new(),
        commands: BTreeMap::new(),
        notes: BTreeMap::new(),
        runs_json: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--note" {
            let kv = it.next().ok_or("--note needs family=text")?;
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("--note {kv:?}: expected family=text"))?;
            t.notes
                .entry(k.to_string())
                .or_default()
                .push(v.to_string());
        } else if a == "--cmd" {
            let kv = it.next().ok_or("--cmd needs family=command")?;
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("--cmd {kv:?}: expected family=command"))?;
            t.commands.insert(k.to_string(), v.to_string());
        } else if a == "--runs-json" {
            t.runs_json = Some(PathBuf::from(it.next().ok_or("--runs-json needs a file")?));
        } else {
            t.pos.push(PathBuf::from(a));
        }
    }
    Ok(t)
}

/// `criterion-json <out.md> <runs.json> [--cmd …] [--note …]`: the criterion tables again
/// from a `--runs-json` file (no charts: it keeps each run's figure, not its samples).
fn cmd_criterion_json(args: &[String]) -> Result<(), String> {
    let t = table_args(args)?;
    let [out_md, file] = &t.pos[..] else {
        return Err("criterion-json: need <out.md> <runs.json>".into());
    };
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let (fams, floor) = parse_runs_json(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let md = criterion_tables(&fams, &floor, &t.commands, &t.notes, |_, _| None);
    std::fs::write(out_md, md).map_err(|e| format!("{}: {e}", out_md.display()))
}

fn cmd_criterion(args: &[String]) -> Result<(), String> {
    let TableArgs {
        pos,
        commands,
        notes,
        runs_json: runs_json_file,
    } = table_args(args)?;
    if pos.len() < 3 {
        return Err("criterion: need <out.md> <svg dir> <run dir>...".into());
    }
    let (out_md, svg_dir, runs) = (&pos[0], &pos[1], &pos[2..]);
    let mut fams = Families::new();
    let mut floor = Floor::default();
    for (k, run) in runs.iter().enumerate() {
        let floor_file = run.join(FLOOR_FILE);
        match std::fs::read_to_string(&floor_file)
            .ok()
            .and_then(|t| parse_floor(&t))
        {
            Some((p50, timer)) => {
                floor.runs.push(Run {
                    run: k,
                    samples: vec![p50],
                });
                floor.timer_ns.extend(timer);
            }
            None => eprintln!(
                "{}: no floor p50 (this run has no ÷ floor ratio)",
                floor_file.display()
            ),
        }
        let dirs = bench_dirs(run);
        if dirs.is_empty() {
            eprintln!("{}: no criterion results (run skipped)", run.display());
        }
        for d in dirs {
            if let Some((id, mut r)) = load(&d) {
                r.run = k;
                add_run(&mut fams, &id, r);
            }
        }
    }
    if fams.is_empty() {
        return Err("no criterion results in any run".into());
    }
    if let Some(f) = &runs_json_file {
        std::fs::write(f, runs_json(&fams, &floor)).map_err(|e| format!("{}: {e}", f.display()))?;
    }
    let _ = std::fs::create_dir_all(svg_dir);
    let base = out_md.parent().unwrap_or(Path::new(".")).to_path_buf();
    let md = criterion_tables(&fams, &floor, &commands, &notes, |fam, imps| {
        let svg = svg_dir.join(format!("{}.svg", fam.replace('/', "_")));
        std::fs::write(&svg, chart(fam, imps).to_svg()).ok()?;
        let rel = svg.strip_prefix(&base).unwrap_or(&svg);
        Some(rel.display().to_string())
    });
    std::fs::write(out_md, md).map_err(|e| format!("{}: {e}", out_md.display()))
}

// ---------------------------------------------------------------------------------------
// latency runs of `ringwire bench … --json`

/// One clean run's figures: p50 and p99 (ns) of the HDR summary at the pointer, and the
/// producer's lateness (p99, max) when the run reports it beside that summary.
struct LatencyRun {
    p50: f64,
    p99: f64,
    late: Option<(f64, f64)>,
}

/// One run's figures from its JSON text, or why the run does not count: unreadable, no
/// summary there, or (a hand-off run, with `sent` and a `reader` object) records lost,
/// lapped or out of sequence. The lateness is the `producer_lateness` summary next to the
/// one at `pointer` (`/r1000/ringwire/summary` → `/r1000/ringwire/producer_lateness`).
fn summary_at(text: &str, pointer: &str) -> Result<LatencyRun, String> {
    let v: serde_json::Value =
        serde_json::from_str(text.trim()).map_err(|_| "no result".to_string())?;
    if let Some(e) = handoff_error(&v) {
        return Err(e);
    }
    // A row that failed in a run whose other rows did not (async_wake's `error`).
    if let Some(e) = pointer
        .rsplit_once('/')
        .and_then(|(dir, _)| v.pointer(&format!("{dir}/error")))
        .and_then(|e| e.as_str())
    {
        return Err(e.to_string());
    }
    let s = v.pointer(pointer).ok_or("no summary")?;
    let late = pointer
        .rsplit_once('/')
        .and_then(|(dir, _)| v.pointer(&format!("{dir}/producer_lateness")))
        .and_then(|l| l["p99_ns"].as_f64().zip(l["max_ns"].as_f64()));
    match (s["p50_ns"].as_f64(), s["p99_ns"].as_f64()) {
        (Some(p50), Some(p99)) => Ok(LatencyRun { p50, p99, late }),
        _ => Err("no summary".into()),
    }
}

/// For a `ringwire bench handoff --json` run: what went wrong, if the reader did not get
/// every record sent exactly once and in order (`received != sent`, `lapped > 0`, or a
/// sequence error). `None` for a clean run and for JSON of other benches.
fn handoff_error(v: &serde_json::Value) -> Option<String> {
    let (Some(sent), Some(r)) = (v["sent"].as_u64(), v["reader"].as_object()) else {
        return None;
    };
    let mut e = Vec::new();
    let received = r.get("received").and_then(|x| x.as_u64());
    if received != Some(sent) {
        e.push(format!("received {} of {sent}", received.unwrap_or(0)));
    }
    let lapped = r.get("lapped").and_then(|x| x.as_u64());
    if lapped != Some(0) {
        e.push(format!("lapped {}", lapped.unwrap_or(0)));
    }
    match r.get("seq_errors") {
        Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::String(s)) => e.push(s.clone()),
        _ => e.push("sequences not checked".into()),
    }
    (!e.is_empty()).then(|| e.join(", "))
}

/// "p99 / max" of the producer's lateness over the clean runs that report it: the median of
/// their p99s and the largest max; "–" when none does.
fn lateness_cell(late: &[(f64, f64)]) -> String {
    let p99 = Agg::of(&late.iter().map(|x| x.0).collect::<Vec<_>>());
    let max = late.iter().map(|x| x.1).fold(f64::NAN, f64::max);
    p99.map_or("–".into(), |a| format!("{} / {}", ns(a.median), ns(max)))
}

/// One table row: label, command, and every run's JSON text. Runs with errors are left out
/// of the medians; with fewer than half the runs clean the row has no figures.
fn latency_row(label: &str, cmd: &str, pointer: &str, runs: &[String]) -> String {
    let mut clean = Vec::new();
    let mut errors = Vec::new();
    for t in runs {
        match summary_at(t, pointer) {
            Ok(r) => clean.push(r),
            Err(e) => errors.push(e),
        }
    }
    let failed = if errors.is_empty() {
        "0".to_string()
    } else {
        let mut kinds = errors.clone();
        kinds.sort();
        kinds.dedup();
        format!("{} ({})", errors.len(), kinds.join("; "))
    };
    let p50: Vec<f64> = clean.iter().map(|r| r.p50).collect();
    let p99: Vec<f64> = clean.iter().map(|r| r.p99).collect();
    let late: Vec<(f64, f64)> = clean.iter().filter_map(|r| r.late).collect();
    match (Agg::of(&p50), Agg::of(&p99)) {
        (Some(a), Some(b)) if 2 * clean.len() >= runs.len() => format!(
            "| {label} | {} | {} | {} | {} of {} | {failed} | `{cmd}` |\n",
            a.cell(),
            b.cell(),
            lateness_cell(&late),
            a.runs,
            runs.len()
        ),
        _ => format!(
            "| {label} | – | – | – | – | – | {} of {} | {failed} | `{cmd}` |\n",
            clean.len(),
            runs.len()
        ),
    }
}

fn cmd_latency(args: &[String]) -> Result<(), String> {
    let out_md = args.first().ok_or("latency: need <out.md> <spec>...")?;
    let mut md = String::from(
        "| measurement | p50: median of clean runs | p50 min – max | p99: median of clean runs | p99 min – max | producer late p99 / max | clean runs | runs with errors | reproduce |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---|\n",
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

/// One row of one run: (implementation, transport, config, rate).
type ReplKey = (String, String, String, u64);

/// One row of one run of the replication bench.
#[derive(Debug, Clone, PartialEq)]
struct ReplRow {
    key: ReplKey,
    p50: f64,
    p99: f64,
    /// No loss, reorder, duplicate, gap or corruption.
    ok: bool,
    /// The producer's lateness (push time − scheduled time): p99 and max, when reported.
    late: Option<(f64, f64)>,
    /// CPU the configuration's process used, in cores (`cpu_cores`), when reported.
    cpu: Option<f64>,
}

fn replication_rows(text: &str) -> Vec<ReplRow> {
    let json = text.trim().strip_prefix("JSON: ").unwrap_or(text.trim());
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return Vec::new();
    };
    let Some(rows) = v["rows"].as_array() else {
        return Vec::new();
    };
    // A configuration whose child process gave no row (it crashed): a run with errors.
    let failed = v["failed"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            Some(ReplRow {
                key: (
                    r["implementation"].as_str()?.to_string(),
                    r["transport"].as_str()?.to_string(),
                    r["config"].as_str()?.to_string(),
                    r["rate"].as_u64()?,
                ),
                p50: f64::NAN,
                p99: f64::NAN,
                ok: false,
                late: None,
                cpu: None,
            })
        });
    rows.iter()
        .filter_map(|r| {
            let key = (
                r["implementation"].as_str()?.to_string(),
                r["transport"].as_str()?.to_string(),
                r["config"].as_str()?.to_string(),
                r["rate"].as_u64()?,
            );
            let lat = &r["latency"];
            let late = &r["producer_lateness"];
            Some(ReplRow {
                key,
                p50: lat["p50_ns"].as_f64()?,
                p99: lat["p99_ns"].as_f64()?,
                ok: r["error"].is_null(),
                late: late["p99_ns"].as_f64().zip(late["max_ns"].as_f64()),
                cpu: r["cpu_cores"].as_f64(),
            })
        })
        .chain(failed)
        .collect()
}

/// One implementation's runs of one configuration: (run index, row).
type Cell = Vec<(usize, ReplRow)>;

/// The clean runs of a cell when at least half of its runs are clean, else `None`.
fn clean_runs(c: &Cell) -> Option<Vec<&(usize, ReplRow)>> {
    let clean: Vec<_> = c.iter().filter(|(_, r)| r.ok).collect();
    (!clean.is_empty() && 2 * clean.len() >= c.len()).then_some(clean)
}

fn replication_table(runs: &[String]) -> String {
    // (rate, transport, config) → implementation → every run's row
    let mut cells: BTreeMap<(u64, String, String), BTreeMap<String, Cell>> = BTreeMap::new();
    for (k, text) in runs.iter().enumerate() {
        for r in replication_rows(text) {
            let (imp, t, c, rate) = r.key.clone();
            cells
                .entry((rate, t, c))
                .or_default()
                .entry(imp)
                .or_default()
                .push((k, r));
        }
    }
    // A run that gave no row for an implementation's configuration (its whole bench
    // process crashed, or the row is missing from its file) is a run with errors of that
    // configuration, not a run left out of the counts.
    for imps in cells.values_mut() {
        for cell in imps.values_mut() {
            let key = cell[0].1.key.clone();
            for k in 0..runs.len() {
                if !cell.iter().any(|(j, _)| *j == k) {
                    cell.push((
                        k,
                        ReplRow {
                            key: key.clone(),
                            p50: f64::NAN,
                            p99: f64::NAN,
                            ok: false,
                            late: None,
                            cpu: None,
                        },
                    ));
                }
            }
            cell.sort_by_key(|(k, _)| *k);
        }
    }
    let mut md = String::from(
        "| rate (msg/s) | transport | config | ringwire p50 | min – max | ringfire p50 | min – max | p50 ratio ringwire ÷ ringfire, within each run: median (min – max) | ringwire p99 | ringfire p99 | producer late p99 / max: ringwire; ringfire | CPU (cores), median of clean runs: ringwire; ringfire | clean runs (ringwire/ringfire) | runs with errors (ringwire/ringfire) |\n\
         |---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let empty = Cell::new();
    for ((rate, t, c), imps) in &cells {
        let w = imps.get("ringwire").unwrap_or(&empty);
        let f = imps.get("ringfire").unwrap_or(&empty);
        let (wc, fc) = (clean_runs(w), clean_runs(f));
        let errs = |c: &Cell| c.iter().filter(|(_, r)| !r.ok).count();
        let agg = |c: &Option<Vec<&(usize, ReplRow)>>, q: fn(&ReplRow) -> f64| {
            c.as_ref()
                .and_then(|c| Agg::of(&c.iter().map(|(_, r)| q(r)).collect::<Vec<_>>()))
        };
        // "–" with the error count when fewer than half the runs are clean.
        let none = |c: &Cell| {
            if c.is_empty() {
                "–".to_string()
            } else {
                format!("– ({} of {} runs with errors)", errs(c), c.len())
            }
        };
        let med = |a: Option<Agg>, c: &Cell| a.map_or_else(|| none(c), |a| ns(a.median));
        let range =
            |a: Option<Agg>| a.map_or("–".into(), |a| format!("{} – {}", ns(a.min), ns(a.max)));
        let ratios: Vec<f64> = match (&wc, &fc) {
            (Some(wc), Some(fc)) => wc
                .iter()
                .filter_map(|(k, wr)| {
                    let (_, fr) = fc.iter().find(|(j, _)| j == k)?;
                    Some(wr.p50 / fr.p50)
                })
                .filter(|x| x.is_finite())
                .collect(),
            _ => Vec::new(),
        };
        let late = |c: &Option<Vec<&(usize, ReplRow)>>| {
            lateness_cell(
                &c.iter()
                    .flatten()
                    .filter_map(|(_, r)| r.late)
                    .collect::<Vec<_>>(),
            )
        };
        // The median over the clean runs that reported their CPU.
        let cpu = |c: &Option<Vec<&(usize, ReplRow)>>| {
            c.as_ref()
                .and_then(|c| Agg::of(&c.iter().filter_map(|(_, r)| r.cpu).collect::<Vec<_>>()))
                .map_or("–".into(), |a| format!("{:.2}", a.median))
        };
        let _ = writeln!(
            md,
            "| {rate} | {t} | {c} | {} | {} | {} | {} | {} | {} | {} | {}; {} | {}; {} | {}/{} | {}/{} |",
            med(agg(&wc, |r| r.p50), w),
            range(agg(&wc, |r| r.p50)),
            med(agg(&fc, |r| r.p50), f),
            range(agg(&fc, |r| r.p50)),
            ratio_cell(&ratios),
            med(agg(&wc, |r| r.p99), w),
            med(agg(&fc, |r| r.p99), f),
            late(&wc),
            late(&fc),
            cpu(&wc),
            cpu(&fc),
            w.len() - errs(w),
            f.len() - errs(f),
            errs(w),
            errs(f),
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

/// One of issue 4's benchmark targets: in `case`, `peer`'s time ÷ ringwire's is at least
/// `needs` (ringwire that many times faster).
struct QueueTarget {
    what: &'static str,
    /// The case, or the prefix of the case's name (the MPMC case is `mpmc_2p2c` or, under
    /// `QBENCH_BACKOFF=exp`, `mpmc_2p2c_exp`).
    case: &'static str,
    peer: &'static str,
    needs: f64,
}

/// Issue 4, acceptance line 5: SPSC throughput (single and batched, 8- and 64-byte items)
/// at least 1.5× rtrb's and 2× crossbeam ArrayQueue's (which has no batch API); MPMC with
/// 2 producers and 2 consumers at least ArrayQueue's.
const QUEUE_TARGETS: &[QueueTarget] = &[
    QueueTarget {
        what: "SPSC ≥ 1.5× rtrb",
        case: "spsc_throughput/u64",
        peer: "rtrb",
        needs: 1.5,
    },
    QueueTarget {
        what: "SPSC ≥ 1.5× rtrb",
        case: "spsc_throughput/64B",
        peer: "rtrb",
        needs: 1.5,
    },
    QueueTarget {
        what: "SPSC ≥ 1.5× rtrb",
        case: "spsc_batch64/u64",
        peer: "rtrb",
        needs: 1.5,
    },
    QueueTarget {
        what: "SPSC ≥ 1.5× rtrb",
        case: "spsc_batch64/64B",
        peer: "rtrb",
        needs: 1.5,
    },
    QueueTarget {
        what: "SPSC ≥ 2× ArrayQueue",
        case: "spsc_throughput/u64",
        peer: "crossbeam_arrayqueue",
        needs: 2.0,
    },
    QueueTarget {
        what: "SPSC ≥ 2× ArrayQueue",
        case: "spsc_throughput/64B",
        peer: "crossbeam_arrayqueue",
        needs: 2.0,
    },
    QueueTarget {
        what: "MPMC ≥ ArrayQueue",
        case: "mpmc_2p2c",
        peer: "crossbeam_arrayqueue",
        needs: 1.0,
    },
];

/// What the queue-target tables read from a paired run's JSON (see the module docs).
struct PairedRun {
    /// Its trials.
    trials: Vec<serde_json::Value>,
    /// Its round count.
    rounds: Option<u64>,
    /// Its line-transfer read floor (`line_transfer`, written when a 64-byte case ran): ns
    /// per line, one figure per round; `None` for a run without one.
    floors: Option<Vec<f64>>,
    /// Its line-transfer write figure (`write_ns_per_line`: writing lines the other core has
    /// just read), ns per line, one per round; `None` for a run without one.
    write_floors: Option<Vec<f64>>,
}

impl PairedRun {
    /// The floor of each round: the larger of its read and write figures (a queue makes
    /// both moves at once, so the slower one bounds it); the read figure alone in a run
    /// without write figures. `None` for a run without a floor.
    fn bound(&self) -> Option<Vec<f64>> {
        let read = self.floors.as_ref()?;
        Some(match &self.write_floors {
            Some(w) if w.len() == read.len() => {
                read.iter().zip(w).map(|(r, w)| r.max(*w)).collect()
            }
            _ => read.clone(),
        })
    }
}

/// Parses a paired run's JSON.
fn paired_run(json: &str) -> Result<PairedRun, String> {
    let doc: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("not a paired run's JSON: {e}"))?;
    let trials = doc["trials"]
        .as_array()
        .ok_or("not a paired run's JSON: no \"trials\" array")?;
    let per_round = |key: &str| -> Option<Vec<f64>> {
        doc["line_transfer"][key]
            .as_array()
            .and_then(|a| a.iter().map(serde_json::Value::as_f64).collect())
    };
    Ok(PairedRun {
        trials: trials.clone(),
        rounds: doc["rounds"].as_u64(),
        floors: per_round("read_ns_per_line"),
        write_floors: per_round("write_ns_per_line"),
    })
}

/// `num[k] ÷ den[k]` for each round k, the finite ones, sorted; `None` when the rounds do
/// not pair up or no ratio is left.
fn round_ratios(num: &[f64], den: &[f64]) -> Option<Vec<f64>> {
    if num.len() != den.len() {
        return None;
    }
    let mut q: Vec<f64> = num.iter().zip(den).map(|(a, b)| a / b).collect();
    q.retain(|x| x.is_finite());
    q.sort_by(f64::total_cmp);
    (!q.is_empty()).then_some(q)
}

/// One queue's figures in a paired run: ns per item (or per round trip), one per round,
/// and the case they were found under. `exact` false: the MPMC case also under its
/// `QBENCH_BACKOFF=exp` name.
fn paired_figures(
    trials: &[serde_json::Value],
    case: &str,
    queue: &str,
    exact: bool,
) -> Option<(String, Vec<f64>)> {
    trials.iter().find_map(|t| {
        let c = t["case"].as_str()?;
        let mpmc = !exact && case == "mpmc_2p2c" && c.starts_with("mpmc_2p2c");
        if !(c == case || mpmc) || t["queue"].as_str()? != queue {
            return None;
        }
        let f: Option<Vec<f64>> = t["ns_per_item"]
            .as_array()?
            .iter()
            .map(serde_json::Value::as_f64)
            .collect();
        Some((c.to_owned(), f?))
    })
}

/// A target's ratios in a paired run: the peer's time ÷ ringwire's within each round,
/// finite ones only, sorted, with the case they come from; `None` when the case or a
/// queue is missing or the rounds do not pair up.
fn target_ratios(trials: &[serde_json::Value], t: &QueueTarget) -> Option<(String, Vec<f64>)> {
    // The peer is looked up in the case ringwire's figures came from, so a file with both
    // MPMC cases never pairs one case's rounds with the other's.
    let (case, rw) = paired_figures(trials, t.case, "ringwire", false)?;
    let (_, peer) = paired_figures(trials, &case, t.peer, true)?;
    Some((case, round_ratios(&peer, &rw)?))
}

/// A ratio judged against the target `needs`, to the hundredth. A ratio under the target that
/// the hundredths would round up to it (1.4996 against 1.50) gets as many more decimals as it
/// takes to show it under, so that no cell reads "1.50" beside "not met".
fn against(x: f64, needs: f64) -> String {
    let below = x < needs;
    for decimals in 2..=6 {
        let s = format!("{x:.decimals$}");
        if s.parse::<f64>().is_ok_and(|shown| (shown < needs) == below) {
            return s;
        }
    }
    // The shortest text that reads back as `x` exactly: on the same side as `x` by definition.
    format!("{x}")
}

/// A time per line, to the hundredth of a ns ("–" when not finite).
fn line_ns(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2} ns")
    } else {
        "–".into()
    }
}

/// The SPSC cases of the rtrb targets, with the items a 64-byte line holds in each: a queue
/// that stores its items side by side writes and reads every line once per that many
/// items, so the line-transfer floor bounds its time per that many items.
const FLOOR_CASES: [(&str, f64); 4] = [
    ("spsc_throughput/u64", 8.0),
    ("spsc_batch64/u64", 8.0),
    ("spsc_throughput/64B", 1.0),
    ("spsc_batch64/64B", 1.0),
];

/// The most any queue could reach against `peer` in `case` if it moved each line of items
/// (`per_line` of them) in the time of the floor: the peer's time per line ÷ the floor
/// (`floors`, one per round: [`PairedRun::bound`]) within each round, finite ones, sorted;
/// `None` when the run has no floor or no such peer, or the rounds do not pair up.
fn floor_ceiling(
    trials: &[serde_json::Value],
    floors: &[f64],
    (case, per_line): (&str, f64),
    peer: &str,
) -> Option<Vec<f64>> {
    let per_item = paired_figures(trials, case, peer, true)?.1;
    let per_line: Vec<f64> = per_item.iter().map(|x| x * per_line).collect();
    round_ratios(&per_line, floors)
}

/// The BENCHMARKS.md section of [`QUEUE_TARGETS`] judged on a paired run's JSON (see the
/// module docs); `source` names the file in the text.
fn queue_targets_table(json: &str, source: &str) -> Result<String, String> {
    let run = paired_run(json)?;
    let bound = run.bound();
    let PairedRun {
        trials,
        rounds,
        floors,
        write_floors,
    } = run;
    let rounds = rounds.map_or("?".to_owned(), |r| r.to_string());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### Issue 4's queue targets, from this paired run\n\n\
         Recompute: `target/release/bench_report queue-targets OUT.md {source}`. Each figure is\n\
         the peer's time divided by ringwire's within one round of the paired run above (above\n\
         1: ringwire faster), over its {rounds} rounds: the median, p10 – p90 and how many rounds\n\
         reach the target. A target is met when the median reaches it. crossbeam ArrayQueue has\n\
         no batch API, so its 2× target applies to single items only; the MPMC row is the std\n\
         `MpmcQueue` handle (2 producers and 2 consumers on this machine's cores).\n"
    );
    out.push_str(
        "| target | case | peer | needs (peer ÷ ringwire) | measured: median | p10 – p90 | rounds reaching it | verdict |\n",
    );
    out.push_str("|---|---|---|---:|---:|---:|---:|---|\n");
    let (mut met, mut judged) = (0, 0);
    for t in QUEUE_TARGETS {
        let row = target_ratios(&trials, t).map(|(case, q)| {
            let med = median(&q);
            let (p10, p90) = ringwire::bench::nearest_rank_tails(&q, 10);
            let reach = q.iter().filter(|&&x| x >= t.needs).count();
            judged += 1;
            let verdict = if med >= t.needs {
                met += 1;
                "met"
            } else {
                "not met"
            };
            format!(
                "| {} | `{case}` | {} | ≥ {:.2} | {} | {p10:.2} – {p90:.2} | {reach} of {} | {verdict} |",
                t.what,
                t.peer,
                t.needs,
                against(med, t.needs),
                q.len()
            )
        });
        let row = row.unwrap_or_else(|| {
            format!(
                "| {} | `{}` | {} | ≥ {:.2} | – | – | – | not measured |",
                t.what, t.case, t.peer, t.needs
            )
        });
        out.push_str(&row);
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "\n{met} of {} targets met ({} measured).",
        QUEUE_TARGETS.len(),
        judged
    );
    if let (Some(floors), Some(bound)) = (floors, bound) {
        let ceilings: Vec<String> = FLOOR_CASES
            .iter()
            .filter_map(|&c| {
                let q = floor_ceiling(&trials, &bound, c, "rtrb")?;
                Some(format!("`{}` {:.2}", c.0, median(&q)))
            })
            .collect();
        let _ = writeln!(
            out,
            "\nThe line-transfer floor of this run (the paired run's own, one per round): reading \
             lines the other core wrote took {} a line, writing lines it read {} (medians of the \
             rounds); a queue makes both moves at once, so the larger of the two in each round \
             bounds it. A queue moving each line of items in that time would reach, against rtrb \
             (rtrb's time per line, 8 `u64` items or one 64-byte item, ÷ that floor within each \
             round, median): {}.",
            line_ns(median(&floors)),
            line_ns(write_floors.as_deref().map_or(f64::NAN, median)),
            if ceilings.is_empty() {
                "not measured".to_owned()
            } else {
                ceilings.join(", ")
            }
        );
    }
    Ok(out)
}

/// [`QUEUE_TARGETS`] judged on several paired runs, one column per run (`(name, json)`):
/// each cell is the median of the run's per-round ratios, marked when it meets the target,
/// and the last column counts the runs that meet it. A row above the targets gives each
/// run's ringwire SPSC round trip (median), which tells the host's state: whether the two
/// cores share a cache shows there first.
fn queue_target_runs_table(runs: &[(String, String)]) -> Result<String, String> {
    if runs.is_empty() {
        return Err("no runs given".into());
    }
    let mut parsed = Vec::with_capacity(runs.len());
    let mut floors = Vec::with_capacity(runs.len());
    for (name, json) in runs {
        let run = paired_run(json).map_err(|e| format!("{name}: {e}"))?;
        floors.push(run.bound());
        parsed.push(run.trials);
    }
    let mut out = String::new();
    out.push_str("| target | case | needs |");
    for (name, _) in runs {
        let _ = write!(out, " {name} |");
    }
    out.push_str(" runs meeting it |\n|---|---|---:|");
    out.push_str(&"---:|".repeat(runs.len()));
    out.push_str("---:|\n| host: ringwire's SPSC round trip, median | `spsc_round_trip` | |");
    for trials in &parsed {
        let rt = paired_figures(trials, "spsc_round_trip", "ringwire", true)
            .map_or(f64::NAN, |(_, f)| median(&f));
        let _ = write!(out, " {} |", ns(rt));
    }
    out.push_str(
        " |\n| host: line-transfer floor (the larger of read and write), median | `line_transfer` | |",
    );
    for f in &floors {
        let _ = write!(out, " {} |", line_ns(f.as_deref().map_or(f64::NAN, median)));
    }
    out.push_str(" |\n");
    for t in QUEUE_TARGETS {
        let _ = write!(
            out,
            "| {} against {} | `{}` | ≥ {:.2} |",
            t.what, t.peer, t.case, t.needs
        );
        let (mut met, mut judged) = (0, 0);
        for trials in &parsed {
            match target_ratios(trials, t) {
                Some((_, q)) => {
                    let med = median(&q);
                    judged += 1;
                    if med >= t.needs {
                        met += 1;
                        let _ = write!(out, " **{}** met |", against(med, t.needs));
                    } else {
                        let _ = write!(out, " {} |", against(med, t.needs));
                    }
                }
                None => out.push_str(" not measured |"),
            }
        }
        let _ = writeln!(out, " {met} of {judged} |");
    }
    for case in FLOOR_CASES {
        let _ = write!(
            out,
            "| at most, a queue at the floor: rtrb ÷ the floor | `{}` | |",
            case.0
        );
        for (trials, f) in parsed.iter().zip(&floors) {
            match f
                .as_deref()
                .and_then(|f| floor_ceiling(trials, f, case, "rtrb"))
            {
                Some(q) => {
                    let _ = write!(out, " {:.2} |", median(&q));
                }
                None => out.push_str(" – |"),
            }
        }
        out.push_str(" |\n");
    }
    Ok(out)
}

/// The rounds of one host state in [`queue_target_states_table`]: per target, the
/// per-round ratios (peer ÷ ringwire), with the round trips and read floors of its rounds.
#[derive(Default)]
struct StateRounds {
    round_trips: Vec<f64>,
    floors: Vec<f64>,
    write_floors: Vec<f64>,
    ratios: Vec<Vec<f64>>,
    /// Per case of [`FLOOR_CASES`], rtrb's time per line ÷ the floor of the round.
    ceilings: Vec<Vec<f64>>,
}

/// [`QUEUE_TARGETS`] over the pooled rounds of several paired runs (`(name, json)`), split
/// by the host state of each round: ringwire's SPSC round trip in that round below `split`
/// ns, or not (see the module docs).
fn queue_target_states_table(runs: &[(String, String)], split: f64) -> Result<String, String> {
    if runs.is_empty() {
        return Err("no runs given".into());
    }
    let mut states: [StateRounds; 2] = Default::default();
    for s in &mut states {
        s.ratios = vec![Vec::new(); QUEUE_TARGETS.len()];
        s.ceilings = vec![Vec::new(); FLOOR_CASES.len()];
    }
    for (name, json) in runs {
        let run = paired_run(json).map_err(|e| format!("{name}: {e}"))?;
        let Some((_, rts)) = paired_figures(&run.trials, "spsc_round_trip", "ringwire", true)
        else {
            return Err(format!("{name}: no spsc_round_trip figures for ringwire"));
        };
        let figures: Vec<Option<(Vec<f64>, Vec<f64>)>> = QUEUE_TARGETS
            .iter()
            .map(|t| {
                let (case, rw) = paired_figures(&run.trials, t.case, "ringwire", false)?;
                let (_, peer) = paired_figures(&run.trials, &case, t.peer, true)?;
                (rw.len() == rts.len() && peer.len() == rts.len()).then_some((rw, peer))
            })
            .collect();
        let bound = run.bound();
        // Per case, rtrb's time per line ÷ the floor in every round (all the run's rounds:
        // `round_ratios` would drop and sort, losing which round each is).
        let ceilings: Vec<Option<Vec<f64>>> = FLOOR_CASES
            .iter()
            .map(|&(case, per_line)| {
                let f = bound.as_ref()?;
                let (_, rtrb) = paired_figures(&run.trials, case, "rtrb", true)?;
                (rtrb.len() == rts.len() && f.len() == rts.len())
                    .then(|| rtrb.iter().zip(f).map(|(x, f)| x * per_line / f).collect())
            })
            .collect();
        for (round, &rt) in rts.iter().enumerate() {
            if !rt.is_finite() {
                continue;
            }
            let s = &mut states[usize::from(rt >= split)];
            s.round_trips.push(rt);
            if let Some(f) = run.floors.as_ref().and_then(|f| f.get(round)) {
                s.floors.push(*f);
            }
            if let Some(f) = run.write_floors.as_ref().and_then(|f| f.get(round)) {
                s.write_floors.push(*f);
            }
            for (i, f) in figures.iter().enumerate() {
                if let Some((rw, peer)) = f {
                    let q = peer[round] / rw[round];
                    if q.is_finite() {
                        s.ratios[i].push(q);
                    }
                }
            }
            for (i, c) in ceilings.iter().enumerate() {
                if let Some(q) = c.as_ref().map(|c| c[round]).filter(|q| q.is_finite()) {
                    s.ceilings[i].push(q);
                }
            }
        }
    }
    let mut out = String::new();
    let heads = [
        format!("round trip < {split} ns"),
        format!("round trip ≥ {split} ns"),
    ];
    out.push_str("| target | case | needs |");
    for h in &heads {
        let _ = write!(out, " {h}: median | p10 – p90 | rounds reaching it |");
    }
    out.push_str("\n|---|---|---:|");
    out.push_str(&"---:|---:|---:|".repeat(2));
    out.push_str("\n| host: rounds, ringwire's SPSC round trip (median) | | |");
    for s in &states {
        let _ = write!(
            out,
            " {} rounds | {} | |",
            s.round_trips.len(),
            ns(median(&s.round_trips)),
        );
    }
    out.push_str("\n| host: line-transfer floor, read, write (medians) | `line_transfer` | |");
    for s in &states {
        let _ = write!(
            out,
            " {} | {} | |",
            line_ns(median(&s.floors)),
            line_ns(median(&s.write_floors))
        );
    }
    out.push('\n');
    for (i, t) in QUEUE_TARGETS.iter().enumerate() {
        let _ = write!(
            out,
            "| {} against {} | `{}` | ≥ {:.2} |",
            t.what, t.peer, t.case, t.needs
        );
        for s in &mut states {
            let q = &mut s.ratios[i];
            q.sort_by(f64::total_cmp);
            if q.is_empty() {
                out.push_str(" – | – | – |");
                continue;
            }
            let med = median(q);
            let (p10, p90) = ringwire::bench::nearest_rank_tails(q, 10);
            let reach = q.iter().filter(|&&x| x >= t.needs).count();
            let mark = if med >= t.needs { "**" } else { "" };
            let _ = write!(
                out,
                " {mark}{}{mark} | {p10:.2} – {p90:.2} | {reach} of {} |",
                against(med, t.needs),
                q.len()
            );
        }
        out.push('\n');
    }
    for (i, (case, _)) in FLOOR_CASES.iter().enumerate() {
        let _ = write!(
            out,
            "| at most, a queue at the floor: rtrb ÷ the floor | `{case}` | ≥ 1.50 |"
        );
        for s in &mut states {
            let q = &mut s.ceilings[i];
            q.sort_by(f64::total_cmp);
            if q.is_empty() {
                out.push_str(" – | – | – |");
                continue;
            }
            let (p10, p90) = ringwire::bench::nearest_rank_tails(q, 10);
            let reach = q.iter().filter(|&&x| x >= 1.5).count();
            let _ = write!(
                out,
                " {} | {p10:.2} – {p90:.2} | {reach} of {} |",
                against(median(q), 1.5),
                q.len()
            );
        }
        out.push('\n');
    }
    Ok(out)
}

fn cmd_queue_target_states(args: &[String]) -> Result<(), String> {
    let [out_md, split, files @ ..] = args else {
        return Err("queue-target-states: need <out.md> <split ns> <queues_paired.json>...".into());
    };
    let split: f64 = split
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite() && *x > 0.0)
        .ok_or_else(|| {
            format!("queue-target-states: split {split:?}: need a positive number of ns")
        })?;
    if files.is_empty() {
        return Err("queue-target-states: need at least one <queues_paired.json>".into());
    }
    let mut runs = Vec::with_capacity(files.len());
    for path in files {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        runs.push((path.clone(), text));
    }
    let table = queue_target_states_table(&runs, split)?;
    std::fs::write(out_md, table).map_err(|e| format!("{out_md}: {e}"))
}

fn cmd_queue_targets(args: &[String]) -> Result<(), String> {
    let [out_md, json] = args else {
        return Err("queue-targets: need <out.md> <queues_paired.json>".into());
    };
    let text = std::fs::read_to_string(json).map_err(|e| format!("{json}: {e}"))?;
    let table = queue_targets_table(&text, json).map_err(|e| format!("{json}: {e}"))?;
    std::fs::write(out_md, table).map_err(|e| format!("{out_md}: {e}"))
}

fn cmd_queue_target_runs(args: &[String]) -> Result<(), String> {
    let Some((out_md, files)) = args.split_first().filter(|(_, f)| !f.is_empty()) else {
        return Err("queue-target-runs: need <out.md> <name>=<queues_paired.json>...".into());
    };
    let mut runs = Vec::with_capacity(files.len());
    for f in files {
        let Some((name, path)) = f.split_once('=') else {
            return Err(format!("queue-target-runs: {f}: need <name>=<file>"));
        };
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        runs.push((name.to_owned(), text));
    }
    let table = queue_target_runs_table(&runs)?;
    std::fs::write(out_md, table).map_err(|e| format!("{out_md}: {e}"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let r = match args.get(1).map(String::as_str) {
        Some("criterion") => cmd_criterion(&args[2..]),
        Some("criterion-json") => cmd_criterion_json(&args[2..]),
        Some("latency") => cmd_latency(&args[2..]),
        Some("replication") => cmd_replication(&args[2..]),
        Some("queue-targets") => cmd_queue_targets(&args[2..]),
        Some("queue-target-runs") => cmd_queue_target_runs(&args[2..]),
        Some("queue-target-states") => cmd_queue_target_states(&args[2..]),
        _ => Err(
            "usage: bench_report criterion|criterion-json|latency|replication|queue-targets|queue-target-runs|queue-target-states … (see the source header)"
                .into(),
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

    /// A paired run's JSON: (case, queue, ns per round).
    fn paired_json(trials: &[(&str, &str, &[f64])]) -> String {
        let rows: Vec<serde_json::Value> = trials
            .iter()
            .map(|(c, q, f)| serde_json::json!({"case": c, "queue": q, "items": 1, "ns_per_item": f}))
            .collect();
        serde_json::json!({"rounds": 4, "trials": rows}).to_string()
    }

    fn target_row<'a>(table: &'a str, case: &str, peer: &str) -> &'a str {
        table
            .lines()
            .find(|l| l.contains(&format!("`{case}`")) && l.contains(&format!("| {peer} |")))
            .unwrap_or_else(|| panic!("no row for {case} {peer} in\n{table}"))
    }

    #[test]
    fn queue_targets_ratio_is_taken_within_each_round() {
        // rtrb takes 1.6× ringwire's time in rounds 1 and 2, 1.5× in rounds 3 and 4: median
        // 1.55, met (a ratio of the two queues' medians, 23 ÷ 15, would read 1.53).
        let j = paired_json(&[
            ("spsc_throughput/u64", "ringwire", &[10.0, 10.0, 20.0, 20.0]),
            ("spsc_throughput/u64", "rtrb", &[16.0, 16.0, 30.0, 30.0]),
            (
                "spsc_throughput/u64",
                "crossbeam_arrayqueue",
                &[19.0, 19.0, 38.0, 38.0],
            ),
            ("mpmc_2p2c_exp", "ringwire", &[30.0, 30.0, 30.0, 30.0]),
            (
                "mpmc_2p2c_exp",
                "crossbeam_arrayqueue",
                &[27.0, 27.0, 27.0, 33.0],
            ),
        ]);
        let t = queue_targets_table(&j, "q.json").unwrap();
        let rtrb = target_row(&t, "spsc_throughput/u64", "rtrb");
        assert!(
            rtrb.contains("| 1.55 | 1.50 – 1.60 | 4 of 4 | met |"),
            "{rtrb}"
        );
        let aq = target_row(&t, "spsc_throughput/u64", "crossbeam_arrayqueue");
        assert!(
            aq.contains("| 1.90 | 1.90 – 1.90 | 0 of 4 | not met |"),
            "{aq}"
        );
        // The MPMC case is found under its exp name too.
        let mpmc = target_row(&t, "mpmc_2p2c_exp", "crossbeam_arrayqueue");
        assert!(
            mpmc.contains("| 0.90 | 0.90 – 1.10 | 1 of 4 | not met |"),
            "{mpmc}"
        );
        // With both MPMC cases in the file, the peer's rounds come from ringwire's case.
        let j = paired_json(&[
            ("mpmc_2p2c", "ringwire", &[30.0, 30.0]),
            ("mpmc_2p2c_exp", "crossbeam_arrayqueue", &[60.0, 60.0]),
            ("mpmc_2p2c", "crossbeam_arrayqueue", &[27.0, 27.0]),
        ]);
        let m = queue_targets_table(&j, "q.json").unwrap();
        let row = target_row(&m, "mpmc_2p2c", "crossbeam_arrayqueue");
        assert!(
            row.contains("| 0.90 | 0.90 – 0.90 | 0 of 2 | not met |"),
            "{row}"
        );
        // What the file lacks is not measured, never met.
        let b = target_row(&t, "spsc_batch64/64B", "rtrb");
        assert!(b.ends_with("| not measured |"), "{b}");
        assert!(t.contains("1 of 7 targets met (3 measured)."), "{t}");
    }

    /// A paired run with a line-transfer read floor only (runs before the write figure): the
    /// single-run section and the multi-run table give rtrb's time ÷ the read floor of the
    /// same round.
    #[test]
    fn queue_targets_give_rtrb_over_the_line_transfer_floor() {
        let mut doc: serde_json::Value = serde_json::from_str(&paired_json(&[
            ("spsc_batch64/64B", "ringwire", &[4.0, 4.0, 4.4, 4.4]),
            ("spsc_batch64/64B", "rtrb", &[4.8, 4.8, 5.0, 5.0]),
        ]))
        .unwrap();
        doc["line_transfer"] = serde_json::json!({"read_ns_per_line": [4.0, 4.0, 3.0, 3.0]});
        let j = doc.to_string();
        // rtrb ÷ floor: 1.2, 1.2, 1.67, 1.67: median 1.43; the floor's median 3.5 ns.
        let t = queue_targets_table(&j, "q.json").unwrap();
        assert!(
            t.contains("took 3.50 ns a line") && t.contains("`spsc_batch64/64B` 1.43."),
            "{t}"
        );
        let plain = paired_json(&[("spsc_batch64/64B", "rtrb", &[4.8, 4.8])]);
        let m = queue_target_runs_table(&[("a".to_owned(), j), ("b".to_owned(), plain)]).unwrap();
        let row = |pat: &str| m.lines().find(|l| l.contains(pat)).unwrap_or("").to_owned();
        assert!(
            row("`spsc_batch64/64B` | |").ends_with("| 1.43 | – | |"),
            "{m}"
        );
        assert!(
            row("`spsc_throughput/64B` | |").ends_with("| – | – | |"),
            "{m}"
        );
        assert!(
            row("line-transfer floor (the larger").ends_with("| 3.50 ns | – | |"),
            "{m}"
        );
        // Without a floor the single-run section says nothing of it.
        let plain = paired_json(&[("spsc_batch64/64B", "rtrb", &[4.8, 4.8])]);
        assert!(
            !queue_targets_table(&plain, "q.json")
                .unwrap()
                .contains("floor")
        );
    }

    /// With a write figure the floor of a round is the larger of the two, and a `u64` case
    /// counts 8 items to a line: in all three tables.
    #[test]
    fn the_floor_of_a_round_is_the_larger_of_read_and_write() {
        let mut doc: serde_json::Value = serde_json::from_str(&paired_json(&[
            ("spsc_batch64/64B", "ringwire", &[4.0, 4.0, 4.4, 4.4]),
            ("spsc_batch64/64B", "rtrb", &[4.8, 4.8, 5.0, 5.0]),
            ("spsc_batch64/u64", "ringwire", &[0.5, 0.5, 0.5, 0.5]),
            ("spsc_batch64/u64", "rtrb", &[0.6, 0.6, 0.9, 0.9]),
            ("spsc_round_trip", "ringwire", &[100.0, 100.0, 400.0, 400.0]),
        ]))
        .unwrap();
        doc["line_transfer"] = serde_json::json!({
            "read_ns_per_line": [4.0, 4.0, 3.0, 3.0],
            "write_ns_per_line": [3.0, 3.0, 5.0, 5.0],
        });
        let j = doc.to_string();
        // The floor: 4, 4, 5, 5. 64-byte rtrb ÷ it: 1.2, 1.2, 1.0, 1.0 (median 1.10); u64,
        // 8 to a line: 1.2, 1.2, 1.44, 1.44 (median 1.32).
        let t = queue_targets_table(&j, "q.json").unwrap();
        assert!(
            t.contains("took 3.50 ns a line, writing lines it read 4.00 ns")
                && t.contains("`spsc_batch64/u64` 1.32")
                && t.contains("`spsc_batch64/64B` 1.10."),
            "{t}"
        );
        let m = queue_target_runs_table(&[("a".to_owned(), j.clone())]).unwrap();
        let row = |t: &str, pat: &str| t.lines().find(|l| l.contains(pat)).unwrap_or("").to_owned();
        assert!(
            row(&m, "`spsc_batch64/64B` | |").ends_with("| 1.10 | |"),
            "{m}"
        );
        assert!(
            row(&m, "`spsc_batch64/u64` | |").ends_with("| 1.32 | |"),
            "{m}"
        );
        assert!(
            row(&m, "(the larger of read and write)").ends_with("| 4.50 ns | |"),
            "{m}"
        );
        // Split by state: rounds 1-2 (round trip 100 ns) and 3-4 (400 ns), each pair alike.
        let st = queue_target_states_table(&[("a".to_owned(), j)], 200.0).unwrap();
        assert!(
            row(&st, "rtrb ÷ the floor | `spsc_batch64/64B`")
                .ends_with("| 1.20 | 1.20 – 1.20 | 0 of 2 | 1.00 | 1.00 – 1.00 | 0 of 2 |"),
            "{st}"
        );
        assert!(
            row(&st, "rtrb ÷ the floor | `spsc_batch64/u64`")
                .ends_with("| 1.20 | 1.20 – 1.20 | 0 of 2 | 1.44 | 1.44 – 1.44 | 0 of 2 |"),
            "{st}"
        );
        // No rtrb figures for single items: "–" in both states.
        assert!(
            row(&st, "rtrb ÷ the floor | `spsc_throughput/64B`")
                .ends_with("| – | – | – | – | – | – |"),
            "{st}"
        );
    }

    /// A median just under a target is not shown at the target's own value: 1.4996 against
    /// "≥ 1.50" reads 1.4996 and not met, in all three tables, never "1.50" and not met.
    #[test]
    fn a_median_just_under_a_target_is_not_shown_as_reaching_it() {
        // rtrb ÷ ringwire is 1.4996 in every round.
        let j = paired_json(&[
            ("spsc_throughput/u64", "ringwire", &[10.0, 10.0, 10.0, 10.0]),
            (
                "spsc_throughput/u64",
                "rtrb",
                &[14.996, 14.996, 14.996, 14.996],
            ),
            ("spsc_round_trip", "ringwire", &[400.0, 400.0, 90.0, 90.0]),
        ]);
        let t = queue_targets_table(&j, "q.json").unwrap();
        let row = target_row(&t, "spsc_throughput/u64", "rtrb");
        assert!(row.contains("| ≥ 1.50 | 1.4996 |"), "{row}");
        assert!(row.ends_with("| 0 of 4 | not met |"), "{row}");
        let m = queue_target_runs_table(&[("a".to_owned(), j.clone())]).unwrap();
        let row = m
            .lines()
            .find(|l| l.contains("`spsc_throughput/u64` | ≥ 1.50"))
            .unwrap_or_else(|| panic!("{m}"));
        assert!(row.ends_with("| 1.4996 | 0 of 1 |"), "{row}");
        let s = queue_target_states_table(&[("a".to_owned(), j)], 200.0).unwrap();
        let row = s
            .lines()
            .find(|l| l.contains("`spsc_throughput/u64` | ≥ 1.50"))
            .unwrap_or_else(|| panic!("{s}"));
        assert!(
            row.ends_with("| 1.4996 | 1.50 – 1.50 | 0 of 2 | 1.4996 | 1.50 – 1.50 | 0 of 2 |"),
            "{row}"
        );
        // Clear of the target, or at it, the usual two decimals.
        assert_eq!(against(1.5, 1.5), "1.50");
        assert_eq!(against(1.5004, 1.5), "1.50");
        assert_eq!(against(1.47, 1.5), "1.47");
        assert_eq!(against(0.99999, 1.0), "0.99999");
        assert_eq!(against(f64::NAN, 1.0), "NaN");
    }

    #[test]
    fn queue_targets_refuse_what_is_not_a_paired_run() {
        assert!(queue_targets_table("not json", "q.json").is_err());
        assert!(queue_targets_table("{\"rounds\": 2}", "q.json").is_err());
        // Rounds that do not pair up (a truncated file) are not judged.
        let j = paired_json(&[
            ("spsc_throughput/64B", "ringwire", &[10.0, 10.0]),
            ("spsc_throughput/64B", "rtrb", &[16.0]),
        ]);
        let t = queue_targets_table(&j, "q.json").unwrap();
        assert!(target_row(&t, "spsc_throughput/64B", "rtrb").ends_with("| not measured |"));
        assert!(t.contains("0 of 7 targets met (0 measured)."), "{t}");
    }

    /// Rounds of several runs pooled and split by the round trip of each round: a run's
    /// rounds can fall in both states, the ratios stay within one round, and a state
    /// without a target's figures shows "–".
    #[test]
    fn queue_target_states_split_the_rounds_by_their_round_trip() {
        let a = paired_json(&[
            ("spsc_throughput/u64", "ringwire", &[10.0, 10.0, 2.0, 2.0]),
            ("spsc_throughput/u64", "rtrb", &[20.0, 18.0, 1.8, 1.6]),
            ("spsc_round_trip", "ringwire", &[400.0, 420.0, 90.0, 100.0]),
        ]);
        let b = paired_json(&[
            ("spsc_throughput/u64", "ringwire", &[2.0, 2.0, 2.0, 2.0]),
            ("spsc_throughput/u64", "rtrb", &[2.0, 2.0, 2.2, 4.0]),
            ("spsc_round_trip", "ringwire", &[70.0, 80.0, 75.0, 500.0]),
        ]);
        let t =
            queue_target_states_table(&[("a".to_owned(), a), ("b".to_owned(), b)], 200.0).unwrap();
        let row = |what: &str| {
            t.lines()
                .find(|l| l.contains(what))
                .unwrap_or_else(|| panic!("no row {what} in\n{t}"))
                .to_owned()
        };
        // Below 200 ns: a's rounds 3-4 (0.9, 0.8) and b's rounds 1-3 (1.0, 1.0, 1.1):
        // median 1.00, none at 1.5. At or above: a's rounds 1-2 (2.0, 1.8) and b's round 4
        // (2.0): median 2.00, met, all three reach it.
        let u64_rtrb = row("`spsc_throughput/u64` | ≥ 1.50");
        assert!(
            u64_rtrb.contains("| 1.00 | 0.80 – 1.10 | 0 of 5 | **2.00** | 1.80 – 2.00 | 3 of 3 |"),
            "{u64_rtrb}"
        );
        let host = row("host: rounds");
        assert!(
            host.ends_with("| 5 rounds | 80.0 ns | | 3 rounds | 420 ns | |"),
            "{host}"
        );
        // Runs without a floor: "–" in both states.
        let floor = row("host: line-transfer floor");
        assert!(floor.ends_with("| – | – | | – | – | |"), "{floor}");
        // No MPMC figures in either run: not measured in either state.
        let mpmc = row("`mpmc_2p2c`");
        assert!(mpmc.ends_with("| – | – | – | – | – | – |"), "{mpmc}");
        // A run without round trips cannot be split.
        let c = paired_json(&[("spsc_throughput/u64", "ringwire", &[1.0])]);
        assert!(queue_target_states_table(&[("c".to_owned(), c)], 200.0).is_err());
    }

    /// Several runs: one column each (the median of its per-round ratios), a target met in
    /// a run is marked, the count is over the runs that measured it, and the host row gives
    /// each run's ringwire round trip.
    #[test]
    fn queue_target_runs_count_the_runs_meeting_each_target() {
        let a = paired_json(&[
            ("spsc_throughput/u64", "ringwire", &[10.0, 10.0, 10.0, 10.0]),
            ("spsc_throughput/u64", "rtrb", &[16.0, 16.0, 14.0, 14.0]),
            ("spsc_round_trip", "ringwire", &[400.0, 420.0, 380.0, 400.0]),
        ]);
        let b = paired_json(&[
            ("spsc_throughput/u64", "ringwire", &[2.0, 2.0, 2.0, 2.0]),
            ("spsc_throughput/u64", "rtrb", &[2.0, 2.0, 2.2, 2.2]),
            ("spsc_round_trip", "ringwire", &[70.0, 80.0, 75.0, 75.0]),
            ("mpmc_2p2c", "ringwire", &[10.0, 10.0, 10.0, 10.0]),
            (
                "mpmc_2p2c",
                "crossbeam_arrayqueue",
                &[20.0, 20.0, 20.0, 20.0],
            ),
        ]);
        let t = queue_target_runs_table(&[("a".to_owned(), a), ("b".to_owned(), b)]).unwrap();
        let row = |case: &str, peer: &str| {
            t.lines()
                .find(|l| l.contains(&format!("`{case}`")) && l.contains(peer))
                .unwrap_or_else(|| panic!("no row for {case} {peer} in\n{t}"))
                .to_owned()
        };
        // a: ratios 1.6, 1.6, 1.4, 1.4, median 1.50, met; b: 1.0, 1.0, 1.1, 1.1, median 1.05.
        assert!(
            row("spsc_throughput/u64", "rtrb").ends_with("| **1.50** met | 1.05 | 1 of 2 |"),
            "{t}"
        );
        assert!(
            row("mpmc_2p2c", "crossbeam_arrayqueue")
                .ends_with("| not measured | **2.00** met | 1 of 1 |"),
            "{t}"
        );
        assert!(
            row("spsc_batch64/64B", "rtrb").ends_with("| not measured | not measured | 0 of 0 |"),
            "{t}"
        );
        assert!(
            row("spsc_round_trip", "host").contains("| 400 ns | 75.0 ns |"),
            "{t}"
        );
        assert!(queue_target_runs_table(&[]).is_err());
        assert!(queue_target_runs_table(&[("x".to_owned(), "{}".to_owned())]).is_err());
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

    fn run_of(k: usize, v: f64) -> Run {
        Run {
            run: k,
            samples: vec![v, v, v],
        }
    }

    /// The floor of runs `k` with p50 `v` (and a 20 ns timer overhead).
    fn floor_of(runs: &[(usize, f64)]) -> Floor {
        Floor {
            runs: runs
                .iter()
                .map(|&(k, v)| Run {
                    run: k,
                    samples: vec![v],
                })
                .collect(),
            timer_ns: vec![20.0; runs.len()],
        }
    }

    #[test]
    fn table_has_ratios_to_ringwire_and_floor() {
        let mut fams = Families::new();
        let mut floor = Vec::new();
        for (k, (w, p, i, f)) in [
            (200.0, 100.0, 400.0, 100.0),
            (220.0, 110.0, 440.0, 90.0),
            (210.0, 105.0, 420.0, 110.0),
        ]
        .into_iter()
        .enumerate()
        {
            add_run(&mut fams, "round_trip_2proc/ringwire", run_of(k, w));
            add_run(&mut fams, "round_trip_2proc/ringfire", run_of(k, p));
            add_run(&mut fams, "round_trip_2proc/iceoryx2", run_of(k, i));
            // criterion's own floor bench: in its table, never the ÷ floor divisor.
            add_run(&mut fams, "floor/cacheline_round_trip", run_of(k, 5.0 * f));
            floor.push((k, f));
        }
        // iceoryx2 failed in one extra run of ringwire's, which has no floor figure either:
        // runs are counted per implementation.
        add_run(&mut fams, "round_trip_2proc/ringwire", run_of(3, 210.0));
        let cmds = BTreeMap::from([(
            "round_trip_2proc".to_string(),
            "cargo bench -p ringwire-tests --bench handoff".to_string(),
        )]);
        let md = criterion_tables(&fams, &floor_of(&floor), &cmds, &BTreeMap::new(), |f, _| {
            Some(format!("{f}.svg"))
        });
        assert!(md.contains("Reproduce: `cargo bench -p ringwire-tests --bench handoff`"));
        // ringwire: median of 200, 220, 210, 210 = 210. Ratios within runs 0..3:
        // ringwire ÷ ringfire 2, 2, 2; ringwire ÷ floor 2.00, 2.44, 1.91 (run 3 has no
        // floor); ringfire ÷ floor 1.00, 1.22 and, in run 2, 0.95: kept, and noted.
        assert!(
            md.contains("| ringwire | 210 ns | 200 ns – 220 ns | 4 | 1.00 (1.00 – 1.00) | 2.00 (1.91 – 2.44), 3 of 4 runs (no floor figure in the others) |"),
            "{md}"
        );
        assert!(
            md.contains("| ringfire | 105 ns | 100 ns – 110 ns | 3 | 2.00 (2.00 – 2.00) | 1.00 (0.95 – 1.22) |"),
            "{md}"
        );
        assert!(
            md.contains("| iceoryx2 | 420 ns | 400 ns – 440 ns | 3 | 0.50 (0.50 – 0.50) | 4.00 (3.82 – 4.89) |"),
            "{md}"
        );
        assert!(
            md.contains(
                "Below 1 (the figure under that run's floor p50) in: ringfire (1 of 3 runs);"
            ),
            "{md}"
        );
        assert!(
            md.contains("this ÷ floor (`ringwire bench floor` p50)"),
            "{md}"
        );
        assert!(
            md.contains("`timer_overhead_ns`, 20.0 ns in these runs"),
            "{md}"
        );
        // The floor's own table has no floor column.
        assert!(md.contains("| cacheline_round_trip | 500 ns | 450 ns – 550 ns | 3 | – |\n"));
        assert!(md.contains("![round_trip_2proc](round_trip_2proc.svg)"));
        // No floor figure in any run: no column.
        let md = criterion_tables(&fams, &Floor::default(), &cmds, &BTreeMap::new(), |_, _| {
            None
        });
        assert!(!md.contains("÷ floor"), "{md}");
    }

    /// A host with two states (fast F, slow S) and a floor that failed in runs 0 and 1:
    /// ringwire F F S S F = 110 115 550 560 120 (median 120, an F figure), floor runs 2..4
    /// S S F = 500 505 100 (median 500, an S figure). The ratio of those medians is 0.24,
    /// below the floor; within each run ringwire is 1.10, 1.11 and 1.20 times the floor.
    #[test]
    fn ratios_pair_figures_of_one_run_not_medians_of_different_runs() {
        let mut fams = Families::new();
        for (k, w) in [110.0, 115.0, 550.0, 560.0, 120.0].into_iter().enumerate() {
            add_run(&mut fams, "round_trip_2proc/ringwire", run_of(k, w));
        }
        let floor = floor_of(&[(2, 500.0), (3, 505.0), (4, 100.0)]);
        for (k, f) in [(2, 500.0), (3, 505.0), (4, 100.0)] {
            // A peer measured in the same runs as the floor, in the same states.
            add_run(&mut fams, "round_trip_2proc/ringfire", run_of(k, f * 2.0));
        }
        let rw = &fams["round_trip_2proc"]["ringwire"];
        let fl = &floor.runs;
        let pf = &fams["round_trip_2proc"]["ringfire"];
        let medians = aggregate(rw).unwrap().median / aggregate(fl).unwrap().median;
        assert!(medians < 1.0, "{medians}");
        let per_run = Agg::of(&per_run_ratios(rw, fl)).unwrap();
        assert!(per_run.min >= 1.0, "{per_run:?}");
        assert_eq!(per_run.runs, 3);
        // ringwire ÷ ringfire: a ratio of medians says 120 / 1000 = 0.12, per run 0.55–0.60.
        let r = Agg::of(&per_run_ratios(rw, pf)).unwrap();
        assert!(r.min > 0.5 && r.max < 0.61, "{r:?}");
        let md = criterion_tables(&fams, &floor, &BTreeMap::new(), &BTreeMap::new(), |_, _| {
            None
        });
        assert!(
            md.contains("| ringwire | 120 ns | 110 ns – 560 ns | 5 | 1.00 (1.00 – 1.00) | 1.11 (1.10 – 1.20), 3 of 5 runs (no floor figure in the others) |"),
            "{md}"
        );
        assert!(!md.contains("Below 1"), "{md}");
    }

    /// A run whose floor p50 is above the figure it divides (here 500 ns against 90 ns) is
    /// not left out: the column's median and min – max cover every run with both figures,
    /// and the runs below 1 are named under the table.
    #[test]
    fn runs_whose_floor_measured_above_the_figure_stay_in_the_floor_ratio() {
        let mut fams = Families::new();
        let mut floor = Vec::new();
        for (k, (w, f)) in [(200.0, 100.0), (90.0, 500.0), (210.0, 105.0)]
            .into_iter()
            .enumerate()
        {
            add_run(&mut fams, "round_trip_2proc/ringwire", run_of(k, w));
            floor.push((k, f));
        }
        let floor = floor_of(&floor);
        let md = criterion_tables(&fams, &floor, &BTreeMap::new(), &BTreeMap::new(), |_, _| {
            None
        });
        assert!(
            md.contains("| ringwire | 200 ns | 90.0 ns – 210 ns | 3 | 1.00 (1.00 – 1.00) | 2.00 (0.18 – 2.00) |"),
            "{md}"
        );
        assert!(
            md.contains(
                "Below 1 (the figure under that run's floor p50) in: ringwire (1 of 3 runs)"
            ),
            "{md}"
        );
        assert!(md.contains("whatever the ratio"), "{md}");
        let mine: Vec<Run> = [(0, 300.0), (1, 80.0), (2, 90.0)]
            .into_iter()
            .map(|(k, v)| run_of(k, v))
            .collect();
        assert_eq!(
            floor_ratio_cell(&mine, &floor.runs),
            ("0.86 (0.16 – 3.00)".to_string(), 2)
        );
    }

    #[test]
    fn floor_files_give_the_p50_and_the_timer_overhead() {
        let text = r#"{"cacheline_round_trip":{"count":5,"p50_ns":63,"p90_ns":70,"p99_ns":90,"p999_ns":1,"max_ns":1,"mean_ns":1.0},"moving_line_round_trip":{"count":5,"p50_ns":90,"p90_ns":1,"p99_ns":1,"p999_ns":1,"max_ns":1,"mean_ns":1.0},"timer_overhead_ns":21,"pinned":true,"cores":[0,1],"loopback_64b":{"sent":1,"received":1,"per_sec":1}}"#;
        assert_eq!(parse_floor(text), Some((63.0, Some(21.0))));
        assert_eq!(parse_floor(""), None);
        assert_eq!(parse_floor(r#"{"cacheline_round_trip":{}}"#), None);
    }

    #[test]
    fn a64_rows_compare_with_ringwire_a64_and_notes_are_printed() {
        let mut fams = Families::new();
        for k in 0..3 {
            add_run(&mut fams, "push_drain/ringwire", run_of(k, 10.0));
            add_run(&mut fams, "push_drain/ringwire_a64", run_of(k, 20.0));
            add_run(&mut fams, "push_drain/ringfire_a64", run_of(k, 40.0));
            add_run(&mut fams, "push_drain/ringfire", run_of(k, 5.0));
            add_run(&mut fams, "mpmc_2p2c/ringwire", run_of(k, 50.0));
            add_run(&mut fams, "mpmc_2p2c/ringfire_lossy", run_of(k, 25.0));
        }
        let notes = BTreeMap::from([(
            "mpmc_2p2c".to_string(),
            vec!["heapless_mpmc: not measured".to_string()],
        )]);
        let md = criterion_tables(
            &fams,
            &Floor::default(),
            &BTreeMap::new(),
            &notes,
            |_, _| None,
        );
        assert!(
            md.contains("| ringfire_a64 | 40.0 ns | 40.0 ns – 40.0 ns | 3 | 0.50 (0.50 – 0.50) |"),
            "{md}"
        );
        assert!(
            md.contains("| ringwire_a64 | 20.0 ns | 20.0 ns – 20.0 ns | 3 | 1.00 (1.00 – 1.00) |"),
            "{md}"
        );
        assert!(
            md.contains("| ringfire | 5.0 ns | 5.0 ns – 5.0 ns | 3 | 2.00 (2.00 – 2.00) |"),
            "{md}"
        );
        assert!(md.contains("`*_a64` rows: ringwire_a64's time"), "{md}");
        let mpmc = &md[md.find("### `mpmc_2p2c`").unwrap()..];
        assert!(mpmc.contains("items it dropped count as moved"), "{md}");
        assert!(mpmc.contains("heapless_mpmc: not measured"), "{md}");
        let pd = &md[md.find("### `push_drain`").unwrap()..];
        assert!(!pd.contains("dropped count as moved"), "{md}");
    }

    #[test]
    fn the_core_mpmc_queue_gets_its_own_ratio_column() {
        let mut fams = Families::new();
        // Run 2 is a slow run for crossbeam only: core ÷ crossbeam 0.50, 0.50, 0.25.
        for (k, core, cb) in [(0, 10.0, 20.0), (1, 11.0, 22.0), (2, 11.0, 44.0)] {
            add_run(&mut fams, "mpmc_2p2c/ringwire", run_of(k, 12.0));
            add_run(&mut fams, "mpmc_2p2c/ringwire_core", run_of(k, core));
            add_run(&mut fams, "mpmc_2p2c/crossbeam_arrayqueue", run_of(k, cb));
            add_run(&mut fams, "spsc_throughput/u64/ringwire", run_of(k, 5.0));
        }
        let md = criterion_tables(
            &fams,
            &Floor::default(),
            &BTreeMap::new(),
            &BTreeMap::new(),
            |_, _| None,
        );
        let mpmc = &md[md.find("### `mpmc_2p2c`").unwrap()..md.find("### `spsc").unwrap()];
        assert!(
            mpmc.contains("| ringwire_core time ÷ this, within each run: median (min – max) |"),
            "{md}"
        );
        // ringwire ÷ crossbeam: 0.60, 0.55, 0.27; ringwire_core ÷ crossbeam: 0.50, 0.50, 0.25.
        assert!(
            mpmc.contains("| crossbeam_arrayqueue | 22.0 ns | 20.0 ns – 44.0 ns | 3 | 0.55 (0.27 – 0.60) | 0.50 (0.25 – 0.50) |"),
            "{md}"
        );
        // Families without the core queue keep their columns.
        let spsc = &md[md.find("### `spsc").unwrap()..];
        assert!(!spsc.contains("ringwire_core"), "{md}");
        assert!(spsc.contains("|---|---:|---:|---:|---:|\n"), "{md}");
    }

    #[test]
    fn tables_from_the_runs_json_are_the_tables_from_the_runs() {
        let mut fams = Families::new();
        for (k, w, f) in [(0, 200.0, 100.0), (1, 220.0, 110.0), (3, 210.0, 300.0)] {
            add_run(
                &mut fams,
                "round_trip_2proc/ringwire",
                Run {
                    run: k,
                    samples: vec![w - 5.0, w, w + 9.0],
                },
            );
            add_run(&mut fams, "round_trip_2proc/ringfire", run_of(k, f));
            add_run(&mut fams, "mpmc_2p2c/ringwire_core", run_of(k, f / 10.0));
            add_run(&mut fams, "mpmc_2p2c/ringwire", run_of(k, w / 10.0));
        }
        let floor = floor_of(&[(0, 90.0), (3, 95.0)]);
        let cmds = BTreeMap::from([("round_trip_2proc".to_string(), "cargo bench x".to_string())]);
        let table = |fams: &Families, floor: &Floor| {
            criterion_tables(fams, floor, &cmds, &BTreeMap::new(), |_, _| None)
        };
        let text = runs_json(&fams, &floor);
        let (fams2, floor2) = parse_runs_json(&text).unwrap();
        assert_eq!(table(&fams, &floor), table(&fams2, &floor2));
        assert!(text.contains("\"round_trip_2proc/ringwire\""), "{text}");
        assert!(table(&fams2, &floor2).contains("this ÷ floor"));
        assert!(parse_runs_json("{}").is_err());
        assert!(parse_runs_json(r#"{"benches":{"a/b":[{"run":0}]}}"#).is_err());
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
            "| wake | 200 ns | 100 ns – 300 ns | 8000 ns | 7000 ns – 9000 ns | – | 3 of 4 | 1 (no result) | `ringwire bench x` |\n"
        );
        assert!(latency_row("x", "c", "/nope", &runs).contains("| – | – | – | – | – | 0 of 4 |"));
    }

    #[test]
    fn latency_rows_show_the_producer_lateness_reported_beside_the_summary() {
        let sum = |p50: u64, p99: u64, max: u64| {
            format!(
                "{{\"count\":5,\"p50_ns\":{p50},\"p90_ns\":1,\"p99_ns\":{p99},\"p999_ns\":1,\"max_ns\":{max},\"mean_ns\":1.0}}"
            )
        };
        let run = |late_p99: u64, late_max: u64| {
            format!(
                "{{\"r1000\":{{\"ringwire\":{{\"summary\":{},\"producer_lateness\":{}}}}}}}",
                sum(100, 900, 1000),
                sum(10, late_p99, late_max)
            )
        };
        let runs = vec![run(2000, 5000), run(4000, 90_000), run(3000, 6000)];
        let row = latency_row("async", "c", "/r1000/ringwire/summary", &runs);
        // The median of the runs' p99s, and the largest max of any run.
        assert!(row.contains("| 3000 ns / 90.0 µs | 3 of 3 |"), "{row}");
    }

    #[test]
    fn handoff_runs_that_lost_records_are_runs_with_errors() {
        let run = |received: u64, lapped: u64, seq: &str, p50: u64| {
            format!(
                "{{\"rate\":1000,\"seconds\":1,\"sent\":1000,\"reader\":{{\"received\":{received},\"lapped\":{lapped},\"missing\":0,\"seq_errors\":{seq},\"summary\":{{\"count\":5,\"p50_ns\":{p50},\"p90_ns\":1,\"p99_ns\":{p50},\"p999_ns\":1,\"max_ns\":1,\"mean_ns\":1.0}}}}}}"
            )
        };
        let runs = vec![
            run(1000, 0, "null", 100),
            run(990, 0, "\"10 missing\"", 1),
            run(1000, 3, "null", 1),
            run(1000, 0, "null", 300),
            run(1000, 0, "null", 200),
        ];
        let row = latency_row("handoff", "c", "/reader/summary", &runs);
        assert!(
            row.starts_with("| handoff | 200 ns | 100 ns – 300 ns |"),
            "{row}"
        );
        assert!(row.contains("| 3 of 5 | 2 ("), "{row}");
        assert!(
            row.contains("received 990 of 1000") && row.contains("lapped 3"),
            "{row}"
        );
        // Fewer than half clean: no figures.
        let bad = vec![runs[0].clone(), runs[1].clone(), runs[2].clone()];
        assert!(
            latency_row("h", "c", "/reader/summary", &bad)
                .starts_with("| h | – | – | – | – | – | 1 of 3 | 2 ("),
        );
        // An old reader without a sequence check does not pass as clean.
        let old = runs[0].replace("\"seq_errors\":null,", "");
        assert!(summary_at(&old, "/reader/summary").is_err());
        // A row that failed beside clean ones (async_wake): its error, the others' figures.
        let mixed = r#"{"r1":{"a":{"error":"lapped"},"b":{"summary":{"p50_ns":5,"p99_ns":9}}}}"#;
        assert_eq!(
            summary_at(mixed, "/r1/a/summary").err().as_deref(),
            Some("lapped")
        );
        assert_eq!(summary_at(mixed, "/r1/b/summary").map(|r| r.p50), Ok(5.0));
    }

    #[test]
    fn replication_medians_and_ratio() {
        // Each row's CPU is its p50 / 100,000 cores (80 µs: 0.80 cores).
        let row = |imp: &str, t: &str, p50: u64, err: bool| {
            format!(
                "{{\"implementation\":\"{imp}\",\"transport\":\"{t}\",\"config\":\"default\",\"rate\":1000,\"seconds\":3,\"latency\":{{\"count\":1,\"p50_ns\":{p50},\"p90_ns\":0,\"p99_ns\":{},\"p999_ns\":0,\"max_ns\":0,\"mean_ns\":0.0}},\"producer_lateness\":{{\"count\":1,\"p50_ns\":1000,\"p90_ns\":0,\"p99_ns\":{},\"p999_ns\":0,\"max_ns\":{},\"mean_ns\":0.0}},\"error\":{},\"cpu_cores\":{:.3}}}",
                p50 * 2,
                p50 / 100,
                p50,
                if err { "\"lost\"" } else { "null" },
                p50 as f64 / 100_000.0
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
        // ringwire's failed run (60 µs, 0.60 cores) is in no figure; ratios within runs 0
        // and 2: 80/30 = 2.67, 70/35 = 2.00; CPU: ringwire 0.80 and 0.70, ringfire 0.30, 0.40
        // and 0.35.
        assert!(
            md.contains("| 1000 | tcp | default | 75.0 µs | 70.0 µs – 80.0 µs | 35.0 µs | 30.0 µs – 40.0 µs | 2.33 (2.00 – 2.67) | 150.0 µs | 70.0 µs | 750 ns / 80.0 µs; 350 ns / 40.0 µs | 0.75; 0.35 | 2/3 | 1/0 |"),
            "{md}"
        );
        // Two of three ringwire runs failed: no ringwire figures, no ratio.
        let runs = vec![
            run(80_000, 30_000, true),
            run(60_000, 40_000, true),
            run(70_000, 35_000, false),
        ];
        let md = replication_table(&runs);
        assert!(
            md.contains("| 1000 | tcp | default | – (2 of 3 runs with errors) | – | 35.0 µs | 30.0 µs – 40.0 µs | – | – (2 of 3 runs with errors) |"),
            "{md}"
        );
        assert!(md.contains("| –; 0.35 | 1/3 | 2/0 |"), "{md}");
        // A ringfire child that crashed in run 1 (no row, listed under "failed"): a run with
        // errors of that configuration, in no figure.
        let crashed = format!(
            "JSON: {{\"bench\":\"replication\",\"rows\":[{}],\"failed\":[{{\"implementation\":\"ringfire\",\"transport\":\"tcp\",\"config\":\"default\",\"rate\":1000,\"error\":\"no result (signal: 11)\"}}]}}",
            row("ringwire", "tcp", 60_000, false)
        );
        let runs = vec![
            run(80_000, 30_000, false),
            crashed,
            run(70_000, 40_000, false),
        ];
        let md = replication_table(&runs);
        assert!(
            md.contains("| 1000 | tcp | default | 70.0 µs | 60.0 µs – 80.0 µs | 35.0 µs | 30.0 µs – 40.0 µs | 2.21 (1.75 – 2.67) |"),
            "{md}"
        );
        assert!(md.contains("| 3/2 | 0/1 |"), "{md}");
        assert!(replication_rows("not json").is_empty());
        // A run whose file is empty (the bench process crashed whole), and a run missing
        // ringwire's row: runs with errors of that configuration, not runs left uncounted
        // (they showed as 3/3 | 0/0 and 2/3 | 0/0).
        let runs = vec![
            run(80_000, 30_000, false),
            run(60_000, 40_000, false),
            run(70_000, 35_000, false),
            String::new(),
        ];
        let md = replication_table(&runs);
        assert!(md.contains("| 3/3 | 1/1 |"), "{md}");
        let only_ringfire = format!(
            "JSON: {{\"bench\":\"replication\",\"rows\":[{}]}}",
            row("ringfire", "tcp", 30_000, false)
        );
        let runs = vec![
            only_ringfire,
            run(60_000, 40_000, false),
            run(70_000, 35_000, false),
        ];
        let md = replication_table(&runs);
        assert!(md.contains("| 2/3 | 1/0 |"), "{md}");
    }

    /// scripts/bench.sh keeps the replication runs as one array (replication.json) with
    /// `json_array` (scripts/bench-lib.sh): a failed run, whose file is empty, stays one
    /// element of it, so the table recomputed from the array's elements is the table made
    /// from the run files, that run counted among the runs with errors.
    #[test]
    fn the_kept_replication_array_has_one_element_per_run_failed_ones_too() {
        let row = |imp: &str, p50: u64| {
            format!(
                "{{\"implementation\":\"{imp}\",\"transport\":\"tcp\",\"config\":\"default\",\"rate\":1000,\"latency\":{{\"p50_ns\":{p50},\"p99_ns\":{p50}}},\"error\":null}}"
            )
        };
        let run = |w: u64, f: u64| {
            format!(
                "{{\"bench\":\"replication\",\"rows\":[{},{}]}}\n",
                row("ringwire", w),
                row("ringfire", f)
            )
        };
        // Run 2 failed: its file is empty.
        let texts = [run(80_000, 40_000), String::new(), run(60_000, 30_000)];
        let dir = std::env::temp_dir().join(format!("bench-lib-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files: Vec<PathBuf> = texts
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let f = dir.join(format!("run{}.json", k + 1));
                std::fs::write(&f, t).unwrap();
                f
            })
            .collect();
        let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/bench-lib.sh");
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(". \"$0\" && json_array \"$@\"")
            .arg(&lib)
            .args(&files)
            .output();
        let _ = std::fs::remove_dir_all(&dir);
        let out = out.expect("bash runs");
        assert!(out.status.success(), "{out:?}");
        let array: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("json_array writes JSON");
        let elements: Vec<String> = array
            .as_array()
            .expect("an array")
            .iter()
            .map(serde_json::Value::to_string)
            .collect();
        assert_eq!(elements.len(), 3, "{elements:?}");
        assert_eq!(elements[1], "null");
        let from_files = replication_table(&texts);
        assert!(from_files.contains("| 2/2 | 1/1 |"), "{from_files}");
        assert_eq!(replication_table(&elements), from_files);
    }

    /// The CPU column is the median over the clean runs that reported `cpu_cores`; rows
    /// without it (a run of an older bench) give no CPU figure rather than a wrong one.
    #[test]
    fn replication_cpu_is_the_median_of_clean_runs_that_reported_it() {
        let row = |imp: &str, cpu: Option<f64>| {
            let cpu = cpu.map_or(String::new(), |c| format!(",\"cpu_cores\":{c}"));
            format!(
                "{{\"implementation\":\"{imp}\",\"transport\":\"unicast\",\"config\":\"spin\",\"rate\":1000,\"seconds\":3,\"latency\":{{\"count\":1,\"p50_ns\":1000,\"p90_ns\":0,\"p99_ns\":2000,\"p999_ns\":0,\"max_ns\":0,\"mean_ns\":0.0}},\"producer_lateness\":null,\"error\":null{cpu}}}"
            )
        };
        let run = |w: Option<f64>, f: Option<f64>| {
            format!(
                "JSON: {{\"bench\":\"replication\",\"rows\":[{},{}]}}",
                row("ringwire", w),
                row("ringfire", f)
            )
        };
        let runs = vec![
            run(Some(1.9), None),
            run(Some(1.2), None),
            run(None, None),
            run(Some(1.5), None),
        ];
        let rows = replication_rows(&runs[0]);
        assert_eq!((rows[0].cpu, rows[1].cpu), (Some(1.9), None));
        let md = replication_table(&runs);
        assert!(
            md.contains("| CPU (cores), median of clean runs: ringwire; ringfire |"),
            "{md}"
        );
        assert!(md.contains("| 1.50; – | 4/4 | 0/0 |"), "{md}");
    }
}
