package contend

import (
	"context"
	"fmt"
	"strings"
)

// Sample is one arm's run in one round, with the correctness check of the
// tables afterwards where the arm has one.
type Sample struct {
	Round    int   `json:"round"`
	Run      Run   `json:"run"`
	Oversold int64 `json:"oversold"`
	Lost     int64 `json:"lost"`
	// CPU during a timed run, in µs per done operation (ProxyCPUUs: all
	// lockproxy instances of the arm together, or the relay it ran
	// through; mysqld is the primary), and the host's busy share.
	ProxyCPUUs  float64 `json:"proxy_cpu_us,omitempty"`
	MysqldCPUUs float64 `json:"mysqld_cpu_us,omitempty"`
	RedisCPUUs  float64 `json:"redis_cpu_us,omitempty"`
	// From lockproxy's own histograms during a timed run: mean wait for
	// and hold of one lock, and the share of the run a lock was held.
	LockWaitMs float64 `json:"lock_wait_ms,omitempty"`
	LockHoldMs float64 `json:"lock_hold_ms,omitempty"`
	LockBusy   float64 `json:"lock_busy,omitempty"`
	HostBusy   float64 `json:"host_busy,omitempty"`
}

// Arm is one side of a comparison: how to run it, and the arm (by name) its
// figures are divided by. Run must reset whatever state it needs itself.
type Arm struct {
	Name      string
	Baseline  string // "" for a baseline
	Instances int    // lockproxy instances, 0 for direct
	// Via names where the arm ran when it is neither direct nor lockproxy,
	// e.g. env.GoRelay; "" means Via(Instances).
	Via string
	Run func(ctx context.Context, round int) (Sample, error)
}

// Result is an arm's samples and their medians over rounds; the ratios are
// medians of the per-round ratios against the baseline's sample of the same
// round (0 when the arm has no baseline). Plain data.
type Result struct {
	Name      string   `json:"name"`
	Baseline  string   `json:"baseline,omitempty"`
	Instances int      `json:"instances"`
	Via       string   `json:"via,omitempty"` // see Arm.Via
	Samples   []Sample `json:"samples"`

	DonePerSec     float64 `json:"done_per_s"`
	AttemptsPerSec float64 `json:"attempts_per_s"`
	P50Ms          float64 `json:"p50_ms"`
	P99Ms          float64 `json:"p99_ms"`
	MaxMs          float64 `json:"max_ms"`
	Jain           float64 `json:"jain"`
	MaxOverMin     float64 `json:"max_over_min"`
	OversoldMax    int64   `json:"oversold_max"`
	LostMax        int64   `json:"lost_max"`
	Errors         int     `json:"errors"`
	ErrorMsg       string  `json:"error_msg,omitempty"`
	Retries        float64 `json:"retries"` // median per run
	ProxyCPUUs     float64 `json:"proxy_cpu_us"`
	MysqldCPUUs    float64 `json:"mysqld_cpu_us"`
	RedisCPUUs     float64 `json:"redis_cpu_us"`
	LockWaitMs     float64 `json:"lock_wait_ms"`
	LockHoldMs     float64 `json:"lock_hold_ms"`
	LockBusy       float64 `json:"lock_busy"`
	HostBusy       float64 `json:"host_busy"`

	DoneRatio     float64 `json:"done_ratio"`
	AttemptsRatio float64 `json:"attempts_ratio"`
	P50Ratio      float64 `json:"p50_ratio"`
	P99Ratio      float64 `json:"p99_ratio"`
}

// Interleave runs every arm once per round; odd rounds in the given order,
// even rounds reversed, so a trend in the machine's load falls on all arms
// alike. It returns the summarised results in arm order.
func Interleave(ctx context.Context, arms []Arm, rounds int, logf func(string, ...any)) ([]Result, error) {
	res := make([]Result, len(arms))
	for i, a := range arms {
		res[i] = Result{Name: a.Name, Baseline: a.Baseline, Instances: a.Instances, Via: a.Via}
	}
	for round := 1; round <= rounds; round++ {
		for j := range arms {
			i := j
			if round%2 == 0 {
				i = len(arms) - 1 - j
			}
			s, err := arms[i].Run(ctx, round)
			if err != nil {
				return nil, fmt.Errorf("%s round %d: %w", arms[i].Name, round, err)
			}
			s.Round = round
			logf("round %d/%d %-34s %8.1f done/s %8.1f tx/s p50 %7.2f ms p99 %7.2f ms retries %d errors %d oversold %d lost %d",
				round, rounds, arms[i].Name, s.Run.DonePerSec(), s.Run.AttemptsPerSec(), s.Run.Latency.P50Ms, s.Run.Latency.P99Ms,
				s.Run.Retries, s.Run.Errors, s.Oversold, s.Lost)
			res[i].Samples = append(res[i].Samples, s)
		}
	}
	Summarise(res)
	return res, nil
}

