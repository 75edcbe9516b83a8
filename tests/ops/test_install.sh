#!/bin/sh
# 'meson install --destdir' for --prefix=/usr and for the default prefix, each into its own
# temporary root: the installed file list must be the one docs/operations.md §1 gives, the
# units must name the installed daemons, and 'systemd-analyze verify --root' must accept the
# installed units with the installed binaries and man pages. Nothing outside $TMPDIR is touched.
# Cheap: each prefix gets a small build dir (meson setup, ~3 s) that reuses the programs
# already built in BUILDDIR instead of compiling them again.
# usage: test_install.sh SRCDIR BUILDDIR
set -eu
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# systemd's own directories when the prefix is /usr (docs/operations.md §1).
sd_unitdir=/usr/lib/systemd/system sd_sysusersdir=/usr/lib/sysusers.d
if pkg-config --exists systemd 2>/dev/null; then
    sd_unitdir=$(pkg-config --variable=systemdsystemunitdir systemd)
    sd_sysusersdir=$(pkg-config --variable=sysusersdir systemd)
fi
case $sd_unitdir in
    /lib/systemd/system|/usr/lib/systemd/system) ;;
    *) echo "FAIL systemd.pc gives an unexpected unit directory '$sd_unitdir'"; exit 1 ;;
esac

expected() { # PREFIX UNITDIR SYSUSERSDIR: the documented install, one file a line, sorted
    cat <<EOF | sort
$1/bin/fedkern
$1/bin/fedkern-faultproxy
$1/sbin/fedkern-server
$1/sbin/fedkern-client
$2/fedkern-server.service
$2/fedkern-client@.service
$3/fedkern.conf
$1/share/man/man1/fedkern.1
$1/share/man/man1/fedkern-faultproxy.1
$1/share/man/man5/fedkern.conf.5
$1/share/man/man8/fedkern-server.8
$1/share/man/man8/fedkern-client.8
$1/share/doc/fedkern-server/examples/server.conf
$1/share/doc/fedkern-server/examples/grafana-fedkern.json
$1/share/doc/fedkern-client/examples/client.conf
$1/share/doc/fedkern/examples/job-fedrf-tca.conf
$1/share/doc/fedkern/examples/job-fedgrem.conf
EOF
}

install_prefix() { # NAME PREFIX|'' : meson install into $tmp/root-NAME; prints nothing on success
    name=$1 b=$tmp/b-$1
    set -- ${2:+"--prefix=$2"}
    if ! meson setup "$b" "$src" -Dtests=false "$@" >"$tmp/setup.log" 2>&1; then
        cat "$tmp/setup.log"; echo "FAIL meson setup $*"; return 1
    fi
    # Programs: the build dir's own outputs, copied from BUILDDIR (same relative paths).
    meson introspect --installed "$b" | python3 -c '
import json, sys, os, shutil
b, build = sys.argv[1], sys.argv[2]
for f in json.load(sys.stdin):
    if f.startswith(b + "/") and not os.path.exists(f):
        shutil.copy2(os.path.join(build, os.path.relpath(f, b)), f)
' "$b" "$build" || { echo "FAIL copying the built programs from $build"; return 1; }
    if ! meson install -C "$b" --no-rebuild --destdir "$tmp/root-$name" >"$tmp/install.log" 2>&1; then
        cat "$tmp/install.log"; echo "FAIL meson install $*"; return 1
    fi
}

verify_units() { # ROOT PREFIX UNITDIR: systemd-analyze verify on the installed units
    root=$1
    for u in fedkern-server.service fedkern-client@.service; do
        if grep -q "^ExecStart=$2/sbin/fedkern-" "$root$3/$u" && ! grep -q '@SBINDIR@' "$root$3/$u"; then
            echo "ok   $u ExecStart= is $2/sbin/..."
        else
            echo "FAIL $u ExecStart= does not name $2/sbin"; grep '^ExecStart=' "$root$3/$u"; fail=1
        fi
    done
    if ! command -v systemd-analyze >/dev/null 2>&1; then
        echo "SKIP systemd-analyze verify: systemd-analyze not installed (Debian package 'systemd')"
        return
    fi
    # A copy of the installed tree plus what the units need from the OS: the targets their
    # default dependencies pull in, /bin/kill (ExecReload=). --root makes systemd resolve
    # ExecStart= and the unit search path inside it; MANPATH lets it find the installed pages.
    v=$tmp/verify
    rm -rf "$v"; cp -a "$root" "$v"
    mkdir -p "$v/etc/systemd/system" "$v/usr/bin"
    for t in sysinit.target basic.target shutdown.target network-online.target; do
        f=$(systemd-analyze unit-paths | while read -r d; do [ -f "$d/$t" ] && echo "$d/$t" && break; done)
        cp "$f" "$v/etc/systemd/system/" || { echo "FAIL host has no $t to verify against"; fail=1; return; }
    done
    [ -e "$v/bin" ] || ln -s usr/bin "$v/bin"
    cp /bin/kill "$v/usr/bin/kill" || { echo "FAIL host has no /bin/kill (Debian procps) to verify ExecReload="; fail=1; return; }
    if out=$(MANPATH="$v$2/share/man" timeout 120 systemd-analyze verify --root="$v" \
            fedkern-server.service fedkern-client@hospital-a.service 2>&1) && [ -z "$out" ]; then
        echo "ok   systemd-analyze verify --root: fedkern-server.service fedkern-client@hospital-a.service"
    else
        echo "FAIL systemd-analyze verify --root"; echo "$out"; fail=1
    fi
}

for case in usr:/usr default:; do
    name=${case%%:*} prefix=${case#*:}
    if ! install_prefix "$name" "$prefix"; then fail=1; continue; fi
    root=$tmp/root-$name
    p=${prefix:-/usr/local}
    if [ "$name" = usr ]; then unitdir=$sd_unitdir sysusersdir=$sd_sysusersdir
    else unitdir=$p/lib/systemd/system sysusersdir=$p/lib/sysusers.d; fi
    expected "$p" "$unitdir" "$sysusersdir" >"$tmp/want"
    (cd "$root" && find . ! -type d | sed 's|^\.||' | sort) >"$tmp/got"
    if diff -u "$tmp/want" "$tmp/got" >"$tmp/diff"; then
        echo "ok   prefix ${prefix:-default ($p)}: the $(wc -l <"$tmp/got") documented files, nothing else:"
        sed 's/^/       /' "$tmp/got"
    else
        echo "FAIL prefix ${prefix:-default ($p)}: installed files differ from docs/operations.md §1 (- expected, + installed)"
        cat "$tmp/diff"; fail=1
    fi
    for x in "$p/bin/fedkern" "$p/sbin/fedkern-server" "$p/sbin/fedkern-client"; do
        [ -x "$root$x" ] || { echo "FAIL $x not executable"; fail=1; }
    done
    "$root$p/sbin/fedkern-server" --version | grep -q '^fedkern-server ' || { echo "FAIL installed fedkern-server --version"; fail=1; }
    verify_units "$root" "$p" "$unitdir"
done
if [ $fail -eq 0 ] && ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "SKIP: file lists ok, units not verified (no systemd-analyze)"; exit 77
fi
exit $fail
