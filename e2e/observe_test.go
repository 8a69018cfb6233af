package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/proxy"
)

// observedValue is the value of lockproxy_observed_total for the rule and
// outcome (summed over reasons) in one scrape of in.
func observedValue(t *testing.T, in *instance, rule, outcome, reason string) float64 {
	t.Helper()
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(scrape(t, in)))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "lockproxy_observed_total{") || !strings.Contains(line, `rule="`+rule+`"`) ||
			!strings.Contains(line, `outcome="`+outcome+`"`) || (reason != "" && !strings.Contains(line, `reason="`+reason+`"`)) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// TestObserveThenEnforce rolls a rule out as docs/rollout.md says: in
// observe mode the unsafe flash sale through two instances runs as it does
// without lockproxy (it loses updates and oversells), and both instances
// count where it would have waited; an unkeyed UPDATE runs and is counted
// as what enforcing would refuse. Then the rule is switched to enforce by
// SIGHUP and the next sale, on the same connections, sells exactly the
// stock.
func TestObserveThenEnforce(t *testing.T) {
	bed := testbed.Get(t)
	const dbName, stock, buyers = "e2e_observe", 50, 200
	direct := freshDB(t, bed, dbName)
	for _, s := range []string{saleSchema, ordersSchema} {
		if _, err := direct.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	locks := redisLocks(bed, "10s", "10s")
	observing := saleRule(dbName) + "    mode: observe\n"
	a := start(t, bed, locks, observing)
	b := start(t, bed, locks, observing)
	const params = "interpolateParams=false"
	pools := []*sql.DB{open(t, bed, a.addr, dbName, params, buyers/2), open(t, bed, b.addr, dbName, params, buyers/2)}
	pinnedA := testbed.Conn(t, pools[0])
	ctx := context.Background()
	const unkeyed = "UPDATE sku_stock SET stock = stock"

	t.Run("observe", func(t *testing.T) {
		var res saleResult
		for try := 1; try <= 3; try++ {
			res = runSale(t, direct, pools, buyers, stock, false)
			t.Logf("observed, through two instances (try %d): %v", try, res)
			if len(res.errors) != 0 || res.retries != 0 {
				t.Fatalf("observing, lockproxy changed what the buyers saw: %v", res)
			}
			if res.lost() > 0 {
				break
			}
		}
		if res.lost() == 0 || res.oversold() == 0 {
			t.Errorf("observing, the unsafe sale should lose updates and oversell as it does directly: %v", res)
		}
		for _, in := range []*instance{a, b} {
			w := observedValue(t, in, "sku-stock", "would_wait", "")
			t.Logf("instance %s: would_lock %v, would_wait %v", in.addr, observedValue(t, in, "sku-stock", "would_lock", ""), w)
			if w == 0 {
				t.Errorf("instance %s: would_wait = 0 after a racing sale", in.addr)
			}
			if l := observedValue(t, in, "sku-stock", "would_lock", ""); l == 0 {
				t.Errorf("instance %s: would_lock = 0", in.addr)
			}
		}
		if _, err := pinnedA.ExecContext(ctx, unkeyed); err != nil {
			t.Fatalf("observing, an unkeyed UPDATE must run: %v", err)
		}
		if n := observedValue(t, a, "sku-stock", "would_refuse", "unkeyed"); n != 1 {
			t.Errorf("would_refuse{reason=unkeyed} = %v, want 1", n)
		}
		// Its shape is ranked, on /metrics and /debug/observed.
		const shape = "update `sku_stock` set `stock` = `stock`"
		if m := scrape(t, a); !strings.Contains(m, `lockproxy_observed_top_shapes{outcome="would_refuse",reason="unkeyed",rule="sku-stock",shape="`+shape+`"} 1`) {
			t.Errorf("/metrics does not rank the unkeyed UPDATE's shape:\n%s", grepLines(m, "lockproxy_observed_top_shapes"))
		}
		var debug struct{ Shapes []proxy.ObservedShape }
		if err := json.Unmarshal(get(t, "http://"+a.admin+"/debug/observed"), &debug); err != nil {
			t.Fatal(err)
		}
		want := proxy.ObservedShape{Rule: "sku-stock", Outcome: "would_refuse", Reason: "unkeyed", Shape: shape, Count: 1}
		if !slices.Contains(debug.Shapes, want) {
			t.Errorf("/debug/observed lists %v, want %v among them", debug.Shapes, want)
		}
	})

	opened := []int{pools[0].Stats().OpenConnections, pools[1].Stats().OpenConnections}
	t.Run("SIGHUP to enforce", func(t *testing.T) {
		for _, in := range []*instance{a, b} {
			path := in.configPath()
			body, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			next := strings.Replace(string(body), "mode: observe", "mode: enforce", 1)
			if next == string(body) {
				t.Fatal("no mode: observe in the config")
			}
			if err := os.WriteFile(path, []byte(next), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := in.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
		}
		for _, in := range []*instance{a, b} {
			testbed.Eventually(t, 15*time.Second, "the reload to enforce is counted", func() bool {
				return strings.Contains(scrape(t, in), `lockproxy_config_reloads_total{result="success"} 1`)
			})
		}
		var me *mysql.MySQLError
		if _, err := pinnedA.ExecContext(ctx, unkeyed); !errors.As(err, &me) || me.Number != 1105 || !strings.Contains(me.Message, "sku-stock") {
			t.Fatalf("enforcing, the same connection's unkeyed UPDATE: %v, want 1105 naming sku-stock", err)
		}
		// An enforcing rule's observed shapes are forgotten.
		if m := scrape(t, a); strings.Contains(m, "lockproxy_observed_top_shapes{") {
			t.Errorf("shapes still ranked after the switch to enforce:\n%s", grepLines(m, "lockproxy_observed_top_shapes"))
		}
	})

	t.Run("enforce", func(t *testing.T) {
		res := runSale(t, direct, pools, buyers, stock, false)
		t.Logf("enforced, through two instances: %v", res)
		if res.oversold() != 0 || res.lost() != 0 || res.final != 0 || res.orders != stock {
			t.Errorf("enforcing, the sale went wrong: %v", res)
		}
		if len(res.errors) != 0 {
			t.Errorf("buyers saw errors other than 1205/1213: %v", sortedKeys(res.errors))
		}
		for i, p := range pools {
			st := p.Stats()
			if st.MaxIdleClosed+st.MaxLifetimeClosed+st.MaxIdleTimeClosed != 0 || st.OpenConnections < opened[i] {
				t.Errorf("pool %d: connections closed across the reload: %+v (open before: %d)", i, st, opened[i])
			}
		}
	})
}
