#!/usr/bin/env bash
# Build the main tree (debug info is required by the ABI check).
set -eu
[ -d build ] || meson setup build --buildtype=debugoptimized
meson compile -C build
