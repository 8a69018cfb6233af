package e2e

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/redis/go-redis/v9"
)

// The fault rig: a private bed (primary, replica, Redis), two lockproxy
// processes sharing its Redis, and a flash-sale workload (the read-then-write
// buy of flashsale_test.go plus autocommit reads that route to the replica)
// running through both while a fault is injected.

const (
	faultTTL  = 3 * time.Second
	faultWait = 5 * time.Second
	faultDB   = "e2e_faults"
)

// faultPlan sizes a run: LOCKPROXY_FAULTS_LONG=1 selects the long one.
type faultPlan struct {
	buyersPerProxy int
	before, hold   time.Duration // workload before the fault; how long the fault lasts
	after          time.Duration // workload after the first successful buy past the fault
	rounds         int           // each fault is injected this many times
}

func currentPlan() faultPlan {
	if long, _ := strconv.ParseBool(os.Getenv("LOCKPROXY_FAULTS_LONG")); long {
		return faultPlan{buyersPerProxy: 16, before: 5 * time.Second, hold: 10 * time.Second, after: 10 * time.Second, rounds: 3}
	}
	return faultPlan{buyersPerProxy: 4, before: time.Second, hold: 3 * time.Second, after: 2 * time.Second, rounds: 1}
}

// node is a lockproxy process that can be killed and started again on the
// same ports with the same config.
type node struct {
	*instance
	cfg  string
	logf *os.File
	db   *sql.DB // the workload's handle
}

// faultConfig is a config with the bed's replica, Redis locks with a short
// lease on the Redis that redisYAML (the lines of locks.redis) names, and
// the flash-sale rule.
func faultConfig(bed *testbed.Bed, listen, admin, redisYAML string) string {
	return fmt.Sprintf(`proxy:
  listen: %s
  shutdown_grace: 2s
admin:
  listen: %s
users:
  - user: %s
    password: %q
backends:
  primary: %s
  replicas: [%s]
  max_replica_lag: 2s
locks:
  backend: redis
  redis:
%s
  ttl: %s
  wait_timeout: %s
  on_unavailable: reject
%s`, listen, admin, bed.User, bed.Password, bed.PrimaryAddr, bed.ReplicaAddr, redisYAML,
		faultTTL, faultWait, saleRule(faultDB)+"    fence: fence\n")
}

// bedRedis is the locks.redis of the bed's own Redis.
func bedRedis(bed *testbed.Bed) string { return "    addrs: [" + bed.RedisAddr + "]" }

func startNode(t *testing.T, bed *testbed.Bed, conns int, redisYAML string) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{instance: &instance{addr: freePort(t), admin: freePort(t), log: filepath.Join(dir, "lockproxy.log")},
		cfg: filepath.Join(dir, "rules.yaml")}
	if err := os.WriteFile(n.cfg, []byte(faultConfig(bed, n.addr, n.admin, redisYAML)), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	if n.logf, err = os.Create(n.log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n.cmd == nil || n.cmd.Process == nil {
			return
		}
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
		n.stop()
		_ = n.logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(n.log)
			t.Logf("lockproxy %s log:\n%s", n.addr, tail(string(b), 80))
		}
	})
	n.launch(t)
	n.db = open(t, bed, n.addr, faultDB, "interpolateParams=false&timeout=2s", conns)
	return n
}

// launch starts the process (again) and waits until it serves.
func (n *node) launch(t *testing.T) {
	t.Helper()
	n.cmd = exec.Command(binary, "--config", n.cfg, "--log-format", "console")
	n.cmd.Stdout, n.cmd.Stderr = n.logf, n.logf
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := testbed.AwaitAdmin(ctx, n.admin, "/healthz", nil); err != nil {
		t.Fatalf("lockproxy did not start: %v", err)
	}
}

func (n *node) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := n.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v to lockproxy: %v", sig, err)
	}
}

