package parser

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"
)

// Mode is the part of a session's sql_mode that changes how MariaDB reads
// SQL text. Modes that change only what statements do (STRICT_*, NO_ZERO_DATE
// ...) are not in it. The zero Mode is MariaDB's reading with none of them:
// "x" is a string, a backslash escapes, || is OR.
type Mode uint32

// Mode flags.
const (
	// ModeANSIQuotes: "x" is an identifier, not a string.
	ModeANSIQuotes Mode = 1 << iota
	// ModeNoBackslashEscapes: a backslash in a string is an ordinary
	// character, so it cannot escape the closing quote.
	ModeNoBackslashEscapes
	// ModePipesAsConcat: || concatenates instead of meaning OR.
	ModePipesAsConcat
	// ModeHighNotPrecedence: NOT binds tighter (NOT a BETWEEN b AND c).
	ModeHighNotPrecedence
	// ModeIgnoreSpace: a space may follow a built-in function's name, whose
	// names become reserved.
	ModeIgnoreSpace
	// ModeOracle: MariaDB's Oracle grammar, far beyond what the parser
	// reads; analyses under it are Uncertain.
	ModeOracle
	// ModeMSSQL: MariaDB's MSSQL mode, which also reads [x] as an
	// identifier; analyses under it are Uncertain.
	ModeMSSQL
	// ModeUnknown: the sql_mode held a name this package does not know
	// (a newer server); analyses under it are Uncertain.
	ModeUnknown
)

var modeNames = []struct {
	m    Mode
	name string
}{
	{ModeANSIQuotes, "ANSI_QUOTES"},
	{ModeNoBackslashEscapes, "NO_BACKSLASH_ESCAPES"},
	{ModePipesAsConcat, "PIPES_AS_CONCAT"},
	{ModeHighNotPrecedence, "HIGH_NOT_PRECEDENCE"},
	{ModeIgnoreSpace, "IGNORE_SPACE"},
	{ModeOracle, "ORACLE"},
	{ModeMSSQL, "MSSQL"},
	{ModeUnknown, "UNKNOWN"},
}

// ansiLike is what MariaDB 10.11's combination modes ANSI, DB2, MAXDB,
// POSTGRESQL, MSSQL and ORACLE imply of Mode (its expand_sql_mode; the
// rest of what they imply does not change how text reads).
const ansiLike = ModePipesAsConcat | ModeANSIQuotes | ModeIgnoreSpace

// sqlModeWords maps every sql_mode name MariaDB 10.11 accepts to the Mode
// it implies (0 for names that change no reading of text).
var sqlModeWords = map[string]Mode{
	"ANSI_QUOTES":          ModeANSIQuotes,
	"NO_BACKSLASH_ESCAPES": ModeNoBackslashEscapes,
	"PIPES_AS_CONCAT":      ModePipesAsConcat,
	"HIGH_NOT_PRECEDENCE":  ModeHighNotPrecedence,
	"IGNORE_SPACE":         ModeIgnoreSpace,
	"ANSI":                 ansiLike,
	"DB2":                  ansiLike,
	"MAXDB":                ansiLike,
	"POSTGRESQL":           ansiLike,
	"MSSQL":                ansiLike | ModeMSSQL,
	"ORACLE":               ansiLike | ModeOracle,
	"MYSQL323":             ModeHighNotPrecedence,
	"MYSQL40":              ModeHighNotPrecedence,

	"REAL_AS_FLOAT": 0, "IGNORE_BAD_TABLE_OPTIONS": 0, "ONLY_FULL_GROUP_BY": 0,
	"NO_UNSIGNED_SUBTRACTION": 0, "NO_DIR_IN_CREATE": 0, "NO_KEY_OPTIONS": 0,
	"NO_TABLE_OPTIONS": 0, "NO_FIELD_OPTIONS": 0, "NO_AUTO_VALUE_ON_ZERO": 0,
	"STRICT_TRANS_TABLES": 0, "STRICT_ALL_TABLES": 0, "NO_ZERO_IN_DATE": 0,
	"NO_ZERO_DATE": 0, "ALLOW_INVALID_DATES": 0, "ERROR_FOR_DIVISION_BY_ZERO": 0,
	"TRADITIONAL": 0, "NO_AUTO_CREATE_USER": 0, "NO_ENGINE_SUBSTITUTION": 0,
	"PAD_CHAR_TO_FULL_LENGTH": 0, "EMPTY_STRING_IS_NULL": 0,
	"SIMULTANEOUS_ASSIGNMENT": 0, "TIME_ROUND_FRACTIONAL": 0,
}

// ParseSQLMode reads a sql_mode value as MariaDB 10.11 spells it
// (comma-separated names, any case, blanks around names ignored) into the
// Mode it implies, combination modes (ANSI, ORACLE, MSSQL, DB2,
// POSTGRESQL, MAXDB, MYSQL323, MYSQL40) expanded. A name it does not know
// sets ModeUnknown. The empty string is the zero Mode.
func ParseSQLMode(s string) Mode {
	var m Mode
	for _, w := range strings.Split(s, ",") {
		w = strings.ToUpper(strings.TrimSpace(w))
		if w == "" {
			continue
		}
		bits, ok := sqlModeWords[w]
		if !ok {
			bits = ModeUnknown
		}
		m |= bits
	}
	return m
}

