#!/usr/bin/env bash
# The loom models, under `--cfg loom`:
#   1. the data structures and protocols (the deque, the task ring, the LIFO slot, the task
#      inject queue, the task state machine, the sleep protocol, the timer driver, the trace ring), at
#      LOOM_MAX_PREEMPTIONS (3 unless set);
#   2. the whole runtime on two workers (runtime/loom_runtime.rs), at one preemption, or at
#      the bound given by `--runtime-bound N` (the longer tier uses 2);
#   3. the negative controls, which must fail.
#
#   scripts/loom.sh                     # CI: bound 3, the two named-bound sleep models at 2,
#                                       # runtime bound 1
#   scripts/loom.sh --runtime-bound 2 --named-bound 3   # the longer tier (see the README)
set -euo pipefail
cd "$(dirname "$0")/.."

runtime_bound=1
named_bound=
while [[ $# -gt 0 ]]; do
    case "$1" in
        --runtime-bound) runtime_bound="${2:?--runtime-bound needs a number}"; shift 2 ;;
        --named-bound) named_bound="${2:?--named-bound needs a number}"; shift 2 ;;
        *) break ;;
    esac
done

# Loom's LOOM_MAX_PREEMPTIONS replaces a model's own bound outright: it bounds the models
# written without one (exhaustive only when it is unset, which takes some of them many
# minutes), and would raise the two sleep models that name bound 2, the largest ones (three
# threads that all park): `loom_two_jobs_two_sleepers` takes 7 s at 2 and 5 minutes at 3.
# Those two run on their own, at the bound they name unless `--named-bound N` raises it.
named=(loom_two_jobs_two_sleepers loom_task_published_while_a_join_waiter_and_a_free_worker_park)
skips=()
for model in "${named[@]}"; do skips+=(--skip "$model"); done
RUSTFLAGS="--cfg loom ${RUSTFLAGS:-}" CARGO_TARGET_DIR=target/loom \
    LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" \
    cargo test --release -p magpie --lib loom -- --test-threads=2 --skip loom_runtime_ \
    "${skips[@]}" "$@"
(
    if [[ -n "$named_bound" ]]; then
        export LOOM_MAX_PREEMPTIONS="$named_bound"
    else
        unset LOOM_MAX_PREEMPTIONS
    fi
    RUSTFLAGS="--cfg loom ${RUSTFLAGS:-}" CARGO_TARGET_DIR=target/loom \
        cargo test --release -p magpie --lib -- --test-threads=2 "${named[@]}" "$@"
)

# Each runtime model is one long single-threaded search: run two at a time.
RUSTFLAGS="--cfg loom ${RUSTFLAGS:-}" CARGO_TARGET_DIR=target/loom \
    LOOM_MAX_PREEMPTIONS="$runtime_bound" \
    cargo test --release -p magpie --lib loom_runtime_ -- --test-threads=2 "$@"

# Negative controls: with `--cfg magpie_loom_broken` the code under test is deliberately
# broken (a Relaxed where Acquire is needed in the deque's steal, and a thief that skips
# the heavy barrier whoever wrote `top`; a Relaxed where Release is
# needed in the task inject queue's publishing CAS; the trace ring's reader
# keeping torn events; the timer driver storing its next deadline outside the lock, and
# closing in two lock holds (draining, then marking closed); a task
# completer that leaves the live list before settling who drops the output; a worker that
# parks without rechecking the task queues; the I/O readiness word delivering an event to a
# reused slot's new owner (no generation check), and clearing readiness newer than the poll
# that saw it (no tick check); a parker that wakes a worker parked in the I/O driver through
# its condvar instead of the driver's waker; a finished task that reads whether anyone waits
# in `wait_idle` without pairing with the waiter; `wait_idle`'s scan of the live counts
# making one pass, blind to a task spawned into a shard it has read) and these models are
# marked should_panic: they pass only if loom finds the bug, which shows the models can fail.
RUSTFLAGS="--cfg loom --cfg magpie_loom_broken ${RUSTFLAGS:-}" CARGO_TARGET_DIR=target/loom-broken \
    LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" \
    cargo test --release -p magpie --lib -- --test-threads=1 \
    loom_pop_then_push_reuses_slot_while_stolen_from loom_inject_two_producers_and_a_consumer \
    loom_trace:: \
    loom_timer_register_races_fire loom_timer_close_races_register \
    loom_wait_idle_after_handle_drop_sees_the_output_dropped \
    loom_handle_reads_or_drops_while_the_task_leaves_the_list \
    loom_io_stale_generation_races_slot_reuse loom_io_stale_clear_races_new_readiness \
    loom_notification_reaches_a_worker_parked_in_the_driver \
    loom_idle_wait_two_shards loom_idle_wait_scan_sees_a_child_spawned_across_shards \
    --skip loom_timer_register_races_fire_and_cancel
RUSTFLAGS="--cfg loom --cfg magpie_loom_broken ${RUSTFLAGS:-}" CARGO_TARGET_DIR=target/loom-broken \
    LOOM_MAX_PREEMPTIONS="$runtime_bound" \
    cargo test --release -p magpie --lib -- --exact \
    runtime::loom_runtime::loom_runtime_last_searcher_vs_notification
