#!/bin/sh
# The layering rules of docs/architecture.md, checked on every #include of the tree:
#   methods, models, la and data never include net, the daemons, the CLI or the benches;
#   net never includes methods, models, data or la; base and sys include only base (sys: base);
#   the client never includes the server and the server never the client;
#   the CLI reaches a method family only through the registry (common/methods/*.h), except the
#   per-method simulation runners listed below (issue 37: replaced by sim_generic.c in time).
# Usage: check_layering.sh TOP. Prints each violation; exit 1 if there is any.
top=${1:-.}
cd "$top" || exit 2
bad=0
rule() { # rule WHAT DIRS REGEX: no file under DIRS includes a header matching REGEX
  what=$1 dirs=$2 re=$3
  # shellcheck disable=SC2086
  hits=$(grep -rnE "^#include \"($re)" $dirs --include=*.c --include=*.h 2>/dev/null |
    grep -vxFf /dev/fd/3 3<<KNOWN
cli/sim_fedrf_tca.c:13:#include "common/methods/fedrf_tca/fedrf_tca.h"
cli/sim_fedgrem.c:13:#include "common/methods/mixture/gmm_real.h"
cli/sim_fedgrem.c:14:#include "common/methods/mixture/gmm_run.h"
cli/sim_fedgrem_mor.c:9:#include "common/methods/mixture/mor.h"
KNOWN
  )
  if [ -n "$hits" ]; then
    echo "layering: $what:"
    echo "$hits" | sed 's/^/  /'
    bad=1
  fi
}
rule "numerics include the wire or a program" "common/methods common/models common/la common/data" \
  "common/net/|common/sys/|server/|client/|cli/|bench/"
rule "net includes the numerics" common/net "common/methods/|common/models/|common/data/|common/la/|server/|client/|cli/"
rule "base includes another module" common/base "common/(la|data|models|methods|net|sys)/|server/|client/|cli/|bench/"
rule "sys includes more than base" common/sys "common/(la|data|models|methods|net)/|server/|client/|cli/|bench/"
rule "the client includes the server" client "server/"
rule "the server includes the client" server "client/"
rule "the CLI includes a method family's internals" cli "common/methods/[a-z_]+/"
[ $bad -eq 0 ] && echo "layering: all rules hold"
exit $bad
