#!/usr/bin/env bash
# The test command from the README: every test of the workspace, unit, integration and doc.
# The stress tests run in release mode too, where their item counts are larger. The I/O trait
# features (`tokio-io`, `futures-io`) are off by default; their tests and the code behind them
# build and run in a pass of their own, with the hyper example (`examples/http_server.rs`,
# which needs `tokio-io`) and its test. (`cargo test --workspace` also turns `tokio-io` on,
# only because magpie-bench asks for it; the pass below does not rely on that.)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace "$@"
cargo test --release -p magpie --lib --test stress --test stress_tasks --test stress_reliability "$@"
cargo test -p magpie --features tokio-io,futures-io --test net_io_traits --test io_adversarial --test http_server --example http_server "$@"
