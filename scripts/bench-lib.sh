# Helpers of scripts/bench.sh, in a file of their own so that tests can run them
# (tests/src/bin/bench_report.rs sources this file).

# <run file>...: their JSON texts as one array, one element per run file, in the order given;
# a run file that is empty or missing (a failed run) is `null`, so element k is still run k
# and a failed run stays counted among the runs when a table is recomputed from the array.
json_array() {
  local sep="" f
  printf '['
  for f in "$@"; do
    printf '%s' "$sep"
    if [ -s "$f" ]; then cat "$f"; else printf 'null'; fi
    sep=","
  done
  printf ']'
}
