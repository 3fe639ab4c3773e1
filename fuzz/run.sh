#!/bin/sh
# Runs one fuzz target after copying its committed seeds into the (git-ignored) corpus.
# Usage: fuzz/run.sh <target> [seconds] [libFuzzer args...]
#   e.g. fuzz/run.sh frame_decode 20     fuzz/run.sh region 170 -timeout=5
set -e
cd "$(dirname "$0")"
t="${1:?target}"
secs="${2:-20}"
shift
[ $# -gt 0 ] && shift
mkdir -p "corpus/$t"
cp seeds/"$t"/* "corpus/$t/" 2>/dev/null || true
exec cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" "$@"
