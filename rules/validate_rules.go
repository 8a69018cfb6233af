package rules

import (
	"fmt"
	"strings"
)

func (v *validator) rules(rules []Rule) {
	names := map[string]int{}
	for i := range rules {
		r := &rules[i]
		p := fmt.Sprintf("rules[%d]", i)
		switch {
		case strings.TrimSpace(r.Name) == "":
			v.add(p+".name", "must not be empty")
		case names[r.Name] > 0:
			v.add(p+".name", "duplicate rule name %q (also rules[%d])", r.Name, names[r.Name]-1)
		default:
			names[r.Name] = i + 1
		}
		v.rule(p, r)
		v.keyConflict(p, rules, i)
	}
}

func (v *validator) rule(p string, r *Rule) {
	if _, _, ok := SplitTable(r.Table); !ok {
		v.add(p+".table", "must be db.table or table, not %q", r.Table)
	}
	v.keyColumns(p+".key", r.Key)
	for j, l := range r.Lock {
		switch l {
		case LockWrite, LockLockingRead, LockReadInTxn:
		default:
			v.add(fmt.Sprintf("%s.lock[%d]", p, j), "unknown lock kind %q (want write, locking_read or read_in_txn)", l)
		}
	}
	if r.Route != "" && r.Route != RoutePrimary {
		v.add(p+".route", "must be primary or left out, not %q", r.Route)
	}
	if r.OnUnkeyed != OnUnkeyedReject && r.OnUnkeyed != OnUnkeyedAllow {
		v.add(p+".on_unkeyed", "must be reject or allow, not %q", r.OnUnkeyed)
	}
	if r.OnUnkeyedRead != OnUnkeyedAllow && r.OnUnkeyedRead != OnUnkeyedReject {
		v.add(p+".on_unkeyed_read", "must be allow or reject, not %q", r.OnUnkeyedRead)
	}
	if r.Mode != "" && r.Mode != ModeEnforce && r.Mode != ModeObserve {
		v.add(p+".mode", "must be enforce or observe, not %q", r.Mode)
	}
	if r.Fence != "" {
		if !plainIdentifier(r.Fence) {
			v.add(p+".fence", "must be a plain column name (letters, digits, _ or $), not %q", r.Fence)
		}
		for _, k := range r.Key {
			if strings.EqualFold(k, r.Fence) {
				v.add(p+".fence", "must not be a key column (%q)", r.Fence)
			}
		}
		if r.Rewrite != nil && strings.EqualFold(r.Rewrite.Column, r.Fence) {
			v.add(p+".fence", "must not be the rewrite column (%q)", r.Fence)
		}
	}
	seen := map[string]bool{}
	for j, c := range r.Sensitive {
		lc := strings.ToLower(c)
		switch {
		case !plainIdentifier(c):
			v.add(fmt.Sprintf("%s.sensitive[%d]", p, j), "must be a plain column name (letters, digits, _ or $), not %q", c)
		case seen[lc]:
			v.add(fmt.Sprintf("%s.sensitive[%d]", p, j), "column %q listed twice", c)
		}
		seen[lc] = true
	}
	v.qualifiedNames(p+".allow_routines", r.AllowRoutines, "routine")
	v.qualifiedNames(p+".allow_triggers", r.AllowTriggers, "trigger")
	v.combine(p, r)
	if rw := r.Rewrite; rw != nil {
		if strings.TrimSpace(rw.Column) == "" {
			v.add(p+".rewrite.column", "missing: name the numeric column to guard")
		}
		for _, k := range r.Key {
			if strings.EqualFold(k, rw.Column) {
				v.add(p+".rewrite.column", "must not be a key column (%q)", rw.Column)
			}
		}
		if rw.Mode != RewriteDelta && rw.Mode != RewriteCAS {
			v.add(p+".rewrite.mode", "must be delta or cas, not %q", rw.Mode)
		}
		if rw.Scope != ScopeTransaction && rw.Scope != ScopeSession {
			v.add(p+".rewrite.scope", "must be transaction or session, not %q", rw.Scope)
		}
		if rw.OnConflict != OnConflictError && rw.OnConflict != OnConflictZeroRows {
			v.add(p+".rewrite.on_conflict", "must be error or zero_rows, not %q", rw.OnConflict)
		}
		if rw.OnUnpaired != OnUnpairedAllow && rw.OnUnpaired != OnUnpairedReject {
			v.add(p+".rewrite.on_unpaired", "must be allow or reject, not %q", rw.OnUnpaired)
		}
	}
}

// maxCombineBatch bounds rules[].combine.max_batch: a batch's members
// wait for its one commit, and each holds a client's answer.
const maxCombineBatch = 4096

