package rules

import (
	"fmt"
	"strings"

	"github.com/lockproxy/lockproxy/parser"
)

// keysFor derives the row keys of one matched table occurrence into b.
func (rs *RuleSet) keysFor(b *builder, f *parser.Facts, ref parser.TableRef, schema string, cr *compiledRule) {
	info := rs.schema.Table(schema, ref.Name)
	if info == nil && rs.schema.unread != "" {
		b.unkeyed(cr.rule, schema, ref.Name, "the key columns' types and collations could not be read from the primary ("+rs.schema.unread+"), so no key value can be normalised as MariaDB compares it; lockproxy reads them again every backends.schema_refresh")
		return
	}
	insert := f.Insert != nil && ref.Write && (f.Kind == parser.KindInsert || f.Kind == parser.KindReplace)
	use := Compare
	if insert && positional(f.Insert) {
		var reason string
		f, ref, reason = inTableOrder(f, ref, info, b.via != "")
		if reason != "" {
			b.unkeyed(cr.rule, schema, ref.Name, reason)
			return
		}
	}
	if insert {
		use = Assign
		if reason := upsertElsewhere(f, cr, info); reason != "" {
			b.unkeyed(cr.rule, schema, ref.Name, reason)
			return
		}
		if skip, reason := newRowsOnly(f, cr, info); skip {
			return
		} else if reason != "" {
			b.unkeyed(cr.rule, schema, ref.Name, reason)
			return
		}
	}
	tuples, ok := ref.Where.Keys(cr.key)
	if !ok {
		b.unkeyed(cr.rule, schema, ref.Name, noKeysReason(ref, cr))
		return
	}
	if ref.Write {
		moved, err := movedKeys(f, ref, cr, tuples)
		if err != "" {
			b.unkeyed(cr.rule, schema, ref.Name, err)
			return
		}
		for _, m := range moved {
			uses := uniformUses(len(m.vals), use)
			uses[m.col] = Assign
			b.add(cr, schema, ref.Name, info, m.vals, uses)
		}
	}
	for _, t := range tuples {
		if insert && isNewAutoRow(cr, info, t) {
			continue
		}
		b.add(cr, schema, ref.Name, info, t, uniformUses(len(t), use))
	}
}

func uniformUses(n int, use Use) []Use {
	uses := make([]Use, n)
	for i := range uses {
		uses[i] = use
	}
	return uses
}

func (b *builder) add(cr *compiledRule, schema, table string, info *TableInfo, vals []parser.Value, uses []Use) {
	b.pending = append(b.pending, pendingTuple{rule: cr.rule, schema: schema, table: table,
		info: info, via: b.via, cols: cr.key, vals: vals, uses: uses, read: b.read,
		target: b.target, only: b.only})
}

func noKeysReason(ref parser.TableRef, cr *compiledRule) string {
	switch {
	case ref.Where == nil:
		return "the statement has no row condition"
	case ref.Where.Unkeyed:
		return "the row condition is too complex or its rows come from a query"
	}
	return cr.unpinned
}

// newRowsOnly handles an INSERT that leaves out the key column: when the
// key is a single AUTO_INCREMENT column the rows are new and nobody can
// name them yet (skip: no key needed), unless REPLACE or ON DUPLICATE KEY
// UPDATE could hit an existing row through another unique key (reason).
func newRowsOnly(f *parser.Facts, cr *compiledRule, info *TableInfo) (skip bool, reason string) {
	for _, k := range cr.key {
		if !contains(f.Insert.Columns, k) {
			if !autoKey(cr, info) {
				return false, fmt.Sprintf("the INSERT does not give key column %s", k)
			}
			if f.Kind == parser.KindReplace || len(f.Insert.OnDuplicate) > 0 {
				return false, fmt.Sprintf("the upsert leaves out key column %s", k)
			}
			return true, ""
		}
	}
	return false, ""
}

