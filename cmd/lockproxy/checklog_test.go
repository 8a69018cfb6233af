package main

import (
	"bytes"
	"database/sql"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

var update = flag.Bool("update", false, "rewrite the golden files of lockproxy check")

// TestCheckLogs: `lockproxy check` on logs MariaDB wrote prints the
// decision for each statement shape: observed locks, rewrites and
// refusals of the observing rule, the enforcing rule's locks and refusals.
// The general log has sessions interleaved, a statement on several lines,
// SQL-level PREPARE/EXECUTE, protocol prepared statements and a change of
// database; the slow log (long_query_time = 0) the same session's
// statements, each with its schema.
func TestCheckLogs(t *testing.T) {
	for _, c := range []struct {
		log, golden string
		facts       []string // what the golden file must keep, whatever else changes
	}{
		{"general.log", "check.golden", []string{
			"3 x select `stock` from `sku_stock` where `sku_id` = ?\n    rule:       sku-stock\n    locks:      none\n    observed:   would_rewrite sku-stock\n    observed:   would_lock sku-stock (1 key)",
			"3 x update `sku_stock` set `stock` = ? where `sku_id` = ?",
			"observed:   would_refuse sku-stock (unkeyed)",
			"locks:      orders (1 key)",
			"rejected:   ERROR 1105 (HY000): lockproxy: rule orders: procedure shop.restock",
			"statements: 24 in 16 shapes",
		}},
		{"slow.log", "check_slow.golden", []string{
			"1 x select `stock` from `sku_stock` where `sku_id` = ?\n    rule:       sku-stock\n    locks:      none\n    observed:   would_rewrite sku-stock",
			"1 x select `stock` from `shop` . `sku_stock` where `sku_id` = ?\n    rule:       sku-stock\n    locks:      none\n    route:",
			"observed:   would_refuse sku-stock (unkeyed)",
			"statements: 10 in 10 shapes",
		}},
	} {
		t.Run(c.log, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run([]string{"check", "--config", "testdata/check.yaml", "--log", filepath.Join("testdata", c.log)}, &out, &errb)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			golden := filepath.Join("testdata", c.golden)
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != string(want) {
				t.Errorf("lockproxy check output differs from %s (run with -update to accept):\n%s", golden, out.String())
			}
			for _, f := range c.facts {
				if !strings.Contains(out.String(), f) {
					t.Errorf("output lacks %q", f)
				}
			}
		})
	}
}

func TestCheckUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"check", "--config", "testdata/check.yaml"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "usage") {
		t.Errorf("check without --log: exit %d, stderr %q", code, errb.String())
	}
	if code := run([]string{"check", "--config", "testdata/check.yaml", "--log", "testdata/missing.log"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "lockproxy:") {
		t.Errorf("check of a missing log: exit %d, stderr %q", code, errb.String())
	}
}

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

