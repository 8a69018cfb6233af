package proxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
	"go.uber.org/zap"
)

// answerCombined answers a member of a batch as MariaDB would have
// answered its statement run alone at its place in the batch's order.
func (x *statementRun) answerCombined(res combineResult) error {
	s := x.s
	switch res.outcome {
	case combineAlone:
		return x.servePlanned()
	case combineUnknown:
		s.ex.lastOK = false
		s.log.Info("the combined batch's commit outcome is unknown; closing the client's connection",
			zap.String("rule", x.cand.rule.Name), zap.String("key", x.cand.row))
		return errCombineUnknown
	}
	if x.r.execute() {
		s.srv.metrics.primaryExecute.Inc()
	} else {
		s.srv.metrics.primaryQuery.Inc()
	}
	s.srv.metrics.combine.combined.WithLabelValues(x.cand.rule.Name).Inc()
	s.rwr.forget(x.cand.row)
	s.route.diagReplica = false
	s.route.noteCombinedWrite(s.srv, s.user, res.gtid)
	rw := x.cand.rule.Rewrite
	step := rewriteStep{rule: x.cand.rule.Name, mode: rw.Mode, column: rw.Column, key: x.cand.row, guard: parser.GuardMin,
		zero: rw.OnConflict == rules.OnConflictZeroRows}
	if rw.Min != nil {
		step.min = strconv.FormatFloat(*rw.Min, 'f', -1, 64)
	}
	if res.conflict {
		s.srv.metrics.rewrites.WithLabelValues(step.rule, step.mode, rewriteConflicted).Inc()
		s.srv.audit.Info("rewrite conflict: the guarded update changed no row",
			zap.String("rule", step.rule), zap.String("key", step.key), zap.String("mode", step.mode),
			zap.String("guard", step.guard), zap.Bool("zero_rows", step.zero), zap.Bool("combined", true),
			zap.Uint32("session", s.id), zap.String("user", s.user))
		if !step.zero {
			s.ex.lastOK = false
			if s.be != nil {
				s.be.pre = nil // an error: ROW_COUNT() is -1 on the server too
			}
			s.afterCommand()
			return s.writeErrAt(1, raceError(step, "the statement changed nothing"))
		}
	} else {
		s.srv.metrics.rewrites.WithLabelValues(step.rule, step.mode, rewriteApplied).Inc()
	}
	p, affected := combinedOK(res, s.client.caps, s.status)
	s.ex.lastOK, s.rwr.lastAffected = true, affected
	s.be.oweRowCount(affected)
	s.afterCommand()
	return s.ex.writeReply(s.cw, p)
}

// oweRowCount records that the session's backend connection did not run
// the statement last answered with n affected rows: the next command
// written on that connection, whatever it is, goes out behind a statement
// that leaves ROW_COUNT() and the diagnostics area as that statement did,
// in the same flight (backendConn.pre), so whatever reads them — the
// statement itself, a stored function, a view, a trigger — sees what it
// would have seen, without a round trip of its own.
func (b *backendConn) oweRowCount(n uint64) {
	if b == nil {
		return
	}
	q := settleZero
	if n == 1 {
		q = settleOne
	}
	b.pre = append([]byte{mysql.COM_QUERY}, q...)
}

// combinedOK is the OK MariaDB answers a single-row UPDATE that matched
// (or not) and changed (or not) the row: affected rows 1 or 0 (matched
// rows under CLIENT_FOUND_ROWS), no insert id, the session's status, no
// warnings, and the info string.
func combinedOK(res combineResult, caps uint32, status uint16) ([]byte, uint64) {
	var matched, changed uint64
	if res.matched {
		matched = 1
	}
	if res.changed {
		changed = 1
	}
	affected := changed
	if caps&mysql.CLIENT_FOUND_ROWS != 0 {
		affected = matched
	}
	const perStatement = mysql.SERVER_STATUS_NO_GOOD_INDEX_USED | mysql.SERVER_STATUS_NO_INDEX_USED |
		mysql.SERVER_STATUS_LAST_ROW_SEND | mysql.SERVER_STATUS_CURSOR_EXISTS | mysql.SERVER_MORE_RESULTS_EXISTS |
		mysql.SERVER_STATUS_DB_DROPPED | mysql.SERVER_STATUS_METADATA_CHANGED | mysql.SERVER_PS_OUT_PARAMS |
		mysql.SERVER_SESSION_STATE_CHANGED | mysql.SERVER_QUERY_WAS_SLOW
	status = status&^perStatement | res.index
	info := fmt.Sprintf("Rows matched: %d  Changed: %d  Warnings: 0", matched, changed)
	b := make([]byte, 0, 64)
	b = append(b, mysql.OK_HEADER)
	b = appendLenEncInt(b, affected)
	b = appendLenEncInt(b, 0)
	b = binary.LittleEndian.AppendUint16(b, status)
	b = binary.LittleEndian.AppendUint16(b, 0)
	// MariaDB writes a non-empty info string length-encoded, with or
	// without CLIENT_SESSION_TRACK (see session.tracked).
	b = appendLenEncString(b, info)
	return b, affected
}

