package proxy

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/simplifiedchinese"
)

// The typed part of the plan oracle's generator: keys of every type the
// oracle's typed tables hold (INT, BIGINT UNSIGNED, DECIMAL, DATETIME,
// VARCHAR in each collation lockproxy keys, and a DATETIME + latin1
// composite key), each spelled in the ways MariaDB reads as that key or
// near it: decimal strings past 38 digits, exponents, floats, hex, bit,
// temporal spellings, out-of-range values (under a strict and an empty
// sql_mode), introducers, COLLATE, a latin1 client, and as binary
// parameters of every type that can carry them.

// nonStrict is the oracle case mode that empties sql_mode, under which
// MariaDB clips, truncates and rounds what it stores instead of refusing.
const nonStrict = "''"

// typedKey is one typed oracle table: its key column(s), a key's values
// for existing rows and a few new ones, and how to spell one.
type typedKey struct {
	table string
	cols  []string
	vals  [][]string // each row's key values (UTF-8), one per column
	spell []func(g *gen, v string) string
	param []func(g *gen, v string) binParam
}

// textTables are the VARCHAR key tables: collation, rows, and values
// MariaDB calls equal to a row under that collation (alternative
// spellings beside case, trailing spaces and the encodings).
var textTables = []struct {
	name, charset, collation string
	rows                     []string
	alike                    map[string][]string
}{
	{"t_unicode", "utf8mb4", "utf8mb4_unicode_ci", []string{"abc", "josé", "i", "1001", "straße"},
		map[string][]string{"josé": {"JOSE", "jose\u0301"}, "abc": {"ÀBC"}, "straße": {"STRASSE", "strasse"}}},
	{"t_uca", "utf8mb4", "utf8mb4_uca1400_ai_ci", []string{"abc", "1001", "a", "é", "😀x"},
		map[string][]string{"1001": {"١٠٠١", "۱۰۰۱"}, "a": {"a\u200b", "á", "A\u0301"}, "é": {"e\u0301", "E"}}},
	{"t_ascs", "utf8mb4", "utf8mb4_uca1400_as_cs", []string{"Kelvin", "é", "abc"},
		map[string][]string{"Kelvin": {"\u212Aelvin"}, "é": {"e\u0301"}}},
	{"t_bin", "utf8mb4", "utf8mb4_bin", []string{"abc", "ABC", "josé", "😀"}, map[string][]string{"abc": {"abc  "}}},
	{"t_nopad", "utf8mb4", "utf8mb4_nopad_bin", []string{"abc", "abc ", "josé"}, nil},
	{"t_swedish", "latin1", "latin1_swedish_ci", []string{"y", "d", "josé", "ae"},
		map[string][]string{"y": {"ü", "Ü", "Y"}, "d": {"ð", "Ð"}, "josé": {"JOSÉ", "jose", "JOSE"}}},
	{"t_german", "latin1", "latin1_german2_ci", []string{"ae", "oe", "ss", "abc"},
		map[string][]string{"ae": {"ä", "Ä", "AE"}, "oe": {"ö"}, "ss": {"ß"}}},
}

// typedTableDDL are the oracle tables of the typed keys.
func typedTableDDL() []struct{ name, ddl, seed string } {
	out := []struct{ name, ddl, seed string }{
		{"ikey", "k INT PRIMARY KEY, v INT NOT NULL", "(1001, 1), (0, 2), (2147483647, 3), (-2147483648, 4), (1002, 5)"},
		{"ukey", "k BIGINT UNSIGNED PRIMARY KEY, v INT NOT NULL",
			"(1001, 1), (0, 2), (18446744073709551615, 3), (9223372036854775807, 4), (1152921504606846976, 5), (1002, 6)"},
		{"dkey", "k DECIMAL(12,3) PRIMARY KEY, v INT NOT NULL", "(1001, 1), (1001.5, 2), (0, 3), (999999999.999, 4), (1001.501, 5)"},
		{"dt", "k DATETIME PRIMARY KEY, v INT NOT NULL",
			"('2000-10-01 12:00:00', 1), ('2000-10-01 12:00:01', 2), ('2000-10-01 00:00:00', 3), ('2000-10-02 00:00:00', 4)"},
		{"dtc", "at DATETIME(2) NOT NULL, tag VARCHAR(8) CHARACTER SET latin1 COLLATE latin1_german2_ci NOT NULL, v INT NOT NULL, " +
			"PRIMARY KEY (at, tag)", "('2000-10-01 12:00:00.50', 'ae', 1), ('2000-10-01 12:00:00', 'oe', 2), ('2000-10-01 12:00:00.50', 'x', 3)"},
	}
	for _, tt := range textTables {
		var seed []string
		for i, r := range tt.rows {
			seed = append(seed, fmt.Sprintf("('%s', %d)", r, i+1))
		}
		out = append(out, struct{ name, ddl, seed string }{tt.name,
			"k VARCHAR(32) CHARACTER SET " + tt.charset + " COLLATE " + tt.collation + " PRIMARY KEY, v INT NOT NULL", strings.Join(seed, ", ")})
	}
	return out
}

