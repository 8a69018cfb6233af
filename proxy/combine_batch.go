package proxy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"
)

// combineLimit bounds the row's value and each delta a batch works with:
// within it no sum or difference MariaDB computes for a member (its
// assignment, its floor) leaves BIGINT, so the batch's arithmetic is the
// server's. A batch that would leave it runs its members alone.
const combineLimit = 1 << 62

// errBatchAbandoned says why a batch ran nothing: its members run alone.
var errBatchAbandoned = errors.New("proxy: combined batch abandoned before its commit")

// leadBatch runs batch (s's own statement first) as one transaction on
// s's backend connection and answers s's client; the other members are
// told how their statements ended. Whatever happens, every member is told
// exactly once. pass(true) passes the row, and its lock, to its next
// batch once this one has committed, before anyone is answered.
func (x *statementRun) leadBatch(batch []*member, pass func(committed bool)) error {
	s := x.s
	bt := &combineBatch{members: batch}
	defer func() {
		if bt.marker != nil { // its outcome is known by now
			s.srv.combine.marks.put(bt.marker.slot)
		}
	}()
	told := false
	tell := func(out combineOutcome) {
		for i, m := range bt.members[1:] {
			res := combineResult{outcome: out}
			if out == combineDone {
				res = bt.results[i+1]
			}
			m.turn <- combineTurn{res: res}
		}
		told = true
	}
	defer func() {
		if !told {
			tell(combineAlone)
		}
	}()
	out, err := x.runBatch(bt)
	switch out {
	case combineDone:
		pass(true)
		s.srv.metrics.combine.observe(x.cand.rule.Name, len(bt.members))
		tell(combineDone)
		return x.answerCombined(bt.results[0])
	case combineUnknown:
		tell(combineUnknown)
		s.srv.learnBatchOutcome(s.client.backendKey(s.srv, s.user, s.reading.db), x.cand, bt, err)
		return s.backendFailed(s.be, err)
	}
	tell(combineAlone)
	if s.be.broken {
		return s.backendFailed(s.be, err)
	}
	s.log.Debug("combined batch ran nothing; its statements run alone", zap.String("rule", x.cand.rule.Name), zap.Error(err))
	s.releaseLocks() // taken again, if still needed, as the statement runs alone
	return x.servePlanned()
}

// combineBatch is one batch: its members in arrival order, what each
// did, and the row's value before and after it.
type combineBatch struct {
	members []*member
	results []combineResult
	run     batchRun
	// marker is the batch's marker, nil when it writes none.
	marker *batchMarker
}

// batchRun is one batch's view of the row, for learnBatchOutcome.
type batchRun struct {
	before, after int64
	thread        uint32 // the backend thread that ran it
}

