package proxy

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
)

// maxRemembered bounds how many row values one session remembers; past it
// the oldest beliefs are dropped (a rewrite then simply does not apply).
const maxRemembered = 1024

// capture watches one result set for the guarded column of one row: the
// value the application now believes the row holds (rules[].rewrite).
type capture struct {
	key     string // the row's lock key
	colName string // the guarded column, lowercased
	binary  bool   // binary protocol rows (COM_STMT_EXECUTE)

	col   int    // index of the column in the result, -1 until seen
	types []byte // binary: each column's type
	flags []uint16
	rows  int
	value []byte
	null  bool
	bad   bool // something made the result unusable (large row, several results)
}

func newCapture(key, column string, binary bool) *capture {
	return &capture{key: key, colName: strings.ToLower(column), binary: binary, col: -1}
}

// column notes column definition i of the result. The guarded column is
// the one whose org_name is the column, whatever its alias. An expression
// named like the column (`SELECT stock - reserved AS stock`) has no
// org_name: what the application read there is not the column's value,
// so the result is unusable.
func (c *capture) column(i int, p []byte, extended bool) {
	pos, name, orgName, err := columnFixedAt(p, extended)
	if err != nil || pos+2+4+1+2 > len(p) {
		c.bad = true
		return
	}
	t, flags := p[pos+6], binary.LittleEndian.Uint16(p[pos+7:])
	c.types, c.flags = append(c.types, t), append(c.flags, flags)
	switch {
	case strings.EqualFold(string(orgName), c.colName):
		if c.col >= 0 {
			c.bad = true // the column twice: ambiguous
		}
		c.col = i
	case len(orgName) == 0 && strings.EqualFold(string(name), c.colName):
		c.bad = true
	}
}

// wants reports whether the capture still needs the next row whole: the
// first row of a result that holds the column.
func (c *capture) wants() bool {
	return c != nil && c.rows == 0 && c.col >= 0 && !c.bad
}

// row notes one result row.
func (c *capture) row(p []byte) {
	c.rows++
	if c.rows > 1 || c.col < 0 || c.bad {
		return
	}
	var err error
	if c.binary {
		c.value, c.null, err = binaryRowValue(p, c.col, c.types, c.flags)
	} else {
		c.value, c.null, err = textRowValue(p, c.col)
	}
	if err != nil {
		c.bad = true
	}
}

// belief is the remembered value when the result was one row that held the
// column; ok is false otherwise.
func (c *capture) belief() ([]byte, bool) {
	if c.bad || c.rows != 1 || c.col < 0 || c.null {
		return nil, false
	}
	return c.value, true
}

func textRowValue(p []byte, col int) ([]byte, bool, error) {
	pos := 0
	for i := 0; ; i++ {
		if pos < len(p) && p[pos] == 0xfb {
			if i == col {
				return nil, true, nil
			}
			pos++
			continue
		}
		s, next, err := readLenEncString(p, pos)
		if err != nil {
			return nil, false, err
		}
		if i == col {
			return append([]byte(nil), s...), false, nil
		}
		pos = next
	}
}

func binaryRowValue(p []byte, col int, types []byte, flags []uint16) ([]byte, bool, error) {
	n := len(types)
	pos := 1 + (n+7+2)/8
	if len(p) < pos || col >= n {
		return nil, false, errShortPacket
	}
	nulls := p[1:pos]
	for i := 0; i < n; i++ {
		if nulls[(i+2)/8]&(1<<((i+2)%8)) != 0 {
			if i == col {
				return nil, true, nil
			}
			continue
		}
		v, next, err := binaryValue(p, pos, types[i], flags[i]&mysql.UNSIGNED_FLAG != 0)
		if err != nil {
			return nil, false, err
		}
		if i == col {
			return valueText(v), false, nil
		}
		pos = next
	}
	return nil, false, errShortPacket
}

// valueText renders a decoded binary value in MySQL's text form.
func valueText(v any) []byte {
	switch x := v.(type) {
	case int64:
		return strconv.AppendInt(nil, x, 10)
	case uint64:
		return strconv.AppendUint(nil, x, 10)
	case float64:
		return strconv.AppendFloat(nil, x, 'g', -1, 64)
	case []byte:
		return x
	}
	return nil
}

// belief is a value the session read for a row's guarded column.
type belief struct {
	value   []byte
	session bool // rewrite.scope session: it outlives the transaction
}

// remember records what the session now believes about a row; session
// says whether the belief outlives the current transaction.
func (r *rewriterState) remember(key string, value []byte, session bool) {
	if r.beliefs == nil {
		r.beliefs = make(map[string]belief)
	}
	if _, ok := r.beliefs[key]; !ok && len(r.beliefs) >= maxRemembered {
		clear(r.beliefs)
	}
	r.beliefs[key] = belief{value: value, session: session}
}

func (r *rewriterState) forget(key string) { delete(r.beliefs, key) }

// forgetTxnBeliefs forgets every value whose scope is the transaction.
func (r *rewriterState) forgetTxnBeliefs() {
	for k, b := range r.beliefs {
		if !b.session {
			delete(r.beliefs, k)
		}
	}
}

// scopeBeliefs forgets the values of a transaction that has ended, before
// a command runs: every command outside a transaction (inTxn false), and
// one that begins, commits or rolls back a transaction (or a text
// lockproxy cannot parse, which might), starts with none of them.
func (r *rewriterState) scopeBeliefs(an *parser.Analysis, inTxn bool) {
	if len(r.beliefs) == 0 {
		return
	}
	if !inTxn || endsTxn(an) {
		r.forgetTxnBeliefs()
	}
}

// endsTxn reports whether a command may end the transaction it runs in.
func endsTxn(an *parser.Analysis) bool {
	if an.Unparsed {
		return true
	}
	for _, f := range an.Stmts {
		switch f.Kind {
		case parser.KindBegin, parser.KindCommit, parser.KindRollback, parser.KindRollbackToSavepoint:
			return true
		}
		if f.ImplicitCommit {
			return true
		}
	}
	return false
}
