package overhead

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/procstat"
	"github.com/lockproxy/lockproxy/bench/internal/soak/sampling"
	"github.com/lockproxy/lockproxy/bench/internal/sysbench"
)

// Targets of one run: sysbench straight at the primary, through lockproxy,
// and through the two relays that parse nothing (the floor any proxy
// starts from on this host). Point selects are also run straight at the
// replica and through a second lockproxy that has the replica configured,
// so that they are routed there: the replica route's cost.
const (
	Direct        = "direct"
	Proxy         = "proxy"
	GoRelay       = "go_relay"
	Socat         = "socat"
	ReplicaDirect = "replica_direct"
	ProxyReplica  = "proxy_replica"
	// ProxyMux is a third lockproxy, with backends.pool.multiplex on: a
	// session borrows a primary connection per statement (or
	// transaction) instead of keeping one.
	ProxyMux = "proxy_mux"
)

// targetOrder is the order of a round's runs (reversed every other one);
// configurations with a replica arm append replicaTargets.
var (
	targetOrder    = []string{Direct, Proxy, ProxyMux, GoRelay, Socat}
	replicaTargets = []string{ReplicaDirect, ProxyReplica}
)

// replicaArm reports whether c is measured on the replica route too:
// point selects (nothing else is read-only), at the thread counts the
// targets speak of.
func replicaArm(c Config) bool {
	return c.Test == "oltp_point_select" && (c.Threads == 1 || c.Threads == 8)
}

// targetsOf is every target configuration c is run against.
func targetsOf(c Config) []string {
	if !replicaArm(c) {
		return targetOrder
	}
	return append(append([]string(nil), targetOrder...), replicaTargets...)
}

// relayKind maps a relay target to the env relay it runs through.
var relayKind = map[string]string{GoRelay: env.GoRelay, Socat: env.Socat}

// Config is one sysbench configuration measured both ways.
type Config struct {
	Test    string `json:"test"`
	Threads int    `json:"threads"`
	PSMode  string `json:"ps_mode"`
}

// Label is a short name for charts and tables.
func (c Config) Label() string {
	short := map[string]string{"oltp_point_select": "point_select", "oltp_read_write": "read_write"}[c.Test]
	if short == "" {
		short = c.Test
	}
	return fmt.Sprintf("%s/%dt/ps=%s", short, c.Threads, c.PSMode)
}

// Measure is one sysbench run with the CPU the processes used meanwhile.
type Measure struct {
	Round       int            `json:"round"`
	Target      string         `json:"target"` // direct | proxy | go_relay | socat
	Stats       sysbench.Stats `json:"stats"`
	ProxyCPUSec float64        `json:"proxy_cpu_s"` // lockproxy user+sys CPU during the run (proxy runs)
	// RelayCPUSec is the relay's user+sys CPU during a relay run (socat's
	// per-connection children included).
	RelayCPUSec  float64 `json:"relay_cpu_s,omitempty"`
	MysqldCPUSec float64 `json:"mysqld_cpu_s"` // user+sys CPU of the mysqld served (the replica's on replica runs)
	HostBusy     float64 `json:"host_busy"`    // share of all host CPUs busy during the run
	// RoutedReplica and RoutedPrimary are the statements lockproxy sent to
	// each backend during a proxy_replica run (lockproxy_queries_total by
	// route), which shows the point selects were served by the replica.
	RoutedReplica float64 `json:"routed_replica,omitempty"`
	RoutedPrimary float64 `json:"routed_primary,omitempty"`
	// Failed runs (sysbench exited with an error) carry what went wrong and
	// take no part in the medians.
	Failed bool   `json:"failed,omitempty"`
	Error  string `json:"error,omitempty"`
}

// measurer runs one configuration against one target and takes CPU readings.
type measurer struct {
	e         *env.Env
	cfg       env.ProxyConfig
	px        *env.Proxy // the current instance; replaced if it dies
	mysqldPID int
	// relays by target; a relay that could not start is absent and its
	// runs are recorded as failed with relayErr's message (also the
	// replica targets' when the bed has no replica).
	relays   map[string]*env.Relay
	relayErr map[string]string
	// pxr is the instance with the replica configured, replicaPID the
	// replica's mysqld; both unset when relayErr names the replica targets.
	pxr        *env.Proxy
	replicaPID int
	// pxm is the instance that multiplexes; nil when relayErr names
	// ProxyMux.
	pxm *env.Proxy
}

