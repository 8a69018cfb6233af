package proxy

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/rules"
)

// greetingOf returns the payload of the greeting the server at addr
// sends.
func greetingOf(t *testing.T, addr string) []byte {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return readGreeting(t, c)
}

// TestGreetingExtendedCapabilities: lockproxy's greeting offers MariaDB's
// extended capabilities it relays (bulk execute, extended metadata) when
// the primary offers them, in the reserved bytes MariaDB uses, with
// CLIENT_MYSQL clear as MariaDB's greeting has it; not progress reports
// nor metadata caching.
func TestGreetingExtendedCapabilities(t *testing.T) {
	p := startProxy(t, nil)
	direct := greetingOf(t, p.bed.PrimaryAddr)
	primaryExt, ok := greetingExtCaps(direct)
	if !ok || primaryExt&relayedExtCaps != relayedExtCaps {
		t.Fatalf("the bed's MariaDB offers extended capabilities %#x (parsed: %v), want at least %#x", primaryExt, ok, relayedExtCaps)
	}
	// The greeting by hand: the version, the connection id, the
	// scramble's first part and its filler, then the capabilities.
	g := greetingOf(t, p.addr)
	pos := strings.IndexByte(string(g[1:]), 0) + 2 + 4 + 8 + 1
	caps := uint32(binary.LittleEndian.Uint16(g[pos:])) | uint32(binary.LittleEndian.Uint16(g[pos+5:]))<<16
	ext := binary.LittleEndian.Uint32(g[pos+2+1+2+2+1+6:])
	if caps&mysql.CLIENT_LONG_PASSWORD != 0 {
		t.Errorf("greeting capabilities %#x set CLIENT_MYSQL (bit 0): MariaDB clients then ignore the extended ones", caps)
	}
	if want := mariadbBulk | mariadbExtendedMetadata; ext != want {
		t.Errorf("greeting offers extended capabilities %#x, want %#x (bulk, extended metadata; not progress %#x nor cache metadata %#x)",
			ext, want, mariadbProgress, mariadbCacheMetadata)
	}
	if got, _ := greetingExtCaps(g); got != ext {
		t.Errorf("greetingExtCaps reads %#x from lockproxy's greeting, the bytes say %#x", got, ext)
	}
}

// extCapsTables are the tables extcaps.js reads and writes.
var extCapsTables = []string{
	"CREATE TABLE ext_t (id INT PRIMARY KEY, j JSON, u UUID, i INET6, g GEOMETRY, p POINT)",
	`INSERT INTO ext_t VALUES (1, '{"a": [1, 2], "b": null}', '123e4567-e89b-12d3-a456-426655440000', '2001:db8::1',
		ST_GeomFromText('LINESTRING(0 0,1 1)'), POINT(1, 2))`,
	"CREATE TABLE bulk_t (id INT PRIMARY KEY, name VARCHAR(40), qty INT)",
}

