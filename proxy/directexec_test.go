package proxy

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// TestDirectExecute: MariaDB's direct execute, a COM_STMT_EXECUTE with
// statement id 0xFFFFFFFF sent in the same flight as its prepare, runs the
// statement the last prepare made; after a failed prepare, or once that
// statement is closed, it names none (1243). Through lockproxy the same
// sequence answers as MariaDB does directly, and a guarded write so sent
// needs its row's lock like any other.
func TestDirectExecute(t *testing.T) {
	p, db := bankProxy(t)
	var outcomes [2][]string
	for i, addr := range []string{p.bed.PrimaryAddr, p.addr} {
		r := dialRaw(t, addr, p.bed.User, p.bed.Password, db, false)
		var out []string
		note := func(step string, rows []string, err error) {
			out = append(out, fmt.Sprintf("%s: %v %s", step, rows, errCode(err)))
		}
		// The prepare and its execute in one flight.
		r.send(append([]byte{mysql.COM_STMT_PREPARE}, "SELECT bal + ? FROM bank_acct WHERE id = ?"...)...)
		r.send(directExecute(5, 1)...)
		r.prepareReply(t)
		r.c.Sequence = 1 // the execute's reply, sent before the prepare's was read
		_, rows, err := r.result(true)
		note("select", rows, err)
		r.send(append([]byte{mysql.COM_STMT_PREPARE}, "UPDATE bank_acct SET bal = bal + ? WHERE id = ?"...)...)
		r.send(directExecute(int64(i+1), 2)...)
		r.prepareReply(t)
		r.c.Sequence = 1
		_, _, err = r.result(true)
		note("update", nil, err)
		// A failed prepare leaves no last statement.
		r.send(append([]byte{mysql.COM_STMT_PREPARE}, "SELECT nope FROM bank_acct"...)...)
		r.send(directExecute()...)
		_, _, err = r.result(false)
		note("failed prepare", nil, err)
		r.c.Sequence = 1
		_, rows, err = r.result(true)
		note("after a failed prepare", rows, err)
		// Nor does closing it.
		id, _ := r.prepare("SELECT 7")
		r.send(stmtPayload(mysql.COM_STMT_CLOSE, id)...)
		r.send(directExecute()...) // COM_STMT_CLOSE has no reply
		_, rows, err = r.result(true)
		note("after close", rows, err)
		// The last of two.
		r.prepare("SELECT 1")
		r.prepare("SELECT 2")
		r.send(directExecute()...)
		_, rows, err = r.result(true)
		note("last of two", rows, err)
		outcomes[i] = out
	}
	if !slices.Equal(outcomes[0], outcomes[1]) {
		t.Errorf("through lockproxy:\n  %s\ndirectly:\n  %s", strings.Join(outcomes[1], "\n  "), strings.Join(outcomes[0], "\n  "))
	}
	if want := "select: [1005] "; outcomes[1][0] != want {
		t.Errorf("direct execute through lockproxy: %q, want %q", outcomes[1][0], want)
	}
	var bal int
	if err := p.direct(t, db, "").QueryRow("SELECT bal FROM bank_acct WHERE id = 2").Scan(&bal); err != nil || bal != 1003 {
		t.Errorf("row 2 after both direct-execute updates: %d, %v; want 1003", bal, err)
	}
	// While another session holds row 3's lock, a direct-execute write
	// of it waits for the lock and times out, as any write of it does.
	holder := conn(t, p.db(t, db, ""))
	mustExecConn(t, holder, "BEGIN", "SELECT bal FROM bank_acct WHERE id = 3")
	defer mustExecConn(t, holder, "ROLLBACK")
	r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false)
	r.send(append([]byte{mysql.COM_STMT_PREPARE}, "UPDATE bank_acct SET bal = bal + ? WHERE id = ?"...)...)
	r.send(directExecute(1, 3)...)
	r.prepareReply(t)
	r.c.Sequence = 1
	if _, _, err := r.result(true); errCode(err) != "1205" {
		t.Errorf("direct-execute write of a row another session holds: %v, want 1205 (its lock)", err)
	}
}

// directExecute is a COM_STMT_EXECUTE of the last prepared statement
// (id 0xFFFFFFFF) with BIGINT parameters, types bound.
func directExecute(args ...int64) []byte {
	b := binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_EXECUTE}, lastStmtID)
	b = binary.LittleEndian.AppendUint32(append(b, 0), 1)
	if len(args) == 0 {
		return b
	}
	b = append(b, make([]byte, (len(args)+7)/8)...)
	b = append(b, 1)
	for range args {
		b = append(b, mysql.MYSQL_TYPE_LONGLONG, 0)
	}
	for _, a := range args {
		b = binary.LittleEndian.AppendUint64(b, uint64(a))
	}
	return b
}

// prepareReply reads a prepare's OK and its definitions.
func (r *rawConn) prepareReply(t *testing.T) {
	t.Helper()
	p := r.read()
	if p[0] != mysql.OK_HEADER {
		t.Fatalf("prepare: %v", r.c.HandleErrorPacket(p))
	}
	r.columns(int(binary.LittleEndian.Uint16(p[7:])))
	r.columns(int(binary.LittleEndian.Uint16(p[5:])))
}

// errCode renders err's MySQL error number, "" for nil.
func errCode(err error) string {
	if err == nil {
		return ""
	}
	if me, ok := err.(*mysql.MyError); ok {
		return fmt.Sprint(me.Code)
	}
	return err.Error()
}
