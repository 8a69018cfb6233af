package gobench

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// ChartFile is the lock backends' chart, in the results directory.
const ChartFile = "gobench-locks.png"

func targets(d Data) []results.Target {
	one := func(name, what string, want float64) results.Target {
		b, ok := d.Find("./parser/", name)
		t := results.Target{Name: fmt.Sprintf("parser `%s` (%s), median ns/op", name, what), Want: "≤ " + Dur(want), Got: "missing"}
		if ok && b.Missing == "" {
			t.Got, t.Met = Dur(b.Ns()), b.Ns() <= want
		} else if ok {
			t.Got = "missing (" + b.Missing + ")"
		}
		return t
	}
	return []results.Target{
		one("BenchmarkAnalyzeKeyedUpdate", "uncached analysis of a keyed UPDATE", TargetAnalyzeNs),
		one("BenchmarkCacheHit", "analysis served from the statement cache", TargetCacheHitNs),
	}
}

// Dur formats a ns/op figure with a readable unit.
func Dur(ns float64) string {
	switch {
	case ns <= 0:
		return "–"
	case ns < 1e3:
		return fmt.Sprintf("%.0f ns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	default:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	}
}

// Report implements scenario.Scenario.
func (s *Scenario) Report(r *results.Result, plotDir, relDir string) (string, error) {
	var d Data
	if err := r.DecodeData(&d); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Each package's benchmarks ran as `go test -run '^$' -bench '^(…)$' -benchtime %s -count 1 -v <pkg>` with `LOCKPROXY_TESTBED` naming the bench bed "+
		"(redislock and mysqllock use its Redis and MariaDB; redlock, etcdlock and zklock start their own servers in TestMain: three Redis, an etcd, a ZooKeeper). "+
		"%d round(s), every package once per round, the package order reversed every other round, so a burst of load on this shared machine does not fall on one package only; "+
		"figures are medians over the rounds (min–max of ns/op beside them). B/op and allocs/op are per operation as `b.ReportAllocs` reports them, where the benchmark asks for them.\n\n",
		d.Benchtime, d.Rounds)
	b.WriteString("**Parser, rules and the statement pipeline** (one statement, one rule match or one text per op):\n\n")
	b.WriteString(microTable(d.Benches))
	b.WriteString(splitCost(d))
	b.WriteString("**Lock backends side by side.** *Uncontended*: acquire + release of a free key by one goroutine (the cost a guarded statement pays when nobody else holds the row). " +
		"*Hot-key handoff*: 8 goroutines over 2 Lockers (as two proxy instances would hold them; memlock: two handles on one in-process table) take turns on one key; the figure is time per grant, i.e. how fast the lock changes hands. " +
		"The chart shows both on a log scale.\n\n")
	b.WriteString(lockTable(d.Benches))
	if err := drawLocks(filepath.Join(plotDir, ChartFile), d.Benches); err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "![%s](%s)\n\n", ChartFile, filepath.ToSlash(filepath.Join(relDir, ChartFile)))
	b.WriteString(missingList(d.Benches))
	b.WriteString(invocationTable(d.Invocations))
	return b.String(), nil
}

// splitCost says what running a text in pieces adds (proxy
// BenchmarkSplitText): the split text's time through lockproxy over the
// whole one's, less the same difference directly.
func splitCost(d Data) string {
	ns := map[string]float64{}
	for _, arm := range []string{"direct/whole", "direct/split", "lockproxy/whole", "lockproxy/split"} {
		b, ok := d.Find("./proxy/", "BenchmarkSplitText/"+arm)
		if !ok || b.Missing != "" || b.Ns() <= 0 {
			return ""
		}
		ns[arm] = b.Ns()
	}
	added := (ns["lockproxy/split"] - ns["lockproxy/whole"]) - (ns["direct/split"] - ns["direct/whole"])
	return fmt.Sprintf("*A text run in pieces* (`BenchmarkSplitText`: `SET NAMES utf8mb4; SELECT ...` on a guarded table, which lockproxy runs as two pieces, "+
		"against `SET @v = 1; SELECT ...`, sent whole; one autocommit session each, directly and through lockproxy): "+
		"the split adds **%s** per text over the same texts directly (lockproxy split − whole %s, direct split − whole %s).\n\n",
		Dur(max(added, 0)), signedDur(ns["lockproxy/split"]-ns["lockproxy/whole"]), signedDur(ns["direct/split"]-ns["direct/whole"]))
}

// signedDur is Dur for a difference, which may be below zero.
func signedDur(ns float64) string {
	if ns < 0 {
		return "−" + Dur(-ns)
	}
	return Dur(ns)
}