// TestMariaDBExtendedCapabilities runs extcaps.js (node mysql2 and MariaDB
// Connector/Node) directly and through lockproxy: without rules, with a
// rule on the table batch() writes, with a replica, and over TLS to the
// backend (the extended capabilities then travel in the SSLRequest). The
// transcripts must match: JSON read as an object, UUID, INET6 and POINT
// named by the extended metadata, batch() sent as COM_STMT_BULK_EXECUTE,
// its rows and its failure (a duplicate key undoes the whole batch) alike,
// and an execute without parameter types answered 1835 as MariaDB does.
func TestMariaDBExtendedCapabilities(t *testing.T) {
	bed := testbedFor(t)
	tool := requireTool(t, "node", "-e", "require('./testdata/clients/node_modules/mysql2'); require('./testdata/clients/node_modules/mariadb/dist/promise.cjs')")
	bulkRule := []rules.Rule{{Name: "bulk", Table: "bulk_t", Key: []string{"id"}, Lock: []string{rules.LockWrite}}}
	plain := startProxy(t, nil)
	withRule := startProxyWith(t, func(c *rules.Config) { c.Rules = bulkRule }, memlock.New(nil, nil))
	replica := startProxyWith(t, func(c *rules.Config) {
		c.Rules = bulkRule
		c.Backends.Replicas = []string{bed.ReplicaAddr}
		c.Backends.MaxReplicaLag = rules.Duration(2 * time.Second)
	}, memlock.New(nil, nil))
	var tlsProxy *testProxy
	if bed.TLSUser != "" && bed.TLSCA != "" {
		tlsProxy = startProxy(t, func(c *rules.Config) {
			c.Users = []rules.User{{User: bed.TLSUser, Password: bed.Password}}
			c.Backends.TLS = &rules.TLSClientConfig{CA: bed.TLSCA}
		})
	} else {
		t.Fatal("the test bed has no TLS user (scripts/testbed.sh up makes one)")
	}
	runs := []struct{ name, addr, user string }{
		{"direct", bed.PrimaryAddr, bed.User},
		{"proxy", plain.addr, bed.User},
		{"proxy_rule", withRule.addr, bed.User},
		{"proxy_replica", replica.addr, bed.User},
		{"proxy_tls_backend", tlsProxy.addr, bed.TLSUser},
	}
	outs := make([]runOutput, len(runs))
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		db := freshNamedDB(t, plain, "extcaps_"+r.name)
		testbed.MustExec(t, plain.direct(t, db, ""), extCapsTables...)
		host, port := splitAddr(t, r.addr)
		env := []string{"LP_HOST=" + host, "LP_PORT=" + port, "LP_USER=" + r.user, "LP_PASSWORD=" + bed.Password, "LP_DB=" + db}
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = execClient(db, env, "", tool, "testdata/clients/extcaps.js")
		}()
	}
	wg.Wait()
	for i, r := range runs {
		if errs[i] != nil || outs[i].code != 0 {
			t.Fatalf("%s: %v exit %d\nstdout:\n%s\nstderr:\n%s", r.name, errs[i], outs[i].code, outs[i].stdout, outs[i].stderr)
		}
	}
	checkLines(t, "direct", outs[0].stdout, []string{
		`mysql2 text rows: [{"j":{"a":[1,2],"b":null},"jtype":"object"`,
		`mysql2 prepared fields: [["j",252,null,"json"],["u",254,"uuid",null],["i",254,"inet6",null],["g",255,null,null],["p",255,"point",null]]`,
		"connector bulk negotiated: true", "connector extended metadata negotiated: true",
		`connector prepared meta: [["j","BLOB",null,null],["u","STRING","uuid",null],["i","STRING","inet6",null],["g","GEOMETRY",null,null],["p","GEOMETRY","point",null]]`,
		`batch insert: {"affectedRows":300,"warningStatus":0}`, `batch update: {"affectedRows":300}`,
		`connector execute without types: "error 1835 HY000 fatal=false malformed=true"`,
		"batch duplicate: error 1062", `after batches: {"n":"300n","s":"1197","m":"name-99"}`,
	})
	for i, r := range runs[1:] {
		if d, got := outs[0].stdout, outs[i+1].stdout; d != got {
			t.Errorf("%s: transcript differs from direct:\n%s", r.name, lineDiff(d, got))
		}
	}
	if testing.Verbose() {
		t.Logf("direct:\n%s", outs[0].stdout)
	}
}

