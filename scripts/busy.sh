#!/usr/bin/env bash
# busy.sh N COMMAND...: runs COMMAND with N CPU-bound processes beside it,
# as on a machine that other work keeps busy, and exits with COMMAND's
# status. The suite must pass so (make test-busy: two of them on two
# cores).
set -euo pipefail
n=${1:?usage: busy.sh N COMMAND...}
shift
pids=()
stop() { [[ ${#pids[@]} -gt 0 ]] && kill "${pids[@]}" 2>/dev/null || true; }
trap stop EXIT
for ((i = 0; i < n; i++)); do
	(while :; do :; done) &
	pids+=($!)
done
echo "busy.sh: $n CPU-bound processes beside: $*" >&2
"$@"
