#!/usr/bin/env bash
# The loom models: the deque and the sleep protocol, model-checked under `--cfg loom`.
# LOOM_MAX_PREEMPTIONS bounds the search (3 in CI; raise it for a longer run).
set -euo pipefail
cd "$(dirname "$0")/.."
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
RUSTFLAGS="--cfg loom ${RUSTFLAGS:-}" CARGO_TARGET_DIR=target/loom \
    cargo test --release -p magpie --lib loom -- --test-threads=1 "$@"
