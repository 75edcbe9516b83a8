#!/usr/bin/env bash
# fedkern job: a job file is checked before any connection. Usage: cli_job.sh FEDKERN
set -u
fk=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
# A NUL byte on line 3 used to end the text there silently: refused with the line number.
printf 'method = fedgrem\ndataset = gmm\nclients = a, b\0, c\nR = 3\n' >"$dir/nul.conf"
"$fk" job submit "$dir/nul.conf" --server 127.0.0.1:1 >"$dir/out" 2>"$dir/err"
got=$?
if [ "$got" -eq 0 ] || ! grep -qF "nul.conf line 3: a NUL byte" "$dir/err"; then
  echo "FAIL: NUL byte: exit $got, output: $(cat "$dir/out" "$dir/err")"; fails=$((fails + 1))
fi
if [ "$(wc -l <"$dir/err")" -ne 1 ]; then
  echo "FAIL: NUL byte: error is not one line: $(cat "$dir/err")"; fails=$((fails + 1))
fi
# UTF-16 (what some editors save): NULs from the first line on.
printf 'm\0e\0t\0h\0o\0d\0\n\0' >"$dir/utf16.conf"
"$fk" job submit "$dir/utf16.conf" --server 127.0.0.1:1 >"$dir/out" 2>"$dir/err"
if [ $? -eq 0 ] || ! grep -qF "utf16.conf line 1: a NUL byte" "$dir/err"; then
  echo "FAIL: UTF-16: $(cat "$dir/out" "$dir/err")"; fails=$((fails + 1))
fi
[ "$fails" -eq 0 ] && echo "cli_job: all checks passed"
exit $((fails > 0))