// dialExt opens a raw connection to addr that negotiates MariaDB's
// extended capabilities want (go-mysql's client knows nothing of them:
// extCapsConn writes them).
func dialExt(t *testing.T, addr, user, password, db string, want uint32) *rawConn {
	t.Helper()
	var ec *extCapsConn
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		ec = &extCapsConn{Conn: nc, want: want}
		return ec, nil
	}
	opt := func(c *client.Conn) error {
		c.UnsetCapability(mysql.CLIENT_QUERY_ATTRIBUTES)
		c.UnsetCapability(mysql.CLIENT_DEPRECATE_EOF)
		c.UnsetCapability(clientMySQL)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.ConnectWithDialer(ctx, "tcp", addr, user, password, db, dial, opt)
	if err != nil {
		t.Fatalf("connect %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if ec.serverExt()&want != want {
		t.Fatalf("%s offers extended capabilities %#x, not all of %#x", addr, ec.serverExt(), want)
	}
	return &rawConn{t: t, c: c}
}

// bulk sends COM_STMT_BULK_EXECUTE of statement id with BIGINT parameter
// sets (types sent) and returns the server's answer.
func (r *rawConn) bulk(id uint32, rows ...[]int64) error {
	r.t.Helper()
	p := binary.LittleEndian.AppendUint32([]byte{comStmtBulkExecute}, id)
	p = binary.LittleEndian.AppendUint16(p, bulkSendTypes)
	for range rows[0] {
		p = append(p, mysql.MYSQL_TYPE_LONGLONG, 0)
	}
	for _, row := range rows {
		for _, v := range row {
			p = binary.LittleEndian.AppendUint64(append(p, bulkNone), uint64(v))
		}
	}
	r.send(p...)
	ans := r.read()
	switch ans[0] {
	case mysql.OK_HEADER:
		return nil
	case mysql.ERR_HEADER:
		return r.c.HandleErrorPacket(ans)
	}
	r.t.Fatalf("bulk execute: unexpected answer %x", ans)
	return nil
}

// TestBulkExecuteTakesEveryRowsLock: a bulk execute of a guarded
// statement runs under the locks of every row of every parameter set: a
// row another session holds makes the whole command wait (here: time out
// with lockproxy's 1205, nothing run), and once it is free the command
// runs as MariaDB runs it. One the rule would rewrite is refused with
// 1105, not run.
func TestBulkExecuteTakesEveryRowsLock(t *testing.T) {
	p := startProxyWith(t, func(c *rules.Config) {
		c.Rules = []rules.Rule{
			{Name: "bulk", Table: "bulk_t", Key: []string{"id"}, Lock: []string{rules.LockWrite},
				WaitTimeout: rules.Duration(300 * time.Millisecond)},
			{Name: "stock", Table: "stock_t", Key: []string{"id"}, Lock: []string{rules.LockWrite, rules.LockLockingRead},
				Rewrite: &rules.Rewrite{Column: "qty", Mode: "delta"}},
		}
	}, memlock.New(nil, nil))
	db := freshDB(t, p)
	direct := p.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE bulk_t (id BIGINT PRIMARY KEY, qty BIGINT)",
		"INSERT INTO bulk_t VALUES (1, 0), (2, 0), (3, 0), (40, 0)",
		"CREATE TABLE stock_t (id BIGINT PRIMARY KEY, qty BIGINT)", "INSERT INTO stock_t VALUES (1, 10)")

	holder := p.db(t, db, "")
	hc, err := holder.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	mustConnExec(t, hc, "BEGIN", "UPDATE bulk_t SET qty = qty WHERE id = 40") // holds row 40's lock

	r := dialExt(t, p.addr, p.bed.User, p.bed.Password, db, mariadbBulk)
	id, n := r.prepare("UPDATE bulk_t SET qty = qty + ? WHERE id = ?")
	if n != 2 {
		t.Fatalf("prepare: %d parameters", n)
	}
	if err := r.bulk(id, []int64{1, 1}, []int64{1, 2}); err != nil {
		t.Fatalf("bulk of free rows: %v", err)
	}
	err = r.bulk(id, []int64{5, 3}, []int64{5, 40}, []int64{5, 1})
	wantError(t, "bulk touching a held row", err, 1205, true)
	if err != nil && !strings.Contains(err.Error(), `bulk`) {
		t.Errorf("the wait's error does not name the rule: %v", err)
	}
	var sum int
	if err := direct.QueryRow("SELECT SUM(qty) FROM bulk_t").Scan(&sum); err != nil || sum != 2 {
		t.Errorf("after the refused bulk: sum %d (%v), want 2: none of its rows may have run", sum, err)
	}
	mustConnExec(t, hc, "COMMIT")
	if err := r.bulk(id, []int64{5, 3}, []int64{5, 40}, []int64{5, 1}); err != nil {
		t.Fatalf("bulk once the row is free: %v", err)
	}
	if err := direct.QueryRow("SELECT SUM(qty) FROM bulk_t").Scan(&sum); err != nil || sum != 17 {
		t.Errorf("after the bulk: sum %d (%v), want 17", sum, err)
	}

	sid, _ := r.prepare("UPDATE stock_t SET qty = ? WHERE id = ?")
	err = r.bulk(sid, []int64{9, 1})
	wantError(t, "bulk of a rewritten UPDATE", err, 1105, true)
	if err != nil && !strings.Contains(err.Error(), "rule stock") {
		t.Errorf("refusal does not name the rule: %v", err)
	}
	var qty int
	if err := direct.QueryRow("SELECT qty FROM stock_t WHERE id = 1").Scan(&qty); err != nil || qty != 10 {
		t.Errorf("refused bulk changed the row: qty %d (%v)", qty, err)
	}
}

