package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

// TestFaultFailoverSale is the sale docs/faults.md reports for a Redis
// Sentinel group and a Redis Cluster: buyers (long: 200, short: 40) each
// buy one item of a fenced stock row (stock 1.5 × buyers) through two
// instances, retrying 1205 and 1213 as applications do; the master
// holding the row's lock is SIGKILLed once a fifth of them have bought;
// on Sentinel also with locks.redis.min_replicas_ack: 1.
// Every buyer must buy (none gives up on another error), nothing is
// oversold or lost, and no lock is left. The report gives how long the
// buyers still waiting at the kill took to buy after it.
func TestFaultFailoverSale(t *testing.T) {
	bed := testbed.Get(t)
	buyers := 40
	if os.Getenv("LOCKPROXY_FAULTS_LONG") != "" {
		buyers = 200
	}
	for _, lg := range []struct {
		name  string
		start func(testing.TB) *testbed.RedisGroup
		extra string // more of locks.redis
	}{
		{"sentinel", testbed.StartSentinel, ""},
		{"cluster", testbed.StartCluster, ""},
		// Each grant on one of the two replicas before the statement
		// runs: the one left after the kill still acknowledges.
		{"sentinel-ack", testbed.StartSentinel, "\n    min_replicas_ack: 1"},
	} {
		t.Run(lg.name, func(t *testing.T) {
			g := lg.start(t)
			r := groupRig(t, bed, g, currentPlan(), 2, buyers/2+2, lg.extra)
			res := r.saleThroughFailover(t, g, buyers, buyers*3/2)
			t.Logf("%s: %s", lg.name, res)
			if res.bought != buyers || len(res.gaveUp) > 0 {
				t.Errorf("%d of %d bought; gave up: %v", res.bought, buyers, res.gaveUp)
			}
			if res.sale.oversold() != 0 || res.sale.lost() != 0 || res.sale.orders != res.bought {
				t.Errorf("sale: %s; %d buyers bought", res.sale, res.bought)
			}
			if lg.extra != "" {
				if waits := waitCalls(t, r, g); waits == 0 {
					t.Errorf("with min_replicas_ack the new master ran no WAIT")
				} else {
					t.Logf("WAIT calls on the new master: %d", waits)
				}
			}
			r.checkLocksClear(t)
		})
	}
}

// failoverSale is what a sale through a failover came to.
type failoverSale struct {
	sale    saleResult
	bought  int
	gaveUp  map[string]int // buyers who stopped on an error not to retry, by error
	waits   []time.Duration
	took    time.Duration // from the kill to the last buy
	retried counts        // 1205/1213 answers retried, by code
}

func (f failoverSale) String() string {
	q := func(p float64) time.Duration {
		if len(f.waits) == 0 {
			return 0
		}
		return f.waits[min(len(f.waits)-1, int(p*float64(len(f.waits))))].Round(time.Millisecond)
	}
	return fmt.Sprintf("bought %d, gave up %d %v, oversold %d, lost %d, retried %v; "+
		"%d buyers waiting at the kill bought after p50 %v, p99 %v, max %v; last buy %v after the kill",
		f.bought, len(f.gaveUp), f.gaveUp, f.sale.oversold(), f.sale.lost(), f.retried,
		len(f.waits), q(0.5), q(0.99), q(1), f.took.Round(time.Millisecond))
}

// saleThroughFailover lets buyers buy once each, alternating instances and
// text/prepared forms, and kills the hot key's master once a fifth of them
// have bought.
func (r *rig) saleThroughFailover(t *testing.T, g *testbed.RedisGroup, buyers, stock int) failoverSale {
	for _, s := range []string{"DELETE FROM orders", fmt.Sprintf(
		"INSERT INTO sku_stock (sku_id, stock) VALUES (1, %d) ON DUPLICATE KEY UPDATE stock = VALUES(stock)", stock)} {
		if _, err := r.direct.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	mustBed(t, r.bed.WaitReplicaCaughtUp(t.Context()))
	res := failoverSale{sale: saleResult{initial: stock}, gaveUp: map[string]int{}, retried: counts{}}
	var mu sync.Mutex
	var done []time.Time
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.buyOnce(ctx, &mu, &done, r.nodes[i%len(r.nodes)].db, i)
		}()
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(done)
		mu.Unlock()
		if n >= buyers/5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d bought within a minute, before any fault", n, buyers)
		}
	}
	killed := killHotMaster(t, r, g)
	wg.Wait()
	for _, at := range done {
		if at.After(killed) {
			res.waits = append(res.waits, at.Sub(killed))
		}
	}
	slices.Sort(res.waits)
	if len(res.waits) > 0 {
		res.took = res.waits[len(res.waits)-1]
	}
	res.bought = len(done)
	mustBed(t, r.direct.QueryRow("SELECT stock FROM sku_stock WHERE sku_id = 1").Scan(&res.sale.final))
	mustBed(t, r.direct.QueryRow("SELECT COUNT(*) FROM orders").Scan(&res.sale.orders))
	return res
}

// waitCalls is how many WAIT commands the master now holding the sale's
// key has run.
func waitCalls(t *testing.T, r *rig, g *testbed.RedisGroup) int {
	t.Helper()
	_, addr := masterOf(t, r, g, hotKey(t, r))
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(t.Context(), "commandstats").Result()
	mustBed(t, err)
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_wait:calls="); ok {
			n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			return n
		}
	}
	return 0
}

// buyOnce is buyer i: it buys one item through db, retrying 1205 and
// 1213, and records under mu when it bought (in done) or why it gave up.
func (f *failoverSale) buyOnce(ctx context.Context, mu *sync.Mutex, done *[]time.Time, db *sql.DB, i int) {
	for ctx.Err() == nil {
		bought, err := buy(ctx, db, fmt.Sprintf("buyer-%d", i), i%2 == 1)
		mu.Lock()
		switch {
		case err == nil && bought:
			*done = append(*done, time.Now())
		case err == nil:
			f.gaveUp["sold out"]++
		case retryable(err):
			f.retried[classify(err)]++
			mu.Unlock()
			continue
		default:
			f.gaveUp[err.Error()]++
		}
		mu.Unlock()
		return
	}
}
