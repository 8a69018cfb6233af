package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: %v", name, err)
	}
	r := strings.NewReplacer(db, "<db>")
	return runOutput{stdout: r.Replace(stdout.String()), stderr: r.Replace(stderr.String()), code: cmd.ProcessState.ExitCode()}
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
					"--default-character-set=utf8mb4", db}, c.args...)
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
	mustExec(t, p.direct(t, "", ""), "DROP DATABASE IF EXISTS `"+name+"`", "CREATE DATABASE `"+name+"`")
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