// String lists the flags of m, comma-separated ("" for none).
func (m Mode) String() string {
	var names []string
	for _, n := range modeNames {
		if m&n.m != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ",")
}

// uncertain says why text cannot be read with confidence under m ("" when
// it can).
func (m Mode) uncertain() string {
	switch {
	case m&ModeOracle != 0:
		return "sql_mode ORACLE: MariaDB's Oracle grammar is not parsed"
	case m&ModeMSSQL != 0:
		return "sql_mode MSSQL: MariaDB's MSSQL reading is not parsed"
	case m&ModeUnknown != 0:
		return "the session's sql_mode is not known to lockproxy"
	}
	return ""
}

// tidb is m as the TiDB parser's SQL mode.
func (m Mode) tidb() mysql.SQLMode {
	var t mysql.SQLMode
	for _, p := range []struct {
		m Mode
		t mysql.SQLMode
	}{
		{ModeANSIQuotes, mysql.ModeANSIQuotes},
		{ModeNoBackslashEscapes, mysql.ModeNoBackslashEscapes},
		{ModePipesAsConcat, mysql.ModePipesAsConcat},
		{ModeHighNotPrecedence, mysql.ModeHighNotPrecedence},
		{ModeIgnoreSpace, mysql.ModeIgnoreSpace},
	} {
		if m&p.m != 0 {
			t |= p.t
		}
	}
	return t
}

// Options say how the server reads the text being analysed.
type Options struct {
	// Mode is the session's sql_mode (ParseSQLMode of @@SESSION.sql_mode).
	Mode Mode
	// ServerVersion is the server's version as MariaDB numbers it in
	// executable comments: 101106 for 10.11.6. 0 means unknown: a
	// version-numbered executable comment then makes the analysis
	// Uncertain.
	ServerVersion int
	// CaseSensitiveNames: the server compares table names and aliases
	// case-sensitively (its lower_case_table_names is 0, as on Linux by
	// default), so a column qualified `T.id` belongs to the table or alias
	// written `T`, never to one written `t`.
	CaseSensitiveNames bool
}

// DefaultServerVersion is the server version Analyze assumes: the first
// MariaDB 10.11 release, the series lockproxy is built against.
const DefaultServerVersion = 101100

// DefaultOptions are the options of Analyze: no sql_mode flag, server
// DefaultServerVersion.
var DefaultOptions = Options{ServerVersion: DefaultServerVersion}

// ServerVersionOf reads a server's version string as its greeting gives
// it ("10.11.6-MariaDB-log", "5.5.5-10.11.6-MariaDB") into the number
// executable comments compare with (101106); 0 when it cannot.
func ServerVersionOf(s string) int {
	s = strings.TrimPrefix(s, "5.5.5-")
	var parts [3]int
	n := 0
	for i := 0; i < len(s) && n < 3; n++ {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' && j-i < 3 {
			parts[n] = parts[n]*10 + int(s[j]-'0')
			j++
		}
		if j == i {
			return 0
		}
		i = j
		if n < 2 {
			if i >= len(s) || s[i] != '.' {
				return 0
			}
			i++
		}
	}
	if n < 3 || parts[1] > 99 || parts[2] > 99 {
		return 0
	}
	return parts[0]*10000 + parts[1]*100 + parts[2]
}

// MayChangeMode reports whether running the statement may change how the
// session's later text is read: its sql_mode, its client character set or
// the character set its literals are converted to. That is SET of
// sql_mode, SET NAMES, SET CHARACTER SET and SET of character_set_client,
// character_set_connection or collation_connection (which sets
// character_set_connection too, and MariaDB does not report that one
// changed; whatever the value: the server's answer tells which it
// became), and EXECUTE, which runs SQL the text does not show.
// CALL does not: MariaDB restores the caller's sql_mode and client
// character set when a routine returns, whatever the routine ran.
func (f *Facts) MayChangeMode() bool {
	switch f.Kind {
	case KindExecute:
		return true
	case KindSet:
		for _, v := range f.Effects.SessionVars {
			switch v {
			case "sql_mode", "names", "character set", "character_set_client", "charset",
				"character_set_connection", "collation_connection":
				return true
			}
		}
	}
	return false
}

// MayChangeMode reports whether running the text may change the session's
// sql_mode or client character set: a statement of it may
// (Facts.MayChangeMode), or it could not be parsed and names sql_mode, a
// character set (NAMES, CHARACTER SET, character_set_client, CHARSET) or
// EXECUTE (EXECUTE IMMEDIATE).
func (a *Analysis) MayChangeMode() bool {
	if a.Unparsed {
		for _, w := range []string{"sql_mode", "names", "character", "charset", "execute"} {
			if containsFold(a.SQL, w) {
				return true
			}
		}
		return false
	}
	for _, f := range a.Stmts {
		if f.MayChangeMode() {
			return true
		}
	}
	return false
}
