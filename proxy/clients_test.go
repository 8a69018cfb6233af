package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// Transparency tests for real client programs: the mariadb command-line
// client, PyMySQL and sysbench see through lockproxy exactly what they see
// straight from MariaDB.

// systemPython is the interpreter that has PyMySQL (Debian's
// python3-pymysql); the python3 on PATH may be another one.
const systemPython = "/usr/bin/python3"

// requireTool returns the path of a program the test needs, after running
// it with checkArgs (if any) to prove it works. A missing tool fails the
// test under CI=true and skips it otherwise.
func requireTool(t *testing.T, name string, checkArgs ...string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil && len(checkArgs) > 0 {
		if out, cerr := exec.Command(path, checkArgs...).CombinedOutput(); cerr != nil {
			err = fmt.Errorf("%s %s: %v: %s", name, strings.Join(checkArgs, " "), cerr, out)
		}
	}
	if err != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("%v (CI=true: a missing client is a failure; run scripts/testbed.sh install)", err)
		}
		t.Skipf("skipped: %v (run scripts/testbed.sh install)", err)
	}
	return path
}

// clientTarget is one server a client program is pointed at.
type clientTarget struct {
	name string
	addr string
}

// clientTargets are the primary itself and lockproxy announcing each auth
// plugin it supports.
func clientTargets(t *testing.T) (*testProxy, []clientTarget) {
	native := startProxy(t, nil)
	sha2 := startProxyOpts(t, Options{AuthPlugin: "caching_sha2_password"})
	return native, []clientTarget{
		{"direct", native.bed.PrimaryAddr},
		{"proxy_native", native.addr},
		{"proxy_sha2", sha2.addr},
	}
}

// runOutput is what one run of a client program produced.
type runOutput struct {
	stdout, stderr string
	code           int
}

// runClient executes a client program and normalises the database name it may
// print.
func runClient(t *testing.T, db string, env []string, stdin string, name string, args ...string) runOutput {
	t.Helper()
	out, err := execClient(db, env, stdin, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// execClient is runClient for any goroutine: a program that could not be
// run (not one that exited with an error) is an error.
func execClient(db string, env []string, stdin string, name string, args ...string) (runOutput, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			return runOutput{}, err
		}
		defer f.Close()
		cmd.Stdin = f
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return runOutput{}, fmt.Errorf("%s: %w", name, err)
	}
	r := strings.NewReplacer(db, "<db>")
	return runOutput{stdout: r.Replace(stdout.String()), stderr: r.Replace(stderr.String()), code: cmd.ProcessState.ExitCode()}, nil
}

// assertSameOutput fails when a run differs from the direct one.
func assertSameOutput(t *testing.T, target string, direct, got runOutput) {
	t.Helper()
	if got.code != direct.code {
		t.Errorf("%s: exit code %d, direct %d", target, got.code, direct.code)
	}
	if got.stdout != direct.stdout {
		t.Errorf("%s: stdout differs from direct:\n%s", target, lineDiff(direct.stdout, got.stdout))
	}
	if got.stderr != direct.stderr {
		t.Errorf("%s: stderr differs from direct:\n%s", target, lineDiff(direct.stderr, got.stderr))
	}
}

