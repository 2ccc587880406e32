#!/usr/bin/env bash
# benchlab's test command: installs what is missing (scripts/setup.sh),
# then formatting, lints, and every test of the workspace. README.md and
# .ci/run both call exactly this.
#
# Every step runs even when one before it failed (`cargo test
# --no-fail-fast`: every test binary runs), so that one run shows every
# failure. At the end: the time of each group (fmt, the build with its
# lints, each
# crate's test binary, each module of the integration tests in tests/it,
# the doc tests), the tests that failed, and the skipped ones; the exit
# status is not 0 if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test || exit 1
. scripts/toolchain.sh

target_dir="${CARGO_TARGET_DIR:-target}"
case "$target_dir" in /*) ;; *) target_dir="$(pwd)/$target_dir" ;; esac
logs="$target_dir/test-logs"
mkdir -p "$logs"
rm -f "$logs"/*.log
# A test that cannot run here appends `SKIP <test>: <why>` to this file
# (benchlab-testkit); the list is printed once the tests are done, so that
# a skipped test is never taken for a pass.
skips="$target_dir/benchlab-skips.txt"
: >"$skips"
export BENCHLAB_SKIP_FILE="$skips"

# libtest threads for tests/it (RUST_TEST_THREADS overrides). More than
# the CPUs: a test waiting for a lock (benchlab_testkit::lock) holds a
# thread, and libtest starts tests in name order, so a module's tests that
# queue for one resource (the guests, the mounts, timing) would otherwise
# take every thread and leave nothing running beside them.
IT_THREADS=12
# BENCHLAB_TEST_SLOTS=N (opt-in, not yet the default): a thread per test
# instead, at most N of them running at once, the alone tests first (see
# benchlab_testkit::lock). Measured once (16:50, CI=true, under chrt -i 0):
# tests/it 1187 s with N=8 against 1103 s with 12 threads in the run before
# it, the kill matrix alone 579 s against 345 s; not a win yet.
IT_SLOTS=${BENCHLAB_TEST_SLOTS:-}
if [ -n "$IT_SLOTS" ]; then
  IT_THREADS=1000
fi

status=0
failed_steps=()
# "group seconds" lines, in the order the groups ran.
times="$logs/times.txt"
: >"$times"

# The machine's busy CPU time so far, in clock ticks (/proc/stat's first
# line: user, nice, system, irq, softirq, steal; idle and iowait left out).
busy_ticks() {
  awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}
hz=$(getconf CLK_TCK)

# Runs a step's command with every output line stamped with the time it
# came (bash's clock: no process per line) in $logs/NAME.log, shown as it
# comes; records the step's time, the machine's busy CPU-seconds during
# it (whatever ran, the step's processes or not: on a machine shared
# with other work it says so) and whether it failed.
step() {
  local name=$1
  shift
  local t0=$EPOCHREALTIME c0
  c0=$(busy_ticks)
  "$@" 2>&1 | while IFS= read -r line; do
    printf '%s\n' "$line"
    printf '%s %s\n' "$EPOCHREALTIME" "$line" >>"$logs/$name.log"
  done
  local rc=${PIPESTATUS[0]}
  awk -v a="$t0" -v b="$EPOCHREALTIME" -v n="$name" -v c0="$c0" -v c1="$(busy_ticks)" -v hz="$hz" \
    'BEGIN { printf "%s %.1f %.1f\n", n, b - a, (c1 - c0) / hz }' >>"$times"
  if [ "$rc" -ne 0 ]; then
    status=1
    failed_steps+=("$name (exit $rc)")
  fi
}

# The lints run inside the build: clippy's driver compiles the workspace's
# own crates (as `cargo clippy` does it, as the workspace's wrapper), so
# the dependencies are compiled once for both instead of once checked and
# once built. Every later step keeps the same wrapper, or cargo would
# build the workspace again.
# The wrapper is given on cargo's command line, not in the environment,
# which the tests inherit: tests that run cargo themselves (bench/cost,
# bisect's builds) must build as a user would.
driver="$(command -v clippy-driver)" || {
  echo "clippy-driver not found: rustup component add clippy" >&2
  exit 1
}
lint=(--config "build.rustc-workspace-wrapper=\"$driver\"")
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
# A build from nothing (CI's fresh clone) gains nothing from incremental
# compilation's caches and writes about 7 GB of them.
if [ "${CI:-}" = true ]; then
  export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
fi

step fmt cargo fmt --all --check
step clippy+build cargo "${lint[@]}" test --workspace --locked --all-targets --no-run
step crates bash scripts/crate-tests.sh "$logs" "${lint[@]}"
# The integration tests (tests/it, one binary): its modules run at once;
# most of its tests wait on servers, guests, locks and sleeps, not on a
# CPU.
# Each test's waits for and holds of the suite's locks, for the summary.
locks="$logs/locks.log"
: >"$locks"
IT_THREADS=${RUST_TEST_THREADS:-$IT_THREADS}
# The tests that run alone (tests/it/alone.txt) go last, one after the
# other: among the others each one stopped every new test from starting
# while it waited for the longest running one (a guest's kernel bisection,
# minutes) to end.
alone_list="$(pwd)/tests/it/alone.txt"
mapfile -t alone_tests < <(sed '/^#/d; /^ *$/d' "$alone_list")
skip_alone=()
for t in "${alone_tests[@]}"; do skip_alone+=(--skip "$t"); done
step it env BENCHLAB_TEST_SLOTS="$IT_SLOTS" BENCHLAB_LOCK_LOG="$locks" \
  BENCHLAB_ALONE_LIST="$alone_list" \
  cargo "${lint[@]}" test -p benchlab --locked --bins --tests --no-fail-fast -- \
  --test-threads "$IT_THREADS" --exact "${skip_alone[@]}"
step it-alone env BENCHLAB_LOCK_LOG="$locks" BENCHLAB_ALONE_LIST="$alone_list" \
  cargo "${lint[@]}" test -p benchlab --locked --test it --no-fail-fast -- \
  --test-threads 1 --exact "${alone_tests[@]}"
# The documentation tests come last; none of them can be skipped.
step doc cargo "${lint[@]}" test --workspace --locked --doc --no-fail-fast

# Each test binary's time: from its `Running` line to the next one (or the
# end of the step). In the integration tests (tests/it) the modules run at
# once: a module's figure is when its last test ended, from the binary's
# start, with its number of tests.
binaries() {
  awk -v step="$1" '
    function flush(t) {
      if (bin != "") printf "%s %.1f\n", bin, t - start
    }
    $2 == "Running" || $2 == "Doc-tests" {
      flush($1)
      start = $1
      if ($2 == "Doc-tests") bin = "doc:" $3
      else {
        bin = $NF
        sub(/^\(/, "", bin); sub(/\)$/, "", bin); sub(/.*\//, "", bin)
        sub(/-[0-9a-f]+$/, "", bin)
        if ($3 == "unittests") bin = "unit:" bin
        else bin = "test:" bin
      }
      it = (bin == "test:it")
      next
    }
    it && $2 == "test" && ($NF == "ok" || $NF == "FAILED" || $NF == "ignored") {
      mod = $3; sub(/::.*/, "", mod)
      done[mod] = $1 - start; count[mod]++
    }
    { last = $1 }
    END {
      flush(last)
      for (m in done) printf "it::%s %.1f %d\n", m, done[m], count[m] | "sort -k2 -n -r"
    }' "$logs/$1.log"
}

