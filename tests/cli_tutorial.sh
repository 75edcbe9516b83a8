#!/bin/sh
# docs/tutorial.md end to end: every `sh run` block of the page runs, in order, with the built
# fedkern, fedkern-server and fedkern-client (daemons on 127.0.0.1, a free port), and prints
# what the page shows under it (tests/tutorial_run.py; bounded, daemons stopped at the end).
# Usage: cli_tutorial.sh TUTORIAL.md FEDKERN FEDKERN-SERVER FEDKERN-CLIENT
set -u
here=$(dirname "$0")
exec /usr/bin/python3 "$here/tutorial_run.py" "$@"