func TestMariaDBCLI(t *testing.T) {
	cli := requireTool(t, "mariadb", "--version")
	p, targets := clientTargets(t)
	cases := []struct {
		name       string
		args       []string
		script     string
		wantOut    []string
		wantErr    []string
		wantStatus int
	}{
		{"script_batch", []string{"--batch", "--skip-column-names", "--force"}, "testdata/cli.sql",
			[]string{"1\tapple\t1.50\t2024-02-29 12:34:56.789012\t00FF00\t10\t18446744073709551615\n",
				"Warning (Code 1365): Division by 0", "multi-2\t2\n", "apple\n", "apple\t42\n", "the end\n"},
			[]string{"ERROR 1062 (23000) at line 23", "ERROR 1146 (42S02) at line 24", "ERROR 1243 (HY000) at line 72"}, 0},
		{"script_table_column_types", []string{"--table", "--column-type-info", "--force"}, "testdata/cli.sql",
			[]string{"Database:   `<db>`", "Type:       NEWDECIMAL", "| the end |"}, []string{"ERROR 1062"}, 0},
		{"execute_multi", []string{"--batch", "-e", "SELECT 1 AS a; SELECT 'x' AS b, NULL AS c; DO 1/0; SHOW WARNINGS"}, "",
			[]string{"a\n1\nb\tc\nx\tNULL\n", "Warning\t1365\tDivision by 0"}, nil, 0},
		{"show_warnings_flag", []string{"--batch", "--show-warnings", "-e", "SELECT 1/0, CAST('12abc' AS INT)"}, "",
			[]string{"NULL\t12\n", "Warning (Code 1292): Truncated incorrect INTEGER value: '12abc'"}, nil, 0},
		{"server_default_charset", []string{"--batch", "--skip-column-names", "--default-character-set=latin1", "-e",
			"SELECT @@character_set_client, @@collation_connection, HEX('é'), 'é'"}, "",
			[]string{"latin1\tlatin1_swedish_ci\t"}, nil, 0},
		{"load_data_local_infile", []string{"--batch", "--local-infile=1", "-e",
			"CREATE TABLE l (id INT PRIMARY KEY, name VARCHAR(10), x DECIMAL(6,2)); " +
				"LOAD DATA LOCAL INFILE 'testdata/cli_load.tsv' INTO TABLE l; SELECT * FROM l ORDER BY id; " +
				"LOAD DATA LOCAL INFILE 'testdata/no_such_file.tsv' INTO TABLE l"}, "",
			[]string{"3\tgam\\tma\t-0.25\n", "4\tété\t100.00\n"}, []string{"no_such_file.tsv"}, 1},
		{"compression_requested", []string{"--batch", "--compress", "-e", "SELECT REPEAT('z', 5000) = REPEAT('z', 5000)"}, "",
			[]string{"1\n"}, nil, 0},
		{"ignore_spaces", []string{"--batch", "--skip-column-names", "--ignore-spaces", "-e",
			"SELECT @@sql_mode LIKE '%IGNORE_SPACE%', COUNT (*)"}, "", []string{"1\t1\n"}, nil, 0},
		{"no_ignore_spaces", []string{"--batch", "--skip-column-names", "-e",
			"SELECT @@sql_mode LIKE '%IGNORE_SPACE%'"}, "", []string{"0\n"}, nil, 0},
		{"error_stops_without_force", []string{"--batch", "-e", "SELECT 1; SELECT * FROM nowhere; SELECT 2"}, "",
			[]string{"1\n1\n"}, []string{"ERROR 1146 (42S02) at line 1: Table '<db>.nowhere' doesn't exist"}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var direct runOutput
			for i, tg := range targets {
				db := freshNamedDB(t, p, dbName(t, tg.name))
				host, port := splitAddr(t, tg.addr)
				args := append([]string{"--no-defaults", "-h", host, "-P", port, "-u", p.bed.User, "-p" + p.bed.Password,
					"--default-character-set=utf8mb4", db}, c.args...) // a later option wins
				got := runClient(t, db, nil, c.script, cli, args...)
				if i == 0 {
					direct = got
					checkFragments(t, got, c.wantOut, c.wantErr)
					if got.code != c.wantStatus {
						t.Errorf("direct exit code %d, want %d (stderr %s)", got.code, c.wantStatus, got.stderr)
					}
					continue
				}
				assertSameOutput(t, tg.name, direct, got)
			}
		})
	}
}

// checkFragments proves a run did what the script meant, so that two
// identical but wrong outputs cannot pass.
func checkFragments(t *testing.T, got runOutput, stdout, stderr []string) {
	t.Helper()
	for _, f := range stdout {
		if !strings.Contains(got.stdout, f) {
			t.Errorf("stdout lacks %q:\n%s", f, got.stdout)
		}
	}
	for _, f := range stderr {
		if !strings.Contains(got.stderr, f) {
			t.Errorf("stderr lacks %q:\n%s", f, got.stderr)
		}
	}
}

// freshNamedDB drops and creates a database on the primary.
func freshNamedDB(t *testing.T, p *testProxy, name string) string {
	t.Helper()
	testbed.MustExec(t, p.direct(t, "", ""), "DROP DATABASE IF EXISTS `"+name+"`", "CREATE DATABASE `"+name+"`")
	return name
}

func splitAddr(t *testing.T, addr string) (string, string) {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		t.Fatalf("bad address %q", addr)
	}
	return addr[:i], addr[i+1:]
}

func TestPyMySQL(t *testing.T) {
	py := requireTool(t, systemPython, "-c", "import pymysql")
	p, targets := clientTargets(t)
	var direct runOutput
	for i, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			db := freshNamedDB(t, p, dbName(t, "py"))
			host, port := splitAddr(t, tg.addr)
			env := []string{"LP_HOST=" + host, "LP_PORT=" + port, "LP_USER=" + p.bed.User,
				"LP_PASSWORD=" + p.bed.Password, "LP_DB=" + db, "PYTHONDONTWRITEBYTECODE=1"}
			got := runClient(t, db, env, "", py, "testdata/pymysql_workload.py")
			if got.code != 0 || got.stderr != "" {
				t.Fatalf("exit %d, stderr:\n%s\nstdout:\n%s", got.code, got.stderr, got.stdout)
			}
			if i == 0 {
				direct = got
				checkFragments(t, got, []string{"autocommit: False\n", "server_status_in_trans: False\n",
					"IntegrityError (1062,", "  row: (0,)\n", "callproc set 1: (('alpha',), ('beta',))",
					"autocommit after set: True", "select_db missing -> OperationalError (1049,",
					"streamed sum: 12502500", "bad password -> OperationalError 1045"}, nil)
				return
			}
			assertSameOutput(t, tg.name, direct, got)
		})
	}
}

