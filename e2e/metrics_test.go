package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/redislock/redislocktest"
	"github.com/redis/go-redis/v9"
)

// promTool finds a program of the prometheus package (promtool,
// prometheus): under CI=true a missing one fails the test
// (scripts/testbed.sh install provides it), elsewhere it skips.
func promTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("%s not found (CI=true: run scripts/testbed.sh install, which installs the prometheus package): %v", name, err)
	}
	t.Skipf("%s not found (scripts/testbed.sh install installs it): %v", name, err)
	return ""
}

// checkDebugLocks wants /debug/locks to list exactly the one held row 1
// of sku-stock, with its user and statement.
func checkDebugLocks(t *testing.T, bed *testbed.Bed, in *instance) {
	t.Helper()
	var body struct {
		Instance string `json:"instance"`
		Locks    []struct {
			Key, Rule, State, User, Statement string
		} `json:"locks"`
	}
	raw := get(t, "http://"+in.admin+"/debug/locks")
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	if len(body.Locks) != 1 || body.Locks[0].Rule != "sku-stock" || body.Locks[0].State != "held" ||
		!strings.HasSuffix(body.Locks[0].Key, "/1") || body.Locks[0].User != bed.User ||
		!strings.Contains(body.Locks[0].Statement, "sku_id = 1") || body.Instance == "" {
		t.Fatalf("want the one held row of sku-stock:\n%s", raw)
	}
}