# The integration tests' slowest tests, from when each started to when it
# ended (waiting for a lock included). libtest prints only ends; it starts
# tests in name order, the first THREADS at once and the next whenever one
# ends, which gives each test's start.
slowest() {
  local log="$logs/it.log" threads=$1
  [ -f "$log" ] || return 0
  awk '$2 == "Running" { it = ($NF ~ /\/it-[0-9a-f]+\)$/); if (it) print "START", $1; next }
       it && $2 == "test" && ($NF == "ok" || $NF == "FAILED") { print $1, $3 }' "$log" >"$log.ends"
  awk '$1 != "START" { print $2 }' "$log.ends" | LC_ALL=C sort >"$log.order"
  awk -v n="$threads" '
    FNR == NR { order[++k] = $1; next }
    $1 == "START" { t0 = $2; next }
    { end[$2] = $1; seq[++m] = $2 }
    END {
      for (i = 1; i <= k && i <= n; i++) start[order[i]] = t0
      j = n + 1
      for (e = 1; e <= m && j <= k; e++) start[order[j++]] = end[seq[e]]
      for (i = 1; i <= k; i++) printf "%.1f %s\n", end[order[i]] - start[order[i]], order[i]
    }' "$log.order" "$log.ends" | sort -k1 -n -r | head -"${2:-12}"
}

