package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/parser"
)

var update = flag.Bool("update", false, "rewrite the golden files of lockproxy check on recorded logs")

// checkDB is the database of TestCheckRecordedWorkload: fixed, so the
// golden files do not change from run to run.
const checkDB = "e2e_check"

// checkRules observe the sale's stock (the rule being rolled out) and
// enforce a second table's.
const checkRules = `rules:
  - name: sku-stock
    table: ` + checkDB + `.sku_stock
    key: [sku_id]
    lock: [write, locking_read, read_in_txn]
    on_unkeyed: reject
    mode: observe
  - name: hot-row
    table: ` + checkDB + `.hot
    key: [id]
    on_unkeyed: reject
`

// representative are the statements besides the sale, one connection in
// order: a locked read and a guarded update in a transaction, a shared
// read of two rows, an unkeyed update, stored code, dynamic SQL, the
// enforced table keyed and unkeyed, a keyed update in a charset lockproxy
// cannot read text in, a plain read.
var representative = []string{
	"BEGIN",
	"SELECT stock FROM sku_stock WHERE sku_id = 1 FOR UPDATE",
	"UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 AND stock >= 1",
	"COMMIT",
	"SELECT stock FROM sku_stock WHERE sku_id IN (1, 2) LOCK IN SHARE MODE",
	"UPDATE sku_stock SET stock = stock",
	"CALL restock(1)",
	"PREPARE s FROM 'UPDATE sku_stock SET stock = 3 WHERE sku_id = 1'",
	"EXECUTE s",
	"DEALLOCATE PREPARE s",
	"UPDATE hot SET v = v + 1 WHERE id = 1",
	"UPDATE hot SET v = 0",
	"SET NAMES gbk",
	"UPDATE sku_stock SET stock = 5 WHERE sku_id = 1",
	"UPDATE sku_stock SET stock = 6 WHERE sku_id = 1 AND 'é' <> ''",
	"SET NAMES utf8mb4",
	"SELECT stock FROM sku_stock WHERE sku_id = 2",
}

// checkWorkload is what TestCheckRecordedWorkload records and replays
// through h: the unsafe flash sale (buyers at once, each on a connection
// of its own, opened before the first buys, stock enough for all, so the
// statements are the same every run), then the representative
// statements. It returns the statements refused by lockproxy.
func checkWorkload(t *testing.T, h *sql.DB, buyers int) []string {
	t.Helper()
	ctx := context.Background()
	conns := make([]*sql.Conn, buyers)
	for i := range conns {
		c, err := h.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	var wg sync.WaitGroup
	errs := make([]error, buyers)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = buyOn(ctx, c, fmt.Sprintf("buyer-%d", i))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("the sale: %v", err)
	}
	var refused []string
	c := conns[0]
	for _, s := range representative {
		_, err := c.ExecContext(ctx, s)
		var me *mysql.MySQLError
		switch {
		case err == nil:
		case errors.As(err, &me) && me.Number == 1105 && strings.HasPrefix(me.Message, "lockproxy:"):
			refused = append(refused, s)
		default:
			t.Fatalf("%s: %v", s, err)
		}
	}
	return refused
}

// buyOn is buy on one connection, its statements as text.
func buyOn(ctx context.Context, c *sql.Conn, buyer string) (bool, error) {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	return buyIn(ctx, tx, buyer, false)
}

