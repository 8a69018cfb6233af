package proxy

import (
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/rules"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// The client matrix: each client library runs one scenario script
// (testdata/clients) straight against MariaDB and through lockproxy, and
// both transcripts must match line for line — except the lines a script
// marks with "~", which differ by design (lockproxy's rules and its own
// statements, the TLS links lockproxy makes) and are checked here per side.
//
// Each script also has a TLS scenario (LP_TLS_CA set), run three times:
// directly as the bed's TLS-only user; through a lockproxy that requires
// TLS from its clients (the bed's certificate, so the client verifies it
// against the bed's CA as it does MariaDB's) over plain backend
// connections; and through one that also connects to MariaDB with TLS
// (backends.tls), as the TLS-only user. The three transcripts must match;
// "~tls server" (MariaDB's Ssl_version for the session's backend link) must
// show TLS directly and with backends.tls, and none over plain backend
// connections.

// matrixClient is one client library and how to run its scenario.
type matrixClient struct {
	name string
	// tool and check prove the runtime and the library are installed.
	tool  string
	check []string
	// runner, if set, is the program run instead of the tool (which the
	// scenario then finds in LP_MARIADB).
	runner string
	args   []string // the scenario, after the tool or runner
	env    []string
	// want are lines every direct transcript must contain (so that two
	// identical wrong transcripts cannot pass); proxyWant and directWant
	// the "~" lines of each side.
	want, directWant, proxyWant []string
	// tlsWant, tlsDirectWant and tlsProxyWant are the same for the TLS
	// scenario (tlsProxyWant for both runs through lockproxy).
	tlsWant, tlsDirectWant, tlsProxyWant []string
}

// connectorJ is Debian's libmariadb-java.
const connectorJ = "/usr/share/java/mariadb-java-client.jar"

// matrixCommon are the lines of the full scenario every client prints.
var matrixCommon = []string{"connect: 2", "stream: 100000 5000050000", "error: error 1064", "error: error 1062",
	"error: error 1146", "unkeyed read in a transaction: ", "stale: error", "kill own id: error 1927", "after kill: error"}

// tlsCommon are the lines of the TLS scenario every client library prints.
var tlsCommon = []string{"tls connect: 2", "tls for update: ", "tls after commit: ", "tls error: error 1062",
	"tls, another CA: error"}

// withTLS adds the TLS scenario's lines: want are the client's own, and
// show, if the client runs SHOW LOCKPROXY RULES prepared over TLS, what
// it prints of lockproxy's answer.
func withTLS(c matrixClient, show string, want ...string) matrixClient {
	c.tlsWant = append(append(c.tlsWant, tlsCommon...), want...)
	c.tlsDirectWant = append(c.tlsDirectWant, "~tls guarded unkeyed write: 3")
	c.tlsProxyWant = append(c.tlsProxyWant, "~tls guarded unkeyed write: error 1105")
	if show != "" {
		c.tlsDirectWant = append(c.tlsDirectWant, "~tls show prepared: error 1064")
		c.tlsProxyWant = append(c.tlsProxyWant, "~tls show prepared: "+show)
	}
	return c
}

func matrixClients() []matrixClient {
	py := func(driver string, want ...string) matrixClient {
		mod := map[string]string{"pymysql": "pymysql", "mysqldb": "MySQLdb", "sqlalchemy": "sqlalchemy, MySQLdb"}[driver]
		return matrixClient{name: driver, tool: systemPython, check: []string{"-c", "import " + mod},
			args: []string{"testdata/clients/scenario.py"}, env: []string{"LP_DRIVER=" + driver, "PYTHONDONTWRITEBYTECODE=1"},
			want: want, directWant: []string{"~guarded unkeyed write: 3"},
			proxyWant: []string{"~guarded unkeyed write: error 1105"}}
	}
	php := func(api string, want ...string) matrixClient {
		return withTLS(matrixClient{name: "php-" + api, tool: "php", check: []string{"-r", "exit(extension_loaded('mysqli') && extension_loaded('pdo_mysql') ? 0 : 1);"},
			args: []string{"testdata/clients/scenario.php"}, env: []string{"LP_API=" + api},
			want:       append(append([]string{"connection id: true", `after commit: [["9"]]`}, want...), matrixCommon...),
			directWant: []string{"~guarded unkeyed write: 3", "~show text: error 1064", "~show prepared: error 1064"},
			proxyWant:  []string{"~guarded unkeyed write: error 1105", "~show text: 9", "~show prepared: 9"}},
			"9", `tls long value: 2097152 bytes, true`)
	}
	pyFull := append([]string{"connection id: True", "after commit: ((9,),)"}, matrixCommon...)
	pyTLS := func(c matrixClient, want ...string) matrixClient {
		return withTLS(c, "", append([]string{"tls long value: 1048576 {'é'}"}, want...)...)
	}
	return []matrixClient{
		pyTLS(withShow(py("pymysql", append(pyFull, "ping: ok")...)), "tls client: TLSv1.3"),
		pyTLS(withShow(py("mysqldb", pyFull...))),
		withTLS(matrixClient{name: "mysql2", tool: "node", check: []string{"-e", "require('./testdata/clients/node_modules/mysql2')"},
			args: []string{"testdata/clients/scenario.js"},
			want: append([]string{"connection id: true", `after commit: [{"stock":9}]`, `reset: [{"v":null}]`,
				`change user: [{"same":1}]`, "change user, bad password: error 1045", "after a failed change user: "}, matrixCommon...),
			directWant: []string{"~guarded unkeyed write: 3", "~show text: error 1064", "~show prepared: error 1064"},
			proxyWant: []string{"~guarded unkeyed write: error 1105", `~show text: ["name","table","key"]`,
				`~show prepared: ["name","table","key"]`}},
			`["name","table","key"]`, "tls client: true TLSv1.3", "tls long value: 1048576 é"),
		withTLS(matrixClient{name: "connector-j", tool: "java", check: []string{"-cp", connectorJ, "-version"},
			args: []string{"-cp", connectorJ, "testdata/clients/Scenario.java"},
			want: append([]string{"after commit: [[9]]", "reset: [[", "stale isValid: true", "kill own id: error"},
				matrixCommon[:len(matrixCommon)-2]...),
			directWant: []string{"~guarded unkeyed write: 3", "~show text: error 1064", "~show prepared: error 1064"},
			proxyWant:  []string{"~guarded unkeyed write: error 1105", "~show text: 9", "~show prepared: 9"}},
			"9", "tls long value: 1048576 true"),
		php("mysqli", `change user: [[null,"1"]]`, "change user, bad password: error 1045", `after a failed change user: [["1"]]`),
		php("pdo"),
		php("pdo-native"),
		{name: "sqlalchemy", tool: systemPython, check: []string{"-c", "import sqlalchemy, MySQLdb"},
			args: []string{"testdata/clients/scenario.py"}, env: []string{"LP_DRIVER=sqlalchemy", "PYTHONDONTWRITEBYTECODE=1"},
			want:       []string{"connect: 2", "orm-style read: [(1, 10), (2, 20), (3, 30)]", "params: [(20,)]", "stale, pre-ping: 3"},
			directWant: []string{"~guarded unkeyed write: 3"}, proxyWant: []string{"~guarded unkeyed write: error 1105"},
			tlsWant: []string{"tls connect: 2", "tls for update: [(10,)]", "tls after commit: [(9,)]", "tls, another CA: error 2026"}},
		{name: "mariadb-cli", tool: "mariadb", check: []string{"--version"}, runner: "bash",
			args: []string{"testdata/clients/scenario.sh"},
			want: []string{"connect", "é\t1.50\tNULL\t2024-02-29 12:34:56.789\t", "1\t-4611686018427387904\t2.5\t-12.345\tnaïve ' \\\\ \"\t00FF27\t",
				"for update", "after commit", "100000\t5000050000",
				"ERROR 1064 (42000) at line 17: You have an error in your SQL syntax", "ERROR 1062 (23000) at line 18: Duplicate entry '1'",
				"ERROR 1146 (42S02) at line 19: Table '<db>.no_such_table' doesn't exist", "after all"},
			directWant: []string{"~guarded unkeyed write: 3", "~show: ERROR 1064 (42000) at line 27"},
			proxyWant:  []string{"~guarded unkeyed write: ERROR 1105 (HY000) at line 22: lockproxy: rule sku", "~show: name\ttable\tkey"},
			tlsWant: []string{"tls connect", "tls for update", "tls after commit", "7bc113dc472de03c10055f1852b4df86\t2097152",
				"ERROR 1062 (23000) at line 13", "tls client: Cipher in use", "tls, another CA: ERROR 2026 (HY000)"},
			tlsDirectWant: []string{"~tls guarded unkeyed write: 3"},
			tlsProxyWant:  []string{"~tls guarded unkeyed write: ERROR 1105 (HY000) at line 16: lockproxy: rule sku"}},
	}
}

// withShow adds the SHOW LOCKPROXY lines: MariaDB does not know it.
func withShow(c matrixClient) matrixClient {
	c.directWant = append(c.directWant, "~show text: error 1064")
	c.proxyWant = append(c.proxyWant, "~show text: ['name', 'table', 'key'")
	return c
}

// TestClientMatrix runs every client's scenario directly, through
// lockproxy (with a rule on sku and TLS offered to clients) and through
// the same lockproxy multiplexing its sessions (backends.pool.multiplex),
// and its TLS scenario directly, through lockproxy requiring TLS, and
// through lockproxy requiring TLS with backends.tls.
func TestClientMatrix(t *testing.T) {
	bed := testbedFor(t)
	if bed.TLSUser == "" || bed.TLSCA == "" || bed.TLSCert == "" || bed.TLSKey == "" {
		t.Fatal("the test bed has no TLS user, CA or certificate (scripts/testbed.sh up makes them)")
	}
	sku := []rules.Rule{{Name: "sku", Table: "sku", Key: []string{"sku_id"},
		Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
		OnUnkeyed: rules.OnUnkeyedReject, OnUnkeyedRead: rules.OnUnkeyedAllow}}
	proxyWith := func(requireTLS bool, backendCA string, edits ...func(*rules.Config)) *testProxy {
		// Errors only: the four proxies serve every client's six runs, and
		// their session and audit lines in the parent test's output would
		// bury a failing client's report below them.
		quiet := zaptest.NewLogger(t, zaptest.Level(zapcore.ErrorLevel))
		return startProxyLogging(t, bed, func(c *rules.Config) {
			// The default, as MariaDB's connect_timeout: a JVM's first TLS
			// handshake on a busy machine may take more than the tests' 2s.
			c.Proxy.HandshakeTimeout = rules.Duration(10 * time.Second)
			c.Proxy.TLS = &rules.TLSConfig{Cert: bed.TLSCert, Key: bed.TLSKey}
			c.Proxy.RequireTLS = requireTLS
			c.Rules = sku
			if backendCA != "" {
				c.Users = []rules.User{{User: bed.TLSUser, Password: bed.Password}}
				c.Backends.TLS = &rules.TLSClientConfig{CA: backendCA}
			}
			for _, e := range edits {
				e(c)
			}
		}, memlock.New(nil, nil), quiet)
	}
	p, pTLS, pBackendTLS := proxyWith(false, ""), proxyWith(true, ""), proxyWith(true, bed.TLSCA)
	pMux := proxyWith(false, "", multiplexed(16))
	// Both TLS proxies refuse a plain client: a TLS run through them
	// proves the client's link is encrypted even where the library keeps
	// its TLS state to itself.
	for _, tp := range []*testProxy{pTLS, pBackendTLS} {
		plain, _ := sql.Open("mysql", bed.DSN(tp.addr, "", "tls=false"))
		err := plain.Ping()
		plain.Close()
		if err == nil || !strings.Contains(err.Error(), "must use TLS") {
			t.Fatalf("require_tls: a plain client was not refused (%v)", err)
		}
	}
	otherCA := otherCA(t)
	for _, c := range matrixClients() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tool := requireTool(t, c.tool, c.check...)
			prog := tool
			if c.runner != "" {
				prog = requireTool(t, c.runner)
			}
			runs := []struct {
				name, addr, user string
				tls              bool
			}{
				{"direct", bed.PrimaryAddr, bed.User, false},
				{"proxy", p.addr, bed.User, false},
				{"tls_direct", bed.PrimaryAddr, bed.TLSUser, true},
				{"tls_proxy", pTLS.addr, bed.User, true},
				{"tls_backend", pBackendTLS.addr, bed.TLSUser, true},
				{"proxy_mux", pMux.addr, bed.User, false},
			}
			outs := make([]runOutput, len(runs))
			errs := make([]error, len(runs))
			var wg sync.WaitGroup
			for i, r := range runs {
				db := freshNamedDB(t, p, "mx_"+strings.ReplaceAll(c.name, "-", "_")+"_"+r.name)
				host, port := splitAddr(t, r.addr)
				env := append([]string{"LP_HOST=" + host, "LP_PORT=" + port, "LP_USER=" + r.user,
					"LP_PASSWORD=" + bed.Password, "LP_DB=" + db, "LP_MARIADB=" + tool}, c.env...)
				if r.tls {
					env = append(env, "LP_TLS_CA="+bed.TLSCA, "LP_TLS_OTHER_CA="+otherCA)
				}
				// The runs are independent (each has its own database) and
				// mostly wait (stale connections, KILL): run them together.
				wg.Add(1)
				go func() {
					defer wg.Done()
					outs[i], errs[i] = execClient(db, env, "", prog, c.args...)
				}()
			}
			wg.Wait()
			for i, r := range runs {
				if errs[i] != nil {
					t.Fatalf("%s: %v", r.name, errs[i])
				}
				if outs[i].code != 0 {
					t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", r.name, outs[i].code, outs[i].stdout, outs[i].stderr)
				}
			}
			direct, proxied := outs[0].stdout, outs[1].stdout
			checkLines(t, "direct", direct, append(c.want, c.directWant...))
			checkLines(t, "proxy", proxied, c.proxyWant)
			if d, pr := plainLines(direct), plainLines(proxied); d != pr {
				t.Errorf("transcripts differ:\n%s", lineDiff(d, pr))
			}
			tlsDirect := outs[2].stdout
			checkLines(t, "tls_direct", tlsDirect, append(c.tlsWant, c.tlsDirectWant...))
			checkTLSServer(t, "tls_direct", tlsDirect, true)
			checkLines(t, "proxy_mux", outs[5].stdout, c.proxyWant)
			if d, m := plainLines(direct), plainLines(outs[5].stdout); d != m {
				t.Errorf("proxy_mux: transcripts differ:\n%s", lineDiff(d, m))
			}
			for i, r := range runs[3:5] {
				out := outs[3+i].stdout
				checkLines(t, r.name, out, c.tlsProxyWant)
				checkTLSServer(t, r.name, out, r.name == "tls_backend")
				if d, pr := plainLines(tlsDirect), plainLines(out); d != pr {
					t.Errorf("%s: TLS transcripts differ:\n%s", r.name, lineDiff(d, pr))
				}
			}
			if testing.Verbose() {
				for i, r := range runs {
					t.Logf("%s:\n%s", r.name, outs[i].stdout)
				}
			}
		})
	}
}

// checkTLSServer checks the "~tls server" lines of a TLS transcript (the
// Ssl_version MariaDB reports for the session's backend link): want says
// whether they must show a TLS version or none.
func checkTLSServer(t *testing.T, side, out string, want bool) {
	t.Helper()
	seen, tls := false, false
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "~tls server: ") {
			seen = true
			tls = tls || strings.Contains(l, "TLSv1.")
		}
	}
	if !seen || tls != want {
		t.Errorf("%s: MariaDB's side of the link: want TLS %v, got lines %v in:\n%s", side, want, seen && tls, out)
	}
}

// plainLines drops the lines marked "~" (different by design).
func plainLines(out string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(out, "\n") {
		if !strings.HasPrefix(l, "~") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// checkLines fails for each wanted fragment no line of out starts with.
func checkLines(t *testing.T, side, out string, want []string) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, l := range strings.Split(out, "\n") {
			found = found || strings.HasPrefix(l, w)
		}
		if !found {
			t.Errorf("%s: no line starts with %q in:\n%s", side, w, out)
		}
	}
}
