#!/usr/bin/env bash
# Debian packages every later stage needs. Idempotent; skipped quickly when
# everything is already there.
set -eu
pkgs="meson ninja-build pkg-config gcc g++ clang libcmocka-dev libffi-dev abigail-tools valgrind
  python3-cffi python3-pytest python3-numpy python3-venv python3-wheel-whl python3-setuptools python3-wheel mypy
  libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 hyperfine binutils jq bindgen
  scdoc man-db python3-matplotlib
  libmimalloc-dev libjemalloc-dev sqlite3"
# Rust: a fresh Debian 12 has no cargo, and its `cargo`/`rustc` (1.63) are
# too old; cargo-web/rustc-web (bookworm-security, 1.96) install /usr/bin/cargo,
# rustc and rustdoc, rust-web-clippy /usr/bin/cargo-clippy, rustfmt-web
# /usr/bin/rustfmt (bindgen formats its output with it: the drift check needs
# it). Only when no cargo is found (PATH or rustup's ~/.cargo/bin), so a
# rustup toolchain is kept.
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "${HOME:-/root}/.cargo/bin/cargo" ]; then
  pkgs="$pkgs cargo-web rustc-web rust-web-clippy rustfmt-web"
elif [ "$(command -v cargo || true)" = /usr/bin/cargo ] && ! cargo clippy --version >/dev/null 2>&1; then
  pkgs="$pkgs rust-web-clippy"
fi
missing=$(for p in $pkgs; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"; done)
if [ -n "$missing" ]; then
  echo "installing: $missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q -o DPkg::Lock::Timeout=600 $missing
fi
