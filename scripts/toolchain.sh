# Sourced by scripts/test.sh and scripts/demo.sh: makes the Rust toolchain
# that rust-toolchain.toml pins available under its pinned name.
#
# This project's machines ship that version as rustup's `stable`, and only
# package registries are reachable, so rustup must not try to download the
# pinned name: when `stable` is that version, it is linked under the pinned
# name; otherwise rustup installs it (where the network allows).
ensure_toolchain() {
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  command -v rustup >/dev/null 2>&1 || return 0
  local want
  want=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
  [ -n "$want" ] || return 0
  if rustup toolchain list | grep -q "^$want"; then
    return 0
  fi
  if [ "$(rustc +stable --version 2>/dev/null | awk '{print $2}')" = "$want" ]; then
    # `rustup toolchain link` refuses official names, so the toolchain
    # directory is linked under the pinned name directly.
    local host dir
    host=$(rustc +stable -vV | sed -n 's/^host: //p')
    dir="${RUSTUP_HOME:-$HOME/.rustup}/toolchains"
    ln -sfn "$(rustc +stable --print sysroot)" "$dir/$want-$host"
  else
    rustup toolchain install "$want" --profile minimal -c rustfmt -c clippy
  fi
}
ensure_toolchain
