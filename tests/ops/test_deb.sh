#!/usr/bin/env bash
# The Debian packages: deploy/build-deb.sh builds fedkern-server, fedkern-client and fedkern;
# lintian reports no error; 'dpkg-deb -x' unpacks them into one temporary root (no system-wide
# install) where this checks each package's exact file list, that every shared library a
# program needs is in Depends (${shlibs:Depends}), the unit with its installed binary
# (systemd-analyze verify --root), and the maintainer scripts, run against that root with
# DPKG_ROOT: the fedkern user and /etc/fedkern/tls appear, the server unit is enabled, state
# survives remove and goes on purge (a client's data files stay). systemctl and
# deb-systemd-invoke are stubs on PATH that only log, so no service on this machine is touched.
# usage: test_deb.sh SRCDIR        env: FK_DEB_DIR=DIR reuses .deb files built there
set -uo pipefail
src=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

# 1. Build (about 2 min on 2 cores: a release build of the three programs, no tests).
out=${FK_DEB_DIR:-$tmp/out}
if [ -z "${FK_DEB_DIR:-}" ]; then
    start=$(date +%s)
    FK_DEB_NO_INSTALL=1 "$src/deploy/build-deb.sh" "$out" >"$tmp/build.log" 2>&1
    rc=$?
    if [ $rc -eq 3 ]; then
        echo "SKIP: $(grep 'missing Debian packages' "$tmp/build.log") (deploy/debian-packages.txt lists them)"
        exit 77
    elif [ $rc -ne 0 ]; then
        cat "$tmp/build.log"; echo "FAIL deploy/build-deb.sh"; exit 1
    fi
    ok "deploy/build-deb.sh in $(( $(date +%s) - start )) s"
fi
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
arch=$(dpkg --print-architecture)
deb() { echo "$out/${1}_${version}_$arch.deb"; }
for p in fedkern-server fedkern-client fedkern; do
    [ -f "$(deb $p)" ] || { echo "FAIL $(deb $p) not built"; exit 1; }
done

# 2. lintian: errors fail, the rest is printed.
if command -v lintian >/dev/null 2>&1; then
    lintian --display-info --pedantic "$(deb fedkern-server)" "$(deb fedkern-client)" "$(deb fedkern)" \
        >"$tmp/lintian.log" 2>&1
    sed -i '/running with root privileges/d' "$tmp/lintian.log"
    if grep -q '^E:' "$tmp/lintian.log"; then bad "lintian errors:"; else ok "lintian: no errors"; fi
    sed 's/^/       /' "$tmp/lintian.log"
else
    bad "lintian not installed (Debian package 'lintian')"
fi

# 3. Contents: each package's exact files (directories aside); no file in two packages.
root=$tmp/root
mkdir -p "$root"
expect_files() { # PACKAGE: the files it must ship, sorted
    case $1 in
    fedkern-server) printf '%s\n' /lib/systemd/system/fedkern-server.service \
        /usr/sbin/fedkern-server /usr/lib/sysusers.d/fedkern-server.conf \
        /usr/share/man/man8/fedkern-server.8.gz /usr/share/doc/fedkern-server/examples/server.conf \
        /usr/share/doc/fedkern-server/examples/grafana-fedkern.json ;;
    fedkern-client) printf '%s\n' '/lib/systemd/system/fedkern-client@.service' \
        /usr/sbin/fedkern-client /usr/lib/sysusers.d/fedkern-client.conf \
        /usr/share/man/man8/fedkern-client.8.gz /usr/share/doc/fedkern-client/examples/client.conf ;;
    fedkern) printf '%s\n' /usr/bin/fedkern /usr/bin/fedkern-faultproxy \
        /usr/share/man/man1/fedkern.1.gz /usr/share/man/man1/fedkern-faultproxy.1.gz \
        /usr/share/man/man5/fedkern.conf.5.gz \
        /usr/share/doc/fedkern/examples/job-fedrf-tca.conf /usr/share/doc/fedkern/examples/job-fedgrem.conf ;;
    esac
    printf '%s\n' "/usr/share/doc/$1/changelog.gz" "/usr/share/doc/$1/copyright"
}
for p in fedkern-server fedkern-client fedkern; do
    expect_files $p | sort >"$tmp/want"
    dpkg-deb -c "$(deb $p)" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\.||' | sort >"$tmp/got"
    if diff -u "$tmp/want" "$tmp/got" >"$tmp/diff"; then
        ok "$p ships exactly: $(tr '\n' ' ' <"$tmp/got")"
    else
        bad "$p contents (- expected, + shipped):"; cat "$tmp/diff"
    fi
    cat "$tmp/got" >>"$tmp/all"
    dpkg-deb -x "$(deb $p)" "$root"
    mkdir -p "$tmp/ctl/$p" && dpkg-deb -e "$(deb $p)" "$tmp/ctl/$p"