// scrapeSettled scrapes /metrics once the reload and the release after
// the refused COMMIT, both asynchronous, show (or after 10s).
func scrapeSettled(t *testing.T, in *instance) []byte {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		metrics := get(t, "http://"+in.admin+"/metrics")
		if bytes.Contains(metrics, []byte(`lockproxy_config_reloads_total{result="success"} 1`)) &&
			bytes.Contains(metrics, []byte("lockproxy_locks_held 0")) || time.Now().After(deadline) {
			return metrics
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// loseLease has c take row 1 in a transaction, hands its Redis lock to
// someone else behind lockproxy's back, waits for the renewal to count the
// loss, and checks the COMMIT is then refused with 1213.
func loseLease(t *testing.T, bed *testbed.Bed, in *instance, c *sql.Conn) {
	t.Helper()
	ctx := context.Background()
	execOn(t, c, "BEGIN", "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1")
	rdb := redis.NewClient(&redis.Options{Addr: bed.RedisAddr})
	defer rdb.Close()
	lock := "lockproxy:{e2e_metrics.sku_stock/1}"
	if n, err := rdb.Exists(ctx, lock).Result(); err != nil || n != 1 {
		t.Fatalf("lock %s: exists=%d, %v", lock, n, err)
	}
	if err := redislocktest.TakeOver(ctx, rdb, lock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Del(context.Background(), lock).Err() })
	lost := []byte(`lockproxy_lock_lease_lost_total{rule="sku-stock"} 1`)
	deadline := time.Now().Add(10 * time.Second)
	for !bytes.Contains(get(t, "http://"+in.admin+"/metrics"), lost) {
		if time.Now().After(deadline) {
			t.Fatalf("the taken-over lock was never counted lost")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err := c.ExecContext(ctx, "COMMIT")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1213 {
		t.Fatalf("COMMIT after the lease was lost: want 1213, got %v", err)
	}
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", url, resp.Status, err, body)
	}
	return body
}

// TestMetricsExposition runs guarded traffic with contention through a
// built lockproxy on Redis, then checks /debug/locks while a row is held
// and the /metrics exposition: every contract series of docs/metrics.md is there,
// and promtool accepts it.
func TestMetricsExposition(t *testing.T) {
	tool := promTool(t, "promtool")
	bed := testbed.Get(t)
	const dbName = "e2e_metrics"
	keyedTable(t, bed, dbName)
	in := start(t, bed, redisLocks(bed, "1s", "300ms"), saleRule(dbName))
	h := open(t, bed, in.addr, dbName, "", 4)
	ctx := context.Background()
	holder, waiter := testbed.Conn(t, h), testbed.Conn(t, h)

	for range 3 {
		execOn(t, waiter, "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 2")
	}
	execOn(t, holder, "BEGIN", "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1")
	_, err := waiter.ExecContext(ctx, "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1205 {
		t.Fatalf("update of the held row: want 1205, got %v", err)
	}

	t.Run("/debug/locks shows the held row", func(t *testing.T) { checkDebugLocks(t, bed, in) })
	execOn(t, holder, "COMMIT")
	loseLease(t, bed, in, holder)
	if err := in.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	metrics := scrapeSettled(t, in)
	t.Run("contract series present", func(t *testing.T) {
		for _, want := range []string{
			`lockproxy_lock_wait_seconds_bucket{rule="sku-stock",le="+Inf"} 6`,
			`lockproxy_lock_acquire_total{result="acquired",rule="sku-stock"} 5`,
			`lockproxy_lock_acquire_total{result="timeout",rule="sku-stock"} 1`,
			`lockproxy_lock_hold_seconds_count{rule="sku-stock"}`,
			"lockproxy_locks_held 0",
			"lockproxy_lock_waiters 0",
			`lockproxy_queries_total{kind="query",route="primary"}`,
			"lockproxy_client_connections 2",
			`lockproxy_lock_lease_lost_total{rule="sku-stock"} 1`,
			`lockproxy_config_reloads_total{result="success"} 1`,
		} {
			if !bytes.Contains(metrics, []byte(want)) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})
	t.Run("promtool check metrics", func(t *testing.T) {
		cmd := exec.Command(tool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(metrics)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool check metrics: %v\n%s", err, out)
		}
	})
}

// TestDashboardAndDocs keeps docs/grafana/lockproxy-dashboard.json,
// docs/prometheus/alerts.yml and docs/metrics.md in step with the metrics
// lockproxy registers: every registered name is documented, none of them
// names a metric that does not exist, every dashboard query parses
// (promtool checks them as recording rules, template variables filled
// in), and the alerting rules pass their promtool unit tests.
func TestDashboardAndDocs(t *testing.T) {
	tool := promTool(t, "promtool")
	root := testbed.RepoRoot()
	registered := registeredMetrics(t, root)
	dash, err := os.ReadFile(filepath.Join(root, "docs", "grafana", "lockproxy-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range registered {
		if !bytes.Contains(doc, []byte("`"+name+"`")) {
			t.Errorf("docs/metrics.md does not document %s", name)
		}
	}
	alerts, err := os.ReadFile(filepath.Join(root, "docs", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for file, text := range map[string][]byte{"dashboard": dash, "docs/metrics.md": doc, "alerts.yml": alerts} {
		for _, m := range metricName.FindAllString(string(text), -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")
			if !registered[base] {
				t.Errorf("%s names %s, which lockproxy does not register", file, m)
			}
		}
	}
	queries := dashboardQueries(t, dash, "1m")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, q := range queries {
		expr, _ := json.Marshal(q.expr)
		fmt.Fprintf(&rules, "      - record: dashboard:query%d\n        expr: %s\n", i, expr)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("dashboard queries do not parse: %v\n%s\n%s", err, out, rules.String())
	}
	t.Run("alerting rules check and pass their unit tests", func(t *testing.T) {
		dir := filepath.Join(root, "docs", "prometheus")
		for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
			cmd := exec.Command(tool, args...)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})
}

// dashQuery is one query of the dashboard, template variables filled in.
type dashQuery struct{ panel, expr string }

func dashboardQueries(t *testing.T, dash []byte, rateInterval string) []dashQuery {
	t.Helper()
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	fill := strings.NewReplacer("$__rate_interval", rateInterval, "$instance", ".*", "$rule", ".*")
	var out []dashQuery
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, dashQuery{p.Title, fill.Replace(tg.Expr)})
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d dashboard queries", len(out))
	}
	return out
}

var (
	metricName     = regexp.MustCompile(`lockproxy_[a-z_]+[a-z]`)
	registeredName = regexp.MustCompile(`(?:Name:\s+|NewDesc\()"(lockproxy_[a-z_]+)"`)
)

// registeredMetrics finds the metric names lockproxy's non-test Go code
// registers (Name: "lockproxy_..." in collector options, or
// prometheus.NewDesc("lockproxy_..." in a custom collector).
func registeredMetrics(t *testing.T, root string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, dir := range []string{"proxy", "lockmgr", "router", "cmd/lockproxy"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			for _, m := range registeredName.FindAllSubmatch(src, -1) {
				names[string(m[1])] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !names["lockproxy_lock_wait_seconds"] || !names["lockproxy_queries_total"] {
		t.Fatalf("registered metrics not found in the source: %v", names)
	}
	return names
}

// TestDashboardOnPrometheus runs a real Prometheus scraping a built
// lockproxy every second while sessions contend for a row, then asks it
// every dashboard query: all must evaluate, and the panels the traffic
// feeds must have data.
func TestDashboardOnPrometheus(t *testing.T) {
	server := promTool(t, "prometheus")
	bed := testbed.Get(t)
	const dbName = "e2e_dashboard"
	keyedTable(t, bed, dbName)
	in := start(t, bed, redisLocks(bed, "5s", "200ms"), saleRule(dbName))
	prom := startPrometheus(t, server, in.admin)

	h := open(t, bed, in.addr, dbName, "", 8)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				tx, err := h.BeginTx(ctx, nil)
				if err != nil {
					return
				}
				_, _ = tx.ExecContext(ctx, "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = ?", 1+i%2)
				// The application's work, while holding the row: longer than
				// the 200ms wait_timeout, so with three sessions per row some
				// waits time out whatever the machine's speed.
				time.Sleep(250 * time.Millisecond)
				_ = tx.Commit()
			}
		}()
	}
	wg.Wait()
	// Let a few scrapes see the end state.
	waitQuery(t, prom, `count_over_time(lockproxy_lock_waiters[1m]) >= 5`)

	dash, err := os.ReadFile(filepath.Join(testbed.RepoRoot(), "docs", "grafana", "lockproxy-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	fed := map[string]bool{ // panels this traffic must fill
		"Lock wait p50 / p99 by rule": true, "Lock acquire results /s": true, "Locks held / waiters": true,
		"Lock hold p99 by rule": true, "Leases lost (last 1h)": true, "Statements by route": true,
		"Statements by route and kind": true, "Client connections": true,
		"Lock hand-off p50 / p99 by rule": true, "Waiters per key p50 / p99 by rule": true,
		"Lease renewals /s by result": true, "Hot keys: wait in the last 1-2 min (top 10 per instance)": true,
	}
	for _, q := range dashboardQueries(t, dash, "10s") {
		n, err := promQuery(prom, q.expr)
		switch {
		case err != nil:
			t.Errorf("panel %q: %s: %v", q.panel, q.expr, err)
		case n == 0 && fed[q.panel]:
			t.Errorf("panel %q has no data: %s", q.panel, q.expr)
		}
	}
	if n, err := promQuery(prom, `sum(lockproxy_lock_acquire_total{result="timeout"}) > 0`); err != nil || n == 0 {
		t.Errorf("the contention produced no timeouts Prometheus saw (%d series, %v)", n, err)
	}
}

// startPrometheus runs prometheus on a free loopback port, scraping
// target every second, and returns its base URL once it is ready.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	yml := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: lockproxy\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", tail(string(b), 40))
		}
	})
	base := "http://" + addr
	waitQuery(t, base, `up{job="lockproxy"} == 1`)
	return base
}

// waitQuery waits until expr returns at least one series.
func waitQuery(t *testing.T, prom, expr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := promQuery(prom, expr)
		if err == nil && n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: %s: no result within 30s (%v)", expr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// promQuery evaluates an instant query and returns how many series it gave.
func promQuery(prom, expr string) (int, error) {
	resp, err := http.Get(prom + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("%s: %s", r.Status, r.Error)
	}
	return len(r.Data.Result), nil
}
