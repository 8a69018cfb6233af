#!/usr/bin/env bash
# testbed.sh: the real servers lockproxy is tested against.
#
# One bed is a MariaDB primary, a MariaDB replica replicating from it with
# GTID, and a Redis, all under one directory, all bound to 127.0.0.1 on free
# ports chosen at run time (never 3306 or 6379). Nothing outside DIR is used,
# so several beds can run side by side and none depends on system services.
#
#   testbed.sh install            apt-install what is missing (Debian)
#   testbed.sh install-podman     apt-install podman and runc only (TestImage)
#   testbed.sh check              exit 0 if everything `up` needs is installed
#   testbed.sh up DIR             start (or reuse) a bed; print DIR/env
#   testbed.sh down DIR           stop every server of the bed
#   testbed.sh status DIR         say which servers run; exit 1 if any is down
#   testbed.sh env DIR            print DIR/env
#   testbed.sh kill DIR NAME      SIGKILL one server (primary|replica|redis)
#   testbed.sh stop DIR NAME      stop one server cleanly
#   testbed.sh start DIR NAME     start one stopped server on its old port
#   testbed.sh restart DIR NAME   stop (if running) and start one server
#   testbed.sh sentinel DIR       start (or reuse) a Redis Sentinel group in
#                                 DIR/sentinel: a master, 2 replicas, 3 sentinels
#                                 watching it as "lockproxy"; print its env
#   testbed.sh cluster DIR        start (or reuse) a Redis Cluster in DIR/cluster:
#                                 3 masters, 3 replicas; print its env
#   testbed.sh kill-node DIR ADDR SIGKILL the Sentinel or Cluster node on ADDR
#
# `down` stops the Sentinel group and the Cluster of DIR too. Their nodes
# detect a failure in 2 s (down-after-milliseconds, cluster-node-timeout),
# so a killed master is replaced within seconds.
#
# With LOCKPROXY_TESTBED_OWNER_PID set, `up` also starts a watchdog that
# takes the bed down when that process exits (so a crashed test binary
# leaves no servers behind); with LOCKPROXY_TESTBED_EPHEMERAL=1 the
# watchdog then removes DIR too.
#
# LOCKPROXY_TESTBED_PERFORMANCE_SCHEMA=ON at `up` (or `start`, `restart`)
# turns MariaDB's performance_schema on; it is off by default.
set -euo pipefail

SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"

DB_USER=lockproxy_test
DB_PASSWORD=lockproxy-test
TLS_USER=lockproxy_tls # like DB_USER, but MariaDB requires it to use TLS
REPL_USER=lockproxy_repl
REPL_PASSWORD=lockproxy-repl
START_TIMEOUT=60 # seconds a server may take to answer