// sysbenchStats matches the counters of sysbench's report.
var sysbenchStats = regexp.MustCompile(`(?m)^\s+(transactions|queries|ignored errors|reconnects):\s+(\d+)\s`)

func TestSysbench(t *testing.T) {
	sb := requireTool(t, "sysbench", "--version")
	p := startProxy(t, nil)
	host, port := splitAddr(t, p.bed.PrimaryAddr)
	proxyHost, proxyPort := splitAddr(t, p.addr)
	for _, mode := range []string{"auto", "disable"} {
		t.Run("db-ps-mode="+mode, func(t *testing.T) {
			db := freshNamedDB(t, p, dbName(t, "sb"))
			common := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-user=" + p.bed.User,
				"--mysql-password=" + p.bed.Password, "--mysql-db=" + db, "--tables=2", "--table-size=2000"}
			prep := runClient(t, db, nil, "", sb, append(common, "--mysql-host="+host, "--mysql-port="+port, "prepare")...)
			if prep.code != 0 {
				t.Fatalf("prepare directly on the primary: exit %d\n%s%s", prep.code, prep.stdout, prep.stderr)
			}
			got := runClient(t, db, nil, "", sb, append(common, "--mysql-host="+proxyHost, "--mysql-port="+proxyPort,
				"--threads=1", "--events=300", "--time=0", "--db-ps-mode="+mode, "--mysql-ignore-errors=none", "run")...)
			report := got.stdout + got.stderr
			if got.code != 0 || strings.Contains(report, "FATAL") || strings.Contains(report, "ALERT") {
				t.Fatalf("run through the proxy: exit %d\n%s", got.code, report)
			}
			stats := map[string]int{}
			for _, m := range sysbenchStats.FindAllStringSubmatch(got.stdout, -1) {
				stats[m[1]], _ = strconv.Atoi(m[2])
			}
			if len(stats) != 4 || stats["transactions"] != 300 || stats["queries"] == 0 ||
				stats["ignored errors"] != 0 || stats["reconnects"] != 0 {
				t.Errorf("sysbench counters %v, want 300 transactions and no errors or reconnects:\n%s", stats, got.stdout)
			}
			d := p.direct(t, db, "")
			for _, table := range []string{"sbtest1", "sbtest2"} {
				var n int
				if err := d.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil || n != 2000 {
					t.Errorf("%s has %d rows (%v) after the run, want 2000", table, n, err)
				}
			}
		})
	}
}

// rawConn speaks the command phase by hand over a go-mysql client
// connection, for commands and packet shapes that drivers seldom send.
type rawConn struct {
	t            *testing.T
	c            *client.Conn
	salt         []byte // scramble of the initial handshake
	deprecateEOF bool
}

// greetingConn keeps the first bytes the server sends: the greeting.
type greetingConn struct {
	net.Conn
	greeting []byte
}

func (g *greetingConn) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	if len(g.greeting) < 512 {
		g.greeting = append(g.greeting, p[:n]...)
	}
	return n, err
}