// recordLogs turns the primary's general and slow query logs (every
// statement: long_query_time 0) on into files of dir while f runs, and
// back as they were. f must end the sessions it opens on database db:
// MariaDB writes a statement's slow log entry after its answer, so the
// logs are turned off only once the general log shows every session
// that connected on db quit (a session's Quit comes after its last
// statement's entry).
func recordLogs(t *testing.T, bed *testbed.Bed, dir, db string, f func()) (general, slow string) {
	t.Helper()
	admin := open(t, bed, bed.PrimaryAddr, "", "", 1)
	var prev struct {
		output, general, generalFile, slow, slowFile, longQuery string
	}
	if err := admin.QueryRow("SELECT @@global.log_output, @@global.general_log, @@global.general_log_file, @@global.slow_query_log, @@global.slow_query_log_file, @@global.long_query_time").
		Scan(&prev.output, &prev.general, &prev.generalFile, &prev.slow, &prev.slowFile, &prev.longQuery); err != nil {
		t.Fatal(err)
	}
	general, slow = filepath.Join(dir, "general.log"), filepath.Join(dir, "slow.log")
	if err := os.Chmod(dir, 0o777); err != nil { // the server writes there
		t.Fatal(err)
	}
	restore := []string{
		"SET GLOBAL general_log = OFF", "SET GLOBAL slow_query_log = OFF",
		"SET GLOBAL log_output = '" + prev.output + "'",
		"SET GLOBAL general_log_file = '" + prev.generalFile + "'",
		"SET GLOBAL slow_query_log_file = '" + prev.slowFile + "'",
		"SET GLOBAL long_query_time = " + prev.longQuery,
		"SET GLOBAL general_log = " + prev.general, "SET GLOBAL slow_query_log = " + prev.slow,
	}
	defer func() {
		for _, s := range restore {
			if _, err := admin.Exec(s); err != nil {
				t.Errorf("%s: %v", s, err)
			}
		}
	}()
	for _, s := range []string{
		"SET GLOBAL log_output = 'FILE'",
		"SET GLOBAL general_log_file = '" + general + "'", "SET GLOBAL slow_query_log_file = '" + slow + "'",
		"SET GLOBAL long_query_time = 0", // for the connections opened from now on
		"SET GLOBAL slow_query_log = ON", "SET GLOBAL general_log = ON",
	} {
		if _, err := admin.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	f()
	testbed.Eventually(t, 10*time.Second, "every session on "+db+" quit in the general log", func() bool {
		b, err := os.ReadFile(general)
		if err != nil {
			t.Fatal(err)
		}
		on, quit := sessionsOn(strings.SplitAfter(string(b), "\n"), db)
		for id := range on {
			if !quit[id] {
				return false
			}
		}
		return true
	})
	return general, slow
}

// sessionsOn reads general log lines: the thread ids of the sessions
// that connected on database db, and of every session that quit.
func sessionsOn(lines []string, db string) (on, quit map[string]bool) {
	on, quit = map[string]bool{}, map[string]bool{}
	for _, l := range lines {
		switch m := generalEntry.FindStringSubmatch(l); {
		case m == nil:
		case m[2] == "Connect" && strings.Contains(l, " on "+db+" "):
			on[m[1]] = true
		case m[2] == "Quit":
			quit[m[1]] = true
		}
	}
	return on, quit
}

// generalEntry matches the first line of a general log entry: an
// optional time, the thread id and the command.
var generalEntry = regexp.MustCompile(`^(?:\d{6}\s+\d{1,2}:\d\d:\d\d)?\t+ *(\d+) ([A-Za-z][A-Za-z ]*)(?:\t|$)`)

// slowEntryThread matches a slow log entry's thread line.
var slowEntryThread = regexp.MustCompile(`^# Thread_id: (\d+)\s`)

// ownSessions writes copies of the general and slow logs that keep only
// the sessions that connected to database db (their Connect entries in the
// general log say so), and returns their paths.
func ownSessions(t *testing.T, general, slow, db string) (string, string) {
	t.Helper()
	read := func(path string) []string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.SplitAfter(string(b), "\n")
	}
	write := func(path string, lines []string) string {
		out := strings.TrimSuffix(path, ".log") + ".own.log"
		if err := os.WriteFile(out, []byte(strings.Join(lines, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		return out
	}
	lines := read(general)
	own, _ := sessionsOn(lines, db)
	if len(own) == 0 {
		t.Fatalf("no session connected to %s in the general log", db)
	}
	var kept []string
	keep, header := false, true
	for _, l := range lines {
		if m := generalEntry.FindStringSubmatch(l); m != nil {
			header, keep = false, own[m[1]]
		}
		if header || keep {
			kept = append(kept, l)
		}
	}
	general = write(general, kept)

	// A slow log entry is its "# Time:" and "# User@Host:" lines, its
	// "# Thread_id:" line and what follows up to the next entry.
	lines, kept = read(slow), nil
	var pending []string
	keep, header = false, true
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "# Time: "), strings.HasPrefix(l, "# User@Host: "):
			header = false
			pending = append(pending, l)
		case slowEntryThread.MatchString(l):
			keep = own[slowEntryThread.FindStringSubmatch(l)[1]]
			if keep {
				kept = append(kept, pending...)
				kept = append(kept, l)
			}
			pending = nil
		case header:
			kept = append(kept, l)
		case keep && len(pending) == 0:
			kept = append(kept, l)
		}
	}
	return general, write(slow, kept)
}

