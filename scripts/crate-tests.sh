#!/usr/bin/env bash
# The crates' test binaries (every package but benchlab's own, whose
# tests/it is its own step), two at a time: `cargo test` runs them one
# after the other, and most of them wait on the servers they start (nginx,
# RabbitMQ, smbd, the tools) or keep one CPU busy with a single long test,
# so one at a time left a CPU idle for most of the step.
#
#   scripts/crate-tests.sh LOGDIR CARGO-ARGS…
#
# CARGO-ARGS are those that build the workspace as scripts/test.sh does
# (its lint wrapper), so that nothing is compiled again. Each binary runs
# as cargo would run it: from its package's directory, with
# CARGO_MANIFEST_DIR set. Its output is printed whole
# once it ends (never interleaved with the other's), after cargo's own
# header line, so that scripts/test.sh reads it as it reads cargo's. Its
# time goes to LOGDIR/crates.times ("binary seconds"). At the end, the
# binaries that failed in cargo's form ("error: N targets failed:"); the
# exit status is 101 then, as cargo's.
set -uo pipefail
logdir=$1
shift
mkdir -p "$logdir/crates.d"
rm -f "$logdir"/crates.d/* "$logdir/crates.times"

# The test binaries cargo would run, from its build plan, numbered in
# its order: package directory, what cargo's header calls it, executable.
list=$(cargo "$@" test --workspace --exclude benchlab --locked --lib --bins --tests \
  --no-run --message-format=json-render-diagnostics | python3 -c '
import json, os, sys
n = 0
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    if not m["profile"]["test"]:
        continue
    t = m["target"]
    pkg_dir = os.path.dirname(m["manifest_path"])
    src = os.path.relpath(t["src_path"], pkg_dir)
    label = ("unittests " + src) if "lib" in t["kind"] or "bin" in t["kind"] else src
    n += 1
    print("\t".join(["%03d" % n, pkg_dir, label, m["executable"]]))
') || {
  echo "error: the crates' test binaries could not be built" >&2
  exit 101
}

# One binary (a line of the list): its output into its own file, its time
# and status beside, then its output whole, so that the two lanes' outputs
# never mix.
run_one() {
  local n dir label exe
  IFS=$'\t' read -r n dir label exe <<<"$1"
  local out="$logdir/crates.d/$n"
  local t0=$EPOCHREALTIME
  {
    printf '     Running %s (%s)\n' "$label" "${exe#"$PWD/"}"
    (cd "$dir" && CARGO_MANIFEST_DIR="$dir" "$exe" 2>&1)
    echo "rc $?" >"$out.rc"
  } >"$out.log"
  local kind=test
  case "$label" in unittests*) kind=unit ;; esac
  awk -v a="$t0" -v b="$EPOCHREALTIME" -v n="$kind:$(basename "$exe")" \
    'BEGIN { sub(/-[0-9a-f]+$/, "", n); printf "%s %.1f\n", n, b - a }' >>"$logdir/crates.times"
  flock "$logdir/crates.d" cat "$out.log"
}
export -f run_one
export logdir

# Two at a time, in cargo's order.
printf '%s\n' "$list" | xargs -d '\n' -P 2 -n 1 bash -c 'run_one "$1"' _

failed=()
for rc in "$logdir"/crates.d/*.rc; do
  [ -f "$rc" ] || continue
  if [ "$(cut -d' ' -f2 "$rc")" != 0 ]; then
    k=$(basename "$rc" .rc)
    failed+=("$(sed -n 1p "$logdir/crates.d/$k.log" | sed 's/^ *Running //')")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  if [ "${#failed[@]}" -eq 1 ]; then
    echo "error: 1 target failed:"
  else
    echo "error: ${#failed[@]} targets failed:"
  fi
  for f in "${failed[@]}"; do echo "    $f"; done
  exit 101
fi
