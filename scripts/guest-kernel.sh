#!/usr/bin/env bash
# Fetches a kernel benchlab's QEMU guests boot (crates/guest): a Debian
# linux-image package, downloaded with `apt-get download` and unpacked
# into benchlab's cache, never installed (installing it pulls
# initramfs-tools and udev into this host). Cache: $BENCHLAB_CACHE_DIR/guest
# or /var/cache/benchlab/guest, one directory per kernel release.
#
#   guest-kernel.sh            the kernel linux-image-amd64 depends on; it
#                              becomes the default of guests that name none
#   guest-kernel.sh RELEASE    linux-image-RELEASE (e.g. 6.1.0-50-amd64,
#                              6.12.100+deb12-amd64, 6.1.0-57-rt-amd64), for
#                              a study's guest.kernel = "RELEASE"
#
# Does nothing when the release is already there. Compressed modules
# (.ko.xz, .ko.zst) are decompressed: the initramfs benchlab builds loads
# them with busybox insmod and reads their dependencies from the ELF.
set -euo pipefail
cache="${BENCHLAB_CACHE_DIR:-/var/cache/benchlab}/guest"
mkdir -p "$cache"
# One fetch at a time: two studies asking for the same kernel at once
# must not unpack into the same directory.
exec 9>"$cache/.fetch.lock"
flock 9
if [ $# -eq 0 ]; then
  pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ { print $2; exit }')
  [ -n "$pkg" ] || { echo "guest-kernel: apt knows no linux-image-amd64 (run apt-get update)" >&2; exit 1; }
  release=${pkg#linux-image-}
  default=1
elif [ $# -eq 1 ] && [[ "$1" =~ ^[0-9][A-Za-z0-9.+~_-]*$ ]]; then
  release=$1
  pkg=linux-image-$release
  default=0
else
  echo "usage: guest-kernel.sh [RELEASE]   (RELEASE as in linux-image-RELEASE, e.g. 6.1.0-50-amd64)" >&2
  exit 2
fi
if [ ! -f "$cache/$release/boot/vmlinuz-$release" ]; then
  if ! apt-cache show "$pkg" >/dev/null 2>&1; then
    echo "guest-kernel: apt knows no package $pkg (\`apt-cache search --names-only '^linux-image-'\` lists them; run apt-get update)" >&2
    exit 1
  fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "guest-kernel: fetching $pkg into $cache/$release" >&2
  (cd "$tmp" && apt-get download -q "$pkg" 2>&1 | grep -v 'unsandboxed' >&2 || true)
  deb=$(ls "$tmp"/*.deb 2>/dev/null | head -n 1)
  [ -n "$deb" ] || { echo "guest-kernel: apt-get download $pkg fetched nothing" >&2; exit 1; }
  rm -rf "$cache/$release.part"
  dpkg-deb -x "$deb" "$cache/$release.part"
  find "$cache/$release.part/lib/modules" -name '*.ko.xz' -exec xz -d {} +
  find "$cache/$release.part/lib/modules" -name '*.ko.zst' -exec zstd -q -d --rm {} +
  [ -f "$cache/$release.part/boot/vmlinuz-$release" ] || {
    echo "guest-kernel: $pkg has no boot/vmlinuz-$release" >&2
    exit 1
  }
  mv "$cache/$release.part" "$cache/$release"
fi
if [ "$default" = 1 ] || [ ! -f "$cache/default" ]; then
  # The first kernel fetched, or the distribution's, is what a guest
  # without guest.kernel boots: fetching another must not change it.
  [ "$default" = 1 ] || [ -z "$(ls "$cache"/*/boot/vmlinuz-* 2>/dev/null | grep -v "/$release/")" ] || exit 0
  echo "$release" >"$cache/default.part"
  mv "$cache/default.part" "$cache/default"
fi
