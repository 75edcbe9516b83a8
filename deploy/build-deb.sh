#!/usr/bin/env bash
# Build the Debian packages fedkern-server, fedkern-client and fedkern (debian/) with
# 'dpkg-buildpackage -us -uc -b' and put the .deb files in OUTDIR (default: ./deb).
# Builds in a temporary copy of the source tree, so neither the tree nor its parent
# directory (where dpkg-buildpackage writes) gets build products.
# Needs the Build-Depends of debian/control plus dpkg-dev and debhelper; run as root it
# installs what is missing (apt-get), like deploy/bootstrap.sh.
# usage: deploy/build-deb.sh [OUTDIR]
# env: FK_DEB_JOBS (parallel jobs, default nproc); FK_DEB_NO_INSTALL=1: exit 3 if a package
# is missing instead of installing it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$top/deb}" && cd "${1:-$top/deb}" && pwd)

# Build tools and the Build-Depends (without version constraints) that are not installed.
need=(dpkg-dev debhelper)
while read -r dep; do need+=("$dep"); done < <(
  sed -n '/^Build-Depends:/,/^[A-Z]/p' "$top/debian/control" | sed '$d;s/^Build-Depends://' \
    | tr ',' '\n' | sed 's/(.*)//;s/|.*//;s/[[:space:]]//g' | grep -v '^$')
missing=()
for pkg in "${need[@]}"; do
  case $pkg in debhelper-compat) pkg=debhelper ;; esac
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ -n "${FK_DEB_NO_INSTALL:-}" ]; then # tests: never change the system
    echo "build-deb: missing Debian packages: ${missing[*]}" >&2
    exit 3
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "build-deb: missing Debian packages: ${missing[*]} (sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "build-deb: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The source tree without build directories, VCS data or earlier packages: in a git checkout
# the tracked and untracked-but-not-ignored files (so uncommitted edits count), else all
# but the usual build products.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/fedkern"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$top" && git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do
     [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done) \
    | tar -C "$top" --null -T - -cf - | tar -C "$work/fedkern" -xf -
else
  tar -C "$top" --exclude='./build*' --exclude='./.git' --exclude='./deb' --exclude='./obj-*' \
    --exclude='./fedkern-demo' --exclude='*.o' --exclude='__pycache__' -cf - . | tar -C "$work/fedkern" -xf -
fi

jobs=${FK_DEB_JOBS:-$(nproc)}
log=$work/dpkg-buildpackage.log
# nocheck: the project's suites test the programs; noddebs: no -dbgsym packages (faster).
if ! (cd "$work/fedkern" && DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-} nocheck noddebs parallel=$jobs" \
        dpkg-buildpackage -us -uc -b >"$log" 2>&1); then
  tail -n 60 "$log" >&2
  echo "build-deb: dpkg-buildpackage failed" >&2
  exit 1
fi
cp "$work"/*.deb "$work"/*.buildinfo "$work"/*.changes "$out/"
cp "$log" "$out/"
ls "$out"/*.deb
