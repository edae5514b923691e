#!/usr/bin/env bash
# Debian packages every later stage needs. Idempotent; skipped quickly when
# everything is already there.
set -eu
pkgs="meson ninja-build pkg-config gcc g++ clang libcmocka-dev libffi-dev abigail-tools valgrind
  python3-cffi python3-pytest python3-numpy python3-venv python3-wheel-whl python3-setuptools
  libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 hyperfine binutils jq bindgen
  libmimalloc-dev libjemalloc-dev sqlite3"
missing=$(for p in $pkgs; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"; done)
if [ -n "$missing" ]; then
  echo "installing: $missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q -o DPkg::Lock::Timeout=600 $missing
fi
