package parser

import (
	"sync/atomic"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Analysis is what lockproxy knows about one query string (one COM_QUERY or
// one COM_STMT_PREPARE). An *Analysis returned by Analyze or Cache.Analyze is
// immutable and may be shared by many goroutines: callers must not modify it
// or anything it points to (including the ASTs in Facts.Node; a rewrite must
// work on a fresh parse or a copy).
type Analysis struct {
	// SQL is the query text as given.
	SQL string
	// DB is the current database the text was analysed under (unqualified
	// table names are qualified with it).
	DB string
	// Stmts holds one Facts per statement, in textual order. Empty when
	// Unparsed or when the text holds no statement (only comments, ";").
	Stmts []*Facts
	// Params is the number of `?` placeholders in the whole text.
	Params int
	// PrimaryHint is true when a comment anywhere in the text (outside
	// string literals) contains `lockproxy:primary`.
	PrimaryHint bool

	// Unparsed is true when the TiDB parser rejected the text (MariaDB-only
	// syntax, garbage) or failed on it. Such a statement must still be
	// routed to the primary and still meet the rules of the tables
	// LexTables names.
	Unparsed bool
	// ParseError is the parser's message when Unparsed.
	ParseError string
	// LexTables are the tables a cheap lexical scan found (see LexTables),
	// qualified with DB when unqualified, lowercased. Filled only when
	// Unparsed; Where is nil for each.
	LexTables []TableRef
	// Uncertain, when not empty, says why this analysis cannot be trusted
	// to describe what the server will run (text MariaDB executes that
	// the parser cannot see, parsing that depends on session state it
	// does not know, dynamic SQL): a statement that may touch a guarded
	// table must then be refused, and nothing uncertain goes to a replica.
	Uncertain string
	// SplitAt, when not 0, is why the text is Uncertain: a statement
	// that may change how later statements are read (MayChangeMode) is
	// followed by others. It is the offset in SQL just after that
	// statement's terminating ";": SQL[:SplitAt] holds the change as its
	// last statement, and the rest must be read only once it has run.
	SplitAt int
	// Mode is the sql_mode the text was read under (AnalyzeWith's
	// Options.Mode).
	Mode Mode
	// LexKind is the kind of the first statement guessed from its first
	// keyword (BEGIN WORK -> KindBegin, ROLLBACK WORK TO x ->
	// KindRollbackToSavepoint, ...). Filled only when Unparsed; KindOther
	// when unknown.
	LexKind Kind
}

// Kind is the class of a statement, as lockproxy cares about it. Its string
// value is stable and fit for a metric label.
type Kind string

// Statement kinds.
const (
	KindSelect  Kind = "select" // SELECT, UNION/EXCEPT/INTERSECT, TABLE t, VALUES
	KindInsert  Kind = "insert"
	KindReplace Kind = "replace"
	KindUpdate  Kind = "update"
	KindDelete  Kind = "delete"
	KindDDL     Kind = "ddl" // CREATE/ALTER/DROP/RENAME/TRUNCATE ... (TRUNCATE included)
	// KindBegin is BEGIN, BEGIN WORK and START TRANSACTION; Facts.ReadOnly
	// tells START TRANSACTION READ ONLY.
	KindBegin    Kind = "begin"
	KindCommit   Kind = "commit"
	KindRollback Kind = "rollback" // ends the transaction
	// KindRollbackToSavepoint is ROLLBACK TO [SAVEPOINT] name: the
	// transaction stays open.
	KindRollbackToSavepoint Kind = "rollback_to_savepoint"
	KindSavepoint           Kind = "savepoint"
	KindReleaseSavepoint    Kind = "release_savepoint"
	KindSet                 Kind = "set" // SET var, SET NAMES, SET TRANSACTION, SET PASSWORD...
	KindUse                 Kind = "use"
	KindShow                Kind = "show"
	KindExplain             Kind = "explain" // EXPLAIN/DESCRIBE of a statement or a table
	KindCall                Kind = "call"
	KindLoadData            Kind = "load_data"
	KindLockTables          Kind = "lock_tables"
	KindUnlockTables        Kind = "unlock_tables"
	KindPrepare             Kind = "prepare"    // SQL-level PREPARE name FROM ...
	KindExecute             Kind = "execute"    // SQL-level EXECUTE name [USING ...]
	KindDeallocate          Kind = "deallocate" // SQL-level DEALLOCATE/DROP PREPARE
	KindOther               Kind = "other"      // anything else (DO, FLUSH, KILL, GRANT, ANALYZE...)
)

// Facts are the facts of one statement.
type Facts struct {
	// Kind is the class of the statement.
	Kind Kind
	// Node is the parsed statement, kept for UPDATEs only (the statements
	// RewriteUpdate and FenceUpdate work on); nil for every other kind.
	// Shared: never modify it; to rewrite, parse again (Parse) and modify
	// that copy.
	Node ast.StmtNode
	// Text is this statement's own text (of a multi-statement string),
	// without surrounding blanks and semicolons, as the server runs it:
	// executable comments expanded, other comments blanked (offsets within
	// the text are those of Analysis.SQL). It parses (ParseMode) under Mode
	// to this statement again.
	Text string
	// Mode is the sql_mode the statement was read under.
	Mode Mode
	// Wrapped: the statement runs under MariaDB's SET STATEMENT ... FOR
	// (statement-scoped variables only: setstatement.go); Text is the
	// statement after FOR. It is keyed as itself, but nothing lockproxy
	// builds may replace it (RewriteGuarded, FenceUpdate, CombineUpdate
	// and CurrentReadOK refuse it), since the client's prefix goes with it.
	Wrapped bool

	// ParamBase is the index of this statement's first `?` in the whole text;
	// Params is how many it holds. Value.Param indices are text-wide.
	ParamBase int
	Params    int

	// PlainBlocks counts, for a SELECT, its query blocks (the outer one,
	// subqueries, derived tables, CTE bodies, UNION branches) that read a
	// table and have no locking clause: in a transaction InnoDB answers
	// them from its snapshot (CurrentReadOK).
	PlainBlocks int
	// current caches CurrentReadOK's proof for a SELECT (nil for other
	// statements): a pointer, so that copies of the Facts (which share
	// Text) share it; atomic, since Facts are shared between sessions.
	current *atomic.Pointer[currentPlan]

	// Lock is the strongest locking clause found anywhere in the statement
	// (subqueries, UNION branches, derived tables, CTEs included).
	Lock LockClause

	// Tables are the base tables the statement touches, one entry per
	// occurrence (a self-join gives two), the outer query block's first.
	// CTE names are not tables and are left out.
	Tables []TableRef

	// Derived: the statement reads a derived table or a CTE (FROM a
	// subquery, or FROM a name its WITH defines). Neither is in Tables,
	// but the server's list of tables holds them: such a statement
	// clears the diagnostics area as one naming a table does.
	Derived bool

	// Insert is set for INSERT and REPLACE.
	Insert *InsertFacts
	// Assignments are the SET list of an UPDATE.
	Assignments []Assignment

	// ReadOnly is true for START TRANSACTION READ ONLY.
	ReadOnly bool
	// Savepoint is the name for SAVEPOINT, RELEASE SAVEPOINT and
	// ROLLBACK TO SAVEPOINT, lowercased.
	Savepoint string
	// UseDB is the database of USE as written (unquoted, case kept:
	// database names are case-sensitive on most servers); compare it
	// lowercased with TableRef.Schema.
	UseDB string
	// Prepared describes SQL-level PREPARE / EXECUTE / DEALLOCATE.
	Prepared *SQLPrepared
	// Procedure is the procedure CALL names, lowercased, "db.name" (the
	// current database qualifies an unqualified name; "name" when there is
	// none). Empty for every other kind.
	Procedure string
	// Calls are the functions the statement calls by name, lowercased and
	// qualified as Procedure is, without repeats, in textual order. The
	// parser does not know which names are built in (now, concat...): it
	// lists them all, and a caller compares the list with the stored
	// functions it knows. CALL's own procedure is not listed (its
	// arguments' functions are).
	Calls []string
	// Impure says why the statement may not be free of effects or may
	// answer differently on a replica than on the primary: the first call
	// of a function that is not a pure built-in (a stored function, a
	// sequence, GET_LOCK, a name MariaDB may resolve to a stored function)
	// or a system variable read. "" when there is none. Effects covers the
	// rest (user variables, INTO, LAST_INSERT_ID...).
	Impure string
	// Diagnostics is true for a statement that only reads the
	// diagnostics area of the session's previous statement (SHOW
	// WARNINGS, SHOW ERRORS, SELECT @@warning_count, @@error_count): the
	// server that ran that statement must answer it.
	Diagnostics bool
	// ReadsDiagnostics is true for a statement that reads the
	// diagnostics area anywhere: every Diagnostics statement, and any
	// that reads @@warning_count or @@error_count in an expression
	// (SELECT @@warning_count INTO @w, SET @e = @@error_count).
	ReadsDiagnostics bool

	// Effects are the session effects that pin the session to the primary
	// or change the proxy's view of the session.
	Effects Effects
	// ImplicitCommit is true when MySQL commits an open transaction before
	// (and for DDL after) running this statement: DDL other than CREATE/DROP
	// TEMPORARY TABLE, LOCK TABLES, UNLOCK TABLES (when tables are locked),
	// BEGIN / START TRANSACTION, SET autocommit = 1 (when it was 0), user
	// and privilege management, FLUSH, ANALYZE TABLE. The proxy, which
	// knows the session state, applies the "when" conditions.
	ImplicitCommit bool
	// Account is true for a statement that changes accounts: SET
	// PASSWORD, SET DEFAULT ROLE, CREATE/ALTER/DROP/RENAME USER, GRANT,
	// REVOKE. The session's own account may no longer log in as it did.
	Account bool
	// PrimaryHint mirrors Analysis.PrimaryHint.
	PrimaryHint bool
}

// LockMode is the strength of a locking read clause.
type LockMode int

// Lock modes, weakest first: a statement's LockClause is the maximum found.
const (
	LockNone      LockMode = iota
	LockForShare           // FOR SHARE, LOCK IN SHARE MODE
	LockForUpdate          // FOR UPDATE
)

// String returns "none", "for share" or "for update".
func (m LockMode) String() string {
	switch m {
	case LockForShare:
		return "for share"
	case LockForUpdate:
		return "for update"
	default:
		return "none"
	}
}

// LockClause is a SELECT's locking clause.
type LockClause struct {
	Mode       LockMode
	NoWait     bool   // NOWAIT on any locking clause
	SkipLocked bool   // SKIP LOCKED on any locking clause
	WaitSec    uint64 // WAIT n (MariaDB), 0 when absent
}

// TableRef is one occurrence of a base table in a statement.
type TableRef struct {
	// Schema is the database, lowercased: the qualifier if written, else
	// the current database ("" when there is none).
	Schema string
	// Name is the table name, lowercased.
	Name string
	// Alias is the alias, lowercased ("" when none).
	Alias string
	// Write is true when the statement modifies this table: target of
	// INSERT/REPLACE/UPDATE/DELETE or LOAD DATA, a table named by DDL, a
	// WRITE lock of LOCK TABLES. Tables only read (INSERT ... SELECT
	// sources, joined tables not assigned) have it false.
	Write bool
	// Where is what the statement's conditions say about the rows of this
	// table touched. For UPDATE/DELETE/SELECT it comes from WHERE and the ON
	// of inner joins; for INSERT/REPLACE from the VALUES rows. nil when the
	// statement kind has no row restriction (DDL, LOCK TABLES, ...).
	Where *Predicate
}

// Qualified returns "schema.name" (or "name" when Schema is empty).
func (t TableRef) Qualified() string {
	if t.Schema == "" {
		return t.Name
	}
	return t.Schema + "." + t.Name
}

// Predicate is a condition on the rows of one table in disjunctive normal
// form: the rows touched are among those that satisfy at least one
// conjunction of Or. Only `column = value` atoms are kept; anything else
// (ranges, functions, subqueries, column = column, conditions on other
// tables) was dropped, which makes the described set larger, never
// smaller, so keys derived from it are a safe over-approximation.
type Predicate struct {
	// Or is the disjunction. A conjunction with no atom on the key columns
	// means "any row". Nil when Unkeyed.
	Or []Conj
	// Residual is true when some part of the condition was not reducible
	// to column = value atoms (and was dropped as above).
	Residual bool
	// Unkeyed is true when nothing can be said: the DNF would exceed
	// MaxAtoms atoms (a product of disjunctions) or 131072 atoms (any), the
	// statement's analysis budget ran out (texts built to blow up), or an
	// INSERT takes its rows from a SELECT or lists no columns.
	Unkeyed bool
}

// MaxAtoms bounds the size of a Predicate's DNF (total atoms over all
// conjunctions) built as the product of two disjunctions (a IN (...) AND
// b IN (...)). Beyond it the Predicate is Unkeyed. A single long list is
// linear in the text and is kept up to 131072 atoms.
const MaxAtoms = 10000

// Conj is a conjunction of atoms.
type Conj []Atom

// Atom says Column = Value (also for `<=>`, IN lists and row constructors).
type Atom struct {
	// Column is the column name, lowercased, without qualifier.
	Column string
	// Value is a literal or a placeholder.
	Value Value
}

// ValueKind is the kind of a Value.
type ValueKind int

// Value kinds.
const (
	ValueExpr    ValueKind = iota // not a literal nor a placeholder (NOW(), DEFAULT, a + 1 ...)
	ValueNull                     // NULL
	ValueInt                      // signed integer literal, in Int
	ValueUint                     // unsigned integer literal beyond int64, in Uint
	ValueDecimal                  // exact decimal literal, its canonical text in Str
	ValueFloat                    // float literal (1e3), in Float
	ValueString                   // string literal, its bytes (unescaped) in Str
	ValueHex                      // x'..' / 0x.. literal, its bytes in Str
	ValueBit                      // b'..' / 0b.. literal, its bytes in Str
	ValueParam                    // `?` placeholder, its index in Param
)

// String names the kind.
func (k ValueKind) String() string {
	switch k {
	case ValueNull:
		return "null"
	case ValueInt:
		return "int"
	case ValueUint:
		return "uint"
	case ValueDecimal:
		return "decimal"
	case ValueFloat:
		return "float"
	case ValueString:
		return "string"
	case ValueHex:
		return "hex"
	case ValueBit:
		return "bit"
	case ValueParam:
		return "param"
	default:
		return "expr"
	}
}

// Value is a literal, a placeholder or (ValueExpr) some other expression.
type Value struct {
	Kind  ValueKind
	Int   int64
	Uint  uint64
	Float float64
	// Str holds the bytes of string, hex and bit literals and the canonical
	// text of a decimal.
	Str string
	// Charset is the introducer of a string literal (_utf8mb4'x'), lowercased.
	Charset string
	// Param is the 0-based index of the placeholder in the whole text, in
	// textual order, as COM_STMT_PREPARE numbers them.
	Param int
	// Text is the value as SQL (restored: 1001, 'abc', x'0a', ?, NOW()).
	Text string
}

// IsConst reports whether v is a literal or a placeholder (a key value).
func (v Value) IsConst() bool { return v.Kind != ValueExpr }

// InsertFacts describes the rows of an INSERT or REPLACE.
type InsertFacts struct {
	// Columns are the listed columns, lowercased (from the column list or
	// from INSERT ... SET). Empty when the statement lists none.
	Columns []string
	// Rows are the VALUES rows, each aligned with Columns.
	Rows [][]Value
	// FromSelect is true for INSERT ... SELECT (and TABLE/VALUES sources
	// treated as SELECT): its rows are not known, so it is not keyed.
	FromSelect bool
	// Ignore is true for INSERT IGNORE.
	Ignore bool
	// OnDuplicate is the ON DUPLICATE KEY UPDATE list.
	OnDuplicate []Assignment
}

// AssignKind classifies the right side of `column = ...`.
type AssignKind int

// Assignment kinds.
const (
	AssignOther    AssignKind = iota // any other expression
	AssignLiteral                    // column = literal (Value)
	AssignParam                      // column = ? (Value)
	AssignRelative                   // column = column + delta / column - delta (Op, Delta)
)

// String names the kind.
func (k AssignKind) String() string {
	switch k {
	case AssignLiteral:
		return "literal"
	case AssignParam:
		return "param"
	case AssignRelative:
		return "relative"
	default:
		return "other"
	}
}

// Assignment is one `column = expr` of UPDATE SET or ON DUPLICATE KEY UPDATE.
type Assignment struct {
	// Table is the qualifier as written (alias or table name), lowercased,
	// "" when unqualified.
	Table string
	// Column is the column name, lowercased.
	Column string
	Kind   AssignKind
	// Value is the literal or placeholder for AssignLiteral/AssignParam
	// (Kind ValueExpr with its Text for AssignOther).
	Value Value
	// Op is '+' or '-' for AssignRelative, and Delta the literal or
	// placeholder added or subtracted.
	Op    byte
	Delta Value
}

// SQLPrepared describes SQL-level PREPARE, EXECUTE and DEALLOCATE.
type SQLPrepared struct {
	// Name is the prepared statement's name, lowercased.
	Name string
	// SQL is the text of PREPARE name FROM 'text' (empty for FROM @var).
	SQL string
	// FromVar is the user variable of PREPARE name FROM @var, lowercased.
	FromVar string
	// Using are the user variables of EXECUTE ... USING @a, @b, lowercased.
	Using []string
}

// AutocommitChange is what a statement does to autocommit.
type AutocommitChange int

// Autocommit changes.
const (
	AutocommitUnchanged AutocommitChange = iota
	AutocommitOn                         // SET autocommit = 1 / ON / TRUE
	AutocommitOff                        // SET autocommit = 0 / OFF / FALSE
	AutocommitUnknown                    // SET autocommit = @v, DEFAULT or an expression
)

// Effects are a statement's effects on the session beyond its rows.
type Effects struct {
	LastInsertID bool // calls LAST_INSERT_ID()
	FoundRows    bool // calls FOUND_ROWS()
	RowCount     bool // calls ROW_COUNT()
	// UserLock is true for GET_LOCK, RELEASE_LOCK, RELEASE_ALL_LOCKS,
	// IS_USED_LOCK, IS_FREE_LOCK.
	UserLock bool
	// UserVarAssign is true for `@v := expr` anywhere.
	UserVarAssign bool
	// UserVarRead is true when the statement reads a user variable (@v):
	// its value lives in the session of the connection that set it.
	UserVarRead bool
	// CalcFoundRows is true for SELECT SQL_CALC_FOUND_ROWS, whose count
	// the next FOUND_ROWS() reads on the same connection.
	CalcFoundRows bool
	// SelectInto is true for SELECT ... INTO @v / OUTFILE / DUMPFILE.
	SelectInto bool
	// UserVars are the user variables SET (SET @a = 1), lowercased, no '@'.
	UserVars []string
	// UserVarValues are the values SET gives them, in order: a literal
	// (SET @a = 1001, SET @a = 'x', SET @a = -1) or, for anything else, a
	// Value of Kind ValueExpr, which means the value is not known.
	UserVarValues []Value
	// SessionVars are the system variables SET for the session (SET x = 1,
	// SET SESSION x, SET @@x, SET @@session.x, SET NAMES -> "names", SET
	// CHARACTER SET -> "character set"), lowercased.
	SessionVars []string
	// ClientCharset is the client character set the statement sets for
	// the session (SET NAMES, SET CHARACTER SET, SET
	// character_set_client), lowercased; "?" when the server computes it,
	// "" when the statement sets none. Only where the server's own report
	// is not at hand (a recorded log) is it what lockproxy goes by.
	ClientCharset string
	// GlobalVars are the system variables SET GLOBAL / PERSIST, lowercased.
	GlobalVars []string
	// Autocommit is what the statement does to autocommit.
	Autocommit AutocommitChange
	// SetTransaction is true for SET [SESSION|GLOBAL] TRANSACTION ...;
	// SetTransactionScope is "next" (no scope word), "session" or "global".
	SetTransaction      bool
	SetTransactionScope string
	// SetComputed is true for a SET with a value the server computes (a
	// variable, a function call, a subquery, a `?`, DEFAULT: the server's
	// global value), as opposed to a literal or a bare word: run
	// elsewhere, it may give another value or have an effect.
	SetComputed bool
}

// Any reports whether the statement has a session effect that pins the
// session to the primary: LAST_INSERT_ID() (and @@identity),
// FOUND_ROWS(), SQL_CALC_FOUND_ROWS, ROW_COUNT(), user locks, user
// variables (assigned or read), SELECT ... INTO.
func (e Effects) Any() bool {
	return e.LastInsertID || e.FoundRows || e.CalcFoundRows || e.RowCount || e.UserLock ||
		e.UserVarAssign || e.UserVarRead || e.SelectInto
}
