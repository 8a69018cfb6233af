package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/rules"
	"go.uber.org/zap"
)

// releaseTimeout is the least time giving locks back may take (see
// releaseCtx); a lock whose release fails ends with its lease.
const releaseTimeout = 3 * time.Second

// releaseCtxFor bounds giving locks back by their leases: a release may
// take as long as a lock it gives back is still held (a slow lock service
// is waited for, not given up on while the lock lingers), and at least
// releaseTimeout.
func releaseCtxFor(locks *lockmgr.Set) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(releaseTimeout)
	if v := locks.LastValidUntil(); v.After(deadline) {
		deadline = v
	}
	return context.WithDeadline(context.Background(), deadline)
}

// rollbackTimeout bounds the ROLLBACK lockproxy sends itself (a deadlock
// victim, a lost lease): past it the backend connection is given up.
const rollbackTimeout = 5 * time.Second

// guard is what lockproxy must do around one command: the locks to take, a
// rejection to answer instead, whether it ends the transaction.
type guard struct {
	keys        []lockmgr.Key
	waitTimeout time.Duration
	reject      error // answer this instead of running the command
	// unpaired: reject refuses a write of a rewrite column that no rewrite
	// makes conditional (counted as reason "unpaired", not "unkeyed").
	unpaired bool
	// notCurrent: reject refuses a read that takes read_in_txn locks
	// and cannot be sent as a current read (counted as "not_current").
	notCurrent bool
	commits    bool // the text contains COMMIT (or an implicit commit)
	// ends: the text ends a transaction (BEGIN, COMMIT, ROLLBACK, an
	// implicit commit), perhaps to begin another (a second BEGIN, AND
	// CHAIN); halfRuns: a failure of it may leave part of it done (CALL,
	// EXECUTE, a text lockproxy could not parse).
	ends, halfRuns bool
	rollsBack      bool // the text is ROLLBACK: it may always run
	primary        bool // a rule or a fact forces the primary
	// observing: some rule is in observe mode, so decisions are split
	// by mode (observe.go). Kept with the other flags, so a guard is no
	// larger than before observe mode.
	observing bool
	rule      string // first rule that matched, for messages
	// unkeyedReads are plain reads in a transaction whose rows cannot be
	// keyed and that run without row locks (on_unkeyed_read: allow).
	unkeyedReads []rules.Unkeyed
	// seen is what the rules in observe mode would have done, nil when
	// nothing.
	seen *observation
}

// inTxn reports whether a session whose last server status is status is
// inside a transaction for locking purposes: an open transaction, or
// autocommit off.
func inTxn(status uint16) bool {
	return status&mysql.SERVER_STATUS_IN_TRANS != 0 || status&mysql.SERVER_STATUS_AUTOCOMMIT == 0
}

// add merges one statement's decision into the guard.
func (g *guard) add(d rules.Decision, lc rules.LockConfig) {
	if d.Rule == nil {
		return
	}
	if g.rule == "" {
		g.rule = d.Rule.Name
	}
	g.primary = g.primary || d.RoutePrimary
	if d.Reject && g.reject == nil {
		g.reject = errorf(errRejected, "%s", d.RejectReason())
	}
	g.unkeyedReads = append(g.unkeyedReads, d.UnkeyedReads...)
	if len(d.Keys) == 0 {
		return
	}
	if w := d.WaitTimeout(lc); g.waitTimeout == 0 || w < g.waitTimeout {
		g.waitTimeout = w
	}
	fenced := false // a fenced write needs a new token with every grant
	var window time.Duration
	for _, r := range d.Rules {
		fenced = fenced || r.Fence != ""
		// A combined row's batches keep its lock on the instance only so
		// long: the other instances' batches take their turn.
		if r.Combines() && r.Combine.HoldWindow > 0 && (window == 0 || r.Combine.HoldWindow.D() < window) {
			window = r.Combine.HoldWindow.D()
		}
	}
	for _, k := range d.Keys {
		g.keys = append(g.keys, lockmgr.Key{Name: k.Name, Rule: k.Rule, NoHandoff: fenced, HandoffWindow: window})
	}
}

