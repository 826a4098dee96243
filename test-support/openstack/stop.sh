#!/usr/bin/env bash
# Stops every service start.sh started from <workdir> (uWSGI masters with their workers) and
# waits until all are gone. Keeps the workdir's logs and the databases for post-mortem
# reading; the next start.sh clears both. Exits 0 when nothing is running.
#   usage: stop.sh <workdir>
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 <workdir>" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
workdir=$(cd "$1" 2>/dev/null && pwd) || exit 0
[[ -f $workdir/ports ]] || exit 0
exec bash "$here/ctl.sh" "$workdir" stop
