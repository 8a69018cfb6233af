package proxy

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// preparedFuzzStmts are prepared by every FuzzSessionPrepared session
// before its input, so the proxy ids 1, 2 and 3 name them: a read of an
// unguarded table (executed once first, on the replica, which then has it
// prepared too), a guarded UPDATE on the primary, and a guarded read with
// two parameters.
var preparedFuzzStmts = []string{
	"SELECT id, name FROM item WHERE id = ?",
	"UPDATE sku SET stock = ?, note = ? WHERE sku_id = ?",
	"SELECT note FROM sku WHERE sku_id IN (?, ?)",
}

// FuzzSessionPrepared logs in, prepares preparedFuzzStmts (statement 1 is
// executed once, on the replica), then sends the input as one command
// packet: its first byte is the command, the rest its body. Any command
// byte is allowed, so every command the session serves after login meets
// arbitrary bodies against statements that exist on the primary and on
// the replica. The invariants are FuzzSessionCommands': no panic, and a
// fresh client is still served.
func FuzzSessionPrepared(f *testing.F) {
	for _, seed := range preparedSeeds() {
		f.Add(seed)
	}
	p := startFuzzProxyOn(f, true)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		if harmsBed(data, [][]byte{data}) {
			t.Skip("could stop the bed's server or end other tests' connections or databases")
		}
		c, err := client.ConnectWithTimeout(p.addr, p.bed.User, p.bed.Password, fuzzDB, 10*time.Second)
		if err != nil {
			t.Fatalf("login: %v", err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		for i, q := range preparedFuzzStmts {
			st, err := c.Prepare(q)
			if err != nil {
				t.Fatalf("prepare %q: %v", q, err)
			}
			if st.ID != uint32(i+1) {
				t.Fatalf("statement %q has id %d, want %d", q, st.ID, i+1)
			}
			if i == 0 {
				before := testutil.ToFloat64(p.srv.metrics.queries.WithLabelValues("replica", "execute"))
				// Raw, with flags 0: the replica serves executes without
				// a cursor only.
				fuzzExchange(c, [][]byte{execute(st.ID, 0, []byte{mysql.MYSQL_TYPE_LONGLONG, 0}, le64(1))})
				// The route is counted just after the answer is relayed.
				served := func() bool {
					return testutil.ToFloat64(p.srv.metrics.queries.WithLabelValues("replica", "execute")) > before
				}
				for deadline := time.Now().Add(2 * time.Second); !served() && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				if !served() {
					t.Fatalf("execute %q was not served by the replica", q)
				}
			}
		}
		fuzzExchange(c, [][]byte{data})
		_ = c.Close()
		p.check(t)
	})
}

// preparedSeeds are command packets for the statements of
// preparedFuzzStmts, well-formed and not.
func preparedSeeds() [][]byte {
	long := func(id uint32, param uint16, data string) []byte {
		p := binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_SEND_LONG_DATA}, id)
		p = binary.LittleEndian.AppendUint16(p, param)
		return append(p, data...)
	}
	ll := []byte{mysql.MYSQL_TYPE_LONGLONG, 0}
	return [][]byte{
		execute(1, 0, ll, le64(2)),
		execute(1, 1, []byte{mysql.MYSQL_TYPE_NULL, 0}),
		execute(1, 0, []byte{mysql.MYSQL_TYPE_VAR_STRING, 0}, lenc("2")),
		execute(2, 0, []byte{mysql.MYSQL_TYPE_LONG, 0, mysql.MYSQL_TYPE_STRING, 0, mysql.MYSQL_TYPE_LONGLONG, 0},
			[]byte{0x40, 0x42, 0x0f, 0}, lenc("z"), le64(2)),
		execute(3, 0, append(append([]byte{}, ll...), ll...), le64(1), le64(2)),
		append(stmtID(mysql.COM_STMT_EXECUTE, 1, 1), 1, 0, 0, 0, 0, 1, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0),
		stmtID(mysql.COM_STMT_FETCH, 1, 1, 0, 0, 0),
		long(1, 0, "2"),
		long(2, 2, "1"),
		long(3, 9, "1"),
		stmtID(mysql.COM_STMT_RESET, 2),
		stmtID(mysql.COM_STMT_CLOSE, 1),
		stmtID(mysql.COM_STMT_CLOSE, 3),
		stmtID(mysql.COM_STMT_EXECUTE, 1),
		stmtID(mysql.COM_STMT_EXECUTE, 2, 0, 1, 0, 0, 0, 0, 1),
		cmd(mysql.COM_STMT_PREPARE, []byte("SELECT stock FROM sku WHERE sku_id = ? FOR UPDATE")),
		cmd(mysql.COM_STMT_PREPARE, append([]byte("SELECT "), bytes.Repeat([]byte{'('}, 300)...)),
		query("SELECT stock FROM sku WHERE sku_id = 1"),
		query("SHOW LOCKPROXY LOCKS"),
		cmd(mysql.COM_RESET_CONNECTION),
		cmd(mysql.COM_INIT_DB, []byte(fuzzDB)),
		cmd(mysql.COM_FIELD_LIST, []byte("sku\x00")),
		cmd(mysql.COM_SET_OPTION, []byte{1, 0}),
		cmd(mysql.COM_PING),
		{mysql.COM_CHANGE_USER, 'x', 0, 0xff},
		{0x00}, {0x1d}, {0xff, 0xff},
	}
}
