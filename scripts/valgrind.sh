#!/usr/bin/env bash
# Memory errors and leaks: test binaries under valgrind's memcheck, with reduced sizes.
#
# Fails on any memory error and on definitely or indirectly lost blocks. "Possibly lost"
# blocks are not counted: std's thread handles and thread-locals of threads still winding
# down leave some, and none of them is ours (the leak test's own counter covers tasks).
# Usage: bash scripts/valgrind.sh [TEST ...]
#   (default: leaks stress_tasks active_workers task_pool scheduling)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v valgrind >/dev/null 2>&1; then
    echo "valgrind not found; installing it" >&2
    if command -v apt-get >/dev/null 2>&1; then
        (apt-get install -y valgrind || sudo apt-get install -y valgrind) >/dev/null
    else
        echo "no apt-get: install valgrind first" >&2
        exit 1
    fi
fi
tests=("$@")
[ ${#tests[@]} -eq 0 ] && tests=(leaks stress_tasks active_workers task_pool scheduling)
for test in "${tests[@]}"; do
    # The binary that the README's test command built (no rebuild for this pass).
    exe=$(bash scripts/magpie-test-binaries.sh --test "$test" | tail -1)
    if [ -z "$exe" ]; then
        echo "valgrind: no magpie test binary named $test" >&2
        exit 1
    fi
    echo "==> valgrind: $test ($exe)"
    MAGPIE_LEAK_SMALL=1 MAGPIE_VALGRIND=1 valgrind --quiet --error-exitcode=1 \
        --leak-check=full --errors-for-leak-kinds=definite,indirect \
        --show-leak-kinds=definite,indirect --fair-sched=yes \
        "$exe" --test-threads=1
done
echo "valgrind: no memory errors, no definite or indirect leaks"