func dialRaw(t *testing.T, addr, user, password, db string, deprecateEOF bool, caps ...uint32) *rawConn {
	t.Helper()
	var gc *greetingConn
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		gc = &greetingConn{Conn: nc}
		return gc, nil
	}
	opt := func(c *client.Conn) error {
		c.UnsetCapability(mysql.CLIENT_QUERY_ATTRIBUTES)
		if !deprecateEOF {
			c.UnsetCapability(mysql.CLIENT_DEPRECATE_EOF)
		}
		for _, f := range caps {
			if err := c.SetCapability(f); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.ConnectWithDialer(ctx, "tcp", addr, user, password, db, dial, opt)
	if err != nil {
		t.Fatalf("connect %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, c: c, salt: greetingSalt(t, gc.greeting), deprecateEOF: deprecateEOF}
}

// greetingSalt extracts the 20-byte scramble from a HandshakeV10 packet.
func greetingSalt(t *testing.T, b []byte) []byte {
	t.Helper()
	if len(b) < 4 {
		t.Fatal("no greeting recorded")
	}
	p := b[4:min(len(b), 4+int(b[0])|int(b[1])<<8|int(b[2])<<16)]
	pos := 1 + bytes.IndexByte(p[1:], 0) + 1 + 4 // version, NUL, connection id
	salt := append([]byte(nil), p[pos:pos+8]...)
	pos += 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10 // filler, caps, charset, status, caps, length, reserved
	return append(salt, p[pos:pos+12]...)
}

// send writes one command packet.
func (r *rawConn) send(payload ...byte) {
	r.t.Helper()
	r.c.ResetSequence()
	if err := r.c.WritePacket(append(make([]byte, 4), payload...)); err != nil {
		r.t.Fatalf("write command 0x%02x: %v", payload[0], err)
	}
}

// read reads one packet; a reply that never comes fails the test rather
// than hanging it.
func (r *rawConn) read() []byte {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	p, err := r.c.ReadPacket()
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	return p
}

// isEnd reports whether p ends a list of columns or rows.
func (r *rawConn) isEnd(p []byte) bool {
	return len(p) > 0 && p[0] == mysql.EOF_HEADER && (len(p) < 9 || r.deprecateEOF && len(p) < 0xffffff)
}

// result reads an OK, an ERR or one result set, rows rendered as text.
func (r *rawConn) result(binary bool) (ok *mysql.Result, rows []string, err error) {
	r.t.Helper()
	p := r.read()
	switch p[0] {
	case mysql.OK_HEADER:
		return r.c.HandleOKPacket(p), nil, nil
	case mysql.ERR_HEADER:
		return nil, nil, r.c.HandleErrorPacket(p)
	}
	fields := r.columns(int(p[0]))
	for p = r.read(); !r.isEnd(p); p = r.read() {
		vals, perr := mysql.RowData(p).Parse(fields, binary, nil)
		if perr != nil {
			r.t.Fatalf("row: %v", perr)
		}
		var row []string
		for _, v := range vals {
			if b, isBytes := v.Value().([]byte); isBytes {
				row = append(row, string(b))
			} else if v.Value() == nil {
				row = append(row, "NULL")
			} else {
				row = append(row, fmt.Sprint(v.Value()))
			}
		}
		rows = append(rows, strings.Join(row, " "))
	}
	return nil, rows, nil
}

// columns reads n column definitions and, without CLIENT_DEPRECATE_EOF,
// their EOF.
func (r *rawConn) columns(n int) []*mysql.Field {
	r.t.Helper()
	fields := make([]*mysql.Field, n)
	for i := range fields {
		f, err := mysql.FieldData(r.read()).Parse()
		if err != nil {
			r.t.Fatalf("column: %v", err)
		}
		fields[i] = f
	}
	if n > 0 && !r.deprecateEOF {
		if p := r.read(); !r.isEnd(p) {
			r.t.Fatalf("want EOF after %d columns, got % x", n, p)
		}
	}
	return fields
}

// query runs a text query and returns its rows or error.
func (r *rawConn) query(q string) ([]string, error) {
	r.t.Helper()
	r.send(append([]byte{mysql.COM_QUERY}, q...)...)
	_, rows, err := r.result(false)
	return rows, err
}

// prepare prepares q and returns the statement id and parameter count.
func (r *rawConn) prepare(q string) (uint32, int) {
	r.t.Helper()
	r.send(append([]byte{mysql.COM_STMT_PREPARE}, q...)...)
	p := r.read()
	if p[0] != mysql.OK_HEADER {
		r.t.Fatalf("prepare %q: %v", q, r.c.HandleErrorPacket(p))
	}
	id := binary.LittleEndian.Uint32(p[1:])
	cols, params := int(binary.LittleEndian.Uint16(p[5:])), int(binary.LittleEndian.Uint16(p[7:]))
	r.columns(params)
	r.columns(cols)
	return id, params
}

// longData stands for a parameter whose value went by COM_STMT_SEND_LONG_DATA.
type longData struct{}

// execute sends COM_STMT_EXECUTE; with bound it sets
// new_params_bound_flag and sends the types, else it sends flag 0 and the
// server (and lockproxy) must reuse the types of the last bound execute.
func (r *rawConn) execute(id uint32, bound bool, args ...any) (*mysql.Result, []string, error) {
	r.t.Helper()
	b := binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_EXECUTE}, id)
	b = binary.LittleEndian.AppendUint32(append(b, 0), 1) // no cursor, one iteration
	nulls := make([]byte, (len(args)+7)/8)
	var types, vals []byte
	for i, a := range args {
		switch v := a.(type) {
		case nil:
			nulls[i/8] |= 1 << (i % 8)
			types = append(types, mysql.MYSQL_TYPE_NULL, 0)
		case int64:
			types = append(types, mysql.MYSQL_TYPE_LONGLONG, 0)
			vals = binary.LittleEndian.AppendUint64(vals, uint64(v))
		case int32:
			types = append(types, mysql.MYSQL_TYPE_LONG, 0)
			vals = binary.LittleEndian.AppendUint32(vals, uint32(v))
		case string:
			types = append(types, mysql.MYSQL_TYPE_VAR_STRING, 0)
			vals = append(mysql.AppendLengthEncodedInteger(vals, uint64(len(v))), v...)
		case longData:
			types = append(types, mysql.MYSQL_TYPE_BLOB, 0)
		}
	}
	b = append(b, nulls...)
	if bound {
		b = append(append(b, 1), types...)
	} else {
		b = append(b, 0)
	}
	r.send(append(b, vals...)...)
	return r.result(true)
}

// openCursor executes a parameterless statement with a read-only cursor,
// so that its rows come by COM_STMT_FETCH.
func (r *rawConn) openCursor(id uint32) []*mysql.Field {
	r.t.Helper()
	b := binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_EXECUTE}, id)
	r.send(binary.LittleEndian.AppendUint32(append(b, 1), 1)...) // CURSOR_TYPE_READ_ONLY, one iteration
	p := r.read()
	if p[0] == mysql.ERR_HEADER {
		r.t.Fatalf("open cursor: %v", r.c.HandleErrorPacket(p))
	}
	fields := r.columns(int(p[0]))
	if r.deprecateEOF { // an open cursor's metadata ends in EOF all the same
		if p := r.read(); !r.isEnd(p) {
			r.t.Fatalf("open cursor: want EOF after the columns, got % x", p)
		}
	}
	return fields
}

