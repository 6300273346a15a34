#!/usr/bin/env bash
# Hunts flaky tests: reruns every magpie test binary that the README's test command built
# (rerun-tests.sh), ROUNDS times (default 3) under four conditions in turn: as built, pinned
# to one CPU (`taskset -c 0`), in the symmetric barrier mode, and beside three busy loops
# that take the CPUs away from the tests at random moments. Unlike CI it goes on past a
# failure (a binary that runs 20 minutes counts as hung), and at the end lists every binary
# that failed, with the condition and the failing tests' output.
# Build first: `cargo test --workspace --no-run` (add `--release` there and set
# PROFILE=--release here for the optimized binaries).
#
#   scripts/flake-hunt.sh 2    # about 8 minutes a round on 2 CPUs (debug binaries)
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
log=$(mktemp -d)/flake-hunt.log
: > "$log"
hogs=()
stop_hogs() {
    (( ${#hogs[@]} )) && kill "${hogs[@]}" 2>/dev/null
    hogs=()
}
trap stop_hogs EXIT
failures() { grep -c '^rerun-tests.sh: FAILED' "$log"; }
for round in $(seq "$rounds"); do
    for condition in plain one-cpu symmetric loaded; do
        # A hang is a failure too: no binary takes a tenth of the timeout.
        case $condition in
        plain | loaded) wrapper=(timeout 1200) ;;
        one-cpu) wrapper=(timeout 1200 taskset -c 0) ;;
        symmetric) wrapper=(timeout 1200 env MAGPIE_BARRIER=symmetric) ;;
        esac
        if [[ $condition == loaded ]]; then
            for _ in 1 2 3; do
                (while :; do :; done) &
                hogs+=($!)
            done
        fi
        before=$(failures)
        echo "=== round $round, $condition" >> "$log"
        KEEP_GOING=1 bash scripts/rerun-tests.sh "${wrapper[@]}" -- --quiet >> "$log" 2>&1
        status=$?
        stop_hogs
        if (( status != 0 )) && (( $(failures) == before )); then
            # Failed before running anything (no binaries built, say).
            tail -n 5 "$log"
            exit 1
        fi
        echo "round $round, $condition: done, $(failures) failures so far"
    done
done
if (( $(failures) > 0 )); then
    awk '/^=== round/ { at = $0 } /^rerun-tests.sh: FAILED/ { print at ": " $0 }' "$log"
    grep -E -A12 '^---- ' "$log"
    echo "flake-hunt.sh: $(failures) failing runs (log: $log)"
    exit 1
fi
echo "flake-hunt.sh: no failure in $rounds rounds under 4 conditions (log: $log)"
