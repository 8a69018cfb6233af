package proxy

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
)

// pymysqlSuiteDir is where scripts/testbed.sh install unpacks PyMySQL's
// source, its own test suite included (pinned there by version and
// SHA-256).
const pymysqlSuiteDir = "testdata/suites/pymysql-1.1.1"

// clientSuitePaths are the ways the suites run through lockproxy: no rules
// (statements pass unanalysed), rules on tables the suite writes, and a
// replica configured (reads are routed).
var clientSuitePaths = []string{"no_rules", "rule", "replica"}

// suiteDifference is a test of a suite that passes directly and may fail
// through lockproxy on the paths listed, for the reason given (the
// README's client section says the same).
type suiteDifference struct {
	paths  []string
	reason string
	// timing: the difference depends on how long something takes, so the
	// test may pass through lockproxy too.
	timing bool
}

// pymysqlDifferences are PyMySQL's tests that pass directly and are known
// to fail through lockproxy: none.
var pymysqlDifferences = map[string]suiteDifference{}

// pymysqlSuiteRules guard tables PyMySQL's suite writes, by a column each
// of its writes names; a write whose rows cannot be keyed runs unlocked
// (on_unkeyed: allow), as the suite's tables have no keys in common.
func pymysqlSuiteRules() []rules.Rule {
	guard := map[string]string{"bulkinsert": "id", "issue66": "id", "issue54": "id", "issue16": "name",
		"issue17": "x", "dictcursor": "name", "test": "data", "test_dict": "a", "test_datatypes": "i",
		"test_load_local": "a", "test_aggregates": "i", "mystuff": "id"}
	return guardRules(guard)
}

// TestClientSuites runs client libraries' own test suites straight
// against the primary and through lockproxy on each of clientSuitePaths:
// every test that passes directly must pass through lockproxy, but for
// the differences listed with their reasons (and a listed difference that
// no longer shows must be struck from the list). PyMySQL's suite is the
// one a registry CI reaches carries (Debian's source of python-pymysql
// 1.1.1; the 1.2.0 source Debian lists is not on its mirror): the npm
// packages of node mysql2 and MariaDB Connector/Node ship no tests, and
// neither is packaged for Debian.
func TestClientSuites(t *testing.T) {
	t.Run("pymysql", func(t *testing.T) {
		py := requireTool(t, systemPython, "-c", "import pytest")
		src := requireSuite(t, pymysqlSuiteDir, "pymysql/tests/base.py")
		runClientSuite(t, func(t *testing.T, p *testProxy, side, addr string) map[string]string {
			return runPyMySQLSuite(t, p, py, src, side, addr)
		}, pymysqlSuiteRules(), pymysqlDifferences, 150, nil)
	})
	// The node suites run only when a maintainer names their sources (see
	// nodeSuites): no registry CI reaches carries them.
	for _, s := range nodeSuites {
		src := os.Getenv(s.env)
		if src == "" {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			node := requireTool(t, "node", "--version")
			src := requireSuite(t, src, s.marker)
			runClientSuite(t, func(t *testing.T, p *testProxy, side, addr string) map[string]string {
				return s.run(t, p, node, src, side, addr)
			}, s.rules(), s.known, s.minPassed, suiteAccounts(testbedFor(t)))
		})
	}
}

// nodeSuite is a node client's own test suite, run from a source checkout
// named by an environment variable. These are measurements a maintainer
// runs by hand: the npm packages ship no tests and Debian packages
// neither library, so the sources come from the projects' repositories,
// at the tag of the version the README names, with their devDependencies
// installed by npm (e.g. git clone -b v3.23.4
// https://github.com/sidorares/node-mysql2 /tmp/suites/node-mysql2 && cd
// /tmp/suites/node-mysql2 && npm install; then
// LOCKPROXY_SUITE_MYSQL2=/tmp/suites/node-mysql2 go test -run
// 'TestClientSuites/mysql2' ./proxy/).
type nodeSuite struct {
	name, env, marker string
	minPassed         int
	rules             func() []rules.Rule
	known             map[string]suiteDifference
	run               func(t *testing.T, p *testProxy, node, src, side, addr string) map[string]string
}

var nodeSuites = []nodeSuite{
	{name: "mysql2", env: "LOCKPROXY_SUITE_MYSQL2", marker: "test/common.test.mts", minPassed: 100,
		rules: mysql2SuiteRules, known: mysql2Differences, run: runMySQL2Suite},
	{name: "mariadb", env: "LOCKPROXY_SUITE_MARIADB", marker: "test/base.js", minPassed: 300,
		rules: mariadbSuiteRules, known: mariadbDifferences, run: runMariaDBSuite},
}