done
dup=$(sort "$tmp/all" | uniq -d)
[ -z "$dup" ] && ok "no file in two packages" || bad "files in two packages: $dup"
for p in fedkern-server fedkern-client; do
    listing=$(dpkg-deb -c "$(deb $p)")
    grep -q ' \./etc/fedkern/$' <<<"$listing" && ok "$p owns /etc/fedkern" || bad "$p lacks /etc/fedkern"
done
grep -q '^u fedkern - .* /var/lib/fedkern$' "$root/usr/lib/sysusers.d/fedkern-server.conf" \
    && ok "sysusers.d: system user fedkern, home /var/lib/fedkern" || bad "sysusers.d entry"

# 4. Dependencies: the package of every library a program needs (NEEDED) is in Depends, or
# in the Depends of one of them (libopenblas0 -> libopenblas0-pthread | ...-openmp | ...).
field() { dpkg-deb -f "$(deb "$1")" "$2"; }
names() { tr ',|' '\n\n' | sed 's/(.*//;s/:any//;s/ //g' | grep -v '^$'; }
for pb in fedkern-server:/usr/sbin/fedkern-server fedkern-client:/usr/sbin/fedkern-client \
          fedkern:/usr/bin/fedkern fedkern:/usr/bin/fedkern-faultproxy; do
    p=${pb%%:*} bin=${pb#*:}
    depends=$(field "$p" Depends)
    closure=$(for d in $(names <<<"$depends"); do
        echo "$d"; dpkg-query -W -f='${Depends}\n' "$d" 2>/dev/null | names; done)
    for so in $(objdump -p "$root$bin" | awk '$1 == "NEEDED" {print $2}'); do
        lib=$(ldconfig -p | awk -v so="$so" '$1 == so {print $NF; exit}')
        dpkgpkg=$(dpkg-query -S "$(readlink -f "$lib")" 2>/dev/null | head -n 1 | cut -d: -f1)
        [ -z "$dpkgpkg" ] && dpkgpkg=$(dpkg-query -S "$lib" 2>/dev/null | head -n 1 | cut -d: -f1)
        if [ -z "$dpkgpkg" ]; then bad "$bin needs $so, which no installed package ships"
        elif grep -qx "$dpkgpkg" <<<"$closure"; then :
        else bad "$p: $bin needs $so ($dpkgpkg), not in Depends: $depends"; fi
    done
done
for p in fedkern-server fedkern-client fedkern; do ok "$p Depends: $(field $p Depends)"; done
for p in fedkern-server fedkern-client; do
    field $p Depends | grep -q 'systemd | systemd-standalone-sysusers' \
        && ok "$p depends on a systemd-sysusers" || bad "$p: no systemd-sysusers in Depends"
done
for p in fedkern-client fedkern; do
    field $p Recommends | grep -q 'libmatio' && ok "$p Recommends: $(field $p Recommends)" \
        || bad "$p does not recommend libmatio (dlopen'ed for .mat files)"
done

# 5. The unit as packaged, with the packaged binary: systemd-analyze verify --root.
if command -v systemd-analyze >/dev/null 2>&1; then
    v=$tmp/verify
    cp -a "$root" "$v" && mkdir -p "$v/etc/systemd/system" "$v/usr/bin"
    for t in sysinit.target basic.target shutdown.target network-online.target; do
        for d in /lib/systemd/system /usr/lib/systemd/system; do
            [ -f "$d/$t" ] && cp "$d/$t" "$v/etc/systemd/system/" && break
        done
    done
    [ -e "$v/bin" ] || ln -s usr/bin "$v/bin"
    cp /bin/kill "$v/usr/bin/kill"
    for m in "$v"/usr/share/man/man*/*.gz; do gunzip "$m"; done
    if o=$(MANPATH="$v/usr/share/man" timeout 120 systemd-analyze verify --root="$v" \
            fedkern-server.service fedkern-client@hospital-a.service 2>&1) && [ -z "$o" ]; then
        ok "systemd-analyze verify --root: packaged units and binaries"
    else
        bad "systemd-analyze verify --root"; echo "$o"
    fi
else
    echo "note: systemd-analyze not installed: packaged units not verified"
fi
"$root/usr/sbin/fedkern-server" --version | grep -q '^fedkern-server ' && ok "packaged fedkern-server --version" \
    || bad "packaged fedkern-server --version"

# 6. Maintainer scripts: syntax, the debhelper parts, then a run against the unpacked root.
for p in fedkern-server fedkern-client; do
    for s in preinst postinst prerm postrm; do
        [ -f "$tmp/ctl/$p/$s" ] || continue
        sh -n "$tmp/ctl/$p/$s" || bad "$p $s: sh -n"
        grep -q '#DEBHELPER#' "$tmp/ctl/$p/$s" && bad "$p $s: #DEBHELPER# not substituted"
    done
done
has() { grep -q -- "$3" "$tmp/ctl/$1/$2" && ok "$1 $2: $4" || bad "$1 $2 lacks $4 ($3)"; }
has fedkern-server postinst 'systemd-sysusers .*fedkern-server.conf' "creates the user (dh_installsysusers)"
has fedkern-server postinst "deb-systemd-helper enable 'fedkern-server.service'" "enables the unit"
has fedkern-server postinst "_dh_action=restart" "restarts it on upgrade"
has fedkern-server prerm "deb-systemd-invoke stop 'fedkern-server.service'" "stops it on remove"
has fedkern-server postrm 'rm -rf "${DPKG_ROOT:-}/var/lib/fedkern"' "deletes the state on purge"
has fedkern-client postinst 'systemd-sysusers .*fedkern-client.conf' "creates the user (dh_installsysusers)"
has fedkern-client postinst "try-restart 'fedkern-client@\*.service'" "restarts running instances on upgrade"
has fedkern-client prerm "stop 'fedkern-client@\*.service'" "stops the instances on remove"
[ -e "$tmp/ctl/fedkern/postinst" ] && bad "fedkern (tools) has a postinst" || ok "fedkern (tools): no maintainer scripts"

if [ "$(id -u)" -ne 0 ]; then
    echo "note: not root: maintainer scripts not run (systemd-sysusers --root needs root)"
    exit $fail
fi
# Guard before running them: a command that changes files must name its /etc or /var path
# through DPKG_ROOT, else a regression here would change this machine (rm -rf /var/lib/fedkern).
unsafe=$(grep -nE '^[[:space:]]*(rm|rmdir|find|install|mkdir|chown|chgrp|chmod|ln|mv|cp|touch)[[:space:]].*(/etc|/var)' \
    "$tmp"/ctl/fedkern-*/p*[a-z] | grep -v 'DPKG_ROOT')
