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
echo "1..22"

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

# The numpy allocator's extension goes where Debian's python3 reads under
# the prefix (sys.path), so that `import hp` finds it after meson install.
ext=$(find "$root" -name '_hp_numpy*.so' | head -1)
if [ -n "$ext" ]; then
  check "_hp_numpy installed where python3 looks: ${ext#"$root"}" sh -c "
    /usr/bin/python3 -c 'import sys; print(chr(10).join(sys.path))' | grep -qx '$(dirname "${ext#"$root"}")'"
else
  n=$((n + 1)); echo "ok $n - _hp_numpy installed # SKIP not built (python3-dev or numpy missing)"
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