// fetch asks an open cursor for n rows.
func (r *rawConn) fetch(id uint32, fields []*mysql.Field, n uint32) (rows []string, err error) {
	r.t.Helper()
	r.send(binary.LittleEndian.AppendUint32(stmtPayload(mysql.COM_STMT_FETCH, id), n)...)
	for p := r.read(); !r.isEnd(p); p = r.read() {
		if p[0] == mysql.ERR_HEADER {
			return rows, r.c.HandleErrorPacket(p)
		}
		vals, perr := mysql.RowData(p).Parse(fields, true, nil)
		if perr != nil {
			r.t.Fatalf("fetched row: %v", perr)
		}
		rows = append(rows, fmt.Sprint(vals[0].Value()))
	}
	return rows, nil
}

func stmtPayload(cmd byte, id uint32, rest ...byte) []byte {
	return append(binary.LittleEndian.AppendUint32([]byte{cmd}, id), rest...)
}

// changeUser sends COM_CHANGE_USER with a mysql_native_password answer
// to the initial handshake's scramble and returns the outcome. A server may
// insist on a fresh scramble (MariaDB does): then it sends an
// AuthSwitchRequest, answered here over the new scramble
// (mysql_native_password or client_ed25519).
func (r *rawConn) changeUser(user, password, db string) error {
	r.t.Helper()
	return r.changeUserWith(user, password, db, 45) // utf8mb4_general_ci
}

// changeUserWith is changeUser asking for the collation with id collation.
func (r *rawConn) changeUserWith(user, password, db string, collation byte) error {
	r.t.Helper()
	auth := mysql.CalcNativePassword(r.salt, []byte(password))
	b := append([]byte{mysql.COM_CHANGE_USER}, user...)
	b = append(append(append(b, 0, byte(len(auth))), auth...), db...)
	b = append(b, 0, collation, 0)
	b = append(append(b, mysql.AUTH_NATIVE_PASSWORD...), 0)
	r.send(append(b, 0)...) // no connection attributes (MariaDB wants the length)
	p := r.read()
	for switches := 0; p[0] == mysql.EOF_HEADER && switches < 4; switches++ {
		// MariaDB asks again, with a fresh scramble, with the account's
		// plugin (and, for IDENTIFIED VIA ... OR ..., the next one's
		// when an answer fails).
		plugin, salt, _ := bytes.Cut(p[1:], []byte{0})
		var answer []byte
		switch string(plugin) {
		case mysql.AUTH_NATIVE_PASSWORD:
			answer = mysql.CalcNativePassword(bytes.TrimSuffix(salt, []byte{0}), []byte(password))
		case mysql.AUTH_MARIADB_ED25519:
			var err error
			if answer, err = mysql.CalcEd25519Password(salt, password); err != nil {
				r.t.Fatal(err)
			}
		default:
			r.t.Fatalf("COM_CHANGE_USER: switch to %q", plugin)
		}
		if err := r.c.WritePacket(append(make([]byte, 4), answer...)); err != nil {
			r.t.Fatal(err)
		}
		p = r.read()
	}
	switch p[0] {
	case mysql.OK_HEADER:
		return nil
	case mysql.ERR_HEADER:
		return r.c.HandleErrorPacket(p)
	}
	r.t.Fatalf("COM_CHANGE_USER: unexpected reply % x", p)
	return nil
}

func wantRows(t *testing.T, what string, got []string, err error, want ...string) {
	t.Helper()
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("%s: got %q (%v), want %q", what, got, err, want)
	}
}

