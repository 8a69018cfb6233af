package parser

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
)

// RestoreFlags are the flags Restore uses: single-quoted strings with
// backslashes escaped, upper-case keywords, back-quoted names, spaces around
// binary operators, no introducer for utf8mb4 strings. The result parses
// back to the same facts under MySQL's default SQL mode, with two known
// differences of the TiDB AST: an explicit _utf8mb4 introducer is dropped,
// and SET TRANSACTION without a scope comes back as a SESSION setting
// (the rewrite stage restores UPDATE statements only).
const RestoreFlags = format.RestoreStringSingleQuotes | format.RestoreStringEscapeBackslash |
	format.RestoreKeyWordUppercase | format.RestoreNameBackQuotes |
	format.RestoreSpacesAroundBinaryOperation | format.RestoreStringWithoutDefaultCharset

// Restore renders node (a statement or an expression, possibly modified by
// a rewrite) back to SQL with RestoreFlags. A node the TiDB AST cannot
// restore gives an error (wrapping ErrInternal if it panicked). Safe for
// concurrent use; it only reads node.
func Restore(node ast.Node) (sql string, err error) {
	defer func() {
		if r := recover(); r != nil {
			sql, err = "", fmt.Errorf("%w: restore panicked: %v", ErrInternal, r)
		}
	}()
	var b strings.Builder
	if err := node.Restore(format.NewRestoreCtx(RestoreFlags, &b)); err != nil {
		return "", err
	}
	return b.String(), nil
}