log() { printf 'testbed: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

# first_cmd prints the first of its arguments that is an executable command.
first_cmd() {
	local c
	for c in "$@"; do
		if command -v "$c" >/dev/null 2>&1; then
			command -v "$c"
			return 0
		fi
	done
	return 1
}

mysqld_bin() { first_cmd mariadbd mysqld /usr/sbin/mariadbd /usr/sbin/mysqld /usr/libexec/mariadbd; }
install_db_bin() { first_cmd mariadb-install-db mysql_install_db /usr/bin/mariadb-install-db; }
client_bin() { first_cmd mariadb mysql; }
tzinfo_bin() { first_cmd mariadb-tzinfo-to-sql mysql_tzinfo_to_sql; }
redis_bin() { first_cmd redis-server /usr/bin/redis-server; }
redis_cli_bin() { first_cmd redis-cli; }

# ---------------------------------------------------------------- install

# missing_packages prints the Debian packages whose programs are missing.
missing_packages() {
	mysqld_bin >/dev/null && install_db_bin >/dev/null || echo mariadb-server
	client_bin >/dev/null || echo mariadb-client
	redis_bin >/dev/null && redis_cli_bin >/dev/null || echo redis-server
	first_cmd sysbench >/dev/null || echo sysbench
	first_cmd promtool >/dev/null || echo prometheus # promtool checks the /metrics exposition in e2e
	first_cmd etcd >/dev/null || echo etcd-server # lockmgr/etcdlock tests start their own etcd
	[[ -x /usr/share/zookeeper/bin/zkServer.sh ]] || echo zookeeper # lockmgr/zklock tests start their own
	first_cmd java >/dev/null || echo default-jre-headless # ZooKeeper runs on it
	[[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import pymysql' 2>/dev/null || echo python3-pymysql
	# PyMySQL needs it for caching_sha2_password's full authentication (RSA)
	[[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import cryptography' 2>/dev/null || echo python3-cryptography
	# The client matrix (proxy/matrix_test.go): each library runs one scenario
	# directly and through lockproxy. java runs it as a single-file source,
	# which needs the JDK's compiler.
	[[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import MySQLdb' 2>/dev/null || echo python3-mysqldb
	[[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import sqlalchemy' 2>/dev/null || echo python3-sqlalchemy
	# The client suites (proxy/clientsuites_test.go) run PyMySQL's own tests
	[[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import pytest' 2>/dev/null || echo python3-pytest
	first_cmd php >/dev/null || echo php-cli
	php -r 'exit(extension_loaded("mysqli") && extension_loaded("pdo_mysql") ? 0 : 1);' 2>/dev/null || echo php-mysql
	[[ -f /usr/share/java/mariadb-java-client.jar ]] || echo libmariadb-java
	first_cmd javac >/dev/null || echo default-jdk-headless
	first_cmd node >/dev/null || echo nodejs
	first_cmd npm >/dev/null || echo npm
	first_cmd setsid >/dev/null || echo util-linux
	first_cmd haproxy /usr/sbin/haproxy >/dev/null || echo haproxy # e2e: instances behind a load balancer
	first_cmd make >/dev/null || echo make
	first_cmd socat >/dev/null || echo socat # bench: the socat relay arm of the overhead scenario
	first_cmd openssl >/dev/null || echo openssl # the bed's TLS certificates
	[[ -d /usr/share/zoneinfo ]] || echo tzdata
	return 0
}

cmd_check() {
	mysqld_bin >/dev/null || die "mariadbd not found (run: $SELF install)"
	install_db_bin >/dev/null || die "mariadb-install-db not found (run: $SELF install)"
	client_bin >/dev/null || die "mariadb client not found (run: $SELF install)"
	redis_bin >/dev/null || die "redis-server not found (run: $SELF install)"
	redis_cli_bin >/dev/null || die "redis-cli not found (run: $SELF install)"
	first_cmd setsid >/dev/null || die "setsid not found (run: $SELF install)"
}

# install_npm_clients installs the client matrix's npm packages (pinned in
# proxy/testdata/clients/package-lock.json) next to its scenario scripts.
install_npm_clients() {
	local dir
	dir="$(dirname "$SELF")/../proxy/testdata/clients"
	[[ -d $dir/node_modules/mysql2 && -d $dir/node_modules/mariadb ]] && return 0
	log "installing the client matrix's npm packages in $dir"
	(cd "$dir" && npm ci --no-audit --no-fund --silent) || die "npm ci failed in $dir"
}

# The client suites' sources (proxy/clientsuites_test.go), pinned by
# SHA-256. PyMySQL's own test suite is in its source, which Debian's archive
# carries as the source package python-pymysql's upstream tarball; its
# binary package and the npm packages of mysql2 and mariadb ship no tests.
PYMYSQL_SUITE_VERSION=1.1.1
PYMYSQL_SUITE_SHA256=a501d7580f3db3738272838d01d31701c14cd3f3db804f798f6f3324ef83821e

# debian_archive_uri prints the URI of the Debian archive apt is
# configured with (nothing before apt-get update).
debian_archive_uri() {
	apt-get indextargets --format '$(REPO_URI)' 'Created-By: Packages' 'Label: Debian' | head -n 1
}

# install_client_suites unpacks PyMySQL's source, tests included, into
# proxy/testdata/suites/pymysql-VERSION, fetched from the Debian archive
# apt is configured with.
install_client_suites() {
	local dir dest uri file tmp
	dir="$(cd "$(dirname "$SELF")/.." && pwd)/proxy/testdata/suites"
	dest="$dir/pymysql-$PYMYSQL_SUITE_VERSION"
	[[ -f $dest/pymysql/tests/base.py ]] && return 0
	command -v apt-get >/dev/null || die "no apt-get to find the Debian archive PyMySQL's source comes from"
	uri="$(debian_archive_uri)"
	if [[ -z $uri ]]; then # apt knows an archive's label once its lists are fetched
		local sudo=()
		((EUID == 0)) || sudo=(sudo -n)
		"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 update -q >&2 || die "apt-get update failed"
		uri="$(debian_archive_uri)"
	fi
	[[ -n $uri ]] || die "no Debian archive among apt's sources"
	file="python-pymysql_${PYMYSQL_SUITE_VERSION}.orig.tar.xz"
	log "fetching PyMySQL $PYMYSQL_SUITE_VERSION's source (its test suite) into $dest"
	mkdir -p "$dir"
	tmp="$(mktemp -d "$dir/.fetch.XXXXXX")"
	chmod 755 "$tmp" # apt's download user writes here when it can
	if ! /usr/lib/apt/apt-helper -q download-file "${uri}pool/main/p/python-pymysql/$file" "$tmp/$file" \
		"SHA256:$PYMYSQL_SUITE_SHA256" >&2; then
		rm -rf "$tmp"
		die "could not fetch $file from the Debian archive"
	fi
	mkdir "$tmp/src"
	tar -xJf "$tmp/$file" -C "$tmp/src" --strip-components=1 || {
		rm -rf "$tmp"
		die "could not unpack $file"
	}
	rm -rf "$dest"
	mv "$tmp/src" "$dest"
	rm -rf "$tmp"
}

# install_client_suites_or_warn is install_client_suites, whose failure
# fails only the tests that run the suites (TestClientSuites says why),
# not the install.
install_client_suites_or_warn() {
	(install_client_suites) || log "warning: the client suites' sources are missing: TestClientSuites fails under CI=true, skips otherwise"
}

cmd_install() {
	install_missing missing_packages
	install_missing missing_podman_packages
	install_npm_clients
	install_client_suites_or_warn
}

# missing_podman_packages prints the Debian packages e2e TestImage (in
# make test and make image-test) needs to run lockproxy's image: podman,
# and runc, which also runs where crun (podman's default) refuses a host
# with cgroup v1 and v2 mounted.
missing_podman_packages() {
	first_cmd podman >/dev/null || echo podman
	first_cmd runc >/dev/null || echo runc
	return 0
}

cmd_install_podman() { install_missing missing_podman_packages; }

# install_missing LISTER: apt-install the packages LISTER prints.
install_missing() {
	local lister=$1 pkgs sudo=() policy=/usr/sbin/policy-rc.d made_policy=0
	mapfile -t pkgs < <("$lister")
	if ((${#pkgs[@]} == 0)); then
		log "everything needed is installed"
		return 0
	fi
	command -v apt-get >/dev/null || die "missing ${pkgs[*]} and no apt-get to install them"
	if ((EUID != 0)); then
		command -v sudo >/dev/null || die "missing ${pkgs[*]}; run as root to install them"
		sudo=(sudo -n)
	fi
	log "installing ${pkgs[*]}"
	# Keep the packages' own services from starting: the bed never uses them.
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
		"${sudo[@]}" chmod 755 "$policy"
		made_policy=1
	fi
	local rc=0
	if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
		"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 update -q || rc=$?
	fi
	if ((rc == 0)); then
		apt_install "${sudo[@]}" -- "${pkgs[@]}" || {
			"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 update -q && apt_install "${sudo[@]}" -- "${pkgs[@]}"
		} || rc=$?
	fi
	if ((made_policy)); then "${sudo[@]}" rm -f "$policy"; fi
	((rc == 0)) || die "apt-get failed ($rc)"
	mapfile -t pkgs < <("$lister")
	((${#pkgs[@]} == 0)) || die "still missing after install: ${pkgs[*]}"
}

# apt_install [SUDO...] -- PKG...
apt_install() {
	local pre=()
	while [[ $1 != -- ]]; do
		pre+=("$1")
		shift
	done
	shift
	"${pre[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "$@"
}

# ---------------------------------------------------------------- paths and ports

# Every server NAME keeps its files in DIR/NAME: port, pid, logs, socket, data.
sdir() { echo "$DIR/$1"; }
port_of() { cat "$DIR/$1/port" 2>/dev/null || true; }
pidfile_of() {
	case $1 in
	redis) echo "$DIR/redis/redis.pid" ;;
	*) echo "$DIR/$1/mysqld.pid" ;;
	esac
}
logfile_of() {
	case $1 in
	redis) echo "$DIR/redis/redis.log" ;;
	*) echo "$DIR/$1/error.log" ;;
	esac
}
sock_of() {
	case $1 in
	redis) echo "$DIR/redis/redis.sock" ;;
	*) echo "$DIR/$1/mysqld.sock" ;;
	esac
}

# port_free PORT: nothing listens on 127.0.0.1:PORT.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pick_port prints a free port below the kernel's ephemeral range that no
# other server of this bed has been given.
pick_port() {
	local p i n taken
	for i in $(seq 500); do
		p=$((20000 + RANDOM % 12000))
		taken=0
		for n in primary replica redis; do
			[[ $(port_of "$n") == "$p" ]] && taken=1
		done
		((taken == 0)) || continue
		if port_free "$p"; then
			echo "$p"
			return 0
		fi
	done
	die "no free port found"
}

# running PID: the process exists and is not a zombie waiting to be reaped.
running() {
	local st
	kill -0 "$1" 2>/dev/null || return 1
	st=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null || true)
	[[ $st != Z && $st != X ]]
}

# pid_of NAME prints the pid of NAME's server if it is running.
pid_of() {
	local f pid cmd
	f=$(pidfile_of "$1")
	[[ -s $f ]] || return 1
	pid=$(tr -dc 0-9 <"$f")
	[[ -n $pid ]] && running "$pid" || return 1
	# The pid must still be our server, not a recycled pid of another bed's.
	cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
	case $1 in
	redis) [[ $cmd == *redis-server*":$(port_of redis)"* ]] || return 1 ;;
	*) [[ $cmd == *"--defaults-file=$DIR/$1/my.cnf"* ]] || return 1 ;;
	esac
	echo "$pid"
}

# answers NAME: the server accepts queries.
answers() {
	local port
	port=$(port_of "$1")
	case $1 in
	redis) [[ $("$(redis_cli_bin)" -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]] ;;
	*) sql_root "$1" -e 'SELECT 1' >/dev/null 2>&1 ;;
	esac
}

alive() { pid_of "$1" >/dev/null && answers "$1"; }

# sql_root NAME ARGS...: the mariadb client as root over NAME's socket.
sql_root() {
	local name=$1
	shift
	"$(client_bin)" --no-defaults --protocol=socket -S "$(sock_of "$name")" -uroot -N -B "$@"
}

line_count() { if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi; }

show_log() {
	local f
	f=$(logfile_of "$1")
	log "last lines of $f:"
	tail -n 25 "$f" >&2 2>/dev/null || true
	f="$(sdir "$1")/stdout.log"
	if [[ -s $f ]]; then
		log "last lines of $f:"
		tail -n 10 "$f" >&2 || true
	fi
}

# ---------------------------------------------------------------- MariaDB

# ensure_tls makes the bed's TLS certificates once: a CA, and a server
# certificate it signed for 127.0.0.1 and localhost that every server of
# the bed presents (MariaDB with ssl-*, Redis with tls-*).
ensure_tls() {
	local t="$DIR/tls"
	[[ -s $t/server.pem ]] && return 0
	first_cmd openssl >/dev/null || die "openssl not found (run: $SELF install)"
	mkdir -p "$t"
	(
		cd "$t"
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
			-subj /CN=lockproxy-testbed-ca -keyout ca-key.pem -out ca.pem
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
			-subj /CN=127.0.0.1 -keyout server-key.pem -out server.csr
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
		openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 \
			-extfile server.ext -out server.pem
	) >/dev/null 2>&1 || die "making the bed's TLS certificates failed"
}

write_mysql_cnf() {
	local name=$1 id=2 d
	d=$(sdir "$name")
	[[ $name == primary ]] && id=1
	cat >"$d/my.cnf" <<EOF
# Written by scripts/testbed.sh; rewritten on every start.
[mysqld]
user=root
datadir=$d/data
socket=$d/mysqld.sock
pid-file=$d/mysqld.pid
log-error=$d/error.log
tmpdir=$d/tmp
port=$(port_of "$name")
bind-address=127.0.0.1
skip-name-resolve
server-id=$id
log-bin=binlog
relay-log=relay-bin
log-slave-updates=1
binlog-format=ROW
gtid-strict-mode=1
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
max-connections=1000
max-allowed-packet=64M
performance-schema=${LOCKPROXY_TESTBED_PERFORMANCE_SCHEMA:-OFF}
innodb-buffer-pool-size=64M
innodb-log-file-size=16M
innodb-flush-log-at-trx-commit=2
innodb-doublewrite=0
innodb-use-native-aio=0
sync-binlog=0
binlog-expire-logs-seconds=3600
slave-net-timeout=10
loose-feedback=OFF
plugin-load-add=auth_ed25519
EOF
	[[ $name == replica ]] && echo "read-only=1" >>"$d/my.cnf"
	if [[ -s $DIR/tls/server.pem ]]; then
		printf 'ssl-ca=%s\nssl-cert=%s\nssl-key=%s\n' "$DIR/tls/ca.pem" "$DIR/tls/server.pem" "$DIR/tls/server-key.pem" >>"$d/my.cnf"
	fi
	return 0
}

# install_datadir DATA TMP LOG: a new, empty MariaDB data directory.
install_datadir() {
	mkdir -p "$2"
	"$(install_db_bin)" --no-defaults --datadir="$1" --tmpdir="$2" --user=root \
		--auth-root-authentication-method=normal --skip-test-db \
		--innodb-log-file-size=16M >"$3" 2>&1 || {
		tail -n 20 "$3" >&2
		log "mariadb-install-db failed (log: $3)"
		return 1
	}
}

# template_dir prints where the data directory template for this mariadbd
# is cached: install-db is slow on a busy machine, copying is not.
template_dir() {
	local cache key
	cache=${LOCKPROXY_TESTBED_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/lockproxy-testbed}
	key=$("$(mysqld_bin)" --version | cksum | cut -d' ' -f1)
	echo "$cache/datadir-v1-$key"
}

# ensure_template prints the path of a cached, cleanly shut down data
# directory with the system tables and the named time zones loaded,
# building it on first use. Concurrent builders race harmlessly: the first
# rename wins. It fails (and up falls back to install-db) if the cache is
# not writable.
ensure_template() {
	local t b pid i
	t=$(template_dir)
	if [[ -e $t/ready ]]; then
		echo "$t"
		return 0
	fi
	mkdir -p "$(dirname "$t")" 2>/dev/null || return 1
	b=$(mktemp -d "$(dirname "$t")/build.XXXXXX") || return 1
	install_datadir "$b/data" "$b/tmp" "$b/install.log" || {
		rm -rf "$b"
		return 1
	}
	setsid "$(mysqld_bin)" --no-defaults --user=root --datadir="$b/data" --tmpdir="$b/tmp" \
		--socket="$b/s.sock" --pid-file="$b/pid" --log-error="$b/error.log" --skip-networking \
		--innodb-log-file-size=16M --innodb-buffer-pool-size=64M --innodb-use-native-aio=0 \
		--performance-schema=OFF </dev/null >>"$b/stdout.log" 2>&1 &
	pid=$!
	for ((i = 0; i < START_TIMEOUT * 10; i++)); do
		"$(client_bin)" --no-defaults --protocol=socket -S "$b/s.sock" -uroot -e 'SELECT 1' >/dev/null 2>&1 && break
		running "$pid" || break
		sleep 0.1
	done
	if [[ -d /usr/share/zoneinfo ]] && tzinfo_bin >/dev/null; then
		"$(tzinfo_bin)" --skip-write-binlog /usr/share/zoneinfo 2>/dev/null |
			"$(client_bin)" --no-defaults --protocol=socket -S "$b/s.sock" -uroot mysql >/dev/null 2>&1 &&
			touch "$b/data/.timezones"
	fi
	kill -TERM "$pid" 2>/dev/null || true
	while running "$pid"; do sleep 0.1; done
	if [[ ! -e $b/data/.timezones ]] || ! grep -q 'Shutdown complete' "$b/error.log"; then
		log "building the data directory template failed; see $b/error.log"
		tail -n 10 "$b/error.log" >&2 || true
		rm -rf "$b"
		return 1
	fi
	rm -f "$b/data/.timezones"
	rm -rf "$b/tmp" "$b/s.sock" "$b/pid"
	touch "$b/ready"
	mv -T "$b" "$t" 2>/dev/null || rm -rf "$b"
	[[ -e $t/ready ]] && echo "$t"
}

# init_mysql NAME TEMPLATE creates NAME's data directory once: a copy of
# TEMPLATE if given, else a fresh install-db (without time zones yet).
init_mysql() {
	local d
	d=$(sdir "$1")
	[[ -d $d/data/mysql ]] && return 0
	rm -rf "$d/data"
	mkdir -p "$d/tmp"
	if [[ -n $2 ]] && cp -a "$2/data" "$d/data"; then
		touch "$d/timezones-loaded"
		return 0
	fi
	rm -rf "$d/data"
	install_datadir "$d/data" "$d/tmp" "$d/install.log" || die "$1: mariadb-install-db failed"
}

# launch_mysql NAME starts mariadbd in its own session and waits until it
# answers. Exit status 2 means the port was taken.
launch_mysql() {
	local name=$1 d lines i pid
	d=$(sdir "$name")
	mkdir -p "$d/tmp"
	write_mysql_cnf "$name"
	lines=$(line_count "$d/error.log")
	rm -f "$d/mysqld.pid"
	# Without job control the background child is no process group leader,
	# so setsid execs in place and $! is the server itself.
	setsid "$(mysqld_bin)" --defaults-file="$d/my.cnf" </dev/null >>"$d/stdout.log" 2>&1 &
	pid=$!
	for ((i = 0; i < START_TIMEOUT * 10; i++)); do
		if pid_of "$name" >/dev/null && answers "$name"; then
			return 0
		fi
		if ((i > 20)) && ! running "$pid" && ! pid_of "$name" >/dev/null; then
			break
		fi
		sleep 0.1
	done
	if tail -n +"$((lines + 1))" "$d/error.log" 2>/dev/null | grep -q 'Address already in use'; then
		return 2
	fi
	show_log "$name"
	log "$name: mariadbd did not come up"
	return 1
}

# ---------------------------------------------------------------- Redis

launch_redis() {
	local d i lines pid
	d=$(sdir redis)
	mkdir -p "$d"
	lines=$(line_count "$d/redis.log")
	rm -f "$d/redis.pid"
	setsid "$(redis_bin)" --port "$(port_of redis)" --bind 127.0.0.1 \
		--save '' --appendonly no --daemonize no \
		--pidfile "$d/redis.pid" --logfile "$d/redis.log" --dir "$d" \
		--unixsocket "$d/redis.sock" --unixsocketperm 700 \
		</dev/null >>"$d/stdout.log" 2>&1 &
	pid=$!
	for ((i = 0; i < START_TIMEOUT * 10; i++)); do
		if pid_of redis >/dev/null && answers redis; then
			return 0
		fi
		if ((i > 20)) && ! running "$pid" && ! pid_of redis >/dev/null; then
			break
		fi
		sleep 0.1
	done
	if tail -n +"$((lines + 1))" "$d/redis.log" 2>/dev/null | grep -q 'Address already in use'; then
		return 2
	fi
	show_log redis
	log "redis: redis-server did not come up"
	return 1
}

# ---------------------------------------------------------------- one server

launch() {
	case $1 in
	redis) launch_redis ;;
	primary | replica) launch_mysql "$1" ;;
	*) die "unknown server $1 (primary|replica|redis)" ;;
	esac
}

# start_server NAME MOVABLE: start NAME unless it runs. When MOVABLE is 1 a
# taken port is replaced by a new free one; otherwise the old port is kept.
start_server() {
	local name=$1 movable=$2 try rc
	alive "$name" && return 0
	mkdir -p "$(sdir "$name")"
	if [[ -z $(port_of "$name") ]] || { ((movable)) && ! port_free "$(port_of "$name")"; }; then
		((movable)) || die "$name: no port recorded in $(sdir "$name")/port"
		pick_port >"$(sdir "$name")/port.new"
		mv "$(sdir "$name")/port.new" "$(sdir "$name")/port"
	fi
	for try in 1 2 3 4 5; do
		rc=0
		launch "$name" || rc=$?
		((rc == 0)) && return 0
		((rc == 2 && movable)) || return 1
		log "$name: port $(port_of "$name") was taken, trying another"
		pick_port >"$(sdir "$name")/port.new"
		mv "$(sdir "$name")/port.new" "$(sdir "$name")/port"
	done
	return 1
}

# stop_server NAME SIGNAL: send SIGNAL and wait until the process is gone.
stop_server() {
	local name=$1 sig=$2 pid i
	pid=$(pid_of "$name") || return 0
	kill "-$sig" "$pid" 2>/dev/null || true
	for ((i = 0; i < 600; i++)); do
		running "$pid" || break
		sleep 0.1
	done
	if running "$pid"; then
		log "$name: pid $pid ignored SIG$sig for 60s, killing"
		kill -KILL "$pid" 2>/dev/null || true
		while running "$pid"; do sleep 0.1; done
	fi
	if [[ $sig == KILL ]]; then rm -f "$(pidfile_of "$name")"; fi
	return 0
}

# ---------------------------------------------------------------- replication

setup_primary() {
	local u h
	{
		for h in '%' '127.0.0.1' 'localhost'; do
			u="'$DB_USER'@'$h'"
			echo "CREATE USER IF NOT EXISTS $u IDENTIFIED BY '$DB_PASSWORD';"
			echo "ALTER USER $u IDENTIFIED BY '$DB_PASSWORD';"
			echo "GRANT ALL PRIVILEGES ON *.* TO $u WITH GRANT OPTION;"
		done
		for h in '%' '127.0.0.1' 'localhost'; do
			u="'$TLS_USER'@'$h'"
			echo "CREATE USER IF NOT EXISTS $u IDENTIFIED BY '$DB_PASSWORD' REQUIRE SSL;"
			echo "GRANT ALL PRIVILEGES ON *.* TO $u;"
		done
		u="'$REPL_USER'@'127.0.0.1'"
		echo "CREATE USER IF NOT EXISTS $u IDENTIFIED BY '$REPL_PASSWORD';"
		echo "ALTER USER $u IDENTIFIED BY '$REPL_PASSWORD';"
		echo "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO $u;"
	} | sql_root primary || die "primary: creating accounts failed"
}

# load_timezones NAME loads the named time zones once, outside the binlog.
load_timezones() {
	local name=$1 marker
	marker="$(sdir "$name")/timezones-loaded"
	[[ -e $marker ]] && return 0
	[[ -d /usr/share/zoneinfo ]] && tzinfo_bin >/dev/null || return 0
	if "$(tzinfo_bin)" --skip-write-binlog /usr/share/zoneinfo 2>/dev/null | sql_root "$name" mysql; then
		touch "$marker"
	else
		log "$name: loading time zones failed (named time zones will not work)"
	fi
}

# slave_status prints SHOW SLAVE STATUS of the replica, one "Field: value" a line.
slave_status() {
	"$(client_bin)" --no-defaults --protocol=socket -S "$(sock_of replica)" -uroot \
		-e 'SHOW SLAVE STATUS\G' 2>/dev/null || true
}

slave_field() { sed -n "s/^ *$1: //p" <<<"$2" | head -n 1; }

setup_replica() {
	local st pport
	pport=$(port_of primary)
	st=$(slave_status)
	if [[ $(slave_field Master_Port "$st") != "$pport" || $(slave_field Master_User "$st") != "$REPL_USER" ]]; then
		sql_root replica -e "STOP SLAVE; CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$pport,
			MASTER_USER='$REPL_USER', MASTER_PASSWORD='$REPL_PASSWORD',
			MASTER_CONNECT_RETRY=1, MASTER_HEARTBEAT_PERIOD=1, MASTER_USE_GTID=slave_pos" ||
			die "replica: CHANGE MASTER failed"
	fi
	sql_root replica -e 'START SLAVE' 2>/dev/null || true
	wait_replication
}

# wait_replication: both replica threads run and the replica has applied
# everything the primary has logged so far.
wait_replication() {
	local st i pos io sql
	for ((i = 0; i < START_TIMEOUT * 10; i++)); do
		st=$(slave_status)
		io=$(slave_field Slave_IO_Running "$st")
		sql=$(slave_field Slave_SQL_Running "$st")
		[[ $io == Yes && $sql == Yes ]] && break
		if [[ $sql == No && -n $(slave_field Last_SQL_Error "$st") ]]; then
			break
		fi
		sleep 0.1
	done
	if [[ $io != Yes || $sql != Yes ]]; then
		log "replica: replication not running (IO=$io SQL=$sql)"
		log "IO error: $(slave_field Last_IO_Error "$st")"
		log "SQL error: $(slave_field Last_SQL_Error "$st")"
		show_log replica
		return 1
	fi
	pos=$(sql_root primary -e 'SELECT @@gtid_binlog_pos')
	[[ -z $pos ]] && return 0
	[[ $(sql_root replica -e "SELECT MASTER_GTID_WAIT('$pos', $START_TIMEOUT)") == 0 ]] ||
		{
			log "replica: did not reach primary position $pos"
			return 1
		}
}

# ---------------------------------------------------------------- env file

write_env() {
	local f="$DIR/env" n N
	{
		echo "# Written by scripts/testbed.sh up; source with: set -a; . $f; set +a"
		echo "LOCKPROXY_TESTBED=$DIR"
		echo "LOCKPROXY_PRIMARY=127.0.0.1:$(port_of primary)"
		echo "LOCKPROXY_REPLICA=127.0.0.1:$(port_of replica)"
		echo "LOCKPROXY_REDIS=127.0.0.1:$(port_of redis)"
		echo "LOCKPROXY_DB_USER=$DB_USER"
		echo "LOCKPROXY_DB_PASSWORD=$DB_PASSWORD"
		echo "LOCKPROXY_TLS_USER=$TLS_USER"
		echo "LOCKPROXY_TLS_CA=$DIR/tls/ca.pem"
		echo "LOCKPROXY_TLS_CERT=$DIR/tls/server.pem"
		echo "LOCKPROXY_TLS_KEY=$DIR/tls/server-key.pem"
		for n in primary replica redis; do
			N=${n^^}
			echo "LOCKPROXY_${N}_PID_FILE=$(pidfile_of "$n")"
			echo "LOCKPROXY_${N}_LOG=$(logfile_of "$n")"
			echo "LOCKPROXY_${N}_SOCKET=$(sock_of "$n")"
		done
		echo "LOCKPROXY_PRIMARY_CNF=$DIR/primary/my.cnf"
		echo "LOCKPROXY_REPLICA_CNF=$DIR/replica/my.cnf"
	} >"$f.tmp"
	mv "$f.tmp" "$f"
}

# ---------------------------------------------------------------- Sentinel and Cluster

# A group (sentinel or cluster) keeps one directory per node under
# DIR/GROUP/PORT (config, pid, log, data), the node ports in DIR/GROUP/nodes
# and the addresses clients need in DIR/GROUP/env.

# pick_group_port prints a free port that no node of DIR/GROUP has taken
# yet (also not as a cluster bus port) and records it in DIR/GROUP/ports.
pick_group_port() {
	local g=$1 p i
	for i in $(seq 500); do
		p=$((20000 + RANDOM % 12000))
		grep -qx "$p" "$DIR/$g/ports" 2>/dev/null && continue
		[[ $p == "$(port_of primary)" || $p == "$(port_of replica)" || $p == "$(port_of redis)" ]] && continue
		if port_free "$p"; then
			echo "$p" >>"$DIR/$g/ports"
			echo "$p"
			return 0
		fi
	done
	die "no free port found"
}

# node_pid GROUP PORT prints the pid of that node if it runs and is still
# our redis-server.
node_pid() {
	local f="$DIR/$1/$2/redis.pid" pid cmd
	[[ -s $f ]] || return 1
	pid=$(tr -dc 0-9 <"$f")
	[[ -n $pid ]] && running "$pid" || return 1
	cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
	[[ $cmd == *redis-server*":$2"* || $cmd == *"$DIR/$1/$2/"* ]] || return 1
	echo "$pid"
}

# rcli PORT ARGS...: redis-cli against one node of a group.
rcli() {
	local port=$1
	shift
	"$(redis_cli_bin)" -h 127.0.0.1 -p "$port" "$@"
}

# launch_node GROUP PORT ARGS...: start redis-server with ARGS (a config
# file and options) in its own session and wait until it answers PING.
launch_node() {
	local g=$1 port=$2 d i
	shift 2
	d="$DIR/$g/$port"
	mkdir -p "$d"
	rm -f "$d/redis.pid"
	setsid "$(redis_bin)" "$@" </dev/null >>"$d/stdout.log" 2>&1 &
	for ((i = 0; i < START_TIMEOUT * 10; i++)); do
		if node_pid "$g" "$port" >/dev/null && [[ $(rcli "$port" ping 2>/dev/null) == PONG ]]; then
			echo "$port" >>"$DIR/$g/nodes"
			return 0
		fi
		sleep 0.1
	done
	tail -n 20 "$d/redis.log" >&2 2>/dev/null || true
	die "$g: redis-server on port $port did not come up"
}

# data_node_opts GROUP PORT: the options every data node of a group shares
# (no persistence: a restarted node comes back empty).
data_node_opts() {
	local d="$DIR/$1/$2"
	echo --port "$2" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
		--pidfile "$d/redis.pid" --logfile "$d/redis.log" --dir "$d"
}

group_alive() {
	local g=$1 port
	[[ -s $DIR/$g/env && -s $DIR/$g/nodes ]] || return 1
	while read -r port; do
		node_pid "$g" "$port" >/dev/null || return 1
	done <"$DIR/$g/nodes"
}

# sentinel_settled PORT: the sentinel on PORT sees 2 replicas and 2 other
# sentinels.
sentinel_settled() {
	rcli "$1" sentinel master lockproxy 2>/dev/null | tr -d '\r' |
		awk 'p {v[k]=$0; p=0; next} {k=$0; p=1} END {exit !(v["num-slaves"] == 2 && v["num-other-sentinels"] == 2)}'
}

cmd_sentinel() {
	set_dir "${1:-}"
	if group_alive sentinel; then
		start_watchdog
		cat "$DIR/sentinel/env"
		return 0
	fi
	cmd_check
	stop_group sentinel
	rm -rf "$DIR/sentinel"
	mkdir -p "$DIR/sentinel"
	local m r p i d ok s sentinels=() replicas=()
	m=$(pick_group_port sentinel)
	# shellcheck disable=SC2046
	launch_node sentinel "$m" $(data_node_opts sentinel "$m")
	for i in 1 2; do
		r=$(pick_group_port sentinel)
		# shellcheck disable=SC2046
		launch_node sentinel "$r" $(data_node_opts sentinel "$r") --replicaof 127.0.0.1 "$m"
		replicas+=("$r")
	done
	for i in 1 2 3; do
		p=$(pick_group_port sentinel)
		d="$DIR/sentinel/$p"
		mkdir -p "$d"
		cat >"$d/sentinel.conf" <<EOF
# Written by scripts/testbed.sh; Sentinel rewrites it as the group changes.
port $p
bind 127.0.0.1
daemonize no
pidfile $d/redis.pid
logfile $d/redis.log
dir $d
sentinel monitor lockproxy 127.0.0.1 $m 2
sentinel down-after-milliseconds lockproxy 2000
sentinel failover-timeout lockproxy 10000
sentinel parallel-syncs lockproxy 2
EOF
		launch_node sentinel "$p" "$d/sentinel.conf" --sentinel
		sentinels+=("127.0.0.1:$p")
	done
	# Settled: both replicas in sync, every sentinel knows both replicas
	# and the other two sentinels.
	for ((i = 0; i < START_TIMEOUT * 10; i++)); do
		ok=1
		for r in "${replicas[@]}"; do
			rcli "$r" info replication 2>/dev/null | grep -q 'master_link_status:up' || ok=0
		done
		for s in "${sentinels[@]}"; do
			sentinel_settled "${s##*:}" || ok=0
		done
		((ok)) && break
		sleep 0.1
	done
	((ok)) || die "sentinel: the group did not settle (logs in $DIR/sentinel)"
	{
		echo "# Written by scripts/testbed.sh sentinel"
		echo "LOCKPROXY_SENTINEL_ADDRS=$(IFS=,; echo "${sentinels[*]}")"
		echo "LOCKPROXY_SENTINEL_MASTER=lockproxy"
	} >"$DIR/sentinel/env"
	start_watchdog
	cat "$DIR/sentinel/env"
}

# cluster_settled: every node says cluster_state:ok and every replica's
# link to its master is up.
cluster_settled() {
	local p
	while read -r p; do
		rcli "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || return 1
		if rcli "$p" info replication 2>/dev/null | grep -q 'role:slave'; then
			rcli "$p" info replication 2>/dev/null | grep -q 'master_link_status:up' || return 1
		fi
	done <"$DIR/cluster/nodes"
}

cmd_cluster() {
	set_dir "${1:-}"
	if group_alive cluster; then
		start_watchdog
		cat "$DIR/cluster/env"
		return 0
	fi
	cmd_check
	stop_group cluster
	rm -rf "$DIR/cluster"
	mkdir -p "$DIR/cluster"
	local i p bus addrs=()
	for i in 1 2 3 4 5 6; do
		p=$(pick_group_port cluster)
		bus=$(pick_group_port cluster)
		# shellcheck disable=SC2046
		launch_node cluster "$p" $(data_node_opts cluster "$p") --cluster-enabled yes \
			--cluster-port "$bus" --cluster-config-file "$DIR/cluster/$p/nodes.conf" \
			--cluster-node-timeout 2000 --cluster-replica-validity-factor 0
		addrs+=("127.0.0.1:$p")
	done
	rcli "${addrs[0]##*:}" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
		>"$DIR/cluster/create.log" 2>&1 || {
		tail -n 20 "$DIR/cluster/create.log" >&2
		die "cluster: redis-cli --cluster create failed"
	}
	for ((i = 0; i < START_TIMEOUT * 10; i++)); do
		cluster_settled && break
		sleep 0.1
	done
	cluster_settled || die "cluster: not settled after ${START_TIMEOUT}s (logs in $DIR/cluster)"
	{
		echo "# Written by scripts/testbed.sh cluster"
		echo "LOCKPROXY_CLUSTER_ADDRS=$(IFS=,; echo "${addrs[*]}")"
	} >"$DIR/cluster/env"
	start_watchdog
	cat "$DIR/cluster/env"
}

# stop_group GROUP stops every node of it (SIGTERM, SIGKILL after 10 s).
stop_group() {
	local g=$1 port pid i pids=()
	[[ -f $DIR/$g/nodes ]] || return 0
	while read -r port; do
		if pid=$(node_pid "$g" "$port"); then
			kill -TERM "$pid" 2>/dev/null || true
			pids+=("$pid")
		fi
	done <"$DIR/$g/nodes"
	for pid in "${pids[@]}"; do
		for ((i = 0; i < 100; i++)); do
			running "$pid" || break
			sleep 0.1
		done
		if running "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
	done
	return 0
}

# cmd_kill_node DIR ADDR: SIGKILL the Sentinel or Cluster node on ADDR.
cmd_kill_node() {
	set_dir "${1:-}"
	local port=${2:-} g pid
	port=${port##*:}
	[[ $port =~ ^[0-9]+$ ]] || die "usage: $SELF kill-node DIR 127.0.0.1:PORT"
	for g in sentinel cluster; do
		if grep -qx "$port" "$DIR/$g/nodes" 2>/dev/null && pid=$(node_pid "$g" "$port"); then
			kill -KILL "$pid"
			while running "$pid"; do sleep 0.05; done
			return 0
		fi
	done
	die "no running Sentinel or Cluster node of $DIR on port $port"
}

# ---------------------------------------------------------------- commands

set_dir() {
	[[ -n ${1:-} ]] || die "usage: $SELF $CMD DIR"
	[[ $1 != *[[:space:]\'\"\$\\]* ]] || die "DIR must not contain spaces, quotes, \$ or \\: $1"
	mkdir -p "$1"
	DIR=$(cd "$1" && pwd)
	if ((${#DIR} > 80)); then
		die "DIR is too long for a unix socket path (${#DIR} > 80 bytes): $DIR"
	fi
}

all_alive() {
	local n
	for n in primary replica redis; do alive "$n" || return 1; done
}

cmd_up() {
	set_dir "${1:-}"
	if [[ -s $DIR/env ]] && all_alive; then
		start_watchdog
		cat "$DIR/env"
		return 0
	fi
	cmd_check
	mkdir -p "$DIR/primary" "$DIR/replica" "$DIR/redis"
	local tpl=""
	if [[ ! -d $DIR/primary/data/mysql || ! -d $DIR/replica/data/mysql ]]; then
		tpl=$(ensure_template) || tpl=""
	fi
	ensure_tls
	init_mysql primary "$tpl" &
	local p1=$!
	init_mysql replica "$tpl" &
	local p2=$!
	wait "$p1" || die "primary: init failed"
	wait "$p2" || die "replica: init failed"
	start_server primary 1 &
	p1=$!
	start_server replica 1 &
	p2=$!
	local p3 rc=0
	start_server redis 1 &
	p3=$!
	wait "$p1" || rc=1
	wait "$p2" || rc=1
	wait "$p3" || rc=1
	((rc == 0)) || die "a server did not start (see above)"
	load_timezones primary &
	p1=$!
	load_timezones replica &
	p2=$!
	wait "$p1" "$p2" || true
	setup_primary
	setup_replica || die "replica: replication failed"
	write_env
	start_watchdog
	cat "$DIR/env"
}

start_watchdog() {
	[[ -n ${LOCKPROXY_TESTBED_OWNER_PID:-} ]] || return 0
	if [[ ${LOCKPROXY_TESTBED_EPHEMERAL:-} == 1 ]]; then touch "$DIR/.ephemeral"; fi
	local wpid
	wpid=$(cat "$DIR/watchdog.pid" 2>/dev/null || true)
	if [[ -n $wpid ]] && kill -0 "$wpid" 2>/dev/null; then return 0; fi
	setsid bash "$SELF" watchdog "$DIR" "$LOCKPROXY_TESTBED_OWNER_PID" </dev/null >>"$DIR/watchdog.log" 2>&1 &
	echo $! >"$DIR/watchdog.pid"
}

cmd_watchdog() {
	set_dir "$1"
	local owner=$2
	while running "$owner" && [[ -d $DIR ]]; do sleep 1; done
	[[ -d $DIR ]] || return 0
	log "owner $owner is gone; taking the bed down"
	rm -f "$DIR/watchdog.pid"
	cmd_down "$DIR"
	if [[ -e $DIR/.ephemeral ]]; then rm -rf "$DIR"; fi
}

cmd_down() {
	[[ -d ${1:-} ]] || {
		log "no bed in ${1:-(none given)}"
		return 0
	}
	set_dir "$1"
	local wpid
	wpid=$(cat "$DIR/watchdog.pid" 2>/dev/null || true)
	if [[ -n $wpid && $wpid != "$$" ]]; then
		kill "$wpid" 2>/dev/null || true
		rm -f "$DIR/watchdog.pid"
	fi
	stop_group sentinel &
	stop_group cluster &
	stop_server replica TERM &
	stop_server redis TERM &
	wait
	stop_server primary TERM
}

cmd_status() {
	set_dir "${1:-}"
	local n rc=0 pid
	for n in primary replica redis; do
		if pid=$(pid_of "$n") && answers "$n"; then
			echo "$n: running, pid $pid, 127.0.0.1:$(port_of "$n")"
		elif pid=$(pid_of "$n"); then
			echo "$n: process $pid runs but does not answer on 127.0.0.1:$(port_of "$n")"
			rc=1
		else
			echo "$n: stopped"
			rc=1
		fi
	done
	if pid_of replica >/dev/null && answers replica; then
		local st
		st=$(slave_status)
		echo "replication: IO=$(slave_field Slave_IO_Running "$st") SQL=$(slave_field Slave_SQL_Running "$st") behind=$(slave_field Seconds_Behind_Master "$st")"
	fi
	return "$rc"
}

cmd_one() {
	local action=$1 name
	set_dir "${2:-}"
	name=${3:-}
	case $name in primary | replica | redis) ;; *) die "usage: $SELF $action DIR primary|replica|redis" ;; esac
	case $action in
	kill) stop_server "$name" KILL ;;
	stop) stop_server "$name" TERM ;;
	start | restart)
		[[ $action == restart ]] && stop_server "$name" TERM
		start_server "$name" 0 || die "$name: start failed"
		case $name in
		replica) wait_replication || die "replica: replication failed" ;;
		primary) if alive replica; then wait_replication || die "replica: replication failed"; fi ;;
		esac
		;;
	esac
}

CMD=${1:-}
shift || true
case $CMD in
install) cmd_install ;;
install-podman) cmd_install_podman ;;
check) cmd_check ;;
up) cmd_up "$@" ;;
down) cmd_down "$@" ;;
status) cmd_status "$@" ;;
env)
	set_dir "${1:-}"
	cat "$DIR/env"
	;;
kill | stop | start | restart) cmd_one "$CMD" "$@" ;;
sentinel) cmd_sentinel "$@" ;;
cluster) cmd_cluster "$@" ;;
kill-node) cmd_kill_node "$@" ;;
watchdog) cmd_watchdog "$@" ;;
*)
	sed -n '2,/^set -euo/p' "$SELF" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
	;;
esac
