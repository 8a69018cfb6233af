package workload

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/env"
)

// Workload runs the mixed clients against the instances until halted.
// Start and Halt are called from one goroutine; the clients count into
// the Tally concurrently.
type Workload struct {
	bed   *env.Bed
	addrs []string // lockproxy instances
	t     *Tally

	pools []*sql.DB // one shared pool per instance
	stop  chan struct{}
	wg    sync.WaitGroup
}

// Start opens one pool per instance and starts every client, counting
// into t; Halt stops them.
func Start(ctx context.Context, bed *env.Bed, addrs []string, t *Tally) (*Workload, error) {
	w := &Workload{bed: bed, addrs: addrs, t: t, stop: make(chan struct{})}
	if err := w.openPools(ctx); err != nil {
		return nil, err
	}
	client := 0
	for i := range addrs {
		for range buyersPerInstance {
			w.loop(client, buyerPause, w.buyer(i, client))
			client++
		}
		for range readersPerInstance {
			st, err := w.pools[i].PrepareContext(ctx, "SELECT id, name, price FROM catalog WHERE id = ?")
			if err != nil {
				w.Halt()
				return nil, fmt.Errorf("soak: prepare: %w", err)
			}
			w.loop(client, readerPause, w.reader(i, st))
			client++
		}
		for range countersPerInstance {
			w.loop(client, counterPause, w.counter(i))
			client++
		}
		for range bigPerInstance {
			w.loop(client, bigReadPause, w.bigRead(i))
			client++
		}
	}
	w.loop(client, churnPause, w.churn())
	client++
	w.loop(client, abandonPause, w.abandoner())
	return w, nil
}

// openPools opens and pings one pool per instance.
func (w *Workload) openPools(ctx context.Context) error {
	perInstance := buyersPerInstance + readersPerInstance + countersPerInstance + bigPerInstance + 2
	for _, a := range w.addrs {
		p, err := sql.Open("mysql", w.bed.DSN(a, database))
		if err != nil {
			w.closePools()
			return fmt.Errorf("soak: open %s: %w", a, err)
		}
		p.SetMaxOpenConns(perInstance)
		p.SetMaxIdleConns(perInstance)
		p.SetConnMaxLifetime(2 * time.Minute) // sessions come and go inside the pools too
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = p.PingContext(pctx)
		cancel()
		if err != nil {
			_ = p.Close()
			w.closePools()
			return fmt.Errorf("soak: ping %s: %w", a, err)
		}
		w.pools = append(w.pools, p)
	}
	return nil
}

// op is one iteration of a client; it counts its own successes and returns
// the error, if any, for counting.
type op func(ctx context.Context, rng *rand.Rand) error

// loop runs f every pause (with ±50% jitter) until the workload stops.
// Statements run under their own timeout, never under the stop signal, so
// stopping never cuts a statement short and leaves its outcome unknown.
func (w *Workload) loop(client int, pause time.Duration, f op) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		rng := rand.New(rand.NewPCG(uint64(client), uint64(time.Now().UnixNano())))
		for {
			d := pause/2 + time.Duration(rng.Int64N(int64(pause)+1))
			select {
			case <-w.stop:
				return
			case <-time.After(d):
			}
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			if err := f(ctx, rng); err != nil {
				w.t.Fail(err)
			}
			cancel()
		}
	}()
}

// Halt stops the clients, waits for them and closes the pools. It may be
// called more than once.
func (w *Workload) Halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
	w.closePools()
}

// closePools closes every pool opened so far.
func (w *Workload) closePools() {
	for _, p := range w.pools {
		_ = p.Close()
	}
	w.pools = nil
}
