package parser

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// analyzer walks one statement and fills its Facts. It is an ast.Visitor.
type analyzer struct {
	f  *Facts
	db string // current database, lowercased
	// dbAsWritten is the current database as the session named it;
	// exactNames: qualifiers match table names and aliases as written
	// (Options.CaseSensitiveNames).
	dbAsWritten string
	exactNames  bool
	params      map[*test_driver.ParamMarkerExpr]int
	// scoped is true for DML: tables are found per query block with their
	// predicates; otherwise every TableName node is a table.
	scoped bool
	// ctes are the WITH clauses in scope, innermost last (see cte.go).
	ctes []cteFrame
	// budget is the work left for predicates (see workBudget).
	budget int
	// pureCalls: the statement calls a pure built-in (notePure), whose
	// spelling finish checks.
	pureCalls bool
	// hexForms: which hex literal forms the text has (hexLiteral); 0 not
	// yet looked at.
	hexForms int
}

// Enter implements ast.Visitor.
func (an *analyzer) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *test_driver.ParamMarkerExpr:
		an.f.Params++
	case *ast.FuncCallExpr:
		an.funcCall(x)
	case *ast.CallStmt:
		return n, an.call(x)
	case *ast.VariableExpr:
		an.variable(x)
	case *ast.CommonTableExpression:
		an.enterCTE(x)
	case *ast.SetOprStmt:
		an.pushWith(x, x.With)
	case *ast.SetOprSelectList:
		an.pushWith(x, x.With)
	case *ast.SelectStmt:
		an.pushWith(x, x.With)
		an.selectStmt(x)
	case *ast.UpdateStmt:
		an.pushWith(x, x.With)
		if an.scoped {
			an.update(x)
		}
	case *ast.DeleteStmt:
		an.pushWith(x, x.With)
		if an.scoped {
			an.delete(x)
		}
	case *ast.InsertStmt:
		if an.scoped {
			an.insert(x)
		}
	case *ast.LockTablesStmt:
		for _, tl := range x.TableLocks {
			if tl.Table != nil {
				an.addTable(tl.Table, "", tl.Type != ast.TableLockRead && tl.Type != ast.TableLockReadLocal, nil)
			}
		}
		return n, true
	case *ast.TableSource:
		if _, ok := x.Source.(*ast.TableName); !ok {
			an.f.Derived = true
		}
	case *ast.TableName:
		if x.Schema.L == "" && an.isCTE(x.Name.L) {
			an.f.Derived = true
		}
		if !an.scoped {
			an.addTable(x, "", an.f.Kind == KindDDL || an.f.Kind == KindLoadData, nil)
		}
	}
	return n, false
}

// Leave implements ast.Visitor.
func (an *analyzer) Leave(n ast.Node) (ast.Node, bool) {
	if c, ok := n.(*ast.CommonTableExpression); ok {
		an.leaveCTE(c)
	}
	an.popWith(n)
	return n, true
}

// selectStmt records the lock clause and INTO of one query block and, in
// DML, its tables with their predicates.
func (an *analyzer) selectStmt(s *ast.SelectStmt) {
	if s.LockInfo != nil {
		an.lock(s.LockInfo)
	}
	if s.SelectIntoOpt != nil {
		an.f.Effects.SelectInto = true
	}
	if s.SelectStmtOpts != nil && s.SelectStmtOpts.CalcFoundRows {
		an.f.Effects.CalcFoundRows = true
	}
	if !an.scoped || s.From == nil {
		return
	}
	an.block(s.From.TableRefs, s.Where)
}

