#!/usr/bin/env bash
# Regenerates BENCHMARKS.md (and docs/bench/*.svg) from one run of this script on this
# machine: criterion benches of ringwire against its peers (ringfire, iceoryx2, rtrb,
# crossbeam, disruptor, heapless, std) in the same run, the machine's floor, the demo's
# replication path per transport, the open-loop replication stress per rate, and ringwire
# serve+mirror against ringfire's ReplicaServer+Mirror. Every comparison is measured RUNS
# times (5 by default), each run in its own process; the report gives the median of the
# runs' figures with their min–max. Run it on a quiet machine:
#
#   scripts/bench.sh                    # ~35 min on 2 cores
#   QUICK=1 scripts/bench.sh            # shorter criterion and replication runs, same shape
#   RUNS=7 scripts/bench.sh             # more runs (at least 5 for BENCHMARKS.md)
#   BENCH_LOCK=/work/bench.lock scripts/bench.sh
#                                       # builds under a shared flock, each measurement phase
#                                       # (one criterion run of every bench, one replication
#                                       # run, …; each under 3 minutes) under an exclusive one
#
# iceoryx2 is built from bench-peers/ (outside the workspace: it needs libclang); if it
# cannot be built or run, BENCHMARKS.md says "iceoryx2: not built (reason)".
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=BENCHMARKS.md
svg=docs/bench
runs_dir=$root/target/bench-runs
RUNS=${RUNS:-5}
# The per-run paths `<dir>/run1<suffix>` … `<dir>/run$RUNS<suffix>`, one per line, in run order
# (a glob would put run10 before run2).
in_order() { # <dir> <suffix>
  local k
  for k in $(seq 1 "$RUNS"); do printf '%s\n' "$1/run$k$2"; done
}
# json_array: the per-run files of a table as one JSON array, a failed run as null.
# shellcheck source=scripts/bench-lib.sh
. "$root/scripts/bench-lib.sh"

if [ "${QUICK:-0}" = 1 ]; then
  crit_args=(--warm-up-time 0.5 --measurement-time 1)
  repl_secs=2 mc_secs=2 handoff_secs=2 demo_secs=3 stress_secs=2 async_secs=1
  paired_rounds=6
else
  crit_args=(--warm-up-time 1 --measurement-time 2)
  repl_secs=3 mc_secs=3 handoff_secs=5 demo_secs=5 stress_secs=3 async_secs=3
  paired_rounds=16
fi
crit_str="${crit_args[*]}"

# With BENCH_LOCK set: builds hold the lock shared, measurement phases exclusive (fd 9).
if [ -n "${BENCH_LOCK:-}" ]; then exec 9>>"$BENCH_LOCK"; fi
lock_s() { if [ -n "${BENCH_LOCK:-}" ]; then flock -s 9; fi; }
lock_x() { if [ -n "${BENCH_LOCK:-}" ]; then flock -x 9; fi; }
unlock() { if [ -n "${BENCH_LOCK:-}" ]; then flock -u 9; fi; }
# The report's parts before they are assembled, removed on any exit.
scratch=$(mktemp -d)
# Children inherit fd 9: release explicitly on any exit so a straggler cannot keep the lock.
trap 'unlock; ice_cleanup 2>/dev/null || true; rm -rf "$scratch"' EXIT

rm -rf "$runs_dir"
mkdir -p "$runs_dir" "$svg"

lock_s
cargo build --release -p ringwire -p ringwire-tests --bins
benches=(handoff)
[ -f tests/benches/queues.rs ] && benches+=(queues)
[ -f tests/benches/ingest.rs ] && benches+=(ingest)
for b in "${benches[@]}" replication async_wake; do
  cargo bench -p ringwire-tests --bench "$b" --no-run
done
cargo build --release -p ringwire-tests --example spsc_instructions

# ---- iceoryx2 (bench-peers/, outside the workspace) ----
ice_bin=bench-peers/target/release/ringwire-bench-peers
ice_status=""
# bindgen (through clang-sys) loads libclang.so or libclang-<version>.so; libclang-cpp does not do.
have_libclang() {
  for f in /usr/lib/llvm-*/lib/libclang.so* /usr/lib/*/libclang.so* /usr/lib/*/libclang-[0-9]*.so*; do
    [ -e "$f" ] && return 0
  done
  return 1
}
if ! have_libclang; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { apt-get update -qq && apt-get install -y -qq libclang-dev; } >"$runs_dir/apt.log" 2>&1 ||
      ice_status="not built (apt-get install libclang-dev failed, see target/bench-runs/apt.log)"
  else
    ice_status="not built (libclang missing and apt-get not usable as $(id -un))"
  fi
fi
if [ -z "$ice_status" ]; then
  if ! (cd bench-peers && cargo build --release) >"$runs_dir/iceoryx2-build.log" 2>&1; then
    ice_status="not built (cargo build in bench-peers/ failed: $(grep -m1 -E '^error' "$runs_dir/iceoryx2-build.log" || tail -1 "$runs_dir/iceoryx2-build.log"))"
  fi
