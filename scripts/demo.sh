#!/usr/bin/env bash
# Builds benchlab and runs the demo study on this machine (about two
# minutes): every network workload, two placements, tables at the end.
# Results go to ./benchlab.db; `./target/release/benchlab show` prints them again.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  echo "benchlab needs Rust's cargo (rustup.rs, or Debian's rustup package); rust-toolchain.toml pins the version." >&2
  exit 1
fi
cargo build --release --locked
exec ./target/release/benchlab run studies/demo.toml "$@"
