#!/usr/bin/env bash
# Hunts flaky tests: reruns every magpie test binary that the README's test command built,
# ROUNDS times (default 3) under four conditions in turn: as built, pinned to one CPU
# (`taskset -c 0`), in the symmetric barrier mode, and beside three busy loops that take the
# CPUs away from the tests at random moments. Unlike CI it goes on past a failure (a binary
# that runs 20 minutes counts as hung), and at the end lists every binary that failed, with
# the condition and the failing tests' output.
# Build first: `cargo test --workspace --no-run` (add `--release` there and set
# PROFILE=--release here for the optimized binaries).
#
#   scripts/flake-hunt.sh 2    # about 8 minutes a round on 2 CPUs (debug binaries)
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
log=$(mktemp -d)/flake-hunt.log
# shellcheck disable=SC2086 # PROFILE is empty or one flag.
mapfile -t binaries < <(bash scripts/magpie-test-binaries.sh ${PROFILE:-} --lib --tests)
if (( ${#binaries[@]} < 2 )); then
    echo "flake-hunt.sh: found ${#binaries[@]} magpie test binaries; build them first" >&2
    exit 1
fi
hogs=()
stop_hogs() {
    (( ${#hogs[@]} )) && kill "${hogs[@]}" 2>/dev/null
    hogs=()
}
trap stop_hogs EXIT
failures=0
cd magpie
for round in $(seq "$rounds"); do
    for condition in plain one-cpu symmetric loaded; do
        case $condition in
        plain | loaded) wrapper=() ;;
        one-cpu) wrapper=(taskset -c 0) ;;
        symmetric) wrapper=(env MAGPIE_BARRIER=symmetric) ;;
        esac
        if [[ $condition == loaded ]]; then
            for _ in 1 2 3; do
                (while :; do :; done) &
                hogs+=($!)
            done
        fi
        for binary in "${binaries[@]}"; do
            # A hang is a failure too: no binary takes a tenth of this.
            out=$(timeout 1200 "${wrapper[@]}" "$binary" --quiet 2>&1)
            status=$?
            if (( status != 0 )); then
                failures=$((failures + 1))
                {
                    echo "=== round $round, $condition: $(basename "$binary"), exit status $status"
                    grep -E -A12 '^---- ' <<<"$out" || tail -n 20 <<<"$out"
                } >> "$log"
            fi
        done
        stop_hogs
        echo "round $round, $condition: done, $failures failures so far"
    done
done
if (( failures > 0 )); then
    cat "$log"
    echo "flake-hunt.sh: $failures failing runs (log: $log)"
    exit 1
fi
echo "flake-hunt.sh: no failure in $rounds rounds of ${#binaries[@]} binaries under 4 conditions"