// beforeCommand enforces the guard: it answers a rejection or a doomed
// transaction itself (ran=false) or takes the locks the command needs.
func (s *session) beforeCommand(g guard) (ok bool, err error) {
	if s.txn.held() && !g.rollsBack {
		if lerr := s.txn.locks.Err(); lerr != nil || !s.txn.locks.Valid() {
			if lerr == nil {
				lerr = fmt.Errorf("%w: lease expired", lockmgr.ErrLeaseLost)
			}
			held := s.txn.locks.Keys()
			rule, key := g.rule, ""
			if len(held) > 0 {
				rule, key = held[0].Rule, held[0].Name
			}
			return false, s.abortTxn(fmt.Errorf("rule %q key %q: %w", rule, key, lerr), rule)
		}
	}
	if g.reject != nil {
		reason, event := "unkeyed", "statement rejected: keys cannot be derived"
		switch {
		case g.unpaired:
			reason, event = "unpaired", "unrewritable write refused (on_unpaired: reject)"
		case g.notCurrent:
			reason, event = "not_current", "locked read refused: it cannot be sent as a current read"
		}
		s.srv.metrics.rejects.WithLabelValues(g.rule, reason).Inc()
		s.audit(event, g, zap.String("error", toSQLError(g.reject).Msg))
		return false, s.writeErrAt(1, g.reject)
	}
	s.noteUnkeyedReads(g)
	if len(g.keys) == 0 || s.srv.locker == nil {
		return true, nil
	}
	if s.txn.takeLingeringNow(g) {
		return true, nil // no wait: no timeout to set up
	}
	ctx, cancel := newWaitCtx(s.hardCtx, g.waitTimeout) // its timer only if it waits
	defer cancel()
	var trace lockmgr.WaitTrace
	begin := time.Now()
	lerr := s.txn.acquire(lockmgr.WithWaitTrace(ctx, &trace), g, s.srv.config().Locks.OnUnavailable == "passthrough")
	if waited := time.Since(begin); waited > s.srv.config().Locks.SlowWait.D() {
		s.audit("slow lock wait", g, zap.Duration("waited", waited), zap.Strings("holders", trace.Holders()), zap.Error(lerr))
	}
	switch {
	case lerr == nil:
		return true, nil
	case errors.Is(lerr, errServiceAway):
		s.srv.metrics.rejects.WithLabelValues(g.rule, "unavailable").Inc()
		s.audit("statement not run: lock service unavailable during the wait", g, zap.Error(lerr))
		return false, s.writeErrAt(1, lerr)
	case errors.Is(lerr, lockmgr.ErrWaitTimeout):
		return false, s.writeErrAt(1, lerr)
	case errors.Is(lerr, lockmgr.ErrDeadlock), errors.Is(lerr, lockmgr.ErrLeaseLost):
		return false, s.abortTxn(lerr, g.rule)
	case errors.Is(lerr, lockmgr.ErrUnavailable) && s.srv.config().Locks.OnUnavailable == "passthrough":
		s.audit("lock service unavailable; statement runs unlocked (on_unavailable: passthrough)", g, zap.Error(lerr))
		return true, nil
	default:
		s.srv.metrics.rejects.WithLabelValues(g.rule, "unavailable").Inc()
		s.audit("statement rejected: lock service unavailable", g, zap.Error(lerr))
		return false, s.writeErrAt(1, fmt.Errorf("rule %s: lock service unavailable, statement not run (%w)", g.rule, lerr))
	}
}

// errServiceAway marks a lock wait that ended after the lock service was
// unavailable in it.
var errServiceAway = errors.New("lock service unavailable during the wait")

func serviceAway(g guard, cause error) error {
	k := g.keys[0]
	return fmt.Errorf("%w: rule %q key %q: %w (%v)", lockmgr.ErrWaitTimeout, k.Rule, k.Name, errServiceAway, cause)
}

