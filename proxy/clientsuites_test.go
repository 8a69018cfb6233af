package proxy

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

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
	var rs []rules.Rule
	for table, key := range guard {
		rs = append(rs, rules.Rule{Name: table, Table: table, Key: []string{key},
			Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
			OnUnkeyed: rules.OnUnkeyedAllow})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Name < rs[j].Name })
	return rs
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
		}, pymysqlSuiteRules(), pymysqlDifferences, 150)
	})
}

// runClientSuite runs one suite directly and through a lockproxy per path
// and compares the results; minPassed is how many tests must pass
// directly for the run to count as the suite's.
func runClientSuite(t *testing.T, run func(t *testing.T, p *testProxy, side, addr string) map[string]string,
	guards []rules.Rule, known map[string]suiteDifference, minPassed int) {
	bed := testbedFor(t)
	lockReg := prometheus.NewRegistry()
	lockMetrics, err := lockmgr.NewMetrics(lockReg)
	if err != nil {
		t.Fatal(err)
	}
	proxies := map[string]*testProxy{
		"no_rules": startProxy(t, nil),
		"rule": startProxyWith(t, func(c *rules.Config) {
			c.Rules = guards
		}, memlock.New(nil, lockMetrics)),
		"replica": startProxy(t, func(c *rules.Config) {
			c.Backends.Replicas = []string{bed.ReplicaAddr}
		}),
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
	return labelledSum(t, p.reg, "lockproxy_queries_total", "route", "replica")
}

// locksTaken is how many lock requests the lock backend whose metrics
// reg holds granted.
func locksTaken(t *testing.T, reg *prometheus.Registry) float64 {
	return labelledSum(t, reg, "lockproxy_lock_acquire_total", "result", "acquired")
}

// labelledSum sums the samples of counter name in reg whose label has
// value.
func labelledSum(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
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