// runCheck runs `lockproxy check` on a log with the server's schema.
func runCheck(t *testing.T, bed *testbed.Bed, cfg, log string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(binary, "check", "--config", cfg, "--log", log, "--dsn", bed.DSN(bed.PrimaryAddr, "", ""))
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("lockproxy check --log %s: %v\n%s", filepath.Base(log), err, errb.String())
	}
	return out.String()
}

// golden compares out with testdata/name, which -update rewrites.
func golden(t *testing.T, name, out string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("lockproxy check output differs from %s (go test ./e2e -run TestCheckRecordedWorkload -update accepts it):\n%s", path, out)
	}
}

// decisions are what one statement shape got: "outcome rule reason"
// (an observed outcome, or "rejected rule" by an enforcing rule), counted
// per statement.
type decisions map[string]map[string]int

func (d decisions) add(shape, what string, n int) {
	if d[shape] == nil {
		d[shape] = map[string]int{}
	}
	d[shape][what] += n
}

// moved is d with the decisions of shape from counted under to.
func (d decisions) moved(from, to string) decisions {
	out := decisions{}
	for shape, m := range d {
		if shape == from {
			shape = to
		}
		for what, n := range m {
			out.add(shape, what, n)
		}
	}
	return out
}

var (
	checkBlock    = regexp.MustCompile(`^(\d+) x (.*)$`)
	checkObserved = regexp.MustCompile(`^    observed:   (would_\w+) (\S+)(?: \(([a-z_]+)\))?`)
	checkRejected = regexp.MustCompile(`^    rejected:   ERROR 1105 \(HY000\): lockproxy: rule (\S+):`)
)

// checkDecisions reads check's output: per shape, the observed outcomes
// and the enforcing rules' refusals, each counted for the statements of
// its block.
func checkDecisions(t *testing.T, out string) decisions {
	t.Helper()
	d := decisions{}
	shape, n := "", 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := checkBlock.FindStringSubmatch(line); m != nil {
			shape = m[2]
			fmt.Sscan(m[1], &n)
			continue
		}
		if m := checkObserved.FindStringSubmatch(line); m != nil {
			d.add(shape, strings.TrimSpace(m[1]+" "+m[2]+" "+m[3]), n)
		}
		if m := checkRejected.FindStringSubmatch(line); m != nil {
			d.add(shape, "rejected "+m[1], n)
		}
	}
	return d
}

// liveDecisions reads the live proxy's audit log (console format): per
// statement shape, the observed outcomes but would_wait (which check
// cannot know), and adds the statements the client saw refused.
func liveDecisions(t *testing.T, log string, refused []string) decisions {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	d := decisions{}
	for _, line := range strings.Split(string(b), "\n") {
		i := strings.Index(line, "observe: would_")
		if i < 0 || !strings.Contains(line, "audit") {
			continue
		}
		var f struct{ Rule, Outcome, Reason, Statement string }
		j := strings.IndexByte(line[i:], '{')
		if j < 0 {
			t.Fatalf("audit line without fields: %s", line)
		}
		if err := json.Unmarshal([]byte(line[i+j:]), &f); err != nil {
			t.Fatalf("audit line %s: %v", line, err)
		}
		if f.Outcome != "would_wait" {
			d.add(f.Statement, strings.TrimSpace(f.Outcome+" "+f.Rule+" "+f.Reason), 1)
		}
	}
	for _, s := range refused {
		d.add(parser.Redact(s), "rejected hot-row", 1)
	}
	return d
}