// noteUnkeyedReads counts and audits the reads in a transaction that run
// without the row locks read_in_txn asks for, because their rows cannot be
// keyed (a range, a full scan) and the rule allows that (on_unkeyed_read).
func (s *session) noteUnkeyedReads(g guard) {
	for _, u := range g.unkeyedReads {
		s.srv.metrics.unkeyedReads.WithLabelValues(u.Rule.Name).Inc()
		// Check first: the logger samples these lines (a busy instance
		// sends many such reads a second), and the fields of a line it
		// drops are not built.
		if ce := s.srv.audit.Check(zap.InfoLevel, "unkeyed read in a transaction runs without row locks (on_unkeyed_read: allow)"); ce != nil {
			ce.Write(zap.String("rule", u.Rule.Name), zap.String("table", u.Table), zap.String("reason", u.Reason),
				zap.Uint32("session", s.id), zap.String("user", s.user), zap.String("client", s.conn.RemoteAddr().String()))
		}
	}
}

// abortTxn rolls the backend transaction back, releases every lock, and
// answers cause, lockmgr.ErrDeadlock or lockmgr.ErrLeaseLost (1213): the
// fate of a deadlock victim or of a lost lease.
func (s *session) abortTxn(cause error, rule string) error {
	if s.status&mysql.SERVER_STATUS_IN_TRANS != 0 {
		// A primary that does not answer must not hold the session (and
		// its locks) forever: the ROLLBACK gets a deadline.
		_ = s.be.nc.SetDeadline(time.Now().Add(rollbackTimeout))
		err := s.be.simpleCommand(append([]byte{mysql.COM_QUERY}, "ROLLBACK"...))
		_ = s.be.nc.SetDeadline(time.Time{})
		if err != nil {
			s.be.broken = true
			return err
		}
		s.status = s.be.status
	}
	s.releaseLocks()
	event := "deadlock victim: transaction rolled back"
	if errors.Is(cause, lockmgr.ErrLeaseLost) {
		event = "lease lost: transaction rolled back"
	}
	s.audit(event, guard{rule: rule}, zap.Error(cause))
	return s.writeErrAt(1, fmt.Errorf("%w; transaction rolled back", cause))
}

// audit writes one line of the audit log: the event, the rule and keys,
// the session (waiter) and its user and client; a slow wait adds the
// holders the lock backend saw (owner ids: instance/session/transaction). Statement parameters are
// never logged.
func (s *session) audit(event string, g guard, fields ...zap.Field) {
	keys := make([]string, 0, len(g.keys))
	for _, k := range g.keys {
		keys = append(keys, k.Name)
	}
	s.srv.audit.Warn(event, append(fields, zap.String("rule", g.rule), zap.Strings("keys", keys),
		zap.Uint32("session", s.id), zap.String("user", s.user), zap.String("client", s.conn.RemoteAddr().String()))...)
}

// afterCommand releases the locks once the session is outside a
// transaction: after an autocommit statement, or once COMMIT or ROLLBACK
// has been answered by the backend.
func (s *session) afterCommand() {
	back := s.ex.giveBack
	s.ex.giveBack = giveBack{}
	if s.obs.watch != nil && s.status&mysql.SERVER_STATUS_IN_TRANS == 0 {
		s.obs.release()
	}
	if !s.txn.held() {
		return
	}
	switch {
	case s.status&mysql.SERVER_STATUS_IN_TRANS == 0:
		s.txn.releaseBehind()
	case !back.armed:
	case back.ends && s.ex.lastOK:
		// The transaction that held them ended and another began (a
		// second BEGIN, COMMIT AND CHAIN, ...); the text itself needed
		// no row locks.
		s.txn.releaseBehind()
	case s.ex.noneRan && !back.halfRuns:
		// MariaDB refused the statement before any of it ran (a missing
		// privilege, an unknown column, a duplicate key rolled back): as
		// InnoDB keeps no row lock for it, the transaction keeps none of
		// the locks this statement alone took.
		s.txn.releaseSince(back.mark)
	}
}

