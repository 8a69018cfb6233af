package rules

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockproxy/lockproxy/parser"
)

// pendingTuple is one row key waiting for values: literals, or placeholders
// to be bound at execute time.
type pendingTuple struct {
	rule          *Rule
	schema, table string
	info          *TableInfo
	via           string // the view the statement names instead of the table
	cols          []string
	vals          []parser.Value
	uses          []Use
	read          bool // a read in a transaction: see builder.read
	target, only  bool // see builder.target and builder.only
	// several: the statement names more than one row tuple for the rule
	// (an IN list, ORs, several VALUES rows); set for tuples waiting for
	// parameters.
	several bool
}

// builder accumulates a Decision's hits, keys and unkeyed rules.
type builder struct {
	pending []pendingTuple
	keys    []Key
	unk     []Unkeyed
	reads   []Unkeyed // unkeyed read_in_txn reads on_unkeyed_read lets run
	hidden  []Hidden
	// read: the table occurrence being keyed is a plain read in a
	// transaction, governed by on_unkeyed_read rather than on_unkeyed.
	read bool
	// via is the view being matched, named in unkeyed reasons.
	via string
	// cs: the character sets the statement's text values arrive in.
	cs TextCharsets
	// target: the rule being keyed rewrites or fences the one table of
	// a SELECT or UPDATE, so its keys and unkeyed verdicts are noted for
	// Decision.RewriteTarget and FenceTarget too (tkeys, tunk); only: it
	// takes no lock for this statement, so they are noted there alone.
	target, only bool
	tkeys        []Key
	tunk         []*Rule
}

// hit notes that rule r applies to the statement d decides, once.
// d.Rules is the set of rules seen so far (a few at most: a linear
// search costs less than a map per statement).
func (b *builder) hit(d *Decision, r *Rule) {
	if slices.Contains(d.Rules, r) {
		return
	}
	if d.Rule == nil {
		d.Rule = r
	}
	d.Rules = append(d.Rules, r)
	if r.Route == RoutePrimary {
		d.RoutePrimary = true
	}
}

func (b *builder) unkeyed(r *Rule, schema, table, reason string) {
	if b.target {
		b.tunk = append(b.tunk, r)
	}
	if b.only {
		return
	}
	name := table
	if schema != "" {
		name = schema + "." + table
	}
	if b.via != "" {
		reason += "; through view " + b.via
	}
	u := Unkeyed{Rule: r, Table: name, Reason: reason, Read: b.read}
	if u.Read && !u.Rejects() {
		b.reads = append(b.reads, u)
		return
	}
	b.unk = append(b.unk, u)
}

// tuples counts the row tuples the statement names for each rule. Only
// a rule's own tuples count: the values of its key columns are the ones
// MariaDB may compare as one list.
func (b *builder) tuples() map[*Rule]int {
	n := make(map[*Rule]int, 2)
	for _, t := range b.pending {
		n[t.rule]++
	}
	return n
}

// finish resolves the literal tuples and fills d.
func (b *builder) finish(d Decision) Decision {
	var waiting []pendingTuple
	for _, t := range b.pending {
		if t.needsParams() {
			waiting = append(waiting, t)
			continue
		}
		b.resolve(t, nil)
	}
	if len(waiting) > 0 {
		n := b.tuples()
		for i := range waiting {
			waiting[i].several = n[waiting[i].rule] > 1
		}
	}
	d.pending = waiting
	d.cs = b.cs
	d.tkeys, d.tunk = b.tkeys, b.tunk
	d.NeedParams = len(waiting) > 0
	d.done = sortKeys(b.keys)
	return b.seal(d)
}

// seal sets Keys (unless still waiting for parameters) and Unkeyed.
func (b *builder) seal(d Decision) Decision {
	d.Unkeyed = b.unk
	d.UnkeyedReads = b.reads
	d.Hidden = b.hidden
	d.Reject = len(d.Hidden) > 0
	for _, u := range d.Unkeyed {
		if u.Rejects() {
			d.Reject = true
		}
	}
	if d.Reject {
		d.Keys = nil // the statement will not run
		return d
	}
	if !d.NeedParams {
		d.Keys = d.done
	}
	return d
}

func (t pendingTuple) needsParams() bool {
	for _, v := range t.vals {
		if v.Kind == parser.ValueParam {
			return true
		}
	}
	return false
}

