#!/usr/bin/env bash
# The whole libhp test suite, as README.md gives it: installs what it needs
# (Debian packages), builds, runs every stage in tools/ci/stages in order,
# and ends with one plain line "N passed, N failed, N skipped".
#
# Each stage is a script that may append "PASSED FAILED [SKIPPED]" lines to
# $HP_RESULTS; a stage that exits non-zero counts as one failure more.
# Stages may name what failed in $HP_FAILS, one line each; those lines and
# every stage's time are printed again at the very end, where a log cut in
# the middle still shows them.
set -u
cd "$(dirname "$0")/../.."
export HP_SRC=$PWD
export HP_RESULTS=$(mktemp /tmp/hp-results.XXXXXX)
export HP_FAILS=$(mktemp /tmp/hp-fails.XXXXXX)
trap 'rm -f "$HP_RESULTS" "$HP_FAILS"' EXIT
stage_failures=0
times=
for stage in tools/ci/stages/*.sh; do
  name=$(basename "$stage" .sh)
  echo "=== stage $name"
  start=$(date +%s)
  if ! bash "$stage"; then
    echo "=== stage $name FAILED"
    echo "$name: the stage failed" >> "$HP_FAILS"
    stage_failures=$((stage_failures + 1))
    case "$name" in 0*|1*) break ;; esac   # no deps or no build: nothing else can run
  fi
  echo "=== stage $name took $(( $(date +%s) - start )) s"
  times="$times $name $(( $(date +%s) - start ))s"
done
echo "=== stage times:$times"
if [ -s "$HP_FAILS" ]; then
  echo "=== what failed:"
  cat "$HP_FAILS"
fi
passed=0 failed=$stage_failures skipped=0
while read -r p f s; do
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + ${s:-0}))
done < "$HP_RESULTS"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
