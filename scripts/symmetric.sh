#!/usr/bin/env bash
# The magpie tests (unit and integration) again in the symmetric barrier mode
# (MAGPIE_BARRIER=symmetric). The default mode (Auto) is asymmetric on a 2-CPU machine; both
# must stay correct.
#
# Runs the test binaries that the README's test command (`cargo test --workspace`, in
# scripts/test.sh) has built (magpie-test-binaries.sh): `cargo test -p magpie` rebuilt magpie
# and every test binary for this pass, about 5 minutes of CI on 2 cores. Arguments go to
# each test binary.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t binaries < <(bash scripts/magpie-test-binaries.sh --lib --tests)
if (( ${#binaries[@]} < 2 )); then
    echo "symmetric.sh: found ${#binaries[@]} magpie test binaries, expected the lib's and the integration tests'" >&2
    exit 1
fi
# As `cargo test` runs them: from the package's directory.
cd magpie
for binary in "${binaries[@]}"; do
    echo "--- $(basename "$binary")"
    MAGPIE_BARRIER=symmetric "$binary" "$@"
done
