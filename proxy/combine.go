package proxy

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
	"go.uber.org/zap"
)

// Hot-row combining (rules[].combine, docs/configuration.md): while one
// batch of a row's combinable UPDATEs is in flight on this instance, the
// next ones queue behind it in arrival order; the first of them then
// leads the next batch, which runs on the leader's own backend
// connection as one transaction (combine_batch.go), and every member is
// answered as if its statement had run alone, in that order
// (combine_answer.go).

// errCombineUnknown ends the session of a member whose batch's COMMIT was
// sent on a connection that died before answering: as a client of
// MariaDB whose connection died after COMMIT, it sees its connection
// close (2013) and does not know whether its statement ran.
var errCombineUnknown = errors.New("proxy: the combined batch's commit outcome is unknown")

// combiner holds, for each row with a batch in flight on this instance,
// the statements queued behind it. Safe for concurrent use.
type combiner struct {
	mu sync.Mutex
	// rows maps a row (its lock name) to what waits for it; a row is in
	// the map while a batch of it is in flight.
	rows map[string]*combineRow
	// unfit are the rules a batch found unfit, with the rules in force
	// then (markUnfit).
	unfit map[string]*rules.RuleSet
	hook  combineHook
	// marks are the batches' markers (combine_marker.go).
	marks markers
}

type combineRow struct {
	waiting []*member
	// parked holds the row's lease after a batch that committed when no
	// statement of the row waited: the next one to come leads a batch
	// with it (handed over), unless combineLinger passes first and it is
	// released (park).
	parked *lockmgr.Set
	timer  *time.Timer
}

// combineLinger is how long the row's lease stays with the instance
// after a batch that committed when no statement of the row waited: the
// batch's own clients, just answered, usually send their next statement
// within it, and the next batch then needs no round trip to the lock
// service; the hand-off bounds (count, window) hold as for any hand-over.
const combineLinger = 2 * time.Millisecond

// member is one combinable statement, queued or in a batch. The leader
// of its batch fills res before sending it the turn; nothing else of a
// member is written after it is queued.
type member struct {
	s    *session
	c    *parser.Combinable
	turn chan combineTurn // buffered: the leader never waits on a member
	// owner is the lock owner the member's session begun for its
	// statement (a locking rule): should it lead the next batch, the
	// batch before hands it the row's lease (combineTurn.lease).
	owner lockmgr.Owner
}

// combineTurn is what a queued member is told: lead this batch (lead,
// itself first), with the row's lease when the batch before passed it on
// (lease, owner's), or how its statement ended (res).
type combineTurn struct {
	lead  []*member
	lease *lockmgr.Lease
	res   combineResult
}

// combineOutcome is how a member's statement ended in a batch.
type combineOutcome int

const (
	// combineAlone: the batch failed before its COMMIT was sent, nothing
	// of it ran: the member runs as it would without combining.
	combineAlone combineOutcome = iota + 1
	// combineDone: the batch committed; res says what the member did.
	combineDone
	// combineUnknown: the COMMIT's outcome is unknown (errCombineUnknown).
	combineUnknown
)

// combineResult is how one member's statement ended.
type combineResult struct {
	outcome combineOutcome
	// matched: its floor held (the row matched); changed: it changed
	// the value (a delta of 0 matches without changing); conflict: its
	// own floor held but the rule's min would have been crossed.
	matched, changed, conflict bool
	// index are the SERVER_QUERY_NO_*INDEX_USED flags MariaDB gave the
	// batch's read of the row, which the statement alone would have had.
	index uint16
	// gtid is the batch's GTID, when read-your-writes needs it.
	gtid string
}

