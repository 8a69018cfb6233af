package proxy

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/router"
)

// LockInfo is one lock this instance holds or waits for, with the session
// behind it: what /debug/locks and SHOW LOCKPROXY LOCKS show.
type LockInfo struct {
	Key       string    `json:"key"`
	Rule      string    `json:"rule"`
	State     string    `json:"state"` // held | waiting | lingering | releasing (see Locks)
	Session   uint64    `json:"session"`
	Owner     string    `json:"owner"`
	User      string    `json:"user,omitempty"`
	Client    string    `json:"client,omitempty"`
	Since     time.Time `json:"since"`
	AgeSec    float64   `json:"age_seconds"`
	Statement string    `json:"statement,omitempty"`
	// Holder and Position, for a waiting lock, are what the lock backend
	// last saw: the holder's owner (instance/session/transaction, on any
	// instance) and the place in the key's queue (1: next).
	Holder   string `json:"holder,omitempty"`
	Position int    `json:"position,omitempty"`
}

// Locks lists what this instance's sessions hold and wait for, oldest first.
// A row lock no session holds that the instance keeps after its last
// holder's statement or transaction ended (locks.redis.linger) is listed
// as lingering, under that last holder's session, without a statement;
// so is one whose release waits to ride with the instance's next lock
// request, or is on its way, as releasing (locks.redis.release_window):
// Redis has not freed it yet.
// It is what /debug/locks shows (behind the admin token): statements are
// shown with their literals unless a rule has sensitive columns.
func (s *Server) Locks() []LockInfo {
	return s.locks(func(*session) bool { return true })
}

// locks is Locks with only the locks whose owner session (nil: not a
// session of this instance's now) shown says so.
func (s *Server) locks(shown func(owner *session) bool) []LockInfo {
	if s.locker == nil {
		return nil
	}
	entries := s.locker.Snapshot()
	// A session's current statement may touch a sensitive table while it
	// holds or waits for another rule's lock: once any rule has sensitive
	// columns, every statement is shown without its literals.
	hide := false
	for _, r := range s.config().Rules {
		hide = hide || len(r.Sensitive) > 0
	}
	now := time.Now()
	out := make([]LockInfo, 0, len(entries))
	s.mu.Lock()
	for _, e := range entries {
		sess := s.sessions[uint32(e.Session)]
		if !shown(sess) {
			continue
		}
		li := LockInfo{Key: e.Key, Rule: e.Rule, State: e.State, Session: e.Session, Owner: e.Owner,
			Since: e.Since, AgeSec: now.Sub(e.Since).Seconds(), Holder: e.Holder, Position: e.Position}
		if e.State == "held" && s.lockSvc.lingersAs(e.Key, e.Owner) {
			li.State = "lingering"
		}
		if sess != nil {
			li.User, li.Client = sess.user, sess.conn.RemoteAddr().String()
			if q := sess.pub.current.Load(); q != nil && li.State != "lingering" && li.State != "releasing" {
				li.Statement = shownStatement(*q, hide)
			}
		}
		out = append(out, li)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}

// shownStatement is a statement as /debug/locks and SHOW LOCKPROXY LOCKS
// show it: cut to 512 bytes, and with every literal replaced by "?" when
// hide (some rule has sensitive columns).
// Long statements are cut before redaction, so redaction stays cheap.
func shownStatement(q string, hide bool) string {
	if hide {
		q = parser.Redact(truncate(q, 4096))
	}
	return truncate(q, 512)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// DebugLocks serves /debug/locks as JSON.
func (s *Server) DebugLocks() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			Instance string     `json:"instance"`
			Locks    []LockInfo `json:"locks"`
		}{s.instance, nonNil(s.Locks())})
	})
}

func nonNil(l []LockInfo) []LockInfo {
	if l == nil {
		return []LockInfo{}
	}
	return l
}

// Backends reports the primary and replicas as the router sees them (nil
// without replicas).
func (s *Server) Backends() []router.BackendStatus {
	rt := s.loaded().router
	if rt == nil {
		return nil
	}
	return rt.Status()
}