func newMeasurer(ctx context.Context, e *env.Env, cfg env.ProxyConfig, logf func(string, ...any)) (*measurer, error) {
	pid, err := e.Bed.PrimaryPID()
	if err != nil {
		return nil, err
	}
	px, err := e.StartProxy(ctx, cfg)
	if err != nil {
		return nil, err
	}
	m := &measurer{e: e, cfg: cfg, px: px, mysqldPID: pid, relays: map[string]*env.Relay{}, relayErr: map[string]string{}}
	for _, t := range []string{GoRelay, Socat} {
		if err := m.startRelay(ctx, t); err != nil {
			if ctx.Err() != nil {
				m.stop()
				return nil, err
			}
			logf("overhead: %s: %s; its runs are recorded as failed", relayKind[t], m.relayErr[t])
		}
	}
	if err := m.startMuxArm(ctx); err != nil {
		if ctx.Err() != nil {
			m.stop()
			return nil, err
		}
		logf("overhead: multiplexing: %s; its runs are recorded as failed", m.relayErr[ProxyMux])
	}
	if err := m.startReplicaArm(ctx); err != nil {
		if ctx.Err() != nil {
			m.stop()
			return nil, err
		}
		logf("overhead: replica route: %s; its runs are recorded as failed", m.relayErr[ProxyReplica])
	}
	return m, nil
}

// startReplicaArm starts the lockproxy instance that routes reads to the
// bed's replica, or records why the replica targets cannot run.
func (m *measurer) startReplicaArm(ctx context.Context) error {
	fail := func(err error) error {
		for _, t := range replicaTargets {
			m.relayErr[t] = firstLine(err.Error())
		}
		return err
	}
	if m.e.Bed.Replica == "" {
		return fail(fmt.Errorf("overhead: the bed has no replica"))
	}
	pid, err := m.e.Bed.ReplicaPID()
	if err != nil {
		return fail(err)
	}
	cfg := m.cfg
	cfg.WithReplica = true
	px, err := m.e.StartProxy(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	m.pxr, m.replicaPID = px, pid
	for _, t := range replicaTargets {
		delete(m.relayErr, t)
	}
	return nil
}

// startMuxArm starts the lockproxy instance that multiplexes, or records
// why its runs cannot be made.
func (m *measurer) startMuxArm(ctx context.Context) error {
	cfg := m.cfg
	cfg.Multiplex = true
	px, err := m.e.StartProxy(ctx, cfg)
	if err != nil {
		m.relayErr[ProxyMux] = firstLine(err.Error())
		return err
	}
	m.pxm = px
	delete(m.relayErr, ProxyMux)
	return nil
}

// startRelay starts the relay of target in front of the primary, or
// records why it could not.
func (m *measurer) startRelay(ctx context.Context, target string) error {
	r, err := m.e.StartRelay(ctx, relayKind[target], m.e.Bed.Primary)
	if err != nil {
		delete(m.relays, target)
		m.relayErr[target] = firstLine(err.Error())
		return err
	}
	m.relays[target] = r
	delete(m.relayErr, target)
	return nil
}

// stop stops the current lockproxy instances and the relays.
func (m *measurer) stop() {
	_ = m.px.Stop(context.Background())
	if m.pxr != nil {
		_ = m.pxr.Stop(context.Background())
	}
	if m.pxm != nil {
		_ = m.pxm.Stop(context.Background())
	}
	for _, r := range m.relays {
		_ = r.Stop(context.Background())
	}
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// firstFatal picks sysbench's first FATAL line out of its output.
func firstFatal(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "FATAL:") {
			return strings.TrimSpace(line)
		}
	}
	line, _, _ := strings.Cut(out, "\n")
	return line
}

// panicLine picks the panic message out of a lockproxy log.
func panicLine(log string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
			return strings.TrimSpace(line)
		}
	}
	return "no panic in its log"
}

