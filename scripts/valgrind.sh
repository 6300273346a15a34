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
# The binaries that the README's test command built (no rebuild for this pass), asked for
# in one build query and matched by name (`deps/NAME-HASH`).
mapfile -t built < <(bash scripts/magpie-test-binaries.sh "${tests[@]/#/--test=}")
exes=()
for test in "${tests[@]}"; do
    exe=
    for path in "${built[@]}"; do
        [[ "$path" == */"$test"-* ]] && exe=$path
    done
    if [ -z "$exe" ]; then
        echo "valgrind: no magpie test binary named $test" >&2
        exit 1
    fi
    exes+=("$exe")
done

# Valgrind runs one thread of a process at a time, so each binary keeps one CPU busy: run
# as many binaries at once as there are CPUs, each into its own log, printed in order.
jobs_max=$(nproc 2>/dev/null || echo 2)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
for i in "${!tests[@]}"; do
    while (( $(jobs -rp | wc -l) >= jobs_max )); do
        wait -n || true
    done
    MAGPIE_LEAK_SMALL=1 MAGPIE_VALGRIND=1 valgrind --quiet --error-exitcode=1 \
        --leak-check=full --errors-for-leak-kinds=definite,indirect \
        --show-leak-kinds=definite,indirect --fair-sched=yes \
        "${exes[$i]}" --test-threads=1 >"$logs/$i" 2>&1 &
    pids+=($!)
done
failed=()
for i in "${!tests[@]}"; do
    status=0
    wait "${pids[$i]}" || status=$?
    echo "==> valgrind: ${tests[$i]} (${exes[$i]}): exit $status"
    cat "$logs/$i"
    (( status == 0 )) || failed+=("${tests[$i]}")
done
if (( ${#failed[@]} > 0 )); then
    echo "valgrind: failed: ${failed[*]}" >&2
    exit 1
fi
echo "valgrind: no memory errors, no definite or indirect leaks"
