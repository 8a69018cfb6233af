package parser

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
)

// RestoreFlags are the flags Restore uses: single-quoted strings, upper-case
// keywords, back-quoted names, spaces around binary operators, no default
// charset introducers. The result parses back to the same AST under MySQL's
// default SQL mode.
const RestoreFlags = format.RestoreStringSingleQuotes | format.RestoreKeyWordUppercase |
	format.RestoreNameBackQuotes | format.RestoreSpacesAroundBinaryOperation |
	format.RestoreStringWithoutDefaultCharset

// Restore renders node (a statement or an expression, possibly modified by
// a rewrite) back to SQL with RestoreFlags. Safe for concurrent use on
// distinct nodes; it only reads node.
func Restore(node ast.Node) (string, error) {
	var b strings.Builder
	if err := node.Restore(format.NewRestoreCtx(RestoreFlags, &b)); err != nil {
		return "", err
	}
	return b.String(), nil
}