// join queues m for row and reports whether m leads at once: nothing of
// row is in flight (it runs as a batch of one), or the row's lease is
// parked (returned: m's batch takes it over).
func (c *combiner) join(row string, m *member) (lead bool, parked *lockmgr.Set) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == nil {
		c.rows = map[string]*combineRow{}
	}
	r, busy := c.rows[row]
	switch {
	case !busy:
		c.rows[row] = &combineRow{}
		return true, nil
	case r.parked != nil:
		parked = r.parked
		r.parked = nil
		r.timer.Stop()
		return true, parked
	}
	r.waiting = append(r.waiting, m)
	return false, nil
}

// takeOrPark is take, except that when nothing waits and held (the row's
// locks after a batch that committed) is not nil, held is parked on the
// row for combineLinger (parked true) and then given to release unless a
// statement of the row came and took it (join).
func (c *combiner) takeOrPark(row string, limit int, held *lockmgr.Set, release func(*lockmgr.Set)) (batch []*member, parked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rows[row]
	if held == nil || r == nil || len(r.waiting) > 0 {
		return c.takeLocked(row, limit), false
	}
	r.parked = held
	r.timer = time.AfterFunc(combineLinger, func() {
		c.mu.Lock()
		if r.parked != held {
			c.mu.Unlock()
			return // taken by a batch
		}
		r.parked = nil
		if c.rows[row] == r && len(r.waiting) == 0 {
			delete(c.rows, row)
		}
		c.mu.Unlock()
		release(held)
	})
	return nil, true
}

// takeLocked ends the batch in flight for row and returns the next one:
// up to limit of the statements waiting, to be led by the first of them
// (its turn is the caller's to send). nil when none wait: the row is
// idle. c.mu is held.
func (c *combiner) takeLocked(row string, limit int) []*member {
	r := c.rows[row]
	if r == nil || len(r.waiting) == 0 {
		delete(c.rows, row)
		return nil
	}
	n := min(maxOr(limit), len(r.waiting))
	batch := slices.Clone(r.waiting[:n])
	r.waiting = slices.Clone(r.waiting[n:])
	return batch
}

func maxOr(n int) int {
	if n <= 0 {
		return rules.DefaultCombineMaxBatch
	}
	return n
}

// combineState is what a session keeps for combining.
type combineState struct {
	// off: the session did something after which its UPDATE may not be
	// what the same text runs on another connection (LOCK TABLES, a
	// temporary table, stored code or text lockproxy cannot see); it
	// combines no more.
	off bool
}

// combineCandidate is a statement combinable on the row named row.
type combineCandidate struct {
	c    *parser.Combinable
	rule *rules.Rule
	row  string
}

// combinable reports whether the statement runs combined: its rule
// combines, it is a relative UPDATE of the rule's column naming one row
// by its whole key (parser.CombineUpdate), and nothing of the session or
// the plan asks for more than a batch can answer exactly.
func (x *statementRun) combinable() (combineCandidate, bool) {
	s := x.s
	rule := x.pl.rewrite.rule
	if rule == nil || !rule.Combines() || x.r.an == nil || s.srv.combine.isUnfit(s.srv.ruleSet(), rule.Name) {
		return combineCandidate{}, false
	}
	held := s.txn.held()
	multi := s.ex.moreFollows || s.ex.splitPieces > 0
	escaping := s.status&mysql.SERVER_STATUS_NO_BACKSLASH_ESCAPED != 0 || s.reading.unsafe
	if why := s.comb.refusal(s.srv.ruleSet(), x.r, x.pl, inTxn(s.status), held, multi, escaping); why != "" {
		s.log.Debug("not combined", zap.String("rule", rule.Name), zap.String("reason", why))
		return combineCandidate{}, false
	}
	params := x.r.stepParams()
	if params == nil {
		params = []any{}
	}
	c, reason, err := parser.CombineUpdate(x.r.an.Stmts[0], rule.Rewrite.Column, rule.Key, params)
	if err != nil || reason != "" {
		s.log.Debug("not combined", zap.String("rule", rule.Name), zap.String("reason", reason), zap.Error(err))
		return combineCandidate{}, false
	}
	return combineCandidate{c: c, rule: rule, row: x.pl.rewrite.keys[0].Name}, true
}

