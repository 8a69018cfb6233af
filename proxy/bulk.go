package proxy

import (
	"encoding/binary"
	"fmt"

	"github.com/lockproxy/lockproxy/rules"
)

// COM_STMT_BULK_EXECUTE (MariaDB's MARIADB_CLIENT_STMT_BULK_OPERATIONS):
// one command runs a prepared INSERT, UPDATE, DELETE or REPLACE for many
// parameter sets. Connector/Node's batch() sends it.
//
// The payload: command 0xfa, the statement id, 2 bytes of flags, the
// parameter types (2 bytes each) when the flags say so, then the rows up
// to the end of the packet, each parameter of each row an indicator byte
// (bulkNone: its value follows in the binary protocol; NULL, DEFAULT,
// IGNORE: no value).
const (
	comStmtBulkExecute = 0xfa

	bulkSendTypes = 128 // the flag: parameter types follow the flags

	bulkNone   = 0
	bulkNull   = 1
	bulkHeader = 7 // command, statement id, flags
)

// bulkExecute serves COM_STMT_BULK_EXECUTE. A statement no rule guards
// goes to the primary as sent. One a rule guards runs only under the
// locks of every row of every parameter set, taken together before it is
// sent, as the keys of one execute would be; or it is refused, not run,
// where lockproxy cannot key every row or the rule would have a single
// execute rewritten, fenced or run as a current read (bulkPlan).
func (s *session) bulkExecute(p []byte) error {
	st, ok := s.prep.lookup(p)
	if !ok {
		return s.writeErrAt(1, unknownStmt(p, "mysqld_stmt_bulk_execute"))
	}
	if st.local || len(p) < bulkHeader {
		return s.writeErrAt(1, errorf(errWrongArguments, "Incorrect arguments to mysqld_stmt_bulk_execute"))
	}
	done, refused := s.admitExecute(st)
	defer done()
	if refused != nil {
		return s.writeErrAt(1, refused)
	}
	// Long data is not part of a bulk execute: MariaDB answers it.
	longSent := st.longSent
	st.long, st.longCut, st.longSent = nil, nil, false
	types, rows, bound := bulkTypes(p, st)
	if bound {
		st.bindTypes(s, types)
	} else if s.mux.on && st.numParams > 0 && len(st.paramTypes) < 2*st.numParams {
		// The primary's statement may be one a connection keeps for every
		// session (pool_stmt.go), typed by another: never left to guess.
		return s.notExecuted(st, longSent, errorf(errNoParamTypes, "statement %d executed in bulk without parameter types: Malformed communication packet", st.id))
	}
	r := request{p: p, st: st, an: st.an, bulk: true, longSent: longSent}
	if st.an != nil {
		pl, err := bulkPlan(s.planEnv(), st, types, p[rows:])
		if err != nil {
			return s.notExecuted(st, longSent, err)
		}
		r.planned = &pl
	}
	return s.serve(r)
}

// bulkTypes returns the parameter types a bulk execute's rows are read
// with (those it sends, else those in force) and where its rows start;
// bound reports whether it sent them.
func bulkTypes(p []byte, st *stmt) (types []byte, rows int, bound bool) {
	flags := binary.LittleEndian.Uint16(p[5:])
	if flags&bulkSendTypes == 0 || st.numParams == 0 {
		return st.paramTypes, bulkHeader, false
	}
	end := bulkHeader + 2*st.numParams
	if end > len(p) {
		return nil, len(p), false
	}
	return p[bulkHeader:end], end, true
}

// bulkPlan plans a guarded statement's bulk execute: the plan of each
// parameter set, their keys merged into one guard. A plan that needs
// more than locks for some row (a rewrite, a fence, a current read) is
// refused for the whole command, and so is one whose rows lockproxy
// cannot read; a row the rules refuse (a key they cannot derive) refuses
// the command as that execute would be refused.
func bulkPlan(env planEnv, st *stmt, types, rows []byte) (plan, error) {
	if pl := makePlan(env, st.an, nil); !pl.needParams || st.numParams == 0 {
		// The keys do not come from the parameters: every row has them.
		return pl, bulkOnly(pl)
	}
	if len(types) < 2*st.numParams {
		return plan{}, errorf(errBadParams, "statement %d bulk executed without parameter types", st.id)
	}
	var merged plan
	seen := map[string]bool{}
	pos, n := 0, 0
	for pos < len(rows) {
		params, next, err := bulkRow(rows, pos, st.numParams, types)
		if err != nil {
			return plan{}, err
		}
		pos = next
		n++
		pl := makePlan(env, st.an, params)
		if pl.guard.reject != nil {
			return pl, nil // beforeCommand answers it, counted as for an execute
		}
		if err := bulkOnly(pl); err != nil {
			return plan{}, err
		}
		if n == 1 {
			merged = pl
			merged.guard.keys = nil
		}
		mergeBulkGuard(&merged.guard, pl.guard, seen)
	}
	if n == 0 {
		return makePlan(env, st.an, nil), nil // no row: MariaDB answers it
	}
	return merged, nil
}

