package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/rules"
)

// suiteSkip are go-sql-driver/mysql tests run on neither side:
// TestConnectorReturnsTimeout panics inside the driver (a nil logger on
// its timeout path) and takes the whole test binary down with it, before
// it has talked to any server.
const suiteSkip = "^TestConnectorReturnsTimeout$"

// TestGoSQLDriverSuite runs go-sql-driver/mysql's own test suite (the
// module lockproxy's tests already depend on) straight against the
// primary, through lockproxy, and through a lockproxy that multiplexes
// its sessions (backends.pool.multiplex): every test and subtest that
// passes directly must pass through both, TestStaleConnectionChecks
// included.
func TestGoSQLDriverSuite(t *testing.T) {
	goBin := filepath.Join(build.Default.GOROOT, "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = requireTool(t, "go", "version")
	}
	// The bed's servers speak TLS, so the suite's TLS tests run directly:
	// lockproxy offers TLS to its clients with the bed's certificate too,
	// and uses it to MariaDB (TestTLS reads Ssl_cipher, which through
	// lockproxy describes lockproxy's own link to MariaDB).
	withTLS := func(c *rules.Config) {
		if bed := testbedFor(t); bed.TLSCert != "" {
			c.Proxy.TLS = &rules.TLSConfig{Cert: bed.TLSCert, Key: bed.TLSKey}
			c.Backends.TLS = &rules.TLSClientConfig{CA: bed.TLSCA}
		}
	}
	p := startProxy(t, withTLS)
	mux := startProxy(t, func(c *rules.Config) { withTLS(c); multiplexed(32)(c) })
	run := func(side, addr string) map[string]string {
		db := freshNamedDB(t, p, "gosql_suite_"+side)
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, goBin, "test", "-count=1", "-json", "-skip", suiteSkip, "github.com/go-sql-driver/mysql")
		cmd.Env = append(os.Environ(), "MYSQL_TEST_USER="+p.bed.User, "MYSQL_TEST_PASS="+p.bed.Password,
			"MYSQL_TEST_PROT=tcp", "MYSQL_TEST_ADDR="+addr, "MYSQL_TEST_DBNAME="+db, "MYSQL_TEST_CONCURRENT=")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		_ = cmd.Run() // a failing test is a non-zero exit: the results say which
		return suiteResults(t, side, out.Bytes())
	}
	direct := run("direct", p.bed.PrimaryAddr)
	passed := 0
	for _, res := range direct {
		if res == "pass" {
			passed++
		}
	}
	if passed < 100 || direct["TestStaleConnectionChecks"] != "pass" {
		t.Fatalf("only %d tests passed directly (TestStaleConnectionChecks: %q): the suite did not run as meant",
			passed, direct["TestStaleConnectionChecks"])
	}
	for _, side := range []struct{ name, addr string }{{"proxy", p.addr}, {"proxy_mux", mux.addr}} {
		proxied := run(side.name, side.addr)
		var lost []string
		for name, res := range direct {
			if res == "pass" && proxied[name] != "pass" {
				lost = append(lost, name+" ("+proxied[name]+")")
			}
		}
		sort.Strings(lost)
		if len(lost) > 0 {
			t.Errorf("%d of the %d tests that pass directly do not pass through lockproxy (%s):\n%s",
				len(lost), passed, side.name, strings.Join(lost, "\n"))
		}
		t.Logf("%d tests and subtests pass directly, %d of them through lockproxy (%s)", passed, passed-len(lost), side.name)
	}
}

// suiteResults reads `go test -json` output into test name -> pass |
// fail | skip; output of failed tests is logged.
func suiteResults(t *testing.T, side string, out []byte) map[string]string {
	t.Helper()
	res := map[string]string{}
	failOut := map[string]*strings.Builder{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct{ Action, Test, Output string }
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Test == "" {
			continue
		}
		switch e.Action {
		case "pass", "fail", "skip":
			res[e.Test] = e.Action
		case "output":
			if failOut[e.Test] == nil {
				failOut[e.Test] = &strings.Builder{}
			}
			failOut[e.Test].WriteString(e.Output)
		}
	}
	if len(res) == 0 {
		t.Fatalf("%s: no test results from go test:\n%s", side, out)
	}
	for name, r := range res {
		if r == "fail" && side == "proxy" && !strings.Contains(name, "/") {
			t.Logf("%s: %s failed:\n%s", side, name, failOut[name])
		}
	}
	return res
}
