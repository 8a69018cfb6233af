package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"

	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/rules"
)

// blobProxy is a proxy with the default statement limits and a rule on
// blobs(id), optionally with the bed's replica; db holds the table.
func blobProxy(t *testing.T, replica bool) (*testProxy, string) {
	t.Helper()
	base := startProxy(t, nil)
	db := freshDB(t, base)
	testbed.MustExec(t, base.direct(t, db, ""), "CREATE TABLE blobs (id BIGINT PRIMARY KEY, body LONGBLOB)")
	p := startProxyWith(t, func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "blob-row", Table: db + ".blobs", Key: []string{"id"},
			Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
			OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(time.Second)}}
		if replica {
			c.Backends.Replicas = []string{base.bed.ReplicaAddr}
		}
	}, memlock.New(nil, nil))
	return p, db
}

// inlineDSN makes go-sql-driver inline parameters into the statement
// text (_binary'..' with backslash escapes), as PyMySQL and mysqlclient
// always do.
const inlineDSN = "interpolateParams=true&maxAllowedPacket=67108864"

// randomBlob is n bytes every value of which occurs, quotes and
// backslashes included.
func randomBlob(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, uint64(n)))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestInlineBlob16MiB: a 16 MiB BLOB inlined into an INSERT on a guarded
// table goes through lockproxy with the row's lock taken (a session holding
// the row's lock makes it wait, and time out with lockproxy's error), and
// reads back byte for byte; the same with a replica configured.
func TestInlineBlob16MiB(t *testing.T) {
	blob := randomBlob(16 << 20)
	for _, replica := range []bool{false, true} {
		t.Run(fmt.Sprintf("replica=%v", replica), func(t *testing.T) {
			p, db := blobProxy(t, replica)
			through := p.db(t, db, inlineDSN)
			ctx := context.Background()
			holder, err := p.db(t, db, "").Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Close()
			mustConn := func(q string) {
				t.Helper()
				if _, err := holder.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			// Another session holds row 42's lock: the INSERT must wait
			// for it, which it does only if it was keyed on 42.
			testbed.MustExec(t, through, "INSERT INTO blobs (id, body) VALUES (41, 'x')")
			mustConn("BEGIN")
			mustConn("SELECT id FROM blobs WHERE id = 41 FOR UPDATE")
			_, err = through.Exec("INSERT INTO blobs (id, body) VALUES (?, ?) ON DUPLICATE KEY UPDATE body = VALUES(body)", 41, blob)
			var me *mysql.MySQLError
			if !errors.As(err, &me) || !strings.HasPrefix(me.Message, "lockproxy: ") || !strings.Contains(me.Message, "blob-row") {
				t.Fatalf("INSERT of a row whose lock another session holds: got %v, want lockproxy's lock wait error", err)
			}
			mustConn("ROLLBACK")
			if _, err := through.Exec("INSERT INTO blobs (id, body) VALUES (?, ?) ON DUPLICATE KEY UPDATE body = VALUES(body)", 41, blob); err != nil {
				t.Fatalf("16 MiB inline BLOB through lockproxy: %v", err)
			}
			if _, err := through.Exec("INSERT INTO blobs (id, body) VALUES (?, ?)", 42, blob); err != nil {
				t.Fatalf("16 MiB inline BLOB through lockproxy: %v", err)
			}
			for _, id := range []int{41, 42} {
				var got []byte
				if err := p.direct(t, db, "").QueryRow("SELECT body FROM blobs WHERE id = ?", id).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, blob) {
					t.Fatalf("row %d: %d bytes read back directly, differ from the %d written", id, len(got), len(blob))
				}
				got = nil
				if err := through.QueryRow("SELECT body FROM blobs WHERE id = ?", id).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, blob) {
					t.Fatalf("row %d: %d bytes read back through lockproxy, differ from the %d written", id, len(got), len(blob))
				}
			}
		})
	}
}

