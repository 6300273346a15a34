#!/usr/bin/env bash
# Reruns every magpie test binary (the lib's unit tests and the integration tests) that the
# README's test command has built (magpie-test-binaries.sh: no rebuild), each under the
# command given, from magpie's directory as `cargo test` runs them. Arguments after `--` go
# to each test binary.
#
#   scripts/rerun-tests.sh env MAGPIE_BARRIER=symmetric      # symmetric.sh
#   scripts/rerun-tests.sh taskset -c 0 -- --test-threads 1   # one_cpu.sh, one test at a time
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
mapfile -t binaries < <(bash scripts/magpie-test-binaries.sh --lib --tests)
if (( ${#binaries[@]} < 2 )); then
    echo "rerun-tests.sh: found ${#binaries[@]} magpie test binaries, expected the lib's and the integration tests'" >&2
    exit 1
fi
cd magpie
for binary in "${binaries[@]}"; do
    echo "--- $(basename "$binary")"
    "${wrapper[@]}" "$binary" "$@"
done
