package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/router"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// The fuzz targets below feed untrusted client bytes to a whole session:
// during the handshake, and as command packets after a valid login. The
// invariants: no session panics (a panic is recovered by the session and
// logged as "session panic", which fails the input) and the proxy still
// serves a fresh client after every input.
//
// Inputs run against a real MariaDB: run the fuzzers on a bed of their own
// (docs/faults.md); inputs that could hurt the bed itself are skipped (see
// harmsBed), so the seeds and kept corpus are safe on a shared bed.

const (
	fuzzDB       = "fuzz_session"
	fuzzSentinel = "lockproxy-fuzz-sentinel"
)

// fuzzProxy is a Server for a fuzz target, started once per target, whose
// error-level log entries are captured.
type fuzzProxy struct {
	srv  *Server
	addr string
	bed  *testbed.Bed
	logs *observer.ObservedLogs
}

// startFuzzProxy runs a proxy with a guarded table (memory locks) so the
// locking paths see the fuzzed statements too.
func startFuzzProxy(f *testing.F) *fuzzProxy {
	f.Helper()
	return startFuzzProxyOn(f, false)
}

// startFuzzProxyOn is startFuzzProxy, with the bed's replica behind the
// proxy too when withReplica.
func startFuzzProxyOn(f *testing.F, withReplica bool) *fuzzProxy {
	f.Helper()
	bed := testbed.Get(f)
	replicas := ""
	if withReplica {
		replicas = "  replicas: [" + bed.ReplicaAddr + "]\n  max_replica_lag: 10s\n"
	}
	direct := openDB(f, bed.DSN(bed.PrimaryAddr, "", ""))
	testbed.MustExec(f, direct, "CREATE DATABASE IF NOT EXISTS "+fuzzDB,
		"CREATE TABLE IF NOT EXISTS "+fuzzDB+".sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL, note VARCHAR(64))",
		"INSERT IGNORE INTO "+fuzzDB+".sku VALUES (1, 1000000, 'a'), (2, 1000000, 'b')",
		"CREATE TABLE IF NOT EXISTS "+fuzzDB+".item (id BIGINT PRIMARY KEY, name VARCHAR(64))",
		"INSERT IGNORE INTO "+fuzzDB+".item VALUES (1, 'one'), (2, 'two')")
	cfg, err := rules.LoadBytes("fuzz.yaml", []byte(`proxy:
  handshake_timeout: 1s
users:
  - user: `+bed.User+`
    password: "`+bed.Password+`"
backends:
  primary: `+bed.PrimaryAddr+`
`+replicas+`locks:
  backend: memory
`))
	if err != nil {
		f.Fatal(err)
	}
	cfg.Rules = []rules.Rule{{Name: "sku-stock", Table: fuzzDB + ".sku", Key: []string{"sku_id"},
		Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
		OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(200 * time.Millisecond)}}
	core, logs := observer.New(zap.ErrorLevel)
	srv, err := New(cfg, Options{Logger: zap.New(core), Registry: prometheus.NewRegistry(), Locker: memlock.New(nil, nil)})
	if err != nil {
		f.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; err != nil {
			f.Errorf("Serve: %v", err)
		}
	})
	if withReplica {
		// Reads go to the replica once the router has measured its lag.
		deadline := time.Now().Add(30 * time.Second)
		for !replicaReady(srv) {
			if time.Now().After(deadline) {
				f.Fatalf("the replica never became eligible: %+v", srv.Backends())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return &fuzzProxy{srv: srv, addr: ln.Addr().String(), bed: bed, logs: logs}
}

// replicaReady reports whether srv's router finds a replica healthy with
// a known lag.
func replicaReady(srv *Server) bool {
	for _, b := range srv.Backends() {
		if b.Role == router.RoleReplica && b.Healthy && b.LagKnown {
			return true
		}
	}
	return false
}

// check fails t if the proxy logged a panic, or no longer serves a fresh
// client, since the last check.
func (p *fuzzProxy) check(t *testing.T) {
	t.Helper()
	// A session may still be winding down after its client left: wait for
	// the fresh client first, which gives it time to log.
	c, err := client.ConnectWithTimeout(p.addr, p.bed.User, p.bed.Password, fuzzDB, 10*time.Second)
	if err != nil {
		t.Fatalf("proxy no longer accepts a fresh client: %v", err)
	}
	defer c.Close()
	res, err := c.Execute("SELECT 1")
	if err != nil {
		t.Fatalf("proxy no longer serves a fresh client: %v", err)
	}
	if n, _ := res.GetInt(0, 0); n != 1 {
		t.Fatalf("SELECT 1 through the proxy returned %d", n)
	}
	for _, e := range p.logs.TakeAll() {
		if strings.Contains(e.Message, "panic") {
			t.Fatalf("proxy logged %q: %v", e.Message, e.ContextMap())
		}
	}
}

// FuzzSessionHandshake sends arbitrary bytes after the greeting, where the
// handshake response (or an SSL request) is due.
func FuzzSessionHandshake(f *testing.F) {
	for _, seed := range handshakeSeeds() {
		f.Add(seed)
	}
	p := startFuzzProxy(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := newPacketReader(c, 1<<16).readLogical(0); err != nil {
			_ = c.Close()
			t.Fatalf("greeting: %v", err)
		}
		_, _ = c.Write(data)
		// Whatever comes back, until the proxy hangs up or goes quiet (an
		// incomplete packet leaves it waiting: 50ms of quiet ends the run).
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, _ = io.Copy(io.Discard, c)
		_ = c.Close()
		p.check(t)
	})
}

// FuzzSessionCommands logs in properly, then sends the input as command
// packets (see splitPackets) followed by a sentinel query, and reads what
// comes back until the sentinel's answer, an error or a short deadline.
func FuzzSessionCommands(f *testing.F) {
	for _, seed := range commandSeeds() {
		f.Add(seed)
	}
	p := startFuzzProxy(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		packets := splitPackets(data)
		if harmsBed(data, packets) {
			t.Skip("could stop the bed's server or end other tests' connections or databases")
		}
		c, err := client.ConnectWithTimeout(p.addr, p.bed.User, p.bed.Password, fuzzDB, 10*time.Second)
		if err != nil {
			t.Fatalf("login: %v", err)
		}
		fuzzExchange(c, packets)
		_ = c.Close()
		p.check(t)
	})
}