// typedKeys are the generator's view of the typed tables.
func typedKeys() []typedKey {
	ints := func(vs ...string) [][]string {
		var out [][]string
		for _, v := range vs {
			out = append(out, []string{v})
		}
		return out
	}
	out := []typedKey{
		{"ikey", []string{"k"}, ints("1001", "0", "2147483647", "-2147483648", "1002", "1003", "99999999999", "-1"),
			[]func(*gen, string) string{(*gen).numSpell}, []func(*gen, string) binParam{(*gen).numParam}},
		{"ukey", []string{"k"}, ints("1001", "0", "18446744073709551615", "9223372036854775807", "1152921504606846976", "1003", "-1", "18446744073709551616"),
			[]func(*gen, string) string{(*gen).numSpell}, []func(*gen, string) binParam{(*gen).numParam}},
		{"dkey", []string{"k"}, ints("1001", "1001.5", "0", "999999999.999", "1001.501", "1001.5004", "1001.5005", "1000000000"),
			[]func(*gen, string) string{(*gen).numSpell}, []func(*gen, string) binParam{(*gen).numParam}},
		{"dt", []string{"k"}, ints("2000-10-01 12:00:00", "2000-10-01 12:00:01", "2000-10-01 00:00:00", "2000-10-02 00:00:00", "2000-10-01 12:00:00.5", "2000-10-01 11:59:59.5"),
			[]func(*gen, string) string{(*gen).timeSpell}, []func(*gen, string) binParam{(*gen).timeParam}},
		{"dtc", []string{"at", "tag"}, [][]string{{"2000-10-01 12:00:00.5", "ae"}, {"2000-10-01 12:00:00", "oe"}, {"2000-10-01 12:00:00.5", "x"},
			{"2000-10-01 12:00:00.505", "ss"}},
			[]func(*gen, string) string{(*gen).timeSpell, textSpellIn("latin1_german2_ci")},
			[]func(*gen, string) binParam{(*gen).timeParam, textParamIn("latin1_german2_ci")}},
	}
	for _, tt := range textTables {
		vals := ints(tt.rows...)
		vals = append(vals, []string{"new"}, []string{strings.Repeat("w", 40)})
		out = append(out, typedKey{tt.name, []string{"k"}, vals,
			[]func(*gen, string) string{textSpellIn(tt.collation)}, []func(*gen, string) binParam{textParamIn(tt.collation)}})
	}
	return out
}

// typedCase is a write of a typed table, in text or by a prepared
// statement, sometimes from a latin1 client or under an empty sql_mode.
func (g *gen) typedCase(c *oracleCase) {
	keys := typedKeys()
	// Half the cases on the number and date tables (listed first), half on
	// the text tables.
	k := keys[g.ch.intn(len(keys)-len(textTables))]
	if g.chance(50) {
		k = keys[len(keys)-len(textTables)+g.ch.intn(len(textTables))]
	}
	g.mark("typed key: " + k.table)
	if g.chance(25) {
		c.Mode = nonStrict
		g.mark("sql_mode empty: clipping")
	}
	if g.chance(35) {
		c.Prepare, c.Params = g.typedPrepared(k)
		return
	}
	c.Text = g.typedStatement(k)
	if g.chance(25) {
		cs := g.pick(clientCharsets...)
		if b, ok := encodeIn(cs, c.Text); ok {
			c.Text = b
			c.Setup = "SET NAMES " + cs
			c.Before = func(s *oracleSession, _ *oracleBed) error { return s.exec("SET NAMES " + cs) }
			g.mark("client charset " + cs)
		}
	}
}

// clientCharsets are the client character sets typed cases are sent in
// (utf8mb4 otherwise): latin1 most often.
var clientCharsets = []string{"latin1", "latin1", "latin1", "utf8mb3", "gbk", "cp1250", "ascii", "binary"}