// resolve normalises a tuple (binding placeholders from params) into a key,
// or records the rule as unkeyed.
func (b *builder) resolve(t pendingTuple, params []any) {
	b.via, b.read, b.target, b.only = t.via, t.read, t.target, t.only
	defer func() { b.via, b.read, b.target, b.only = "", false, false, false }()
	var buf [4][]byte // most keys have a column or two: no allocation
	vals := buf[:0]
	if len(t.vals) > len(buf) {
		vals = make([][]byte, 0, len(t.vals))
	}
	vals = vals[:len(t.vals)]
	for i, v := range t.vals {
		if t.several && temporalAgainstOther(t.info.Column(t.cols[i]), v, params) {
			b.unkeyed(t.rule, t.schema, t.table, fmt.Sprintf("%s: parameter %d: a date or time among several values; MariaDB may compare the whole list as dates, where other numbers name the same date", t.cols[i], v.Param+1))
			return
		}
		n, err := normalizeBound(t.info.Column(t.cols[i]), v, t.uses[i], params, b.cs)
		sensitive := t.rule.IsSensitive(t.cols[i])
		what := t.cols[i]
		if err != nil && v.Kind == parser.ValueParam {
			what = fmt.Sprintf("%s: parameter %d", t.cols[i], v.Param+1)
		}
		switch {
		case err != nil && sensitive:
			b.unkeyed(t.rule, t.schema, t.table, fmt.Sprintf("%s: value cannot name a row (not shown: the column is sensitive)", what))
			return
		case err != nil:
			b.unkeyed(t.rule, t.schema, t.table, fmt.Sprintf("%s: %s", what, strings.TrimPrefix(err.Error(), ErrUnkeyable.Error()+": ")))
			return
		case sensitive:
			n = HideValue(n)
		}
		vals[i] = n
	}
	k := Key{Name: EncodeKey(t.schema, t.table, vals), Rule: t.rule.Name}
	if t.target {
		b.tkeys = append(b.tkeys, k)
	}
	if !t.only {
		b.keys = append(b.keys, k)
	}
}

// normalizeBound keys a literal, or a placeholder bound from params: a
// Param (typed, as COM_STMT_EXECUTE sent it) through NormalizeParam, a
// plain Go value through ParamValue and Normalize.
func normalizeBound(col *Column, v parser.Value, use Use, params []any, cs TextCharsets) ([]byte, error) {
	if v.Kind != parser.ValueParam {
		return NormalizeIn(col, v, use, cs)
	}
	if v.Param < 0 || v.Param >= len(params) {
		return nil, unkeyable("placeholder ?%d has no value", v.Param)
	}
	if p, ok := params[v.Param].(Param); ok {
		return NormalizeParamIn(col, p, use, cs)
	}
	bound, err := ParamValue(params[v.Param])
	if err != nil {
		return nil, unkeyable("%v", err)
	}
	return NormalizeIn(col, bound, use, cs)
}

// sortKeys sorts by name and drops repeats (keeping the first rule).
func sortKeys(keys []Key) []Key {
	if len(keys) < 2 {
		return keys
	}
	slices.SortStableFunc(keys, func(a, b Key) int { return strings.Compare(a.Name, b.Name) })
	out := keys[:0]
	for i, k := range keys {
		if i > 0 && k.Name == out[len(out)-1].Name {
			continue
		}
		out = append(out, k)
	}
	return out
}

// Bind returns the Decision with the keys that came from placeholders
// resolved from the execute-time parameters: a Param each, as the client
// typed it on the wire (normalised by NormalizeParam), or a plain Go value
// (nil, integers, floats, []byte, string, bool; see ParamValue). A parameter
// that cannot name a row (NULL, out of range) makes its rule unkeyed, as
// a literal would. Bind on a Decision without NeedParams returns it as is.
func (d Decision) Bind(params []any) Decision {
	if !d.NeedParams {
		return d
	}
	b := builder{keys: append([]Key(nil), d.done...), unk: append([]Unkeyed(nil), d.Unkeyed...),
		reads: append([]Unkeyed(nil), d.UnkeyedReads...), hidden: d.Hidden,
		tkeys: append([]Key(nil), d.tkeys...), tunk: append([]*Rule(nil), d.tunk...),
		cs: d.cs}
	for _, t := range d.pending {
		b.resolve(t, params)
	}
	d.pending = nil
	d.NeedParams = false
	d.done = sortKeys(b.keys)
	d.tkeys, d.tunk = b.tkeys, b.tunk
	return b.seal(d)
}

// temporalAgainstOther reports whether v is bound to a DATE, DATETIME,
// TIMESTAMP or TIME parameter meeting a column that is not temporal. Alone
// (col = ?) such a parameter compares as the number NormalizeParam keys; in
// an IN list beside other values MariaDB may compare the list as
// temporal values instead, so 1001 matches DATE 2000-10-01 too.
func temporalAgainstOther(col *Column, v parser.Value, params []any) bool {
	if v.Kind != parser.ValueParam || v.Param < 0 || v.Param >= len(params) || col == nil {
		return false
	}
	p, ok := params[v.Param].(Param)
	if !ok || (p.Type != ParamDate && p.Type != ParamDateTime && p.Type != ParamTime) {
		return false
	}
	f := family(col.DataType)
	return f != famTemporal && f != famTime
}
