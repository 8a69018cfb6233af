package proxy

import (
	"encoding/binary"
	"errors"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Current reads. Under REPEATABLE READ InnoDB answers a plain SELECT from
// the snapshot its transaction took at its first read, which may be older
// than the row lock lockproxy has just taken for it (read_in_txn): another
// session may have changed and committed the row in between, under that
// same lock. The read would then show the application a value that is no
// longer there, and the write it computes from it loses the other
// session's update. So a plain SELECT that takes read_in_txn locks is sent
// with LOCK IN SHARE MODE, which InnoDB answers from the latest committed
// row (and share-locks it; lockproxy holds the row's lock, so no other
// lockproxy session contends for it). The planner marks such statements
// (plan.currentRead) and refuses the forms this cannot be done for.

// currentReadText returns the text to send for a COM_QUERY command whose
// plan has current reads (each proven by the planner: CurrentReadOK): the
// statements' own texts (comments blanked, executable comments expanded,
// as the server reads them), the marked ones with their clauses, joined
// by semicolons. sql is the client's text of a command planned from its
// shape (parser.Cache.AnalyzeShaped: shaped true), whose literals it
// holds; a shaped text is one statement and has no comments. ok is false
// if a text's tokens do not line up with the proof's (not expected: the
// caller refuses the command).
func currentReadText(pl plan, sql string, shaped bool) (text string, ok bool) {
	an := pl.an
	if shaped {
		return an.Stmts[0].AsCurrentRead(sql)
	}
	texts := make([]string, len(an.Stmts))
	for i, f := range an.Stmts {
		texts[i] = f.Text
	}
	for _, i := range pl.currentRead {
		if texts[i], ok = an.Stmts[i].AsCurrentRead(texts[i]); !ok {
			return "", false
		}
	}
	return strings.Join(texts, ";"), true
}

// currentReadExecute returns the execute packet p (a COM_STMT_EXECUTE of
// st, whose one statement the planner marked current) addressed to st's
// current-read twin on the primary: the same statement with LOCK IN SHARE
// MODE, prepared there the first time it is
// needed and given parameter types the first time it runs.
func (st *stmt) currentReadExecute(be *backendConn, db string, pl plan, p []byte) ([]byte, error) {
	if st.currentID == 0 {
		if st.db != db {
			// The twin would name the tables of the database current now.
			return nil, errorf(errRejected, "rule %s: this prepared read in a transaction takes row locks (read_in_txn) and runs as a current read, which lockproxy prepares when first needed, and the session's database is no longer the one it was prepared in (%q); prepare it again in this database", pl.guard.rule, st.db)
		}
		f := pl.an.Stmts[0]
		text, ok := f.AsCurrentRead(f.Text)
		if !ok {
			return nil, errorf(errRejected, "rule %s: this prepared read in a transaction takes row locks and runs as a current read, which lockproxy could not make of it", pl.guard.rule)
		}
		id, err := be.prepare(text)
		if err != nil {
			return nil, err
		}
		st.currentID, st.currentTyped = id, false
	}
	out := append([]byte(nil), p...)
	binary.LittleEndian.PutUint32(out[1:], st.currentID)
	if st.numParams == 0 {
		return out, nil
	}
	if _, bound := executeParamTypes(out, st.numParams); bound {
		st.currentTyped = true
		return out, nil
	}
	if !st.currentTyped {
		var err error
		if out, err = withParamTypes(out, st.numParams, st.paramTypes); err != nil {
			return nil, errorf(errWrongArguments, "Incorrect arguments to mysqld_stmt_execute")
		}
		st.currentTyped = true
	}
	return out, nil
}

// closeCurrentRead closes st's current-read twin on the primary, if it
// has one (COM_STMT_CLOSE has no answer).
func (st *stmt) closeCurrentRead(b *backendConn) {
	if st.currentID == 0 {
		return
	}
	_ = b.writeCommand(binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_CLOSE}, st.currentID))
	st.currentID = 0
}

// isKindError reports whether err is an error lockproxy answers itself.
func isKindError(err error) bool {
	var k *kindError
	return errors.As(err, &k)
}
