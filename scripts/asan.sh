#!/usr/bin/env bash
# Memory errors under AddressSanitizer: the lib unit tests and the sort, fork-join, task,
# timer, shutdown and adversarial test files, built by the nightly toolchain with
# `-Zsanitizer=address`. Child processes the tests start (thread and descriptor exhaustion,
# panics) inherit ASAN_OPTIONS, and a child's report fails the test that checks its exit.
#
# Finds use-after-free, double free, out-of-bounds accesses and leaks (LeakSanitizer is on: a
# leak fails the run), as valgrind does (scripts/valgrind.sh; it also finds reads of
# uninitialised memory, which ASan does not), but much faster (clang's docs: "typical
# slowdown introduced by AddressSanitizer is 2x"; valgrind's is about 50x, tests/leaks.rs),
# so it runs the sorts' property tests (tests/sort_soundness.rs: a stale copy of a box is a
# use-after-free, then a double free) and the fork-join tests at their real sizes.
#
# Built at opt-level 1 (clang's AddressSanitizer docs: "to get a reasonable performance add
# -O1 or higher"), debug assertions on, into its own target directory (target/asan) so that
# it does not invalidate the normal build. `--target` keeps the flags off build scripts and
# proc macros. x86_64 Linux needs no rust-src or -Zbuild-std: the sanitizer runtime ships
# with the nightly's rust-std. The precompiled std is not instrumented (hence
# -Cunsafe-allow-abi-mismatch): its generic code (Vec, the sequential sorts) is, being
# compiled into magpie's crates, but a bad access inside its other code goes unseen.
#
# Sizes: the tests' own; at opt-level 1 none needs shrinking (the sort properties, the
# longest, take 45 to 85 s; `MAGPIE_SORT_CASES=4` cuts them to a quarter).
# Usage: bash scripts/asan.sh [extra cargo test args, e.g. --no-run]
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v rustup >/dev/null 2>&1 || ! rustup toolchain list | grep -q '^nightly'; then
    echo "asan: skipped: no nightly toolchain (rustup toolchain install nightly)"
    exit 0
fi
host=$(rustc +nightly -vV | sed -n 's/^host: //p')
case "$host" in
    x86_64-unknown-linux-gnu) ;;
    *)
        echo "asan: skipped: AddressSanitizer is not set up for $host here"
        exit 0
        ;;
esac

flags="--cfg magpie_no_cell_cache -Zsanitizer=address -Cunsafe-allow-abi-mismatch=sanitizer -Cforce-frame-pointers=yes"
export RUSTFLAGS="$flags"
export RUSTDOCFLAGS="$flags"
export CARGO_TARGET_DIR=target/asan
export CARGO_PROFILE_DEV_OPT_LEVEL=1
# Line tables are all that ASan's reports and Rust's backtraces need; full debug info only
# lengthens the build.
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
cargo_test=(cargo +nightly test --target "$host" -p magpie)

# The files CI runs: the sorts, fork-join, tasks and timers, and three adversarial files (user
# code that panics or re-enters in iterators and the task core, and the review's fixes).
# MAGPIE_ASAN_ALL=1 runs every integration file instead (a sweep, 2026-11-26: all clean; about
# 4 minutes of tests, but some 20 minutes to build the 55 binaries on 2 busy cores, too long
# for CI). fork_join_adversarial, runtime_adversarial, time_adversarial and shutdown_stress
# ran in CI from 2026-11-26 (clean every time) and went back to the sweep on 2026-11-29:
# with them `.ci/run` took 29-37 minutes against the 25 it aims for.
tests=(
    sort_soundness scope join tasks time iter_adversarial task_core_adversarial
    review_fixes_adversarial
)
features=()
skips=()
if [ "${MAGPIE_ASAN_ALL:-0}" = 1 ]; then
    tests+=(
        fork_join_adversarial runtime_adversarial time_adversarial shutdown_stress
        io_adversarial insight_adversarial config_stats_adversarial net_adversarial net_faults
        cross_runtime shutdown join_after_shutdown block_in_place compensation stalls
        spawn_failure membarrier_failure task_pool task_insight runtime_lifecycle_edges leaks
        no_thread_leak global_runtime par_iter net_tcp net_udp net_unix net_io_traits
        http_server active_workers bad_input bombs_fork_join bombs_tasks bombs_timers compat
        long_poll many_workers runtime scheduling soundness_runtime stats stress stress_shrink
        stress_tasks task_combinations trace stress_reliability wide_pools_and_batches
        stack_overflow
    )
    # Additive (trait impls only): brings in net_io_traits and http_server.
    features=(--features tokio-io,futures-io)
    # ASan's own SIGSEGV handler reports the deliberate overflow ("AddressSanitizer:
    # stack-overflow") in place of Rust's guard-page message, which the test looks for.
    skips=(--skip stack_overflow_on_a_worker_aborts_the_process)
fi

started=$(date +%s)
echo "==> asan: the lib unit tests and ${#tests[@]} integration test files"
"${cargo_test[@]}" "${features[@]}" --lib "${tests[@]/#/--test=}" "$@" -- "${skips[@]}"

case " $* " in
    *" --no-run "*) echo "asan: built ($(($(date +%s) - started)) s)" ;;
    *) echo "asan: no memory errors, no leaks ($(($(date +%s) - started)) s)" ;;
esac