// encodeIn is s (UTF-8) in character set cs, when every character has
// one there.
func encodeIn(cs, s string) (string, bool) {
	switch cs {
	case "latin1":
		return toLatin1(s)
	case "utf8mb3":
		for _, r := range s {
			if r > 0xffff {
				return "", false
			}
		}
		return s, true
	case "ascii":
		for _, r := range s {
			if r > 0x7f {
				return "", false
			}
		}
		return s, true
	case "binary":
		return s, true
	}
	enc := map[string]*encoding.Encoder{"gbk": simplifiedchinese.GBK.NewEncoder(), "cp1250": charmap.Windows1250.NewEncoder()}[cs]
	b, err := enc.String(s)
	return b, err == nil
}

// toLatin1 is s (UTF-8) in latin1, when every character has a latin1 byte.
func toLatin1(s string) (string, bool) {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			return "", false
		}
		b = append(b, byte(r))
	}
	return string(b), true
}

// typedRow picks a row's key values and spells them.
func (g *gen) typedRow(k typedKey) []string {
	v := k.vals[g.ch.intn(len(k.vals))]
	out := make([]string, len(v))
	for i := range v {
		out[i] = k.spell[i](g, v[i])
	}
	return out
}

func (g *gen) typedEq(k typedKey) string {
	vals := g.typedRow(k)
	var parts []string
	for i, c := range k.cols {
		parts = append(parts, c+" = "+vals[i])
	}
	return strings.Join(parts, " AND ")
}

// typedStatement is one write of k's table in some shape.
func (g *gen) typedStatement(k typedKey) string {
	cols := strings.Join(k.cols, ", ") + ", v"
	row := func() string { return "(" + strings.Join(g.typedRow(k), ", ") + ", " + fmt.Sprint(g.ch.intn(50)) + ")" }
	switch g.ch.intn(9) {
	case 0, 1:
		return "UPDATE " + k.table + " SET v = v + 1 WHERE " + g.typedEq(k)
	case 2:
		return "DELETE FROM " + k.table + " WHERE " + g.typedEq(k)
	case 3:
		if len(k.cols) == 1 {
			return "UPDATE " + k.table + " SET v = v + 1 WHERE k IN (" + g.typedRow(k)[0] + ", " + g.typedRow(k)[0] + ")"
		}
		return "UPDATE " + k.table + " SET v = v + 1 WHERE " + g.typedEq(k) + " OR " + g.typedEq(k)
	case 4:
		g.mark("key change")
		set := make([]string, len(k.cols))
		for i, c := range k.cols {
			set[i] = c + " = " + g.typedRow(k)[i]
		}
		return "UPDATE " + g.pick("", "IGNORE ") + k.table + " SET " + strings.Join(set, ", ") + " WHERE " + g.typedEq(k)
	case 5:
		g.mark("INSERT ... ON DUPLICATE KEY UPDATE")
		return "INSERT " + g.pick("", "IGNORE ") + "INTO " + k.table + " (" + cols + ") VALUES " + row() + " ON DUPLICATE KEY UPDATE v = v + 1"
	case 6:
		g.mark("REPLACE")
		return "REPLACE INTO " + k.table + " (" + cols + ") VALUES " + row()
	}
	g.mark("INSERT")
	return "INSERT " + g.pick("", "IGNORE ") + "INTO " + k.table + " (" + cols + ") VALUES " + row()
}

// typedPrepared is an UPDATE, upsert or REPLACE of k's table with every
// key value a typed parameter.
func (g *gen) typedPrepared(k typedKey) (string, []binParam) {
	g.mark("prepared typed key")
	v := k.vals[g.ch.intn(len(k.vals))]
	params := make([]binParam, len(v))
	marks := make([]string, len(v))
	for i := range v {
		params[i] = k.param[i](g, v[i])
		marks[i] = "?"
	}
	var eq []string
	for _, c := range k.cols {
		eq = append(eq, c+" = ?")
	}
	cols := strings.Join(k.cols, ", ") + ", v"
	switch g.ch.intn(4) {
	case 0:
		return "INSERT " + g.pick("", "IGNORE ") + "INTO " + k.table + " (" + cols + ") VALUES (" + strings.Join(marks, ", ") + ", 1) ON DUPLICATE KEY UPDATE v = v + 1", params
	case 1:
		return "REPLACE INTO " + k.table + " (" + cols + ") VALUES (" + strings.Join(marks, ", ") + ", 1)", params
	}
	return "UPDATE " + k.table + " SET v = v + 1 WHERE " + strings.Join(eq, " AND "), params
}

