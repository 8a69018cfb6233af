package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// configPath is where start wrote the instance's rules.yaml.
func (in *instance) configPath() string {
	for i, a := range in.cmd.Args {
		if a == "--config" && i+1 < len(in.cmd.Args) {
			return in.cmd.Args[i+1]
		}
	}
	return ""
}

func scrape(t *testing.T, in *instance) string {
	t.Helper()
	resp, err := http.Get("http://" + in.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReload: rules change on SIGHUP and on a change of the file, open
// connections survive, and a config that fails validation leaves the old one
// in force.
func TestReload(t *testing.T) {
	bed := testbed.Get(t)
	const dbName = "e2e_reload"
	keyedTable(t, bed, dbName)
	in := start(t, bed, "locks:\n  backend: memory\n", "")
	conn := testbed.Conn(t, open(t, bed, in.addr, dbName, "", 2))
	ctx := context.Background()
	unkeyed := func() error {
		_, err := conn.ExecContext(ctx, "UPDATE sku_stock SET stock = stock")
		return err
	}
	if err := unkeyed(); err != nil {
		t.Fatalf("without rules an unkeyed update runs: %v", err)
	}
	cfgPath := in.configPath()
	base, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	withRule := strings.Replace(string(base), "\n\n\n", "\n", -1) + saleRule(dbName)
	write := func(body string) {
		t.Helper()
		tmp := filepath.Join(filepath.Dir(cfgPath), "next.yaml")
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	rejected := func() bool {
		var me *mysql.MySQLError
		err := unkeyed()
		return errors.As(err, &me) && me.Number == 1105 && strings.Contains(me.Message, "sku-stock")
	}

	t.Run("SIGHUP", func(t *testing.T) {
		write(withRule)
		if err := in.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 10*time.Second, "the new rule rejects unkeyed updates on the open connection", rejected)
	})
	t.Run("invalid config keeps the old", func(t *testing.T) {
		write(withRule + "  - name: broken\n    table: x\n    key: []\n")
		if err := in.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 10*time.Second, "the failed reload is counted", func() bool {
			return strings.Contains(scrape(t, in), `lockproxy_config_reloads_total{result="failure"}`)
		})
		if !rejected() {
			t.Fatal("the rule of the last good config is no longer in force")
		}
	})
	t.Run("file change", func(t *testing.T) {
		write(string(base))
		testbed.Eventually(t, 15*time.Second, "the rule is gone after the file changed", func() bool { return unkeyed() == nil })
		if !strings.Contains(scrape(t, in), `lockproxy_config_reloads_total{result="success"} 2`) {
			t.Errorf("want two successful reloads counted:\n%s", grepLines(scrape(t, in), "config_reloads"))
		}
	})
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
