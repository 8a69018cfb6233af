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
	RelayCPUUs  float64 `json:"relay_cpu_us_per_query,omitempty"` // relay runs
	MysqldCPUUs float64 `json:"mysqld_cpu_us_per_query"`
	ClientCPUUs float64 `json:"client_cpu_us_per_query"` // sysbench
	HostBusy    float64 `json:"host_busy"`
	// ReplicaShare is, on the proxy_replica side, the median over runs of
	// the share of lockproxy's statements that went to the replica.
	ReplicaShare float64 `json:"replica_share,omitempty"`
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

	// The relays that parse nothing, measured in the same rounds: their
	// medians, their qps ratio to direct (median of per-round ratios) and
	// the µs they add per query, like the proxy's.
	GoRelay        Side    `json:"go_relay"`
	Socat          Side    `json:"socat"`
	GoRelayRatio   float64 `json:"go_relay_ratio"`
	SocatRatio     float64 `json:"socat_ratio"`
	GoRelayAddedUs float64 `json:"go_relay_added_us_per_query"`
	SocatAddedUs   float64 `json:"socat_added_us_per_query"`
	// ProxyVsGoRelay is the median over rounds of lockproxy qps / bare Go
	// relay qps; ProxyOverGoRelayUs is what lockproxy adds per query on
	// top of the bare Go relay (proxy − relay median avg, per query).
	ProxyVsGoRelay     float64 `json:"proxy_vs_go_relay"`
	ProxyOverGoRelayUs float64 `json:"proxy_over_go_relay_us_per_query"`

	// The replica route (point selects only): sysbench straight at the
	// replica and through a lockproxy that routes the reads there, their
	// paired ratio and the µs lockproxy adds, like the primary's.
	// ReplicaVsPrimary is ReplicaRatio / Ratio: 1 when a replica-routed
	// point select costs what a primary-routed one does.
	ReplicaDirect    Side    `json:"replica_direct"`
	ProxyReplica     Side    `json:"proxy_replica"`
	ReplicaRatio     float64 `json:"replica_ratio,omitempty"`
	ReplicaAddedUs   float64 `json:"replica_added_us_per_query,omitempty"`
	ReplicaVsPrimary float64 `json:"replica_vs_primary,omitempty"`

	// Multiplexing (backends.pool.multiplex) on, in the same rounds: its
	// medians, its paired ratio to direct and to lockproxy without it,
	// and the µs it adds per query over lockproxy without it.
	ProxyMux     Side    `json:"proxy_mux"`
	MuxRatio     float64 `json:"mux_ratio,omitempty"`
	MuxVsProxy   float64 `json:"mux_vs_proxy,omitempty"`
	MuxOverProxy float64 `json:"mux_over_proxy_us_per_query,omitempty"`
}

// HasMux reports whether the cell holds runs with multiplexing on.
func (c Cell) HasMux() bool {
	for _, m := range c.Runs {
		if m.Target == ProxyMux {
			return true
		}
	}
	return false
}

// HasReplica reports whether the cell holds replica-route runs.
func (c Cell) HasReplica() bool {
	for _, m := range c.Runs {
		if m.Target == ReplicaDirect || m.Target == ProxyReplica {
			return true
		}
	}
	return false
}

// HasRelays reports whether the cell holds relay runs (results stored
// before the relay arms existed have none).
func (c Cell) HasRelays() bool {
	for _, m := range c.Runs {
		if m.Target == GoRelay || m.Target == Socat {
			return true
		}
	}
	return false
}