// numSpell spells the number v (as text) as MariaDB reads it as v or near
// it; out-of-range and inexact spellings included.
func (g *gen) numSpell(v string) string {
	ip, _, isFrac := strings.Cut(v, ".")
	switch g.ch.intn(16) {
	case 0:
		g.mark("numeric spelling: quoted")
		return "'" + v + "'"
	case 1:
		g.mark("numeric spelling: past 38 fraction digits")
		return "'" + v + map[bool]string{true: "", false: "."}[isFrac] + strings.Repeat("0", 40) + "1'"
	case 2:
		g.mark("numeric spelling: past 38 fraction digits")
		return v + map[bool]string{true: "", false: "."}[isFrac] + strings.Repeat("0", 40) + "1"
	case 3:
		g.mark("numeric spelling: exponent")
		return v + "e0"
	case 4:
		g.mark("numeric spelling: quoted exponent")
		return "'" + v + "e0'"
	case 5:
		g.mark("numeric spelling: underflowing exponent")
		return "'" + v + "e-400'"
	case 6:
		if !isFrac && !strings.HasPrefix(v, "-") && len(v) < 17 {
			g.mark("numeric spelling: hex")
			var n uint64
			fmt.Sscan(v, &n)
			return fmt.Sprintf("0x%X", n)
		}
	case 7:
		if !isFrac && !strings.HasPrefix(v, "-") && len(v) < 17 {
			g.mark("numeric spelling: bit literal")
			var n uint64
			fmt.Sscan(v, &n)
			return fmt.Sprintf("b'%b'", n)
		}
	case 8:
		g.mark("numeric spelling: nines past 38 digits")
		return "'" + ip + "." + strings.Repeat("9", 42) + "'"
	case 9:
		g.mark("numeric spelling: float beyond 2^53")
		return g.pick("1152921504606846976e0", "9223372036854775807e0", "18446744073709551615e0", "9007199254740993e0")
	case 10:
		g.mark("numeric spelling: out of range")
		return g.pick("99999999999", "'99999999999'", "-1", "18446744073709551616", "1e20", "'-1'", "-2147483649")
	case 11:
		g.mark("numeric spelling: introducer")
		return "_latin1'" + v + "'"
	case 12:
		g.mark("numeric spelling: fraction")
		return v + g.pick(".4", ".5", ".0004", ".0005")
	}
	return v
}

// numParam is a typed parameter for the number v.
func (g *gen) numParam(v string) binParam {
	le := binary.LittleEndian
	var f float64
	fmt.Sscan(v, &f)
	switch g.ch.intn(7) {
	case 0:
		g.mark("param DOUBLE typed")
		if g.chance(50) {
			f = g.pick2f(1152921504606846976, 1001.5, 1e20)
		}
		return binParam{mysql.MYSQL_TYPE_DOUBLE, false, le.AppendUint64(nil, math.Float64bits(f)), fmt.Sprintf("DOUBLE %g", f)}
	case 1:
		s := v + g.pick("", ".0000000000000000000000000000000000000000001", "00")
		if !strings.Contains(v, ".") && strings.HasSuffix(s, "00") {
			s = v + ".00"
		}
		g.mark("param NEWDECIMAL typed")
		return binParam{mysql.MYSQL_TYPE_NEWDECIMAL, false, lenenc(s), "NEWDECIMAL " + s}
	case 2:
		s := g.pick(v+"e0", "'"+v+"'", v+".0000000000000000000000000000000000000000001", " "+v, "0x3E9", v+"e-400")
		s = strings.Trim(s, "'")
		g.mark("param VAR_STRING typed number")
		return binParam{mysql.MYSQL_TYPE_VAR_STRING, false, lenenc(s), fmt.Sprintf("VAR_STRING %q", s)}
	case 3:
		g.mark("param BLOB hex bytes")
		return binParam{mysql.MYSQL_TYPE_BLOB, false, lenenc("\x03\xe9"), `BLOB "\x03\xe9"`}
	case 4:
		g.mark("param LONGLONG signed -1")
		return binParam{mysql.MYSQL_TYPE_LONGLONG, false, le.AppendUint64(nil, math.MaxUint64), "LONGLONG -1"}
	case 5:
		g.mark("param LONGLONG UNSIGNED max")
		return binParam{mysql.MYSQL_TYPE_LONGLONG, true, le.AppendUint64(nil, math.MaxUint64), "LONGLONG UNSIGNED 18446744073709551615"}
	}
	g.mark("param VAR_STRING typed number")
	return binParam{mysql.MYSQL_TYPE_VAR_STRING, false, lenenc(v), fmt.Sprintf("VAR_STRING %q", v)}
}

func (g *gen) pick2f(fs ...float64) float64 { return fs[g.ch.intn(len(fs))] }