// TestCheckWithSchema: with --dsn, check knows the server's routines, as
// lockproxy does once it has read the primary: a CALL of a procedure that
// writes no guarded table is let through, where without the schema it is
// refused (lockproxy cannot know what the routine writes).
func TestCheckWithSchema(t *testing.T) {
	bed := testbed.Get(t)
	const dbName = "check_dsn"
	admin, err := sql.Open("mysql", bed.DSN(bed.PrimaryAddr, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, s := range []string{"DROP DATABASE IF EXISTS " + dbName, "CREATE DATABASE " + dbName,
		"CREATE TABLE " + dbName + ".orders (id BIGINT PRIMARY KEY, note VARCHAR(20))",
		"CREATE TABLE " + dbName + ".stock_log (id BIGINT PRIMARY KEY, n INT)",
		"CREATE PROCEDURE " + dbName + ".restock(k INT) UPDATE stock_log SET n = k WHERE id = 1"} {
		if _, err := admin.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(cfg, []byte("users: [{user: app, password: x}]\nbackends: {primary: \"127.0.0.1:1\"}\nlocks: {backend: memory}\n"+
		"rules:\n  - name: orders\n    table: "+dbName+".orders\n    key: [id]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "general.log")
	if err := os.WriteFile(log, []byte("Time\t\t    Id Command\tArgument\n"+
		"261204 21:40:01\t    7 Connect\tapp@127.0.0.1 on "+dbName+" using TCP/IP\n"+
		"\t\t    7 Query\tCALL restock(3)\n"+
		"\t\t    7 Query\tUPDATE orders SET note = 'x' WHERE id = 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		args    []string
		refused bool
	}{
		{"without schema", nil, true},
		{"with --dsn", []string{"--dsn", bed.DSN(bed.PrimaryAddr, "", "")}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"check", "--config", cfg, "--log", log}, c.args...)
			if code := run(args, &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			call := out.String()[strings.Index(out.String(), "call `restock`"):]
			call = call[:strings.Index(call, "\n\n")]
			if got := strings.Contains(call, "rejected:"); got != c.refused {
				t.Errorf("CALL refused = %v, want %v:\n%s", got, c.refused, out.String())
			}
			if !strings.Contains(out.String(), "locks:      orders (1 key)") {
				t.Errorf("the keyed UPDATE should lock its row:\n%s", out.String())
			}
			if read := strings.Contains(out.String(), "schema: read from the server"); read != (c.args != nil) {
				t.Errorf("footer says schema read = %v:\n%s", read, out.String())
			}
		})
	}
}

// TestExplainObserved: explain shows what a rule in observe mode would do,
// which lockproxy does not do.
func TestExplainObserved(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want []string
	}{
		{"UPDATE shop.sku_stock SET stock = 0", []string{"locks:      none", "observed:   would_refuse sku-stock (unkeyed): lockproxy: rule sku-stock"}},
		{"UPDATE shop.sku_stock SET stock = 0 WHERE sku_id = 4", []string{"locks:      none", "observed:   would_lock sku-stock: "}},
		{"UPDATE shop.orders SET note = 'x' WHERE id = 4", []string{"locks:      orders: "}},
	} {
		var out, errb bytes.Buffer
		if code := run([]string{"explain", "--config", "testdata/check.yaml", c.sql}, &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.sql, code, errb.String())
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: output lacks %q:\n%s", c.sql, w, out.String())
			}
		}
		if strings.Contains(c.sql, "orders") && strings.Contains(out.String(), "observed:") {
			t.Errorf("an enforcing rule's statement shows observed lines:\n%s", out.String())
		}
	}
}

// TestCheckCombine: check says which UPDATEs of a combining rule would be
// combined and why the others would not, as explain does.
func TestCheckCombine(t *testing.T) {
	dir := t.TempDir()
	cfg, log := filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "general.log")
	if err := os.WriteFile(cfg, []byte(`users: [{user: app, password: x}]
backends: {primary: "127.0.0.1:1"}
locks: {backend: memory}
rules:
  - name: stock
    table: shop.sku_stock
    key: [sku_id]
    rewrite: {column: stock, mode: delta, min: 0}
    combine: {}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, []byte("/usr/sbin/mariadbd, Version: 10.11.14-MariaDB-log. started with:\n"+
		"Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock\n"+
		"Time\t\t    Id Command\tArgument\n"+
		"261204 21:33:24\t   813 Connect\tapp@127.0.0.1 on shop using TCP/IP\n"+
		"\t\t   813 Query\tUPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 AND stock >= 1\n"+
		"\t\t   813 Query\tBEGIN\n"+
		"\t\t   813 Query\tUPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 2 AND stock >= 1\n"+
		"\t\t   813 Query\tCOMMIT\n"+
		"\t\t   813 Quit\t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"check", "--config", cfg, "--log", log}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(out.String(), "\n")
	var combined []string
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "combined:") {
			combined = append(combined, strings.TrimSpace(l))
		}
	}
	if len(combined) != 2 {
		t.Fatalf("want a combined: line for each of the 2 decisions, got %q in:\n%s", combined, out.String())
	}
	var yes, inTxn bool
	for _, c := range combined {
		yes = yes || strings.HasPrefix(c, "combined:   yes")
		inTxn = inTxn || strings.HasPrefix(c, "combined:   no (in a transaction")
	}
	if !yes || !inTxn {
		t.Errorf("want the autocommit UPDATE combined and the one in a transaction not, got %q", combined)
	}
}