func microTable(bs []Bench) string {
	var b strings.Builder
	b.WriteString("| package | benchmark | time/op | (min–max) | B/op | allocs/op | runs | other metrics |\n|---|---|--:|--:|--:|--:|--:|---|\n")
	for _, x := range bs {
		if x.Group == GroupLock {
			continue
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s | %s | %d | %s |\n", x.Pkg, x.Name, bold(x), spread(x), metric(x, UnitBytes), metric(x, UnitAllocs), x.Runs, extras(x))
	}
	b.WriteString("\n")
	return b.String()
}

func lockTable(bs []Bench) string {
	var b strings.Builder
	b.WriteString("| backend | uncontended acquire+release | (min–max) | B/op | allocs/op | hot-key handoff, per grant | (min–max) | other metrics |\n|---|--:|--:|--:|--:|--:|--:|---|\n")
	for _, be := range backends(bs) {
		u, h := lockPair(bs, be)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", be, bold(u), spread(u), metric(u, UnitBytes), metric(u, UnitAllocs),
			bold(h), spread(h), extras(u, h))
	}
	b.WriteString("\n")
	return b.String()
}

// backends lists the lock backends present, in spec order.
func backends(bs []Bench) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range bs {
		if be := backendOf(x.Pkg); x.Group == GroupLock && !seen[be] {
			seen[be] = true
			out = append(out, be)
		}
	}
	return out
}

// lockPair returns a backend's uncontended and hot-key figures.
func lockPair(bs []Bench, backend string) (u, h Bench) {
	for _, x := range bs {
		if x.Group != GroupLock || backendOf(x.Pkg) != backend {
			continue
		}
		switch x.Name {
		case LockBenches[0]:
			u = x
		case LockBenches[1]:
			h = x
		}
	}
	return u, h
}

func backendOf(pkg string) string {
	return filepath.Base(strings.TrimSuffix(pkg, "/"))
}

func bold(x Bench) string {
	if x.Missing != "" || x.Runs == 0 {
		return "missing"
	}
	return "**" + Dur(x.Ns()) + "**"
}

func spread(x Bench) string {
	if x.Runs < 2 {
		return ""
	}
	return Dur(x.NsMin) + "–" + Dur(x.NsMax)
}

func metric(x Bench, unit string) string {
	v, ok := x.Median[unit]
	if !ok {
		return ""
	}
	return fmt.Sprintf("%.0f", v)
}

// extras lists custom metrics (e.g. roundtrips/op) of the benchmarks.
func extras(xs ...Bench) string {
	var parts []string
	for _, x := range xs {
		var units []string
		for unit := range x.Median {
			if unit != UnitNs && unit != UnitBytes && unit != UnitAllocs {
				units = append(units, unit)
			}
		}
		sort.Strings(units)
		for _, unit := range units {
			parts = append(parts, fmt.Sprintf("%s %s: %.3g", strings.TrimPrefix(x.Name, "Benchmark"), unit, x.Median[unit]))
		}
	}
	return strings.Join(parts, "; ")
}

func missingList(bs []Bench) string {
	var b strings.Builder
	for _, x := range bs {
		if x.Missing != "" {
			fmt.Fprintf(&b, "- `%s` `%s`: %s\n", x.Pkg, x.Name, oneLine(x.Missing))
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "Benchmarks without a figure:\n\n" + b.String() + "\n"
}

// invocationTable shows, per package, each round's wall time, the host's
// busy share while it ran and the load at its start.
func invocationTable(invs []Invocation) string {
	if len(invs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Each `go test` process (wall time including the build check and link, host CPU busy while it ran, 1-minute load average at its start; *retried* when the package did not build at first):\n\n")
	b.WriteString("| package | round | wall s | host busy | load at start | result |\n|---|--:|--:|--:|---|---|\n")
	order := map[string]int{}
	for _, inv := range invs {
		if _, ok := order[inv.Pkg]; !ok {
			order[inv.Pkg] = len(order)
		}
	}
	sorted := append([]Invocation(nil), invs...)
	sort.SliceStable(sorted, func(i, j int) bool { return order[sorted[i].Pkg] < order[sorted[j].Pkg] })
	for _, inv := range sorted {
		res := "ok"
		if !inv.OK {
			res = "FAIL: " + oneLine(firstLine(inv.Error))
		}
		if inv.Attempts > 1 {
			res += fmt.Sprintf(" (retried: %d attempts)", inv.Attempts)
		}
		load, _, _ := strings.Cut(inv.LoadAvg, " ")
		fmt.Fprintf(&b, "| `%s` | %d | %.1f | %.0f%% | %s | %s |\n", inv.Pkg, inv.Round, inv.Seconds, inv.HostBusy*100, load, res)
	}
	b.WriteString("\n")
	return b.String()
}

// oneLine makes s fit in a table cell.
func oneLine(s string) string {
	s = strings.NewReplacer("\n", " ", "\t", " ").Replace(strings.TrimSpace(s))
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
