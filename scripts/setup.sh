#!/usr/bin/env bash
# benchlab's one set-up step: installs, when missing, the packages its
# caller needs, and makes the pinned Rust toolchain available.
#   bash scripts/setup.sh            everything the tests need (= `test`)
#   bash scripts/setup.sh test       the same (scripts/test.sh, .ci/run)
#   bash scripts/setup.sh demo       only what studies/demo.toml runs
#                                    (scripts/demo.sh)
#   bash scripts/setup.sh tool fio   one adapter's program (tools/*.toml)
# The packages are listed once, in scripts/packages.txt, with the purposes
# that need each. It installs only what is missing (one `apt-get update`
# then, none otherwise), starts nothing, and stops or removes nothing.
# README.md says what each package is for.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

purpose="${1:-test}"
shift || true
case "$purpose" in
  test|demo) ;;
  tool)
    if [ "$#" -eq 0 ]; then
      echo "setup: tool needs the program(s): bash scripts/setup.sh tool fio" >&2
      exit 2
    fi
    ;;
  *)
    echo "setup: unknown purpose \`$purpose\` (allowed: test, demo, tool PROGRAM…)" >&2
    exit 2
    ;;
esac

# NEEDED: "command-or-path package" for this purpose.
NEEDED=()
while read -r purposes cmd pkg; do
  case "$purposes" in ''|'#'*) continue ;; esac
  wanted=false
  case "$purpose" in
    test) wanted=true ;;
    demo) [[ ",$purposes," == *",demo,"* ]] && wanted=true ;;
    tool)
      if [[ ",$purposes," == *",tool,"* ]]; then
        for t in "$@"; do [ "$t" = "$cmd" ] && wanted=true; done
      fi
      ;;
  esac
  if $wanted; then NEEDED+=("$cmd $pkg"); fi
done <scripts/packages.txt
if [ "$purpose" = tool ]; then
  for t in "$@"; do
    if [[ " ${NEEDED[*]-} " != *" $t "* ]]; then
      echo "setup: no Debian package is listed for \`$t\` in scripts/packages.txt (see its tools/*.toml for where to get it)" >&2
      exit 2
    fi
  done
fi

have() {
  case "$1" in
    /*) [ -x "$1" ] ;;
    *) command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ] ;;
  esac
}

missing=()
for entry in "${NEEDED[@]+"${NEEDED[@]}"}"; do
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

# The kernel QEMU guests boot (tests): downloaded and unpacked, not installed.
if [ "$purpose" = test ]; then bash scripts/guest-kernel.sh; fi

. scripts/toolchain.sh