// guardRules guards each table of guard by the column it names; a write
// whose rows cannot be keyed runs unlocked (on_unkeyed: allow).
func guardRules(guard map[string]string) []rules.Rule {
	var rs []rules.Rule
	for table, key := range guard {
		rs = append(rs, rules.Rule{Name: table, Table: table, Key: []string{key},
			Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
			OnUnkeyed: rules.OnUnkeyedAllow})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Name < rs[j].Name })
	return rs
}

// mysql2SuiteRules guard tables node mysql2's integration suite writes.
func mysql2SuiteRules() []rules.Rule {
	return guardRules(map[string]string{"insert_test": "id", "announcements": "id", "test_table": "id"})
}

// mariadbSuiteRules guard tables Connector/Node's suite writes by a key
// its writes name (an INSERT with a column list that has the key column):
// the suite's other tables are written by INSERTs without a column list
// or without the key (auto-increment), which a rule cannot key and
// on_unkeyed: allow lets run unlocked. Not its table t: the body of a
// procedure it calls names t as a column alias, and lockproxy refuses a
// CALL of a routine whose body names a guarded table.
func mariadbSuiteRules() []rules.Rule {
	return guardRules(map[string]string{"bar": "id", "my_table": "id", "multiple_insert_result": "id",
		"fruits": "fruit", "fruitsExec": "fruit", "big_test_table2": "a", "bigParameter2": "a", "dupp_col": "i"})
}

// Reasons node suites' tests fail through lockproxy (the README's client
// section lists them).
const (
	reasonRereadAccounts = "a pool of an account that does not exist, given 2 s to open its first connections: " +
		"under users.from_backend lockproxy answers a login of an unknown account after reading the accounts " +
		"again (at most once a second), where MariaDB answers at once, so the pool's error may be its own " +
		"timeout instead of the 1045 the test expects; it passes or fails by timing"
	reasonBackendTLS = "reads Ssl_cipher of a client that connected without TLS: the suite's instances reach " +
		"the primary with TLS (backends.tls, for the suite's accounts that REQUIRE SSL), and the status is " +
		"the backend connection's"
)

var allPaths = clientSuitePaths

// mysql2Differences are node mysql2's test files that pass directly and
// are known to fail through lockproxy.
var mysql2Differences = map[string]suiteDifference{
	"test/integration/connection/test-select-ssl.test.mts": {paths: allPaths, reason: reasonBackendTLS},
}

// mariadbDifferences are Connector/Node's tests that pass directly and
// are known to fail through lockproxy.
var mariadbDifferences = map[string]suiteDifference{
	"test/integration/pool.test.js::Pool > pool error event":                   {paths: allPaths, reason: reasonRereadAccounts, timing: true},
	"test/integration/pool-callback.test.js::Pool callback > pool error event": {paths: allPaths, reason: reasonRereadAccounts, timing: true},
}

// runMySQL2Suite runs node mysql2's own suite (poku, its unit,
// integration and global tests) against addr in a fresh database and
// returns each integration and global test file's result (poku reports
// per file).
func runMySQL2Suite(t *testing.T, p *testProxy, node, src, side, addr string) map[string]string {
	t.Helper()
	host, port := splitAddr(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "node_modules/.bin/poku")
	cmd.Dir = src
	// CI: the suite sends MYSQL_PASSWORD only under CI.
	cmd.Env = append(os.Environ(), "CI=1", "MYSQL_HOST="+host, "MYSQL_PORT="+port, "MYSQL_USER="+p.bed.User,
		"MYSQL_PASSWORD="+p.bed.Password, "MYSQL_DATABASE="+freshNamedDB(t, p, "mysql2_suite_"+side))
	out, _ := cmd.CombinedOutput() // a failing file is a non-zero exit: the output says which
	ansi := regexp.MustCompile("\x1b\\[[0-9;]*m")
	line := regexp.MustCompile(`^\s*(PASS|FAIL|SKIP)\s+(test/(?:integration|global)/\S+)`)
	res := map[string]string{}
	for _, l := range strings.Split(ansi.ReplaceAllString(string(out), ""), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			res[m[2]] = strings.ToLower(m[1])
		}
	}
	if len(res) == 0 {
		t.Fatalf("%s: no results from node mysql2's suite:\n%s", side, tail(string(out), 40))
	}
	if side != "direct" {
		t.Logf("%s: poku's output:\n%s", side, tail(ansi.ReplaceAllString(string(out), ""), 400))
	}
	return res
}

