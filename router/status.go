package router

import (
	"encoding/json"
	"time"
)

// BackendStatus is one backend as the router sees it, for /debug and
// SHOW LOCKPROXY STATUS.
type BackendStatus struct {
	Addr string `json:"addr"`
	Role Role   `json:"role"`
	// Healthy: the backend may take traffic now (for a replica: replicating
	// within MaxLag and not marked down).
	Healthy bool `json:"healthy"`
	// Up: the last check connected and the server answered.
	Up bool `json:"up"`
	// Checked: at least one check has finished.
	Checked bool `json:"checked"`
	// Lag is Seconds_Behind_Master at the last check, meaningful only when
	// LagKnown (replicas only).
	Lag      time.Duration `json:"-"`
	LagKnown bool          `json:"-"`
	// LastError says why the backend is not healthy; empty when healthy.
	LastError string `json:"last_error,omitempty"`
	// LastCheck is when the last check finished; zero before the first.
	LastCheck time.Time `json:"last_check"`
	// GTIDPos is @@gtid_slave_pos of a replica, @@gtid_binlog_pos of the
	// primary, at the last successful check.
	GTIDPos string `json:"gtid_pos"`
	// Outstanding counts queries between Acquire (or PickAndTrack) and
	// their release.
	Outstanding int64 `json:"outstanding"`
}

// MarshalJSON adds lag_seconds: a number when the lag is known, else null.
func (s BackendStatus) MarshalJSON() ([]byte, error) {
	type plain BackendStatus
	var lag *float64
	if s.LagKnown {
		v := s.Lag.Seconds()
		lag = &v
	}
	return json.Marshal(struct {
		plain
		LagSeconds *float64 `json:"lag_seconds"`
	}{plain(s), lag})
}

// Status returns every backend, the primary first, then the replicas in
// configured order. It is a snapshot; safe for concurrent use.
func (r *Router) Status() []BackendStatus {
	r.mu.RLock()
	all := r.backendsLocked()
	r.mu.RUnlock()
	out := make([]BackendStatus, 0, len(all))
	for _, b := range all {
		st := b.snapshot()
		bs := BackendStatus{
			Addr: b.addr, Role: b.role, Healthy: st.healthy, Up: st.up, Checked: st.checked,
			Lag: st.lag, LagKnown: st.lagKnown, LastCheck: st.lastCheck, GTIDPos: st.gtid,
			Outstanding: b.outstanding.Load(),
		}
		if st.err != nil {
			bs.LastError = st.err.Error()
		}
		out = append(out, bs)
	}
	return out
}