// wantError checks an error's code, and that its message starts with
// "lockproxy: " exactly when lockproxy wrote it itself (own).
func wantError(t *testing.T, what string, err error, code uint16, own bool) {
	t.Helper()
	var me *mysql.MyError
	if !errors.As(err, &me) || me.Code != code {
		t.Errorf("%s: got %v, want error %d", what, err, code)
		return
	}
	if strings.HasPrefix(me.Message, "lockproxy: ") != own {
		t.Errorf("%s: message %q: lockproxy's own errors, and only those, start with lockproxy:", what, me.Message)
	}
}

func TestRawProtocol(t *testing.T) {
	p := startProxy(t, nil)
	for _, tg := range []clientTarget{{"direct", p.bed.PrimaryAddr}, {"proxy", p.addr}} {
		for _, deprecateEOF := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/deprecate_eof=%v", tg.name, deprecateEOF), func(t *testing.T) {
				db := freshNamedDB(t, p, dbName(t, "a"))
				other := freshNamedDB(t, p, dbName(t, "b"))
				r := dialRaw(t, tg.addr, p.bed.User, p.bed.Password, db, deprecateEOF)
				rawWorkload(t, r, p, db, other, tg.name == "proxy")
			})
		}
	}
}

func rawWorkload(t *testing.T, r *rawConn, p *testProxy, db, other string, viaProxy bool) {
	for _, q := range []string{"CREATE TABLE r (id INT PRIMARY KEY, v VARCHAR(20))",
		"INSERT INTO r VALUES (1, 'one'), (2, 'two'), (3, 'three')", "CREATE TABLE lb (id INT PRIMARY KEY, b BLOB)"} {
		if _, err := r.query(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	sel, n := r.prepare("SELECT id, v FROM r WHERE id = ? OR v = ? ORDER BY id")
	if n != 2 {
		t.Fatalf("prepare: %d parameters, want 2", n)
	}
	_, rows, err := r.execute(sel, true, int64(1), "three")
	wantRows(t, "execute with types", rows, err, "1 one", "3 three")
	_, rows, err = r.execute(sel, false, int64(2), "none")
	wantRows(t, "re-execute with new_params_bound_flag 0", rows, err, "2 two")
	_, rows, err = r.execute(sel, false, nil, "one")
	wantRows(t, "re-execute with flag 0 and a NULL", rows, err, "1 one")
	_, rows, err = r.execute(sel, true, "3", "two")
	wantRows(t, "execute binding new types", rows, err, "2 two", "3 three")
	_, rows, err = r.execute(sel, false, "1", "x")
	wantRows(t, "re-execute with the new types", rows, err, "1 one")

	ins, _ := r.prepare("INSERT INTO lb VALUES (?, ?)")
	r.send(stmtPayload(mysql.COM_STMT_SEND_LONG_DATA, ins, append([]byte{1, 0}, "hello "...)...)...)
	r.send(stmtPayload(mysql.COM_STMT_SEND_LONG_DATA, ins, append([]byte{1, 0}, "world"...)...)...)
	if ok, _, err := r.execute(ins, true, int64(1), longData{}); err != nil || ok == nil || ok.AffectedRows != 1 {
		t.Errorf("execute with long data: %v %v", ok, err)
	}
	r.send(stmtPayload(mysql.COM_STMT_SEND_LONG_DATA, ins, append([]byte{1, 0}, "junk"...)...)...)
	r.send(stmtPayload(mysql.COM_STMT_RESET, ins)...)
	if ok, _, err := r.result(false); err != nil || ok == nil {
		t.Errorf("COM_STMT_RESET: %v %v", ok, err)
	}
	if _, _, err := r.execute(ins, true, int64(2), "fresh"); err != nil {
		t.Errorf("execute after reset: %v", err)
	}
	rows, err = r.query("SELECT id, b FROM lb ORDER BY id")
	wantRows(t, "long data and reset", rows, err, "1 hello world", "2 fresh")

	cur, _ := r.prepare("SELECT seq FROM seq_1_to_5")
	fields := r.openCursor(cur)
	rows, err = r.fetch(cur, fields, 3)
	wantRows(t, "COM_STMT_FETCH of 3 rows", rows, err, "1", "2", "3")
	rows, err = r.fetch(cur, fields, 3)
	wantRows(t, "COM_STMT_FETCH of the rest", rows, err, "4", "5")
	rows, err = r.query("SELECT 'in step'")
	wantRows(t, "a query after fetching", rows, err, "in step")

	r.send(stmtPayload(mysql.COM_STMT_CLOSE, sel)...)
	_, _, err = r.execute(sel, true, int64(1), "x")
	wantError(t, "execute a closed statement", err, mysql.ER_UNKNOWN_STMT_HANDLER, viaProxy)
	r.send(mysql.COM_PING)
	if ok, _, err := r.result(false); err != nil || ok == nil {
		t.Errorf("COM_PING: %v %v", ok, err)
	}

	r.send(append([]byte{mysql.COM_FIELD_LIST}, "r\x00"...)...)
	var names []string
	for p := r.read(); !r.isEnd(p); p = r.read() {
		f, err := mysql.FieldData(p).Parse()
		if err != nil {
			t.Fatalf("COM_FIELD_LIST: %v", err)
		}
		names = append(names, string(f.Name))
	}
	wantRows(t, "COM_FIELD_LIST", names, nil, "id", "v")

	r.send(mysql.COM_STATISTICS)
	if s := string(r.read()); !strings.HasPrefix(s, "Uptime: ") {
		t.Errorf("COM_STATISTICS: %q", s)
	}

	r.send(append([]byte{mysql.COM_INIT_DB}, "lockproxy_no_such_db"...)...)
	_, _, err = r.result(false)
	wantError(t, "COM_INIT_DB to a missing database", err, mysql.ER_BAD_DB_ERROR, false)
	rows, err = r.query("SELECT DATABASE()")
	wantRows(t, "database after a failed COM_INIT_DB", rows, err, db)

	rows, err = r.query("SET @u = 42")
	wantRows(t, "SET @u", rows, err)
	r.send(mysql.COM_RESET_CONNECTION)
	if ok, _, err := r.result(false); err != nil || ok == nil {
		t.Errorf("COM_RESET_CONNECTION: %v %v", ok, err)
	}
	rows, err = r.query("SELECT @u, DATABASE()")
	wantRows(t, "after COM_RESET_CONNECTION", rows, err, "NULL "+db)
	_, _, err = r.execute(ins, true, int64(3), "x")
	wantError(t, "execute a statement dropped by COM_RESET_CONNECTION", err, mysql.ER_UNKNOWN_STMT_HANDLER, viaProxy)

	r.query("SET @u = 7")
	if err := r.changeUser(p.bed.User, p.bed.Password, other); err != nil {
		t.Fatalf("COM_CHANGE_USER: %v", err)
	}
	rows, err = r.query("SELECT DATABASE(), @u, CURRENT_USER() LIKE '" + p.bed.User + "@%'")
	wantRows(t, "after COM_CHANGE_USER", rows, err, other+" NULL 1")
	r.query("SET @u = 8")
	r.query("CREATE TEMPORARY TABLE tmp_cu (x INT)")
	r.query("BEGIN")
	r.query("INSERT INTO `" + db + "`.r VALUES (99, 'in txn')")
	err = r.changeUser(p.bed.User, "wrong-password", db)
	wantError(t, "COM_CHANGE_USER with a wrong password", err, mysql.ER_ACCESS_DENIED_ERROR, viaProxy)
	// MariaDB keeps the connection as the previous user in the previous
	// database, with the session reset: no variables, no transaction.
	rows, err = r.query("SELECT DATABASE(), @u, CURRENT_USER() LIKE '" + p.bed.User + "@%', @@in_transaction, " +
		"(SELECT COUNT(*) FROM `" + db + "`.r WHERE id = 99), @@autocommit")
	wantRows(t, "after a failed COM_CHANGE_USER", rows, err, other+" NULL 1 0 0 1")
	_, err = r.query("SELECT * FROM tmp_cu")
	wantError(t, "temporary table after a failed COM_CHANGE_USER", err, 1146, false)
}

// TestPooledBackendMatchesClient: lockproxy pools backend connections and
// resets them with COM_RESET_CONNECTION between clients. Whatever a
// session did, the next client served by the same backend connection must
// find it as a fresh direct connection would be for its own handshake.
func TestPooledBackendMatchesClient(t *testing.T) {
	p := startProxy(t, nil)
	db := freshNamedDB(t, p, dbName(t, "a"))
	cases := []struct {
		name  string
		caps  []uint32
		dirty func(t *testing.T, r *rawConn)
		check func(t *testing.T, r *rawConn)
	}{
		{"set_option_multi_statements", nil, func(t *testing.T, r *rawConn) {
			r.send(mysql.COM_SET_OPTION, 0, 0) // MYSQL_OPTION_MULTI_STATEMENTS_ON
			if pk := r.read(); !r.isEnd(pk) {
				t.Fatalf("COM_SET_OPTION: got % x, want EOF", pk)
			}
		}, func(t *testing.T, r *rawConn) {
			// Not negotiated, so statements must not stack.
			_, err := r.query("SELECT 1; SELECT 2")
			wantError(t, "stacked statements without CLIENT_MULTI_STATEMENTS", err, 1064, false)
		}},
		{"ignore_space", []uint32{mysql.CLIENT_IGNORE_SPACE}, nil, func(t *testing.T, r *rawConn) {
			rows, err := r.query("SELECT @@sql_mode LIKE '%IGNORE_SPACE%', COUNT (*)")
			wantRows(t, "sql_mode of a CLIENT_IGNORE_SPACE session", rows, err, "1 1")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for round := range 3 {
				r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false, c.caps...)
				c.check(t, r)
				if c.dirty != nil {
					c.dirty(t, r)
				}
				r.send(mysql.COM_QUIT)
				_ = r.c.Close()
				if t.Failed() {
					t.Fatalf("round %d failed", round)
				}
				settlePool(t, p)
			}
		})
	}
}

// settlePool waits until the proxy has no session left and every backend
// connection they released has been reset, so that the next client is
// served from the pool if the pool kept anything.
func settlePool(t *testing.T, p *testProxy) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		p.srv.mu.Lock()
		n := len(p.srv.sessions)
		p.srv.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still open", n)
		}
	}
	p.srv.pool.wg.Wait()
}