// refusal says why the session or the plan keeps r from being combined;
// "" when nothing does. The session is in a transaction (inTxn), holds
// locks (held), runs a piece of a multi-statement text (multi), or
// escapes in a way a batch's text cannot share (escaping); rs is the
// rules in force.
func (c *combineState) refusal(rs *rules.RuleSet, r request, pl plan, inTxn, held, multi, escaping bool) string {
	an := r.an
	switch {
	case an.Unparsed || len(an.Stmts) != 1 || an.Stmts[0].Kind != parser.KindUpdate:
		return "not one UPDATE"
	case c.off:
		return "the session locked tables, made a temporary table or ran text lockproxy cannot see"
	case inTxn:
		return "in a transaction or autocommit off"
	case held:
		return "the session holds locks"
	case multi:
		return "multi-statement text"
	case escaping:
		return "session escaping"
	case r.longSent:
		return "long data"
	case !rs.KnowsObjects():
		return "the primary's triggers and foreign keys are not known (schema not read)"
	}
	return planCombineRefusal(pl)
}

// planCombineRefusal says why a plan keeps its UPDATE from being
// combined, whatever the session; "" when nothing does.
func planCombineRefusal(pl plan) string {
	switch {
	case len(pl.rewrite.keys) != 1:
		return "not one row"
	case pl.fence.rule != nil:
		return "fenced"
	case pl.storedCode:
		return "stored code, a trigger or a cascading foreign key"
	case pl.unkeyed || pl.guard.reject != nil || pl.guard.seen != nil:
		return "the plan refuses or observes"
	case len(pl.guard.keys) > 1 || len(pl.guard.keys) == 1 && pl.guard.keys[0].Name != pl.rewrite.keys[0].Name:
		return "other rows are locked"
	}
	return ""
}

// noteHazard turns combining off for the session after a statement
// that may make its UPDATEs differ from the same text on another
// connection: LOCK TABLES (the leader would wait on the member's table
// locks), a temporary table that may shadow the rule's table, stored code
// or text lockproxy cannot see (which may make one).
// rs is the rules in force and db the session's database.
func (c *combineState) noteHazard(an *parser.Analysis, rs *rules.RuleSet, db string) {
	if c.off || an == nil || !rs.Combines() {
		return
	}
	if an.Unparsed {
		c.off = true
		return
	}
	for _, f := range an.Stmts {
		switch {
		case f.Kind == parser.KindLockTables, f.Kind == parser.KindCall, f.Kind == parser.KindExecute,
			f.Kind == parser.KindDDL && strings.Contains(strings.ToLower(f.Text), "temporary"),
			rs.MayCreateTemporary(f, db):
			c.off = true
			return
		}
	}
}

// serveCombined runs the combinable statement: at once when nothing of its row
// is in flight (a batch of one is the statement as sent), else queued
// until it is answered from a batch or leads one.
func (x *statementRun) serveCombined() error {
	s := x.s
	m := &member{s: s, c: x.cand.c, turn: make(chan combineTurn, 1)}
	if len(x.pl.guard.keys) > 0 && s.srv.locker != nil && !s.txn.held() {
		m.owner = s.txn.set().Owner()
	}
	cb := &s.srv.combine
	batch := []*member{m}
	lead, parked := cb.join(x.cand.row, m)
	handed := false
	if parked != nil {
		handed = s.txn.adoptRowLease(x.cand.row, parked, s.srv.releaseRowLocks)
	}
	if !lead {
		t := <-m.turn
		if t.lead == nil {
			return x.answerCombined(t.res)
		}
		batch = t.lead
		if t.lease != nil {
			handed = s.txn.adopt(t.lease)
		}
	}
	passed := false
	pass := func(committed bool) {
		if !passed {
			passed = true
			s.srv.passCombined(x.cand, s.txn.detachCommitted(committed))
		}
	}
	defer pass(false)
	if len(batch) == 1 && !handed { // with the row's lease handed over it leads a batch, which others may join
		s.srv.metrics.combine.observe(x.cand.rule.Name, 1)
		return x.servePlanned()
	}
	return x.leadBatch(batch, pass)
}

