#!/bin/sh
# bench/numpy: numpy on libhp against numpy's default allocator (run.py).
# Holds the machine-wide heavy lock: it maps 4 GiB several times.
cd "$(dirname "$0")/../.." || exit 1
exec flock /run/lock/libhp-heavy.lock /usr/bin/python3 bench/numpy/run.py "$@"
