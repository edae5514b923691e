#!/bin/sh
# Every rendered man page and .so link opens with `man --warnings -l`,
# without a single warning, at two widths, and says what its NAME promises.
# usage: check-man.sh PAGE...   (TAP output)
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fail=0
for page in "$@"; do
  name=$(basename "$page")
  section=${name##*.}
  mkdir -p "$tmp/man$section"
  cp "$page" "$tmp/man$section/"
done
cd "$tmp" || exit 1
for f in man*/*; do
  name=$(basename "$f")
  for width in 80 120; do
    n=$((n + 1))
    out=$(MANWIDTH=$width man --warnings -l "$f" 2>"$tmp/err")
    err=$(cat "$tmp/err")
    func=${name%.*}
    if [ -z "$err" ] && printf '%s' "$out" | grep -q '^NAME' &&
       printf '%s' "$out" | grep -q -- "$func"; then
      echo "ok $n - $f at $width columns: no warnings, names $func"
    else
      echo "not ok $n - $f at $width columns"
      printf '%s\n' "$err" | sed 's/^/# /' | head -20
      fail=1
    fi
  done
done
echo "1..$n"
exit $fail