// upsertElsewhere says why a REPLACE or INSERT ... ON DUPLICATE KEY UPDATE
// may change a row its VALUES do not name: on a duplicate in another
// unique key, REPLACE deletes that row and the upsert updates it, whatever
// its own key. "" when the rule's key is the table's only unique key.
func upsertElsewhere(f *parser.Facts, cr *compiledRule, info *TableInfo) string {
	if f.Kind != parser.KindReplace && len(f.Insert.OnDuplicate) == 0 {
		return ""
	}
	if info == nil {
		return "the table's unique keys are not known, and an upsert may change the row holding a duplicate in any of them"
	}
	for _, uk := range info.UniqueKeys {
		if !sameColumns(uk, cr.key) {
			return fmt.Sprintf("an upsert may change the row holding a duplicate of unique key (%s), whose key it does not name",
				strings.Join(uk, ", "))
		}
	}
	return ""
}

func autoKey(cr *compiledRule, info *TableInfo) bool {
	if len(cr.key) != 1 {
		return false
	}
	c := info.Column(cr.key[0])
	return c != nil && c.AutoIncrement
}

// isNewAutoRow reports whether an INSERT row gives NULL or 0 for a single
// AUTO_INCREMENT key column (MySQL then generates a new value).
func isNewAutoRow(cr *compiledRule, info *TableInfo, t []parser.Value) bool {
	if !autoKey(cr, info) || len(t) != 1 {
		return false
	}
	v := t[0]
	return v.Kind == parser.ValueNull || (v.Kind == parser.ValueInt && v.Int == 0)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// movedKeys returns the keys a write gives rows by assigning key columns
// (UPDATE SET id = 5, ON DUPLICATE KEY UPDATE id = ?): each tuple with the
// assigned columns replaced. reason is non-empty when an assignment to a
// key column is not a constant.
func movedKeys(f *parser.Facts, ref parser.TableRef, cr *compiledRule, tuples [][]parser.Value) ([]movedTuple, string) {
	assigns := f.Assignments
	if f.Insert != nil {
		assigns = f.Insert.OnDuplicate
	}
	var out []movedTuple
	for _, a := range assigns {
		if a.Table != "" && a.Table != ref.Name && a.Table != ref.Alias {
			continue
		}
		i := indexOf(cr.key, a.Column)
		if i < 0 {
			continue
		}
		if a.Kind != parser.AssignLiteral && a.Kind != parser.AssignParam {
			return nil, fmt.Sprintf("key column %s is assigned a non-constant", a.Column)
		}
		for _, t := range tuples {
			moved := append([]parser.Value(nil), t...)
			moved[i] = a.Value
			out = append(out, movedTuple{vals: moved, col: i})
		}
	}
	return out, ""
}

// movedTuple is a key tuple whose column col a write assigns.
type movedTuple struct {
	vals []parser.Value
	col  int
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// positional reports whether an INSERT gives its values without a column
// list (INSERT INTO t VALUES (...), INSERT INTO t SELECT ...): MariaDB then
// reads them as every visible column of the table in its order. VALUES ()
// gives no value at all (every column takes its default) and is not.
func positional(ins *parser.InsertFacts) bool {
	if len(ins.Columns) > 0 {
		return false
	}
	if ins.FromSelect {
		return true
	}
	for _, r := range ins.Rows {
		if len(r) > 0 {
			return true
		}
	}
	return false
}

// inTableOrder restates a positional INSERT's facts with the table's column
// order read from the primary, so its rows are keyed as MariaDB reads them
// (mariadb-dump writes such INSERTs). It gives a reason instead when the
// order is not known: the table was not read from a server, the INSERT goes
// through a view (whose column order is the view's), or its rows come from a
// query.
func inTableOrder(f *parser.Facts, ref parser.TableRef, info *TableInfo, viaView bool) (*parser.Facts, parser.TableRef, string) {
	switch {
	case f.Insert.FromSelect:
		return f, ref, "the INSERT ... SELECT lists no columns, so its rows' keys come from a query"
	case viaView:
		return f, ref, "the INSERT into a view lists no columns: name them"
	case info == nil || len(info.Order) == 0:
		return f, ref, "the INSERT lists no columns and the table's column order is not known: name them"
	}
	ins := *f.Insert
	ins.Columns = info.Order
	nf := *f
	nf.Insert = &ins
	ref.Where = parser.RowsPredicate(&ins)
	return &nf, ref, ""
}