fi
ice_failed=0
# iceoryx2 leaves its management files in /dev/shm (iox2_*): remove, at the end, those this
# run created, and no other.
ice_shm_before=$(ls -d /dev/shm/iox2_* 2>/dev/null || true)
ice_cleanup() {
  local f
  for f in /dev/shm/iox2_*; do
    [ -e "$f" ] || continue
    grep -qxF "$f" <<<"$ice_shm_before" || rm -rf "$f"
  done
}
unlock

# ---- criterion benches, RUNS separate runs, interleaved so slow drift hits every bench ----
# The "Reproduce" command of every table comes from what each bench actually wrote in run 1:
# the families (full id without its last part, as bench_report groups them) of the
# benchmark.json files written since a stamp taken just before that bench ran.
cmds_file=$runs_dir/commands.txt
stamp=$runs_dir/stamp
: >"$cmds_file"
record_families() { # <command>: every family written under $crit_home since $stamp
  find "$crit_home" -path '*/new/benchmark.json' -newer "$stamp" -print0 |
    xargs -0 -r sed -n 's/.*"full_id": *"\([^"]*\)".*/\1/p' |
    while IFS= read -r id; do printf '%s=%s\n' "${id%/*}" "$1"; done |
    sort -u >>"$cmds_file"
}
# Each criterion run also runs `ringwire bench floor --json` right after its handoff bench: the
# criterion tables' "this ÷ floor" divides run k's round trips by run k's floor p50
# (bench_report reads it from $crit_home/ringwire_bench_floor.json).
floor_cmd="target/release/ringwire bench floor"
mkdir -p "$runs_dir/floor"
# iceoryx2's round trip and the floor run right after the handoff bench (whose last groups are
# ringwire's and ringfire's round trips, then the criterion floor rows), so that the host's state changes, which last
# minutes, hit them and the rows they are compared with alike.
run_iceoryx2() { # <run number>
  [ -z "$ice_status" ] || return 0
  echo "== run $1/$RUNS: iceoryx2"
  if ! CRITERION_HOME=$crit_home "$ice_bin" --bench "${crit_args[@]}"; then
    ice_failed=$((ice_failed + 1))
    # A failed run's figures must not reach the table: remove whatever criterion wrote
    # for it (its directory is the one whose benchmark.json has this full id).
    find "$crit_home" -path '*/new/benchmark.json' -print0 |
      xargs -0 -r grep -lF '"full_id":"round_trip_2proc/iceoryx2"' |
      while IFS= read -r f; do rm -rf "$(dirname "$(dirname "$f")")"; done || true
  fi
}
run_floor() { # <run number>
  echo "== run $1/$RUNS: ringwire bench floor"
  mkdir -p "$crit_home"
  $floor_cmd --json >"$runs_dir/floor/run$1.json" || true
  cp "$runs_dir/floor/run$1.json" "$crit_home/ringwire_bench_floor.json"
}
for k in $(seq 1 "$RUNS"); do
  crit_home=$runs_dir/criterion/run$k
  lock_x
  for b in "${benches[@]}"; do
    echo "== run $k/$RUNS: $b"
    touch "$stamp"
    CRITERION_HOME=$crit_home cargo bench -p ringwire-tests --bench "$b" -- "${crit_args[@]}"
    if [ "$k" = 1 ]; then record_families "cargo bench -p ringwire-tests --bench $b -- $crit_str"; fi
    if [ "$b" = handoff ]; then
      run_iceoryx2 "$k"
      run_floor "$k"
    fi
  done
  if [ -f tests/benches/queues.rs ]; then
    # The MPMC bench again under the exponential waiting policy (group mpmc_2p2c_exp).
    echo "== run $k/$RUNS: queues mpmc_2p2c_exp"
    touch "$stamp"
    QBENCH_BACKOFF=exp CRITERION_HOME=$crit_home \
      cargo bench -p ringwire-tests --bench queues -- mpmc_2p2c_exp "${crit_args[@]}"
    if [ "$k" = 1 ]; then
      record_families "QBENCH_BACKOFF=exp cargo bench -p ringwire-tests --bench queues -- mpmc_2p2c_exp $crit_str"
    fi
  fi
  unlock
done
if [ -z "$ice_status" ]; then
  if [ "$ice_failed" = "$RUNS" ]; then
    ice_status="not measured (every run failed; rerun \`$ice_bin --bench\` to see why)"
  elif [ "$ice_failed" != 0 ]; then
    ice_status="measured in $((RUNS - ice_failed)) of $RUNS runs (the others failed)"
  fi
fi

tables=$scratch/tables.md
cmd_args=()
while IFS= read -r line; do
  cmd_args+=(--cmd "$line")
done <"$cmds_file"
# queues.rs skips heapless_mpmc on fewer than 4 CPUs (its u8 cursors can wedge when the four
# threads share cores): say so under the MPMC tables rather than leave the row out silently.
if [ -f tests/benches/queues.rs ] &&
  [ -z "$(find "$runs_dir/criterion" -path '*/heapless_mpmc/new/benchmark.json' -print -quit)" ]; then
  if [ "$(nproc)" -lt 4 ]; then
    why="skipped by queues.rs on fewer than 4 CPUs (this machine: $(nproc)): heapless 0.8's u8 cursors can wedge the queue (ABA) when its four threads share cores"
  else
    why="no result in any run (rerun the queues bench and see its stderr)"
  fi
  for f in mpmc_2p2c mpmc_2p2c_exp; do
    cmd_args+=(--note "$f=\`heapless_mpmc\`: not measured, $why.")
  done
