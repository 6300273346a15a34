#!/usr/bin/env bash
# The magpie tests (unit and integration) again in the symmetric barrier mode
# (MAGPIE_BARRIER=symmetric). The default mode (Auto) is asymmetric on a 2-CPU machine; both
# must stay correct.
#
# Reruns the test binaries that the README's test command (`cargo test --workspace`, in
# scripts/test.sh) has built (rerun-tests.sh); `cargo test -p magpie` would rebuild magpie
# and every test binary for this pass, about 5 minutes of CI on 2 cores. Arguments go to
# each test binary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/rerun-tests.sh env MAGPIE_BARRIER=symmetric -- "$@"
