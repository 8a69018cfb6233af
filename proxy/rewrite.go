package proxy

import (
	"strconv"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
	"go.uber.org/zap"
)

// rewriteStep is what a rewrite rule asks of one command: watch a keyed
// SELECT's row for the guarded column, or send an UPDATE in its guarded
// form instead of as written.
type rewriteStep struct {
	capture *capture
	sql     string // the guarded UPDATE, when it applies
	rule    string
	mode    string
	key     string // the row an UPDATE writes (its belief is consumed)
}

// planRewrite decides the rewrite step for an analysed command (params:
// execute-time values, nil for text). Only single-statement commands on a
// rewrite rule's table take part.
//
// What the session remembers, exactly: the value of the guarded column
// from the last single-row result of a SELECT that names one row of the
// table by its key (text or prepared, in or out of a transaction, from
// the primary or a replica). A later read of that row replaces it; the
// session's next UPDATE of that row consumes it, rewritten or not; it is
// forgotten at COM_RESET_CONNECTION, COM_CHANGE_USER and disconnect, and
// when more than 1024 rows are remembered.
func (s *session) planRewrite(an *parser.Analysis, params []any, binary bool) rewriteStep {
	rs := s.srv.ruleSet()
	if an == nil || an.Unparsed || len(an.Stmts) != 1 || !s.srv.hasRewrites() {
		return rewriteStep{}
	}
	f := an.Stmts[0]
	if f.Kind != parser.KindSelect && f.Kind != parser.KindUpdate {
		return rewriteStep{}
	}
	r, keys, ok := rs.RewriteTarget(f, s.db, params)
	if !ok || r.Rewrite == nil {
		return rewriteStep{}
	}
	if f.Kind == parser.KindSelect {
		if len(keys) != 1 {
			return rewriteStep{}
		}
		return rewriteStep{capture: newCapture(keys[0].Name, r.Rewrite.Column, binary)}
	}
	step := rewriteStep{rule: r.Name, mode: r.Rewrite.Mode}
	if len(keys) != 1 {
		s.rewriteSkipped(step, parser.ReasonSeveralRows)
		return step
	}
	step.key = keys[0].Name
	if s.status&mysql.SERVER_STATUS_NO_BACKSLASH_ESCAPED != 0 || s.unsafeCharset {
		s.rewriteSkipped(step, "session escaping")
		return step
	}
	spec := parser.RewriteSpec{Column: r.Rewrite.Column, Mode: r.Rewrite.Mode, Old: s.beliefs[step.key], Key: r.Key}
	if r.Rewrite.Min != nil {
		spec.Min = strconv.FormatFloat(*r.Rewrite.Min, 'f', -1, 64)
	}
	if params == nil {
		params = []any{}
	}
	sql, ok, reason, err := parser.RewriteUpdate(f, spec, params)
	switch {
	case err != nil:
		s.log.Warn("rewrite failed; the statement runs as sent", zap.String("rule", r.Name), zap.Error(err))
		s.rewriteSkipped(step, "error")
	case !ok:
		s.rewriteSkipped(step, reason)
	default:
		step.sql = sql
	}
	return step
}

func (s *session) rewriteSkipped(step rewriteStep, reason string) {
	s.srv.metrics.rewrites.WithLabelValues(step.rule, step.mode, "skipped").Inc()
	s.log.Debug("rewrite skipped", zap.String("rule", step.rule), zap.String("reason", reason))
}

// finishRewrite updates the session's beliefs and the metrics once the
// command's response has been relayed.
func (s *session) finishRewrite(step rewriteStep) {
	switch {
	case step.capture != nil:
		if s.lastOK {
			if v, ok := step.capture.belief(); ok {
				s.remember(step.capture.key, v)
			}
		}
	case step.key != "":
		s.forget(step.key)
		if step.sql == "" || !s.lastOK {
			return
		}
		result := "applied"
		if s.lastAffected == 0 {
			result = "conflicted"
			s.srv.audit.Info("rewrite conflict: the guarded update changed no row (a concurrent write won or the guard held)",
				zap.String("rule", step.rule), zap.String("key", step.key), zap.String("mode", step.mode),
				zap.Uint32("session", s.id), zap.String("user", s.user))
		}
		s.srv.metrics.rewrites.WithLabelValues(step.rule, step.mode, result).Inc()
	}
}
