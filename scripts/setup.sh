#!/usr/bin/env bash
# benchlab's one set-up step: installs, when missing, every package the demo
# (scripts/demo.sh) and the tests (scripts/test.sh) need, and makes the
# pinned Rust toolchain available. Both scripts run it first; run it alone
# to prepare a machine. It installs only what is missing (one
# `apt-get update` then, none otherwise), starts nothing, and stops or
# removes nothing. README.md lists what it installs and why.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

# What the tests and the demo run, as `command-or-path package`: a
# package is installed when its command is missing.
#   ip, tc        iproute2: test-bed namespaces, veths, bridges, tc tbf
#   ethtool       turns veth offloads off so that tbf sees wire-sized frames
#   sshd, ssh     the SSH host test starts a real sshd inside a test bed
#   mkfs.*, losetup, mount   fs.matrix scratch images (ext4 and XFS)
#   chromium      the HTML report test renders the demo report headless
#   nginx, apache2, wrk   the web workload's real servers and its reference
#                 load generator
#   rabbitmq-server   the broker the mq workloads load (run as a plain
#                 process with its own epmd, never the system service)
#   smbd, smbclient, dbench   the file server fileserver.load drives, its
#                 client library, and dbench's NetBench load file
#   initdb, pg_ctl   PostgreSQL, the lab store's second backend
#   chromedriver  drives chromium in the `benchlab serve` browser test
#   pkg-config    finds libsmbclient when the SMB client is built
NEEDED=(
  "ip iproute2"
  "tc iproute2"
  "ethtool ethtool"
  "/usr/sbin/sshd openssh-server"
  "ssh openssh-client"
  "ssh-keygen openssh-client"
  "mkfs.ext4 e2fsprogs"
  "mkfs.xfs xfsprogs"
  "losetup mount"
  "mount mount"
  "chromium chromium"
  "/usr/sbin/nginx nginx"
  "/usr/sbin/apache2 apache2"
  "wrk wrk"
  "python3 python3"
  "/usr/sbin/rabbitmq-server rabbitmq-server"
  "/usr/sbin/smbd samba"
  "smbclient smbclient"
  "/usr/include/samba-4.0/libsmbclient.h libsmbclient-dev"
  "dbench dbench"
  "/usr/lib/postgresql/15/bin/initdb postgresql"
  "chromedriver chromium-driver"
  "pkg-config pkg-config"
)

have() {
  case "$1" in
    /*) [ -x "$1" ] ;;
    *) command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ] ;;
  esac
}

missing=()
for entry in "${NEEDED[@]}"; do
  read -r cmd pkg <<<"$entry"
  if ! have "$cmd" && [[ " ${missing[*]-} " != *" $pkg "* ]]; then
    missing+=("$pkg")
  fi
done

# Rust: rustup's toolchains where the machine has them (toolchain.sh makes
# the pinned version available under its name), else Debian's.
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  missing+=(cargo rustc rustfmt rust-clippy)
fi

if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "setup: missing ${missing[*]}; install them as root (apt-get install ${missing[*]})" >&2
      exit 1
    fi
  fi
  "${sudo[@]}" apt-get update -qq
  # The tests start sshd, nginx and apache2 themselves, as plain processes
  # inside test beds; Debian's package scripts would start system-wide
  # daemons. A policy-rc.d that answers 101 ("action forbidden") stops
  # that; it is made only if there is none, and removed however the
  # install ends.
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    trap '"${sudo[@]}" rm -f "$policy"' EXIT
    printf '#!/bin/sh\n# made by benchlab scripts/setup.sh for the length of one install\nexit 101\n' \
      | "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 755 "$policy"
  fi
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: installed ${missing[*]}" >&2
fi

. scripts/toolchain.sh