// runBatch runs the batch's transaction: the row's lock (a locking rule),
// START TRANSACTION and the row read FOR UPDATE (sent together), then —
// the row's locks held, so that statements that queued meanwhile join
// the batch at the end of it — each member decided in order against the
// running value, one UPDATE of the net change and COMMIT (sent
// together). combineAlone: nothing was committed (COMMIT was not sent,
// or nothing of the batch was in what it committed); combineUnknown: the
// connection failed once COMMIT was sent.
func (x *statementRun) runBatch(bt *combineBatch) (combineOutcome, error) {
	s := x.s
	if len(x.pl.guard.keys) > 0 && s.srv.locker != nil {
		ctx, cancel := context.WithTimeout(s.hardCtx, x.pl.guard.waitTimeout)
		err := s.txn.acquire(ctx, x.pl.guard, s.srv.config().Locks.OnUnavailable == "passthrough")
		cancel()
		if err != nil {
			return combineAlone, fmt.Errorf("%w: lock: %w", errBatchAbandoned, err)
		}
	}
	b := s.be
	s.ex.src = b
	defer func() { s.status = b.status }()
	mk := s.srv.batchMarker(s.log, s.user, x.cand, b)
	bt.marker = mk
	mark := ""
	if mk != nil {
		mark = mk.write()
	}
	row, marked, err := beginCombined(b, x.cand.c.Select, mark)
	if err != nil {
		return abandonBatch(s.be, err)
	}
	if marked != nil {
		s.srv.markerRefused(s.log, mk, marked)
		bt.marker = nil
	}
	if why := row.unfit(); why != "" {
		s.srv.combine.markUnfit(s.srv.ruleSet(), x.cand.rule.Name)
		s.log.Info("combining is off for this rule: its column cannot be combined exactly",
			zap.String("rule", x.cand.rule.Name), zap.String("reason", why))
		return abandonBatch(s.be, fmt.Errorf("%w: %s", errBatchAbandoned, why))
	}
	bt.members = s.srv.combine.more(x.cand.row, bt.members, s.srv.combineMax(x.cand.rule))
	bt.results = make([]combineResult, len(bt.members))
	run, ok := decideBatch(x.cand, bt.members, row, bt.results)
	if !ok {
		return abandonBatch(s.be, fmt.Errorf("%w: a value would leave the column's range", errBatchAbandoned))
	}
	if s.txn.held() && (s.txn.locks.Err() != nil || !s.txn.locks.Valid()) {
		return abandonBatch(s.be, fmt.Errorf("%w: lease lost before COMMIT", errBatchAbandoned))
	}
	run.thread = b.threadID
	bt.run = run
	update := ""
	if net := run.after - run.before; net != 0 {
		if update, err = x.cand.c.Update(net); err != nil {
			return abandonBatch(s.be, err)
		}
	}
	if err := s.srv.combine.atStage("before commit", b); err != nil {
		return abandonBatch(s.be, err)
	}
	if out, err := s.srv.combine.commitBatch(b, update); out != combineDone {
		return out, err
	}
	gtid := s.srv.batchGTID(b)
	for i := range bt.results {
		bt.results[i].outcome, bt.results[i].index, bt.results[i].gtid = combineDone, row.index, gtid
	}
	return combineDone, nil
}

// beginCombined sends START TRANSACTION, the batch's locking read and,
// unless mark is "", the statement that writes the batch's marker,
// together, and reads their answers. marked is MariaDB's error for the
// marker (the batch goes on without one); err ends the batch.
func beginCombined(b *backendConn, q, mark string) (row combinedRow, marked, err error) {
	for _, c := range []string{"START TRANSACTION", q, mark} {
		if c == "" {
			continue
		}
		if err := b.writeCommand(append([]byte{mysql.COM_QUERY}, c...)); err != nil {
			return combinedRow{}, nil, err
		}
	}
	began := readOK(b)
	if began != nil && !isMySQLErr(began) {
		return combinedRow{}, nil, began
	}
	row, err = readCombinedResult(b)
	if err != nil && !isMySQLErr(err) {
		return combinedRow{}, nil, err
	}
	if mark != "" {
		if marked = readOK(b); marked != nil && !isMySQLErr(marked) {
			return combinedRow{}, nil, marked
		}
	}
	switch {
	case began != nil:
		return combinedRow{}, nil, began // the read ran outside a transaction
	case err != nil:
		return combinedRow{}, nil, err
	}
	return row, marked, nil
}

// commitBatch sends the net UPDATE (none when update is "") and COMMIT
// together and reads their answers. An UPDATE that failed or changed no
// row left nothing of the batch for COMMIT to commit: combineAlone.
func (c *combiner) commitBatch(b *backendConn, update string) (combineOutcome, error) {
	if update != "" {
		if err := b.writeCommand(append([]byte{mysql.COM_QUERY}, update...)); err != nil {
			return combineAlone, err // no COMMIT sent: the server rolls the batch back
		}
	}
	if err := b.writeCommand(append([]byte{mysql.COM_QUERY}, "COMMIT"...)); err != nil {
		return combineUnknown, err
	}
	if err := c.atStage("commit sent", b); err != nil {
		b.broken = true
		return combineUnknown, err
	}
	var updated error
	if update != "" {
		p, err := b.read()
		switch {
		case err != nil:
			return combineUnknown, err
		case p[0] == mysql.ERR_HEADER:
			updated = parseErrPayload(p)
		case p[0] != mysql.OK_HEADER:
			b.broken = true
			return combineUnknown, fmt.Errorf("proxy: unexpected reply 0x%x to a combined UPDATE", p[0])
		default:
			if n, _, _, _ := readLenEncInt(p, 1); n != 1 {
				updated = fmt.Errorf("%w: the net UPDATE changed %d rows", errBatchAbandoned, n)
			}
		}
	}
	committed := readOK(b)
	switch {
	case committed != nil && !isMySQLErr(committed):
		return combineUnknown, committed
	case committed != nil:
		return abandonBatch(b, committed)
	case updated != nil:
		return combineAlone, updated
	}
	return combineDone, nil
}

