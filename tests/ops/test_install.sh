#!/bin/sh
# 'meson install --destdir' into a temporary directory installs the three programs,
# both systemd units (ExecStart= pointing at the installed sbindir), the sysusers.d
# entry, the example configs and the four man pages.
# usage: test_install.sh BUILDDIR
set -eu
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! meson install -C "$build" --destdir "$tmp" --no-rebuild >"$tmp.log" 2>&1; then
    cat "$tmp.log"; rm -f "$tmp.log"
    echo "FAIL meson install --destdir"
    exit 1
fi
rm -f "$tmp.log"
prefix=$(meson introspect "$build" --buildoptions | python3 -c '
import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(o["prefix"], o["bindir"], o["sbindir"], o["datadir"], o["mandir"])')
set -- $prefix
p=$1 bindir=$2 sbindir=$3 datadir=$4 mandir=$5
abs() { case $1 in /*) echo "$1" ;; *) echo "$p/$1" ;; esac; }
sb=$(abs "$sbindir")
fail=0
want() {
    if [ -e "$tmp$1" ]; then echo "ok   $1"; else echo "FAIL missing $1"; fail=1; fi
}
want "$(abs "$bindir")/fedkern"
want "$sb/fedkern-server"
want "$sb/fedkern-client"
for m in man1/fedkern.1 man5/fedkern.conf.5 man8/fedkern-server.8 man8/fedkern-client.8; do
    want "$(abs "$mandir")/$m"
done
for c in server.conf client.conf job-fedrf-tca.conf job-fedgrem.conf; do
    want "$(abs "$datadir")/doc/fedkern/examples/$c"
done
for u in fedkern-server.service fedkern-client@.service; do
    f=$(find "$tmp" -name "$u" -path '*systemd/system/*' | head -n 1)
    if [ -z "$f" ]; then echo "FAIL unit $u not installed under a systemd/system directory"; fail=1; continue; fi
    echo "ok   ${f#$tmp}"
    if grep -q "^ExecStart=$sb/fedkern-" "$f" && ! grep -q '@SBINDIR@' "$f"; then
        echo "ok   $u ExecStart= is $sb"
    else
        echo "FAIL $u ExecStart= does not name $sb"; fail=1
    fi
done
if find "$tmp" -path '*sysusers.d/fedkern.conf' | grep -q .; then echo "ok   sysusers.d/fedkern.conf"; else echo "FAIL sysusers.d/fedkern.conf"; fail=1; fi
"$tmp$sb/fedkern-server" --version | grep -q '^fedkern-server ' || { echo "FAIL installed fedkern-server --version"; fail=1; }
exit $fail
