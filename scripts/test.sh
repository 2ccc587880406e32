#!/usr/bin/env bash
# benchlab's test command: installs what is missing (scripts/setup.sh),
# then formatting, lints, and every test of the workspace. README.md and
# .ci/run both call exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
. scripts/toolchain.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings

# A test that cannot run here appends `SKIP <test>: <why>` to this file
# (benchlab-testkit); the list is printed once the tests are done, so that
# a skipped test is never taken for a pass.
target_dir="${CARGO_TARGET_DIR:-target}"
case "$target_dir" in /*) ;; *) target_dir="$(pwd)/$target_dir" ;; esac
skips="$target_dir/benchlab-skips.txt"
mkdir -p "$(dirname "$skips")"
: >"$skips"
export BENCHLAB_SKIP_FILE="$skips"
status=0
cargo test --workspace --locked --lib --bins --tests || status=$?
n=$(wc -l <"$skips")
if [ "$n" -gt 0 ]; then
  echo "$n skipped (not run here, not counted as passed):"
  sed 's/^SKIP /  /' "$skips"
else
  echo "0 skipped"
fi
# The documentation tests come last, so that the final lines are still
# cargo test's own result lines; none of them can be skipped.
cargo test --workspace --locked --doc || status=$?
exit "$status"
