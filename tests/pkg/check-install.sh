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
echo "1..10"

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

export LD_LIBRARY_PATH=$libdir HP_BACKEND_DIR=$backenddir
check "consumer compiles with cc \$(pkg-config --cflags --libs libhp)" \
  sh -c "cc -std=c11 -Wall -Werror '$src/examples/plugin/consumer.c' \$(pkg-config --cflags --libs libhp) -o '$root/consumer'"
check "consumer runs" "$root/consumer"
check "installed hpctl status --json lists the four backends" \
  sh -c "'$prefix/bin/hpctl' status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); n={b[\"name\"] for b in d[\"backends\"]}; assert {\"hugetlbfs\",\"thp-madvise\",\"anon-orders\",\"fallback\"} <= n, n'"

# The plugin author's path: installed header + pkg-config, nothing else.
cp "$src/examples/plugin/example_backend.c" "$src/examples/plugin/Makefile" "$root/"
check "example plugin builds out of tree" make -s -C "$root" example.so
mkdir "$root/plugins" && cp "$root/example.so" "$root/plugins/"
cat > "$root/use_example.c" <<'C'
#include <hp.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "example";
    char *p = hp_alloc_ex(1 << 20, &o);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    if (!p || hp_info(p, &info) != HP_OK || strcmp(info.backend, "example")) {
        fprintf(stderr, "%s\n", hp_last_error_detail());
        return 1;
    }
    p[12345] = 1;
    return hp_free(p) == HP_OK ? 0 : 1;
}
C
check "example plugin loads through HP_BACKEND_PATH and serves" sh -c "
  cc -std=c11 '$root/use_example.c' \$(pkg-config --cflags --libs libhp) -o '$root/use_example' &&
  HP_BACKEND_PATH='$root/plugins' '$root/use_example'"
exit $fail