// interleave runs every configuration against both targets, round after
// round. Within a round the order of the pair alternates, so a trend in the
// background load (a build starting next door) does not favour one side.
func (m *measurer) interleave(ctx context.Context, pl plan, logf func(string, ...any)) ([]Cell, error) {
	cfgs := pl.configs()
	// One short warm-up each way: connection pools, buffer pool, page cache.
	for _, t := range targetsOf(cfgs[0]) {
		if _, ok := m.relayErr[t]; ok {
			continue
		}
		if _, err := m.run(ctx, cfgs[0], t, 1, 0); err != nil {
			return nil, err
		}
	}
	cells := make([]Cell, len(cfgs))
	for i, c := range cfgs {
		cells[i].Config = c
	}
	for round := 1; round <= pl.rounds; round++ {
		for i, c := range cfgs {
			for _, t := range roundOrder(round, i, targetsOf(c)) {
				if msg, ok := m.relayErr[t]; ok {
					cells[i].Runs = append(cells[i].Runs, Measure{Round: round, Target: t, Failed: true, Error: msg})
					continue
				}
				ms, err := m.run(ctx, c, t, pl.seconds, round)
				if err != nil {
					if ms, err = m.failed(ctx, c, t, round, err, logf); err != nil {
						return nil, err
					}
					cells[i].Runs = append(cells[i].Runs, ms)
					continue
				}
				logf("overhead: round %d/%d %-28s %-14s %9.0f qps  avg %7.1f µs", round, pl.rounds, c.Label(), t, ms.Stats.QPS, ms.Stats.AvgMs*1000)
				cells[i].Runs = append(cells[i].Runs, ms)
			}
		}
	}
	for i := range cells {
		cells[i].summarize()
	}
	return cells, nil
}

// roundOrder is the order of the targets for configuration i in a round:
// reversed every other time, so a trend in the background load (a build
// starting next door) does not favour one side.
func roundOrder(round, i int, targets []string) []string {
	order := append([]string(nil), targets...)
	if (round+i)%2 == 0 {
		for l, r := 0, len(order)-1; l < r; l, r = l+1, r-1 {
			order[l], order[r] = order[r], order[l]
		}
	}
	return order
}

// failed records a failed run and, if lockproxy or a relay died, starts a new one so
// the rest of the matrix still runs. It returns an error only when the run
// cannot go on (cancelled, or lockproxy cannot be restarted).
func (m *measurer) failed(ctx context.Context, c Config, target string, round int, runErr error, logf func(string, ...any)) (Measure, error) {
	if ctx.Err() != nil {
		return Measure{}, runErr
	}
	ms := Measure{Round: round, Target: target, Failed: true, Error: firstFatal(runErr.Error())}
	if target == Proxy && m.px.Exited() {
		ms.Error += "; lockproxy exited: " + panicLine(m.px.Log())
		logf("overhead: lockproxy (pid %d) died during %s; its log is in %s; starting a new one", m.px.PID, c.Label(), m.px.Dir)
		px, err := m.e.StartProxy(ctx, m.cfg)
		if err != nil {
			return Measure{}, err
		}
		m.px = px
	}
	if target == ProxyMux && m.pxm != nil && m.pxm.Exited() {
		ms.Error += "; lockproxy exited: " + panicLine(m.pxm.Log())
		logf("overhead: multiplexing lockproxy (pid %d) died during %s; its log is in %s; starting a new one", m.pxm.PID, c.Label(), m.pxm.Dir)
		if err := m.startMuxArm(ctx); err != nil {
			logf("overhead: multiplexing: %v; its remaining runs are recorded as failed", err)
		}
	}
	if target == ProxyReplica && m.pxr != nil && m.pxr.Exited() {
		ms.Error += "; lockproxy exited: " + panicLine(m.pxr.Log())
		logf("overhead: lockproxy with the replica (pid %d) died during %s; its log is in %s; starting a new one", m.pxr.PID, c.Label(), m.pxr.Dir)
		if err := m.startReplicaArm(ctx); err != nil {
			logf("overhead: replica route: %v; its remaining runs are recorded as failed", err)
		}
	}
	if r, ok := m.relays[target]; ok && r.Exited() {
		ms.Error += "; " + r.Kind + " exited"
		logf("overhead: %s (pid %d) died during %s; its log is in %s; starting a new one", r.Kind, r.PID, c.Label(), r.Dir)
		if err := m.startRelay(ctx, target); err != nil {
			logf("overhead: %s: %v; its remaining runs are recorded as failed", r.Kind, err)
		}
	}
	logf("overhead: round %d %s %s FAILED: %s", round, c.Label(), target, ms.Error)
	return ms, nil
}

