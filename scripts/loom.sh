#!/usr/bin/env bash
# The loom models: the deque, the task ring, the task state machine, the sleep protocol and
# the trace ring, model-checked under `--cfg loom`, then the negative controls.
# LOOM_MAX_PREEMPTIONS bounds the search (3 in CI; raise it for a longer run).
set -euo pipefail
cd "$(dirname "$0")/.."
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
RUSTFLAGS="--cfg loom ${RUSTFLAGS:-}" CARGO_TARGET_DIR=target/loom \
    cargo test --release -p magpie --lib loom -- --test-threads=1 "$@"

# Negative controls: with `--cfg magpie_loom_broken` the code under test is deliberately
# broken (a Relaxed where Acquire is needed in the deque's steal; the trace ring's reader
# keeping torn events; the timer driver storing its next deadline outside the lock; a task
# completer that leaves the live list before settling who drops the output) and these models are marked should_panic: they pass only if loom
# finds the bug, which shows the models can fail.
RUSTFLAGS="--cfg loom --cfg magpie_loom_broken ${RUSTFLAGS:-}" CARGO_TARGET_DIR=target/loom-broken \
    cargo test --release -p magpie --lib -- --test-threads=1 \
    loom_pop_then_push_reuses_slot_while_stolen_from loom_trace:: \
    loom_timer_register_races_fire loom_wait_idle_after_handle_drop_sees_the_output_dropped \
    loom_handle_reads_or_drops_while_the_task_leaves_the_list \
    --skip loom_timer_register_races_fire_and_cancel
