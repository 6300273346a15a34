#!/usr/bin/env bash
# The whole runtime under shuttle's randomized schedulers (magpie/tests/shuttle.rs): 12
# scenarios, each 10,000 random and 10,000 PCT schedules, built with `--cfg shuttle` in its
# own target directory. About 1.5 minutes on 2 cores, plus the build.
# Extra arguments go to the test binary (a scenario name to run one; --nocapture).
set -euo pipefail
cd "$(dirname "$0")/.."
# Shuttle warns once per run that it treats every atomic as SeqCst; we know (see the
# test file's docs: weak-memory behaviour is the loom models' job).
export SHUTTLE_SILENCE_WARNINGS="${SHUTTLE_SILENCE_WARNINGS:-1}"
RUSTFLAGS="--cfg shuttle ${RUSTFLAGS:-}" CARGO_TARGET_DIR=target/shuttle \
    cargo test --release -p magpie --test shuttle -- "$@"
