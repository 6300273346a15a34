#!/usr/bin/env bash
# The minimum Rust the workspace promises (`rust-version` in Cargo.toml), checked with that
# toolchain: every crate and target compiles, and the library's doc examples run.
#
#   scripts/msrv.sh
#
# The committed Cargo.lock follows the newest dependencies, some of which need a newer Rust
# (tokio 1.54 needs 1.85); a user on the minimum gets older ones from Cargo's
# MSRV-aware resolver. So the check runs in a copy of the working tree whose lockfile that
# resolver wrote (`CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback`, Cargo 1.84 and
# later), and leaves this tree's lockfile alone.
#
# Installs the toolchain with rustup if it is missing; without rustup, or when the install
# fails (no network), it says so and skips. What it caught on 2026-12-04: doc examples and
# tests that called `Waker::noop` (Rust 1.85) and `Option::is_none_or` (1.82), which clippy's
# `incompatible_msrv` lint does not look at in test code.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

msrv=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' Cargo.toml | head -n 1)
if [[ -z $msrv ]]; then
    echo "msrv.sh: no rust-version in Cargo.toml" >&2
    exit 1
fi
if ! command -v rustup >/dev/null 2>&1; then
    echo "msrv.sh: SKIPPED: no rustup to install Rust $msrv"
    exit 0
fi
if ! rustup run "$msrv" rustc --version >/dev/null 2>&1; then
    if ! rustup toolchain install "$msrv" --profile minimal; then
        echo "msrv.sh: SKIPPED: could not install Rust $msrv"
        exit 0
    fi
fi

copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
# The files git knows, as they are in the working tree (edits not yet committed included).
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$copy"
cd "$copy"
CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo generate-lockfile --quiet
# Beside the other builds, so that a second run is incremental.
export CARGO_TARGET_DIR="$root/target/msrv"
cargo "+$msrv" check --workspace --all-targets --all-features
cargo "+$msrv" test -p magpie --all-features --doc --quiet
echo "msrv.sh: Rust $msrv builds every target and runs the doc examples"
