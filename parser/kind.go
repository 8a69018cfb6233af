package parser

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// classify returns the statement's kind and fills the facts that belong to
// the statement type alone (transaction control, USE, SET, PREPARE...).
func (an *analyzer) classify(stmt ast.StmtNode) Kind {
	f := an.f
	switch x := stmt.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt:
		return KindSelect
	case *ast.InsertStmt:
		if x.IsReplace {
			return KindReplace
		}
		return KindInsert
	case *ast.UpdateStmt:
		return KindUpdate
	case *ast.DeleteStmt:
		return KindDelete
	case *ast.BeginStmt:
		f.ReadOnly = x.ReadOnly
		f.ImplicitCommit = true
		return KindBegin
	case *ast.CommitStmt:
		return KindCommit
	case *ast.RollbackStmt:
		if x.SavepointName != "" {
			f.Savepoint = strings.ToLower(x.SavepointName)
			return KindRollbackToSavepoint
		}
		return KindRollback
	case *ast.SavepointStmt:
		f.Savepoint = strings.ToLower(x.Name)
		return KindSavepoint
	case *ast.ReleaseSavepointStmt:
		f.Savepoint = strings.ToLower(x.Name)
		return KindReleaseSavepoint
	case *ast.UseStmt:
		f.UseDB = x.DBName
		return KindUse
	case *ast.SetStmt:
		an.set(x)
		return KindSet
	case *ast.LockTablesStmt:
		f.ImplicitCommit = true
		return KindLockTables
	case *ast.UnlockTablesStmt:
		f.ImplicitCommit = true
		return KindUnlockTables
	}
	return an.classifyOther(stmt)
}

// classifyOther handles the kinds that carry few facts of their own.
func (an *analyzer) classifyOther(stmt ast.StmtNode) Kind {
	f := an.f
	switch x := stmt.(type) {
	case *ast.PrepareStmt:
		f.Prepared = &SQLPrepared{Name: strings.ToLower(x.Name), SQL: x.SQLText}
		if x.SQLVar != nil {
			f.Prepared.FromVar = strings.ToLower(x.SQLVar.Name)
		}
		return KindPrepare
	case *ast.ExecuteStmt:
		f.Prepared = &SQLPrepared{Name: strings.ToLower(x.Name)}
		for _, u := range x.UsingVars {
			if v, ok := u.(*ast.VariableExpr); ok {
				f.Prepared.Using = append(f.Prepared.Using, strings.ToLower(v.Name))
			}
		}
		return KindExecute
	case *ast.DeallocateStmt:
		f.Prepared = &SQLPrepared{Name: strings.ToLower(x.Name)}
		return KindDeallocate
	case *ast.ShowStmt:
		return KindShow
	case *ast.ExplainStmt:
		return KindExplain
	case *ast.CallStmt:
		return KindCall
	case *ast.LoadDataStmt:
		return KindLoadData
	case *ast.SetPwdStmt, *ast.SetDefaultRoleStmt:
		f.ImplicitCommit, f.Account = true, true
		return KindSet
	case *ast.SetRoleStmt, *ast.SetConfigStmt, *ast.SetSessionStatesStmt,
		*ast.SetResourceGroupStmt, *ast.SetBindingStmt:
		return KindSet
	case *ast.ProcedureInfo, *ast.DropProcedureStmt:
		// CREATE/DROP PROCEDURE: DDL that commits, and changes what a CALL runs.
		f.ImplicitCommit = true
		return KindDDL
	case ast.DDLNode:
		f.ImplicitCommit = !isTemporaryDDL(stmt)
		return KindDDL
	case *ast.CreateUserStmt, *ast.AlterUserStmt, *ast.DropUserStmt, *ast.RenameUserStmt,
		*ast.GrantStmt, *ast.RevokeStmt, *ast.GrantRoleStmt, *ast.RevokeRoleStmt:
		// MySQL "Statements That Cause an Implicit Commit".
		f.ImplicitCommit, f.Account = true, true
		return KindOther
	case *ast.FlushStmt, *ast.AnalyzeTableStmt:
		f.ImplicitCommit = true
		return KindOther
	}
	return KindOther
}

// isTemporaryDDL reports CREATE/DROP TEMPORARY TABLE, which do not commit.
func isTemporaryDDL(stmt ast.StmtNode) bool {
	switch x := stmt.(type) {
	case *ast.CreateTableStmt:
		return x.TemporaryKeyword != ast.TemporaryNone
	case *ast.DropTableStmt:
		return !x.IsView && x.TemporaryKeyword != ast.TemporaryNone
	}
	return false
}
