package proxy

import (
	"sync"

	"github.com/lockproxy/lockproxy/parser"

	"github.com/lockproxy/lockproxy/router"
	"github.com/lockproxy/lockproxy/rules"
)

// writeMarks are the latest GTIDs written through this lockproxy, by each
// user and by anyone, for backends.read_your_writes user and global: a
// replica serves a read only once it has applied the mark of the read's
// scope. Safe for concurrent use.
type writeMarks struct {
	mu     sync.Mutex
	all    router.GTIDPos
	byUser map[string]router.GTIDPos
}

// note records that user wrote gtid (a GTID or position the primary
// reported). A GTID that does not parse is ignored: the writer's own
// session still waits for it (routeState.lastGTID).
func (w *writeMarks) note(user, gtid string) {
	pos, err := router.ParseGTIDPos(gtid)
	if err != nil || len(pos) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = w.all.Merge(pos)
	if w.byUser == nil {
		w.byUser = map[string]router.GTIDPos{}
	}
	w.byUser[user] = w.byUser[user].Merge(pos)
}

// want is the position a replica must have applied before it serves a
// read of user's under scope, merged with own (the session's last write):
// own alone under session.
func (w *writeMarks) want(scope rules.ReadYourWrites, user, own string) string {
	var mark router.GTIDPos
	w.mu.Lock()
	switch scope {
	case rules.RYWUser:
		mark = w.byUser[user]
	case rules.RYWGlobal:
		mark = w.all
	}
	w.mu.Unlock()
	if len(mark) == 0 {
		return own
	}
	pos, err := router.ParseGTIDPos(own)
	if err != nil {
		return own // does not parse: the wait is refused and the primary reads
	}
	return pos.Merge(mark).String()
}

// sharesWrites reports whether sessions' writes must be known to
// other sessions' reads: read_your_writes user or global.
func (s *Server) sharesWrites() bool {
	scope := s.config().Backends.ReadYourWrites
	return (scope == rules.RYWUser || scope == rules.RYWGlobal) && s.loaded().router != nil
}

// mayWrite reports whether an may have written (or committed) anything:
// all but plain reads and SETs, which write nothing a replica must apply.
func mayWrite(an *parser.Analysis) bool {
	if an == nil || an.Unparsed {
		return true
	}
	for _, f := range an.Stmts {
		switch f.Kind {
		case parser.KindSelect, parser.KindShow, parser.KindExplain, parser.KindUse, parser.KindSet:
			if f.Impure != "" {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// shareWrites, under read_your_writes user or global, learns the GTID of
// what the session just wrote outside a transaction (or committed) and
// makes it the mark of the session's user and of everyone, so that other
// sessions' next reads wait for it. relay calls it once the primary has
// answered and before the client's copy of the answer is flushed
// (exchange.shareOnEnd): a pool that reads on another connection once this
// one has its OK finds the mark in place. Under session each session
// learns its last GTID lazily, before its own next replica read.
func (r *routeState) shareWrites(x *exchange, marks *writeMarks, be *backendConn, user string, inTxn bool) {
	if inTxn {
		return // the COMMIT shares what the transaction wrote
	}
	if err := r.learnLastGTID(be); err == nil {
		x.sharedGTID = true
		if r.lastGTID != "" {
			marks.note(user, r.lastGTID)
		}
	}
}
