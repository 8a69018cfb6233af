// Package parser turns SQL text into the facts lockproxy decides on: the
// kind of each statement, its locking clause, the tables it touches with the
// row keys its WHERE (or VALUES) pins, its assignments, its placeholders and
// its effects on the session (DESIGN.md §3–§5).
//
// It wraps the TiDB parser (github.com/pingcap/tidb/pkg/parser) with its
// test_driver value expressions. Text the TiDB parser rejects (MariaDB-only
// syntax, garbage) is not an error: Analyze returns an Analysis marked
// Unparsed with the tables a lexical scan found, so callers can still apply
// a table's policy and route the statement to the primary.
//
// Analyses are immutable and may be shared; Cache memoises them by
// (current database, SQL). Restore turns a (modified) AST back into SQL for
// the rewrite stage.
//
// This package must import nothing of lockproxy's own: rules and proxy
// import it, never the other way round.
package parser
