#!/usr/bin/env bash
# What task identity and stall detection cost the async rows (BENCHMARKS.md, "Task identity
# and stall detection on against off"; issue 15's target: every async row within 1.02x).
#
# Builds magpie-bench twice and runs the builds in alternation, ROUNDS times, each run
# timing every async row on magpie alone (SAMPLES samples, median per row):
#   shipped     as users get it: task ids, spawn locations, the polling word, the stall
#               monitor (100 ms threshold) and its per-unit activity store
#   control     a copy of the shipped binary: the noise floor of this comparison
#   no_insight  --cfg magpie_no_insight: every task id 1, no activity store, no monitor (the
#               measurement build; nothing else differs). The polling word stays: it is
#               also the worker's "inside a task" flag, which a runtime without identity
#               needs as well; there it holds the constant id 1 instead of the task's.
# and prints, per row, the median over rounds of each build's median, and the ratios
# shipped / no_insight (the cost) and shipped / control (the noise), each both as the ratio
# of those medians and as the median of the ratios within a round ("paired").
# Usage: bash scripts/insight_overhead.sh [PROFILE] [ROUNDS] [SAMPLES] [WORKERS]
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-release}
rounds=${2:-8}
samples=${3:-21}
workers=${4:-2}
declare -A flags=([shipped]="" [no_insight]="--cfg magpie_no_insight")
for v in shipped no_insight; do
    CARGO_TARGET_DIR="target/insight-$v" RUSTFLAGS="${flags[$v]}" \
        cargo build --quiet --profile "$profile" -p magpie-bench
done
bin() { echo "target/insight-$1/$profile/magpie-bench"; }
cp "$(bin shipped)" target/insight-control-bin
results=$(mktemp -d)
for round in $(seq "$rounds"); do
    for v in shipped control no_insight; do
        exe=$(bin "$v")
        [ "$v" = control ] && exe=target/insight-control-bin
        "$exe" async --impls magpie --workers "$workers" --samples "$samples" --warmup 2 \
            --only spawn_many_local,spawn_many_remote,yield_many,ping_pong,chained_spawn \
            --json "$results/$v-$round.json" >/dev/null 2>&1
    done
done
echo "profile=$profile workers=$workers rounds=$rounds samples=$samples"
python3 - "$results" <<'PY'
import glob, json, os, statistics, sys
medians = {}
def key(path):
    build, round_ = os.path.basename(path)[:-len(".json")].rsplit("-", 1)
    return build, int(round_)
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json")), key=key):
    build = key(path)[0]
    for row in json.load(open(path))["results"]:
        for r in row["results"]:
            medians.setdefault(row["workload"], {}).setdefault(build, []).append(r["median_ms"])
print(f"{'row':<18} {'shipped':>9} {'control':>9} {'no_insight':>10} {'cost':>7} {'paired':>7}"
      f" {'noise':>7} {'paired':>7}")
for row, builds in medians.items():
    m = {b: statistics.median(t) for b, t in builds.items()}
    # Paired: the median over rounds of the ratio within a round, which cancels the
    # machine's slow drifts.
    paired = lambda b: statistics.median(s / o for s, o in zip(builds["shipped"], builds[b]))
    print(f"{row:<18} {m['shipped']:>9.3f} {m['control']:>9.3f} {m['no_insight']:>10.3f}"
          f" {m['shipped'] / m['no_insight']:>7.3f} {paired('no_insight'):>7.3f}"
          f" {m['shipped'] / m['control']:>7.3f} {paired('control'):>7.3f}")
PY
rm -rf "$results"
