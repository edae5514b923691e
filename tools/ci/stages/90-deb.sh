#!/usr/bin/env bash
# The Debian packages of debian/ (libhp1, libhp-dev, hpctl, libhp-malloc1,
# python3-hp): built, linted, installed on this machine, used, removed.
#   1. dpkg-buildpackage -us -uc -b from a copy of the tree in build/deb/
#      (the files git tracks or would track: uncommitted edits included),
#      without network (a network namespace of its own). build/ is
#      root-owned and trusted, unlike /tmp (README "Plugin trust").
#   2. lintian: no error (its warnings are printed).
#   3. In a private mount namespace with an empty tmpfs on /usr/local, so
#      that the quickstart's install there (README command 1: .ci/run runs
#      it first) is neither what the checks run nor touched:
#      apt-get install of the .debs (offline: their dependencies are in
#      tools/deps), then a program built with pkg-config runs on
#      /usr/lib/<triplet>/libhp.so.1, /usr/bin/hpctl status loads the
#      packaged plugins, /usr/bin/python3 imports hp and hp.numpy from
#      python3-hp, hpctl run -- true, man pages; then apt-get purge, and
#      no package, file or own directory of theirs is left (dpkg -L taken
#      before the purge).
#   4. ldconfig outside the namespace: the dpkg triggers inside it rebuilt
#      ld.so.cache without /usr/local's libraries; and the quickstart's
#      files in /usr/local are checked to be unchanged.
# The last stage on purpose: it changes /usr (and puts it back). It refuses
# (one failure, nothing changed) when libhp files no package owns are
# under /usr (say a `meson install` with --prefix=/usr): installing and
# purging the packages would overwrite, then delete them.
# Appends "PASSED FAILED" to $HP_RESULTS; exits non-zero on a failure.
set -u
results=${HP_RESULTS:-/dev/null}
root=$PWD
work=$root/build/deb
pkgs="libhp1 libhp-dev hpctl libhp-malloc1 python3-hp"
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2> /dev/null || gcc -print-multiarch)
libdir=/usr/lib/$triplet
pass=0 fail=0
out=$(mktemp /tmp/hp-deb.XXXXXX)
trap 'rm -f "$out"' EXIT

check() {   # check WHAT CMD...: one passed or failed check, output on failure
  local what=$1; shift
  if "$@" > "$out" 2>&1; then
    pass=$((pass + 1)); echo "ok - $what"
  else
    fail=$((fail + 1)); echo "not ok - $what"; sed 's/^/#   /' "$out" | tail -40
    echo "90-deb: $what" >> "${HP_FAILS:-/dev/null}"
  fi
}
finish() {
  echo "90-deb${HP_DEB_INSIDE:+ (installed packages)}: $pass passed, $fail failed"
  echo "$pass $fail" >> "$results"
  [ "$fail" -eq 0 ]
  exit
}
installed() {   # the packages of $pkgs that dpkg knows in any state but "not installed"
  local p
  for p in $pkgs; do
    case $(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2> /dev/null) in
      ""|un*|pn*) ;;
      *) echo "$p" ;;
    esac
  done
}
purge() {
  # shellcheck disable=SC2046
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -q -o DPkg::Lock::Timeout=600 $(installed)
}

if [ "${HP_DEB_INSIDE:-}" = 1 ]; then
  # --- 3. inside the mount namespace ---
  mount -t tmpfs -o mode=755 hp-deb-empty-usr-local /usr/local || { fail=1; finish; }
  trap 'rm -f "$out"; [ -z "$(installed)" ] || purge > /dev/null 2>&1' EXIT
  check "apt-get install the .debs (offline)" unshare -n env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 "$work"/*.deb
  check "$pkgs: installed" sh -c "for p in $pkgs; do
      dpkg-query -W -f='\${db:Status-Abbrev}\n' \$p | grep -q '^ii' || { echo \"\$p not installed\"; exit 1; }
    done"
  # dpkg -L starts each list with "/.", the root, which every package has.
  for p in $pkgs; do dpkg -L "$p"; done 2> /dev/null | grep -vx '/\.' | sort -u > "$work/files.txt"
  echo "# the packages hold $(wc -l < "$work/files.txt") paths (build/deb/files.txt)"

  check "a program built with cc \$(pkg-config --cflags --libs libhp) runs on $libdir/libhp.so.1" sh -c "
    test \"\$(pkg-config --variable=libdir libhp)\" = '$libdir' &&
    cc -std=c11 -Wall -Werror '$root/examples/plugin/consumer.c' \$(pkg-config --cflags --libs libhp) \
      -o '$work/consumer' && '$work/consumer' &&
    lib=\$(ldd '$work/consumer' | sed -n 's/.*libhp\.so\.1 => \([^ ]*\).*/\1/p') &&
    test \"\$(readlink -f \"\$lib\")\" = \"\$(readlink -f '$libdir/libhp.so.1')\""
  check "/usr/bin/hpctl status loads the packaged plugins from $libdir/hp/backends" sh -c "
    /usr/bin/hpctl status && /usr/bin/hpctl status --json | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
