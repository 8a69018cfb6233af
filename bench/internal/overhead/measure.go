package overhead

import (
	"context"
	"fmt"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/procstat"
	"github.com/lockproxy/lockproxy/bench/internal/sysbench"
)

// Targets of one run.
const (
	Direct = "direct"
	Proxy  = "proxy"
)

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
	Round        int            `json:"round"`
	Target       string         `json:"target"` // direct | proxy
	Stats        sysbench.Stats `json:"stats"`
	ProxyCPUSec  float64        `json:"proxy_cpu_s"`  // lockproxy user+sys CPU during the run (proxy runs)
	MysqldCPUSec float64        `json:"mysqld_cpu_s"` // primary mysqld user+sys CPU during the run
	HostBusy     float64        `json:"host_busy"`    // share of all host CPUs busy during the run
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
}

func newMeasurer(ctx context.Context, e *env.Env, cfg env.ProxyConfig) (*measurer, error) {
	pid, err := e.Bed.PrimaryPID()
	if err != nil {
		return nil, err
	}
	px, err := e.StartProxy(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &measurer{e: e, cfg: cfg, px: px, mysqldPID: pid}, nil
}

// stop stops the current lockproxy instance.
func (m *measurer) stop() { _ = m.px.Stop(context.Background()) }

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
	for _, t := range []string{Direct, Proxy} {
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
			order := []string{Direct, Proxy}
			if (round+i)%2 == 0 {
				order = []string{Proxy, Direct}
			}
			for _, t := range order {
				ms, err := m.run(ctx, c, t, pl.seconds, round)
				if err != nil {
					if ms, err = m.failed(ctx, c, t, round, err, logf); err != nil {
						return nil, err
					}
					cells[i].Runs = append(cells[i].Runs, ms)
					continue
				}
				logf("overhead: round %d/%d %-28s %-6s %9.0f qps  avg %7.1f µs", round, pl.rounds, c.Label(), t, ms.Stats.QPS, ms.Stats.AvgMs*1000)
				cells[i].Runs = append(cells[i].Runs, ms)
			}
		}
	}
	for i := range cells {
		cells[i].summarize()
	}
	return cells, nil
}

// failed records a failed run and, if lockproxy died, starts a new one so
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
	logf("overhead: round %d %s %s FAILED: %s", round, c.Label(), target, ms.Error)
	return ms, nil
}

// run runs one sysbench workload against target.
func (m *measurer) run(ctx context.Context, c Config, target string, seconds, round int) (Measure, error) {
	addr := m.e.Bed.Primary
	if target == Proxy {
		addr = m.px.Addr
	}
	w, err := workload(m.e, addr, c, seconds)
	if err != nil {
		return Measure{}, err
	}
	proxy0, _ := procstat.CPUTime(m.px.PID)
	mysqld0, _ := procstat.CPUTime(m.mysqldPID)
	host0, _ := procstat.ReadHostCPU()
	st, err := sysbench.Run(ctx, w)
	if err != nil {
		return Measure{}, fmt.Errorf("overhead: %s via %s: %w", c.Label(), target, err)
	}
	proxy1, _ := procstat.CPUTime(m.px.PID)
	mysqld1, _ := procstat.CPUTime(m.mysqldPID)
	host1, _ := procstat.ReadHostCPU()
	return Measure{
		Round: round, Target: target, Stats: st,
		ProxyCPUSec:  (proxy1 - proxy0).Seconds(),
		MysqldCPUSec: (mysqld1 - mysqld0).Seconds(),
		HostBusy:     procstat.BusyShare(host0, host1),
	}, nil
}
