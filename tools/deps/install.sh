#!/usr/bin/env bash
# Installs the Debian packages libhp needs, from the lists next to this
# script (one package per line, `#` comments):
#   install.sh build [PKG...]   build.txt (+ PKG...): building and installing
#                               every advertised feature (README command 1)
#   install.sh test [PKG...]    build.txt, test.txt (+ PKG...): the test
#                               command's stages (README command 2)
#   install.sh --list LIST      the package names of LIST (build or test)
#   install.sh --versions LIST  "package version" of each installed one
# Installs only what is missing (apt-get install -y --no-install-recommends,
# after apt-get update), so a second run takes well under a second. As root.
set -eu
dir=$(dirname "$0")

names() {   # names LIST: the package names of build (or build + test)
  local files="$dir/build.txt"
  case $1 in
    build) ;;
    test) files="$files $dir/test.txt" ;;
    *) echo "install.sh: unknown list '$1' (build or test)" >&2; exit 2 ;;
  esac
  # shellcheck disable=SC2086
  sed 's/#.*//' $files | tr -s ' \t' '\n' | sed '/^$/d'
}

case ${1:-} in
  --list) names "${2:-}"; exit ;;
  --versions)
    # shellcheck disable=SC2046
    dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Version}\n' $(names "${2:-}") 2>/dev/null |
      awk '$1 == "ii" { print $2, $3 }'
    exit 0 ;;
  build|test) ;;
  *) echo "usage: install.sh build|test [PKG...] | --list LIST | --versions LIST" >&2; exit 2 ;;
esac
list=$1; shift
missing=$(for p in $(names "$list") "$@"; do
  dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || echo "$p"
done | tr '\n' ' ')
if [ -z "${missing// /}" ]; then
  exit 0
fi
echo "installing Debian packages: $missing"
if [ "$(id -u)" != 0 ]; then
  echo "install.sh: not root; as root: apt-get install --no-install-recommends $missing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 $missing
