#!/usr/bin/env bash
# The Rust bindings (bindings/rust): cargo test of hp-sys and hp against the
# uninstalled build in ./build, fully offline, with an empty CARGO_HOME (zero
# crates from a registry), and everything cargo writes kept inside build/.
# Then the bindgen drift check of hp-sys/src/bindings.rs when bindgen exists.
# Appends one line "PASSED FAILED" to $HP_RESULTS (cargo's "test result:"
# counts, plus 1 for the drift check when it runs); exits non-zero on failure.
set -u
results=${HP_RESULTS:-/dev/null}
root=$PWD

cargo=$(command -v cargo || true)
if [ -z "$cargo" ] && [ -x "${HOME:-/root}/.cargo/bin/cargo" ]; then
  cargo=${HOME:-/root}/.cargo/bin/cargo
  export PATH="$(dirname "$cargo"):$PATH"   # rustup's proxies find rustc here
fi
if [ -z "$cargo" ]; then
  echo "50-rust: cargo not found on PATH or in \$HOME/.cargo/bin; install Rust (rustup) to run the Rust tests" >&2
  exit 1
fi
if [ ! -f build/meson-uninstalled/libhp-uninstalled.pc ]; then
  echo "50-rust: build/meson-uninstalled/libhp-uninstalled.pc missing; the build stage must run first" >&2
  exit 1
fi
echo "50-rust: $("$cargo" --version), $(rustc --version 2>/dev/null || echo 'rustc ?')"

log=$(mktemp /tmp/hp-rust-test.XXXXXX)
trap 'rm -f "$log"' EXIT
mkdir -p build/rust-cargo-home
PKG_CONFIG_PATH=$root/build/meson-uninstalled \
HP_BACKEND_PATH=$root/build/backends \
CARGO_TARGET_DIR=$root/build/rust-target \
CARGO_HOME=$root/build/rust-cargo-home \
  "$cargo" test --offline --no-fail-fast --manifest-path bindings/rust/Cargo.toml 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

# "test result: ok. 11 passed; 0 failed; 0 ignored; ..." (or "FAILED.")
read -r passed failed < <(awk '/^test result: /{
    for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;?$/) p += $i; if ($(i+1) ~ /^failed;?$/) f += $i }
  } END { print p + 0, f + 0 }' "$log")
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "50-rust: cargo test exited $rc before reporting a failed test (build error?)" >&2
fi

if command -v bindgen >/dev/null 2>&1; then
  bash bindings/rust/hp-sys/bindgen.sh --check
  case $? in
    0) passed=$((passed + 1)) ;;
    1) failed=$((failed + 1)); rc=1 ;;
    *) echo "50-rust: bindgen drift check skipped (see above)" ;;
  esac
else
  echo "50-rust: bindgen not installed; drift check of hp-sys/src/bindings.rs skipped (tests/c_abi.rs still ran)"
fi

echo "50-rust: $passed passed, $failed failed"
echo "$passed $failed" >> "$results"
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ]
