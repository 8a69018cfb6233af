package workload

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/lockproxy/lockproxy/bench/internal/env"
)

// PrimeStatements is how many distinct text statements Prime warms each
// instance with: more than the 10,000 statement analyses lockproxy caches
// (an LRU), so its cache is full before the start snapshot and its
// filling up does not show as growth.
const PrimeStatements = 12000

// Prime fills each instance's statement cache with PrimeStatements
// distinct texts of the shape the workload sends without bound (the
// rewrite table's UPDATE n = <value>), on a row that does not exist so
// nothing changes. It counts them in t.
func Prime(ctx context.Context, bed *env.Bed, addrs []string, t *Tally) error {
	const conns = 4
	for _, a := range addrs {
		p, err := sql.Open("mysql", bed.DSN(a, database))
		if err != nil {
			return fmt.Errorf("soak: prime %s: %w", a, err)
		}
		p.SetMaxOpenConns(conns)
		var wg sync.WaitGroup
		errs := make(chan error, conns)
		for c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := c; i < PrimeStatements; i += conns {
					q := fmt.Sprintf("UPDATE counters SET n = %d WHERE id = 0", 1_000_000+i)
					if _, err := p.ExecContext(ctx, q); err != nil {
						errs <- fmt.Errorf("soak: prime %s: %w", a, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		_ = p.Close()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		t.Add("cache primer: UPDATE counters SET n = <v> WHERE id = 0 (no row), text", PrimeStatements)
	}
	return nil
}
