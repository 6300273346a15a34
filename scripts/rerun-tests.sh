#!/usr/bin/env bash
# Reruns every magpie test binary (the lib's unit tests and the integration tests) that the
# README's test command has built (magpie-test-binaries.sh: no rebuild), each under the
# command given, from magpie's directory as `cargo test` runs them. Arguments after `--` go
# to each test binary. PROFILE=--release picks the binaries of `cargo test --workspace
# --release`. It stops at the first failing binary, unless KEEP_GOING=1: then it runs them
# all, prints a `rerun-tests.sh: FAILED` line for each that failed, and fails at the end.
#
#   scripts/rerun-tests.sh env MAGPIE_BARRIER=symmetric      # symmetric.sh
#   scripts/rerun-tests.sh taskset -c 0 -- --test-threads 1   # one_cpu.sh, one test at a time
#   KEEP_GOING=1 scripts/rerun-tests.sh timeout 600 -- --quiet  # flake-hunt.sh
set -euo pipefail
cd "$(dirname "$0")/.."
wrapper=()
while [[ $# -gt 0 && $1 != -- ]]; do
    wrapper+=("$1")
    shift
done
[[ $# -gt 0 ]] && shift
if (( ${#wrapper[@]} == 0 )); then
    echo "rerun-tests.sh: no command to run the binaries under" >&2
    exit 1
fi
# shellcheck disable=SC2086 # PROFILE is empty or one flag.
mapfile -t binaries < <(bash scripts/magpie-test-binaries.sh ${PROFILE:-} --lib --tests)
if (( ${#binaries[@]} < 2 )); then
    echo "rerun-tests.sh: found ${#binaries[@]} magpie test binaries, expected the lib's and the integration tests'" >&2
    exit 1
fi
cd magpie
failed=0
for binary in "${binaries[@]}"; do
    echo "--- $(basename "$binary")"
    if [[ ${KEEP_GOING:-0} == 1 ]]; then
        "${wrapper[@]}" "$binary" "$@" || {
            status=$?
            echo "rerun-tests.sh: FAILED $(basename "$binary") (exit status $status)"
            failed=$((failed + 1))
        }
    else
        "${wrapper[@]}" "$binary" "$@"
    fi
done
if (( failed > 0 )); then
    echo "rerun-tests.sh: $failed of ${#binaries[@]} binaries failed"
    exit 1
fi
