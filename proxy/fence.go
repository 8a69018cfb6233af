package proxy

import (
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/parser"
	"go.uber.org/zap"
)

// errFenced: the database already holds a newer fencing token for the row,
// so this session's lock is stale even if its lease looked valid.
var errFenced = errors.New("proxy: stale fencing token: a newer lock holder has written the row")

// fenceStep is a locked UPDATE made conditional on the lock's fencing token.
type fenceStep struct {
	update, check string
	column        string // the fence column
	rule, key     string
	token         uint64
}

// fenceFor is the fence a single-row UPDATE of a table whose rule names a
// fence column gets when the session holds that row's lock: the column, the
// lock's token and the row; token 0 when none applies.
func (tl *txnLocks) fenceFor(pl plan) fenceStep {
	t := pl.fence
	if t.rule == nil || len(t.keys) != 1 || tl.locks == nil {
		return fenceStep{}
	}
	token := tl.locks.Fence(t.keys[0].Name)
	if token == 0 {
		return fenceStep{}
	}
	return fenceStep{column: t.rule.Fence, rule: t.rule.Name, key: t.keys[0].Name, token: token}
}

// planFence fences the command's UPDATE: the rewrite step's own fenced
// form when the UPDATE was rewritten (one pass builds both), else the
// statement as sent.
func (t *txnLocks) planFence(pl plan, params []any, step rewriteStep) (fenceStep, bool) {
	if step.sql != "" {
		return step.fenced, step.fenced.update != ""
	}
	fs := t.fenceFor(pl)
	if fs.token == 0 || len(pl.an.Stmts) != 1 {
		return fenceStep{}, false
	}
	if params == nil {
		params = []any{}
	}
	update, check, ok, reason, err := parser.FenceUpdate(pl.an.Stmts[0], fs.column, fs.token, params)
	if err != nil || !ok {
		t.log.Debug("update not fenced", zap.String("rule", fs.rule), zap.String("reason", reason), zap.Error(err))
		return fenceStep{}, false
	}
	fs.update, fs.check = update, check
	return fs, true
}

// runFenced sends the fenced UPDATE on the primary and answers the client:
// the backend's own OK or error, or — when no row changed because the row
// already carries a newer token — rolls the transaction back with 1213.
func (x *statementRun) runFenced(fs fenceStep) error {
	s := x.s
	reply, done, err := x.sendUpdate(fs.update)
	if done {
		return err
	}
	b := s.be
	if s.rwr.lastAffected == 0 {
		v, err := b.queryValue(fs.check)
		if err != nil && !isMySQLErr(err) {
			return s.backendFailed(b, err)
		}
		if err == nil && string(v) != "0" {
			s.srv.metrics.fenced.WithLabelValues(fs.rule).Inc()
			return s.abortTxn(fmt.Errorf("%w: %w (rule %q key %q token %d)", lockmgr.ErrLeaseLost, errFenced, fs.rule, fs.key, fs.token), fs.rule)
		}
		s.status = b.status
		if s.ex.rw != nil && s.ex.rw.sql != "" {
			return x.answerGuarded(*s.ex.rw, reply)
		}
	}
	return s.ex.writeReply(s.cw, reply)
}

// writeReply answers the command with one packet from a backend, on the
// client's writer w.
func (x *exchange) writeReply(w *packetWriter, p []byte) error {
	if len(p) > 0 && p[0] == mysql.OK_HEADER {
		p = x.withMore(p, true)
	}
	if _, err := w.writePacket(1, p); err != nil {
		return err
	}
	return w.flush()
}
