#!/usr/bin/env bash
# benchlab's test command: installs what is missing (scripts/setup.sh),
# then formatting, lints, and every test of the workspace. README.md and
# .ci/run both call exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/toolchain.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
