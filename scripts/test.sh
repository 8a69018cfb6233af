#!/usr/bin/env bash
# test.sh: run the Go tests against one freshly started test bed, then take
# the bed down whatever happens. `make test` runs it; arguments go to
# `go test` (default: -race -count=1 -timeout 30m ./... ./bench/...; bench/
# is a module of its own, joined by go.work).
#
# Every test package of the run shares the one bed through
# LOCKPROXY_TESTBED (see internal/testbed). The exit status is go test's,
# or 1 when a Go file is not gofmt-formatted.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Unformatted Go fails the run before anything starts (CI runs this).
unformatted=$(gofmt -l . 2>&1) || true
if [[ -n $unformatted ]]; then
	echo "test.sh: gofmt needed (run make fmt):" >&2
	echo "$unformatted" >&2
	exit 1
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/lpbed-test.XXXXXX")
cleanup() {
	scripts/testbed.sh down "$dir" >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "test.sh: starting the test bed in $dir" >&2
scripts/testbed.sh up "$dir" >/dev/null
scripts/testbed.sh status "$dir" >&2
export LOCKPROXY_TESTBED="$dir"

if (($# == 0)); then
	set -- -race -count=1 -timeout 30m ./... ./bench/...
fi
rc=0
go test "$@" || rc=$?
if ((rc != 0)); then
	echo "test.sh: go test failed ($rc); server logs were in $dir (removed now):" >&2
	scripts/testbed.sh status "$dir" >&2 || true
	for f in "$dir"/primary/error.log "$dir"/replica/error.log "$dir"/redis/redis.log; do
		echo "--- tail $f" >&2
		tail -n 15 "$f" >&2 2>/dev/null || true
	done
fi
exit "$rc"
