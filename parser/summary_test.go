package parser

import (
	"fmt"
	"strconv"
	"strings"
)

// The golden files show facts in a compact, reviewable form.

type tableSummary struct {
	Table    string `json:"table"`
	Alias    string `json:"alias,omitempty"`
	Write    bool   `json:"write,omitempty"`
	Where    string `json:"where,omitempty"`
	Residual bool   `json:"residual,omitempty"`
	Unkeyed  bool   `json:"unkeyed,omitempty"`
}

type insertSummary struct {
	Columns     []string   `json:"columns,omitempty"`
	Rows        [][]string `json:"rows,omitempty"`
	FromSelect  bool       `json:"from_select,omitempty"`
	Ignore      bool       `json:"ignore,omitempty"`
	OnDuplicate []string   `json:"on_duplicate,omitempty"`
}

type factsSummary struct {
	Kind           Kind           `json:"kind"`
	Lock           string         `json:"lock,omitempty"`
	Tables         []tableSummary `json:"tables,omitempty"`
	Insert         *insertSummary `json:"insert,omitempty"`
	Assignments    []string       `json:"assignments,omitempty"`
	Params         string         `json:"params,omitempty"`
	Effects        []string       `json:"effects,omitempty"`
	ImplicitCommit bool           `json:"implicit_commit,omitempty"`
	ReadOnly       bool           `json:"read_only,omitempty"`
	Savepoint      string         `json:"savepoint,omitempty"`
	UseDB          string         `json:"use_db,omitempty"`
	Prepared       *SQLPrepared   `json:"prepared,omitempty"`
}

type analysisSummary struct {
	SQL         string         `json:"sql"`
	DB          string         `json:"db,omitempty"`
	Stmts       []factsSummary `json:"stmts,omitempty"`
	PrimaryHint bool           `json:"primary_hint,omitempty"`
	Unparsed    bool           `json:"unparsed,omitempty"`
	LexKind     Kind           `json:"lex_kind,omitempty"`
	LexTables   []string       `json:"lex_tables,omitempty"`
}

func summarize(a *Analysis) analysisSummary {
	s := analysisSummary{SQL: a.SQL, DB: a.DB, PrimaryHint: a.PrimaryHint, Unparsed: a.Unparsed}
	if a.Unparsed {
		s.LexKind = a.LexKind
		for _, t := range a.LexTables {
			s.LexTables = append(s.LexTables, t.Qualified())
		}
	}
	for _, f := range a.Stmts {
		s.Stmts = append(s.Stmts, summarizeFacts(f))
	}
	return s
}

func summarizeFacts(f *Facts) factsSummary {
	s := factsSummary{Kind: f.Kind, ImplicitCommit: f.ImplicitCommit, ReadOnly: f.ReadOnly,
		Savepoint: f.Savepoint, UseDB: f.UseDB, Prepared: f.Prepared}
	s.Lock = lockString(f.Lock)
	for _, t := range f.Tables {
		ts := tableSummary{Table: t.Qualified(), Alias: t.Alias, Write: t.Write}
		if t.Where != nil {
			ts.Where, ts.Residual, ts.Unkeyed = predString(t.Where), t.Where.Residual, t.Where.Unkeyed
		}
		s.Tables = append(s.Tables, ts)
	}
	if f.Insert != nil {
		ins := &insertSummary{Columns: f.Insert.Columns, FromSelect: f.Insert.FromSelect, Ignore: f.Insert.Ignore}
		for _, row := range f.Insert.Rows {
			r := make([]string, len(row))
			for i, v := range row {
				r[i] = valueString(v)
			}
			ins.Rows = append(ins.Rows, r)
		}
		for _, as := range f.Insert.OnDuplicate {
			ins.OnDuplicate = append(ins.OnDuplicate, assignString(as))
		}
		s.Insert = ins
	}
	for _, as := range f.Assignments {
		s.Assignments = append(s.Assignments, assignString(as))
	}
	if f.Params > 0 {
		s.Params = fmt.Sprintf("%d from %d", f.Params, f.ParamBase)
	}
	s.Effects = effectStrings(f.Effects)
	return s
}

func lockString(l LockClause) string {
	if l.Mode == LockNone && !l.NoWait && !l.SkipLocked {
		return ""
	}
	out := l.Mode.String()
	if l.NoWait {
		out += " nowait"
	}
	if l.SkipLocked {
		out += " skip locked"
	}
	if l.WaitSec > 0 {
		out += " wait " + strconv.FormatUint(l.WaitSec, 10)
	}
	return out
}

// predString renders DNF as "a=1 & b=?0 | a=2"; "*" is an empty conjunction.
func predString(p *Predicate) string {
	var ors []string
	for _, c := range p.Or {
		if len(c) == 0 {
			ors = append(ors, "*")
			continue
		}
		ands := make([]string, len(c))
		for i, a := range c {
			ands[i] = a.Column + "=" + valueString(a.Value)
		}
		ors = append(ors, strings.Join(ands, " & "))
	}
	return strings.Join(ors, " | ")
}

func valueString(v Value) string {
	switch v.Kind {
	case ValueParam:
		return "?" + strconv.Itoa(v.Param)
	case ValueExpr:
		return "expr(" + v.Text + ")"
	case ValueInt, ValueNull, ValueString:
		return v.Text
	default:
		return v.Kind.String() + ":" + v.Text
	}
}

func assignString(a Assignment) string {
	col := a.Column
	if a.Table != "" {
		col = a.Table + "." + col
	}
	switch a.Kind {
	case AssignRelative:
		return fmt.Sprintf("%s=%s%c%s", col, a.Column, a.Op, valueString(a.Delta))
	case AssignOther:
		return col + "=" + valueString(a.Value)
	default:
		return col + ":=" + a.Kind.String() + "(" + valueString(a.Value) + ")"
	}
}

func effectStrings(e Effects) []string {
	var out []string
	flags := []struct {
		on   bool
		name string
	}{
		{e.LastInsertID, "last_insert_id"}, {e.FoundRows, "found_rows"}, {e.RowCount, "row_count"},
		{e.UserLock, "user_lock"}, {e.UserVarAssign, "user_var_assign"}, {e.SelectInto, "select_into"},
		{e.UserVarRead, "user_var_read"}, {e.CalcFoundRows, "calc_found_rows"},
	}
	for _, f := range flags {
		if f.on {
			out = append(out, f.name)
		}
	}
	for _, v := range e.UserVars {
		out = append(out, "set @"+v)
	}
	for _, v := range e.SessionVars {
		out = append(out, "set session "+v)
	}
	for _, v := range e.GlobalVars {
		out = append(out, "set global "+v)
	}
	switch e.Autocommit {
	case AutocommitOn:
		out = append(out, "autocommit=on")
	case AutocommitOff:
		out = append(out, "autocommit=off")
	case AutocommitUnknown:
		out = append(out, "autocommit=unknown")
	}
	if e.SetTransaction {
		out = append(out, "set transaction "+e.SetTransactionScope)
	}
	return out
}
