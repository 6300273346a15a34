#!/usr/bin/env bash
# The magpie tests (unit and integration) again with the process pinned to one CPU
# (`taskset -c 0`), as in a one-CPU container: every worker then takes turns on that CPU, a
# woken thread waits for the running one to be preempted, and a test that assumes two threads
# run at once fails there (two did until 2026-12-04: par_iter's stop-early bound and a
# fork-join test whose roles depended on who searched first). The runtime itself must stay
# correct and live there: `available_parallelism` is 1, so a default runtime has one worker,
# and the tests' explicit pools of 2 to 130 workers are oversubscribed.
#
# Reruns the test binaries that the README's test command (`cargo test --workspace`, in
# scripts/test.sh) has built (rerun-tests.sh): about 2 minutes on 2 cores. Arguments go to
# each test binary.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v taskset >/dev/null 2>&1; then
    echo "one_cpu.sh: taskset not found (util-linux)" >&2
    exit 1
fi
bash scripts/rerun-tests.sh taskset -c 0 -- "$@"