// readOK reads the answer to a command that answers OK or ERR: nil, the
// backend's error, or a connection failure.
func readOK(b *backendConn) error {
	p, err := b.read()
	switch {
	case err != nil:
		return err
	case p[0] == mysql.ERR_HEADER:
		return parseErrPayload(p)
	case p[0] != mysql.OK_HEADER:
		b.broken = true
		return fmt.Errorf("proxy: unexpected reply 0x%x from backend", p[0])
	}
	if st, ok := okStatus(p); ok {
		b.status = st
	}
	return nil
}

// batchGTID is the batch's GTID when read-your-writes needs it ("" when
// not, or when it cannot be read: members then read from the primary).
func (s *Server) batchGTID(b *backendConn) string {
	if s.loaded().router == nil || !s.config().Backends.RYW() {
		return ""
	}
	v, err := b.queryValue("SELECT @@last_gtid")
	if err != nil {
		return ""
	}
	return string(v)
}

// abandonBatch rolls back a batch whose COMMIT was not sent: its
// members run alone.
func abandonBatch(b *backendConn, cause error) (combineOutcome, error) {
	if !b.broken {
		_ = b.nc.SetDeadline(time.Now().Add(rollbackTimeout))
		if err := b.simpleCommand(append([]byte{mysql.COM_QUERY}, "ROLLBACK"...)); err != nil && !isMySQLErr(err) {
			b.broken = true
		}
		_ = b.nc.SetDeadline(time.Time{})
	}
	if cause == nil {
		cause = errBatchAbandoned
	}
	return combineAlone, cause
}

// decideBatch decides each member in arrival order against the running
// value, as MariaDB would have run them one after another: a member
// whose floor holds changes the value by its delta, unless the rule's
// min would be crossed (a conflict, answered as the rewrite answers it).
// ok is false when a value would leave the column's range.
func decideBatch(cand combineCandidate, batch []*member, row combinedRow, results []combineResult) (batchRun, bool) {
	run := batchRun{before: row.value, after: row.value}
	if row.rows == 0 {
		return run, true // no row: no member matches
	}
	v := row.value
	var floor *big.Rat
	if rw := cand.rule.Rewrite; rw != nil && rw.Min != nil {
		floor = new(big.Rat).SetFloat64(*rw.Min)
	}
	for i, m := range batch {
		c := m.c
		if c.Delta > combineLimit || c.Delta < -combineLimit {
			return run, false
		}
		if c.HasFloor && v < c.Floor {
			continue
		}
		next := v + c.Delta
		if floor != nil && floor.Cmp(new(big.Rat).SetInt64(next)) > 0 {
			results[i].conflict = true
			continue
		}
		if next < row.lo || next > row.hi {
			return run, false
		}
		results[i].matched, results[i].changed = true, c.Delta != 0
		v = next
	}
	run.after = v
	return run, true
}

// combinedRow is the batch's read of the row: its value, the range of
// the column's type, and what makes it unfit for combining.
type combinedRow struct {
	value    int64
	lo, hi   int64
	rows     int
	null     bool
	typ      byte
	unsigned bool
	index    uint16 // SERVER_QUERY_NO_*INDEX_USED of the read
}

