package contend

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Run is what a group of clients did in one run of an Op.
type Run struct {
	Clients   int      `json:"clients"`
	Seconds   float64  `json:"seconds"`   // first start to last client done
	Done      int      `json:"done"`      // operations whose write happened
	SoldOut   int      `json:"sold_out"`  // operations that found no stock
	Attempts  int      `json:"attempts"`  // every attempt, retried ones included
	Retries   int      `json:"retries"`   // 1205/1213 answers and conflicts, retried
	Errors    int      `json:"errors"`    // anything else (the client stopped)
	ErrorMsg  string   `json:"error_msg"` // the most frequent other error
	Latency   Latency  `json:"latency"`   // per done operation, first attempt to success
	PerClient []int    `json:"-"`         // done operations per client
	Fairness  Fairness `json:"fairness"`
}

// DonePerSec is done operations per second.
func (r Run) DonePerSec() float64 { return Ratio(float64(r.Done), r.Seconds) }

// AttemptsPerSec is attempts (transactions started) per second.
func (r Run) AttemptsPerSec() float64 { return Ratio(float64(r.Attempts), r.Seconds) }

// client is one client's tally.
type client struct {
	done, soldOut, attempts, retries, errors int
	lat                                      []time.Duration
	errs                                     map[string]int
}

// once runs op for client c until it is done, sold out or fails for good
// (maxAttempts attempts at most), adding to t.
func once(ctx context.Context, op Op, c, maxAttempts int, t *client) (finished bool) {
	start := time.Now()
	for a := 0; a < maxAttempts; a++ {
		t.attempts++
		out, err := op(ctx, c)
		switch {
		case err == nil && out == Done:
			t.done++
			t.lat = append(t.lat, time.Since(start))
			return true
		case err == nil && out == SoldOut:
			t.soldOut++
			return true
		case err == nil || Retryable(err):
			t.retries++
		default:
			if ctx.Err() != nil {
				return false
			}
			t.errors++
			t.errs[err.Error()]++
			return false
		}
	}
	t.errors++
	t.errs[fmt.Sprintf("gave up after %d attempts", maxAttempts)]++
	return false
}

// Sale runs clients goroutines that each run op once (retrying 1205/1213
// and conflicts up to maxAttempts), all started together.
func Sale(ctx context.Context, clients, maxAttempts int, op Op) Run {
	return drive(ctx, clients, func(c int, t *client) {
		once(ctx, op, c, maxAttempts, t)
	})
}

// Timed runs clients goroutines that each repeat op (retrying as Sale does)
// until d has passed; an operation under way at the end is completed and
// counted. A client stops at its 100th non-retryable error.
func Timed(ctx context.Context, clients int, d time.Duration, op Op) Run {
	end := time.Now().Add(d)
	return drive(ctx, clients, func(c int, t *client) {
		for time.Now().Before(end) && ctx.Err() == nil && t.errors < 100 {
			once(ctx, op, c, 1000, t)
		}
	})
}

func drive(ctx context.Context, clients int, body func(c int, t *client)) Run {
	tallies := make([]client, clients)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for c := range clients {
		tallies[c].errs = map[string]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			body(c, &tallies[c])
		}()
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	return merge(tallies, time.Since(start))
}

func merge(ts []client, took time.Duration) Run {
	r := Run{Clients: len(ts), Seconds: took.Seconds(), PerClient: make([]int, len(ts))}
	var lat []time.Duration
	errs := map[string]int{}
	for i, t := range ts {
		r.Done += t.done
		r.SoldOut += t.soldOut
		r.Attempts += t.attempts
		r.Retries += t.retries
		r.Errors += t.errors
		r.PerClient[i] = t.done
		lat = append(lat, t.lat...)
		for k, v := range t.errs {
			errs[k] += v
		}
	}
	r.Latency = Summarize(lat)
	r.Fairness = FairnessOf(r.PerClient)
	r.ErrorMsg = topError(errs)
	return r
}

// topError is the most frequent message with its count, "" for none.
func topError(errs map[string]int) string {
	keys := make([]string, 0, len(errs))
	for k := range errs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if errs[keys[i]] != errs[keys[j]] {
			return errs[keys[i]] > errs[keys[j]]
		}
		return keys[i] < keys[j]
	})
	if len(keys) == 0 {
		return ""
	}
	msg := keys[0]
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return fmt.Sprintf("%dx %s", errs[keys[0]], strings.TrimSpace(msg))
}
