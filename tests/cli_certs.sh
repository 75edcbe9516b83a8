#!/bin/sh
# fedkern certs end to end: exit codes, file modes, and verification of the
# issued certificates by the openssl tool (an independent verifier).
set -u
fk=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
umask 022
"$fk" certs init --dir "$dir/pki" >/dev/null || fail "init"
"$fk" certs issue --dir "$dir/pki" --server localhost --ip 127.0.0.1,::1 --dns fk.test >/dev/null || fail "server"
"$fk" certs issue --dir "$dir/pki" --client site-a --days 10 >/dev/null || fail "client"
"$fk" certs issue --dir "$dir/pki" --admin ops --json | grep -q '"key":"' || fail "admin --json"
for k in ca server-localhost client-site-a admin-ops; do
  [ "$(stat -c %a "$dir/pki/$k.key")" = 600 ] || fail "$k.key mode"
done
[ "$(stat -c %a "$dir/pki")" = 700 ] || fail "dir mode"
openssl verify -CAfile "$dir/pki/ca.pem" -purpose sslserver "$dir/pki/server-localhost.pem" >/dev/null || fail "verify server"
openssl verify -CAfile "$dir/pki/ca.pem" -purpose sslclient "$dir/pki/client-site-a.pem" >/dev/null || fail "verify client"
openssl x509 -in "$dir/pki/admin-ops.pem" -noout -ext subjectAltName | grep -q "urn:fedkern:admin:ops" || fail "admin SAN"
openssl x509 -in "$dir/pki/server-localhost.pem" -noout -checkip 127.0.0.1 | grep -q "does match" || fail "server IP"
# refusals: existing files, bad names, usage errors
"$fk" certs issue --dir "$dir/pki" --client site-a 2>/dev/null; [ $? = 1 ] || fail "overwrite not refused"
"$fk" certs issue --dir "$dir/pki" --client ../x 2>/dev/null; [ $? = 1 ] || fail "bad name not refused"
"$fk" certs issue --dir "$dir/pki" 2>/dev/null; [ $? = 2 ] || fail "missing role not a usage error"
"$fk" certs issue --dir "$dir/pki" --client b --ip 1.2.3.4 2>/dev/null; [ $? = 2 ] || fail "--ip on client"
"$fk" certs init 2>/dev/null; [ $? = 2 ] || fail "missing --dir"
"$fk" certs --help | grep -q "certs init" || fail "--help"
msg=$("$fk" certs issue --dir "$dir/nope" --client a 2>&1); [ $? = 1 ] || fail "no CA"
echo "$msg" | grep -q "^fedkern certs: .*certs init" || fail "error line: $msg"
echo ok
