#!/usr/bin/env bash
# Install what fedkern needs (Debian bookworm, as root) and build it into ./build.
# Idempotent: installs only missing packages and rebuilds only what changed.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

missing=()
while read -r pkg; do
  case "$pkg" in ''|'#'*) continue ;; esac
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done < deploy/debian-packages.txt
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: missing Debian packages: ${missing[*]}" >&2
    echo "bootstrap: run as root, or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "bootstrap: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

builddir=${FK_BUILDDIR:-build}
if [ ! -f "$builddir/build.ninja" ]; then
  meson setup "$builddir" --buildtype=release -Db_ndebug=false >/dev/null
fi
if ! ninja -C "$builddir" >"$builddir/bootstrap-ninja.log" 2>&1; then
  cat "$builddir/bootstrap-ninja.log" >&2
  echo "bootstrap: build failed" >&2
  exit 1
fi