// TestRefreshCommand: COM_REFRESH (mariadb-admin refresh and flush-*,
// mariadb-dump --flush-logs) reaches MariaDB, which decides on the user's
// RELOAD privilege; the client sees what it sees directly.
func TestRefreshCommand(t *testing.T) {
	admin := requireTool(t, "mariadb-admin", "--version")
	dump := requireTool(t, "mariadb-dump", "--version")
	p := startProxy(t, nil)
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
	for _, target := range []clientTarget{{"direct", p.bed.PrimaryAddr}, {"proxy", p.addr}} {
		host, port, _ := strings.Cut(target.addr, ":")
		conn := []string{"-h" + host, "-P" + port, "-u" + p.bed.User, "-p" + p.bed.Password, "--protocol=TCP"}
		for _, cmd := range [][]string{{"refresh"}, {"flush-logs"}, {"flush-tables"}, {"flush-privileges"}, {"flush-status"}} {
			out := runClient(t, db, nil, "", admin, append(conn, cmd...)...)
			if out.code != 0 {
				t.Errorf("%s: mariadb-admin %s: exit %d: %s", target.name, cmd[0], out.code, out.stderr)
			}
		}
		out := runClient(t, db, nil, "", dump, append(conn, "--flush-logs", "--single-transaction", db)...)
		if out.code != 0 || !strings.Contains(out.stdout, "INSERT INTO `t` VALUES") {
			t.Errorf("%s: mariadb-dump --flush-logs: exit %d: %s", target.name, out.code, out.stderr)
		}
	}
}

