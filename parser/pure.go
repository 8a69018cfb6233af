package parser

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// pureFuncs are the built-in functions, as the TiDB parser names them,
// whose call has no effect outside the statement and whose answer does not
// depend on which server of a replicated set runs it: a replica may serve
// a read that calls only these. It is an allowlist: a name missing here
// (a stored function, a UDF, a built-in lockproxy has not vetted) keeps the
// read on the primary. Left out on purpose: sequences (NEXTVAL, LASTVAL,
// SETVAL), user locks (GET_LOCK...), LOAD_FILE, the session's history
// (LAST_INSERT_ID, ROW_COUNT, FOUND_ROWS), CONNECTION_ID and every
// TiDB-only function.
var pureFuncs = map[string]bool{}

func init() {
	for _, n := range []string{
		// operators and control flow the parser gives as calls
		ast.Coalesce, ast.Greatest, ast.Least, ast.Interval, ast.If, ast.Ifnull, ast.Nullif,
		ast.IsNull, ast.Regexp, ast.RegexpLike, ast.RegexpSubstr, ast.RegexpInStr, ast.RegexpReplace,
		ast.BitCount, ast.DateLiteral, ast.TimeLiteral, ast.TimestampLiteral,
		// numbers
		ast.Abs, ast.Acos, ast.Asin, ast.Atan, ast.Atan2, ast.Ceil, ast.Ceiling, ast.Conv, ast.Cos, ast.Cot,
		ast.CRC32, ast.Degrees, ast.Exp, ast.Floor, ast.Ln, ast.Log, ast.Log2, ast.Log10, ast.PI, ast.Pow,
		ast.Power, ast.Radians, ast.Rand, ast.Round, ast.Sign, ast.Sin, ast.Sqrt, ast.Tan, ast.Truncate,
		"mod",
		// dates and times
		ast.AddDate, ast.AddTime, ast.ConvertTz, ast.Curdate, ast.CurrentDate, ast.CurrentTime,
		ast.CurrentTimestamp, ast.Curtime, ast.Date, ast.DateAdd, ast.DateFormat, ast.DateSub, ast.DateDiff,
		ast.Day, ast.DayName, ast.DayOfMonth, ast.DayOfWeek, ast.DayOfYear, ast.Extract, ast.FromDays,
		ast.FromUnixTime, ast.GetFormat, ast.Hour, ast.LocalTime, ast.LocalTimestamp, ast.MakeDate,
		ast.MakeTime, ast.MicroSecond, ast.Minute, ast.Month, ast.MonthName, ast.Now, ast.PeriodAdd,
		ast.PeriodDiff, ast.Quarter, ast.SecToTime, ast.Second, ast.StrToDate, ast.SubDate, ast.SubTime,
		ast.Sysdate, ast.Time, ast.TimeFormat, ast.TimeToSec, ast.TimeDiff, ast.Timestamp, ast.TimestampAdd,
		ast.TimestampDiff, ast.ToDays, ast.ToSeconds, ast.UnixTimestamp, ast.UTCDate, ast.UTCTime,
		ast.UTCTimestamp, ast.Week, ast.Weekday, ast.WeekOfYear, ast.Year, ast.YearWeek, ast.LastDay,
		// strings
		ast.ASCII, ast.Bin, ast.Concat, ast.ConcatWS, ast.Convert, ast.Elt, ast.ExportSet, ast.Field,
		ast.Format, ast.FromBase64, ast.InsertFunc, ast.Instr, ast.Lcase, ast.Left, ast.Length, ast.Locate,
		ast.Lower, ast.Lpad, ast.LTrim, ast.MakeSet, ast.Mid, ast.Oct, ast.OctetLength, ast.Ord,
		ast.Position, ast.Quote, ast.Repeat, ast.Replace, ast.Reverse, ast.Right, ast.RTrim, ast.Space,
		ast.Strcmp, ast.Substring, ast.Substr, ast.SubstringIndex, ast.ToBase64, ast.Trim, ast.Upper,
		ast.Ucase, ast.Hex, ast.Unhex, ast.Rpad, ast.BitLength, ast.CharFunc, ast.CharLength,
		ast.CharacterLength, ast.FindInSet, ast.WeightString, ast.Soundex,
		// information about the statement itself or the account
		ast.Charset, ast.Coercibility, ast.Collation, ast.CurrentUser, ast.CurrentRole, ast.Database,
		ast.Schema, ast.SessionUser, ast.SystemUser, ast.User, ast.Version,
		// miscellaneous
		ast.Benchmark, ast.Sleep, ast.AnyValue, ast.DefaultFunc, ast.InetAton, ast.InetNtoa, ast.Inet6Aton,
		ast.Inet6Ntoa, ast.IsIPv4, ast.IsIPv4Compat, ast.IsIPv4Mapped, ast.IsIPv6, ast.NameConst, ast.UUID,
		ast.UUIDShort,
		// encryption and compression
		ast.AesDecrypt, ast.AesEncrypt, ast.Compress, ast.Decode, ast.Encode, ast.MD5, ast.PasswordFunc,
		ast.RandomBytes, ast.SHA1, ast.SHA, ast.SHA2, ast.Uncompress, ast.UncompressedLength,
		// JSON
		ast.JSONType, ast.JSONExtract, ast.JSONUnquote, ast.JSONArray, ast.JSONObject, ast.JSONMerge,
		ast.JSONSet, ast.JSONInsert, ast.JSONReplace, ast.JSONRemove, ast.JSONOverlaps, ast.JSONContains,
		ast.JSONContainsPath, ast.JSONValid, ast.JSONArrayAppend, ast.JSONArrayInsert, ast.JSONMergePatch,
		ast.JSONMergePreserve, ast.JSONQuote, ast.JSONSearch, ast.JSONDepth, ast.JSONKeys, ast.JSONLength,
	} {
		pureFuncs[n] = true
	}
}