// FuzzBulkRow: reading a bulk execute's rows never panics and never reads
// past the packet.
func FuzzBulkRow(f *testing.F) {
	f.Add([]byte{bulkNone, 1, 0, 0, 0, 0, 0, 0, 0, bulkNull}, []byte{mysql.MYSQL_TYPE_LONGLONG, 0, mysql.MYSQL_TYPE_VAR_STRING, 0})
	f.Add([]byte{bulkNone, 3, 'a', 'b', 'c', 2}, []byte{mysql.MYSQL_TYPE_VAR_STRING, 0, mysql.MYSQL_TYPE_TINY, 0x80})
	f.Fuzz(func(t *testing.T, rows, types []byte) {
		n := len(types) / 2
		if n == 0 {
			return
		}
		for pos := 0; pos < len(rows); {
			params, next, err := bulkRow(rows, pos, n, types)
			if err != nil {
				return
			}
			if len(params) != n || next <= pos || next > len(rows) {
				t.Fatalf("bulkRow at %d: %d params, next %d of %d", pos, len(params), next, len(rows))
			}
			pos = next
		}
	})
}

// FuzzGreetingExtCaps: a backend's greeting of any shape is read without
// panicking.
func FuzzGreetingExtCaps(f *testing.F) {
	f.Add(initialHandshake("11.4.2-MariaDB", 7, make([]byte, 20), serverCaps, relayedExtCaps, "mysql_native_password"))
	f.Add([]byte{10, 'x'})
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _ = greetingExtCaps(p)
		_ = extCapsAt(p)
	})
}

// TestExtendedColumnDefinitions: lockproxy reads MariaDB's column
// definitions with extended metadata where it reads them (the column a
// rewrite captures, internal queries): the type and org_name come from
// the right bytes, through lockproxy as from MariaDB itself.
func TestExtendedColumnDefinitions(t *testing.T) {
	p := startProxy(t, nil)
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""), extCapsTables[:2]...)
	for _, target := range []clientTarget{{"direct", p.bed.PrimaryAddr}, {"proxy", p.addr}} {
		r := dialExt(t, target.addr, p.bed.User, p.bed.Password, db, mariadbExtendedMetadata)
		r.send(append([]byte{mysql.COM_QUERY}, "SELECT j, u AS id, p, id AS n FROM ext_t"...)...)
		if n := r.read(); len(n) != 1 || n[0] != 4 {
			t.Fatalf("%s: column count packet %x", target.name, n)
		}
		c := newCapture("k", "id", false)
		var types []byte
		for i := range 4 {
			def := append([]byte(nil), r.read()...)
			c.column(i, def, true)
			col, err := parseColumn(def, true)
			if err != nil {
				t.Fatalf("%s: column %d: %v", target.name, i, err)
			}
			types = append(types, col.typ)
		}
		if want := []byte{mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_GEOMETRY, mysql.MYSQL_TYPE_LONG}; string(types) != string(want) {
			t.Errorf("%s: types %v, want %v", target.name, types, want)
		}
		if c.col != 3 || c.bad || string(c.types) != string(types) {
			t.Errorf("%s: capture found the column at %d (bad %v, types %v), want 3", target.name, c.col, c.bad, c.types)
		}
		for p := r.read(); !r.isEnd(p); p = r.read() { // the EOF, the row, the EOF
		}
		for p := r.read(); !r.isEnd(p); p = r.read() {
		}
	}
}

