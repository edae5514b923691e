#!/bin/sh
# Install into a temporary root, then use libhp as a user and as a plugin
# author would: pkg-config, a consumer program, hpctl, and the example plugin
# built out of tree against the installed header only.
# usage: check-install.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 src=$2
# Inside the build tree: the loader refuses plugin directories below a
# world-writable one such as /tmp (README "Plugin trust").
root=$(mktemp -d "$build/hp-install.XXXXXX")
trap 'rm -rf "$root"' EXIT
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
bad() { n=$((n + 1)); echo "not ok $n - $1"; fail=1; }
check() { desc=$1; shift; if "$@" > "$root/out" 2>&1; then ok "$desc"; else bad "$desc"; sed 's/^/# /' "$root/out"; fi; }
echo "1..25"

check "meson install into a DESTDIR" meson install -C "$build" --no-rebuild --destdir "$root" --quiet
pc=$(find "$root" -name libhp.pc | head -1)
# The .pc file says prefix=/usr/local; point it at the temporary root with a
# pkg-config wrapper, so consumers run the plain `pkg-config` they would use.
orig_prefix=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=prefix libhp)
mkdir -p "$root/wrap"
cat > "$root/wrap/pkg-config" <<W
#!/bin/sh
exec /usr/bin/pkg-config --define-variable=prefix="$root$orig_prefix" "\$@"
W
chmod +x "$root/wrap/pkg-config"
export PATH=$root/wrap:$PATH PKG_CONFIG_PATH=$(dirname "$pc")
prefix=$(pkg-config --variable=prefix libhp)
libdir=$(pkg-config --variable=libdir libhp)
backenddir=$(pkg-config --variable=backenddir libhp)
echo "# prefix $prefix, libdir $libdir, backenddir $backenddir"
check "backenddir holds the four plugins" sh -c "cd '$backenddir' && ls hugetlbfs.so thp-madvise.so anon-orders.so fallback.so"
check "headers installed" test -f "$prefix/include/hp.h" -a -f "$prefix/include/hp/backend.h"
check "hpctl installed" test -x "$prefix/bin/hpctl"
if command -v scdoc > /dev/null && command -v man > /dev/null; then
  check "man pages installed; man 3 hp_free follows its .so link to hp_alloc(3)" \
    sh -c "test -f '$prefix/share/man/man1/hpctl.1' -a -f '$prefix/share/man/man7/libhp-backend.7' && MANWIDTH=80 man -M '$prefix/share/man' 3 hp_free 2>/dev/null | grep -q 'hp_realloc(NULL, n, f)'"
else
  n=$((n + 1)); echo "ok $n - man pages # SKIP scdoc or man missing"
fi