// serverVars are the system variables whose value on a replica differs
// from the primary's for the same session: its transaction and history
// (which lockproxy does not replay), replication and read-only state.
// @@GLOBAL reads count too. Others a replica answers as the primary would,
// from the session's replayed SETs, or for itself (@@server_id,
// @@hostname: the server that ran the read).
var serverVars = map[string]bool{
	"tx_read_only": true, "transaction_read_only": true, "tx_isolation": true, "transaction_isolation": true,
	"in_transaction": true, "autocommit": true, "last_insert_id": true, "identity": true, "insert_id": true,
	"warning_count": true, "error_count": true, "last_gtid": true, "pseudo_thread_id": true,
	"read_only": true, "innodb_read_only": true, "sql_log_bin": true, "log_bin": true,
	"gtid_binlog_pos": true, "gtid_binlog_state": true, "gtid_current_pos": true, "gtid_slave_pos": true,
	"gtid_domain_id": true, "gtid_seq_no": true, "gtid_strict_mode": true, "rand_seed1": true, "rand_seed2": true,
	"session_track_system_variables": true, "last_query_cost": true,
}

// calledByText are the words that, followed by "(", MariaDB may take for
// a built-in function: the pure ones and the aggregates. Written with
// blanks or a comment before the parenthesis, or back-quoted, some of them
// (NOW, COUNT, SUBSTRING...) call a stored function of that name instead
// (MariaDB's "function name parsing and resolution"), which the parser
// cannot tell from the tree.
var calledByText = map[string]bool{}

func init() {
	for n := range pureFuncs {
		calledByText[n] = true
	}
	for _, n := range []string{"count", "sum", "avg", "min", "max", "group_concat", "bit_and", "bit_or",
		"bit_xor", "std", "stddev", "stddev_pop", "stddev_samp", "variance", "var_pop", "var_samp",
		"json_arrayagg", "json_objectagg", "cast", "char"} {
		calledByText[n] = true
	}
}

// notePure records in Facts.Impure the first call of fc that is not a
// pure built-in.
func (an *analyzer) notePure(fc *ast.FuncCallExpr) {
	if an.f.Impure != "" {
		return
	}
	if fc.Schema.L != "" || !pureFuncs[fc.FnName.L] {
		an.f.Impure = "calls " + an.routineName(fc) + "()"
		return
	}
	an.pureCalls = true
}

// spacedCall returns the first name in text that MariaDB may resolve to a
// stored function although the tree shows a built-in: a calledByText
// word followed by "(" after blanks or a comment, or quoted (back quotes,
// or double quotes under ANSI_QUOTES: "now"() calls a stored function).
func spacedCall(text string, m Mode) string {
	l := lexer{s: text, mode: m}
	for {
		t, ok := l.next()
		if !ok {
			return ""
		}
		if t.punct || !calledByText[strings.ToLower(t.text)] {
			continue
		}
		end := l.i
		n, ok := l.next()
		if !ok {
			return ""
		}
		if n.punct && n.text == "(" && (t.quoted || l.i-1 != end) {
			return strings.ToLower(t.text)
		}
		l.i = end
	}
}