// lock merges one locking clause into Facts.Lock (strongest wins).
func (an *analyzer) lock(li *ast.SelectLockInfo) {
	l := &an.f.Lock
	mode := LockNone
	switch li.LockType {
	case ast.SelectLockForUpdate, ast.SelectLockForUpdateNoWait,
		ast.SelectLockForUpdateWaitN, ast.SelectLockForUpdateSkipLocked:
		mode = LockForUpdate
	case ast.SelectLockForShare, ast.SelectLockForShareNoWait,
		ast.SelectLockForShareSkipLocked:
		mode = LockForShare
	}
	if mode > l.Mode {
		l.Mode = mode
	}
	switch li.LockType {
	case ast.SelectLockForUpdateNoWait, ast.SelectLockForShareNoWait:
		l.NoWait = true
	case ast.SelectLockForUpdateSkipLocked, ast.SelectLockForShareSkipLocked:
		l.SkipLocked = true
	case ast.SelectLockForUpdateWaitN:
		if li.WaitSec > l.WaitSec {
			l.WaitSec = li.WaitSec
		}
	}
}

// sessionFuncs are the functions whose result depends on the session's own
// history: such a statement must run on the primary.
var sessionFuncs = map[string]func(e *Effects){
	"last_insert_id":    func(e *Effects) { e.LastInsertID = true },
	"found_rows":        func(e *Effects) { e.FoundRows = true },
	"row_count":         func(e *Effects) { e.RowCount = true },
	"get_lock":          func(e *Effects) { e.UserLock = true },
	"release_lock":      func(e *Effects) { e.UserLock = true },
	"release_all_locks": func(e *Effects) { e.UserLock = true },
	"is_used_lock":      func(e *Effects) { e.UserLock = true },
	"is_free_lock":      func(e *Effects) { e.UserLock = true },
}

// variable records reads and assignments of variables in expressions.
// EXECUTE ... USING @v and PREPARE ... FROM @v read user variables too.
func (an *analyzer) variable(v *ast.VariableExpr) {
	e := &an.f.Effects
	switch {
	case v.IsSystem:
		if an.f.Impure == "" && (v.IsGlobal || serverVars[strings.ToLower(v.Name)]) {
			an.f.Impure = "reads @@" + strings.ToLower(v.Name)
		}
		switch name := strings.ToLower(v.Name); {
		case name == "identity", name == "last_insert_id":
			e.LastInsertID = true
		case diagnosticVars[name] && !v.IsGlobal && !v.IsInstance:
			an.f.ReadsDiagnostics = true
		}
	case v.Value != nil:
		e.UserVarAssign = true
	default:
		e.UserVarRead = true
	}
}

func (an *analyzer) funcCall(fc *ast.FuncCallExpr) {
	an.notePure(fc)
	if set, ok := sessionFuncs[fc.FnName.L]; ok {
		set(&an.f.Effects)
	}
	name := an.routineName(fc)
	for _, c := range an.f.Calls {
		if c == name {
			return
		}
	}
	an.f.Calls = append(an.f.Calls, name)
}

// call records CALL's procedure and walks its arguments itself, so that the
// procedure is not taken for a function call; it returns true (children
// done).
func (an *analyzer) call(c *ast.CallStmt) bool {
	if c.Procedure == nil {
		return true
	}
	an.f.Procedure = an.routineName(c.Procedure)
	for _, arg := range c.Procedure.Args {
		if arg != nil {
			arg.Accept(an)
		}
	}
	return true
}

// routineName is a called routine's lowercased name, qualified with its
// schema or else the current database.
func (an *analyzer) routineName(fc *ast.FuncCallExpr) string {
	schema := fc.Schema.L
	if schema == "" {
		schema = an.db
	}
	if schema == "" {
		return fc.FnName.L
	}
	return schema + "." + fc.FnName.L
}

// finish derives the facts that need the whole walk.
func (an *analyzer) finish() {
	if an.f.Effects.Autocommit == AutocommitOn {
		// MySQL: SET autocommit = 1 commits an open transaction.
		an.f.ImplicitCommit = true
	}
	if an.pureCalls && an.f.Impure == "" && an.f.Kind == KindSelect {
		if n := spacedCall(an.f.Text, an.f.Mode); n != "" {
			an.f.Impure = "calls " + n + " spelt so that MariaDB may call a stored function " + n
		}
	}
}
