package contend

import (
	"bufio"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/procstat"
)

// BigStock is the stock each key starts with in timed runs: more than any
// run can sell, so stock never runs out and every operation writes.
const BigStock = int64(1_000_000_000_000)

// Timing is what a timed arm needs besides its Op. It is a read-only
// value; the arms it makes run one at a time.
type Timing struct {
	Env      *env.Env
	Admin    *sql.DB // direct pool on the scenario's database
	Database string
	Clients  int
	Keys     int // skus 1..Keys are reset to BigStock before each run
	Duration time.Duration
	// Conserved: the Op only moves stock between keys (Transfer), so the
	// sample's Lost is how far the total drifted from where it started,
	// not done operations the stock does not show.
	Conserved bool
}

// TimedArm is an arm that resets the keys, opens warmed handles on the
// instances ps (none: directly on the primary), runs the Op mk builds on
// them with t.Clients clients for t.Duration, and counts lost updates (done
// operations the stock does not show) and the CPU lockproxy and the
// primary's mysqld spent.
func (t Timing) TimedArm(name, baseline string, ps []*env.Proxy, mk func(Pools) Op) Arm {
	addrs := []string{t.Env.Bed.Primary}
	if len(ps) > 0 {
		addrs = addrs[:0]
		for _, p := range ps {
			addrs = append(addrs, p.Addr)
		}
	}
	return t.timedArm(Arm{Name: name, Baseline: baseline, Instances: len(ps)}, addrs, ps, nil, mk)
}

// RelayArm is a TimedArm whose clients all connect through relay r (a TCP
// relay in front of the primary that parses nothing) instead of lockproxy
// or the primary itself; its CPU column is the relay's. The arm's via is
// the relay's kind.
func (t Timing) RelayArm(name, baseline string, r *env.Relay, mk func(Pools) Op) Arm {
	return t.timedArm(Arm{Name: name, Baseline: baseline, Via: r.Kind}, []string{r.Addr}, nil, r, mk)
}

// timedArm fills a.Run: clients on addrs, lock figures from the instances
// ps, CPU of ps or of relay.
func (t Timing) timedArm(a Arm, addrs []string, ps []*env.Proxy, relay *env.Relay, mk func(Pools) Op) Arm {
	a.Run = func(ctx context.Context, _ int) (Sample, error) {
		if err := Reset(ctx, t.Admin, t.Keys, BigStock); err != nil {
			return Sample{}, err
		}
		pools, closeAll, err := Handles(ctx, t.Env, addrs, t.Database, t.Clients)
		if err != nil {
			return Sample{}, err
		}
		defer closeAll()
		var m0 LockMetrics
		if len(ps) > 0 {
			if m0, err = ScrapeLocks(ctx, ps); err != nil {
				return Sample{}, err
			}
		}
		cpu := startCPU(t.Env, ps, relay)
		run := Timed(ctx, t.Clients, t.Duration, mk(pools))
		s := Sample{Run: run}
		cpu.stop(&s)
		if len(ps) > 0 {
			m1, err := ScrapeLocks(ctx, ps)
			if err != nil {
				return Sample{}, err
			}
			s.LockWaitMs, s.LockHoldMs, s.LockBusy = LockFigures(m1.Sub(m0), run.Seconds)
		}
		st, err := ReadState(ctx, t.Admin)
		if err != nil {
			return Sample{}, err
		}
		s.Lost = Lost(BigStock*int64(t.Keys), st.Stock, int64(run.Done))
		if t.Conserved {
			s.Lost = max(st.Stock-BigStock*int64(t.Keys), BigStock*int64(t.Keys)-st.Stock)
		}
		return s, nil
	}
	return a
}

// cpuMeter reads CPU times at the start and end of a run.
type cpuMeter struct {
	pids       []int      // lockproxy instances
	relay      *env.Relay // or the relay the arm runs through
	mysqld     int
	redis      int
	proxy0, m0 time.Duration
	r0         time.Duration
	host0      procstat.HostCPU
}

func startCPU(e *env.Env, ps []*env.Proxy, relay *env.Relay) *cpuMeter {
	c := &cpuMeter{relay: relay}
	for _, p := range ps {
		c.pids = append(c.pids, p.PID)
	}
	c.mysqld, _ = e.Bed.PrimaryPID()
	c.redis = RedisPID(e.Bed)
	c.proxy0, c.m0, c.r0 = c.proxyCPU(), cpuOf(c.mysqld), cpuOf(c.redis)
	c.host0, _ = procstat.ReadHostCPU()
	return c
}

// proxyCPU is the CPU of the lockproxy instances, or of the relay.
func (c *cpuMeter) proxyCPU() time.Duration {
	var sum time.Duration
	if c.relay != nil {
		sum, _ = c.relay.CPUTime()
	}
	for _, p := range c.pids {
		sum += cpuOf(p)
	}
	return sum
}

func cpuOf(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	d, _ := procstat.CPUTime(pid)
	return d
}

// stop fills s's CPU figures per done operation.
func (c *cpuMeter) stop(s *Sample) {
	host1, _ := procstat.ReadHostCPU()
	s.HostBusy = procstat.BusyShare(c.host0, host1)
	n := float64(max(s.Run.Done, 1))
	s.ProxyCPUUs = float64(c.proxyCPU()-c.proxy0) / float64(time.Microsecond) / n
	s.MysqldCPUUs = float64(cpuOf(c.mysqld)-c.m0) / float64(time.Microsecond) / n
	s.RedisCPUUs = float64(cpuOf(c.redis)-c.r0) / float64(time.Microsecond) / n
}

// PairedRatio is the median over rounds of f(a)/f(b) for the rounds both
// have (0 if none).
func PairedRatio(a, b Result, f func(Run) float64) float64 {
	return pairedRatio(a.Samples, b.Samples, f)
}

// RedisPID reads the bed's Redis server process id from the pid file that
// DIR/env names (LOCKPROXY_REDIS_PID_FILE); 0 if unknown.
func RedisPID(b *env.Bed) int {
	f, err := os.Open(filepath.Join(b.Dir, "env"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "LOCKPROXY_REDIS_PID_FILE="); ok {
			raw, err := os.ReadFile(strings.Trim(v, `"'`))
			if err != nil {
				return 0
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
			return pid
		}
	}
	return 0
}
