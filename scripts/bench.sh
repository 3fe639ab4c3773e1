#!/usr/bin/env bash
# Regenerates BENCHMARKS.md (and docs/bench/*.svg) from one run on this machine:
# criterion benches of ringwire against its peers in the same run, the machine's floor, and
# the demo's replication path per transport, the open-loop replication stress per rate, and
# ringwire serve+mirror against ringfire's ReplicaServer+Mirror. Run it on a quiet machine:
#   scripts/bench.sh            # QUICK=1 for shorter criterion runs
set -euo pipefail
cd "$(dirname "$0")/.."
out=BENCHMARKS.md
svg=docs/bench
crit_args=()
[ "${QUICK:-0}" = 1 ] && crit_args=(-- --warm-up-time 1 --measurement-time 3)

rm -rf target/criterion
cargo build --release -p ringwire -p ringwire-tests --bins
benches=(handoff)
[ -f tests/benches/queues.rs ] && benches+=(queues)
for b in "${benches[@]}"; do
  cargo bench -p ringwire-tests --bench "$b" "${crit_args[@]}"
done

mkdir -p "$svg"
tables=$(mktemp)
fam_cmds=()
for b in "${benches[@]}"; do
  for f in $(grep -ohE '"[a-z0-9_]+/' "tests/benches/$b.rs" | tr -d '"/' | sort -u); do
    fam_cmds+=("$f=cargo bench -p ringwire-tests --bench $b")
  done
done
target/release/bench_report target/criterion "$tables" "$svg" "${fam_cmds[@]}"

floor=$(target/release/ringwire bench floor --plot "$svg/floor_curve.svg")
handoff=$(target/release/ringwire bench handoff --rate 100000 --seconds 5 --plot "$svg/handoff_curve.svg")

demo_rows=""
for t in tcp multicast unicast; do
  for spin in "" "--spin"; do
    line=$(target/release/ringwire demo --transport "$t" --seconds 5 --rate 10000 $spin 2>&1 | grep -E 'published .* delivered' | tail -1)
    demo_rows+="| $t ${spin:-(default)} | ${line#*: } |"$'\n'
  done
done

stress_rates=1000,20000,100000,500000,1000000
stress_rc=0
stress=$(target/release/ringwire bench stress --rates "$stress_rates" --seconds 3 \
  --plot "$svg/stress_rates.svg" 2>/dev/null) || stress_rc=$?
stress_json=$(target/release/ringwire bench stress --transport multicast --rates 1000000 --seconds 3 --json 2>/dev/null) || true

repl_rc=0
repl=$(cargo bench -p ringwire-tests --bench replication 2>/dev/null) || repl_rc=$?
printf '%s\n' "$repl" | sed -n 's/^JSON: //p' > "$svg/replication.json"

{
  echo "# Benchmarks"
  echo
  echo "Every table below comes from one run of \`scripts/bench.sh\` on the machine described here."
  echo "Criterion figures are the median over criterion's samples (each sample is one timed run of"
  echo "many iterations; at least 10 samples, 100 by default) with the min–max over those samples."
  echo
  echo "- machine: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)"
  echo "- peers: ringfire $(grep -A1 'name = "ringfire"' Cargo.lock | grep -oE '[0-9.]+' | head -1) (the published crate, same run)"
  echo
  echo "## Floor of this machine"
  echo
  echo "Reproduce: \`target/release/ringwire bench floor\`"
  echo
  echo '```'
  echo "$floor"
  echo '```'
  echo
  echo "![floor curve]($svg/floor_curve.svg)"
  echo
  echo "## Hand-off across processes, open loop"
  echo
  echo "Reproduce: \`target/release/ringwire bench handoff --rate 100000 --seconds 5\`"
  echo
  echo '```'
  echo "$handoff"
  echo '```'
  echo
  echo "![handoff curve]($svg/handoff_curve.svg)"
  echo
  echo "## Criterion: ringwire against its peers"
  echo
  cat "$tables"
  echo
  echo "## Replication on loopback (\`ringwire demo\`, 10,000 msg/s, 5 s)"
  echo
  echo "Reproduce: \`target/release/ringwire demo --transport T --seconds 5 --rate 10000 [--spin]\`"
  echo
  echo "| transport | result |"
  echo "|---|---|"
  printf '%s' "$demo_rows"
  echo
  echo "## Replication stress on loopback, open loop (\`ringwire bench stress\`, 3 s per rate)"
  echo
  echo "Reproduce: \`target/release/ringwire bench stress --rates $stress_rates --seconds 3\`"
  echo
  echo "Source → serve → mirror → reader in one process; latency is one-way push-to-read on"
  echo "CLOCK_MONOTONIC. Any loss, reorder, duplicate or gap is an ERROR row and exit status 1"
  echo "(this run: exit status $stress_rc)."
  echo
  printf '%s\n' "$stress"
  echo
  echo "![stress p50/p99 against rate]($svg/stress_rates.svg)"
  echo
  echo "1,000,000 msg/s over loopback multicast, JSON (\`target/release/ringwire bench stress --transport multicast --rates 1000000 --seconds 3 --json\`):"
  echo
  echo '```json'
  printf '%s\n' "$stress_json"
  echo '```'
  echo
  echo "## Replication: ringwire serve+mirror against ringfire ReplicaServer+Mirror"
  echo
  echo "Reproduce: \`cargo bench -p ringwire-tests --bench replication\` (each configuration in its"
  echo "own process, same settings on both sides; see the file's header). All rows as JSON:"
  echo "[$svg/replication.json]($svg/replication.json). Exit status of this run: $repl_rc."
  echo
  printf '%s\n' "$repl" | grep -v '^JSON: '
} > "$out"
rm -f "$tables"
echo "wrote $out"