// runMariaDBSuite runs Connector/Node's own suite (vitest, a file at a
// time as its package.json does) against addr in a fresh database and
// returns each test's result.
func runMariaDBSuite(t *testing.T, p *testProxy, node, src, side, addr string) map[string]string {
	t.Helper()
	host, port := splitAddr(t, addr)
	report := filepath.Join(t.TempDir(), "report.xml")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "node_modules/.bin/vitest", "--no-file-parallelism", "--isolate",
		"--reporter=junit", "--outputFile="+report, "run")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "TEST_DB_HOST="+host, "TEST_DB_PORT="+port, "TEST_DB_USER="+p.bed.User,
		"TEST_DB_PASSWORD="+p.bed.Password, "TEST_DB_DATABASE="+freshNamedDB(t, p, "mariadb_suite_"+side))
	out, _ := cmd.CombinedOutput()
	res, err := junitResults(report)
	if err != nil || len(res) == 0 {
		t.Fatalf("%s: no results from Connector/Node's suite (%v):\n%s", side, err, tail(string(out), 40))
	}
	return res
}

// suiteAccounts configures the node suites' instances as a deployment
// whose applications log in as accounts of their own would be: accounts
// read from the primary (users.from_backend), so the accounts a suite
// creates log in and change user through lockproxy, and TLS on both
// sides (the bed's certificate to clients, its CA to the backends), so
// accounts that REQUIRE SSL or X509 log in too. The suites fail logins
// on purpose, many from one address within a minute, so the failed-login
// throttle is off (proxy.login_throttle: false), as for a deployment
// whose clients all come from one address: MariaDB has no such throttle.
func suiteAccounts(bed *testbed.Bed) func(*rules.Config) {
	return func(c *rules.Config) {
		c.UsersFromBackend = true
		c.Proxy.LoginThrottle = false
		if bed.TLSCert != "" && bed.TLSCA != "" {
			c.Proxy.TLS = &rules.TLSConfig{Cert: bed.TLSCert, Key: bed.TLSKey}
			c.Backends.TLS = &rules.TLSClientConfig{CA: bed.TLSCA}
		}
	}
}

// runClientSuite runs one suite directly and through a lockproxy per path
// and compares the results; minPassed is how many tests must pass
// directly for the run to count as the suite's; edit, when not nil,
// changes every path's config.
func runClientSuite(t *testing.T, run func(t *testing.T, p *testProxy, side, addr string) map[string]string,
	guards []rules.Rule, known map[string]suiteDifference, minPassed int, edit func(*rules.Config)) {
	bed := testbedFor(t)
	with := func(f func(*rules.Config)) func(*rules.Config) {
		return func(c *rules.Config) {
			if edit != nil {
				edit(c)
			}
			if f != nil {
				f(c)
			}
		}
	}
	lockReg := prometheus.NewRegistry()
	lockMetrics, err := lockmgr.NewMetrics(lockReg)
	if err != nil {
		t.Fatal(err)
	}
	proxies := map[string]*testProxy{
		"no_rules": startProxy(t, with(nil)),
		"rule": startProxyWith(t, with(func(c *rules.Config) {
			c.Rules = guards
		}), memlock.New(nil, lockMetrics)),
		"replica": startProxy(t, with(func(c *rules.Config) {
			c.Backends.Replicas = []string{bed.ReplicaAddr}
			// The suites' pools write on one connection and read on
			// another, as a deployment with pools is told to configure.
			c.Backends.ReadYourWrites = rules.RYWUser
		})),
	}
	direct := run(t, proxies["no_rules"], "direct", bed.PrimaryAddr)
	var passed []string
	for name, res := range direct {
		if res == "pass" {
			passed = append(passed, name)
		}
	}
	sort.Strings(passed)
	if len(passed) < minPassed {
		t.Fatalf("only %d tests passed directly (want at least %d): the suite did not run as meant", len(passed), minPassed)
	}
	var counts []string
	for _, path := range clientSuitePaths {
		proxied := run(t, proxies[path], path, proxies[path].addr)
		switch path {
		case "rule":
			if n := locksTaken(t, lockReg); n == 0 {
				t.Errorf("rule: no row lock was taken: the rules guard nothing the suite writes")
			}
		case "replica":
			if n := replicaQueries(t, proxies[path]); n == 0 {
				t.Errorf("replica: no statement went to the replica")
			}
		}
		same := 0
		for _, name := range passed {
			got := proxied[name]
			d, listed := known[name]
			listed = listed && slices.Contains(d.paths, path)
			switch {
			case got == "pass" && listed && d.timing:
				same++
			case got == "pass" && listed:
				t.Errorf("%s: %s passes through lockproxy now: strike it from the known differences", path, name)
				same++
			case got == "pass":
				same++
			case listed:
				t.Logf("%s: %s fails through lockproxy, a known difference: %s", path, name, d.reason)
			default:
				t.Errorf("%s: %s passes directly but not through lockproxy (%s)", path, name, orMissing(got))
			}
		}
		counts = append(counts, fmt.Sprintf("%s %d", path, same))
	}
	t.Logf("%d tests pass directly; through lockproxy: %s", len(passed), strings.Join(counts, ", "))
	if testing.Verbose() {
		t.Logf("locks taken on the rule path: %.0f; statements served by the replica: %.0f",
			locksTaken(t, lockReg), replicaQueries(t, proxies["replica"]))
	}
}