func (c *Cell) summarize() {
	c.Direct = side(c.Runs, Direct)
	c.Proxy = side(c.Runs, Proxy)
	c.GoRelay = side(c.Runs, GoRelay)
	c.Socat = side(c.Runs, Socat)
	c.ReplicaDirect = side(c.Runs, ReplicaDirect)
	c.ProxyReplica = side(c.Runs, ProxyReplica)
	c.ProxyMux = side(c.Runs, ProxyMux)
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
	c.Ratio = pairedRatio(byRound, Proxy, Direct)
	c.GoRelayRatio = pairedRatio(byRound, GoRelay, Direct)
	c.SocatRatio = pairedRatio(byRound, Socat, Direct)
	c.ProxyVsGoRelay = pairedRatio(byRound, Proxy, GoRelay)
	c.ReplicaRatio = pairedRatio(byRound, ProxyReplica, ReplicaDirect)
	c.MuxRatio = pairedRatio(byRound, ProxyMux, Direct)
	c.MuxVsProxy = pairedRatio(byRound, ProxyMux, Proxy)
	c.QueriesPerEvent = 1
	if events > 0 && queries > 0 {
		c.QueriesPerEvent = queries / events
	}
	c.AddedUs = c.addedUs(c.Proxy, c.Direct)
	c.GoRelayAddedUs = c.addedUs(c.GoRelay, c.Direct)
	c.SocatAddedUs = c.addedUs(c.Socat, c.Direct)
	c.ProxyOverGoRelayUs = c.addedUs(c.Proxy, c.GoRelay)
	c.ReplicaAddedUs = c.addedUs(c.ProxyReplica, c.ReplicaDirect)
	c.MuxOverProxy = c.addedUs(c.ProxyMux, c.Proxy)
	c.ReplicaVsPrimary = 0
	if c.Ratio > 0 {
		c.ReplicaVsPrimary = c.ReplicaRatio / c.Ratio
	}
}

// addedUs is what side a adds per query over side b, in µs (0 when either
// has no successful run).
func (c *Cell) addedUs(a, b Side) float64 {
	if a.AvgMs == 0 || b.AvgMs == 0 {
		return 0
	}
	return (a.AvgMs - b.AvgMs) * 1000 / c.QueriesPerEvent
}

// pairedRatio is the median over rounds of qps(a) / qps(b) for the rounds
// in which both ran.
func pairedRatio(byRound map[int]map[string]float64, a, b string) float64 {
	var ratios []float64
	for _, r := range byRound {
		if r[a] > 0 && r[b] > 0 {
			ratios = append(ratios, r[a]/r[b])
		}
	}
	return results.Median(ratios)
}

