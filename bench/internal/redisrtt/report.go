package redisrtt

import (
	"fmt"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// medianCalls is the median of the windows' calls per unit.
func medianCalls(ws []Window) float64 {
	var xs []float64
	for _, w := range ws {
		xs = append(xs, w.Calls)
	}
	return contend.Median(xs)
}

// medianTrips is the median of the windows' commands sent per unit.
func medianTrips(ws []Window) float64 {
	var xs []float64
	for _, w := range ws {
		xs = append(xs, w.RoundTrips)
	}
	return contend.Median(xs)
}

// medianPath is the median of the windows' round trips on the client's
// path per unit.
func medianPath(ws []Window) float64 {
	var xs []float64
	for _, w := range ws {
		xs = append(xs, w.PathTrips)
	}
	return contend.Median(xs)
}

func medianLatency(ws []Window) float64 {
	var xs []float64
	for _, w := range ws {
		xs = append(xs, w.LatencyUs)
	}
	return contend.Median(xs)
}

// latencyRatio is the median over rounds of proxied/direct mean latency.
func latencyRatio(via, direct []Window) float64 {
	at := map[int]float64{}
	for _, w := range direct {
		at[w.Round] = w.LatencyUs
	}
	var xs []float64
	for _, w := range via {
		if b := at[w.Round]; b > 0 {
			xs = append(xs, w.LatencyUs/b)
		}
	}
	return contend.Median(xs)
}

func targets(d Data) []results.Target {
	c := medianTrips(d.Update)
	out := []results.Target{{
		Name: "Redis round trips (commands sent) per uncontended guarded autocommit UPDATE", Want: fmt.Sprintf("≤ %.0f", TargetCalls),
		Got: fmt.Sprintf("%.2f", c), Met: len(d.Update) > 0 && c <= TargetCalls+0.05,
	}}
	if len(d.Paced) > 0 {
		p := medianPath(d.Paced)
		out = append(out, results.Target{
			Name: "Redis round trips on the client's path per uncontended guarded autocommit UPDATE (paced)", Want: fmt.Sprintf("≤ %.0f", TargetPathTrips),
			Got: fmt.Sprintf("%.2f", p), Met: p <= TargetPathTrips+0.05,
		})
	}
	e := medianCalls(d.Update)
	return append(out, results.Target{
		Name: "Redis commands executed per uncontended guarded autocommit UPDATE (scripts' own included)", Want: fmt.Sprintf("≤ %.0f", TargetExecuted),
		Got: fmt.Sprintf("%.2f", e), Met: len(d.Update) > 0 && e <= TargetExecuted+0.05,
	})
}

// Report implements scenario.Scenario.
func (s *Scenario) Report(r *results.Result, _, _ string) (string, error) {
	var d Data
	if err := r.DecodeData(&d); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "One client, one connection, one lockproxy (rule on `%s.sku_stock` locking write, locking_read and read_in_txn; Redis backend, ttl 10 s). "+
		"Redis `MONITOR` (the commands clients send: the round trips, or an upper bound if a client pipelines) and `INFO commandstats` (the commands Redis executes, a Lua script's own `redis.call`s included) are read around %d keyed autocommit `UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = k` "+
		"(k cycling over %d rows, so never contended) and before and after %d `BEGIN; SELECT stock ...; UPDATE ...; COMMIT` transactions; "+
		"what an idle instance does (measured for %.0f s first: sent %s, executed %s per second) is subtracted, and bench's own commands are left out. "+
		"%d round(s); the same statements sent directly give the latency baseline (the direct transaction uses FOR UPDATE).\n\n",
		database, d.N, keys, d.N/4, d.IdleSeconds, Format(d.SentIdle), Format(d.Background), d.Rounds)
	b.WriteString("| unit | round trips (commands sent) per unit | sent, by command (last round) | commands executed per unit | executed, by command (last round) | mean µs via lockproxy | mean µs direct | latency ratio |\n|---|--:|---|--:|---|--:|--:|--:|\n")
	row := func(name string, via, direct []Window) {
		sent, last := "none", "none"
		if len(via) > 0 {
			sent, last = Format(via[len(via)-1].SentPerUnit), Format(via[len(via)-1].PerUnit)
		}
		fmt.Fprintf(&b, "| %s | **%.2f** | %s | %.2f | %s | %.0f | %.0f | %s |\n", name, medianTrips(via), sent, medianCalls(via), last,
			medianLatency(via), medianLatency(direct), contend.X(latencyRatio(via, direct)))
	}
	row("autocommit UPDATE", d.Update, d.DirectUpdate)
	row("read-then-write transaction", d.Txn, d.DirectTxn)
	b.WriteString("\nDirectly on MariaDB these statements cost no Redis command at all; the ratio column compares the time of one statement or transaction, sent back to back on one connection.\n\n")
	if len(d.Paced) > 0 {
		last := d.Paced[len(d.Paced)-1]
		fmt.Fprintf(&b, "On the client's path: %d more autocommit UPDATEs per round, each followed by a %s pause, with the time from sending each to reading its answer recorded; "+
			"a command lockproxy sent counts as on the client's path when Redis ran it (`MONITOR`'s timestamp, same host clock) inside such a span (idle background subtracted for the spans' total time). "+
			"What lockproxy sends after an answer (a release in the background) falls in the pause, unless it was still running when the next statement came, which then waited for it and counts it.\n\n", d.N/4, pause)
		b.WriteString("| unit | round trips (commands sent) per unit | of them on the client's path | on the path, by command (last round) | commands executed per unit |\n|---|--:|--:|---|--:|\n")
		fmt.Fprintf(&b, "| autocommit UPDATE, paced | %.2f | **%.2f** | %s | %.2f |\n\n", medianTrips(d.Paced), medianPath(d.Paced), Format(last.OnPathPerUnit), medianCalls(d.Paced))
	}
	return b.String(), nil
}
