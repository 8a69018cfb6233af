#!/usr/bin/env bash
# run.sh: the lockproxy demo. Starts (or reuses) a persistent test bed in
# .testbed/, loads scripts/demo-schema.sql into it, and runs
# `bin/lockproxy --config rules.yaml` with the bed's LOCKPROXY_* variables.
# `make run` builds bin/lockproxy and calls this; `make down` stops the bed.
# Arguments are passed to lockproxy after --config rules.yaml.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

scripts/testbed.sh check >/dev/null 2>&1 || scripts/testbed.sh install
scripts/testbed.sh up .testbed >/dev/null
set -a
# shellcheck source=/dev/null
. .testbed/env
set +a

client=$(command -v mariadb || command -v mysql)
"$client" --no-defaults --protocol=socket -S "$LOCKPROXY_PRIMARY_SOCKET" -uroot <scripts/demo-schema.sql

[[ -x bin/lockproxy ]] || {
	echo "run.sh: bin/lockproxy is missing; run: make build" >&2
	exit 1
}

cat <<MSG
lockproxy demo
  servers (make down stops them, make status shows them):
    MariaDB primary  $LOCKPROXY_PRIMARY
    MariaDB replica  $LOCKPROXY_REPLICA
    Redis            $LOCKPROXY_REDIS
  connect through lockproxy:
    DSN      $LOCKPROXY_DB_USER:$LOCKPROXY_DB_PASSWORD@tcp(127.0.0.1:3307)/shop
    client   mariadb -h127.0.0.1 -P3307 -u$LOCKPROXY_DB_USER -p$LOCKPROXY_DB_PASSWORD shop
    metrics  http://127.0.0.1:9307/metrics
  running: bin/lockproxy --config rules.yaml $*

MSG
exec bin/lockproxy --config rules.yaml "$@"
