package testbed_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

func TestServersAnswer(t *testing.T) {
	bed := testbed.Get(t)
	tests := []struct {
		name         string
		addr         string
		wantServerID int
		wantReadOnly int
	}{
		{name: "primary", addr: bed.PrimaryAddr, wantServerID: 1, wantReadOnly: 0},
		{name: "replica", addr: bed.ReplicaAddr, wantServerID: 2, wantReadOnly: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.HasPrefix(tt.addr, "127.0.0.1:") || strings.HasSuffix(tt.addr, ":3306") {
				t.Fatalf("addr %q is not a private loopback port", tt.addr)
			}
			db := bed.Open(t, tt.addr, "")
			var id, ro int
			var user string
			if err := db.QueryRow("SELECT @@server_id, @@read_only, CURRENT_USER()").Scan(&id, &ro, &user); err != nil {
				t.Fatal(err)
			}
			if id != tt.wantServerID || ro != tt.wantReadOnly {
				t.Errorf("server_id=%d read_only=%d, want %d %d", id, ro, tt.wantServerID, tt.wantReadOnly)
			}
			if !strings.HasPrefix(user, bed.User+"@") {
				t.Errorf("CURRENT_USER() = %q, want %s@...", user, bed.User)
			}
		})
	}
}

func TestRowReachesReplica(t *testing.T) {
	bed := testbed.Get(t)
	name := bed.TempDatabase(t)
	primary := bed.Open(t, bed.PrimaryAddr, name)
	replica := bed.Open(t, bed.ReplicaAddr, name)
	testbed.MustExec(t, primary, "CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(32))")
	testbed.MustExec(t, primary, "INSERT INTO t VALUES (1, 'ünïcode')")
	if err := bed.WaitReplicaCaughtUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := replica.QueryRow("SELECT v FROM t WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != "ünïcode" {
		t.Errorf("replica has %q", v)
	}
	st, err := bed.ReplicaStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st["Slave_IO_Running"] != "Yes" || st["Slave_SQL_Running"] != "Yes" || st["Using_Gtid"] != "Slave_Pos" {
		t.Errorf("replica status IO=%q SQL=%q Using_Gtid=%q", st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Using_Gtid"])
	}
}

func TestRedisPing(t *testing.T) {
	bed := testbed.Get(t)
	rdb := redis.NewClient(&redis.Options{Addr: bed.RedisAddr})
	t.Cleanup(func() { rdb.Close() })
	if got, err := rdb.Ping(t.Context()).Result(); err != nil || got != "PONG" {
		t.Fatalf("PING = %q, %v", got, err)
	}
	key := testbed.UniqueName(t)
	if err := rdb.Set(t.Context(), key, "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if got := rdb.Get(t.Context(), key).Val(); got != "v" {
		t.Errorf("GET = %q", got)
	}
}

func TestEnvironNamesTheServers(t *testing.T) {
	bed := testbed.Get(t)
	env := strings.Join(bed.Environ(), "\n")
	for _, want := range []string{
		"LOCKPROXY_PRIMARY=" + bed.PrimaryAddr,
		"LOCKPROXY_REPLICA=" + bed.ReplicaAddr,
		"LOCKPROXY_REDIS=" + bed.RedisAddr,
		"LOCKPROXY_DB_USER=" + bed.User,
		"LOCKPROXY_DB_PASSWORD=" + bed.Password,
	} {
		if !strings.Contains(env, want+"\n") && !strings.HasSuffix(env, want) {
			t.Errorf("Environ lacks %q", want)
		}
	}
}

func count(t *testing.T, db *sql.DB, query string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
