package redisrtt

import (
	"fmt"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// medianOf is the median over the windows of f.
func medianOf(ws []Window, f func(Window) float64) float64 {
	xs := make([]float64, 0, len(ws))
	for _, w := range ws {
		xs = append(xs, f(w))
	}
	return contend.Median(xs)
}

// medianCalls is the median of the windows' calls per unit.
func medianCalls(ws []Window) float64 { return medianOf(ws, func(w Window) float64 { return w.Calls }) }

// medianTrips is the median of the windows' commands sent per unit.
func medianTrips(ws []Window) float64 {
	return medianOf(ws, func(w Window) float64 { return w.RoundTrips })
}

// medianPath is the median of the windows' round trips on the client's
// path per unit.
func medianPath(ws []Window) float64 {
	return medianOf(ws, func(w Window) float64 { return w.PathTrips })
}

func medianSpan(ws []Window) float64 { return medianOf(ws, func(w Window) float64 { return w.SpanUs }) }

func medianLatency(ws []Window) float64 {
	return medianOf(ws, func(w Window) float64 { return w.LatencyUs })
}

// delays is how much longer far's statements took than near's, of the
// same round, in what the delay added to one round trip: the Redis round
// trips the client waited for; false without a measured delay.
func delays(far, near Window) (float64, bool) {
	if far.AddedUs <= 0 {
		return 0, false
	}
	return (far.SpanUs - near.SpanUs) / far.AddedUs, true
}

// nearByRound are d's undelayed phases by round.
func nearByRound(d Data) map[int]Window {
	near := map[int]Window{}
	for _, w := range d.Near {
		near[w.Round] = w
	}
	return near
}

// farTrips is the median over rounds of the Redis round trips the
// client waited for, from the delayed phases: how much longer a paced
// statement took with Redis farDelay further away, in delays.
func farTrips(d Data) float64 {
	near := nearByRound(d)
	var xs []float64
	for _, w := range d.Far {
		if n, ok := near[w.Round]; ok {
			if x, ok := delays(w, n); ok {
				xs = append(xs, x)
			}
		}
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
	switch {
	case len(d.Far) > 0:
		p := farTrips(d)
		out = append(out, results.Target{
			Name: "Redis round trips on the client's path per uncontended guarded autocommit UPDATE (added time with Redis further away, in delays)", Want: fmt.Sprintf("≤ %.0f", TargetPathTrips),
			Got: fmt.Sprintf("%.2f", p), Met: p <= TargetPathTrips+0.05,
		})
	case len(d.Paced) > 0:
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
		fmt.Fprintf(&b, "| autocommit UPDATE, paced | %.2f | %.2f | %s | %.2f |\n\n", medianTrips(d.Paced), medianPath(d.Paced), Format(last.OnPathPerUnit), medianCalls(d.Paced))
		b.WriteString("A release sent right after the answer can run in Redis before the client has woken up and noted the answer's time, so this count is an upper bound; the delayed phases below measure the client's path without comparing clocks.\n\n")
	}
	if len(d.Far) > 0 {
		fmt.Fprintf(&b, "**Redis further away.** A second lockproxy, configured alike, reaches Redis through a relay on loopback that holds every request for a set delay (replies pass at once). "+
			"%d more paced autocommit UPDATEs per round go through it with the relay adding nothing and adding %.0f ms, each followed by a %s pause (so a release sent after the answer is done before the next statement). "+
			"A statement waits for the delay once per Redis round trip on its client's path, so the difference of the mean times, divided by what the delay adds to one round trip (30 PINGs through the relay with and without it, medians, right after the phase: the host's timers overshoot a little), counts them; no clocks are compared.\n\n", d.N/8, d.FarDelayMs, farPause)
		b.WriteString("| round | mean µs, Redis +0 | mean µs, Redis +delay | one round trip's added µs | difference, in round trips (on the client's path) | commands sent per unit (+delay) |\n|--:|--:|--:|--:|--:|--:|\n")
		near := nearByRound(d)
		for _, w := range d.Far {
			n := near[w.Round]
			trips, _ := delays(w, n)
			fmt.Fprintf(&b, "| %d | %.0f | %.0f | %.0f | %.2f | %.2f |\n", w.Round, n.SpanUs, w.SpanUs, w.AddedUs, trips, w.RoundTrips)
		}
		fmt.Fprintf(&b, "| median | %.0f | %.0f | | **%.2f** | |\n\n", medianSpan(d.Near), medianSpan(d.Far), farTrips(d))
	}
	return b.String(), nil
}
