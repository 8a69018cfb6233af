package proxy

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/rules"
	"go.uber.org/zap"
)

// Batch markers (rules[].combine.marker_table). Each batch of two or more
// writes, in its own transaction, its batch id into a row of the marker
// table that belongs to this instance and one slot: a slot is the batch's
// alone from its start until its outcome is known, so no two batches in
// flight write the same row (batches of different rows never wait on each
// other there) and the table holds at most as many rows per instance as
// batches were ever in flight at once. When the connection dies after
// COMMIT was sent, lockproxy waits on a new connection until the dead
// connection's thread has ended, then reads the slot's row: its batch id
// there means the batch committed; any other value (or none), that it
// rolled back. That holds for either lock mode, whatever other instances
// wrote to the row meanwhile.

// markerDDL creates the marker table db.table.
func markerDDL(db, table string) []string {
	q := quoteIdent(db) + "." + quoteIdent(table)
	return []string{
		"CREATE DATABASE IF NOT EXISTS " + quoteIdent(db),
		"CREATE TABLE IF NOT EXISTS " + q + ` (
  instance VARBINARY(255) NOT NULL COMMENT 'the lockproxy instance',
  slot INT UNSIGNED NOT NULL COMMENT 'a batch in flight on it',
  batch BIGINT UNSIGNED NOT NULL COMMENT 'the last batch of the slot that committed',
  at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (instance, slot)
) ENGINE=InnoDB COMMENT='lockproxy: combined batch markers (rules[].combine.marker_table)'`,
	}
}

// markers hands out batch ids and slots, and remembers, per marker table
// and backend user, whether the table was made ready or found unusable.
type markers struct {
	mu    sync.Mutex
	seq   uint64 // the last batch id: starts at the clock, so it grows across restarts
	free  []uint32
	slots uint32
	ready map[markerUse]*rules.RuleSet // tables made ready (or found present) under those rules
	unfit map[markerUse]*rules.RuleSet // tables the user cannot write, under those rules
}

// markerUse is a marker table as one backend user writes it.
type markerUse struct {
	table, user string
}

// batchMarker is one batch's marker: where it writes and what.
type batchMarker struct {
	use      markerUse
	db, tbl  string
	instance string
	slot     uint32
	batch    uint64
}

// take gives a batch its id and a free slot.
func (m *markers) take() (slot uint32, batch uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seq == 0 {
		m.seq = uint64(time.Now().UnixNano())
	}
	m.seq++
	if n := len(m.free); n > 0 {
		slot = m.free[n-1]
		m.free = m.free[:n-1]
		return slot, m.seq
	}
	m.slots++
	return m.slots, m.seq
}

// put gives a slot back once its batch's outcome is known.
func (m *markers) put(slot uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.free = append(m.free, slot)
}

func (m *markers) state(u markerUse, rs *rules.RuleSet) (ready, unfit bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ready[u] == rs, m.unfit[u] == rs
}

func (m *markers) note(u markerUse, rs *rules.RuleSet, ready bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ready == nil {
		m.ready, m.unfit = map[markerUse]*rules.RuleSet{}, map[markerUse]*rules.RuleSet{}
	}
	if ready {
		m.ready[u] = rs
	} else {
		m.unfit[u] = rs
	}
}

// batchMarker prepares the marker of a batch of cand's rule led on b:
// nil when the rule writes none or its table cannot be written by the
// session's user under the rules in force (then the row is read again
// instead). The first batch of a table and user makes the table, if it
// is missing, on b before the batch's transaction begins.
func (s *Server) batchMarker(log *zap.Logger, user string, cand combineCandidate, b *backendConn) *batchMarker {
	db, tbl, ok := cand.rule.Combine.Marker()
	if !ok {
		return nil
	}
	rs := s.ruleSet()
	u := markerUse{table: db + "." + tbl, user: user}
	ms := &s.combine.marks
	ready, unfit := ms.state(u, rs)
	if unfit {
		return nil
	}
	if !ready {
		for _, q := range markerDDL(db, tbl) {
			if err := b.simpleCommand(append([]byte{mysql.COM_QUERY}, q...)); err != nil {
				if !isMySQLErr(err) {
					return nil // the batch finds the connection broken
				}
				// Made by someone else, maybe: the batch's INSERT tells.
				log.Debug("combine marker table not created", zap.String("table", u.table), zap.Error(err))
				break
			}
		}
		ms.note(u, rs, true)
	}
	slot, batch := ms.take()
	return &batchMarker{use: u, db: db, tbl: tbl, instance: s.instance, slot: slot, batch: batch}
}

// write is the statement that writes the marker in the batch's
// transaction.
func (m *batchMarker) write() string {
	return fmt.Sprintf("INSERT INTO %s.%s (instance, slot, batch) VALUES (X'%s', %d, %d) ON DUPLICATE KEY UPDATE batch = VALUES(batch)",
		quoteIdent(m.db), quoteIdent(m.tbl), hex.EncodeToString([]byte(m.instance)), m.slot, m.batch)
}

// read is the query that reads the slot's marker.
func (m *batchMarker) read() string {
	return fmt.Sprintf("SELECT batch FROM %s.%s WHERE instance = X'%s' AND slot = %d",
		quoteIdent(m.db), quoteIdent(m.tbl), hex.EncodeToString([]byte(m.instance)), m.slot)
}

// markerRefused records that the batch's marker could not be written (err, a
// MariaDB error): the table's batches of this user write none under the
// rules in force, and their unknown outcomes are learnt from the row.
func (s *Server) markerRefused(log *zap.Logger, m *batchMarker, err error) {
	s.combine.marks.note(m.use, s.ruleSet(), false)
	log.Warn("combined batches of this user write no marker: the marker table cannot be written; an unknown commit outcome is learnt from the row instead",
		zap.String("table", m.use.table), zap.String("user", m.use.user), zap.Error(err))
}

// committed reads, on be, whether the marker's batch committed: ok is
// false when the marker cannot be read.
func (m *batchMarker) committed(be *backendConn) (committed, ok bool) {
	v, err := be.queryValue(m.read())
	switch {
	case errors.Is(err, errNoRow):
		return false, true // the slot was never written: nor by this batch
	case err != nil:
		return false, false
	}
	got, err := strconv.ParseUint(string(v), 10, 64)
	return err == nil && got == m.batch, true
}
