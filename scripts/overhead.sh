#!/usr/bin/env bash
# What statistics and tracing cost (BENCHMARKS.md, "Overhead of statistics and tracing").
#
# Builds magpie/examples/overhead.rs three ways and runs the builds in alternation, ROUNDS
# times per row, each run printing the median of 15 samples:
#   shipped   as users get it: counters on, trace checks compiled in (tracing off)
#   control   a copy of the shipped binary: the noise floor of this comparison
#   no_stats  --cfg magpie_no_stats: the counters compiled out
#   no_trace  --cfg magpie_no_trace: the trace checks compiled out
# and prints, per row, the median over rounds and the ratio shipped / each other build (the
# cost of what that build leaves out). Usage: bash scripts/overhead.sh [WORKERS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${1:-2}
rounds=${2:-30}
declare -A flags=([shipped]="" [no_stats]="--cfg magpie_no_stats" [no_trace]="--cfg magpie_no_trace")
for v in shipped no_stats no_trace; do
    CARGO_TARGET_DIR="target/overhead-$v" RUSTFLAGS="${flags[$v]}" \
        cargo build --quiet --release -p magpie --example overhead
done
bin() { echo "target/overhead-$1/release/examples/overhead"; }
cp "$(bin shipped)" target/overhead-control-bin
results=$(mktemp)
for row in yield_many spawn_many_local; do
    for _ in $(seq "$rounds"); do
        for v in shipped control no_stats no_trace; do
            exe=$(bin "$v")
            [ "$v" = control ] && exe=target/overhead-control-bin
            "$exe" --workers "$workers" --samples 15 --only "$row" | sed "s/^/$v /" >>"$results"
        done
    done
done
echo "workers=$workers rounds=$rounds: median of per-run medians (ns); cost = shipped / build - 1"
python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    build, row, ns = line.split()
    runs.setdefault(row, {}).setdefault(build, []).append(int(ns))
print(f"{'row':<18} {'shipped':>10} {'control':>10} {'no_stats':>10} {'no_trace':>10}"
      f" {'noise':>7} {'stats':>7} {'trace-off':>9}")
for row, builds in runs.items():
    m = {b: statistics.median(t) for b, t in builds.items()}
    cost = lambda b: f"{(m['shipped'] / m[b] - 1) * 100:+.1f}%"
    print(f"{row:<18} {m['shipped']:>10.0f} {m['control']:>10.0f} {m['no_stats']:>10.0f}"
          f" {m['no_trace']:>10.0f} {cost('control'):>7} {cost('no_stats'):>7} {cost('no_trace'):>9}")
PY
rm -f "$results"
