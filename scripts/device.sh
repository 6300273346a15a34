#!/usr/bin/env bash
# The many-core scaling table on a lent machine (issue 19), in two steps.
#
# Here, where the toolchain is:
#     scripts/device.sh build
# builds magpie-bench, the magpie CLI and the barrier_cost example under `release` and
# `release-lto`, strips them (the `run` tool carries at most 64 MiB) and puts them in
# device-bin/ (git-ignored).
#
# There, through the `run` tool with `carry: ["device-bin"]`, in calls of at most 10 minutes:
#     scripts/device.sh run PROFILE [GROUPS] [WORKERS] [SAMPLES]
# PROFILE is release or release-lto; GROUPS is scale's --only list (default
# fork-join,iter,async,task-pool), WORKERS its --workers list (default 1,2,4,8,16), SAMPLES
# its --samples (default 9). It writes scale-PROFILE-GROUPS.{txt,json} under $OUT, and for
# the first call of a machine (GROUPS "inputs") the cost model's inputs, `nproc`, `lscpu` and
# `magpie compare` at 2 and 16 workers instead. Figures go to BENCHMARKS.md with the
# machine named; timings are ratios to the peers of the same run.
set -euo pipefail

cmd=${1:-}
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/device-bin"

case "$cmd" in
build)
    cd "$root"
    for profile in release release-lto; do
        cargo build --profile "$profile" -p magpie-bench -p magpie-cli
        cargo build --profile "$profile" -p magpie --example barrier_cost
        mkdir -p "$bin/$profile"
        for exe in magpie-bench magpie examples/barrier_cost; do
            strip -o "$bin/$profile/$(basename "$exe")" "target/$profile/$exe"
        done
    done
    du -sh "$bin"
    echo "now: run(command=\"scripts/device.sh run release inputs\", carry=[\"device-bin\"])"
    ;;
run)
    profile=${2:?"profile: release or release-lto"}
    groups=${3:-fork-join,iter,async,task-pool}
    workers=${4:-1,2,4,8,16}
    samples=${5:-9}
    dir="$bin/$profile"
    out=${OUT:-$root/bench-results}
    mkdir -p "$out"
    if [ "$groups" = inputs ]; then
        {
            nproc
            lscpu
            cat /sys/fs/cgroup/cpu.max 2>/dev/null || true
        } > "$out/machine.txt" 2>&1
        "$dir/barrier_cost" > "$out/barrier_cost-$profile.txt" 2>&1
        for w in 2 16; do
            "$dir/magpie" compare --workers "$w" --repeat 3 \
                > "$out/compare-$w-$profile.txt" 2>&1
        done
        tail -n 40 "$out"/*.txt
        exit 0
    fi
    name="scale-$profile-${groups//,/+}"
    "$dir/magpie-bench" scale --workers "$workers" --only "$groups" --samples "$samples" \
        --json "$out/$name.json" 2>&1 | tee "$out/$name.txt"
    ;;
*)
    echo "usage: scripts/device.sh build | run PROFILE [GROUPS|inputs] [WORKERS] [SAMPLES]" >&2
    exit 2
    ;;
esac
