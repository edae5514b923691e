#!/usr/bin/env bash
# The whole libhp test suite, as README.md gives it: installs what it needs
# (Debian packages), builds, runs every stage in tools/ci/stages in order,
# and ends with one plain line "N passed, N failed, N skipped".
#
# Each stage is a script that may append "PASSED FAILED [SKIPPED]" lines to
# $HP_RESULTS; a stage that exits non-zero counts as one failure more.
set -u
cd "$(dirname "$0")/../.."
export HP_SRC=$PWD
export HP_RESULTS=$(mktemp /tmp/hp-results.XXXXXX)
trap 'rm -f "$HP_RESULTS"' EXIT
stage_failures=0
for stage in tools/ci/stages/*.sh; do
  name=$(basename "$stage" .sh)
  echo "=== stage $name"
  start=$(date +%s)
  if ! bash "$stage"; then
    echo "=== stage $name FAILED"
    stage_failures=$((stage_failures + 1))
    case "$name" in 0*|1*) break ;; esac   # no deps or no build: nothing else can run
  fi
  echo "=== stage $name took $(( $(date +%s) - start )) s"
done
passed=0 failed=$stage_failures skipped=0
while read -r p f s; do
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + ${s:-0}))
done < "$HP_RESULTS"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
