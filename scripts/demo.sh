#!/usr/bin/env bash
# Builds benchlab and runs the demo study on this machine: every network
# workload, two placements, tables at the end, then writes the report of
# the run (demo-report.html, self-contained, and demo-report.md). Results
# go to ./benchlab.db; `./target/release/benchlab show` prints them again.
#
# At the end it prints how long each part took (set-up, build, run,
# report) and the machine's load average before and after: the README's
# timing is this script's output, never a figure kept by hand. Arguments
# go to `benchlab run` (e.g. `--quick`).
set -euo pipefail
cd "$(dirname "$0")/.."

# Wall seconds of each part, in order, for the summary.
parts=()
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s.%N)
mark=$t0
part() {
  local now
  now=$(date +%s.%N)
  parts+=("$1 $(awk -v a="$mark" -v b="$now" 'BEGIN { printf "%.1f", b - a }')")
  mark=$now
}
summary() {
  local total
  total=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  echo "demo timings (wall seconds; load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs):"
  for p in "${parts[@]}"; do
    printf '  %-8s %8s s\n' ${p}
  done
  printf '  %-8s %8s s\n' total "$total"
}

bash scripts/setup.sh demo
. scripts/toolchain.sh
if ! command -v cargo >/dev/null 2>&1; then
  echo "benchlab needs Rust's cargo (rustup.rs, or Debian's rustup package); rust-toolchain.toml pins the version." >&2
  exit 1
fi
part set-up
cargo build --release --locked
part build
status=0
./target/release/benchlab run studies/demo.toml "$@" || status=$?
part run
# The report of the newest run, also when some points failed (exit 3).
if [ "$status" = 0 ] || [ "$status" = 3 ]; then
  ./target/release/benchlab report --html demo-report.html --md demo-report.md
  part report
  echo "report: $(pwd)/demo-report.html (and demo-report.md)"
fi
summary
exit "$status"
