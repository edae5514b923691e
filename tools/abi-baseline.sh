#!/usr/bin/env bash
# Refresh the ABI baseline from a build: abi/libhp.abi (abidw, no locations),
# abi/symbols-HP_1.0.txt (the frozen symbol set of the released node), and
# the plugin ABI: abi/backend.abi (abidw of tests/abi/backend_anchor.c) and
# abi/backend-layout.txt (tools/backend-abi.py); and debian/libhp1.symbols
# (debian/gen-symbols.sh, from abi/libhp.map).
# Run only together with a deliberate ABI change: a new version node in
# abi/libhp.map and a new layout.txt/functions.txt entry. See docs/abi-policy.md.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
lib=$build/lib/libhp.so.1
readelf -S "$lib" | grep -q '\.debug_info' || { echo "no debug info in $lib: build with -g" >&2; exit 1; }
abidw --no-corpus-path --no-comp-dir-path --no-show-locs --drop-undefined-syms \
      --out-file abi/libhp.abi "$lib"
nm -D --defined-only "$lib" | awk '{print $3}' | sed -n 's/@@HP_1\.0$//p' | sort > abi/symbols-HP_1.0.txt
debian/gen-symbols.sh abi/libhp.map > debian/libhp1.symbols
echo "baseline: $(grep -c '<elf-symbol' abi/libhp.abi) symbols, HP_1.0 frozen with $(wc -l < abi/symbols-HP_1.0.txt)"
anchor=$build/tests/abi/backend-abi-anchor.so
abidw --no-corpus-path --no-comp-dir-path --no-show-locs --drop-undefined-syms \
      --out-file abi/backend.abi "$anchor"
python3 tools/backend-abi.py write "${CC:-cc}" include abi/backend-layout.txt
