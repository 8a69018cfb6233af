package disjoint

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/chart"
	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// targets: no target for speed here (the machine cannot show scaling);
// correctness and no errors.
func targets(d Data) []results.Target {
	ts := contend.SafetyTargets(d.Arms)
	for _, name := range []string{ProxyName(1), LingerName(1)} {
		a, ok := contend.Find(d.Arms, name)
		if !ok {
			continue
		}
		ts = append(ts, results.Target{Name: "updates/s, " + name + " / direct", Want: fmt.Sprintf("≥ %.2f×", Target),
			Got: contend.X(a.DoneRatio), Met: a.DoneRatio >= Target})
	}
	return ts
}

// CPUModel is the ratio of the server-side CPU per statement of the two
// arms: direct = mysqld (+ Redis, ~0); proxied = mysqld + lockproxy +
// Redis. On a saturated host the throughput ratio tends towards it.
func CPUModel(direct, proxied contend.Result) float64 {
	return contend.Ratio(direct.MysqldCPUUs+direct.RedisCPUUs, proxied.MysqldCPUUs+proxied.ProxyCPUUs+proxied.RedisCPUUs)
}

// Report implements scenario.Scenario.
func (s *Scenario) Report(r *results.Result, plotDir, relDir string) (string, error) {
	var d Data
	if err := r.DecodeData(&d); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d clients, client *i* only ever updates row *i* (`UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = i`, autocommit, text protocol), "+
		"so no two statements ever want the same lock; %.0f s per run, %d interleaved round(s). Through lockproxy the rule locks on `write` (Redis backend): "+
		"each UPDATE takes and releases its row's lock; clients are spread over the instances. The *linger* arms set `locks.redis.linger: %s`: "+
		"the lock an UPDATE gave back stays with its instance that long, and the client's next UPDATE takes it over without Redis. "+
		"Ratios are medians of per-round ratios against the direct run.\n\n",
		d.Clients, d.Seconds, d.Rounds, Linger)
	b.WriteString(contend.Table(d.Arms, "updates"))
	b.WriteString(contend.Errors(d.Arms))
	b.WriteString(floors(d))
	b.WriteString("CPU per UPDATE (median over rounds); *CPU model* = direct (mysqld + Redis) CPU / (mysqld + lockproxy + Redis) CPU of the arm (client CPU left out), the throughput ratio to expect while the host's cores are the bottleneck:\n\n")
	direct, _ := contend.Find(d.Arms, DirectName)
	b.WriteString("| arm | lockproxy CPU µs/update | mysqld CPU µs/update | Redis CPU µs/update | CPU model | measured ratio | host busy |\n|---|--:|--:|--:|--:|--:|--:|\n")
	for _, a := range d.Arms {
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %s | %s | %.0f%% |\n", a.Name, a.ProxyCPUUs, a.MysqldCPUUs, a.RedisCPUUs,
			contend.X(CPUModel(direct, a)), contend.X(a.DoneRatio), a.HostBusy*100)
	}
	b.WriteString("\n")
	name := "disjoint-ratio.png"
	var labels []string
	ratio, model := chart.Series{Name: "updates/s / direct"}, chart.Series{Name: "CPU model"}
	for _, a := range d.Arms {
		if a.Baseline != "" {
			labels = append(labels, label(a.Name))
			ratio.Values = append(ratio.Values, a.DoneRatio)
			model.Values = append(model.Values, CPUModel(direct, a))
		}
	}
	err := chart.Bars(filepath.Join(plotDir, name), chart.Labels{Title: "disjoint keys: guarded UPDATE throughput through lockproxy / direct", Y: "ratio"},
		labels, []chart.Series{ratio, model}, chart.Ref{Value: 1, Label: "same as direct"})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "![%s](%s)\n\n", name, filepath.ToSlash(filepath.Join(relDir, name)))
	return b.String(), nil
}

// label is an arm's name on the chart: what sets it apart.
func label(name string) string {
	for _, p := range []string{"guarded ", "UPDATE, ", "lock rule, "} {
		name = strings.TrimPrefix(name, p)
	}
	return name
}

// floors says where the floor arms (no rule; the lock rule on the
// in-memory lock) stand against direct and the Redis arm of one instance
// against them; "" for runs without them.
func floors(d Data) string {
	relay, ok1 := contend.Find(d.Arms, NoRuleName)
	mem, ok2 := contend.Find(d.Arms, MemoryName)
	redis, ok3 := contend.Find(d.Arms, ProxyName(1))
	if !ok1 || !ok2 || !ok3 {
		return ""
	}
	return fmt.Sprintf("The floors, through one instance: with no rule on the table (the relay's own cost: two hops, no analysis that finds a rule, no lock) "+
		"**%s** direct; with the lock rule on the in-memory lock backend (`locks.backend: memory`: the lock taken and given back inside the instance, "+
		"no round trip and no other process, so no lock service behind this relay can cost less) **%s** direct. "+
		"The Redis arm of one instance reached %s of the in-memory one and %s of the relay's throughput (medians of the per-round ratios).\n\n",
		contend.X(relay.DoneRatio), contend.X(mem.DoneRatio), pct(contend.PairedRatio(redis, mem, contend.Run.DonePerSec)), pct(contend.PairedRatio(redis, relay, contend.Run.DonePerSec)))
}

// pct formats a share as a whole percentage.
func pct(x float64) string { return fmt.Sprintf("%.0f%%", x*100) }
