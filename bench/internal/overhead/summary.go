package overhead

import (
	"fmt"

	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// Data is the overhead scenario's result data.
type Data struct {
	Rounds    int    `json:"rounds"`
	Seconds   int    `json:"seconds_per_run"`
	Tables    int    `json:"tables"`
	TableSize int    `json:"table_size"`
	Cells     []Cell `json:"cells"`
}

// Side is the medians over rounds of one target's runs.
type Side struct {
	QPS    float64 `json:"qps"`
	QPSMin float64 `json:"qps_min"`
	QPSMax float64 `json:"qps_max"`
	TPS    float64 `json:"tps"`
	AvgMs  float64 `json:"avg_ms"` // per event (transaction)
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	Errors int     `json:"errors"` // summed over rounds
	Failed int     `json:"failed_runs"`
	// CPU per query in µs, from /proc over each run.
	ProxyCPUUs  float64 `json:"proxy_cpu_us_per_query"`
	MysqldCPUUs float64 `json:"mysqld_cpu_us_per_query"`
	ClientCPUUs float64 `json:"client_cpu_us_per_query"` // sysbench
	HostBusy    float64 `json:"host_busy"`
}

// Cell is one configuration's runs and what they come to.
type Cell struct {
	Config
	Runs   []Measure `json:"runs"`
	Direct Side      `json:"direct"`
	Proxy  Side      `json:"proxy"`
	// Ratio is the median over rounds of proxy qps / direct qps of the same
	// round (the two runs of a pair are adjacent in time).
	Ratio float64 `json:"ratio"`
	// QueriesPerEvent is 1 for point_select, 18-20 for read_write.
	QueriesPerEvent float64 `json:"queries_per_event"`
	// AddedUs is (proxy median avg - direct median avg) per query, in µs.
	AddedUs float64 `json:"added_us_per_query"`
}

func (c *Cell) summarize() {
	c.Direct = side(c.Runs, Direct)
	c.Proxy = side(c.Runs, Proxy)
	byRound := map[int]map[string]float64{}
	var events, queries float64
	for _, m := range c.Runs {
		if m.Failed {
			continue
		}
		if byRound[m.Round] == nil {
			byRound[m.Round] = map[string]float64{}
		}
		byRound[m.Round][m.Target] = m.Stats.QPS
		events += float64(m.Stats.Events)
		queries += float64(m.Stats.Queries)
	}
	var ratios []float64
	for _, r := range byRound {
		if r[Direct] > 0 && r[Proxy] > 0 {
			ratios = append(ratios, r[Proxy]/r[Direct])
		}
	}
	c.Ratio = results.Median(ratios)
	c.QueriesPerEvent = 1
	if events > 0 && queries > 0 {
		c.QueriesPerEvent = queries / events
	}
	c.AddedUs = (c.Proxy.AvgMs - c.Direct.AvgMs) * 1000 / c.QueriesPerEvent
}

func side(runs []Measure, target string) Side {
	var qps, tps, avg, p95, p99, pcpu, mcpu, ccpu, busy []float64
	var s Side
	for _, m := range runs {
		if m.Target != target {
			continue
		}
		if m.Failed {
			s.Failed++
			continue
		}
		st := m.Stats
		qps, tps, avg = append(qps, st.QPS), append(tps, st.TPS), append(avg, st.AvgMs)
		p95, p99 = append(p95, st.P95Ms), append(p99, st.P99Ms)
		busy = append(busy, m.HostBusy)
		if st.Queries > 0 {
			pcpu = append(pcpu, m.ProxyCPUSec*1e6/float64(st.Queries))
			mcpu = append(mcpu, m.MysqldCPUSec*1e6/float64(st.Queries))
			ccpu = append(ccpu, st.ClientCPUSec*1e6/float64(st.Queries))
		}
		s.Errors += st.Errors
		if s.QPSMin == 0 || st.QPS < s.QPSMin {
			s.QPSMin = st.QPS
		}
		s.QPSMax = max(s.QPSMax, st.QPS)
	}
	s.QPS, s.TPS, s.AvgMs = results.Median(qps), results.Median(tps), results.Median(avg)
	s.P95Ms, s.P99Ms = results.Median(p95), results.Median(p99)
	s.ProxyCPUUs, s.MysqldCPUUs, s.HostBusy = results.Median(pcpu), results.Median(mcpu), results.Median(busy)
	s.ClientCPUUs = results.Median(ccpu)
	return s
}

// targets reports every cell the targets speak of: the ratio at 8 threads
// and the added latency at 1 thread.
func targets(cells []Cell) []results.Target {
	var out []results.Target
	for _, c := range cells {
		switch c.Threads {
		case 8:
			out = append(out, results.Target{
				Name: "proxy/direct qps, " + c.Label(), Want: fmt.Sprintf(">= %.2f", TargetRatio8),
				Got: fmt.Sprintf("%.2f", c.Ratio) + failures(c), Met: c.Ratio >= TargetRatio8 && c.Proxy.Failed == 0,
			})
		case 1:
			out = append(out, results.Target{
				Name: "added latency per query, " + c.Label(), Want: fmt.Sprintf("<= %.0f µs", TargetAddedUs1),
				Got: fmt.Sprintf("%.1f µs", c.AddedUs) + failures(c), Met: c.AddedUs <= TargetAddedUs1 && c.Proxy.Failed == 0,
			})
		}
	}
	return out
}

// failures notes failed proxied runs next to a target's figure.
func failures(c Cell) string {
	if c.Proxy.Failed == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of %d proxied runs failed)", c.Proxy.Failed, c.Proxy.Failed+countOK(c.Runs, Proxy))
}

func countOK(runs []Measure, target string) int {
	n := 0
	for _, m := range runs {
		if m.Target == target && !m.Failed {
			n++
		}
	}
	return n
}
