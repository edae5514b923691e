#!/usr/bin/env bash
# README command 1: on a fresh Debian 12 machine, as root — install the
# Debian packages of tools/deps/build.txt (every advertised feature's), build
# libhp with those features enabled (tools/ci/lib.sh ci_setup_main; an
# existing build/ is reconfigured, keeping e.g. its --prefix, or set up
# again when those packages changed), install it (default prefix
# /usr/local), show what libhp sees, then allocate a block and print what
# backend and page size it really got.
# usage: tools/quickstart.sh [SIZE]   (hpctl alloc's size; default 256M)
set -eu
cd "$(dirname "$0")/.."
tools/deps/install.sh build
. tools/ci/lib.sh
ci_setup_main
meson install -C build --quiet
ldconfig
# hpctl from this install, also when its bindir is not on PATH.
bindir=$(meson introspect build --buildoptions | python3 -c '
import json, os, sys
opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
print(os.path.join(opts["prefix"], opts["bindir"]))')
echo
"$bindir/hpctl" status
echo
"$bindir/hpctl" alloc "${1:-256M}"
