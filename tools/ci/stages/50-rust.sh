#!/usr/bin/env bash
# The Rust bindings (bindings/rust), against the uninstalled build in ./build,
# fully offline, with an empty CARGO_HOME (zero crates from a registry), and
# everything cargo writes kept inside build/:
#   1. cargo test of hp-sys and hp (unit, integration and doc tests, the
#      compile_fail ones included);
#   2. cargo clippy --all-targets -- -D warnings;
#   3. cargo doc with RUSTDOCFLAGS=-D warnings;
#   4. the README's recipe for a crate of one's own built against the
#      uninstalled tree: with an rpath it must run this tree's libhp;
#   5. the bindgen drift check of hp-sys/src/bindings.rs when bindgen exists.
# Appends one line "PASSED FAILED" to $HP_RESULTS (cargo's "test result:"
# counts, plus 1 for each of steps 2-5 that runs); exits non-zero on failure.
set -u
results=${HP_RESULTS:-/dev/null}
root=$PWD

cargo=$(command -v cargo || true)
if [ -z "$cargo" ] && [ -x "${HOME:-/root}/.cargo/bin/cargo" ]; then
  cargo=${HOME:-/root}/.cargo/bin/cargo
  export PATH="$(dirname "$cargo"):$PATH"   # rustup's proxies find rustc here
fi
if [ -z "$cargo" ]; then
  echo "50-rust: cargo not found on PATH or in \$HOME/.cargo/bin; 00-deps.sh installs Debian's cargo-web/rustc-web" >&2
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
export PKG_CONFIG_PATH=$root/build/meson-uninstalled
export HP_BACKEND_DIR=$root/build/backends
export CARGO_TARGET_DIR=$root/build/rust-target
export CARGO_HOME=$root/build/rust-cargo-home
manifest=bindings/rust/Cargo.toml
"$cargo" test --offline --no-fail-fast --manifest-path $manifest 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

# "test result: ok. 11 passed; 0 failed; 0 ignored; ..." (or "FAILED.")
read -r passed failed < <(awk '/^test result: /{
    for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;?$/) p += $i; if ($(i+1) ~ /^failed;?$/) f += $i }
  } END { print p + 0, f + 0 }' "$log")
# "test some_name ... FAILED"
grep -E '^test .* \.\.\. FAILED$' "$log" | sed 's/^test /50-rust: /; s/ \.\.\. FAILED$//' >> "${HP_FAILS:-/dev/null}"
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "50-rust: cargo test exited $rc before reporting a failed test (build error?)" >&2
  failed=1
fi

step() {   # step NAME CMD...: one more passed or failed check
  local name=$1; shift
  if "$@"; then
    echo "50-rust: $name ok"; passed=$((passed + 1))
  else
    echo "50-rust: $name FAILED" >&2; failed=$((failed + 1)); rc=1
    echo "50-rust: $name" >> "${HP_FAILS:-/dev/null}"
  fi
}

if "$cargo" clippy --version >/dev/null 2>&1; then
  step "cargo clippy -D warnings" \
    "$cargo" clippy --offline --manifest-path $manifest --all-targets -- -D warnings
else
  echo "50-rust: cargo clippy is not installed (Debian: rust-web-clippy; rustup: rustup component add clippy); lint step skipped"
fi

step "cargo doc -D warnings" \
  env RUSTDOCFLAGS="-D warnings" "$cargo" doc --offline --no-deps --manifest-path $manifest

# The README recipe: a crate of one's own, built against this uninstalled
# tree, with an rpath to build/lib, must load build/lib/libhp.so.1 (an
# installed libhp in ld.so.cache would come after the rpath) and print no
# version warning.
own_crate() {
  local demo=$root/build/rust-own-crate
  rm -rf "$demo/src" && mkdir -p "$demo/src"
  cat > "$demo/Cargo.toml" <<TOML
[package]
name = "hpdemo"
version = "0.1.0"
edition = "2021"
[dependencies]
hp = { path = "$root/bindings/rust/hp" }
[workspace]
TOML
  cat > "$demo/src/main.rs" <<'RS'
fn main() -> Result<(), hp::Error> {
    let mut v: hp::HugeVec<u64> = hp::HugeVec::zeroed(1 << 20)?;
    v[0] = 1;
    let path = hp::library_path().expect("dladdr");
    println!("loaded {} from {}", hp::version(), path.display());
    Ok(())
}
RS
  local out
  out=$(cd "$demo" && RUSTFLAGS="-C link-arg=-Wl,-rpath,$root/build/lib" \
        CARGO_TARGET_DIR=$demo/target "$cargo" run --offline -q 2>&1) || { echo "$out"; return 1; }
  echo "$out"
  [[ "$out" == "loaded "*" from $root/build/lib/libhp.so"* ]] && ! grep -q warning <<<"$out"
}
step "own crate against the uninstalled tree runs it (rpath)" own_crate

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