// harmsBed reports inputs that could hurt the (possibly shared) test bed
// rather than the proxy: SHUTDOWN, KILL, DROP, and COM_PROCESS_KILL of an
// arbitrary connection id. The proxy only relays these.
func harmsBed(data []byte, packets [][]byte) bool {
	low := bytes.ToLower(data)
	for _, w := range []string{"shutdown", "kill", "drop"} {
		if bytes.Contains(low, []byte(w)) {
			return true
		}
	}
	for _, p := range packets {
		if len(p) > 0 && p[0] == mysql.COM_PROCESS_KILL {
			return true
		}
	}
	return false
}

// fuzzExchange writes each command packet and then the sentinel query, reading
// responses until the sentinel's row is seen, the connection ends or 2s
// have passed. Errors are the point of the exercise and are ignored.
func fuzzExchange(c *client.Conn, packets [][]byte) {
	deadline := time.Now().Add(2 * time.Second)
	_ = c.SetDeadline(deadline)
	for _, pk := range packets {
		c.ResetSequence()
		if err := c.WritePacket(append(make([]byte, 4), pk...)); err != nil {
			return
		}
	}
	c.ResetSequence()
	if err := c.WritePacket(append([]byte{0, 0, 0, 0, mysql.COM_QUERY}, "SELECT '"+fuzzSentinel+"'"...)); err != nil {
		return
	}
	// Read raw: the client's own reader insists on sequence ids that
	// pipelined commands do not have.
	r := newPacketReader(c.Conn.Conn, 1<<16)
	for {
		_, p, err := r.readPhysical()
		if err != nil {
			return // deadline, or the proxy hung up
		}
		if bytes.Contains(p, []byte(fuzzSentinel)) && !bytes.Contains(p, []byte("SELECT")) {
			return
		}
	}
}

// splitPackets turns an input into at most 8 command packets: each is
// prefixed by a 2-byte little-endian length; a length of 0 or one beyond
// the input's end makes the rest of the input the last packet.
func splitPackets(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 && len(out) < 8 {
		if len(data) < 2 {
			return append(out, data)
		}
		n := int(binary.LittleEndian.Uint16(data))
		if n == 0 || n > len(data)-2 || len(out) == 7 {
			return append(out, data[2:])
		}
		out = append(out, data[2:2+n])
		data = data[2+n:]
	}
	return out
}

