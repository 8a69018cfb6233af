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
	var t resultTable
	switch what {
	case "locks":
		t = s.srv.showLocks(s.user, s.priv.hasProcess(s.user, s.be, s.log))
	case "status":
		t = s.srv.showStatus()
	case "rules":
		t = s.srv.showRules()
	case "observed":
		// The shapes are every user's statements, without literals: as
		// SHOW PROCESSLIST's other sessions, only for the PROCESS privilege.
		if !s.priv.hasProcess(s.user, s.be, s.log) {
			return true, s.writeErrAt(1, errorf(errNeedProcess, "Access denied; you need (at least one of) the PROCESS privilege(s) for SHOW LOCKPROXY OBSERVED"))
		}
		t = s.srv.showObserved()
	default:
		return true, s.writeErrAt(1, errorf(errSyntax, "SHOW LOCKPROXY takes LOCKS, STATUS, RULES or OBSERVED"))
	}
	return true, s.writeResult(t.columns, t.rows)
}

// resultTable is a result set lockproxy answers itself: the column names and
// the rows, a nil cell being NULL.
type resultTable struct {
	columns []string
	rows    [][]*string
}

func str(s string) *string { return &s }

// showLocks answers SHOW LOCKPROXY LOCKS. As SHOW PROCESSLIST does, it
// shows other users' locks only to a user with the PROCESS privilege;
// others see their own user's locks alone (a lock key names a row, and
// its statement what another user is doing).
func (s *Server) showLocks(user string, seeAll bool) resultTable {
	var rows [][]*string
	for _, l := range s.locks(func(owner *session) bool { return seeAll || owner != nil && owner.user == user }) {
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
	return resultTable{[]string{"key", "rule", "state", "session", "user", "client", "age_seconds", "statement", "owner", "holder", "position"}, rows}
}

// showStatus answers SHOW LOCKPROXY STATUS.
func (s *Server) showStatus() resultTable {
	cfg := s.config()
	locks := s.Locks()
	held, waiting := 0, 0 // held: at the lock service for this instance (held, lingering, releasing)
	for _, l := range locks {
		if l.State == "waiting" {
			waiting++
		} else {
			held++
		}
	}
	s.mu.Lock()
	sessions := len(s.sessions)
	s.mu.Unlock()
	backend := cfg.Locks.Backend
	if s.locker == nil {
		backend = "none"
	}
	rows := [][]*string{
		{str("instance"), str(s.instance)},
		{str("uptime_seconds"), str(fmt.Sprintf("%.0f", time.Since(s.started).Seconds()))},
		{str("client_connections"), str(fmt.Sprint(sessions))},
		{str("lock_backend"), str(backend)},
		{str("locks_held"), str(fmt.Sprint(held))},
		{str("lock_waiters"), str(fmt.Sprint(waiting))},
		{str("rules"), str(fmt.Sprint(len(cfg.Rules)))},
		{str("primary"), str(cfg.Backends.Primary)},
	}
	for _, b := range s.Backends() {
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
	return resultTable{[]string{"name", "value"}, rows}
}

// showRules answers SHOW LOCKPROXY RULES.
func (s *Server) showRules() resultTable {
	var rows [][]*string
	for _, r := range s.config().Rules {
		rw := ""
		if r.Rewrite != nil {
			rw = r.Rewrite.Mode + " " + r.Rewrite.Column
		}
		rows = append(rows, []*string{str(r.Name), str(r.Table), str(strings.Join(r.Key, ",")),
			str(strings.Join(r.Lock, ",")), str(r.Route), str(r.EffectiveWaitTimeout(s.config().Locks).String()),
			str(r.OnUnkeyed), str(rw), str(combineSummary(&r))})
	}
	return resultTable{[]string{"name", "table", "key", "lock", "route", "wait_timeout", "on_unkeyed", "rewrite", "combine"}, rows}
}

// showObserved answers SHOW LOCKPROXY OBSERVED: the statement shapes the
// rules in observe mode would have refused or made wait most
// (ObservedShapes).
func (s *Server) showObserved() resultTable {
	var rows [][]*string
	for _, o := range s.ObservedShapes() {
		rows = append(rows, []*string{str(o.Rule), str(o.Outcome), str(o.Reason), str(fmt.Sprint(o.Count)), str(fmt.Sprint(o.Over)), str(o.Shape)})
	}
	return resultTable{[]string{"rule", "outcome", "reason", "count", "over_count", "shape"}, rows}
}
