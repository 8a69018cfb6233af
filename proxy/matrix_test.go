package proxy

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/rules"
)

// The client matrix: each client library runs one scenario script
// (testdata/clients) straight against MariaDB and through lockproxy, and
// both transcripts must match line for line — except the lines a script
// marks with "~", which differ by design (lockproxy's rules and its own
// statements) and are checked here per side.

// matrixClient is one client library and how to run its scenario.
type matrixClient struct {
	name string
	// tool and check prove the runtime and the library are installed.
	tool  string
	check []string
	args  []string // the scenario, after the tool
	env   []string
	// want are lines every direct transcript must contain (so that two
	// identical wrong transcripts cannot pass); proxyWant and directWant
	// the "~" lines of each side.
	want, directWant, proxyWant []string
}

// connectorJ is Debian's libmariadb-java.
const connectorJ = "/usr/share/java/mariadb-java-client.jar"

// matrixCommon are the lines of the full scenario every client prints.
var matrixCommon = []string{"connect: 2", "stream: 100000 5000050000", "error: error 1064", "error: error 1062",
	"error: error 1146", "unkeyed read in a transaction: ", "stale: error", "kill own id: error 1927", "after kill: error"}

func matrixClients() []matrixClient {
	py := func(driver string, want ...string) matrixClient {
		mod := map[string]string{"pymysql": "pymysql", "mysqldb": "MySQLdb", "sqlalchemy": "sqlalchemy, MySQLdb"}[driver]
		return matrixClient{name: driver, tool: systemPython, check: []string{"-c", "import " + mod},
			args: []string{"testdata/clients/scenario.py"}, env: []string{"LP_DRIVER=" + driver, "PYTHONDONTWRITEBYTECODE=1"},
			want: want, directWant: []string{"~guarded unkeyed write: 3"},
			proxyWant: []string{"~guarded unkeyed write: error 1105"}}
	}
	php := func(api string, want ...string) matrixClient {
		return matrixClient{name: "php-" + api, tool: "php", check: []string{"-r", "exit(extension_loaded('mysqli') && extension_loaded('pdo_mysql') ? 0 : 1);"},
			args: []string{"testdata/clients/scenario.php"}, env: []string{"LP_API=" + api},
			want:       append(append([]string{"connection id: true", `after commit: [["9"]]`}, want...), matrixCommon...),
			directWant: []string{"~guarded unkeyed write: 3", "~show text: error 1064", "~show prepared: error 1064"},
			proxyWant:  []string{"~guarded unkeyed write: error 1105", "~show text: 8", "~show prepared: 8"}}
	}
	pyFull := append([]string{"connection id: True", "after commit: ((9,),)"}, matrixCommon...)
	return []matrixClient{
		withShow(py("pymysql", append(pyFull, "ping: ok")...)),
		withShow(py("mysqldb", pyFull...)),
		{name: "mysql2", tool: "node", check: []string{"-e", "require('./testdata/clients/node_modules/mysql2')"},
			args: []string{"testdata/clients/scenario.js"},
			want: append([]string{"connection id: true", `after commit: [{"stock":9}]`, `reset: [{"v":null}]`,
				`change user: [{"same":1}]`, "change user, bad password: error 1045", "after a failed change user: "}, matrixCommon...),
			directWant: []string{"~guarded unkeyed write: 3", "~show text: error 1064", "~show prepared: error 1064"},
			proxyWant: []string{"~guarded unkeyed write: error 1105", `~show text: ["name","table","key"]`,
				`~show prepared: ["name","table","key"]`}},
		{name: "connector-j", tool: "java", check: []string{"-cp", connectorJ, "-version"},
			args: []string{"-cp", connectorJ, "testdata/clients/Scenario.java"},
			want: append([]string{"after commit: [[9]]", "reset: [[", "stale isValid: true", "kill own id: error"},
				matrixCommon[:len(matrixCommon)-2]...),
			directWant: []string{"~guarded unkeyed write: 3", "~show text: error 1064", "~show prepared: error 1064"},
			proxyWant:  []string{"~guarded unkeyed write: error 1105", "~show text: 8", "~show prepared: 8"}},
		php("mysqli", `change user: [[null,"1"]]`, "change user, bad password: error 1045", `after a failed change user: [["1"]]`),
		php("pdo"),
		php("pdo-native"),
		py("sqlalchemy", "connect: 2", "orm-style read: [(1, 10), (2, 20), (3, 30)]", "params: [(20,)]", "stale, pre-ping: 3"),
	}
}

// withShow adds the SHOW LOCKPROXY lines: MariaDB does not know it.
func withShow(c matrixClient) matrixClient {
	c.directWant = append(c.directWant, "~show text: error 1064")
	c.proxyWant = append(c.proxyWant, "~show text: ['name', 'table', 'key'")
	return c
}

// TestClientMatrix runs every client's scenario directly and through
// lockproxy (with a rule on sku and TLS offered to clients).
func TestClientMatrix(t *testing.T) {
	cert, key := selfSigned(t)
	p := startProxyWith(t, func(c *rules.Config) {
		c.Proxy.TLS = &rules.TLSConfig{Cert: cert, Key: key}
		c.Rules = []rules.Rule{{Name: "sku", Table: "sku", Key: []string{"sku_id"},
			Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
			OnUnkeyed: rules.OnUnkeyedReject, OnUnkeyedRead: rules.OnUnkeyedAllow}}
	}, memlock.New(nil, nil))
	for _, c := range matrixClients() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tool := requireTool(t, c.tool, c.check...)
			var outs [2]runOutput
			for i, side := range []struct{ name, addr string }{{"direct", p.bed.PrimaryAddr}, {"proxy", p.addr}} {
				db := freshNamedDB(t, p, "mx_"+strings.ReplaceAll(c.name, "-", "_")+"_"+side.name)
				host, port := splitAddr(t, side.addr)
				env := append([]string{"LP_HOST=" + host, "LP_PORT=" + port, "LP_USER=" + p.bed.User,
					"LP_PASSWORD=" + p.bed.Password, "LP_DB=" + db}, c.env...)
				outs[i] = runClient(t, db, env, "", tool, c.args...)
				if outs[i].code != 0 {
					t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", side.name, outs[i].code, outs[i].stdout, outs[i].stderr)
				}
			}
			direct, proxied := outs[0], outs[1]
			checkLines(t, "direct", direct.stdout, append(c.want, c.directWant...))
			checkLines(t, "proxy", proxied.stdout, c.proxyWant)
			if d, pr := plainLines(direct.stdout), plainLines(proxied.stdout); d != pr {
				t.Errorf("transcripts differ:\n%s", lineDiff(d, pr))
			}
			if testing.Verbose() {
				t.Logf("direct:\n%s\nproxy:\n%s", direct.stdout, proxied.stdout)
			}
		})
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

var _ = fmt.Sprint
var _ = os.Getenv