// joinPackets is splitPackets' inverse, for seeds.
func joinPackets(packets ...[]byte) []byte {
	var out []byte
	for _, p := range packets {
		out = binary.LittleEndian.AppendUint16(out, uint16(len(p)))
		out = append(out, p...)
	}
	return out
}

func cmd(code byte, body ...[]byte) []byte {
	out := []byte{code}
	for _, b := range body {
		out = append(out, b...)
	}
	return out
}

func query(q string) []byte { return cmd(mysql.COM_QUERY, []byte(q)) }

// execute builds COM_STMT_EXECUTE for statement id with parameters of the
// given types (2 bytes each) and values, newly bound.
func execute(id uint32, nulls byte, types []byte, values ...[]byte) []byte {
	p := []byte{mysql.COM_STMT_EXECUTE}
	p = binary.LittleEndian.AppendUint32(p, id)
	p = append(p, 0)                           // flags: no cursor
	p = binary.LittleEndian.AppendUint32(p, 1) // iteration count
	p = append(p, nulls, 1)                    // null bitmap (up to 8 params), new-params-bound
	p = append(p, types...)                    // type, unsigned flag per parameter
	for _, v := range values {
		p = append(p, v...)
	}
	return p
}

func lenc(s string) []byte { return append([]byte{byte(len(s))}, s...) }

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func stmtID(code byte, id uint32, rest ...byte) []byte {
	return append(binary.LittleEndian.AppendUint32([]byte{code}, id), rest...)
}

func commandSeeds() [][]byte {
	prep := cmd(mysql.COM_STMT_PREPARE, []byte("SELECT stock, note FROM sku WHERE sku_id = ?"))
	prepUpd := cmd(mysql.COM_STMT_PREPARE, []byte("UPDATE sku SET stock = ?, note = ? WHERE sku_id = ?"))
	changeUser := cmd(mysql.COM_CHANGE_USER, []byte("nobody\x00"), []byte{0}, []byte(fuzzDB+"\x00"),
		[]byte{33, 0}, []byte("mysql_native_password\x00"))
	datetime := []byte{7, 0xea, 0x07, 11, 29, 12, 30, 45}
	return [][]byte{
		joinPackets(query("SELECT 1")),
		joinPackets(query("BEGIN"), query("SELECT stock FROM sku WHERE sku_id = 1"),
			query("UPDATE sku SET stock = 999999 WHERE sku_id = 1"), query("ROLLBACK")),
		joinPackets(query("UPDATE sku SET stock = 0")),
		joinPackets(query("SELECT * FROM sku WHERE sku_id IN (1, '2', 2.0) FOR UPDATE")),
		joinPackets(query("SHOW LOCKPROXY LOCKS"), query("SHOW LOCKPROXY STATUS"), query("SHOW LOCKPROXY RULES")),
		joinPackets(query("SELECT 1; SELECT 2")),
		joinPackets(cmd(mysql.COM_INIT_DB, []byte(fuzzDB)), cmd(mysql.COM_PING), cmd(mysql.COM_STATISTICS)),
		joinPackets(cmd(mysql.COM_FIELD_LIST, []byte("sku\x00"))),
		joinPackets(cmd(mysql.COM_FIELD_LIST, []byte("sku\x00st%"))),
		joinPackets(prep, execute(1, 0, []byte{mysql.MYSQL_TYPE_LONGLONG, 0}, le64(1))),
		joinPackets(prep, execute(1, 0, []byte{mysql.MYSQL_TYPE_VAR_STRING, 0}, lenc("2"))),
		joinPackets(prep, execute(1, 1, []byte{mysql.MYSQL_TYPE_NULL, 0})),
		joinPackets(prep, execute(1, 0, []byte{mysql.MYSQL_TYPE_DOUBLE, 0}, le64(math.Float64bits(1)))),
		joinPackets(prep, execute(1, 0, []byte{mysql.MYSQL_TYPE_NEWDECIMAL, 0}, lenc("1.0"))),
		joinPackets(prep, execute(1, 0, []byte{mysql.MYSQL_TYPE_DATETIME, 0}, datetime)),
		joinPackets(prep, execute(1, 0, []byte{mysql.MYSQL_TYPE_TINY, 0x80}, []byte{1})),
		joinPackets(query("BEGIN"), prepUpd, execute(1, 0,
			[]byte{mysql.MYSQL_TYPE_LONG, 0, mysql.MYSQL_TYPE_STRING, 0, mysql.MYSQL_TYPE_LONGLONG, 0},
			[]byte{0x3f, 0x42, 0x0f, 0}, lenc("x"), le64(2)), query("ROLLBACK")),
		joinPackets(prep, stmtID(mysql.COM_STMT_SEND_LONG_DATA, 1, 0, 0, '1'),
			execute(1, 0, []byte{mysql.MYSQL_TYPE_BLOB, 0})),
		joinPackets(prep, stmtID(mysql.COM_STMT_RESET, 1), stmtID(mysql.COM_STMT_CLOSE, 1),
			execute(1, 0, []byte{mysql.MYSQL_TYPE_LONGLONG, 0}, le64(1))),
		joinPackets(prep, stmtID(mysql.COM_STMT_FETCH, 1, 1, 0, 0, 0)),
		joinPackets(prep, append(stmtID(mysql.COM_STMT_EXECUTE, 1, 1), 1, 0, 0, 0, 0, 1, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0),
			stmtID(mysql.COM_STMT_FETCH, 1, 10, 0, 0, 0)),
		joinPackets(changeUser),
		joinPackets(cmd(mysql.COM_RESET_CONNECTION), query("SELECT 1")),
		joinPackets(cmd(mysql.COM_SET_OPTION, []byte{0, 0})),
		// Truncated packets.
		joinPackets(prep, []byte{mysql.COM_STMT_EXECUTE, 1, 0}),
		joinPackets(prep, execute(1, 0, nil)),
		joinPackets(prep, execute(1, 0, []byte{mysql.MYSQL_TYPE_LONGLONG, 0}, []byte{1, 0})),
		joinPackets(prep, execute(1, 0, []byte{mysql.MYSQL_TYPE_VAR_STRING, 0}, []byte{0xfc, 0xff})),
		{mysql.COM_STMT_PREPARE},
		{mysql.COM_CHANGE_USER},
		{mysql.COM_CHANGE_USER, 'x', 0, 0xff},
		{mysql.COM_FIELD_LIST},
		{mysql.COM_STMT_SEND_LONG_DATA, 1},
		{mysql.COM_QUERY},
		{0xff},
	}
}

