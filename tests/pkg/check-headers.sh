#!/bin/sh
# Each public header compiles alone, as C11 -pedantic -Werror and as C++.
# usage: check-headers.sh INCLUDE_DIR CC CXX
set -u
inc=$1 cc=$2 cxx=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 fail=0
echo "1..$(( $(cd "$inc" && ls hp.h hp/*.h | wc -l) * 2 ))"
for h in $(cd "$inc" && ls hp.h hp/*.h); do
  printf '#include <%s>\nint hp_header_test_dummy;\n' "$h" > "$tmp/t.c"
  cp "$tmp/t.c" "$tmp/t.cc"
  n=$((n + 1))
  if $cc -std=c11 -pedantic -Wall -Wextra -Werror -I"$inc" -c "$tmp/t.c" -o "$tmp/t.o" 2>"$tmp/err"; then
    echo "ok $n - $h as C11"
  else
    echo "not ok $n - $h as C11"; sed 's/^/# /' "$tmp/err"; fail=1
  fi
  n=$((n + 1))
  if $cxx -std=c++11 -pedantic -Wall -Wextra -Werror -I"$inc" -c "$tmp/t.cc" -o "$tmp/t.o" 2>"$tmp/err"; then
    echo "ok $n - $h as C++11"
  else
    echo "not ok $n - $h as C++11"; sed 's/^/# /' "$tmp/err"; fail=1
  fi
done
exit $fail