// mergeBulkGuard adds the keys of one row's guard to the command's.
func mergeBulkGuard(g *guard, row guard, seen map[string]bool) {
	for _, k := range row.keys {
		if !seen[k.Name] {
			seen[k.Name] = true
			g.keys = append(g.keys, k)
		}
	}
	if row.waitTimeout > 0 && (g.waitTimeout == 0 || row.waitTimeout < g.waitTimeout) {
		g.waitTimeout = row.waitTimeout
	}
	g.primary = g.primary || row.primary
	if g.rule == "" {
		g.rule = row.rule
	}
}

// bulkOnly refuses a bulk execute whose plan needs more than the locks of
// its rows: a rewritten or fenced UPDATE, a current read, which lockproxy
// makes of a single execute only.
func bulkOnly(pl plan) error {
	var how string
	rule := pl.guard.rule
	switch {
	case pl.rewrite.rule != nil:
		how, rule = "rewrites it (rewrite)", pl.rewrite.rule.Name
	case pl.fence.rule != nil:
		how, rule = "fences it (fence)", pl.fence.rule.Name
	case len(pl.currentRead) > 0:
		how = "runs it as a current read"
	default:
		return nil
	}
	return errorf(errRejected, "rule %s: a bulk execute (COM_STMT_BULK_EXECUTE) of this statement is not run: the rule %s for each execute, which lockproxy does for single executes only; execute it row by row", rule, how)
}

// bulkRow reads one parameter set of a bulk execute at rows[pos:]: its
// values as an execute's (executeParams) and where the next set starts.
// A value whose size lockproxy cannot tell (a type MariaDB reads otherwise
// than the protocol says) leaves the rest unreadable: an error.
func bulkRow(rows []byte, pos, n int, types []byte) ([]any, int, error) {
	out := make([]any, n)
	for i := 0; i < n; i++ {
		if pos >= len(rows) {
			return nil, 0, fmt.Errorf("%w: a bulk row ends before parameter %d", errBadParams, i+1)
		}
		typ, unsigned := types[2*i], types[2*i+1]&0x80 != 0
		ind := rows[pos]
		pos++
		switch ind {
		case bulkNone:
		case bulkNull:
			out[i] = rules.Param{Type: rules.ParamNull, Wire: typ}
			continue
		default: // DEFAULT, IGNORE: the column's default, which names no row here
			out[i] = rules.Param{Type: rules.ParamOther, Wire: typ}
			continue
		}
		prm, next, err := paramValue(rows, pos, typ, unsigned)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: parameter %d: %v", errBadParams, i+1, err)
		}
		if prm.Type == rules.ParamOther {
			return nil, 0, errorf(errRejected, "a bulk execute (COM_STMT_BULK_EXECUTE) binding parameter %d as type %d is not run: lockproxy cannot read the rows after it to key them; execute it row by row", i+1, typ)
		}
		out[i], pos = prm, next
	}
	return out, pos, nil
}

// bulkOnPrimary addresses a bulk execute to the primary's copy of st,
// binding the parameter types in force when it sends none and that copy
// was never given them.
func (st *stmt) bulkOnPrimary(p []byte) []byte {
	flags := binary.LittleEndian.Uint16(p[5:])
	switch {
	case flags&bulkSendTypes != 0 || st.numParams == 0:
		st.primaryTyped = st.primaryTyped || st.numParams > 0
	case !st.primaryTyped && len(st.paramTypes) >= 2*st.numParams:
		out := make([]byte, 0, len(p)+2*st.numParams)
		out = append(out, p[:5]...)
		out = binary.LittleEndian.AppendUint16(out, flags|bulkSendTypes)
		out = append(out, st.paramTypes[:2*st.numParams]...)
		p = append(out, p[bulkHeader:]...)
		st.primaryTyped = true
	}
	binary.LittleEndian.PutUint32(p[1:], st.backendID)
	return p
}
