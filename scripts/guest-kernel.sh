#!/usr/bin/env bash
# Fetches the kernel benchlab's QEMU guests boot (crates/guest): Debian's
# linux-image-amd64 dependency, downloaded with `apt-get download` and
# unpacked into benchlab's cache, never installed (installing it pulls
# initramfs-tools and udev into this host). Does nothing when a kernel is
# already there. Cache: $BENCHLAB_CACHE_DIR/guest or /var/cache/benchlab/guest.
set -euo pipefail
cache="${BENCHLAB_CACHE_DIR:-/var/cache/benchlab}/guest"
for k in "$cache"/*/boot/vmlinuz-*; do
  [ -f "$k" ] && exit 0
done
pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ { print $2; exit }')
[ -n "$pkg" ] || { echo "guest-kernel: apt knows no linux-image-amd64 (run apt-get update)" >&2; exit 1; }
release=${pkg#linux-image-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "guest-kernel: fetching $pkg into $cache/$release" >&2
(cd "$tmp" && apt-get download -q "$pkg" 2>&1 | grep -v 'unsandboxed' >&2 || true)
deb=$(ls "$tmp"/*.deb)
mkdir -p "$cache"
rm -rf "$cache/$release.part"
dpkg-deb -x "$deb" "$cache/$release.part"
mv "$cache/$release.part" "$cache/$release"