// run runs one sysbench workload against target.
func (m *measurer) run(ctx context.Context, c Config, target string, seconds, round int) (Measure, error) {
	addr, px, mysqld := m.e.Bed.Primary, m.px, m.mysqldPID
	relay := m.relays[target]
	switch {
	case target == Proxy:
		addr = m.px.Addr
	case target == ProxyMux && m.pxm != nil:
		addr, px = m.pxm.Addr, m.pxm
	case target == ReplicaDirect && m.pxr != nil:
		addr, mysqld = m.e.Bed.Replica, m.replicaPID
	case target == ProxyReplica && m.pxr != nil:
		addr, px, mysqld = m.pxr.Addr, m.pxr, m.replicaPID
	case relay != nil:
		addr = relay.Addr
	case target != Direct:
		return Measure{}, fmt.Errorf("overhead: %s is not running", target)
	}
	relayCPU := func() time.Duration {
		if relay == nil {
			return 0
		}
		d, _ := relay.CPUTime()
		return d
	}
	w, err := workload(m.e, addr, c, seconds)
	if err != nil {
		return Measure{}, err
	}
	var routes0 routes
	if target == ProxyReplica {
		if routes0, err = scrapeRoutes(ctx, px); err != nil {
			return Measure{}, err
		}
	}
	proxy0, _ := procstat.CPUTime(px.PID)
	mysqld0, _ := procstat.CPUTime(mysqld)
	host0, _ := procstat.ReadHostCPU()
	relay0 := relayCPU()
	st, err := sysbench.Run(ctx, w)
	if err != nil {
		return Measure{}, fmt.Errorf("overhead: %s via %s: %w", c.Label(), target, err)
	}
	proxy1, _ := procstat.CPUTime(px.PID)
	mysqld1, _ := procstat.CPUTime(mysqld)
	host1, _ := procstat.ReadHostCPU()
	relay1 := relayCPU()
	ms := Measure{
		Round: round, Target: target, Stats: st,
		ProxyCPUSec:  (proxy1 - proxy0).Seconds(),
		RelayCPUSec:  (relay1 - relay0).Seconds(),
		MysqldCPUSec: (mysqld1 - mysqld0).Seconds(),
		HostBusy:     procstat.BusyShare(host0, host1),
	}
	if target == ProxyReplica {
		routes1, err := scrapeRoutes(ctx, px)
		if err != nil {
			return Measure{}, err
		}
		ms.RoutedReplica, ms.RoutedPrimary = routes1.replica-routes0.replica, routes1.primary-routes0.primary
	}
	return ms, nil
}

// routes are lockproxy_queries_total summed by route.
type routes struct{ primary, replica float64 }

// scrapeRoutes reads px's statement counters by route from /metrics.
func scrapeRoutes(ctx context.Context, px *env.Proxy) (routes, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+px.AdminAddr+"/metrics", nil)
	if err != nil {
		return routes{}, err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return routes{}, fmt.Errorf("overhead: scrape %s: %w", px.AdminAddr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return routes{}, fmt.Errorf("overhead: scrape %s: %w", px.AdminAddr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return routes{}, fmt.Errorf("overhead: scrape %s: %s", px.AdminAddr, resp.Status)
	}
	return parseRoutes(string(body))
}

// parseRoutes sums lockproxy_queries_total by its route label in Prometheus
// text exposition.
func parseRoutes(text string) (routes, error) {
	m, err := sampling.ParseExposition(strings.NewReader(text))
	if err != nil {
		return routes{}, fmt.Errorf("overhead: %w", err)
	}
	const name = "lockproxy_queries_total"
	return routes{primary: m.Sum(name, `route="primary"`), replica: m.Sum(name, `route="replica"`)}, nil
}
