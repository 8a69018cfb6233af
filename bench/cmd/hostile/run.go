package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/env"
)

// report is what a run measured and whether it passed.
type report struct {
	duration   time.Duration
	rssLimit   uint64
	rssMax     uint64
	rssEnd     uint64
	rssStart   uint64
	panics     int
	panicLines []string
	exited     error
	sale       *saleResult
	probe      probeResult
	privacy    privacyResult
	attacks    []*counters
	metrics    map[string]float64
	nofile     int
}

func (r *report) ok() bool {
	return r.exited == nil && r.rssMax < r.rssLimit && r.panics == 0 && r.sale.oversold() == 0 && r.sale.lost() == 0 &&
		r.sale.sold.Load() > 0 && r.probe.failures == 0 && r.probe.tries > 0 && r.privacy.leaks == 0 && r.privacy.rows > 0
}

func (r *report) String() string {
	var b strings.Builder
	check := func(ok bool) string {
		if ok {
			return "ok  "
		}
		return "FAIL"
	}
	fmt.Fprintf(&b, "hostile load: %s against one lockproxy (ulimit -n %d, memory_budget %d MiB)\n\n", r.duration, r.nofile, memoryLimit>>20)
	fmt.Fprintf(&b, "%s lockproxy kept running (%v)\n", check(r.exited == nil), r.exited)
	fmt.Fprintf(&b, "%s RSS max %d MiB < %d MiB (start %d MiB, end %d MiB)\n", check(r.rssMax < r.rssLimit), r.rssMax, r.rssLimit, r.rssStart, r.rssEnd)
	fmt.Fprintf(&b, "%s panics in the log: %d %v\n", check(r.panics == 0), r.panics, r.panicLines)
	s := r.sale
	fmt.Fprintf(&b, "%s flash sale: %d sold, %d restocks, %d errors; books: stock %d, orders %d, restocked %d; oversold %d, lost %d\n",
		check(s.oversold() == 0 && s.lost() == 0 && s.sold.Load() > 0), s.sold.Load(), s.restocked.Load(), s.errors.Load(),
		s.stock, s.orders, s.restock, s.oversold(), s.lost())
	if e, _ := s.lastErr.Load().(string); e != "" {
		fmt.Fprintf(&b, "     last sale error: %s\n", truncate(e, 200))
	}
	fmt.Fprintf(&b, "%s legitimate logins: %d of %d succeeded, slowest %v %s\n", check(r.probe.failures == 0 && r.probe.tries > 0),
		r.probe.tries-r.probe.failures, r.probe.tries, r.probe.worst.Round(time.Millisecond), r.probe.lastErr)
	fmt.Fprintf(&b, "%s SHOW LOCKPROXY LOCKS without PROCESS: %d reads, %d rows, %d showed a buyer %s\n",
		check(r.privacy.leaks == 0 && r.privacy.rows > 0), r.privacy.looks, r.privacy.rows, r.privacy.leaks, truncate(r.privacy.sample, 120))
	b.WriteString("\nattacks (answers by MySQL error code):\n")
	for _, c := range r.attacks {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	b.WriteString("\nlockproxy metrics at the end:\n")
	for _, k := range metricNames {
		fmt.Fprintf(&b, "  %s %.0f\n", k, r.metrics[k])
	}
	return b.String()
}

var metricNames = []string{
	"lockproxy_handshakes_evicted_total", "lockproxy_accept_errors_total", "lockproxy_memory_refusals_total",
	"lockproxy_logins_throttled_total", "lockproxy_auth_failures_total", "lockproxy_connections_rejected_total",
	"lockproxy_client_connections", "lockproxy_client_handshakes", "lockproxy_memory_budget_used_bytes",
	"go_goroutines", "process_open_fds",
}

// attack starts lockproxy, runs the attacks, the sale, the login probe and
// the privacy watch for f.duration, and reports.
func attack(ctx context.Context, e *env.Env, f flags, lg *log.Logger) (*report, error) {
	if err := prepareBed(ctx, e.Bed); err != nil {
		return nil, err
	}
	t, err := startTarget(ctx, e, f.nofile)
	if err != nil {
		return nil, err
	}
	defer t.stop()
	r := &report{duration: f.duration, rssLimit: f.rssLimit, sale: &saleResult{}, nofile: f.nofile}
	r.rssStart, _ = t.rssMiB()
	lg.Printf("hostile: lockproxy at %s (pid %d, RSS %d MiB); attacking for %s", t.addr, t.cmd.Process.Pid, r.rssStart, f.duration)

	runCtx, cancel := context.WithTimeout(ctx, f.duration)
	defer cancel()
	var attackers, legit sync.WaitGroup
	huge, idle, big := &counters{name: "huge-header"}, &counters{name: "idle-sockets"}, &counters{name: "big-statements"}
	long, hoard, junk := &counters{name: "bogus-longdata"}, &counters{name: "prepared-hoard"}, &counters{name: "garbage-cmds"}
	brute, spray := &counters{name: "guess-parallel"}, &counters{name: "guess-spray"}
	r.attacks = []*counters{huge, idle, big, long, hoard, junk, brute, spray}
	hugeHeaders(runCtx, &attackers, t, huge)
	idleFlood(runCtx, &attackers, t, idle, 1500)
	bigStatements(runCtx, &attackers, t, big)
	longData(runCtx, &attackers, t, long)
	preparedHoard(runCtx, &attackers, t, hoard)
	garbage(runCtx, &attackers, t, junk)
	guesses(runCtx, &attackers, t, brute, spray)

	legit.Add(3)
	go func() { defer legit.Done(); flashSale(runCtx, t, r.sale) }()
	go func() { defer legit.Done(); probeLogins(runCtx, t, &r.probe) }()
	go func() { defer legit.Done(); watchLocks(runCtx, t, &r.privacy) }()

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := time.Now()
	for runCtx.Err() == nil {
		select {
		case <-runCtx.Done():
		case <-tick.C:
		}
		if err := t.alive(); err != nil {
			r.exited = err
			cancel()
			break
		}
		if rss, err := t.rssMiB(); err == nil {
			r.rssMax = max(r.rssMax, rss)
			r.rssEnd = rss
		}
		if time.Since(last) >= 30*time.Second {
			last = time.Now()
			lg.Printf("hostile: RSS %d MiB (max %d), sold %d, logins %d/%d, %v", r.rssEnd, r.rssMax, r.sale.sold.Load(),
				r.probe.tries-r.probe.failures, r.probe.tries, t.metrics("lockproxy_client_handshakes", "process_open_fds"))
		}
	}
	legit.Wait()
	r.metrics = t.metrics(metricNames...)
	attackers.Wait()
	if err := settle(t, r.sale); err != nil {
		return nil, fmt.Errorf("reading the books: %w", err)
	}
	t.stop()
	r.panics, r.panicLines = t.panics()
	return r, nil
}
