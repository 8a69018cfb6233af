package proxy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
)

// plan is what lockproxy will do with one command, decided once from its
// analysis: the locks to take or the refusal to answer (guard), whether a
// replica may serve it, and what it changes in the session's SQL-level
// prepared statements and user variables when it succeeds. COM_QUERY,
// COM_STMT_EXECUTE and `lockproxy explain` all decide through makePlan.
type plan struct {
	an    *parser.Analysis
	guard guard
	// primaryWhy says why the command must run on the primary whatever
	// the session's state; "" when a replica may serve it.
	primaryWhy string
	// dyn holds the changes to the session's dynamic SQL state.
	dyn dynChanges
	// needParams: keys come from placeholders and no values were given.
	needParams bool
	// rewrite and fence are, for a single-statement SELECT or UPDATE, the
	// rule with a rewrite plan and the rule with a fence column guarding
	// its one table, with the keys of the rows it names there.
	rewrite, fence target
	// unkeyed: a matched rule could not key every row a statement names,
	// or refused it.
	unkeyed bool
	// bound: some decision took values from params (rules.Decision.Bind):
	// its messages name the placeholders, not the text's literals.
	bound bool
	// rewriteRows: some statement may read or write rows of a rewrite
	// rule's table, or runs text or stored code lockproxy cannot see. Unless
	// it is the one keyed read or UPDATE the rewrite step handles, what the
	// session remembered may no longer be what the application believes.
	rewriteRows bool
	// storedCode: some statement runs stored code (a function, procedure
	// or trigger), which may read any row: even the keyed read a rewrite
	// captures then shows the application more than its own row.
	storedCode bool
	// changesMode: the command may change the session's sql_mode (SET
	// sql_mode, also in a statement EXECUTE runs; EXECUTE of a statement
	// lockproxy did not see; text it cannot parse that names sql_mode or
	// EXECUTE). Only then is the mode read again (sqlmode.go).
	changesMode bool
	// currentRead lists the statements of the command (indices into
	// an.Stmts) that are plain SELECTs taking read_in_txn row locks: each
	// runs with LOCK IN SHARE MODE (currentread.go), so that it answers
	// the latest committed rows, not the transaction's older snapshot.
	currentRead []int
	// readsDiag: some statement may read the diagnostics area outside
	// SHOW WARNINGS and its kin (parser.Facts.ReadsDiagnostics), also one
	// that EXECUTE runs, or one lockproxy cannot see (diagnostics.go).
	readsDiag bool
}

// fromShapeOK reports whether a plan made from a statement shape's
// analysis (parser.Cache.AnalyzeShaped) may stand for the text's own: it
// needs neither the text's parse tree (rewrite, fence) nor its literals
// in a message (refused, or unkeyed after a decision took values from the
// placeholders). An unkeyed plan no decision of which read a placeholder
// (a range read whose BETWEEN bounds the shape holds) is the text's own:
// the shape's analysis was proved the text's, field for field, and its
// reasons name no value. Any other plan is made again from the text's own
// analysis.
func (p plan) fromShapeOK() bool {
	return (!p.unkeyed || !p.bound) && !p.needParams && p.rewrite.rule == nil && p.fence.rule == nil && p.guard.reject == nil
}

// target is a rule and the keys of the rows a statement names in its table.
type target struct {
	rule *rules.Rule
	keys []rules.Key
}

// planEnv is the session state a plan depends on.
type planEnv struct {
	rs         *rules.RuleSet
	db         string
	inTxn      bool // in a transaction or autocommit off
	autocommit bool
	// unsafeCharset: the client character set (clientCharset, as the
	// server reported it) lets a byte of a multi-byte character read as a
	// backslash or a quote (big5, cp932, gbk, sjis, gb18030).
	unsafeCharset bool
	clientCharset string
	// text: the character sets text values arrive in, as the server
	// reported them (keys of text columns depend on them).
	text rules.TextCharsets
	dyn  *dynState // nil: the session has prepared and set nothing
	// analyze analyses a statement text (PREPARE ... FROM, EXECUTE
	// IMMEDIATE) as the session analyses its commands.
	analyze func(sql string) *parser.Analysis
}

// planEnv returns the session's planning environment, with the schema its
// last DDL changed.
func (s *session) planEnv() planEnv {
	s.ddl.awaitSchema(s.srv)
	return planEnv{
		rs:            s.srv.ruleSet(),
		db:            s.reading.db,
		inTxn:         inTxn(s.status),
		autocommit:    s.status&mysql.SERVER_STATUS_AUTOCOMMIT != 0,
		unsafeCharset: s.reading.unsafe,
		clientCharset: s.reading.charset,
		text:          rules.TextCharsets{Client: s.reading.charset, Connection: s.reading.connection},
		dyn:           &s.rwr.dyn,
		analyze:       func(sql string) *parser.Analysis { return s.text().analyze([]byte(sql)) },
	}
}

