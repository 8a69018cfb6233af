package parser

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzAnalyze feeds arbitrary text to Analyze (the text comes from
// untrusted clients). It must never panic, never hang, never fail
// internally, and its facts must be self-consistent.
func FuzzAnalyze(f *testing.F) {
	for _, c := range readCorpus(f) {
		f.Add(c.SQL, c.DB)
	}
	f.Fuzz(func(t *testing.T, sql, db string) {
		done := make(chan struct{})
		var a *Analysis
		var err error
		go func() {
			defer close(done)
			a, err = Analyze(sql, db)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second): // a hang detector, not a speed check
			t.Fatalf("Analyze(%q) hangs", sql)
		}
		if err != nil {
			t.Fatalf("Analyze(%q): %v", sql, err)
		}
		checkAnalysis(t, a)
		LexTables(sql)
		HasPrimaryHint(sql)
		LexKind(sql)
		for _, n := range LexNames(sql) {
			if n != strings.ToLower(n) {
				t.Fatalf("LexNames(%q) gave %q, not lowercased", sql, n)
			}
		}
		if p, why := ViewProjection(sql, db); (p == nil) == (why == "") {
			t.Fatalf("ViewProjection(%q) = %+v, %q: want a projection or a reason", sql, p, why)
		}
	})
}

// checkAnalysis asserts what every Analysis promises.
func checkAnalysis(t *testing.T, a *Analysis) {
	t.Helper()
	if a.Unparsed {
		if a.ParseError == "" || len(a.Stmts) != 0 {
			t.Fatalf("unparsed analysis: err=%q stmts=%d", a.ParseError, len(a.Stmts))
		}
		return
	}
	text, _ := expand(a.SQL, Options{Mode: a.Mode, ServerVersion: DefaultServerVersion})
	text, _ = analyzable(text, Options{Mode: a.Mode, ServerVersion: DefaultServerVersion})
	nodes, err := parseAnalyzable(text, a.Mode)
	if err != nil || len(nodes) != len(a.Stmts) {
		t.Fatalf("parsed again: %d statements (analysis has %d), %v", len(nodes), len(a.Stmts), err)
	}
	params := 0
	for i, f := range a.Stmts {
		if f == nil || f.Kind == "" || (f.Node == nil) == (f.Kind == KindUpdate) {
			t.Fatalf("incomplete facts %+v", f)
		}
		if f.ParamBase != params {
			t.Fatalf("param base %d, want %d", f.ParamBase, params)
		}
		params += f.Params
		for _, ref := range f.Tables {
			if ref.Name == "" {
				t.Fatalf("table without name in %q", a.SQL)
			}
			checkPredicate(t, ref.Where, a.Params)
		}
		node := f.Node // kept for UPDATEs only: restore the others' trees too
		if node == nil && i < len(nodes) {
			node = nodes[i]
		}
		if _, err := Restore(node); errors.Is(err, ErrInternal) {
			t.Fatalf("Restore: %v", err)
		}
	}
	if params != a.Params {
		t.Fatalf("statement params sum to %d, analysis has %d", params, a.Params)
	}
}

func checkPredicate(t *testing.T, p *Predicate, params int) {
	t.Helper()
	if p == nil {
		return
	}
	if p.Unkeyed && len(p.Or) != 0 {
		t.Fatal("unkeyed predicate with disjuncts")
	}
	cols := map[string]bool{}
	for _, c := range p.Or {
		for _, at := range c {
			if at.Column == "" || (at.Value.Kind == ValueParam && at.Value.Param >= params) {
				t.Fatalf("bad atom %+v (params %d)", at, params)
			}
			cols[at.Column] = true
		}
	}
	for col := range cols {
		p.Keys([]string{col})
	}
}