# From the lock log (benchlab_testkit::lock): how long each lock was held
# in all ("H SECONDS TESTS LOCK"), and each test's wait for its first slot
# or its alone turn, then how long it held one ("T WAITED RAN TEST"). A
# test that runs no benchlab and takes no lock does not appear.
locks_summary() {
  [ -s "$locks" ] || return 0
  awk '
    { t = $1; test = $2; ev = $3; what = $4; for (i = 5; i <= NF; i++) what = what " " $i
      if (!(test in first)) first[test] = t
      if (what == "slot" || what == "alone") {
        if (ev == "got" && !(test in run)) run[test] = t
        if (ev == "free") end[test] = t
      }
      if (what != "slot") {
        k = test SUBSEP what
        if (ev == "got") got[k] = t
        if (ev == "free" && (k in got)) { held[what] += t - got[k]; n[what]++; delete got[k] }
      }
    }
    END {
      for (w in held) printf "H %.1f %d %s\n", held[w], n[w], w
      for (x in run) printf "T %.1f %.1f %s\n", run[x] - first[x], (x in end) ? end[x] - run[x] : 0, x
    }' "$locks"
}

echo
ncpu=$(nproc)
echo "== time per group (seconds; machine load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "   with the machine's busy CPU-seconds meanwhile, and how busy its $ncpu CPUs were"
while read -r name secs cpu; do
  awk -v n="$name" -v s="$secs" -v c="$cpu" -v k="$ncpu" \
    'BEGIN { printf "%-10s %8s  %8.1f CPU-s %4.0f %%\n", n, s, c, (s > 0 ? 100 * c / (s * k) : 0) }'
  case "$name" in
    crates)
      # Two at a time (scripts/crate-tests.sh): each binary's own time.
      sort -k2 -n -r "$logs/crates.times" 2>/dev/null | while read -r bin t; do
        printf '    %-44s %8s\n' "$bin" "$t"
      done
      ;;
    it | it-alone | doc)
      binaries "$name" | while read -r bin t n; do
        case "$bin" in
          it::*) printf '    %-44s %8s  (ended at, %s tests)\n' "$bin" "$t" "$n" ;;
          *) printf '    %-44s %8s\n' "$bin" "$t" ;;
        esac
      done
      ;;
  esac
done <"$times"
echo
echo "== the slowest integration tests (seconds from start to end, waits for locks included)"
slowest "$IT_THREADS" | while read -r t name; do
  printf '    %-60s %8s\n' "$name" "$t"
done

if [ -s "$locks" ]; then
  summary=$(locks_summary)
  echo
  echo "== the integration tests' locks (held: waits for the suite's share included)"
  echo "$summary" | awk '$1 == "H"' | sort -k2 -n -r | while read -r _ t n what; do
    printf '    held %-40s %8s s by %s tests\n' "$what" "$t" "$n"
  done
  echo "  the longest waits for a slot or a lock (seconds waited, then held):"
  echo "$summary" | awk '$1 == "T"' | sort -k2 -n -r | head -12 | while read -r _ w r name; do
    printf '    %-60s %8s %8s\n' "$name" "$w" "$r"
  done
  echo "  the longest holders (seconds waited, then held):"
  echo "$summary" | awk '$1 == "T"' | sort -k3 -n -r | head -12 | while read -r _ w r name; do
    printf '    %-60s %8s %8s\n' "$name" "$w" "$r"
  done
fi

n=$(wc -l <"$skips")
echo
if [ "$n" -gt 0 ]; then
  echo "$n skipped (not run here, not counted as passed):"
  sed 's/^SKIP /  /' "$skips"
else
  echo "0 skipped"
fi

# The failed tests, named by binary, and whatever else failed (a binary
# that did not build or died before its result line).
failed=$(for s in crates it it-alone doc; do
  [ -f "$logs/$s.log" ] || continue
  awk '
    $2 == "Running" { bin = $NF; sub(/^\(/, "", bin); sub(/\)$/, "", bin); sub(/.*\//, "", bin); sub(/-[0-9a-f]+$/, "", bin) }
    $2 == "Doc-tests" { bin = "doc:" $3 }
    $2 == "test" && $NF == "FAILED" { t = $0; sub(/^[^ ]+ test /, "", t); sub(/ \.\.\. FAILED$/, "", t); print "  " bin ": " t }
  ' "$logs/$s.log"
done)
echo
if [ "$status" -eq 0 ]; then
  echo "all passed"
else
  echo "FAILED:"
  for s in "${failed_steps[@]}"; do echo "  step $s"; done
  if [ -n "$failed" ]; then
    echo "failed tests:"
    echo "$failed"
  fi
  # cargo's own list of the test binaries that failed (also those that
  # failed without a test's FAILED line).
  for s in crates it it-alone doc; do
    [ -f "$logs/$s.log" ] || continue
    sed -n 's/^[0-9.]* //; /^error: [0-9]* targets\? failed:/,/^[^ ]/p' "$logs/$s.log" | grep '^ ' || true
  done
fi
exit "$status"
