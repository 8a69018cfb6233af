package parser

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// txnVars are the names the TiDB parser gives SET [scope] TRANSACTION ...
// (and the variables that mean the same).
var txnVars = map[string]bool{
	"tx_isolation": true, "transaction_isolation": true,
	"tx_read_only": true, "transaction_read_only": true,
}

// set records the session effects of SET.
func (an *analyzer) set(s *ast.SetStmt) {
	e := &an.f.Effects
	// The TiDB parser gives SET TRANSACTION READ ONLY/WRITE without scope
	// the session variable tx_read_only; MySQL applies it to the next
	// transaction only.
	nextTxn := secondWordIs(an.f.Text, "transaction", an.f.Mode)
	for _, v := range s.Variables {
		name := strings.ToLower(v.Name)
		if !an.setConstant(v.Value) {
			e.SetComputed = true
		}
		switch {
		case nextTxn && v.IsSystem && txnVars[strings.TrimSuffix(name, "_one_shot")]:
			e.SetTransaction, e.SetTransactionScope = true, "next"
		case v.Name == ast.SetNames:
			e.SessionVars = append(e.SessionVars, "names")
			e.ClientCharset = an.charsetName(v.Value)
		case v.Name == ast.SetCharset:
			e.SessionVars = append(e.SessionVars, "character set")
			e.ClientCharset = an.charsetName(v.Value)
		case !v.IsSystem:
			e.UserVars = append(e.UserVars, name)
			e.UserVarValues = append(e.UserVarValues, an.userVarValue(v.Value))
		case strings.HasSuffix(name, "_one_shot"):
			// SET TRANSACTION ... without scope: the next transaction only.
			e.SetTransaction, e.SetTransactionScope = true, "next"
		case v.IsGlobal || v.IsInstance:
			e.GlobalVars = append(e.GlobalVars, name)
			if txnVars[name] {
				e.SetTransaction, e.SetTransactionScope = true, "global"
			}
		default:
			e.SessionVars = append(e.SessionVars, name)
			if txnVars[name] {
				e.SetTransaction, e.SetTransactionScope = true, "session"
			}
			if name == "autocommit" {
				e.Autocommit = autocommitValue(v.Value)
			}
			if name == "character_set_client" {
				e.ClientCharset = an.charsetName(v.Value)
			}
		}
	}
}

// charsetName is the character set a SET names: lowercased, or "?" when
// the server computes it (DEFAULT, a variable, a function).
func (an *analyzer) charsetName(e ast.ExprNode) string {
	if x, ok := e.(*ast.ColumnNameExpr); ok && x.Name.Table.O == "" && x.Name.Schema.O == "" {
		return strings.ToLower(x.Name.Name.O)
	}
	if v, ok := an.constValue(e); ok && v.Kind == ValueString {
		return strings.ToLower(v.Str)
	}
	return "?"
}

// setConstant reports whether a SET value is the same wherever it is
// evaluated: none, a bare word (SET x = ON), a literal. Anything else (a
// variable, a function, a subquery, a `?`, DEFAULT, which is the global
// value of the server that runs the SET) is computed by that server.
func (an *analyzer) setConstant(e ast.ExprNode) bool {
	switch x := e.(type) {
	case nil:
		return true
	case *ast.DefaultExpr:
		return false
	case *ast.ColumnNameExpr:
		return x.Name.Table.O == "" && x.Name.Schema.O == ""
	}
	v, ok := an.constValue(e)
	return ok && v.Kind != ValueParam && v.Kind != ValueExpr
}

// secondWordIs reports whether the second word of text is w (ASCII case
// folded), skipping comments.
func secondWordIs(text, w string, m Mode) bool {
	l := lexer{s: text, mode: m}
	if _, ok := l.next(); !ok {
		return false
	}
	t, ok := l.next()
	return ok && !t.punct && !t.quoted && strings.EqualFold(t.text, w)
}

// autocommitValue reads the value of SET autocommit = v.
func autocommitValue(e ast.ExprNode) AutocommitChange {
	var s string
	switch x := unparen(e).(type) {
	case *test_driver.ValueExpr:
		switch x.Kind() {
		case test_driver.KindInt64, test_driver.KindUint64:
			if x.GetInt64() == 0 {
				return AutocommitOff
			}
			return AutocommitOn
		case test_driver.KindString:
			s = x.GetString()
		default:
			return AutocommitUnknown
		}
	case *ast.ColumnNameExpr:
		if x.Name.Table.L != "" {
			return AutocommitUnknown
		}
		s = x.Name.Name.O
	default:
		return AutocommitUnknown
	}
	switch strings.ToLower(s) {
	case "on", "1", "true":
		return AutocommitOn
	case "off", "0", "false":
		return AutocommitOff
	}
	return AutocommitUnknown
}

// userVarValue is the value SET gives a user variable when it is a
// literal (a placeholder or any other expression is not known: Kind
// ValueExpr).
func (an *analyzer) userVarValue(e ast.ExprNode) Value {
	if e == nil {
		return Value{Kind: ValueExpr}
	}
	v, ok := an.constValue(e)
	if !ok || v.Kind == ValueParam {
		return Value{Kind: ValueExpr}
	}
	return v
}