if [ -n "$unsafe" ]; then
    bad "maintainer script lines that would touch this machine under DPKG_ROOT (not run):"; echo "$unsafe"
    exit 1
fi
mkdir -p "$tmp/stubs"
for c in systemctl deb-systemd-invoke; do
    printf '#!/bin/sh\necho "%s $*" >>"%s/calls.log"\n' "$c" "$tmp" >"$tmp/stubs/$c"
    chmod +x "$tmp/stubs/$c"
done
mkdir -p "$root/etc" && : >"$root/etc/passwd" && : >"$root/etc/group"
run() { # PACKAGE SCRIPT ARGS...: a maintainer script against $root
    local p=$1 s=$2; shift 2
    if ! DPKG_ROOT=$root DPKG_MAINTSCRIPT_PACKAGE=$p PATH="$tmp/stubs:$PATH" \
            sh "$tmp/ctl/$p/$s" "$@" >"$tmp/script.log" 2>&1; then
        bad "$p $s $*"; cat "$tmp/script.log"
    fi
}
run fedkern-server postinst configure ''
run fedkern-client postinst configure ''
grep -q '^fedkern:x:[0-9]*:[0-9]*:.*:/var/lib/fedkern:/usr/sbin/nologin$' "$root/etc/passwd" \
    && ok "postinst: user $(grep '^fedkern:' "$root/etc/passwd")" || { bad "postinst: no fedkern user"; cat "$root/etc/passwd"; }
