package readwrite

import (
	"fmt"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// runsOf returns the runs of arm with ps, by round.
func runsOf(d Data, arm, ps string) map[int]Run {
	out := map[int]Run{}
	for _, r := range d.Runs {
		if r.Arm == arm && r.PSMode == ps {
			out[r.Round] = r
		}
	}
	return out
}

// Ratio is the median over rounds of arm's queries per second over the
// direct run's of the same round, with ps.
func Ratio(d Data, arm, ps string) float64 {
	base := runsOf(d, Direct, ps)
	var xs []float64
	for round, r := range runsOf(d, arm, ps) {
		if b, ok := base[round]; ok && b.Stats.QPS > 0 {
			xs = append(xs, r.Stats.QPS/b.Stats.QPS)
		}
	}
	return contend.Median(xs)
}

// median is the median over arm's runs with ps of f.
func median(d Data, arm, ps string, f func(Run) float64) float64 {
	var xs []float64
	for _, r := range runsOf(d, arm, ps) {
		xs = append(xs, f(r))
	}
	return contend.Median(xs)
}

func psName(ps string) string {
	if ps == "auto" {
		return "prepared"
	}
	return "text"
}

func targets(d Data) []results.Target {
	var out []results.Target
	for _, ps := range []string{"disable", "auto"} {
		x := Ratio(d, Locked, ps)
		out = append(out, results.Target{
			Name: fmt.Sprintf("sysbench oltp_read_write qps, lockproxy with the lock rule on sbtest1 / direct, %d threads, %s", d.Threads, psName(ps)),
			Want: fmt.Sprintf("≥ %.2f× (moonshot %.1f×)", Target, Moonshot),
			Got:  fmt.Sprintf("%.2f× (no rules: %.2f×%s)", x, Ratio(d, NoRules, ps), memory(d, ps)),
			Met:  x >= Target,
		})
	}
	return out
}

// memory is ", in-memory lock: R×" for the runs that have the arm, else "".
func memory(d Data, ps string) string {
	if len(runsOf(d, Memory, ps)) == 0 {
		return ""
	}
	return fmt.Sprintf(", in-memory lock: %.2f×", Ratio(d, Memory, ps))
}

// Report implements scenario.Scenario.
func (s *Scenario) Report(r *results.Result, _, _ string) (string, error) {
	var d Data
	if err := r.DecodeData(&d); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "sysbench `oltp_read_write` on one table of %d rows (`--tables=1`, so every statement is on `sbtest1`: per transaction 10 point selects, 4 range reads, 2 UPDATEs, a DELETE and an INSERT of one row each, inside BEGIN … COMMIT), "+
		"%d threads, %d s per run, %d interleaved round(s), the order of the arms reversed every other round. "+
		"*lockproxy, lock rule* guards `sbtest1` by `id` with `lock: [write, locking_read, read_in_txn]` (Redis backend): every keyed statement takes its row's lock for the rest of the transaction, the range reads run without row locks (`on_unkeyed_read: allow`, the default); "+
		"*lockproxy, no rules* is the same relay with nothing to guard; *lockproxy, lock rule, in-memory lock* is the same rule on `locks.backend: memory`, whose locks are taken and given back inside the instance: no round trip, no other process, so no lock service behind this relay can cost less. Ratios are medians of per-round ratios of queries per second against the direct run of the same round; CPU and Redis commands are per query (medians over rounds).\n\n",
		d.TableSize, d.Threads, d.Seconds, d.Rounds)
	b.WriteString("| arm | statements | tps | qps | ratio | avg ms | p99 ms | errors (ignored by sysbench) | lockproxy CPU µs/query | mysqld CPU µs/query | Redis CPU µs/query | Redis commands/query | host busy |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, ps := range []string{"disable", "auto"} {
		for _, arm := range []string{Direct, NoRules, Locked, Memory} {
			if len(runsOf(d, arm, ps)) == 0 {
				continue
			}
			ratio := "–"
			if arm != Direct {
				ratio = "**" + contend.X(Ratio(d, arm, ps)) + "**"
			}
			errs := 0
			for _, r := range runsOf(d, arm, ps) {
				errs += r.Stats.Errors
			}
			us := func(f func(Run) float64) float64 { return median(d, arm, ps, f) * 1e6 }
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %s | %.2f | %.2f | %d | %.1f | %.1f | %.1f | %.2f | %.0f%% |\n", arm, psName(ps),
				median(d, arm, ps, func(r Run) float64 { return r.Stats.TPS }), median(d, arm, ps, func(r Run) float64 { return r.Stats.QPS }), ratio,
				median(d, arm, ps, func(r Run) float64 { return r.Stats.AvgMs }), median(d, arm, ps, func(r Run) float64 { return r.Stats.P99Ms }), errs,
				us(func(r Run) float64 { return perQuery(r, r.ProxyCPUSec) }), us(func(r Run) float64 { return perQuery(r, r.MysqldCPUSec) }),
				us(func(r Run) float64 { return perQuery(r, r.RedisCPUSec) }), median(d, arm, ps, func(r Run) float64 { return perQuery(r, float64(r.RedisCalls)) }),
				median(d, arm, ps, func(r Run) float64 { return r.HostBusy })*100)
		}
	}
	b.WriteString("\n")
	return b.String(), nil
}
