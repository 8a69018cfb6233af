package proxy

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/pingcap/tidb/pkg/parser/charset"
	"go.uber.org/zap"
)

// replaySet records, for replica connections, the session variables SETs
// with computed values gave (SET time_zone = @tz, SET x = f()) as the
// values the primary computed, read back from it: evaluated again on a
// replica, the expression could give another value or have an effect
// there. User variables are not replayed: a read that uses one runs on
// the primary. When a value cannot be read back or written as a literal,
// the session's reads stay on the primary.
func (r *routeState) replaySet(be *backendConn, log *zap.Logger, sets []*parser.Facts) {
	var names []string
	seen := map[string]bool{}
	for _, f := range sets {
		for _, n := range f.Effects.SessionVars {
			if readOnlyVars[n] {
				continue // a replica connection stays read-only
			}
			vars := []string{n}
			if n == "names" || n == "character set" {
				vars = []string{"character_set_client", "character_set_connection", "character_set_results", "collation_connection"}
			}
			for _, v := range vars {
				if !seen[v] {
					seen[v] = true
					names = append(names, v)
				}
			}
		}
	}
	if len(names) == 0 {
		return
	}
	if be == nil {
		r.pinnedPrimary = true
		return
	}
	var q strings.Builder
	q.WriteString("SELECT ")
	for i, n := range names {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("@@SESSION." + quoteIdent(n))
	}
	row, cols, err := be.queryRowTyped(q.String(), true)
	if err == nil && (len(row) != len(names) || len(cols) != len(names)) {
		err = errNoRow
	}
	var set strings.Builder
	set.WriteString("SET ")
	for i := 0; err == nil && i < len(names); i++ {
		lit, ok := sqlLiteral(row[i], cols[i])
		if !ok {
			err = fmt.Errorf("proxy: cannot write the value of %s as a literal", names[i])
			break
		}
		if i > 0 {
			set.WriteString(", ")
		}
		set.WriteString("@@SESSION." + quoteIdent(names[i]) + " = " + lit)
	}
	if err != nil {
		log.Debug("cannot replay a SET on replicas; the session reads from the primary", zap.Error(err))
		r.pinnedPrimary = true
		return
	}
	r.sets = append(r.sets, set.String())
}

// quoteIdent back-quotes an identifier.
func quoteIdent(n string) string { return "`" + strings.ReplaceAll(n, "`", "``") + "`" }

// sqlLiteral writes a value of an internal query's result (text protocol)
// as an SQL literal of the same type: NULL, a number as the server wrote
// it (a float marked as one), a string as hex under its character set.
func sqlLiteral(v []byte, c column) (string, bool) {
	if v == nil {
		return "NULL", true
	}
	switch c.typ {
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG,
		mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_YEAR, mysql.MYSQL_TYPE_DECIMAL, mysql.MYSQL_TYPE_NEWDECIMAL:
		return string(v), numeric(v, false)
	case mysql.MYSQL_TYPE_FLOAT, mysql.MYSQL_TYPE_DOUBLE:
		if !numeric(v, true) {
			return "", false
		}
		if bytes.ContainsAny(v, "eE") {
			return string(v), true
		}
		return string(v) + "e0", true
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_ENUM,
		mysql.MYSQL_TYPE_SET, mysql.MYSQL_TYPE_TINY_BLOB, mysql.MYSQL_TYPE_MEDIUM_BLOB, mysql.MYSQL_TYPE_LONG_BLOB,
		mysql.MYSQL_TYPE_BLOB:
		if c.charset == binaryCollation {
			return fmt.Sprintf("_binary X'%x'", v), true
		}
		coll, err := charset.GetCollationByID(int(c.charset))
		if err != nil || coll.CharsetName == "" {
			return "", false
		}
		cs := coll.CharsetName
		if cs == "utf8" {
			cs = "utf8mb3"
		}
		return fmt.Sprintf("_%s X'%x'", cs, v), true
	}
	return "", false
}

// binaryCollation is the id of the binary character set's collation.
const binaryCollation = 63

// numeric reports whether v is a number as MariaDB writes one in a text
// result: digits, a sign, a point and, for floats, an exponent.
func numeric(v []byte, float bool) bool {
	if len(v) == 0 {
		return false
	}
	for _, c := range v {
		switch {
		case c >= '0' && c <= '9', c == '-', c == '.':
		case float && (c == 'e' || c == 'E' || c == '+'):
		default:
			return false
		}
	}
	return true
}

// readOnlyVars are the session variables of SET SESSION TRANSACTION READ
// ONLY|WRITE, which are not replayed: a replica connection is read-only
// whatever the session's primary connection is.
var readOnlyVars = map[string]bool{"tx_read_only": true, "transaction_read_only": true}

// sessionTransaction reports whether f is SET SESSION TRANSACTION (or SET
// SESSION tx_isolation...) with no global or autocommit part: its
// isolation level is replayed on replica connections as the value the
// primary then holds, so replica reads run under it.
func sessionTransaction(f *parser.Facts) bool {
	e := f.Effects
	return e.SetTransaction && e.SetTransactionScope == "session" && e.Autocommit == parser.AutocommitUnchanged &&
		len(e.GlobalVars) == 0 && len(e.UserVars) == 0
}

// replayable reports whether a SET belongs on every connection the session
// reads through: session and user variables, not autocommit or
// transaction characteristics (those keep the session on the primary) and
// not GLOBAL ones.
func replayable(f *parser.Facts) bool {
	e := f.Effects
	return e.Autocommit == parser.AutocommitUnchanged && !e.SetTransaction && len(e.GlobalVars) == 0 &&
		(len(e.SessionVars) > 0 || len(e.UserVars) > 0)
}
