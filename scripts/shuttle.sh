#!/usr/bin/env bash
# The whole runtime under shuttle's randomized schedulers (magpie/tests/shuttle.rs): 13
# scenarios, most with 10,000 random and 10,000 PCT schedules, built with `--cfg shuttle` in its
# own target directory. About 1.5 minutes on 2 cores, plus the build.
# Extra arguments go to the test binary (a scenario name to run one; --nocapture).
set -euo pipefail
cd "$(dirname "$0")/.."
# Shuttle warns once per run that it treats every atomic as SeqCst; we know (see the
# test file's docs: weak-memory behaviour is the loom models' job).
export SHUTTLE_SILENCE_WARNINGS="${SHUTTLE_SILENCE_WARNINGS:-1}"
RUSTFLAGS="--cfg shuttle ${RUSTFLAGS:-}" CARGO_TARGET_DIR=target/shuttle \
    cargo test --release -p magpie --test shuttle -- "$@"

# The negative control: `--cfg magpie_shuttle_broken` drops the wakeup of a remote push, and
# the scenario that wakes a fully parked pool from outside must deadlock (it is should_panic
# under that cfg), which shows the scenarios can catch a lost wakeup.
RUSTFLAGS="--cfg shuttle --cfg magpie_shuttle_broken ${RUSTFLAGS:-}" \
    CARGO_TARGET_DIR=target/shuttle-broken \
    cargo test --release -p magpie --test shuttle -- shuttle_outside_wake_into_parked_pool
