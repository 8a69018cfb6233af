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
	return RestoreMode(node, 0)
}

// RestoreFlagsFor returns the flags RestoreMode uses under sql_mode flags
// m: RestoreFlags, except that under NO_BACKSLASH_ESCAPES a backslash in
// a string is written as itself (the server reads it so; a doubled one
// would be two). Strings are single-quoted and names back-quoted, which
// every mode reads alike.
func RestoreFlagsFor(m Mode) format.RestoreFlags {
	if m&ModeNoBackslashEscapes != 0 {
		return RestoreFlags &^ format.RestoreStringEscapeBackslash
	}
	return RestoreFlags
}

// RestoreMode is Restore for a session whose sql_mode flags are m (a
// Facts' Mode): the text reads back the same under m.
func RestoreMode(node ast.Node, m Mode) (sql string, err error) {
	defer func() {
		if r := recover(); r != nil {
			sql, err = "", fmt.Errorf("%w: restore panicked: %v", ErrInternal, r)
		}
	}()
	var b strings.Builder
	if err := node.Restore(format.NewRestoreCtx(RestoreFlagsFor(m), &b)); err != nil {
		return "", err
	}
	return b.String(), nil
}