// Summarise fills the medians and ratios of every result from its samples.
func Summarise(rs []Result) {
	byName := map[string]*Result{}
	for i := range rs {
		byName[rs[i].Name] = &rs[i]
	}
	for i := range rs {
		r := &rs[i]
		var done, att, p50, p99, mx, jain, mom, retr, pcpu, mcpu, rcpu, busy, lw, lh, lb []float64
		for _, s := range r.Samples {
			done = append(done, s.Run.DonePerSec())
			att = append(att, s.Run.AttemptsPerSec())
			p50 = append(p50, s.Run.Latency.P50Ms)
			p99 = append(p99, s.Run.Latency.P99Ms)
			mx = append(mx, s.Run.Latency.MaxMs)
			jain = append(jain, s.Run.Fairness.Jain)
			mom = append(mom, s.Run.Fairness.MaxOverMin)
			retr = append(retr, float64(s.Run.Retries))
			pcpu, mcpu, busy = append(pcpu, s.ProxyCPUUs), append(mcpu, s.MysqldCPUUs), append(busy, s.HostBusy)
			rcpu = append(rcpu, s.RedisCPUUs)
			lw, lh, lb = append(lw, s.LockWaitMs), append(lh, s.LockHoldMs), append(lb, s.LockBusy)
			r.OversoldMax = max(r.OversoldMax, s.Oversold)
			r.LostMax = max(r.LostMax, s.Lost)
			r.Errors += s.Run.Errors
			if s.Run.ErrorMsg != "" && r.ErrorMsg == "" {
				r.ErrorMsg = s.Run.ErrorMsg
			}
		}
		r.DonePerSec, r.AttemptsPerSec = Median(done), Median(att)
		r.P50Ms, r.P99Ms, r.MaxMs = Median(p50), Median(p99), Median(mx)
		r.Jain, r.MaxOverMin, r.Retries = Median(jain), Median(mom), Median(retr)
		r.ProxyCPUUs, r.MysqldCPUUs, r.HostBusy = Median(pcpu), Median(mcpu), Median(busy)
		r.RedisCPUUs = Median(rcpu)
		r.LockWaitMs, r.LockHoldMs, r.LockBusy = Median(lw), Median(lh), Median(lb)
		if b, ok := byName[r.Baseline]; ok && r.Baseline != "" {
			r.DoneRatio = pairedRatio(r.Samples, b.Samples, Run.DonePerSec)
			r.AttemptsRatio = pairedRatio(r.Samples, b.Samples, Run.AttemptsPerSec)
			r.P50Ratio = pairedRatio(r.Samples, b.Samples, func(x Run) float64 { return x.Latency.P50Ms })
			r.P99Ratio = pairedRatio(r.Samples, b.Samples, func(x Run) float64 { return x.Latency.P99Ms })
		}
	}
}

// pairedRatio is the median over rounds of f(arm)/f(baseline) for the
// rounds both have.
func pairedRatio(arm, base []Sample, f func(Run) float64) float64 {
	return Median(roundRatios(arm, base, f))
}

// RoundRatios are f(a)/f(b) for each round both have, in a's order.
func RoundRatios(a, b Result, f func(Run) float64) []float64 {
	return roundRatios(a.Samples, b.Samples, f)
}

func roundRatios(arm, base []Sample, f func(Run) float64) []float64 {
	at := map[int]Run{}
	for _, s := range base {
		at[s.Round] = s.Run
	}
	var rs []float64
	for _, s := range arm {
		if b, ok := at[s.Round]; ok && f(b) > 0 {
			rs = append(rs, f(s.Run)/f(b))
		}
	}
	return rs
}

// Find returns the result called name.
func Find(rs []Result, name string) (Result, bool) {
	for _, r := range rs {
		if r.Name == name {
			return r, true
		}
	}
	return Result{}, false
}

// X formats a ratio as "1.23×", or "–" for none.
func X(r float64) string {
	if r == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", r)
}

// Via names where an arm ran: "direct" or "N× lockproxy".
func Via(instances int) string {
	if instances == 0 {
		return "direct"
	}
	return fmt.Sprintf("%d× lockproxy", instances)
}

// Where names where the arm ran: its Via, or Via(Instances).
func (r Result) Where() string {
	if r.Via != "" {
		return r.Via
	}
	return Via(r.Instances)
}

// Table renders the common columns of rs as Markdown: throughput and
// latency with their ratios against each arm's baseline.
func Table(rs []Result, doneName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| arm | via | %s/s | ratio | attempts/s | ratio | p50 ms | ratio | p99 ms | ratio | max ms | retries/run | errors |\n", doneName)
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %.0f | **%s** | %.0f | %s | %.2f | %s | %.2f | %s | %.1f | %.0f | %d |\n",
			r.Name, r.Where(), r.DonePerSec, X(r.DoneRatio), r.AttemptsPerSec, X(r.AttemptsRatio),
			r.P50Ms, X(r.P50Ratio), r.P99Ms, X(r.P99Ratio), r.MaxMs, r.Retries, r.Errors)
	}
	b.WriteString("\n")
	return b.String()
}

// Errors lists the arms that saw errors other than retried ones.
func Errors(rs []Result) string {
	var b strings.Builder
	for _, r := range rs {
		if r.Errors > 0 {
			fmt.Fprintf(&b, "- %s: %d error(s), e.g. `%s`\n", r.Name, r.Errors, r.ErrorMsg)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "**Errors (not retried):**\n\n" + b.String() + "\n"
}

// CPUTable renders the CPU each arm cost per done operation: lockproxy
// (all its instances) or the relay the arm ran through, the primary's
// mysqld and the bed's Redis, median over rounds, and how busy the host was.
func CPUTable(rs []Result, doneName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| arm | via | lockproxy or relay CPU µs/%[1]s | mysqld CPU µs/%[1]s | Redis CPU µs/%[1]s | host busy |\n|---|---|--:|--:|--:|--:|\n", doneName)
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %.1f | %.1f | %.1f | %.0f%% |\n", r.Name, r.Where(), r.ProxyCPUUs, r.MysqldCPUUs, r.RedisCPUUs, r.HostBusy*100)
	}
	b.WriteString("\n")
	return b.String()
}
