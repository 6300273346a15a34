#!/usr/bin/env bash
# The test command from the README: every test of the workspace, unit, integration and doc.
# The stress tests run in release mode too, where their item counts are larger.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace "$@"
cargo test --release -p magpie --lib --test stress --test stress_tasks --test stress_reliability "$@"
