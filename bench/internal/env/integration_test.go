package env

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

// TestProxyLifecycle builds lockproxy, starts it against the real bed,
// queries through it, and stops it: the path every scenario relies on.
func TestProxyLifecycle(t *testing.T) {
	tb := testbed.Get(t)
	if testing.Short() {
		t.Skip("builds lockproxy")
	}
	bed, err := ReadBed(tb.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if bed.Primary != tb.PrimaryAddr || bed.User != tb.User {
		t.Fatalf("ReadBed(%s) = %+v, testbed says %s as %s", tb.Dir, bed, tb.PrimaryAddr, tb.User)
	}
	if pid, err := bed.PrimaryPID(); err != nil || pid <= 0 {
		t.Fatalf("PrimaryPID = %d, %v", pid, err)
	}
	if pid, err := bed.ReplicaPID(); err != nil || pid <= 0 {
		t.Fatalf("ReplicaPID = %d, %v", pid, err)
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	work := t.TempDir()
	bin, err := Build(ctx, root, work)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Root: root, Bed: bed, Binary: bin, WorkDir: work}
	ps, err := e.StartProxies(ctx, 2, ProxyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer StopAll(context.Background(), ps)
	if ps[0].Addr == ps[1].Addr || ps[0].PID == ps[1].PID {
		t.Fatalf("two instances share an address or pid: %+v %+v", ps[0], ps[1])
	}
	for _, p := range ps {
		mustReachMariaDB(ctx, t, bed, p.Addr, p.Log)
	}
	if err := ps[0].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if !ps[0].Exited() || ps[1].Exited() {
		t.Fatalf("after stopping the first: exited = %v, %v; want true, false", ps[0].Exited(), ps[1].Exited())
	}
}

// TestRelaysToPrimary puts both relays in front of the bed's primary and
// queries MariaDB through each: the path the relay arms rely on.
func TestRelaysToPrimary(t *testing.T) {
	tb := testbed.Get(t)
	if testing.Short() {
		t.Skip("builds the relay")
	}
	bed, err := ReadBed(tb.Dir)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	work := t.TempDir()
	bin, err := BuildRelay(ctx, root, work)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Root: root, Bed: bed, RelayBinary: bin, WorkDir: work}
	for _, kind := range []string{GoRelay, LockingGoRelay, Socat} {
		r, err := e.StartRelay(ctx, kind, bed.Primary)
		if err != nil {
			t.Fatal(err)
		}
		mustReachMariaDB(ctx, t, bed, r.Addr, r.Log)
		if err := r.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// mustReachMariaDB asks for VERSION() through addr and fails the test,
// with the log of what serves addr, unless MariaDB answers.
func mustReachMariaDB(ctx context.Context, t *testing.T, bed *Bed, addr string, log func() string) {
	t.Helper()
	db, err := sql.Open("mysql", bed.DSN(addr, ""))
	if err != nil {
		t.Fatal(err)
	}
	var v string
	err = db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v)
	_ = db.Close()
	if err != nil || !strings.Contains(strings.ToLower(v), "mariadb") {
		t.Fatalf("SELECT VERSION() through %s = %q, %v; log:\n%s", addr, v, err, log())
	}
}