# The Python package (-Dpython): hp/ with every module of bindings/python/hp,
# _hp_installed.py naming the installed libdir, and _hp_numpy when built,
# in the directory under the prefix that python3 reads, if it reads one
# (/usr/lib/python3/dist-packages for /usr,
# /usr/local/lib/python3.11/dist-packages for /usr/local); under any other
# prefix in PREFIX/lib/python3/dist-packages, which README.md tells users
# to put on PYTHONPATH (or in a .pth file).
init=$(find "$root" -path '*/hp/__init__.py' | head -1)
if [ -n "$init" ]; then
  pkg=$(dirname "$init") site=$(dirname "$(dirname "${init#"$root"}")")
  echo "# hp package in $site"
  check "the hp package holds every module of bindings/python/hp" sh -c "
    cd '$src/bindings/python/hp' && ls *.py py.typed > '$root/want' &&
    cd '$pkg' && ls *.py py.typed | grep -vx _hp_installed.py | diff -u '$root/want' -"
  check "hp/_hp_installed.py names the installed libdir ${libdir#"$root"}" sh -c "
    /usr/bin/python3 -c 'import runpy, sys; sys.exit(runpy.run_path(sys.argv[1])[\"LIBDIR\"] != sys.argv[2])' \
      '$pkg/_hp_installed.py' '${libdir#"$root"}'"
  reads=$(/usr/bin/python3 -E -c '
import os, sys
prefix = os.path.normpath(sys.argv[1])
for d in sys.path:
    if os.path.isabs(d) and os.path.relpath(d, prefix).startswith("lib") and d.endswith(("dist-packages", "site-packages")):
        print(os.path.normpath(d))' "$orig_prefix")
  if [ -n "$reads" ]; then
    check "installed where /usr/bin/python3 reads under $orig_prefix ($(echo $reads))" \
      sh -c "echo '$reads' | grep -qx '$site'"
  else
    check "python3 reads nothing under $orig_prefix: installed in PREFIX/lib/python3/dist-packages (README)" \
      test "$site" = "$orig_prefix/lib/python3/dist-packages"
  fi
  if [ -n "$(find "$pkg" -name '_hp_numpy*.so')" ]; then
    # The installed package alone on the path (not the source tree's), the
    # installed library through HP_LIBRARY (the recorded libdir is outside
    # this DESTDIR; hp's own tests cover that lookup), numpy's arrays from
    # libhp through the installed extension.
    check "the installed package imports and hp.numpy serves numpy's arrays" env \
      PYTHONPATH="$root$site" HP_LIBRARY="$libdir/libhp.so.1" HP_BACKEND_DIR="$backenddir" \
      /usr/bin/python3 -c '
import sys, hp, hp.numpy, numpy
assert hp.__file__.startswith(sys.argv[1]), hp.__file__
hp.numpy.install(min_size=1 << 20)
a = numpy.zeros(4 << 20)
assert hp.info(a).backend, "not from libhp"
assert hp.numpy.stats()["allocs"] >= 1, hp.numpy.stats()' "$root$site/hp/"
  else
    n=$((n + 1)); echo "ok $n - _hp_numpy installed in the package # SKIP not built (python3-dev or numpy missing)"
  fi
else
  for what in "the hp package" "_hp_installed.py" "its directory" "hp.numpy"; do
    n=$((n + 1)); echo "ok $n - $what # SKIP the Python package is not installed (-Dpython; cffi missing?)"
  done
fi

export LD_LIBRARY_PATH=$libdir HP_BACKEND_DIR=$backenddir
check "consumer compiles with cc \$(pkg-config --cflags --libs libhp)" \
  sh -c "cc -std=c11 -Wall -Werror '$src/examples/plugin/consumer.c' \$(pkg-config --cflags --libs libhp) -o '$root/consumer'"
check "consumer runs" "$root/consumer"
check "installed hpctl status --json lists the four backends" \
  sh -c "'$prefix/bin/hpctl' status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); n={b[\"name\"] for b in d[\"backends\"]}; assert {\"hugetlbfs\",\"thp-madvise\",\"anon-orders\",\"fallback\"} <= n, n'"

# The plugin author's path: installed header + pkg-config, nothing else.
# examples/plugin/numa_local.c is built the way its README says, put in a
# trusted directory of its own on HP_BACKEND_PATH (the built-ins keep loading
# from their own directory, searched after it), and used by an application built the same
# way (tests/pkg/plugin_user.c), which compares it with a built-in.
cp "$src/examples/plugin/numa_local.c" "$src/examples/plugin/Makefile" "$root/"
check "numa-local plugin builds out of tree: cc \$(pkg-config --cflags libhp) -shared -fPIC" \
  make -s -C "$root" CFLAGS="-O2 -Wall -Wextra -Werror" numa-local.so
plugins=$root/plugins
mkdir -m 755 "$plugins" && cp "$root/numa-local.so" "$plugins/" &&
  chmod 644 "$plugins"/*.so
check "the plugin directory is trusted: owned by us, not group/other writable" sh -c "
  test \"\$(stat -c '%u %a' '$plugins')\" = '$(id -u) 755' &&
  test \"\$(stat -c '%u %a' '$plugins/numa-local.so')\" = '$(id -u) 644'"
app_defs=
# hp_info reports the node once the query op reaches struct hp_block_info.
printf '#include <hp.h>\nint main(void){struct hp_block_info i = HP_BLOCK_INFO_INIT; return i.numa_node;}\n' > "$root/infoprobe.c"
cc -std=c11 "$root/infoprobe.c" $(pkg-config --cflags libhp) -o "$root/infoprobe" 2> /dev/null &&
  app_defs="$app_defs -DHP_TEST_INFO_NUMA"
check "an application builds with cc \$(pkg-config --cflags --libs libhp)" sh -c "
  cc -std=c11 -Wall -Werror $app_defs '$src/tests/pkg/plugin_user.c' \$(pkg-config --cflags --libs libhp) -o '$root/plugin_user'"
# use DESC CHECK BACKEND [VAR=VALUE]: one plugin_user run; exit 77 is a skip
# with its reason.
use() {
  desc="$1 ($3)"
  env HP_BACKEND_PATH="$plugins" ${4:-} "$root/plugin_user" "$2" "$3" > "$root/out" 2>&1
  rc=$?
  n=$((n + 1))
  if [ $rc -eq 0 ]; then echo "ok $n - $desc"
  elif [ $rc -eq 77 ]; then echo "ok $n - $desc # SKIP $(grep -m1 '^SKIP' "$root/out" | cut -c7-)"
  else echo "not ok $n - $desc"; fail=1; fi
  sed 's/^/# /' "$root/out"
}
# The checks depend on the THP switches, which knob tests change: hold the
# machine-wide knob lock while they run.
lock=/run/lock/libhp-knobs.lock
[ -w /run/lock ] || lock=/tmp/libhp-knobs.lock  # as tests/support's knob_lock
exec 9>> "$lock"
flock 9
for b in numa-local thp-madvise; do
  use "opts.backend names it: served by it, hp_info numa_node, numa_maps N<node>=" serve $b
  use "free then alloc of the same size is a cache hit (hp_cache_get_stats)" cache $b
  use "hp_realloc grows in place while the headroom lasts" realloc $b
  # Stacks have no backend option: HP_BACKENDS names the only backend allowed.
  use "hp_stack_create with only it allowed: huge, aligned, guard faults, placed" stack $b \
    HP_BACKENDS=$b
  use "exit with its memory in the cache: destructors unmap through it, then fini" exit $b
done
flock -u 9
exit $fail
