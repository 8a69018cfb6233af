package proxy

import (
	"fmt"
	"strings"
	"time"

	"github.com/lockproxy/lockproxy/router"
)

// showLockproxy answers SHOW LOCKPROXY LOCKS | STATUS | RULES | OBSERVED itself, as
// ordinary result sets, so a DBA in any MySQL client sees what the admin
// endpoints show. It reports whether q was such a statement.
func (s *session) showLockproxy(q []byte) (bool, error) {
	words := strings.Fields(strings.TrimRight(strings.TrimSpace(string(skipComments(q))), "; \t\r\n"))
	if len(words) < 2 || !strings.EqualFold(words[0], "show") || !strings.EqualFold(words[1], "lockproxy") {
		return false, nil
	}
	what := ""
	if len(words) == 3 {
		what = strings.ToLower(words[2])
	}
	switch what {
	case "locks":
		return true, s.showLocks()
	case "status":
		return true, s.showStatus()
	case "rules":
		return true, s.showRules()
	case "observed":
		return true, s.showObserved()
	}
	return true, s.writeErrAt(1, errorf(errSyntax, "SHOW LOCKPROXY takes LOCKS, STATUS, RULES or OBSERVED"))
}

func str(s string) *string { return &s }

// showLocks answers SHOW LOCKPROXY LOCKS. As SHOW PROCESSLIST does, it
// shows other users' locks only to a user with the PROCESS privilege;
// others see their own user's locks alone (a lock key names a row, and
// its statement what another user is doing).
func (s *session) showLocks() error {
	seeAll := s.hasProcessPrivilege()
	user := s.user
	var rows [][]*string
	for _, l := range s.srv.locks(func(owner *session) bool { return seeAll || owner != nil && owner.user == user }) {
		var holder, position *string // NULL for held locks and when unknown
		if l.Holder != "" {
			holder = str(l.Holder)
		}
		if l.Position > 0 {
			position = str(fmt.Sprint(l.Position))
		}
		rows = append(rows, []*string{str(l.Key), str(l.Rule), str(l.State), str(fmt.Sprint(l.Session)),
			str(l.User), str(l.Client), str(fmt.Sprintf("%.3f", l.AgeSec)), str(l.Statement), str(l.Owner), holder, position})
	}
	return s.writeResult([]string{"key", "rule", "state", "session", "user", "client", "age_seconds", "statement", "owner", "holder", "position"}, rows)
}

func (s *session) showStatus() error {
	cfg := s.srv.config()
	locks := s.srv.Locks()
	held, waiting := 0, 0
	for _, l := range locks {
		if l.State == "held" {
			held++
		} else {
			waiting++
		}
	}
	s.srv.mu.Lock()
	sessions := len(s.srv.sessions)
	s.srv.mu.Unlock()
	backend := cfg.Locks.Backend
	if s.srv.locker == nil {
		backend = "none"
	}
	rows := [][]*string{
		{str("instance"), str(s.srv.instance)},
		{str("uptime_seconds"), str(fmt.Sprintf("%.0f", time.Since(s.srv.started).Seconds()))},
		{str("client_connections"), str(fmt.Sprint(sessions))},
		{str("lock_backend"), str(backend)},
		{str("locks_held"), str(fmt.Sprint(held))},
		{str("lock_waiters"), str(fmt.Sprint(waiting))},
		{str("rules"), str(fmt.Sprint(len(cfg.Rules)))},
		{str("primary"), str(cfg.Backends.Primary)},
	}
	for _, b := range s.srv.Backends() {
		if b.Role != router.RoleReplica {
			continue
		}
		state := "healthy"
		if !b.Healthy {
			state = "unhealthy: " + b.LastError
		}
		lag := "unknown"
		if b.LagKnown {
			lag = b.Lag.String()
		}
		rows = append(rows, []*string{str("replica " + b.Addr), str(state + ", lag " + lag)})
	}
	return s.writeResult([]string{"name", "value"}, rows)
}

func (s *session) showRules() error {
	var rows [][]*string
	for _, r := range s.srv.config().Rules {
		rw := ""
		if r.Rewrite != nil {
			rw = r.Rewrite.Mode + " " + r.Rewrite.Column
		}
		rows = append(rows, []*string{str(r.Name), str(r.Table), str(strings.Join(r.Key, ",")),
			str(strings.Join(r.Lock, ",")), str(r.Route), str(r.EffectiveWaitTimeout(s.srv.config().Locks).String()),
			str(r.OnUnkeyed), str(rw), str(combineSummary(&r))})
	}
	return s.writeResult([]string{"name", "table", "key", "lock", "route", "wait_timeout", "on_unkeyed", "rewrite", "combine"}, rows)
}

// showObserved answers SHOW LOCKPROXY OBSERVED: the statement shapes the
// rules in observe mode would have refused or made wait most
// (ObservedShapes). They are every user's statements, without literals:
// as SHOW PROCESSLIST's other sessions, only for the PROCESS privilege.
func (s *session) showObserved() error {
	if !s.hasProcessPrivilege() {
		return s.writeErrAt(1, errorf(errNeedProcess, "Access denied; you need (at least one of) the PROCESS privilege(s) for SHOW LOCKPROXY OBSERVED"))
	}
	var rows [][]*string
	for _, o := range s.srv.ObservedShapes() {
		rows = append(rows, []*string{str(o.Rule), str(o.Outcome), str(o.Reason), str(fmt.Sprint(o.Count)), str(fmt.Sprint(o.Over)), str(o.Shape)})
	}
	return s.writeResult([]string{"rule", "outcome", "reason", "count", "over_count", "shape"}, rows)
}