func handshakeSeeds() [][]byte {
	// A well-formed HandshakeResponse41 with a wrong scramble, and pieces of it.
	resp := binary.LittleEndian.AppendUint32(nil, mysql.CLIENT_PROTOCOL_41|mysql.CLIENT_SECURE_CONNECTION|
		mysql.CLIENT_PLUGIN_AUTH|mysql.CLIENT_CONNECT_WITH_DB|mysql.CLIENT_CONNECT_ATTRS|mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA)
	resp = binary.LittleEndian.AppendUint32(resp, 1<<24)
	resp = append(resp, 33)
	resp = append(resp, make([]byte, 23)...)
	resp = append(resp, "root\x00"...)
	resp = append(resp, 20)
	resp = append(resp, bytes.Repeat([]byte{0xab}, 20)...)
	resp = append(resp, fuzzDB+"\x00mysql_native_password\x00"...)
	resp = append(resp, 10, 3, 'a', 'b', 'c', 5, 'v', 'a', 'l', 'u', 'e')
	framed := func(seq byte, p []byte) []byte {
		return append([]byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), seq}, p...)
	}
	ssl := binary.LittleEndian.AppendUint32(nil, mysql.CLIENT_PROTOCOL_41|mysql.CLIENT_SSL)
	ssl = append(binary.LittleEndian.AppendUint32(ssl, 1<<24), 33)
	ssl = append(ssl, make([]byte, 23)...)
	return [][]byte{
		framed(1, resp),
		framed(1, resp[:40]),
		framed(1, ssl),
		framed(2, resp),
		append(framed(1, resp), framed(3, []byte("secret\x00"))...),
		framed(1, nil),
		{0xff, 0xff, 0xff, 1},
		{5, 0, 0, 1, 1, 2},
		bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 16),
	}
}