// replicaQueries is how many statements p sent to a replica.
func replicaQueries(t *testing.T, p *testProxy) float64 {
	return sampleValue(t, p.reg, "lockproxy_queries_total", "route", "replica")
}

// locksTaken is how many lock requests the lock backend whose metrics
// reg holds granted.
func locksTaken(t *testing.T, reg *prometheus.Registry) float64 {
	return sampleValue(t, reg, "lockproxy_lock_acquire_total", "result", "acquired")
}

func orMissing(res string) string {
	if res == "" {
		return "not run"
	}
	return res
}

// requireSuite returns the absolute path of a suite's source directory,
// which must hold marker; a missing one fails the test under CI=true and
// skips it otherwise.
func requireSuite(t *testing.T, dir, marker string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err == nil {
		_, err = os.Stat(filepath.Join(abs, marker))
	}
	if err != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("the suite's source is missing (%v); CI=true: run scripts/testbed.sh install", err)
		}
		t.Skipf("skipped: the suite's source is missing (%v); run scripts/testbed.sh install", err)
	}
	return abs
}

// runPyMySQLSuite runs PyMySQL's own tests (pymysql/tests, with pytest)
// against addr, on a copy of the source whose databases.json names two
// fresh databases, and returns each test's result.
func runPyMySQLSuite(t *testing.T, p *testProxy, py, src, side, addr string) map[string]string {
	t.Helper()
	work := t.TempDir()
	if err := os.CopyFS(work, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	host, port := splitAddr(t, addr)
	portN, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	db := func(n int, extra map[string]any) map[string]any {
		m := map[string]any{"host": host, "port": portN, "user": p.bed.User, "password": p.bed.Password,
			"database": freshNamedDB(t, p, fmt.Sprintf("pymysql_suite_%s_%d", side, n))}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	dbs, err := json.Marshal([]map[string]any{db(1, map[string]any{"use_unicode": true, "local_infile": true}), db(2, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "pymysql/tests/databases.json"), dbs, 0o600); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(work, "report.xml")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE",
		"--junitxml="+report, "pymysql/tests")
	cmd.Dir = work
	// PYTHONPATH first: the suite tests the PyMySQL beside it, not the
	// system's python3-pymysql.
	cmd.Env = append(os.Environ(), "PYTHONPATH="+work, "PYTHONDONTWRITEBYTECODE=1")
	out, _ := cmd.CombinedOutput() // a failing test is a non-zero exit: the report says which
	res, err := junitResults(report)
	if err != nil || len(res) == 0 {
		t.Fatalf("%s: no results from PyMySQL's suite (%v):\n%s", side, err, out)
	}
	if side != "direct" && strings.Contains(string(out), "FAILED") {
		t.Logf("%s: pytest's summary:\n%s", side, tail(string(out), 40))
	}
	return res
}

// junitResults reads a JUnit XML report into classname::name -> pass |
// fail | skip.
func junitResults(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Suites []struct {
			Cases []struct {
				Class   string    `xml:"classname,attr"`
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Error   *struct{} `xml:"error"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	res := map[string]string{}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			r := "pass"
			switch {
			case c.Failure != nil || c.Error != nil:
				r = "fail"
			case c.Skipped != nil:
				r = "skip"
			}
			name := c.Class + "::" + c.Name
			if res[name] == "fail" {
				continue // an error in teardown after a pass or failure
			}
			res[name] = r
		}
	}
	return res, nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