// awaitHeld waits until one of the node's sessions holds a lock, as
// /debug/locks shows, and reports whether one did within d.
func (n *node) awaitHeld(t *testing.T, d time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		resp, err := http.Get("http://" + n.admin + "/debug/locks")
		if err != nil {
			continue
		}
		var body struct {
			Locks []struct {
				State string `json:"state"`
			} `json:"locks"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("/debug/locks: %v", err)
		}
		for _, l := range body.Locks {
			if l.State == "held" {
				return true
			}
		}
	}
	return false
}

// replicaReads sums lockproxy_queries_total{route="replica"} of the node.
func (n *node) replicaReads(t *testing.T) float64 {
	t.Helper()
	resp, err := http.Get("http://" + n.admin + "/metrics")
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "lockproxy_queries_total{") && strings.Contains(line, `route="replica"`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("/metrics line %q: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

// rig is the bed, its two proxies and a direct handle on the primary.
type rig struct {
	bed    *testbed.Bed
	direct *sql.DB
	nodes  []*node
	redis  redis.UniversalClient // the lock service, for checkLocksClear
	plan   faultPlan
}

func newRig(t *testing.T) *rig {
	bed := testbed.Private(t)
	r := &rig{bed: bed, plan: currentPlan()}
	r.direct = freshDB(t, bed, faultDB)
	fencedSaleTables(t, r.direct)
	if err := bed.WaitReplicaCaughtUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r.nodes = append(r.nodes, startNode(t, bed, r.plan.buyersPerProxy+2, bedRedis(bed)))
	}
	r.redis = redis.NewClient(&redis.Options{Addr: bed.RedisAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = r.redis.Close() })
	return r
}

// fencedSaleTables makes the fenced stock table and the orders table.
func fencedSaleTables(t *testing.T, direct *sql.DB) {
	t.Helper()
	// The stock row carries a fence column: a holder paused past its lease
	// cannot write over the next holder (rules[].fence).
	fenced := "CREATE TABLE sku_stock (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL, fence BIGINT UNSIGNED NOT NULL DEFAULT 0)"
	for _, s := range []string{fenced, ordersSchema} {
		if _, err := direct.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
}

// event is one finished attempt of the workload.
type event struct {
	at    time.Time // when it finished
	began time.Time
	read  bool   // an autocommit read, not a buy
	code  string // "" on success; see classify
	msg   string
}

// workload runs buyers and readers through every node until stopped.
type workload struct {
	mu     sync.Mutex
	events []event
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (r *rig) startWorkload(t *testing.T) *workload {
	ctx, cancel := context.WithCancel(context.Background())
	w := &workload{cancel: cancel}
	for p, n := range r.nodes {
		for i := range r.plan.buyersPerProxy {
			w.wg.Add(1)
			go w.buyer(ctx, n.db, fmt.Sprintf("p%d-b%d", p, i), i%2 == 1)
		}
		w.wg.Add(1)
		go w.reader(ctx, n.db)
	}
	t.Cleanup(w.stop)
	return w
}

func (w *workload) record(began time.Time, read bool, err error) {
	e := event{at: time.Now(), began: began, read: read}
	if err != nil {
		e.code, e.msg = classify(err), err.Error()
	}
	w.mu.Lock()
	w.events = append(w.events, e)
	w.mu.Unlock()
}

func (w *workload) buyer(ctx context.Context, db *sql.DB, name string, prepared bool) {
	defer w.wg.Done()
	for ctx.Err() == nil {
		// A paused proxy holds a client past the fault's length; the
		// attempt's own bound is generous.
		began := time.Now()
		actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := buy(actx, db, name, prepared)
		cancel()
		w.record(began, false, err)
		if err != nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// reader is an autocommit read, which goes to the replica when it is healthy.
func (w *workload) reader(ctx context.Context, db *sql.DB) {
	defer w.wg.Done()
	for ctx.Err() == nil {
		began := time.Now()
		actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var stock int
		err := db.QueryRowContext(actx, "SELECT stock FROM sku_stock WHERE sku_id = 1").Scan(&stock)
		cancel()
		w.record(began, true, err)
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *workload) stop() {
	w.cancel()
	w.wg.Wait()
}

// firstBuySince returns when the first successful buy at or after from
// finished, and whether there was one.
func (w *workload) firstBuySince(from time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.events {
		if !e.read && e.code == "" && !e.at.Before(from) {
			return e.at, true
		}
	}
	return time.Time{}, false
}

// firstBuyBegunSince returns when the first successful buy that began at
// or after from finished, and whether there was one.
func (w *workload) firstBuyBegunSince(from time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.events {
		if !e.read && e.code == "" && !e.began.Before(from) {
			return e.at, true
		}
	}
	return time.Time{}, false
}

func (w *workload) snapshot() []event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]event(nil), w.events...)
}

// classify names a client error by MySQL error code. Errors the driver
// reports for a connection that broke are 2013 (CR_SERVER_LOST); a refused
// connect is 2003 (CR_CONN_HOST_ERROR). Anything else is "other".
func classify(err error) string {
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me):
		return strconv.Itoa(int(me.Number))
	case errors.Is(err, syscall.ECONNREFUSED):
		return "2003"
	case errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "2013"
	case errors.Is(err, context.DeadlineExceeded):
		return "client-timeout"
	default:
		return "other"
	}
}

// counts is a tally of events by code ("ok" for successes).
type counts map[string]int

func (c counts) String() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s:%d", k, c[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// tally counts buys and reads in [from, to) by outcome, and keeps one
// message per error code.
func tally(events []event, from, to time.Time) (buys, reads counts, samples map[string]string) {
	buys, reads, samples = counts{}, counts{}, map[string]string{}
	for _, e := range events {
		if e.at.Before(from) || !e.at.Before(to) {
			continue
		}
		c := buys
		if e.read {
			c = reads
		}
		if e.code == "" {
			c["ok"]++
			continue
		}
		c[e.code]++
		if _, ok := samples[e.code]; !ok {
			samples[e.code] = e.msg
		}
	}
	return buys, reads, samples
}