fi
# push_drain: handoff.rs logs every criterion sample (iter_custom call) as
# "<bench id> <tries> <clean|lapped|behind>"; count per implementation over all runs.
# Kept beside the other per-run data: the note's counts can be recomputed from it.
in_order "$runs_dir/criterion" /push_drain_samples.txt | while IFS= read -r f; do
  [ -f "$f" ] && sed "s|^|run${f#"$runs_dir"/criterion/run} |; s|/push_drain_samples.txt||" "$f"
done >"$svg/push_drain_samples.txt" || true
pd_rows=$(cat "$runs_dir"/criterion/run*/push_drain_samples.txt 2>/dev/null |
  awk 'NF == 3 {
         id = $1; sub(/^push_drain\//, "", id)
         calls[id]++; if ($2 > 1) retaken[id]++; if ($3 != "clean") kept[id]++
       }
       END { for (id in calls) printf "| %s | %d | %d | %d |\n", id, calls[id], retaken[id], kept[id] }' |
  sort) || pd_rows=""
if [ -n "$pd_rows" ]; then
  cmd_args+=(--note "push_drain=Samples over all $RUNS runs (every criterion \`iter_custom\` call, warm-up included; per call, handoff.rs logs the tries it took and the kept try's outcome):

| implementation | timed calls | calls that needed a re-take | calls kept lapped or behind (no clean try in 50) |
|---|---:|---:|---:|
$pd_rows")
else
  cmd_args+=(--note "push_drain=No sample log (\`push_drain_samples.txt\`) in any run: re-takes not counted.")
fi
# push_drain sample lengths (pushes per criterion sample, every implementation and run; the
# measurement samples, not the warm-up calls) from criterion's sample.json "iters" arrays.
pd_len=$(find "$runs_dir/criterion" -path '*/push_drain*/new/sample.json' -print0 |
  xargs -0 -r sed -n 's/.*"iters":\[\([^]]*\)\].*/\1/p' | tr ',' '\n' |
  awk 'NF { v = $1 + 0; n++; if (n == 1 || v < min) min = v; if (v > max) max = v; if (v > 65536) long++ }
       END { if (n) printf "%d %d %d %d", n, min, max, long }') || pd_len=""
pd_len_text=""
if [ -n "$pd_len" ]; then
  read -r pd_n pd_min pd_max pd_long <<<"$pd_len"
  pd_len_text="; in these runs the samples were $pd_min to $pd_max pushes long, $pd_long of $pd_n longer than the 65,536-slot ring"
fi
mapfile -t crit_runs < <(in_order "$runs_dir/criterion" "")
target/release/bench_report criterion "$tables" "$svg" "${crit_runs[@]}" "${cmd_args[@]}" \
  --runs-json "$svg/criterion_runs.json"

# ---- SPSC instructions per item under callgrind: one run (a count, not a time) ----
instr_bin=target/release/examples/spsc_instructions
instr_cmd="valgrind --tool=callgrind --toggle-collect='*run_queue*' --callgrind-out-file=/dev/null $instr_bin QUEUE"
instr=$scratch/instr.md
if command -v valgrind >/dev/null; then
  lock_x
  echo "== SPSC instructions per item (callgrind)"
  {
    echo "| queue | items | instructions in \`run_queue\` | per item | ÷ rtrb |"
    echo "|---|---:|---:|---:|---:|"
    for ty in u64 64B; do
      rt=""
      for q in rtrb ringwire; do
        o=$(valgrind --tool=callgrind --toggle-collect='*run_queue*' --callgrind-out-file=/dev/null \
          "$instr_bin" "$q-$ty" 2>&1) || { echo "| $q-$ty | failed | | | |"; continue; }
        items=$(sed -n 's/.*: \([0-9]*\) items pushed and popped/\1/p' <<<"$o")
        ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' <<<"$o" | tail -1)
        # No count (an unparsable output, or run_queue renamed or inlined: Collected : 0).
        if ! [[ "$items" =~ ^[1-9][0-9]*$ && "$ir" =~ ^[1-9][0-9]*$ ]]; then
          echo "| $q-$ty | failed (no count in valgrind's output) | | | |"
          continue
        fi
        per=$(awk -v i="$ir" -v n="$items" 'BEGIN { printf "%.1f", i / n }')
        # The ratio from the exact counts, not from the rounded per-item figures.
        [ "$q" = rtrb ] && rt="$ir $items"
        ratio=$(awk -v i="$ir" -v n="$items" -v r="$rt" \
          'BEGIN { split(r, b, " "); if (b[1] > 0 && b[2] > 0) printf "%.2f", (i / n) / (b[1] / b[2]) }')
        echo "| $q-$ty | $items | $ir | $per | $ratio |"
      done
    done
  } >"$instr"
  unlock
else
  echo "valgrind is not installed: not measured." >"$instr"
fi

# ---- The queues again, paired: every queue of a case once per round, back to back, so that
# a ratio compares two queues measured under the same host state (queues.rs, "Paired mode") ----
# (An even number of rounds: as many in each order; queues.rs rounds an odd one up.)
paired_cmd="cargo bench -p ringwire-tests --bench queues -- --paired --rounds $paired_rounds"
paired=$scratch/paired.md
paired_json=$svg/queues_paired.json
paired_ok=1
# A failed run must not leave an earlier run's JSON behind for BENCHMARKS.md to link.
rm -f "$paired_json"
lock_x
echo "== queues, paired ($paired_rounds rounds)"
# cargo runs a bench in its package directory: the JSON path is absolute.
if ! $paired_cmd --json "$root/$paired_json" >"$paired"; then
  paired_ok=0
  rm -f "$paired_json"
  echo "The paired run failed: rerun \`$paired_cmd\` and see its stderr." >"$paired"
fi
unlock
# Issue 4's targets, judged on that run's within-round ratios.
targets=$scratch/targets.md
targets_cmd="target/release/bench_report queue-targets OUT.md $paired_json"
if [ "$paired_ok" != 1 ]; then
  printf "### Issue 4's queue targets\n\nNot judged: the paired run failed.\n" >"$targets"
elif ! target/release/bench_report queue-targets "$targets" "$paired_json"; then
  printf "### Issue 4's queue targets\n\nNot judged: \`%s\` failed (see its stderr).\n" \
    "$targets_cmd" >"$targets"
fi

# ---- ringwire bench: the floor and the cross-process hand-off, RUNS runs each (the floor's
# RUNS runs were taken in the criterion runs above) ----
handoff_cmd="target/release/ringwire bench handoff --rate 100000 --seconds $handoff_secs"
# At 1,000 msg/s a sleeping reader is asleep for nearly every record: this is the futex
# wake-up latency (producer publish → FutexWait returns → record read).
wake_cmd="target/release/ringwire bench handoff --rate 1000 --seconds $handoff_secs --wait futex"
lock_x
floor=$($floor_cmd --plot "$svg/floor_curve.svg")
handoff=$($handoff_cmd --plot "$svg/handoff_curve.svg")
wake=$($wake_cmd --plot "$svg/wake_curve.svg")
mkdir -p "$runs_dir/handoff" "$runs_dir/wake"
for k in $(seq 1 "$RUNS"); do
  $handoff_cmd --json >"$runs_dir/handoff/run$k.json" || true
  $wake_cmd --json >"$runs_dir/wake/run$k.json" || true
done
unlock
files() { in_order "$runs_dir/$1" .json | paste -sd, -; }
latency=$scratch/latency.md
target/release/bench_report latency "$latency" \
  "cache-line round trip (floor)::/cacheline_round_trip::$floor_cmd --json::$(files floor)" \
  "moving-line round trip (a ring of one-line slots)::/moving_line_round_trip::$floor_cmd --json::$(files floor)" \
  "hand-off scheduled-time-to-read, 100,000 msg/s::/reader/summary::$handoff_cmd --json::$(files handoff)" \
  "futex wake-up scheduled-time-to-read, 1,000 msg/s::/reader/summary::$wake_cmd --json::$(files wake)"

# ---- async consumers, push-to-read: one run with CPU shares, then RUNS runs ----
async_cmd="cargo bench -p ringwire-tests --bench async_wake -- --seconds $async_secs"
mkdir -p "$runs_dir/async"
lock_x
async_table=$($async_cmd 2>/dev/null | grep '^|') || async_table="(the run failed: rerun \`$async_cmd\` to see why)"
for k in $(seq 1 "$RUNS"); do
  $async_cmd --json 2>/dev/null | grep '^{' >"$runs_dir/async/run$k.json" || true
done
unlock
async_latency=$scratch/async_latency.md
async_specs=()
for r in 1000:1,000 100000:100,000; do
  for imp in ringwire ringwire_yields ringfire; do
    async_specs+=("$imp, ${r#*:} msg/s::/r${r%%:*}/$imp/summary::$async_cmd --json::$(files async)")
  done
done
target/release/bench_report latency "$async_latency" "${async_specs[@]}"

# Every run's output of the latency tables above, kept beside replication.json: the tables
# can be recomputed from it (bench_report latency reads one file per run; a failed run is
# null here: json_array in scripts/bench-lib.sh).
{
  printf '{"about":"scripts/bench.sh: every run of the floor, hand-off, futex wake-up and async tables, in run order; the commands are in BENCHMARKS.md",'
  for part in floor handoff wake async; do
    printf '"%s":' "$part"
    mapfile -t part_runs < <(in_order "$runs_dir/$part" .json)
    json_array "${part_runs[@]}"
    [ "$part" = async ] || printf ','
  done
  printf '}\n'
} >"$svg/latency_runs.json"

# ---- the demo and the stress table: one run each (no peer in them) ----
lock_x
demo_rows=""
for t in tcp multicast unicast; do
  for spin in "" "--spin"; do
    line=$(target/release/ringwire demo --transport "$t" --seconds "$demo_secs" --rate 10000 $spin 2>&1 | grep -E 'published .* delivered' | tail -1)
    demo_rows+="| $t ${spin:-(default)} | ${line#*: } |"$'\n'
  done
done

stress_rates=1000,20000,100000,500000,1000000
stress_rc=0
stress=$(target/release/ringwire bench stress --rates "$stress_rates" --seconds "$stress_secs" \
  --plot "$svg/stress_rates.svg" 2>/dev/null) || stress_rc=$?
stress_json=$(target/release/ringwire bench stress --transport multicast --rates 1000000 --seconds "$stress_secs" --json 2>/dev/null) || true
unlock

# ---- replication against ringfire, RUNS runs ----
repl_args=(--rate 1000 --seconds "$repl_secs" --mc-rate 1000000 --mc-seconds "$mc_secs")
repl_cmd="cargo bench -p ringwire-tests --bench replication -- ${repl_args[*]}"
repl_failed=""
mkdir -p "$runs_dir/replication"
for k in $(seq 1 "$RUNS"); do
  echo "== run $k/$RUNS: replication"
  rc=0
  lock_x
  text=$(cargo bench -p ringwire-tests --bench replication -- "${repl_args[@]}" 2>/dev/null) || rc=$?
  unlock
  printf '%s\n' "$text" | sed -n 's/^JSON: //p' >"$runs_dir/replication/run$k.json"
  [ "$rc" = 0 ] || repl_failed+="run $k: exit status $rc"$'\n'
  repl_failed+=$(printf '%s\n' "$text" | grep '^RUN FAILED' | sed "s/^/run $k: /" || true)
done
mapfile -t repl_runs < <(in_order "$runs_dir/replication" .json)
# Every run writes its file (empty when it failed): one element per run, a failed one null,
# so that the table recomputed from this file counts it among the runs with errors, as the
# table below (from the files themselves) does.
json_array "${repl_runs[@]}" >"$svg/replication.json"
repl=$scratch/repl.md
target/release/bench_report replication "$repl" "${repl_runs[@]}"

# ---- where the default (sleeping) pipeline's time goes: perf sched, one run per crate ----
wake_trace=""
if command -v perf >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "== wake-trace"
  lock_x
  wake_trace=$(scripts/wake-trace.sh multicast 2 2>/dev/null) || wake_trace=""
  unlock
fi

{
  echo "# Benchmarks"
  echo
  echo "Every table below comes from one run of \`scripts/bench.sh\` on the machine described here,"
  echo "with every peer measured in the same run."
  echo
  echo "**What \"median\" and \"min – max\" mean.** Each measurement is repeated in $RUNS separate"
  echo "runs (each run a fresh process; the criterion benches' runs are interleaved, run 1 of every"
  echo "bench, then run 2, …). A run yields one figure: for a criterion bench, the median over that"
  echo "run's criterion samples of the time per iteration (criterion settings \`$crit_str\`;"
  echo "a sample is one timed batch of many iterations); for \`ringwire bench\` and the replication"
  echo "bench, the p50 (or p99) of that run's HDR histogram of per-record latencies. \"median\" is the"
  echo "median of the $RUNS run figures and \"min – max\" the smallest and largest run figure. A ratio"
  echo "is computed within each run (both figures from the same run) and given as the median of the"
  echo "per-run ratios with their min – max; it never divides medians taken from different runs."
  echo "\"runs\" counts the runs that produced a figure; a run with errors (lost, lapped, reordered or"
  echo "duplicated records, in the tables that check for them) is left out of every figure and counted"
  echo "under \"runs with errors\". One exception: a \`push_drain\` sample whose reader was lapped or"
  echo "behind in all of its 50 tries is kept, with its last try's time, in that run's figure; the note"
  echo "under the \`push_drain\` table counts those samples."
  echo
  echo "**Every run's figures are kept** beside this file, so any table can be recomputed:"
  echo "[$svg/criterion_runs.json]($svg/criterion_runs.json) (each criterion benchmark's figure in"
  echo "each run, and each run's floor; \`target/release/bench_report criterion-json OUT.md"
  echo "$svg/criterion_runs.json\` prints the criterion tables again),"
  echo "[$svg/latency_runs.json]($svg/latency_runs.json) (each run's JSON of the floor, hand-off,"
  echo "wake-up and async tables), [$svg/replication.json]($svg/replication.json) and"
  echo "[$svg/push_drain_samples.txt]($svg/push_drain_samples.txt) (every \`push_drain\` sample's"
  if [ "$paired_ok" = 1 ]; then
    echo "tries and outcome, \`run<k> <bench id> <tries> <outcome>\`, which the note under that table counts)"
    echo "and [$paired_json]($paired_json) (every trial of the paired queue runs)."
  else
    echo "tries and outcome, \`run<k> <bench id> <tries> <outcome>\`, which the note under that table counts)."
  fi
  echo "The \`target/release/\` programs named in this file are built by \`cargo build --release -p"
  echo "ringwire -p ringwire-tests --bins\` (scripts/bench.sh's first step), and those under"
  echo "\`target/release/examples/\` by \`cargo build --release -p ringwire-tests --example NAME\`."
  echo "\`bench_report latency\` and \`bench_report replication\` take one file per run, as"
  echo "scripts/bench.sh calls them: each element of the \`floor\`, \`handoff\`, \`wake\` and \`async\`"
  echo "arrays of latency_runs.json, and of replication.json's array, is one run's file."
  echo
  echo "**Open loop and what latency is measured from.** Producers publish on a fixed schedule and"
  echo "never wait for the reader. The hand-off and async benches' producers spin to each record's"
  echo "scheduled time and stamp it with that time, so a producer stall shows in the latency of every"
  echo "record behind it. The replication producers (\`ringwire demo\`, \`bench stress\`, the"
  echo "replication bench) sleep to each scheduled time and stamp at the push (the timer wakes them"
  echo "tens of µs late, which is not the pipeline's latency); their lateness (push time − scheduled"
  echo "time) is reported beside the latency as \"producer late\": that is how much a producer stall"
  echo "could hide."
  echo
  echo "- machine: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD), runs per measurement: $RUNS"
  lockver() { grep -A1 "name = \"$1\"" "$2" | grep '^version' | grep -oE '[0-9][0-9.]*' | head -1; }
  echo "- peers (published crates, same run): ringfire $(lockver ringfire Cargo.lock), rtrb $(lockver rtrb Cargo.lock), crossbeam-queue $(lockver crossbeam-queue Cargo.lock), crossbeam-channel $(lockver crossbeam-channel Cargo.lock), disruptor $(lockver disruptor Cargo.lock), heapless $(lockver heapless Cargo.lock), iceoryx2 $(lockver iceoryx2 bench-peers/Cargo.lock 2>/dev/null || echo '?')"
  if [ -n "$ice_status" ]; then
    echo "- iceoryx2: $ice_status"
  fi
  echo
  echo "## Floor of this machine and the hand-off across processes ($RUNS runs each)"
  echo
  cat "$latency"
  echo
  echo "One run of each, with every percentile:"
  echo
  echo "Reproduce: \`$floor_cmd\`"
  echo
  echo '```'
  echo "$floor"
  echo '```'
  echo
  echo "![floor curve]($svg/floor_curve.svg)"
  echo
  echo "Reproduce: \`$handoff_cmd\`"
  echo
  echo '```'
  echo "$handoff"
  echo '```'
  echo
  echo "![handoff curve]($svg/handoff_curve.svg)"
  echo
  echo "Futex wake-up (a sleeping reader, 1,000 msg/s). Reproduce: \`$wake_cmd\`"
  echo
  echo '```'
  echo "$wake"
  echo '```'
  echo
  echo "![wake curve]($svg/wake_curve.svg)"
  echo
  echo "## Async consumers: publish-to-read ($RUNS runs)"
  echo
  echo "A producer thread (core 0) publishes records at a fixed rate, each stamped with its scheduled"
  echo "time (the producer spins to it; \"producer late\" in the one-run table is push time − scheduled time);"
  echo "a task on a current-thread tokio runtime (core 1) awaits each one with \`recv().await\`."
  echo "At 1,000 msg/s the task is idle between records (the wake-up path); at 100,000 msg/s"
  echo "records come 10 µs apart. \`ringwire\`: \`AsyncRingConsumer\` as built (an empty poll arms"
  echo "its waiter thread, asleep on the ring's futex); \`ringwire_yields\`: the same with ringfire's"
  echo "defaults set through its knobs, \`with_spins(32).with_yields(8)\`; \`ringfire\`: ringfire's"
  echo "\`AsyncRingConsumer\` (32 spins, 8 yields, then tokio sleeps of 50 µs, which tokio's"
  echo "millisecond timer makes about 1 ms). Consumer CPU (one run below) is the process's CPU"
  echo "time less the producer thread's."
  echo
  cat "$async_latency"
  echo
  echo "One run, with the consumer side's CPU. Reproduce: \`$async_cmd\`"
  echo
  echo "$async_table"
  echo
  echo "## Criterion: ringwire against its peers ($RUNS runs)"
  echo
  echo "\`round_trip_2proc/iceoryx2\` is measured by bench-peers/ (outside the workspace), same"
  echo "shape as the other round trips. Reproduce: \`(cd bench-peers && cargo build --release) &&"
  echo "CRITERION_HOME=\$PWD/target/criterion $ice_bin --bench $crit_str\`."
  [ -n "$ice_status" ] && echo "iceoryx2: $ice_status."
  echo "\`mpmc_2p2c/disruptor_sharded\`: the disruptor broadcasts every event to every consumer; its"
  echo "two pollers split the items by sequence parity, so each reads every slot (see queues.rs)."
  echo "\`push_drain\`: the figure is the time per push while the reader, on the other core, receives"
  echo "every timed record and keeps pace with the pushes. A writer whose reader is not reading its"
  echo "lines (the reader descheduled or stalled, far behind, or lapped) pushes several times faster,"
  echo "which is a different measurement: so a criterion sample whose reader got fewer than all the"
  echo "timed records or missed one in the sequence (lapped), or lacked more than 64 of them (at"
  echo "most half the sample's) when the pushes ended (behind), is taken again on a fresh ring, up"
  echo "to 50 times; if no try is clean the last one's time is kept. A record received twice or out"
  echo "of order fails the run."
  echo "The note under the \`push_drain\` table counts, per implementation, the samples that needed a"
  echo "re-take and those kept without a clean try. Criterion 0.5 samples linearly: sample k of 100"
  echo "is k·d pushes, d = ⌈measurement time ÷ (warm-up time per push × 5050)⌉$pd_len_text. A reader"
  echo "descheduled or stalled in a sample longer than the ring for longer than the writer takes to"
  echo "push one lap (65,536 pushes) is lapped, which the first check catches; the second catches a"
  echo "reader still behind when the pushes end, the only one that can fire in a sample shorter than"
  echo "the ring. Neither catches a stall shorter than one lap that the reader makes up before the"
  echo "pushes end: such a sample keeps up to one lap of pushes made with no reader on the writer's"
  echo "lines."
  echo "\`RW_PUSH_DRAIN_DIAG=1\` prints, per try, the reader's share of the timed records when the"
  echo "pushes ended and in all. Clean samples still come in two speeds, a run settling in one of"
  echo "them for seconds at a time, for both crates alike: read the per-run ratios and the min – max."
  echo "\`cargo run --release -p ringwire-tests --example push_drain_cross\` crosses the two crates'"
  echo "writers and readers in one binary."
  echo "\`*_a64\` rows: the same bench with the 64 bytes in a \`#[repr(C, align(64))]\` type, whose slot"
  echo "is 128 bytes (spec §4.1), the sequence word and the payload each on a line no other slot"
  echo "touches; the plain rows use \`[u8; 64]\`, whose 72-byte slots share a line with the next slot."
  echo "\`floor/moving_line_round_trip\`: the floor's ping-pong through two rings of 4,096 one-line"
  echo "slots, a new line each round trip as a ring's records move through memory (the fixed-line"
  echo "floor reuses the same two lines, which no ring does). \"this ÷ floor\" does not divide by either"
  echo "criterion floor row: it divides each run's figure by the p50 cache-line round trip of"
  echo "\`$floor_cmd --json\` taken in the same run, right after its handoff bench (the note"
  echo "under each round-trip table says what that p50 includes)."
  echo "\`spsc_*/64B\`: the consumers check all eight words of every item, so every queue's pop loads"
  echo "the whole item. \`mpmc_2p2c\`: 4 threads on 2 cores; after a failed try every queue waits the"
  echo "same way (\`Backoff\` in queues.rs): one spin hint, and every 64th failure yields the core."
  echo "\`mpmc_2p2c_exp\`: the same bench in the same run with \`QBENCH_BACKOFF=exp\` (1, 2, 4, … 32"
  echo "hints between tries, then a yield per failure). With two threads per core, which thread a"
  echo "waiter yields to, and how soon, decides much of the figure: the two policies rank the"
  echo "queues differently. \`cargo run --release -p ringwire-tests --example mpmc_phases\` times"
  echo "the three phases such a run mixes (two producers at once, two consumers at once, one of each)."
  echo "\`spsc_throughput/u64\` runs fall into one of two states, for ringwire and rtrb alike: the queue"
  echo "stays part full, or the consumer keeps catching up with the producer and each item costs several"
  echo "times more. \`cargo run --release -p ringwire-tests --example spsc_modes\` counts the failed"
  echo "pushes and pops that tell the two apart. ringwire's consumer hands popped slots back to the"
  echo "producer every 64th single pop, or at once when it has caught up (\"When a popped slot is handed"
  echo "back\" in core/src/queue/spsc.rs); rtrb, crossbeam and heapless store their index after every pop."
  echo "\`ingest/*\`: one thread moves 128 datagrams waiting in a loopback socket into an empty SPSC"
  echo "queue of byte strings; time per datagram, the sending not timed. \`ringwire\` is"
  echo "\`SpscBytesProducer::recv_mmsg\` (one recvmmsg of up to 32 straight into the free slots),"
  echo "\`recvmmsg_copy\` a \`RecvBatch\` of 32 then \`push_slice\`, \`recv_from\` one \`recv_from\` and"
  echo "one \`try_push\` per datagram. Most of each figure is the kernel's work per datagram."
  echo
  cat "$tables"
  echo
  echo "## SPSC instructions per item (callgrind, one run)"
  echo
  echo "Reproduce: \`$instr_cmd\` with QUEUE one of ringwire-u64, rtrb-u64, ringwire-64B,"
  echo "rtrb-64B. One thread pushes 32 items and then pops 32 (each checked), 20,000 times, so"
  echo "every push and pop finds room or an item; only \`run_queue\` is counted. A count of"
  echo "instructions does not move with the machine's load, as the times above do, but it is not"
  echo "a time: it says nothing of the cache-line traffic between two cores that the"
  echo "\`spsc_throughput\` rows measure. ringwire's count includes, after every push and every"
  echo "pop, the look at the queue's waiter count that wakes a consumer or producer asleep on the"
  echo "queue's futex (\`pop_blocking\`, \`push_blocking\`); rtrb has no blocking wait and no"
  echo "such look."
  echo
  cat "$instr"
  echo
  echo "## Queues, paired: ringwire against its peers within each round ($paired_rounds rounds, one process)"
  echo
  echo "Reproduce: \`$paired_cmd\`"
  echo
  echo "The criterion tables above measure one queue for seconds, then the next, and take a ratio"
  echo "within each of the $RUNS runs. This machine's speed drifts over seconds (one queue's"
  echo "criterion samples can go from 11 to 5.5 ns per item within its 2 s), so such a ratio mixes the"
  echo "two queues' difference with the host's. Here the same bench functions run without"
  echo "criterion: in each round every queue of a case moves the same number of items once, the"
  echo "queues back to back, in reverse order every other round (an even number of rounds, as many"
  echo "in each order), after one warm-up round. Each queue's figure is its time per item (the"
  echo "throughput, batch and MPMC cases) or per round trip (\`spsc_round_trip\`) over the rounds:"
  echo "median (the mean of the two middle rounds), p10 – p90 (nearest rank from each end), min – max."
  echo "The ratio is a peer's time divided by ringwire's in the same round, so above 1 means ringwire"
  echo "is faster (the criterion tables' ratio is the other way round); \`ringfire_lossy\` has none,"
  echo "its ring being lossy (see the note under its table)."
  if [ "$paired_ok" = 1 ]; then
    echo "Every trial's figure is in [$paired_json]($paired_json)."
  fi
  echo
  cat "$paired"
  echo
  cat "$targets"
  echo
  echo "## Replication on loopback (\`ringwire demo\`, 10,000 msg/s, $demo_secs s, one run)"
  echo
  echo "Reproduce: \`target/release/ringwire demo --transport T --seconds $demo_secs --rate 10000 [--spin]\`"
  echo
  echo "| transport | result |"
  echo "|---|---|"
  printf '%s' "$demo_rows"
  echo
  echo "## Replication stress on loopback, open loop (\`ringwire bench stress\`, $stress_secs s per rate, one run)"
  echo
  echo "Reproduce: \`target/release/ringwire bench stress --rates $stress_rates --seconds $stress_secs\`"
  echo
  echo "Source → serve → mirror → reader in one process; latency is one-way push-to-read on"
  echo "CLOCK_MONOTONIC. Any loss, reorder, duplicate or gap is an ERROR row and exit status 1"
  echo "(this run: exit status $stress_rc)."
  echo
  printf '%s\n' "$stress"
  echo
  echo "![stress p50/p99 against rate]($svg/stress_rates.svg)"
  echo
  echo "1,000,000 msg/s over loopback multicast, JSON (\`target/release/ringwire bench stress --transport multicast --rates 1000000 --seconds $stress_secs --json\`):"
  echo
  echo '```json'
  printf '%s\n' "$stress_json"
  echo '```'
  echo
  echo "## Replication: ringwire serve+mirror against ringfire ReplicaServer+Mirror ($RUNS runs)"
  echo
  echo "Reproduce: \`$repl_cmd\` (each configuration in its own process, same settings on both"
  echo "sides; see the file's header). Push-to-read one way on this host: rows at 1000 msg/s are"
  echo "the mirror latency per transport, the row at 1000000 msg/s is the loopback multicast"
  echo "delivery check. A run with loss, reorders, duplicates or gaps, or whose configuration's child"
  echo "process crashed (listed under \"Failed runs\" below), counts as a run with errors."
  echo "Issue 7's target is a p50 ratio ≤ 0.8 at 1000 msg/s on every transport. \`no-anticipate\`"
  echo "(ringwire only): ringwire's default with \`--no-anticipate\`, everything parked until woken."
  echo "Every run's rows as JSON: [$svg/replication.json]($svg/replication.json)."
  echo
  cat "$repl"
  if [ -n "$wake_trace" ]; then
    echo
    echo "Why the default rows differ (\`scripts/wake-trace.sh multicast 2\`, root, one run per crate"
    echo "under \`perf sched record\`, so its latencies include the tracing): ringfire's default"
    echo "server polls (about a core); ringwire's serve, mirror and reader park, and once the stream"
    echo "is steady each park ends just before the next record is due (anticipation, README \"Idle"
    echo "waiting\"; the \`no-anticipate\` rows park until woken, one sleeping thread per record more"
    echo "than ringfire). With four threads on two vCPUs the server and the mirror often share one;"
    echo "the server yields it right after each send and runs the futex handshake's membarrier"
    echo "only once its park has lasted 2 ms, not before it sleeps, so the mirror is not kept waiting. Each line"
    echo "counts the wake-ups per record that one vCPU had to send to another, idle one (an IPI that"
    echo "brings a halted vCPU back, slow on this nested VM) and how long the woken thread then waited:"
    echo
    printf '%s\n' "$wake_trace" | sed 's/^/- /'
  fi
  if [ -n "$repl_failed" ]; then
    echo
    echo "Failed runs:"
    echo
    printf '%s\n' "$repl_failed" | sed '/^$/d; s/^/- /'
  fi
} >"$out"
echo "wrote $out"
