#!/usr/bin/env bash
# The test command from the README: every test of the workspace, unit, integration and doc.
# The stress tests run in release mode too, where their item counts are larger.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace "$@"
cargo test --release -p magpie --lib --test stress --test stress_tasks --test stress_reliability "$@"
# The hyper example and its test need the `tokio-io` feature. `cargo test --workspace` turns it
# on only because magpie-bench asks for it; name them here so they never drop out silently.
cargo test -p magpie --features tokio-io --test http_server --example http_server "$@"