// noteCombinedWrite is what read-your-writes learns of a member's write:
// the batch's GTID, learnt on the leader's connection (the member's own
// ran nothing). Without it the session reads from the primary until its
// next write of its own.
func (r *routeState) noteCombinedWrite(srv *Server, user, gtid string) {
	if srv.loaded().router == nil || !srv.config().Backends.RYW() {
		return
	}
	if gtid == "" { // the leader could not read it: rare, and safe
		r.pinnedPrimary = true
		return
	}
	r.lastGTID, r.needGTID = gtid, false
	srv.marks.note(user, gtid)
}

// Statements that leave a session's ROW_COUNT() at 0 or 1 with an empty
// diagnostics area, as after the single-row UPDATE it was answered for.
// MariaDB clears the area only for a statement that names a table (a
// derived one will do): after DO 0 or a SELECT without FROM, SHOW
// WARNINGS still shows the warnings of the statement before. The LIMIT
// keeps sql_select_limit from taking the row (ROW_COUNT() would be 0).
// The variable is NULL after it, as when it was never set.
const (
	settleZero = "DO (SELECT 0 FROM (SELECT 1) AS lockproxy_settle)"
	settleOne  = "SELECT NULL INTO @lockproxy_row_count FROM (SELECT 1) AS lockproxy_settle LIMIT 1"
)

// learnBatchOutcome learns, on a new connection, whether the batch whose
// COMMIT was sent on a connection that then died committed: it waits for
// that connection's thread to end on the server (its transaction is then
// committed or rolled back), then reads the batch's marker
// (combine_marker.go), which tells exactly in either lock mode. A batch
// without a marker (marker_table: none, or a table its user cannot
// write) is learnt from the row: with a locking rule the batch still
// holds the row's lock, so the value tells exactly; with an optimistic
// rule a write from another instance may hide it ("unknown"). The row
// takes its next batch only after this.
func (s *Server) learnBatchOutcome(key poolKey, cand combineCandidate, bt *combineBatch, cause error) {
	run := bt.run
	outcome := s.readBatchOutcome(key, cand, run, bt.marker)
	ids := make([]uint32, len(bt.members))
	for i, m := range bt.members {
		ids[i] = m.s.id
	}
	s.metrics.combine.unknown.WithLabelValues(cand.rule.Name, outcome).Inc()
	s.audit.Warn("combined batch: the connection died after COMMIT was sent; its members' connections were closed",
		zap.String("rule", cand.rule.Name), zap.String("key", cand.row), zap.String("outcome", outcome),
		zap.Int64("before", run.before), zap.Int64("after", run.after), zap.Uint32s("sessions", ids), zap.Error(cause))
}

// Outcomes learnBatchOutcome finds.
const (
	batchCommitted  = "committed"
	batchRolledBack = "rolled_back"
	batchNoChange   = "no_change"
	batchUnknown    = "unknown"
)

func (s *Server) readBatchOutcome(key poolKey, cand combineCandidate, run batchRun, mk *batchMarker) string {
	if run.after == run.before {
		return batchNoChange
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	be, err := s.pool.get(ctx, key)
	if err != nil {
		return batchUnknown
	}
	defer s.pool.put(be)
	_ = be.nc.SetDeadline(time.Now().Add(30 * time.Second))
	defer func() { _ = be.nc.SetDeadline(time.Time{}) }()
	gone := fmt.Sprintf("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %d", run.thread)
	for {
		v, err := be.queryValue(gone)
		if err != nil {
			return batchUnknown
		}
		if string(v) == "0" {
			break
		}
		select {
		case <-ctx.Done():
			return batchUnknown
		case <-time.After(10 * time.Millisecond):
		}
	}
	if mk != nil {
		if committed, ok := mk.committed(be); ok && committed {
			return batchCommitted
		} else if ok {
			return batchRolledBack
		}
	}
	row, err := readCombinedRow(be, cand.c.Select)
	switch {
	case err != nil || row.rows != 1:
		return batchUnknown
	case row.value == run.after:
		return batchCommitted
	case row.value == run.before:
		return batchRolledBack
	}
	return batchUnknown
}
