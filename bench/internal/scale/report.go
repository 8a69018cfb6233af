package scale

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/chart"
	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// targets: nothing lost, no errors, and, for each number of clients,
// throughput that does not fall as instances are added (each step's
// median updates/s at least the step before's).
func targets(d Data) []results.Target {
	ts := contend.SafetyTargets(d.Arms)
	arms := []struct {
		name  func(clients, n int) string
		label string
		in    bool
	}{{ProxyName, "", true}, {LingerName, ", linger " + Linger, d.Lingering}, {ReleaseWindowName, ", release window " + ReleaseWindow, d.Windowed},
		{sharedStep, ", cores shared out", d.Shared}}
	for _, arm := range arms {
		if !arm.in {
			continue
		}
		for _, c := range d.Clients {
			var steps []string
			met := true
			prev := -1.0
			for _, n := range d.Instances {
				a, ok := contend.Find(d.Arms, arm.name(c, n))
				if !ok {
					continue
				}
				steps = append(steps, fmt.Sprintf("%.0f", a.DonePerSec))
				if prev >= 0 && a.DonePerSec < prev {
					met = false
				}
				prev = a.DonePerSec
			}
			ts = append(ts, results.Target{
				Name: fmt.Sprintf("%d clients%s: updates/s as instances are added (%s)", c, arm.label, instancesList(d.Instances)),
				Want: "not falling", Got: strings.Join(steps, " → "), Met: met,
			})
		}
	}
	return ts
}

func instancesList(ns []int) string {
	var s []string
	for _, n := range ns {
		s = append(s, fmt.Sprint(n))
	}
	return strings.Join(s, " / ")
}

// Report implements scenario.Scenario.
func (s *Scenario) Report(r *results.Result, plotDir, relDir string) (string, error) {
	var d Data
	if err := r.DecodeData(&d); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Each client loops on `UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = k` (autocommit, text protocol), k drawn uniformly from %d rows "+
		"for every statement, so two statements seldom want the same lock; %.0f s per run, %d interleaved round(s), every arm of every client count in each round. "+
		"Through lockproxy the rule locks on `write` (Redis backend) and clients are spread over the instances. Ratios are medians of per-round ratios "+
		"against the direct run with as many clients. The *linger* arms (runs from 2026-12-06 on) set `locks.redis.linger: %s`; the *release window* arms (runs from 2026-12-06 10:00 on) "+
		"set `locks.redis.release_window: %s` (from the run of 2026-12-06 20:30 on; the plain arms run the default since then, 1ms, and before it they sent every release at once while these arms set 1ms). The *cores shared out* arms (runs from 2026-12-06 14:50 on) start each of n instances with `GOMAXPROCS` = cores / n (at least 1), "+
		"as a CPU limit of cores / n per instance sets it (the Go runtime reads a container's quota), so the instances on one host share its cores out instead of each "+
		"running goroutines on all of them; with one instance that is the default, so their not-falling target starts from the plain 1-instance arm.\n\n", d.Keys, d.Seconds, d.Rounds, Linger, ReleaseWindow)
	b.WriteString(contend.Table(d.Arms, "updates"))
	b.WriteString(contend.Errors(d.Arms))
	b.WriteString("CPU per UPDATE (median over rounds):\n\n| arm | lockproxy CPU µs/update | mysqld CPU µs/update | Redis CPU µs/update | host busy |\n|---|--:|--:|--:|--:|\n")
	for _, a := range d.Arms {
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.0f%% |\n", a.Name, a.ProxyCPUUs, a.MysqldCPUUs, a.RedisCPUUs, a.HostBusy*100)
	}
	b.WriteString("\n")
	name := "scale-throughput.png"
	var labels []string
	for _, c := range d.Clients {
		labels = append(labels, fmt.Sprintf("%d clients", c))
	}
	var series []chart.Series
	for _, n := range append([]int{0}, d.Instances...) {
		sr := chart.Series{Name: fmt.Sprintf("%d instance(s)", n)}
		if n == 0 {
			sr.Name = "direct"
		}
		for _, c := range d.Clients {
			arm := DirectName(c)
			if n > 0 {
				arm = ProxyName(c, n)
			}
			a, _ := contend.Find(d.Arms, arm)
			sr.Values = append(sr.Values, a.DonePerSec)
		}
		series = append(series, sr)
	}
	if err := chart.Bars(filepath.Join(plotDir, name), chart.Labels{Title: "uniform keys: guarded UPDATEs per second", Y: "updates/s"},
		labels, series); err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "![%s](%s)\n\n", name, filepath.ToSlash(filepath.Join(relDir, name)))
	return b.String(), nil
}
