#!/bin/sh
# Formatting: every C file of the tree matches .clang-format (clang-format --dry-run -Werror),
# except the files named in .ci/format-legacy.txt, which predate the check. That list only
# shrinks: a new file is checked from its first commit, and an old one leaves the list on the
# commit that reformats it alone (a mass reformat would bury the history of every line).
# Usage: check_format.sh TOP
top=${1:-.}
cd "$top" || exit 2
command -v clang-format >/dev/null 2>&1 ||
  { echo "format: clang-format is not installed (deploy/debian-packages.txt lists it)"; exit 1; }
legacy=.ci/format-legacy.txt
[ -f "$legacy" ] || { echo "format: $legacy is missing"; exit 1; }
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' -not -path './build*' | sed 's|^\./||')
bad=0 n=0
for f in $files; do
  grep -qxF "$f" "$legacy" && continue
  n=$((n + 1))
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 ||
    { echo "format: $f differs from .clang-format (clang-format -i $f)"; bad=1; }
done
stale=$(grep -v '^#' "$legacy" | while read -r f; do [ -z "$f" ] || [ -f "$f" ] || echo "$f"; done)
[ -n "$stale" ] && { echo "format: $legacy names files that are gone:"; echo "$stale" | sed 's/^/  /'; bad=1; }
[ $bad -eq 0 ] && echo "format: $n files match .clang-format"
exit $bad
