#!/usr/bin/env bash
# Memory errors under AddressSanitizer: the sort, scope, join, task and timer tests, built by
# the nightly toolchain with `-Zsanitizer=address`.
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
# longest, take about 45 s; `MAGPIE_SORT_CASES=4` cuts them to a quarter). On 2 busy cores:
# about 1 minute of tests, plus 2.5 minutes to build from an empty target/asan.
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

flags="-Zsanitizer=address -Cunsafe-allow-abi-mismatch=sanitizer -Cforce-frame-pointers=yes"
export RUSTFLAGS="$flags"
export RUSTDOCFLAGS="$flags"
export CARGO_TARGET_DIR=target/asan
export CARGO_PROFILE_DEV_OPT_LEVEL=1
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
cargo_test=(cargo +nightly test --target "$host" -p magpie)

started=$(date +%s)
echo "==> asan: integration tests (sort_soundness scope join tasks time, and the adversarial"
echo "    iterator and task-core tests: drop accounting under panics, the task state machine)"
"${cargo_test[@]}" --test sort_soundness --test scope --test join --test tasks --test time \
    --test iter_adversarial --test task_core_adversarial "$@"

echo "==> asan: lib unit tests of iter::sort, task, time"
# Filters match substrings: `time::` would also take in `runtime::`.
"${cargo_test[@]}" --lib "$@" -- iter::sort task:: time:: --skip runtime::

case " $* " in
    *" --no-run "*) echo "asan: built ($(($(date +%s) - started)) s)" ;;
    *) echo "asan: no memory errors, no leaks ($(($(date +%s) - started)) s)" ;;
esac
