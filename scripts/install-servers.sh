#!/usr/bin/env bash
# Installs the real servers that benchlab's service tests and server
# workloads run: Debian's nginx and apache2. benchlab runs them itself as
# plain processes, so the packages' own daemons must not start: a
# policy-rc.d that answers 101 ("action forbidden") holds them back during
# the install and is removed afterwards. An existing policy-rc.d is not
# ours: it is left as it is (and used as it is).
set -euo pipefail

packages=(nginx apache2)
missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "already installed: ${packages[*]}"
    exit 0
fi

policy=/usr/sbin/policy-rc.d
ours=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# written by benchlab scripts/install-servers.sh; removed after the install\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    ours=1
fi
cleanup() {
    if [ "$ours" = 1 ] && grep -q 'benchlab scripts/install-servers.sh' "$policy" 2>/dev/null; then
        rm -f "$policy"
    fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "installed: ${missing[*]}"
