package mysqllock_test

import (
	"context"
	"crypto/tls"
	"database/sql"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/rawsock"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/mysqllock"
)

// TestDriverConnections: the lock table's connections are read and
// written through rawsock, TLS negotiated over them, and the pool
// replaces one the server closed.
func TestDriverConnections(t *testing.T) {
	bed := testbed.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dc := mysqllock.DriverConfig(bed.PrimaryAddr, bed.User, bed.Password)
	c, err := dc.DialFunc(ctx, "tcp", bed.PrimaryAddr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if runtime.GOOS == "linux" && !rawsock.Raw(c) {
		t.Fatalf("a connection to the lock table is a %T, not read through rawsock", c)
	}

	dt := mysqllock.DriverConfig(bed.PrimaryAddr, bed.User, bed.Password)
	dt.TLS = &tls.Config{InsecureSkipVerify: true} // the bed's own CA
	tconn, err := mysqllock.Connector(dt)
	if err != nil {
		t.Fatal(err)
	}
	tdb := sql.OpenDB(tconn)
	defer tdb.Close()
	var name, cipher string
	if err := tdb.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher); err != nil || cipher == "" {
		t.Fatalf("a TLS connection to the lock table: cipher %q, %v", cipher, err)
	}

	var last func() net.Conn // the pool's one connection
	dc.DialFunc, last = testbed.RecordDials(dc.DialFunc)
	conn, err := mysqllock.Connector(dc)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	db.SetMaxOpenConns(1)
	admin := bed.Open(t, bed.PrimaryAddr, "")
	for round := range 3 {
		var id int64
		if err := db.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if _, err := admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 10*time.Second, "the server's close reaches the idle socket", func() bool {
			return rawsock.Readable(last())
		})
		var got int64
		if err := db.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&got); err != nil {
			t.Fatalf("round %d: the query after the server closed the idle connection: %v", round, err)
		}
		if got == id {
			t.Fatalf("round %d: the killed connection %d answered", round, id)
		}
	}
}