// unfit says why the row's column cannot be combined exactly ("" when it
// can): not one row, NULL, not a signed integer type.
func (r combinedRow) unfit() string {
	switch {
	case r.rows > 1:
		return "the key names several rows"
	case r.null:
		return "the column is NULL"
	case r.unsigned:
		return "the column is UNSIGNED (MariaDB errors where a signed one goes below 0)"
	case r.hi == 0:
		return "the column is not an integer"
	}
	return ""
}

// integerRange is the range of a signed integer column type, within
// combineLimit; hi is 0 for any other type.
func integerRange(typ byte) (lo, hi int64) {
	switch typ {
	case mysql.MYSQL_TYPE_TINY:
		return math.MinInt8, math.MaxInt8
	case mysql.MYSQL_TYPE_SHORT:
		return math.MinInt16, math.MaxInt16
	case mysql.MYSQL_TYPE_INT24:
		return -1 << 23, 1<<23 - 1
	case mysql.MYSQL_TYPE_LONG:
		return math.MinInt32, math.MaxInt32
	case mysql.MYSQL_TYPE_LONGLONG:
		return -combineLimit, combineLimit
	}
	return 0, 0
}

// readCombinedRow runs the batch's locking read and reads its one column.
// A row that does not exist reads as rows 0 (every member matches
// nothing).
func readCombinedRow(b *backendConn, q string) (combinedRow, error) {
	if err := b.writeCommand(append([]byte{mysql.COM_QUERY}, q...)); err != nil {
		return combinedRow{}, err
	}
	return readCombinedResult(b)
}

// readCombinedResult reads the answer to the batch's locking read.
func readCombinedResult(b *backendConn) (combinedRow, error) {
	var row combinedRow
	p, err := b.read()
	if err != nil {
		return row, err
	}
	if p[0] == mysql.ERR_HEADER {
		return row, parseErrPayload(p)
	}
	if n, _, _, err := readLenEncInt(p, 0); err != nil || n != 1 {
		b.broken = true
		return row, fmt.Errorf("proxy: the combined read answered %d columns", n)
	}
	if p, err = b.read(); err != nil {
		return row, err
	}
	if err := row.column(p); err != nil {
		b.broken = true
		return row, err
	}
	if err := b.skipColumns(0); err != nil {
		return row, err
	}
	deprecate := b.key.caps&mysql.CLIENT_DEPRECATE_EOF != 0
	for {
		p, err := b.read()
		if err != nil {
			return row, err
		}
		if p[0] == mysql.ERR_HEADER {
			return row, parseErrPayload(p)
		}
		if isEOF(p, deprecate) {
			b.status = resultStatus(p, deprecate)
			row.index = b.status & (mysql.SERVER_STATUS_NO_GOOD_INDEX_USED | mysql.SERVER_STATUS_NO_INDEX_USED)
			if row.rows == 0 {
				row.lo, row.hi = integerRange(row.typ) // no row: nothing to decide
			}
			return row, nil
		}
		row.rows++
		if row.rows == 1 {
			if err := row.read(p); err != nil {
				b.broken = true
				return row, err
			}
		}
	}
}

// column reads the column definition's type and UNSIGNED flag.
func (r *combinedRow) column(p []byte) error {
	pos := 0
	for range 6 {
		_, next, err := readLenEncString(p, pos)
		if err != nil {
			return err
		}
		pos = next
	}
	_, pos, _, err := readLenEncInt(p, pos)
	if err != nil || pos+9 > len(p) {
		return errors.New("proxy: short column definition")
	}
	r.typ = p[pos+6]
	r.unsigned = p[pos+7]&mysql.UNSIGNED_FLAG != 0
	return nil
}

// read reads the value of the row's one column.
func (r *combinedRow) read(p []byte) error {
	if p[0] == 0xfb {
		r.null = true
		return nil
	}
	v, _, err := readLenEncString(p, 0)
	if err != nil {
		return err
	}
	r.lo, r.hi = integerRange(r.typ)
	if r.hi == 0 || r.unsigned {
		return nil
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < r.lo || n > r.hi {
		r.hi = 0 // outside what the batch computes with: not combined
		return nil
	}
	r.value = n
	return nil
}
