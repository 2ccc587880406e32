#!/usr/bin/env bash
# Builds benchlab and runs the demo study on this machine (about two
# minutes): every network workload, two placements, tables at the end,
# then writes the report of the run (demo-report.html, self-contained, and
# demo-report.md). Results go to ./benchlab.db; `./target/release/benchlab
# show` prints them again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh demo
. scripts/toolchain.sh
if ! command -v cargo >/dev/null 2>&1; then
  echo "benchlab needs Rust's cargo (rustup.rs, or Debian's rustup package); rust-toolchain.toml pins the version." >&2
  exit 1
fi
cargo build --release --locked
status=0
./target/release/benchlab run studies/demo.toml "$@" || status=$?
# The report of the newest run, also when some points failed (exit 3).
if [ "$status" = 0 ] || [ "$status" = 3 ]; then
  ./target/release/benchlab report --html demo-report.html --md demo-report.md
  echo "report: $(pwd)/demo-report.html (and demo-report.md)"
fi
exit "$status"
