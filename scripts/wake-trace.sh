#!/usr/bin/env bash
# Where the time of the default (sleeping) replication pipeline goes on this machine, next to
# ringfire's polling one: runs one configuration of the replication bench per crate under
# `perf sched record` and reports, for the threads of that process, every wake-up: how many
# were sent from one vCPU to another that was idle (an IPI that has to bring a halted vCPU
# back), and how long the woken thread waited from wake-up to running.
#
#   scripts/wake-trace.sh [tcp|multicast|unicast] [SECONDS]     (defaults: multicast 2)
#
# Needs perf with the sched tracepoints (root). Prints one line per crate; the numbers are
# from this run only.
set -euo pipefail
transport=${1:-multicast}
secs=${2:-2}
case "$transport" in tcp | multicast | unicast) ;; *)
  echo "wake-trace: transport must be tcp, multicast or unicast, not '$transport'" >&2; exit 2 ;;
esac
case "$secs" in '' | *[!0-9]* | 0)
  echo "wake-trace: SECONDS must be a whole number above 0, not '$secs'" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
command -v perf >/dev/null || { echo "wake-trace: perf is not installed" >&2; exit 1; }
if [ ! -d /sys/kernel/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
cargo bench -p ringwire-tests --bench replication --no-run >/dev/null 2>&1
bin=$(ls -t target/release/deps/replication-* | grep -v '\.d$' | head -1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Count, p50 and p90 (us) of the waits of kind $1 in file $2.
stats() {
  awk -v k="$1" '$1 == k { print $2 }' "$2" | sort -n | awk '
    { a[NR] = $1 } END { if (NR) printf "%d %.0f %.0f", NR, a[int((NR - 1) * .5) + 1], a[int((NR - 1) * .9) + 1]; else printf "0 0 0" }'
}
for imp in ringwire ringfire; do
  perf sched record -q -o "$tmp/$imp.data" -- "$bin" --one "$imp" "$transport" default 1000 "$secs" \
    >"$tmp/$imp.out" 2>/dev/null
  p50=$(grep -o '"p50_ns":[0-9]*' "$tmp/$imp.out" | cut -d: -f2)
  records=$(grep -o '"count":[0-9]*' "$tmp/$imp.out" | cut -d: -f2)
  cpu=$(awk '/^CPU /{print $2}' "$tmp/$imp.out")
  perf sched timehist -i "$tmp/$imp.data" -w --state 2>/dev/null | awk '
    # switch lines: time [cpu] task[tid/pid] wait sch_delay run state
    # wake-up lines: time [cpu] waker awakened: wakee
    NR <= 3 { next }
    $4 == "awakened:" { from[$5] = $2; next }
    {
      c = $2; task = $3
      if (pid == "" && task ~ /^replication-/) {
        pid = task; sub(/.*[\[\/]/, "", pid); sub(/\]$/, "", pid)
      }
      mine = pid != "" && (index(task, "/" pid "]") || index(task, "[" pid "]"))
      if (mine && (task in from)) {
        # A wake-up sent from another vCPU to one that was idle needs an IPI to a halted vCPU.
        kind = (from[task] != c && prev[c] == "<idle>") ? "idle" : "busy"
        print kind, $5 * 1000
      }
      delete from[task]
      prev[c] = task
    }' >"$tmp/$imp.waits"
  read -r ni ip50 ip90 <<<"$(stats idle "$tmp/$imp.waits")"
  read -r nb bp50 bp90 <<<"$(stats busy "$tmp/$imp.waits")"
  awk -v imp="$imp" -v t="$transport" -v p50="$p50" -v rec="$records" -v cpu="$cpu" \
    -v ni="$ni" -v ip50="$ip50" -v ip90="$ip90" -v nb="$nb" -v bp50="$bp50" -v bp90="$bp90" 'BEGIN {
    printf "%s %s default, 1000 msg/s: push-to-read p50 %.1f us, %s cores; wake-ups sent to an idle vCPU: %d (%.2f per record), woken thread waited p50 %d us p90 %d us; other wake-ups: %d, waited p50 %d us p90 %d us\n",
      imp, t, p50 / 1000, cpu, ni, rec ? ni / rec : 0, ip50, ip90, nb, bp50, bp90 }'
done