// makePlan decides what lockproxy does with an analysed command. It reads
// env and never changes it: the dynamic SQL changes come back in plan.dyn.
func makePlan(env planEnv, an *parser.Analysis, params []any) plan {
	p := plan{an: an}
	if an == nil {
		return p
	}
	pl := planner{env: env, lc: env.rs.Config().Locks, p: &p, inTxn: env.inTxn}
	p.guard.observing = env.rs.Observes()
	pl.text(an, params, 0)
	// A lone ROLLBACK may always run, even in a doomed transaction.
	p.guard.rollsBack = !an.Unparsed && len(an.Stmts) == 1 && an.Stmts[0].Kind == parser.KindRollback
	p.guard.halfRuns = p.guard.halfRuns || an.Unparsed
	p.primaryWhy = primaryReason(an, p.guard, env)
	return p
}

// planner walks the statements of a command, and of the statements it
// runs through dynamic SQL, merging their decisions into one guard.
type planner struct {
	env   planEnv
	lc    rules.LockConfig
	p     *plan
	inTxn bool
}

// maxDynamicDepth bounds EXECUTE of statements that EXECUTE others (MariaDB
// refuses nesting; this only bounds the planner on such text).
const maxDynamicDepth = 4

// text plans every statement of one analysed text.
func (pl *planner) text(an *parser.Analysis, params []any, depth int) {
	rs := pl.env.rs
	switch {
	case an.Unparsed:
		if im, ok := parser.ParseExecuteImmediate(an.SQL, an.Mode); ok {
			pl.immediate(im, depth)
			return
		}
		pl.p.changesMode = pl.p.changesMode || an.MayChangeMode()
		pl.p.readsDiag = pl.p.readsDiag || parser.ReadsDiagnostics(an.SQL, an.Mode) || parser.HasDynamicSQL(an.SQL)
		if an.LexKind == parser.KindPrepare {
			// PREPARE ... FROM <expression>: the text is the server's to
			// compute.
			pl.refuseUnseen("PREPARE from an expression: lockproxy cannot see the statement text")
		}
		pl.add(rs.MatchUnparsed(an, pl.env.db), refuseOther)
		pl.unseenWrite(an.SQL, an.LexKind == parser.KindSelect && !strings.Contains(strings.TrimRight(an.SQL, "; \t\r\n"), ";"))
		pl.p.rewriteRows = true
		pl.uncertain(an, "the statement could not be parsed", refuseOther)
		// What it does to variables is not known; dynamic SQL in it
		// may run anything.
		pl.p.dyn.unknownVars = true
		if parser.HasDynamicSQL(an.SQL) {
			pl.refuseUnseen("a statement lockproxy could not parse runs dynamic SQL or a routine")
			pl.p.dyn.unknownAll = true
		}
		return
	case an.Uncertain != "":
		pl.p.readsDiag = pl.p.readsDiag || parser.ReadsDiagnostics(an.SQL, an.Mode)
		pl.unseenWrite(an.SQL, false)
		pl.p.rewriteRows = true
		pl.p.changesMode = pl.p.changesMode || an.MayChangeMode()
		pl.uncertain(an, an.Uncertain, refuseOther)
		return
	case pl.env.unsafeCharset && hasHighByte(an.SQL):
		pl.p.readsDiag = true // where its words are is the server's reading
		pl.unseenWrite(an.SQL, false)
		pl.p.rewriteRows = true
		pl.p.changesMode = pl.p.changesMode || an.MayChangeMode()
		cs := pl.env.clientCharset
		if cs == "" {
			cs = "of the session"
		}
		pl.uncertain(an, "the client character set "+cs+" lets a byte of a multi-byte character read as a backslash or a quote, so where a string or name ends is the server's reading, not lockproxy's; send such text in utf8mb4", refuseCharset)
		return
	}
	for _, f := range an.Stmts {
		pl.statement(f, params, depth)
	}
}

// uncertain refuses (as unkeyed, by the rule's on_unkeyed) a text lockproxy
// cannot analyse with certainty when it names a guarded table anywhere;
// kind is the reason an observing rule counts it under.
func (pl *planner) uncertain(an *parser.Analysis, reason, kind string) {
	r := pl.env.rs.Mentions(an.SQL)
	if r == nil {
		return
	}
	pl.add(rules.UnkeyedDecision(r, reason), kind)
}