// TestDumpLongRowRestore: a mariadb-dump file with a 3 MiB row restores
// through lockproxy with the mariadb CLI, into a guarded table, from the
// dump's default INSERTs that list no columns (keyed by the table's column
// order read from the primary).
func TestDumpLongRowRestore(t *testing.T) {
	cli := requireTool(t, "mariadb", "--version")
	dump := requireTool(t, "mariadb-dump", "--version")
	p, db := blobProxy(t, true)
	direct := p.direct(t, db, inlineDSN)
	blob := randomBlob(3 << 20)
	if _, err := direct.Exec("INSERT INTO blobs (id, body) VALUES (?, ?), (2, 'small')", 1, blob); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(p.bed.PrimaryAddr, ":")
	out := runClient(t, db, nil, "", dump, "-h"+host, "-P"+port, "-u"+p.bed.User, "-p"+p.bed.Password, "--protocol=TCP", "--no-create-info", db, "blobs")
	if out.code != 0 {
		t.Fatalf("mariadb-dump: exit %d: %s", out.code, tailBytes(out.stderr))
	}
	if len(out.stdout) < 3<<20 {
		t.Fatalf("dump of %d bytes", len(out.stdout))
	}
	if !strings.Contains(out.stdout, "INSERT INTO `blobs` VALUES") || strings.Contains(out.stdout, "INSERT INTO `blobs` (") {
		t.Fatalf("the dump's INSERTs name their columns; this test is about those that do not:\n%.300s", out.stdout)
	}
	file := filepath.Join(t.TempDir(), "dump.sql")
	if err := os.WriteFile(file, []byte(out.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	testbed.MustExec(t, direct, "DELETE FROM blobs")
	host, port, _ = strings.Cut(p.addr, ":")
	out = runClient(t, db, nil, file, cli, "-h"+host, "-P"+port, "-u"+p.bed.User, "-p"+p.bed.Password, "--protocol=TCP", db)
	if out.code != 0 {
		t.Fatalf("restore through lockproxy: exit %d: %s", out.code, tailBytes(out.stderr))
	}
	var got []byte
	if err := direct.QueryRow("SELECT body FROM blobs WHERE id = 1").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, blob) {
		t.Fatalf("restored row of %d bytes differs from the %d dumped", len(got), len(blob))
	}
}

// tailBytes is the end of a client's output (its echo of a long
// statement is megabytes).
func tailBytes(s string) string {
	if len(s) > 1000 {
		return "..." + s[len(s)-1000:]
	}
	return s
}

// TestStatementOverMaxAllowedPacket: a statement longer than MariaDB's
// max_allowed_packet (within lockproxy's) gets MariaDB's own error through
// lockproxy, as directly.
func TestStatementOverMaxAllowedPacket(t *testing.T) {
	p, db := blobProxy(t, false)
	root := p.direct(t, "", "")
	var was int64
	if err := root.QueryRow("SELECT @@global.max_allowed_packet").Scan(&was); err != nil {
		t.Fatal(err)
	}
	testbed.MustExec(t, root, "SET GLOBAL max_allowed_packet = 16777216")
	t.Cleanup(func() { _, _ = root.Exec(fmt.Sprintf("SET GLOBAL max_allowed_packet = %d", was)) })
	q := "INSERT INTO blobs (id, body) VALUES (43, '" + strings.Repeat("a", 17<<20) + "')"
	// New connections (the proxy's to the backend included) read the
	// global value.
	direct := oversizedQuery(t, p.bed.PrimaryAddr, p, db, q)
	through := oversizedQuery(t, p.addr, p, db, q)
	if direct != 1153 || through != direct {
		t.Fatalf("error %d through lockproxy, %d directly, want 1153 (ER_NET_PACKET_TOO_LARGE)", through, direct)
	}
}

// oversizedQuery sends q as COM_QUERY to addr while reading the answer (a
// server that stops reading q answers and closes, which a client writing
// all of q before reading may see as a reset only) and returns the
// error's code.
func oversizedQuery(t *testing.T, addr string, p *testProxy, db, q string) uint16 {
	t.Helper()
	c, err := client.Connect(addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn := c.Conn.Conn
	payload := append([]byte{gomysql.COM_QUERY}, q...)
	go func() {
		for seq := 0; ; seq++ {
			n := min(len(payload), 0xffffff)
			hdr := []byte{byte(n), byte(n >> 8), byte(n >> 16), byte(seq)}
			if _, err := conn.Write(append(hdr, payload[:n]...)); err != nil {
				return
			}
			payload = payload[n:]
			if n < 0xffffff {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	var hdr [4]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		t.Fatalf("%s: no answer to a statement over max_allowed_packet: %v", addr, err)
	}
	ans := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
	if _, err := io.ReadFull(conn, ans); err != nil || len(ans) < 3 || ans[0] != gomysql.ERR_HEADER {
		t.Fatalf("%s: answer %q, %v; want an error packet", addr, ans, err)
	}
	t.Logf("%s: %s", addr, ans[3:])
	return binary.LittleEndian.Uint16(ans[1:])
}

// TestPositionalInsertKeyed: an INSERT without a column list on a guarded
// table is keyed by the table's column order as the primary reports it (an
// INVISIBLE column takes no value), so it waits for the lock of the row it
// writes; INSERT ... SELECT without a column list cannot be keyed and is
// refused naming the rule.
func TestPositionalInsertKeyed(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE pos (note VARCHAR(10) INVISIBLE DEFAULT 'n', body VARCHAR(10), id BIGINT AUTO_INCREMENT PRIMARY KEY)")
	testbed.MustExec(t, direct, "CREATE TABLE src (body VARCHAR(10), id BIGINT)")
	testbed.MustExec(t, direct, "INSERT INTO src VALUES ('s', 9)")
	// Row 7 exists, so the holder's FOR UPDATE locks that record and no
	// gap in InnoDB: the other INSERTs below meet only lockproxy's lock.
	testbed.MustExec(t, direct, "INSERT INTO pos VALUES ('x', 7)")
	p := startProxyWith(t, func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "pos-row", Table: db + ".pos", Key: []string{"id"},
			Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
			OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(300 * time.Millisecond)}}
	}, memlock.New(nil, nil))
	through := p.db(t, db, "")
	ctx := context.Background()
	holder, err := p.db(t, db, "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	for _, q := range []string{"BEGIN", "SELECT id FROM pos WHERE id = 7 FOR UPDATE"} {
		if _, err := holder.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	wantLockError := func(q string, want string) {
		t.Helper()
		_, err := through.Exec(q)
		var me *mysql.MySQLError
		if !errors.As(err, &me) || !strings.HasPrefix(me.Message, "lockproxy: ") || !strings.Contains(me.Message, "pos-row") ||
			!strings.Contains(me.Message, want) {
			t.Fatalf("%s: got %v, want lockproxy's error naming the rule and %q", q, err, want)
		}
	}
	// Row 7's lock is held: an INSERT or REPLACE of row 7 waits for it and
	// times out; row 8 and a new auto-increment row are free.
	wantLockError("INSERT INTO pos VALUES ('a', 7)", "7")
	wantLockError("INSERT INTO pos VALUES ('a', 8), ('b', 7)", "7")
	wantLockError("REPLACE INTO pos VALUES ('a', 7)", "7")
	testbed.MustExec(t, through, "INSERT INTO pos VALUES ('a', 8)")
	testbed.MustExec(t, through, "INSERT INTO pos VALUES ('c', NULL)")
	wantLockError("INSERT INTO pos SELECT body, id FROM src", "column")
	if _, err := holder.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	testbed.MustExec(t, through, "REPLACE INTO pos VALUES ('a', 7)")
	var n int
	if err := direct.QueryRow("SELECT COUNT(*) FROM pos WHERE id IN (7, 8) AND note = 'n'").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows 7 and 8 with the invisible column's default: %d, %v", n, err)
	}
}