// TestConnectorNodeWritesWait runs lockwaits.js through lockproxy with a
// rule on acct(id): every way MariaDB Connector/Node sends a write (text
// query(), execute(), prepare(), batch() with and without bulk, pipelined
// commands, a first execute sent as MariaDB's direct execute,
// queryStream(), a transaction, a multi-statement text) waits for the
// row's lock another session holds, seen waiting in SHOW LOCKPROXY LOCKS,
// and completes only once that lock is released.
func TestConnectorNodeWritesWait(t *testing.T) {
	tool := requireTool(t, "node", "-e", "require('./testdata/clients/node_modules/mariadb/dist/promise.cjs')")
	base := startProxy(t, nil)
	db := freshNamedDB(t, base, "lockwaits")
	testbed.MustExec(t, base.direct(t, db, ""), "CREATE TABLE acct (id INT PRIMARY KEY, bal INT NOT NULL)",
		"INSERT INTO acct VALUES (1, 0), (2, 0), (3, 0)")
	p := startProxyWith(t, func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "acct", Table: db + ".acct", Key: []string{"id"},
			Lock: []string{rules.LockWrite, rules.LockLockingRead}, OnUnkeyed: rules.OnUnkeyedReject,
			WaitTimeout: rules.Duration(30 * time.Second)}}
	}, memlock.New(nil, nil))
	host, port := splitAddr(t, p.addr)
	out, err := execClient(db, []string{"LP_HOST=" + host, "LP_PORT=" + port, "LP_USER=" + p.bed.User,
		"LP_PASSWORD=" + p.bed.Password, "LP_DB=" + db}, "", tool, "testdata/clients/lockwaits.js")
	if err != nil || out.code != 0 {
		t.Fatalf("lockwaits.js: %v exit %d\nstdout:\n%s\nstderr:\n%s", err, out.code, out.stdout, out.stderr)
	}
	paths := []string{"query()", "query() with parameters", "execute()", "execute() again", "prepare() and execute",
		"batch()", "batch() without bulk", "pipelined query()", "pipelined execute()", "pipelined first execute()",
		"queryStream()", "transaction", "multi-statement text"}
	got := strings.Split(strings.TrimSpace(out.stdout), "\n")
	if len(got) != len(paths) {
		t.Fatalf("%d lines, want one per path (%d):\n%s", len(got), len(paths), out.stdout)
	}
	for i, path := range paths {
		if want := path + ": waited"; got[i] != want {
			t.Errorf("%q, want %q", got[i], want)
		}
	}
	// Each write ran once, after its wait: row 1 got 1 from each path but
	// the two that add 2 and 3; row 2 one from each of the four that wrote it.
	var b1, b2 int
	if err := base.direct(t, db, "").QueryRow("SELECT (SELECT bal FROM acct WHERE id = 1), (SELECT bal FROM acct WHERE id = 2)").Scan(&b1, &b2); err != nil {
		t.Fatal(err)
	}
	if b1 != len(paths)+3 || b2 != 4 {
		t.Errorf("balances %d and %d, want %d and 4", b1, b2, len(paths)+3)
	}
}