// refuseUnseen refuses a statement whose text lockproxy cannot see when any
// rule locks rows: it may touch a guarded table.
func (pl *planner) refuseUnseen(reason string) {
	pl.p.rewriteRows = true
	if r := pl.env.rs.Locking(); r != nil {
		pl.add(rules.UnkeyedDecision(r, reason), refuseDynamicSQL)
	}
	if r := pl.env.rs.RejectingUnpaired(); r != nil {
		pl.refuseUnpaired(r, fmt.Sprintf("%s, and it may set %s to a value lockproxy does not make conditional", reason, r.Rewrite.Column))
	}
}

// unseenWrite refuses text lockproxy cannot read with certainty that names
// the table of a rule with rewrite.on_unpaired: reject (or a view,
// routine or trigger reaching it): it may write the guarded column in a
// form no rewrite makes conditional. read says the text is certainly one
// plain read.
func (pl *planner) unseenWrite(sql string, read bool) {
	if read {
		return
	}
	if r := pl.env.rs.MentionsRejectingUnpaired(sql); r != nil {
		pl.refuseUnpaired(r, fmt.Sprintf("lockproxy cannot read with certainty a statement naming %s, which may set %s to a value it does not make conditional", r.Table, r.Rewrite.Column))
	}
}

// refuseUnpaired refuses the command for rule r with rewrite.on_unpaired:
// reject, saying why.
func (pl *planner) refuseUnpaired(r *rules.Rule, why string) {
	g := &pl.p.guard
	if g.observing && r.Observes() {
		g.refuseObserved(r.Name, refuseUnpaired, fmt.Sprintf("rule %q: %s (rewrite.on_unpaired: reject)", r.Name, why))
		return
	}
	if g.reject == nil {
		g.reject = errorf(errRejected, "rule %q: %s (rewrite.on_unpaired: reject)", r.Name, why)
		g.unpaired = true
		g.rule = r.Name
	}
}

// statement plans one parsed statement.
func (pl *planner) statement(f *parser.Facts, params []any, depth int) {
	g := &pl.p.guard
	g.halfRuns = g.halfRuns || depth > 0 // run through dynamic SQL
	switch f.Kind {
	case parser.KindBegin:
		pl.inTxn, g.ends = true, true
	case parser.KindCommit, parser.KindRollback:
		g.commits = g.commits || f.Kind == parser.KindCommit
		g.ends = true
		pl.inTxn = !pl.env.autocommit
	case parser.KindPrepare:
		pl.prepare(f)
		return
	case parser.KindExecute:
		g.halfRuns = true
		pl.execute(f.Prepared.Name, f.Prepared.Using, false, depth)
		return
	case parser.KindDeallocate:
		pl.p.dyn.prepare(f.Prepared.Name, nil)
		return
	case parser.KindCall:
		// A routine may set variables and prepare statements.
		pl.p.dyn.unknownAll = true
		g.halfRuns = true
	}
	if f.ImplicitCommit {
		g.commits, g.ends = true, true
	}
	if f.MayChangeMode() { // EXECUTE returned above: its statements tell
		pl.p.changesMode = true
	}
	pl.p.readsDiag = pl.p.readsDiag || f.ReadsDiagnostics
	pl.noteVars(f)
	d := pl.env.rs.MatchIn(f, pl.env.db, pl.inTxn, pl.env.text)
	if pl.env.rs.HasRewrites() { // only the rewrite step reads these
		if pl.env.rs.RunsStoredCode(f, pl.env.db) {
			pl.p.storedCode, pl.p.rewriteRows = true, true
		}
		if !pl.p.rewriteRows {
			pl.p.rewriteRows = slices.ContainsFunc(d.Rules, func(r *rules.Rule) bool { return r.Rewrite != nil })
		}
	}
	switch {
	case d.NeedParams && params == nil:
		// Planned before execution (explain): keys come at execute time.
		pl.p.needParams = true
	case d.NeedParams:
		d = d.Bind(params)
		pl.p.bound = true
	}
	if d.Reject || len(d.Unkeyed) > 0 || len(d.UnkeyedReads) > 0 || len(d.Hidden) > 0 {
		pl.p.unkeyed = true
	}
	if depth == 0 {
		pl.targets(f, d)
	}
	if f.Kind == parser.KindSelect && f.PlainBlocks > 0 && pl.inTxn && !d.Reject && (len(d.Keys) > 0 || d.NeedParams) &&
		(d.Class == rules.ClassReadInTxn || d.Class == rules.ClassLockingRead) {
		if g.observing && allObserve(d.Rules) {
			pl.observeCurrentRead(f, d, depth)
		} else {
			pl.currentRead(f, d, depth)
		}
	}
	pl.unrewritten(f, depth)
	pl.add(d, "")
}

