// Package parser turns SQL text into the facts lockproxy decides on: the
// kind of each statement, its locking clause, the tables it touches with the
// row keys its WHERE (or VALUES) pins, its assignments, its placeholders and
// its effects on the session (docs/architecture.md shows where they are used).
//
// It wraps the TiDB parser (github.com/pingcap/tidb/pkg/parser) with its
// test_driver value expressions. The text is first read the way MariaDB
// reads it (expand.go): the executable comments the server runs are
// expanded, every other comment dropped, strings ended as the session's
// sql_mode ends them; the TiDB parser then parses the result under that
// sql_mode (Options.Mode; Analyze assumes none: "x" is a string, backslash
// escapes on). What this reading cannot settle marks the analysis
// Uncertain rather than being guessed. Text the TiDB
// parser rejects (MariaDB-only syntax, garbage) is not an error: Analyze
// returns an Analysis marked Unparsed with the tables and the statement kind
// a lexical scan found, so callers can still apply a table's policy and
// route the statement to the primary.
//
// Keys are never read from text. For each table, the conditions on its
// rows (WHERE, the ON of inner joins, or the VALUES rows of an INSERT)
// become a Predicate in disjunctive normal form over `column = value`
// atoms; everything else is dropped as TRUE, so the rows described are a
// superset of the rows touched. Which columns form a key is the rules
// package's knowledge: Predicate.Keys projects the predicate on them.
//
// Analyses are immutable and may be shared; Cache memoises them by
// (current database, SQL, Options), and Cache.AnalyzeShaped by the
// statement's shape: texts that differ only in integer literals compared
// or assigned with `=` share the analysis of the text with `?` in their
// place, bound to each text's literals (see shape.go). Restore turns a (modified) AST back into SQL;
// Parse gives a private AST to modify. RewriteUpdate (the delta and cas
// forms of a read-then-write UPDATE) and FenceUpdate (an UPDATE made
// conditional on a fencing token) build their statements that way, with
// placeholders bound as AST literals, never by pasting text.
//
// This package must import nothing of lockproxy's own: rules and proxy
// import it, never the other way round.
package parser
