#!/usr/bin/env bash
# README command 1: on a fresh Debian 12 machine, as root — install the build
# dependencies, build and install libhp, show what it sees, then allocate a
# block and print what backend and page size it really got.
set -eu
cd "$(dirname "$0")/.."
need="meson ninja-build pkg-config gcc libcmocka-dev python3"
missing=$(for p in $need; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"; done)
if [ -n "$missing" ]; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 $missing
fi
[ -d build ] || meson setup build --buildtype=debugoptimized
meson compile -C build
meson install -C build --quiet
ldconfig
echo
hpctl status
echo
hpctl alloc "${1:-256M}"
