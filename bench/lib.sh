# Shared by the bench scripts (sourced, from the repository root).

# Builds bench/limit/NAME.c with the system compiler into target/bench-limit
# (never committed) and prints the binary's path.
build_limit() {
  local name=$1 dir=target/bench-limit
  mkdir -p "$dir"
  if ! command -v gcc >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq gcc libc6-dev >/dev/null
  fi
  gcc -O2 -Wall -Wextra -pthread -o "$dir/$name" "bench/limit/$name.c" >&2
  echo "$PWD/$dir/$name"
}

# Sets JUDGE=1 when the 1-minute load average is at most BENCH_MAX_LOAD
# (default 0.5), else JUDGE=0 and says why: on a loaded machine the figures
# are printed but no target is judged (issue 16: a ratio that moved by 0.2
# between two runs an hour apart proves nothing).
load_gate() {
  local load max=${BENCH_MAX_LOAD:-0.5}
  read -r load _ < /proc/loadavg
  if python3 -c "import sys; sys.exit(0 if $load <= $max else 1)"; then
    JUDGE=1
  else
    JUDGE=0
    echo "load average $load > $max at the start: figures only, no verdict (BENCH_MAX_LOAD changes the bound)" >&2
  fi
  LOAD_AT_START=$load
}