gid=$(awk -F: '$1 == "fedkern" {print $3}' "$root/etc/group")
[ "$(stat -c '%a %u %g' "$root/etc/fedkern/tls" 2>/dev/null)" = "750 0 $gid" ] \
    && ok "postinst: /etc/fedkern/tls root:fedkern 0750" || bad "postinst: /etc/fedkern/tls $(stat -c '%a %u %g' "$root/etc/fedkern/tls" 2>&1)"
[ "$(readlink "$root/etc/systemd/system/multi-user.target.wants/fedkern-server.service")" = \
  /lib/systemd/system/fedkern-server.service ] && ok "postinst: fedkern-server.service enabled" \
    || bad "postinst: fedkern-server.service not enabled"

# State and an admin's files, then remove (kept) and purge (state gone, admin's data kept).
mkdir -p "$root/var/lib/fedkern" "$root/var/lib/fedkern-client/hospital-a"
echo db >"$root/var/lib/fedkern/state.db"
echo s >"$root/var/lib/fedkern-client/hospital-a/job-1.state"
echo data >"$root/var/lib/fedkern-client/hospital-a/clinic.csv"
ln -s /lib/systemd/system/fedkern-client@.service \
    "$root/etc/systemd/system/multi-user.target.wants/fedkern-client@hospital-a.service"
for p in fedkern-server fedkern-client; do run $p prerm remove; run $p postrm remove; done
[ -f "$root/var/lib/fedkern/state.db" ] && [ -f "$root/var/lib/fedkern-client/hospital-a/job-1.state" ] \
    && ok "remove keeps the state" || bad "remove deleted state"
for p in fedkern-server fedkern-client; do run $p postrm purge; done
[ ! -e "$root/var/lib/fedkern" ] && ok "purge deletes /var/lib/fedkern" || bad "purge kept /var/lib/fedkern"
[ ! -e "$root/var/lib/fedkern-client/hospital-a/job-1.state" ] && [ -f "$root/var/lib/fedkern-client/hospital-a/clinic.csv" ] \
    && ok "purge deletes the client's job state, keeps its data file" || bad "client purge: $(find "$root/var/lib/fedkern-client")"
[ ! -e "$root/etc/systemd/system/multi-user.target.wants/fedkern-server.service" ] && \
  [ ! -e "$root/etc/systemd/system/multi-user.target.wants/fedkern-client@hospital-a.service" ] \
    && ok "purge removes the enablement symlinks" || bad "purge left enablement symlinks"
[ ! -e "$root/etc/fedkern/tls" ] && ok "purge removes the empty /etc/fedkern/tls" || bad "purge kept empty /etc/fedkern/tls"
echo "stubbed systemctl/deb-systemd-invoke calls (none expected with DPKG_ROOT): $(cat "$tmp/calls.log" 2>/dev/null | tr '\n' ';')"
exit $fail
