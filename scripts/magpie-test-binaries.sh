#!/usr/bin/env bash
# Prints the paths of magpie's test binaries that the README's test command
# (`cargo test --workspace`) builds, one per line, selected by the cargo target arguments
# given (`--lib --tests`, `--test NAME`). Asks the workspace build rather than `-p magpie`:
# selecting one package unifies the dependencies' features differently (magpie-cli turns on
# magpie's `serde`, magpie-bench its `tokio-io` and `futures/thread-pool`), and cargo would
# rebuild magpie and its tests for the caller. Used by rerun-tests.sh (for symmetric.sh,
# one_cpu.sh and flake-hunt.sh) and valgrind.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace "$@" --no-run --message-format=json 2>/dev/null \
    | grep '"package_id":"path+file://[^"]*/magpie#' \
    | grep -o '"executable":"[^"]*"' \
    | cut -d'"' -f4