// TestInteractiveTimeout: a client that says it is interactive
// (CLIENT_INTERACTIVE, as the mariadb CLI does) gets interactive_timeout as
// its session's wait_timeout, as from MariaDB directly, also on a pooled
// connection lockproxy reset; other clients get wait_timeout.
func TestInteractiveTimeout(t *testing.T) {
	p := startProxy(t, nil)
	root := p.direct(t, "", "")
	var was int
	if err := root.QueryRow("SELECT @@global.interactive_timeout").Scan(&was); err != nil {
		t.Fatal(err)
	}
	testbed.MustExec(t, root, "SET GLOBAL interactive_timeout = 1234")
	t.Cleanup(func() { _, _ = root.Exec(fmt.Sprintf("SET GLOBAL interactive_timeout = %d", was)) })
	var global int
	if err := root.QueryRow("SELECT @@global.wait_timeout").Scan(&global); err != nil {
		t.Fatal(err)
	}
	// PyMySQL can announce CLIENT_INTERACTIVE (go-mysql cannot).
	python := requireTool(t, systemPython, "-c", "import pymysql")
	waitTimeout := func(addr string, interactive bool) int {
		t.Helper()
		host, port, _ := strings.Cut(addr, ":")
		flag := 0
		if interactive {
			flag = 1024 // CLIENT.INTERACTIVE
		}
		out := runClient(t, "\x00", nil, "", python, "-c", fmt.Sprintf(`import pymysql
c = pymysql.connect(host=%q, port=%s, user=%q, password=%q, client_flag=%d)
cur = c.cursor()
cur.execute("SELECT @@session.wait_timeout")
print(cur.fetchone()[0])`, host, port, p.bed.User, p.bed.Password, flag))
		n, err := strconv.Atoi(strings.TrimSpace(out.stdout))
		if err != nil || out.code != 0 {
			t.Fatalf("PyMySQL: exit %d, %q: %s", out.code, out.stdout, out.stderr)
		}
		return n
	}
	if got := waitTimeout(p.bed.PrimaryAddr, true); got != 1234 {
		t.Fatalf("directly, an interactive client's wait_timeout is %d, want 1234", got)
	}
	for round := range 3 { // the second and third reuse a pooled, reset connection
		if got := waitTimeout(p.addr, true); got != 1234 {
			t.Errorf("round %d: an interactive client's wait_timeout through lockproxy is %d, want interactive_timeout 1234", round, got)
		}
		if got := waitTimeout(p.addr, false); got != global {
			t.Errorf("round %d: another client's wait_timeout through lockproxy is %d, want %d", round, got, global)
		}
	}
}
