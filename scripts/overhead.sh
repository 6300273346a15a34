#!/usr/bin/env bash
# What statistics and tracing cost (BENCHMARKS.md, "Overhead of statistics and tracing").
#
# Builds magpie/examples/overhead.rs three ways, runs the builds in alternation ROUNDS times,
# and prints each build's median time per row and its ratio to the shipped build:
#   shipped   as users get it: counters on, trace checks compiled in (tracing off)
#   no_stats  --cfg magpie_no_stats: the counters compiled out
#   no_trace  --cfg magpie_no_trace: the trace checks compiled out
# Usage: bash scripts/overhead.sh [WORKERS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${1:-2}
rounds=${2:-7}
variants=(shipped no_stats no_trace)
declare -A flags=([shipped]="" [no_stats]="--cfg magpie_no_stats" [no_trace]="--cfg magpie_no_trace")
for v in "${variants[@]}"; do
    CARGO_TARGET_DIR="target/overhead-$v" RUSTFLAGS="${flags[$v]}" \
        cargo build --quiet --release -p magpie --example overhead
done
results=$(mktemp)
for round in $(seq "$rounds"); do
    for v in "${variants[@]}"; do
        "target/overhead-$v/release/examples/overhead" --workers "$workers" --samples 9 \
            | sed "s/^/$v /" >>"$results"
    done
    echo "round $round of $rounds done" >&2
done
echo "workers=$workers rounds=$rounds (median of the per-round medians, ns; ratio to shipped)"
awk '
    { t[$1" "$2] = t[$1" "$2] " " $3; rows[$2] = 1 }
    function median(list,   n, a, i, j, x) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
        return (n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
    }
    END {
        printf "%-28s %12s %12s %12s %9s %9s\n", "row", "shipped", "no_stats", "no_trace", "stats", "trace-off"
        for (r in rows) {
            s = median(t["shipped " r]); n = median(t["no_stats " r]); x = median(t["no_trace " r])
            printf "%-28s %12d %12d %12d %9.3f %9.3f\n", r, s, n, x, s / n, s / x
        }
    }' "$results" | sort
rm -f "$results"