// currentRead marks a SELECT that takes row locks in a transaction and
// has query blocks without a locking clause (a plain SELECT under
// read_in_txn, or a subquery of a locking read) to run as a current read,
// every such block given LOCK IN SHARE MODE (parser.Facts.CurrentReadOK),
// or refuses it where lockproxy cannot send it so: a statement EXECUTE or
// EXECUTE IMMEDIATE runs (its text is the server's prepared statement),
// or one whose edit the parser cannot prove (INTO, a form it cannot
// place the clauses in). Refused before any lock is taken, counted and
// audited, not run as a snapshot read: holding the row lock while
// answering an older row is how updates get lost.
func (pl *planner) currentRead(f *parser.Facts, d rules.Decision, depth int) {
	if depth == 0 && f.CurrentReadOK() {
		if i := slices.Index(pl.p.an.Stmts, f); i >= 0 {
			pl.p.currentRead = append(pl.p.currentRead, i)
			return
		}
	}
	how := "a SELECT whose query blocks lockproxy cannot give LOCK IN SHARE MODE (INTO, or a form it cannot prove)"
	if depth > 0 {
		how = "a SELECT that EXECUTE runs"
	}
	g := &pl.p.guard
	if g.reject == nil {
		g.reject = errorf(errRejected, "rule %s: %s reads %s in a transaction, where its row locks need a current read; add LOCK IN SHARE MODE or FOR UPDATE to the query blocks that read %s",
			d.Rule.Name, how, d.Rule.Table, d.Rule.Table)
		g.rule, g.notCurrent = d.Rule.Name, true
	}
}

// targets notes the rewrite and fence targets Match found for a command's
// only statement, for the rewrite and fence steps to use.
func (pl *planner) targets(f *parser.Facts, d rules.Decision) {
	if pl.p.an == nil || len(pl.p.an.Stmts) != 1 || (f.Kind != parser.KindSelect && f.Kind != parser.KindUpdate) {
		return
	}
	if r, keys, ok := d.RewriteTarget(); ok {
		if !r.Observes() {
			pl.p.rewrite = target{rule: r, keys: keys}
		} else if f.Kind == parser.KindUpdate {
			pl.p.guard.rewriteObserved(r.Name)
		}
	}
	// An observing rule takes no lock, so it has no token to fence with.
	if r, keys, ok := d.FenceTarget(); ok && f.Kind == parser.KindUpdate && !r.Observes() {
		pl.p.fence = target{rule: r, keys: keys}
	}
}

// unrewritten refuses, for a rule with rewrite.on_unpaired: reject, a
// write of its guarded column that no rewrite makes conditional
// (rules.UnrewrittenWrites): REPLACE, INSERT ... ON DUPLICATE KEY UPDATE,
// LOAD DATA, an UPDATE through a view, of several rows or of a row it
// cannot key, one run through dynamic SQL. The single-row UPDATE of the
// table a command is made of (its rewrite target) is left to the rewrite
// step, which rewrites it or refuses it (rewriterState.planUpdate).
func (pl *planner) unrewritten(f *parser.Facts, depth int) {
	for _, w := range pl.env.rs.UnrewrittenWrites(f, pl.env.db) {
		if depth == 0 && f.Kind == parser.KindUpdate && pl.p.rewrite.rule == w.Rule {
			continue
		}
		how := w.How
		if depth > 0 {
			how += " run through dynamic SQL"
		}
		col := w.Rule.Rewrite.Column
		pl.refuseUnpaired(w.Rule, fmt.Sprintf("%s sets %s to a value lockproxy does not make conditional; read the row and write it with a single-row UPDATE of the table in one transaction, or write %s = %s - ?", how, col, col, col))
		return
	}
}

// hasHighByte reports whether sql has a byte >= 0x80: every multi-byte
// character of big5, cp932, gbk, sjis and gb18030 starts with one, so
// text without any reads the same in them as in ASCII, and text with one
// may hide a backslash or a backtick in a character's second byte.
func hasHighByte(sql string) bool {
	for i := 0; i < len(sql); i++ {
		if sql[i] >= 0x80 {
			return true
		}
	}
	return false
}