// giveBack is what a statement lockproxy sends as the client wrote it may
// give back of the locks when it ends (see afterCommand).
type giveBack struct {
	armed    bool // set for the statement being served
	mark     int  // the lock set's Mark before the statement's locks
	ends     bool // a text without keys that ends a transaction (guard.ends)
	halfRuns bool // guard.halfRuns
}

// armGiveBack prepares afterCommand for the statement of guard g, whose
// locks were taken after mark.
func (x *exchange) armGiveBack(g guard, mark int) {
	x.giveBack = giveBack{armed: true, mark: mark, ends: g.ends && len(g.keys) == 0, halfRuns: g.halfRuns}
}

// txnLocks is what a session holds in the lock service for its current
// transaction or autocommit statement, and the background release of
// the last one's.
type txnLocks struct {
	// svc, session and log are fixed when the session starts: the lock
	// service the instance's sessions share, the session's id (its
	// owners' Session) and its log.
	svc     *lockService
	session uint32
	// cameBack: the one key the transaction's locks hold is one the
	// session came back for (locks.redis.linger: its lock may linger
	// when they end); next to session, in its padding.
	cameBack bool
	log      *zap.Logger
	// releasing, when not nil, is the release of the last transaction's
	// locks, given back in the background (releaseBehind); awayBefore is
	// the lock service's failure to answer such a release, which the next
	// lock wait names if it times out.
	releasing  *release
	awayBefore error
	// Locks held for the current transaction or autocommit statement.
	locks  *lockmgr.Set
	txnSeq uint64
}

// held reports whether the transaction holds any lock.
func (t *txnLocks) held() bool { return t.locks != nil && t.locks.Len() > 0 }

// set returns the lock set, starting a new owner when it holds nothing
// (a new transaction or autocommit statement).
func (t *txnLocks) set() *lockmgr.Set {
	if t.locks == nil {
		t.locks = lockmgr.NewSet(t.svc.locker, t.newOwner())
	} else if t.locks.Len() == 0 {
		t.locks.Begin(t.newOwner())
	}
	return t.locks
}

func (t *txnLocks) newOwner() lockmgr.Owner {
	t.txnSeq++
	return lockmgr.Owner{Instance: t.svc.instance, Session: uint64(t.session), Txn: t.txnSeq, Start: time.Now()}
}

// lockService is what every session's locks share, fixed when the
// Server is made: the lock service (and its observe-mode check, nil when
// it has none), where background releases run, and the instance's name
// in owners (observe notes' owners add "/observe", so they never pass for
// a session's own locks).
type lockService struct {
	locker          lockmgr.Locker
	observer        lockmgr.Observer
	releasers       *releasers
	instance        string
	observeInstance string
	log             *zap.Logger
	// linger is locks.redis.linger as the configuration in force says,
	// and lingering the row locks lingering now (linger.go).
	linger    func() time.Duration
	lingering lingerLocks
}

// acquire takes g's keys within ctx, the guard's wait. A lock service
// that is down, failing over or too slow to answer is asked again, with
// backoff, until the wait ends: an outage shorter than the wait costs
// latency, not an error. A wait that ends after the service was
// unavailable in it is answered as a lock wait that timed out (1205,
// which applications retry), naming the cause (errServiceAway). Under
// on_unavailable: passthrough the statement runs unlocked at once
// instead.
func (t *txnLocks) acquire(ctx context.Context, g guard, passthrough bool) error {
	backoff := 10 * time.Millisecond
	var away error // the last unavailable answer in this wait
	if !t.awaitWithin(ctx) {
		// The wait ran out while the lock service had not answered the
		// release of the session's last transaction.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return serviceAway(g, errReleasePending)
		}
		return ctx.Err()
	}
	away, t.awayBefore = t.awayBefore, nil
	if t.takeLingering(g) {
		return nil
	}
	first := len(g.keys) == 1 && !t.held()
	for {
		err := t.set().Acquire(ctx, g.keys)
		switch {
		case err == nil:
			if first {
				t.cameBack = t.svc.cameBack(g.keys[0].Name)
			}
			return nil
		case away != nil && errors.Is(err, lockmgr.ErrWaitTimeout):
			return serviceAway(g, away)
		case !errors.Is(err, lockmgr.ErrUnavailable) || passthrough:
			return err
		}
		away = err
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return err // lockproxy stops for good
			}
			return serviceAway(g, away)
		case <-timer.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// mark is the lock set's Mark, taken before a statement's locks.