func side(runs []Measure, target string) Side {
	var qps, tps, avg, p95, p99, pcpu, rcpu, mcpu, ccpu, busy, share []float64
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
		if routed := m.RoutedReplica + m.RoutedPrimary; routed > 0 {
			share = append(share, m.RoutedReplica/routed)
		}
		if st.Queries > 0 {
			pcpu = append(pcpu, m.ProxyCPUSec*1e6/float64(st.Queries))
			rcpu = append(rcpu, m.RelayCPUSec*1e6/float64(st.Queries))
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
	s.ClientCPUUs, s.RelayCPUUs = results.Median(ccpu), results.Median(rcpu)
	s.ReplicaShare = results.Median(share)
	return s
}

// targets reports every cell the targets speak of: the ratio at 8 threads
// (and, for prepared statements, against the text ratio), lockproxy's CPU
// per point select at 8 threads, and the added latency at 1 thread.
func targets(cells []Cell) []results.Target {
	var out []results.Target
	text := map[string]Cell{} // the text-protocol cell of each test at 8 threads
	for _, c := range cells {
		if c.Threads == 8 && c.PSMode == "disable" {
			text[c.Test] = c
		}
	}
	for _, c := range cells {
		out = append(out, replicaTargetsOf(c)...)
		switch c.Threads {
		case 8:
			out = append(out, results.Target{
				Name: "proxy/direct qps, " + c.Label(), Want: fmt.Sprintf(">= %.2f", TargetRatio8),
				Got: fmt.Sprintf("%.2f", c.Ratio) + failures(c) + floorRatio(c), Met: c.Ratio >= TargetRatio8 && c.Proxy.Failed == 0,
			})
			if t, ok := text[c.Test]; ok && c.PSMode != "disable" {
				out = append(out, results.Target{
					Name: "prepared ratio at least the text ratio, " + c.Label(), Want: fmt.Sprintf(">= %.2f (text)", t.Ratio),
					Got: fmt.Sprintf("%.2f", c.Ratio), Met: c.Ratio >= t.Ratio && c.Proxy.Failed == 0,
				})
			}
			if c.Test == "oltp_point_select" && c.PSMode == "disable" {
				out = append(out, results.Target{
					Name: "lockproxy CPU per query, " + c.Label(), Want: fmt.Sprintf("<= %.0f µs", TargetCPUUs),
					Got: fmt.Sprintf("%.1f µs (bare Go relay: %.1f µs)", c.Proxy.ProxyCPUUs, c.GoRelay.RelayCPUUs),
					Met: c.Proxy.ProxyCPUUs > 0 && c.Proxy.ProxyCPUUs <= TargetCPUUs,
				})
			}
		case 1:
			out = append(out, results.Target{
				Name: "added latency per query, " + c.Label(), Want: fmt.Sprintf("<= %.0f µs", TargetAddedUs1),
				Got: fmt.Sprintf("%.1f µs", c.AddedUs) + failures(c) + floorAdded(c), Met: c.AddedUs <= TargetAddedUs1 && c.Proxy.Failed == 0,
			})
		}
	}
	return out
}

// floorRatio notes, next to a ratio target's figure, what the bare Go
// relay reached in the same rounds and lockproxy's qps relative to it.
func floorRatio(c Cell) string {
	if c.GoRelayRatio == 0 {
		return ""
	}
	return fmt.Sprintf(" (bare Go relay: %.2f; lockproxy / relay %.2f)", c.GoRelayRatio, c.ProxyVsGoRelay)
}

// floorAdded notes, next to a latency target's figure, what the bare Go
// relay added in the same rounds and lockproxy's µs on top of it.
func floorAdded(c Cell) string {
	if c.GoRelay.AvgMs == 0 {
		return ""
	}
	return fmt.Sprintf(" (bare Go relay: %.1f µs; lockproxy − relay %+.1f µs)", c.GoRelayAddedUs, c.ProxyOverGoRelayUs)
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

// replicaTargetsOf is the replica route's targets for c: at 8 threads its
// ratio against the primary route's, at 1 thread the µs it adds; each
// also needs every proxied run to have sent its point selects to the
// replica. None for cells without replica runs.
func replicaTargetsOf(c Cell) []results.Target {
	if !c.HasReplica() {
		return nil
	}
	routed := fmt.Sprintf("; %.1f%% of statements on the replica", c.ProxyReplica.ReplicaShare*100)
	if c.ProxyReplica.Failed > 0 {
		routed += fmt.Sprintf("; %d of %d runs failed", c.ProxyReplica.Failed, c.ProxyReplica.Failed+countOK(c.Runs, ProxyReplica))
	}
	ok := c.ProxyReplica.Failed == 0 && c.ReplicaDirect.Failed == 0 && c.ProxyReplica.ReplicaShare >= MinReplicaShare
	switch c.Threads {
	case 8:
		return []results.Target{{
			Name: "replica-routed ratio / primary-routed ratio, " + c.Label(), Want: fmt.Sprintf(">= %.2f", TargetReplicaVsPrimary),
			Got: fmt.Sprintf("%.2f (replica route %.2f, primary route %.2f)", c.ReplicaVsPrimary, c.ReplicaRatio, c.Ratio) + routed,
			Met: ok && c.ReplicaVsPrimary >= TargetReplicaVsPrimary,
		}}
	case 1:
		return []results.Target{{
			Name: "replica-routed added latency per query, " + c.Label(), Want: fmt.Sprintf("<= %.0f µs", TargetAddedUs1),
			Got: fmt.Sprintf("%.1f µs (primary route %.1f µs)", c.ReplicaAddedUs, c.AddedUs) + routed,
			Met: ok && c.ReplicaAddedUs <= TargetAddedUs1,
		}}
	}
	return nil
}
