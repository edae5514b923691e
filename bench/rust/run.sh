#!/usr/bin/env bash
# bench/rust/run.sh [BUILD_DIR] [ROUNDS]
#
# Builds bench/rust (release, offline, against the uninstalled libhp in
# BUILD_DIR, default ./build, with an rpath to it) and runs it under the
# machine-wide heavy-job lock (/run/lock/libhp-heavy.lock: it maps 4 GiB).
# Kernel knobs are only printed, never changed. The table goes to stdout
# and BUILD_DIR/bench-rust.md; per-round lines to stderr.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd) || exit 1
rounds=${2:-5}
cargo=$(command -v cargo || echo "${HOME:-/root}/.cargo/bin/cargo")
export PKG_CONFIG_PATH=$build/meson-uninstalled HP_BACKEND_DIR=$build/backends
export CARGO_TARGET_DIR=$build/rust-bench-target
export RUSTFLAGS="-C link-arg=-Wl,-rpath,$build/lib"
"$cargo" build --release --offline -q --manifest-path "$here/Cargo.toml" || exit 1
lock=/run/lock/libhp-heavy.lock
[ -w /run/lock ] || lock=/tmp/libhp-heavy.lock
thp=/sys/kernel/mm/transparent_hugepage
h2=/sys/kernel/mm/hugepages/hugepages-2048kB
{
  echo "# bench/rust on $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ), $rounds rounds"
  echo
  echo "THP enabled: $(cat $thp/enabled); defrag: $(cat $thp/defrag);" \
       "2 MiB pool: $(cat $h2/nr_hugepages) pages, $(cat $h2/free_hugepages) free"
  echo
  flock "$lock" "$CARGO_TARGET_DIR/release/hp-bench" "$rounds"
} | tee "$build/bench-rust.md"
exit "${PIPESTATUS[0]}"