func (t *txnLocks) mark() int {
	if t.locks == nil {
		return 0
	}
	return t.locks.Mark()
}

// releaseSince gives back the locks taken after mark.
func (t *txnLocks) releaseSince(mark int) {
	t.await()
	ctx, cancel := releaseCtxFor(t.locks)
	defer cancel()
	if err := t.locks.ReleaseSince(ctx, mark); err != nil {
		t.log.Warn("lock release failed; the locks are freed once the lock service answers again, or when their lease ends", zap.Error(err))
	}
}

// release gives back every lock and waits for the lock service's answer.
func (t *txnLocks) release() {
	t.await()
	if !t.held() {
		return
	}
	ctx, cancel := releaseCtxFor(t.locks)
	defer cancel()
	if err := t.locks.Release(ctx); err != nil {
		t.log.Warn("lock release failed; the locks are freed once the lock service answers again, or when their lease ends", zap.Error(err))
	}
}

// releaseBehind gives back every lock of a transaction that has ended in
// the background: the client's answer goes out without waiting for the
// lock service, and the release does not wait for the client's socket
// either. The session's next lock acquire, release or end waits for it
// (await), so the session never asks for a key it is still giving back,
// and a drain still releases every lock before the process exits.
func (t *txnLocks) releaseBehind() {
	t.await()
	if !t.held() {
		return
	}
	held := t.locks.Detach()
	cameBack := t.cameBack
	t.cameBack = false
	if t.svc.park(held, cameBack) || held.ReleaseLocal() {
		// Lingering, or passed to a session of the instance that waits
		// for it (that session runs before this one answers its client),
		// or its release queued by the lock service for its next call
		// (release_window): no Redis call to wait for.
		return
	}
	ctx, cancel := releaseCtxFor(held)
	r := &release{done: make(chan struct{})}
	t.releasing = r
	log := t.log
	t.svc.releasers.run(func() {
		defer close(r.done)
		defer cancel()
		if r.err = held.Release(ctx); r.err != nil {
			log.Warn("lock release failed; the locks are freed once the lock service answers again, or when their lease ends", zap.Error(r.err))
		}
	})
}

// release is a release releaseBehind runs: done is closed when it
// returned, with err.
type release struct {
	done chan struct{}
	err  error
}

// finished takes the background release as done: a release the lock
// service could not answer leaves its keys held until their leases end,
// and the next lock wait names that cause if it times out (awayBefore).
func (t *txnLocks) finished(r *release) {
	t.releasing = nil
	if errors.Is(r.err, lockmgr.ErrUnavailable) {
		t.awayBefore = r.err
	}
}

// errReleasePending is why a lock wait ended before it asked for a key:
// the release of the session's last transaction was still unanswered.
var errReleasePending = errors.New("the release of the session's previous locks was not answered")

// awaitWithin is await for a statement's lock wait: it waits no longer
// than ctx, the statement's wait, and reports whether the release is
// done. A release the lock service does not answer is bounded by its
// leases (releaseCtxFor), longer than a statement may wait.
func (t *txnLocks) awaitWithin(ctx context.Context) bool {
	if t.releasing == nil {
		return true
	}
	select {
	case <-t.releasing.done:
		t.finished(t.releasing)
		return true
	case <-ctx.Done():
		return false
	}
}

// await waits for the release releaseBehind started, if any.
func (t *txnLocks) await() {
	if t.releasing != nil {
		<-t.releasing.done
		t.finished(t.releasing)
	}
}

// releaseLocks ends observe mode's watch and gives back every lock.
func (s *session) releaseLocks() {
	s.obs.release()
	s.txn.release()
}
