#!/usr/bin/env bash
# Debian packages every later stage needs: tools/deps/build.txt and test.txt,
# the lists README command 1 (tools/quickstart.sh) reads too, installed by
# tools/deps/install.sh (only what is missing; quick when all is there).
set -eu
extra=
# Rust: a fresh Debian 12 has no cargo, and its `cargo`/`rustc` (1.63) are
# too old; cargo-web/rustc-web (bookworm-security, 1.96) install /usr/bin/cargo,
# rustc and rustdoc, rust-web-clippy /usr/bin/cargo-clippy, rustfmt-web
# /usr/bin/rustfmt (bindgen formats its output with it: the drift check needs
# it). Only when no cargo is found (PATH or rustup's ~/.cargo/bin), so a
# rustup toolchain is kept.
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "${HOME:-/root}/.cargo/bin/cargo" ]; then
  extra="cargo-web rustc-web rust-web-clippy rustfmt-web"
elif [ "$(command -v cargo || true)" = /usr/bin/cargo ] && ! cargo clippy --version >/dev/null 2>&1; then
  extra="rust-web-clippy"
fi
# shellcheck disable=SC2086
tools/deps/install.sh test $extra
