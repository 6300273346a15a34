#!/usr/bin/env bash
# The whole runtime under shuttle's randomized schedulers (magpie/tests/shuttle.rs): 19
# scenarios, most with 10,000 random and 10,000 PCT schedules, built with `--cfg shuttle` in its
# own target directory (3 of them through the model of the I/O driver, `io/fake_driver.rs`).
# About 2.5 minutes on 2 cores, plus the build; then the two negative controls (seconds).
# Extra arguments go to the test binary (a scenario name to run one; --nocapture).
set -euo pipefail
cd "$(dirname "$0")/.."
# Shuttle warns once per run that it treats every atomic as SeqCst; we know (see the
# test file's docs: weak-memory behaviour is the loom models' job).
export SHUTTLE_SILENCE_WARNINGS="${SHUTTLE_SILENCE_WARNINGS:-1}"
RUSTFLAGS="--cfg shuttle ${RUSTFLAGS:-}" CARGO_TARGET_DIR=target/shuttle \
    cargo test --release -p magpie --test shuttle -- "$@"

# The negative controls: `--cfg magpie_shuttle_broken` drops the wakeup of a remote push, and
# the scenario that wakes a fully parked pool from outside must deadlock; it also makes
# `Registry::hand_off_driver` do nothing, and the scenario whose readiness needs the hand-off
# must hit shuttle's step bound (a read stranded while a worker spins in a long poll). Both
# are should_panic under that cfg, which shows the scenarios can catch a lost wakeup and a
# driver role nobody takes over.
RUSTFLAGS="--cfg shuttle --cfg magpie_shuttle_broken ${RUSTFLAGS:-}" \
    CARGO_TARGET_DIR=target/shuttle-broken \
    cargo test --release -p magpie --test shuttle -- \
    shuttle_outside_wake_into_parked_pool shuttle_driver_hand_off_to_parked_worker