// TestCheckRecordedWorkload: `lockproxy check` on the general and the
// slow query log MariaDB wrote while the unsafe flash sale and the
// representative statements ran directly prints the decision the golden
// files hold for each shape, and its decisions are the live proxy's for
// the same statements and schema: the same workload through a lockproxy
// observing the sale's rule gets, shape by shape, the same observed
// outcomes (but would_wait, which only the lock service at the time can
// tell) and the same refusals by the enforcing rule.
func TestCheckRecordedWorkload(t *testing.T) {
	bed := testbed.Get(t)
	const buyers = 6
	direct := freshDB(t, bed, checkDB)
	for _, s := range []string{saleSchema, ordersSchema,
		"CREATE TABLE hot (id BIGINT PRIMARY KEY, v INT NOT NULL)",
		"CREATE PROCEDURE restock(n INT) UPDATE sku_stock SET stock = stock + n WHERE sku_id = 1",
		"INSERT INTO sku_stock VALUES (1, 100), (2, 100)", "INSERT INTO hot VALUES (1, 0)"} {
		if _, err := direct.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(cfg, []byte(config(bed, "127.0.0.1:1", "127.0.0.1:1", "locks: {backend: memory}", checkRules)), 0o600); err != nil {
		t.Fatal(err)
	}
	var refusedDirect []string
	general, slow := recordLogs(t, bed, dir, checkDB, func() {
		h := open(t, bed, bed.PrimaryAddr, checkDB, "", buyers)
		refusedDirect = checkWorkload(t, h, buyers)
		_ = h.Close()
	})
	if len(refusedDirect) != 0 {
		t.Fatalf("refused without lockproxy: %v", refusedDirect)
	}
	// The logs have every session of the primary, other tests' too: keep
	// the sessions that connected to this test's database.
	general, slow = ownSessions(t, general, slow, checkDB)
	offline := map[string]string{"general": runCheck(t, bed, cfg, general), "slow": runCheck(t, bed, cfg, slow)}
	golden(t, "check_sale_general.golden", offline["general"])
	golden(t, "check_sale_slow.golden", offline["slow"])

	in := start(t, bed, redisLocks(bed, "10s", "10s"), checkRules)
	refused := checkWorkload(t, open(t, bed, in.addr, checkDB, "", buyers), buyers)
	in.stop() // the audit log is complete
	live := liveDecisions(t, in.log, refused)
	if len(live) < 6 {
		t.Fatalf("the live proxy decided too little: %v", live)
	}
	for name, out := range offline {
		t.Run(name, func(t *testing.T) {
			d, live := checkDecisions(t, out), live
			if name == "slow" {
				// The slow log has an EXECUTE as the statement it ran.
				live = live.moved("execute `s`", parser.Redact("UPDATE sku_stock SET stock = 3 WHERE sku_id = 1"))
			}
			// Shapes only the recording has (the log switches' own
			// statements) decide nothing.
			for shape := range d {
				if _, ok := live[shape]; !ok {
					t.Errorf("check decides for %q what the live proxy did not: %v", shape, d[shape])
				}
			}
			for _, shape := range sortedShapes(live) {
				if fmt.Sprint(live[shape]) != fmt.Sprint(d[shape]) {
					t.Errorf("%s\n  live:  %v\n  check: %v", shape, live[shape], d[shape])
				}
			}
		})
	}
}

func sortedShapes(d decisions) []string {
	var out []string
	for s := range d {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