// passCombined ends a session's batch of cand's row and starts the next
// one, if statements wait. After a batch that committed, held is the
// session's locks (txnLocks.detachCommitted; nil otherwise), and the
// row's lock is given up: handed over to the next batch's leader when the
// lock backend can and its bounds on local hand-offs allow (the row's
// lease then stays with this instance from batch to batch, never held by
// two batches: this one has committed), else released for the next
// leader to take again.
func (s *Server) passCombined(cand combineCandidate, held *lockmgr.Set) {
	batch, parked := s.combine.takeOrPark(cand.row, s.combineMax(cand.rule), held, s.releaseRowLocks)
	if parked {
		return
	}
	var lease *lockmgr.Lease
	if held != nil && len(batch) > 0 && batch[0].owner.Instance != "" {
		lease, _ = held.HandOver(cand.row, batch[0].owner)
	}
	if held != nil && held.Len() > 0 {
		s.releaseRowLocks(held)
	}
	if len(batch) > 0 {
		batch[0].turn <- combineTurn{lead: batch, lease: lease}
	}
}

// detachCommitted takes the locks out of the set after a combined batch
// that committed (committed), to be handed on or released with the row;
// nil when there are none or the batch did not commit.
func (t *txnLocks) detachCommitted(committed bool) *lockmgr.Set {
	if !committed || !t.held() {
		return nil
	}
	t.await()
	return t.locks.Detach()
}

// adopt takes lease, a row's lease handed over to the session's owner (by
// a combined batch, or lingering), into its lock set; false (the lease
// given back) if it cannot.
func (t *txnLocks) adopt(lease *lockmgr.Lease) bool {
	if err := t.locks.Adopt(lease); err != nil {
		t.log.Warn("the row's lease handed on could not be taken; it is given back", zap.Error(err))
		ctx, cancel := releaseCtxFor(t.locks)
		_ = lease.Release(ctx)
		cancel()
		return false
	}
	return true
}

// adoptRowLease takes the row's parked lease over for the session's
// batch; when it cannot be handed over (the hand-off bounds), it is
// released and the batch takes the row's lock as usual.
func (t *txnLocks) adoptRowLease(row string, parked *lockmgr.Set, release func(*lockmgr.Set)) bool {
	if t.locks != nil && t.locks.Len() == 0 {
		if lease, ok := parked.HandOver(row, t.locks.Owner()); ok {
			return t.adopt(lease)
		}
	}
	release(parked)
	return false
}

// releaseRowLocks releases held, a batch's locks no session holds any
// more, in the background (as releaseBehind).
func (s *Server) releaseRowLocks(held *lockmgr.Set) { s.lockSvc.releaseBehind(held) }

// combineMax is the rule's max_batch as the rules in force say.
func (s *Server) combineMax(rule *rules.Rule) int {
	if cur := s.ruleSet().Rule(rule.Name); cur != nil && cur.Combine != nil {
		return cur.Combine.MaxBatch
	}
	if rule.Combine != nil {
		return rule.Combine.MaxBatch
	}
	return rules.DefaultCombineMaxBatch
}

// more appends to batch, up to limit members, the statements of row that
// queued since it was formed: the batch holds the row's locks, so they
// would only wait for it.
func (c *combiner) more(row string, batch []*member, limit int) []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rows[row]
	if r == nil {
		return batch
	}
	n := min(maxOr(limit)-len(batch), len(r.waiting))
	if n <= 0 {
		return batch
	}
	batch = append(batch, r.waiting[:n]...)
	r.waiting = slices.Clone(r.waiting[n:])
	return batch
}
