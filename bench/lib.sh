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

# Starts Debian's smbd as a plain process (its own session, so that
# stop_smbd ends the whole group) with its state, its share ($1/share) and
# its test user www-data in directory $1 (made by the caller); listens on
# 127.0.0.1 only. Sets PORT, SMB_PASSWORD and SMBD_PID; returns once smbd
# accepts connections.
start_smbd() {
  local dir=$1
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  SMB_PASSWORD=$(python3 -c 'import secrets; print(secrets.token_hex(12))')
  mkdir -p "$dir"/{private,lock,state,cache,pid,ncalrpc,binddns,share}
  chmod 700 "$dir/private"
  chown www-data: "$dir/share"
  cat > "$dir/smb.conf" <<CONF
[global]
interfaces = 127.0.0.1
bind interfaces only = yes
smb ports = $PORT
disable netbios = yes
server role = standalone server
map to guest = never
server min protocol = NT1
passdb backend = tdbsam:$dir/private/passdb.tdb
private dir = $dir/private
lock directory = $dir/lock
state directory = $dir/state
cache directory = $dir/cache
pid directory = $dir/pid
ncalrpc dir = $dir/ncalrpc
binddns dir = $dir/binddns
log file = $dir/smbd.log
load printers = no
printing = bsd
printcap name = /dev/null
disable spoolss = yes
[bench]
path = $dir/share
read only = no
valid users = www-data
CONF
  printf '%s\n%s\n' "$SMB_PASSWORD" "$SMB_PASSWORD" | smbpasswd -c "$dir/smb.conf" -s -a www-data >/dev/null
  setsid /usr/sbin/smbd --foreground --no-process-group -s "$dir/smb.conf" > "$dir/smbd.out" 2>&1 &
  SMBD_PID=$!
  for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
}

# Stops the smbd of start_smbd (SIGTERM to its group) and waits for it.
stop_smbd() {
  [ -n "${SMBD_PID:-}" ] && kill -TERM -- "-$SMBD_PID" 2>/dev/null && wait "$SMBD_PID" 2>/dev/null || true
  SMBD_PID=""
}