paths = {b[\"name\"]: b[\"path\"] for b in d[\"backends\"]}
for name in (\"hugetlbfs\", \"thp-madvise\", \"anon-orders\"):
    assert paths.get(name) == sys.argv[1] + \"/\" + name + \".so\", (name, paths)
assert \"fallback\" in paths, paths' '$libdir/hp/backends'"
  check "/usr/bin/python3: import hp, hp.numpy from python3-hp on the packaged libhp" \
    env -u PYTHONPATH -u HP_LIBRARY -u HP_BACKEND_DIR -u LD_LIBRARY_PATH /usr/bin/python3 -c '
import os, sys, numpy, hp, hp.numpy
assert hp.__file__ == "/usr/lib/python3/dist-packages/hp/__init__.py", hp.__file__
lib = hp.status()["library"]
assert os.path.realpath(lib) == os.path.realpath(sys.argv[1]), lib
hp.numpy.install(min_size=1 << 20)
a = numpy.zeros(4 << 20)
print(hp.info(a).backend, hp.numpy.stats())' "$libdir/libhp.so.1"
  check "/usr/bin/python3 -m hp prints the status table" sh -c \
    "env -u PYTHONPATH -u HP_LIBRARY /usr/bin/python3 -m hp | grep -E '^fallback +base +yes'"
  check "/usr/bin/hpctl run -- true" /usr/bin/hpctl run -- true
  check "hpctl run preloads $libdir/libhp-malloc.so" \
    /usr/bin/hpctl run -- grep -q " $libdir/libhp-malloc.so\$" /proc/self/maps
  check "man hpctl, man 3 hp_free (a link to hp_alloc(3)), man 7 libhp-backend" sh -c "
    test \"\$(man -w hpctl)\" = /usr/share/man/man1/hpctl.1.gz &&
    MANWIDTH=80 man 3 hp_free 2> /dev/null | grep -q 'hp_realloc(NULL, n, f)' &&
    MANWIDTH=80 man 7 libhp-backend 2> /dev/null | grep -q hp_backend_entry_v2"

  check "apt-get purge $pkgs" purge
  check "no package left in dpkg's database (not even config-files)" test -z "$(installed)"
  # Every file and symlink the packages held is gone, and every directory
  # that no other package owns (hp/backends, include/hp, the Python
  # package with its byte code, ...).
  check "nothing of theirs left on disk" sh -c "
    while read -r f; do
      if [ -d \"\$f\" ] && [ ! -L \"\$f\" ]; then
        dpkg -S \"\$f\" > /dev/null 2>&1 || echo \"directory left: \$f\"
      elif [ -e \"\$f\" ] || [ -L \"\$f\" ]; then
        echo \"file left: \$f\"
      fi
    done < '$work/files.txt' | grep . && exit 1; exit 0"
  finish
fi

# --- 1. build ---
version=$(sed -n '1s/^libhp (\([^)]*\)).*/\1/p' debian/changelog)
src=$work/libhp-$version
rm -rf "$work" && mkdir -p "$src"
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$src"
else
  tar --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C "$src"
fi
start=$(date +%s)
check "dpkg-buildpackage -us -uc -b, offline (build/deb/build.log)" sh -c \
  "cd '$src' && unshare -n dpkg-buildpackage -us -uc -b > '$work/build.log' 2>&1 || { tail -40 '$work/build.log'; exit 1; }"
echo "# built in $(( $(date +%s) - start )) s: $(cd "$work" && echo ./*.deb)"
[ "$fail" -eq 0 ] || finish

# --- 2. lintian ---
lintian --fail-on error "$work"/libhp_"${version}"_*.changes > "$work/lintian.log" 2>&1
rc=$?
sed 's/^/# lintian: /' "$work/lintian.log"
check "lintian: no errors (build/deb/lintian.log)" test "$rc" -eq 0

# --- preflight: nothing of libhp in /usr that dpkg does not own ---
left=$(installed)
if [ -n "$left" ]; then
  echo "# purging packages an earlier run left: $left"
  purge > /dev/null 2>&1
fi
check "no libhp file under /usr outside dpkg (the packages would overwrite it)" sh -c "
  for f in $libdir/libhp.so.1 $libdir/libhp.so $libdir/libhp-malloc.so $libdir/hp \
           $libdir/pkgconfig/libhp.pc /usr/bin/hpctl /usr/include/hp.h /usr/include/hp \
           /usr/lib/python3/dist-packages/hp; do
    [ -e \"\$f\" ] || [ -L \"\$f\" ] || continue
    dpkg -S \"\$f\" > /dev/null 2>&1 || { echo \"\$f exists and no package owns it\"; exit 1; }
  done"
[ "$fail" -eq 0 ] || finish

# The quickstart's install in /usr/local, if any, before and after.
local_files() {
  find /usr/local/bin/hpctl /usr/local/include/hp.h /usr/local/lib/"$triplet"/libhp* \
       /usr/local/lib/"$triplet"/hp /usr/local/lib/python3*/dist-packages/hp \
       -type f 2> /dev/null | sort | xargs -r md5sum
}
before=$(local_files)

# --- 3. install, use, purge: this script again, in the namespace ---
HP_DEB_INSIDE=1 unshare -m --propagation private bash "$0"
inside=$?

# --- 4. outside again ---
ldconfig
check "the quickstart's files in /usr/local are unchanged ($(echo "$before" | grep -c .) files)" \
  test "$before" = "$(local_files)"
if [ -e "/usr/local/lib/$triplet/libhp.so.1" ]; then
  check "ld.so.cache lists /usr/local's libhp again" sh -c \
    "ldconfig -p | grep -q ' => /usr/local/lib/$triplet/libhp.so.1\$'"
fi
[ "$inside" -eq 0 ] || echo "90-deb: the checks of the installed packages failed (above)"
echo "90-deb: $pass passed, $fail failed"
echo "$pass $fail" >> "$results"
[ "$fail" -eq 0 ] && [ "$inside" -eq 0 ]
