#!/usr/bin/env bash
# run.sh: reproduce docs/img/lock-wait-quantiles.png (and .csv) and the
# example outputs under docs/examples/ from a real run: a test bed from
# scripts/testbed.sh, a freshly built lockproxy on the bed's Redis, and
# waitplot's contention workload through it.
#
#   docs/tools/waitplot/run.sh [BED_DIR]
#
# BED_DIR (or $LOCKPROXY_TESTBED) names a bed to use, started if needed and
# left running; without one a temporary bed is started and taken down.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"

BED=${1:-${LOCKPROXY_TESTBED:-}}
own_bed=0
if [[ -z $BED ]]; then
	BED=$(mktemp -d /tmp/lockproxy-docs-bed.XXXXXX)
	own_bed=1
fi
scripts/testbed.sh up "$BED" >/dev/null
set -a
# shellcheck disable=SC1091
. "$BED/env"
set +a

WORK=$(mktemp -d /tmp/waitplot.XXXXXX)
pid=
cleanup() {
	if [[ -n $pid ]]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if ((own_bed)); then scripts/testbed.sh down "$BED" >/dev/null || true; fi
	rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
LISTEN=127.0.0.1:$(free_port)
ADMIN=127.0.0.1:$(free_port)
DB=docs_waitplot
CLIENT=$(command -v mariadb || command -v mysql)
"$CLIENT" --protocol=tcp -h 127.0.0.1 -P "${LOCKPROXY_PRIMARY##*:}" -u "$LOCKPROXY_DB_USER" -p"$LOCKPROXY_DB_PASSWORD" \
	-e "CREATE DATABASE IF NOT EXISTS $DB"

cat >"$WORK/rules.yaml" <<YAML
proxy:
  listen: $LISTEN
admin:
  listen: $ADMIN
users:
  - user: $LOCKPROXY_DB_USER
    password: "$LOCKPROXY_DB_PASSWORD"
backends:
  primary: $LOCKPROXY_PRIMARY
locks:
  backend: redis
  redis:
    addrs: [$LOCKPROXY_REDIS]
  ttl: 10s
  wait_timeout: 2s
  slow_wait: 100ms
rules:
  - name: sku-stock
    table: $DB.sku
    key: [sku_id]
    lock: [write, locking_read, read_in_txn]
YAML

go build -o "$WORK/lockproxy" ./cmd/lockproxy
"$WORK/lockproxy" --config "$WORK/rules.yaml" --log-format json >"$WORK/lockproxy.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	curl -fsS "http://$ADMIN/healthz" >/dev/null 2>&1 && break
	sleep 0.1
done

dsn() { echo "$LOCKPROXY_DB_USER:$LOCKPROXY_DB_PASSWORD@tcp($1)/$DB"; }
# waitplot is a module of its own (docs/tools/waitplot/go.mod): run it from there.
(cd docs/tools/waitplot && GOWORK=off go run . -dsn "$(dsn "$LISTEN")" -primary "$(dsn "$LOCKPROXY_PRIMARY")" \
	-admin "http://$ADMIN" -out "$ROOT/docs/img" -examples "$ROOT/docs/examples")

# One wait of 1.5s with a known holder, from the mariadb client: the audit
# line (session, user, client, waited) and the lock backend's line (waiter
# and holder owner ids) it produces.
sql() { "$CLIENT" --protocol=tcp -h 127.0.0.1 -P "${LISTEN##*:}" -u "$LOCKPROXY_DB_USER" -p"$LOCKPROXY_DB_PASSWORD" "$DB" -e "$1"; }
sql "BEGIN; UPDATE sku SET stock = stock - 1 WHERE sku_id = 5; SELECT SLEEP(1.5) INTO @done; COMMIT" &
holder=$!
for _ in $(seq 50); do
	curl -fsS "http://$ADMIN/debug/locks" | grep -q '"key": "docs_waitplot.sku/5"' && break
	sleep 0.05
done
sql "UPDATE sku SET stock = stock - 1 WHERE sku_id = 5"
wait "$holder"
sleep 0.2
grep '"msg":"slow lock wait".*docs_waitplot.sku/5"' "$WORK/lockproxy.log" >docs/examples/slow-wait-pair.log || true

# A few audit lines of the run (slow waits over slow_wait: 100ms), as the
# JSON log writes them.
grep '"logger":"audit"' "$WORK/lockproxy.log" | head -n 3 >docs/examples/audit.log || true
# The lock backend's own line for waits of 1s and more: it names the
# holder (owner instance/session/transaction) the waiter last saw.
grep '"msg":"slow lock wait".*"holder"' "$WORK/lockproxy.log" | head -n 3 >docs/examples/lock-backend-slow-wait.log || true
[[ -s docs/examples/lock-backend-slow-wait.log ]] || rm -f docs/examples/lock-backend-slow-wait.log
echo "wrote docs/img/lock-wait-quantiles.png, docs/img/lock-wait-quantiles.csv and docs/examples/"