// combine checks rules[].combine: it needs the rewrite's column and
// floor, and a fence (a token per write) has no exact form per batch.
func (v *validator) combine(p string, r *Rule) {
	c := r.Combine
	if c == nil {
		return
	}
	if r.Rewrite == nil {
		v.add(p+".combine", "needs rewrite: combining runs relative updates of the rewrite column")
	}
	if r.Fence != "" {
		v.add(p+".combine", "cannot be used with fence: a batch writes the row once, under one token")
	}
	if c.MaxBatch < 1 || c.MaxBatch > maxCombineBatch {
		v.add(p+".combine.max_batch", "must be between 1 and %d, not %d", maxCombineBatch, c.MaxBatch)
	}
	if m := c.MarkerTable; m != "" && m != CombineMarkerNone {
		if _, _, ok := c.Marker(); !ok || !validTableName(m) {
			v.add(p+".combine.marker_table", "must be db.table (letters, digits, _ and $) or %q, not %q", CombineMarkerNone, m)
		}
	}
}

// plainIdentifier reports whether s is a column name that needs no quoting.
func plainIdentifier(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func (v *validator) keyColumns(p string, key []string) {
	if len(key) == 0 {
		v.add(p, "must not be empty: name the column(s) that identify one row")
		return
	}
	seen := map[string]bool{}
	for j, k := range key {
		kp := fmt.Sprintf("%s[%d]", p, j)
		lk := strings.ToLower(strings.TrimSpace(k))
		if lk == "" {
			v.add(kp, "must not be empty")
			continue
		}
		if seen[lk] {
			v.add(kp, "duplicate key column %q", k)
		}
		seen[lk] = true
	}
}

// keyConflict reports rule i when an earlier rule guards the same table
// (or the same table name with "any database") with different key columns:
// one row would then be locked under two different names.
func (v *validator) keyConflict(p string, rules []Rule, i int) {
	db, table, ok := SplitTable(rules[i].Table)
	if !ok || len(rules[i].Key) == 0 {
		return
	}
	for j := 0; j < i; j++ {
		odb, otable, ok := SplitTable(rules[j].Table)
		if !ok || len(rules[j].Key) == 0 || otable != table || (db != "" && odb != "" && db != odb) {
			continue
		}
		if !sameColumns(rules[i].Key, rules[j].Key) {
			v.add(p+".key", "rules[%d] (%s) guards table %s with key [%s]; one table needs one key, not [%s]",
				j, rules[j].Name, rules[j].Table, strings.Join(rules[j].Key, ", "), strings.Join(rules[i].Key, ", "))
			return
		}
		if rules[i].Observes() != rules[j].Observes() {
			// A row's lock key names one rule: an observing rule first
			// would take the key out of the enforcing rule's locks.
			v.add(p+".mode", "rules[%d] (%s) guards table %s too, in mode %s; the rules of one table need one mode",
				j, rules[j].Name, rules[j].Table, modeName(rules[j].Observes()))
			return
		}
		for _, k := range rules[i].Key {
			if rules[i].IsSensitive(k) != rules[j].IsSensitive(k) {
				v.add(p+".sensitive", "rules[%d] (%s) guards table %s too and differs on whether key column %q is sensitive; one row needs one lock key",
					j, rules[j].Name, rules[j].Table, k)
				return
			}
		}
	}
}

func modeName(observes bool) string {
	if observes {
		return ModeObserve
	}
	return ModeEnforce
}

// sameColumns compares key column lists as case-insensitive sets.
func sameColumns(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	set := map[string]bool{}
	for _, c := range a {
		set[strings.ToLower(c)] = true
	}
	for _, c := range b {
		if !set[strings.ToLower(c)] {
			return false
		}
	}
	return true
}

// SplitTable splits a rule's table into lowercased database and table
// ("" database for a rule on any database). ok is false for an empty name,
// an empty part or more than one dot.
func SplitTable(s string) (db, table string, ok bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	parts := strings.Split(s, ".")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return "", parts[0], true
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return parts[0], parts[1], true
	}
	return "", "", false
}

// qualifiedNames checks a list of "db.name" routine or trigger names.
func (v *validator) qualifiedNames(p string, names []string, what string) {
	seen := map[string]bool{}
	for j, n := range names {
		jp := fmt.Sprintf("%s[%d]", p, j)
		db, name, ok := SplitTable(n)
		switch {
		case !ok || db == "":
			v.add(jp, "must name a %s as db.name, not %q", what, n)
		case seen[db+"."+name]:
			v.add(jp, "%s %q listed twice", what, n)
		}
		seen[db+"."+name] = true
	}
}
