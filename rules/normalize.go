package rules

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/lockproxy/lockproxy/parser"
)

// ErrUnkeyable is wrapped by Normalize when a value cannot name one row of
// its column: NULL (never equal to anything), an expression, a number
// compared with a string column (it matches many spellings), an unbound
// placeholder, or a type lockproxy cannot canonicalise.
var ErrUnkeyable = errors.New("rules: value cannot name a row")

// Use says how a value meets its column, which decides how MySQL converts it.
type Use int

// Uses of a value.
const (
	// Compare: WHERE column = value. MySQL compares an integer column with
	// a string as numbers, '1001' and 1001 select one row.
	Compare Use = iota
	// Assign: INSERT VALUES / SET column = value. MySQL converts the value
	// to the column's type and stores it (1001.5 into an INT is 1002).
	Assign
)

func unkeyable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnkeyable, fmt.Sprintf(format, args...))
}

// Normalize returns the bytes that stand for v in a lock key on column col,
// such that two spellings MySQL (MariaDB) would take for the same row give
// the same bytes: integers canonical ('1001', 1001, 1001.0, 0x3E9 and
// '  1001' agree on an INT column), decimals canonical, case and accents
// folded under a _ci collation, trailing spaces ignored under PAD SPACE
// collations. Where lockproxy cannot be sure, it merges rather than splits:
// two rows sharing a key only costs concurrency, one row under two keys
// would break mutual exclusion.
//
// col may be nil (table not described by LoadSchema): then integers and
// decimals are canonicalised, numeric strings too, and other strings are
// folded as under a _ci, PAD SPACE collation. v must not be a placeholder
// (bind it first with ParamValue). Safe for concurrent use.
func Normalize(col *Column, v parser.Value, use Use) ([]byte, error) {
	return NormalizeIn(col, v, use, TextCharsets{})
}

// NormalizeIn is Normalize for a value of a session whose text arrives in
// the character sets cs: a text value's key is then the one MariaDB's
// collation gives it after the server's conversions (see textkey.go).
func NormalizeIn(col *Column, v parser.Value, use Use, cs TextCharsets) ([]byte, error) {
	switch v.Kind {
	case parser.ValueNull:
		return nil, unkeyable("NULL never equals a row's key")
	case parser.ValueExpr:
		return nil, unkeyable("%s is not a constant", v.Text)
	case parser.ValueParam:
		return nil, unkeyable("placeholder ?%d is not bound", v.Param)
	}
	if col == nil {
		return normalizeUnknown(v)
	}
	switch family(col.DataType) {
	case famInt:
		return normalizeInt(col, v, use)
	case famDecimal:
		return normalizeDecimal(col, v, use)
	case famFloat:
		return normalizeFloat(v)
	case famString:
		return normalizeString(col, v, use, cs)
	case famBinary:
		return normalizeBinary(col, v, use)
	case famTemporal:
		return normalizeTemporal(col, v, use)
	case famTime:
		return normalizeTime(col, v)
	case famUUID:
		if !isTextual(v) {
			return nil, unkeyable("a number compared with uuid column %s", col.Name)
		}
		return []byte(strings.ToLower(strings.ReplaceAll(v.Str, "-", ""))), nil
	}
	return nil, unkeyable("column %s has type %s, which lockproxy cannot canonicalise", col.Name, col.DataType)
}

type typeFamily int

const (
	famOther typeFamily = iota
	famInt
	famDecimal
	famFloat
	famString
	famBinary
	famTemporal
	famTime
	famUUID
)

func family(dataType string) typeFamily {
	switch strings.ToLower(dataType) {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "bit", "bool", "boolean", "year":
		return famInt
	case "decimal", "numeric", "dec", "fixed":
		return famDecimal
	case "float", "double", "real", "double precision":
		return famFloat
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set":
		return famString
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return famBinary
	case "date", "datetime", "timestamp":
		return famTemporal
	case "time":
		return famTime
	case "uuid":
		return famUUID
	}
	return famOther
}

func isTextual(v parser.Value) bool {
	return v.Kind == parser.ValueString
}

// numberOf returns the canonical decimal a value stands for in a numeric
// context, as MySQL converts it.
func numberOf(v parser.Value) (string, error) {
	switch v.Kind {
	case parser.ValueInt:
		return strconv.FormatInt(v.Int, 10), nil
	case parser.ValueUint:
		return strconv.FormatUint(v.Uint, 10), nil
	case parser.ValueDecimal:
		if c, ok := canonDecimal(v.Str); ok && exactDecimal(c) {
			return c, nil
		}
		return "", unkeyable("decimal %s has more digits than lockproxy reads as MariaDB does (%d, %d after the point)", v.Text, maxDecimalDigits, maxDecimalScale)
	case parser.ValueFloat:
		return floatText(v.Float), nil
	case parser.ValueHex, parser.ValueBit:
		u, ok := bytesToUint(v.Str)
		if !ok {
			return "", unkeyable("%s is wider than 64 bits", v.Text)
		}
		return strconv.FormatUint(u, 10), nil
	case parser.ValueString:
		p := numericPrefix(v.Str)
		if c, ok := canonDecimal(p); ok && exactDecimal(c) {
			return c, nil
		}
		// MariaDB rounds what it reads beyond its decimal's digits, and
		// converts beyond that through a double: the differential test
		// (TestNormalizeAgreesWithMariaDB) shows it, lockproxy does not
		// claim to read it alike.
		return "", unkeyable("%s has more digits than lockproxy reads as MariaDB does (%d, %d after the point)", v.Text, maxDecimalDigits, maxDecimalScale)
	}
	return "", unkeyable("%s is not a number", v.Text)
}

func normalizeInt(col *Column, v parser.Value, use Use) ([]byte, error) {
	if use != Compare && (v.Kind == parser.ValueHex || v.Kind == parser.ValueBit) {
		// Stored, X'044C' is a binary string MariaDB converts as text
		// (to 0, with a warning), not the number 1100.
		return nil, unkeyable("%s stored into numeric column %s converts as a binary string", v.Text, col.Name)
	}
	if v.Kind == parser.ValueFloat && !(math.Abs(v.Float) < 1<<53) {
		// MariaDB clips or rounds such a double to the column's integers
		// in ways lockproxy does not claim to follow.
		return nil, unkeyable("float %s is beyond the integers a double holds exactly, for integer column %s", v.Text, col.Name)
	}
	n, err := numberOf(v)
	if err != nil && v.Kind == parser.ValueString {
		n, err = serverDecimal(col, v, use)
	}
	if err != nil {
		return nil, err
	}
	// A string meets an integer column as a double: beyond 2^53 several
	// integers compare equal to it.
	if v.Kind == parser.ValueString && use == Compare && !exactInDouble(n) {
		return nil, unkeyable("%s compares inexactly (as a double) with integer column %s", v.Text, col.Name)
	}
	if !isIntegral(n) {
		if use == Compare {
			// Equal to no integer: a key no integer row can share.
			return []byte(n), nil
		}
		r, ok := roundHalfAway(n)
		if !ok {
			return nil, unkeyable("%s out of range for column %s", v.Text, col.Name)
		}
		n = r
	}
	if strings.EqualFold(col.DataType, "year") {
		if i, err := strconv.Atoi(n); err != nil || (i != 0 && i < 100) {
			return nil, unkeyable("two-digit year %s on column %s", v.Text, col.Name)
		}
	}
	if use == Assign && !inIntRange(col, n) {
		// Refused by MariaDB, or stored as the nearest end (clip.go).
		n = intEnd(col, n)
	}
	return []byte(n), nil
}

// inIntRange reports whether the canonical integer n fits col's type (true
// for a type whose range lockproxy does not know: BIT, YEAR, BOOL).
func inIntRange(col *Column, n string) bool {
	bits := map[string]uint{"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}[strings.ToLower(col.DataType)]
	if bits == 0 {
		return true
	}
	if col.Unsigned {
		u, err := strconv.ParseUint(n, 10, 64)
		return err == nil && (bits == 64 || u < 1<<bits)
	}
	i, err := strconv.ParseInt(n, 10, 64)
	return err == nil && (bits == 64 || (i >= -(1<<(bits-1)) && i < 1<<(bits-1)))
}

func normalizeDecimal(col *Column, v parser.Value, use Use) ([]byte, error) {
	if use != Compare && (v.Kind == parser.ValueHex || v.Kind == parser.ValueBit) {
		return nil, unkeyable("%s stored into numeric column %s converts as a binary string", v.Text, col.Name)
	}
	n, err := numberOf(v)
	if err != nil && v.Kind == parser.ValueString {
		n, err = serverDecimal(col, v, use)
	}
	if err != nil {
		return nil, err
	}
	if use == Assign {
		// DECIMAL(p,s) stores s fraction digits, rounding half away from
		// zero: 1.105 into DECIMAL(10,2) is 1.11.
		if r, ok := roundToScale(n, decimalScale(col.ColumnType)); ok {
			n = r
		}
		// Past p-s integer digits (or negative into UNSIGNED) MariaDB
		// refuses the row or stores the nearest end (clip.go).
		ip, _, _ := strings.Cut(strings.TrimPrefix(n, "-"), ".")
		if ip == "0" {
			ip = ""
		}
		if p := decimalPrecision(col.ColumnType); p > maxDecimalDigits || decimalScale(col.ColumnType) > p {
			return nil, unkeyable("column %s: lockproxy cannot read the range of %s", col.Name, col.ColumnType)
		} else if len(ip) > p-decimalScale(col.ColumnType) || (col.Unsigned && strings.HasPrefix(n, "-")) {
			n = decimalEnd(col, n)
		}
	}
	return []byte(n), nil
}

// decimalScale reads s from "decimal(p,s)" (0 when absent, as MySQL has it).
func decimalScale(columnType string) int {
	_, rest, ok := strings.Cut(columnType, ",")
	if !ok {
		return 0
	}
	num, _, _ := strings.Cut(rest, ")")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n < 0 || n > 38 {
		return 0
	}
	return n
}

func normalizeFloat(v parser.Value) ([]byte, error) {
	n, err := numberOf(v)
	if err != nil {
		return nil, err
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return []byte(n), nil
	}
	return []byte(floatText(f)), nil
}

// textOf is the text a value stores as in a string column (Assign use).
func textOf(col *Column, v parser.Value, use Use) (string, error) {
	switch v.Kind {
	case parser.ValueString, parser.ValueHex, parser.ValueBit:
		return v.Str, nil
	}
	if use == Compare {
		return "", unkeyable("number %s compared with string column %s matches many spellings", v.Text, col.Name)
	}
	if strings.EqualFold(col.DataType, "enum") || strings.EqualFold(col.DataType, "set") {
		return "", unkeyable("number %s stored into %s column %s is an index", v.Text, col.DataType, col.Name)
	}
	if v.Kind == parser.ValueDecimal {
		// A decimal keeps its digits as written: 1.50 is stored as '1.50'.
		if _, ok := canonDecimal(v.Text); ok {
			return strings.TrimPrefix(v.Text, "+"), nil
		}
	}
	return numberOf(v)
}

func normalizeString(col *Column, v parser.Value, use Use, cs TextCharsets) ([]byte, error) {
	s, err := textOf(col, v, use)
	if err != nil {
		return nil, err
	}
	charCol := strings.EqualFold(col.DataType, "char")
	t := col.text
	if t == nil {
		// A schema not read from a server: fold by the literal form.
		return []byte(collate(col.Collation, s, charCol)), nil
	}
	if t.broken != "" {
		return nil, unkeyable("column %s: collation %s: %s", col.Name, t.name, t.broken)
	}
	from, via := valueCharsets(v, cs)
	if asciiOnly(s) && t.table != nil && (asciiCharsets[from] || (from == "binary" && asciiCharsets[t.charset])) && (via == "" || asciiCharsets[via]) {
		fast := s
		if charCol {
			fast = strings.TrimRight(fast, " ")
		}
		if k, ok := t.fastKey(fast); ok {
			chars := len(fast)
			if t.pad {
				chars = len(strings.TrimRight(fast, " "))
			}
			if err := fitsColumn(col, use, chars, len(fast)); err != nil {
				n, ok := cutLength(col, use)
				if !ok {
					return nil, err
				}
				// Stored as its first n characters (or refused, strict).
				if k, ok = t.fastKey(cutText(fast[:n], charCol)); !ok {
					return nil, err
				}
			}
			return []byte(k), nil
		}
	}
	if t.srv == nil || t.srv.s == nil {
		return nil, unkeyable("column %s: a value outside printable ASCII (or a collation without the fast path) is keyed by the primary's weights, and lockproxy has no connection to ask", col.Name)
	}
	a, err := t.srv.s.ask(t, textQuestion{collation: t.name, from: from, via: via, charCol: charCol, value: s})
	switch {
	case err != nil:
		return nil, unkeyable("column %s: cannot ask the primary how collation %s weighs the value: %v", col.Name, t.name, err)
	case a.failure != "":
		return nil, unkeyable("column %s: the primary does not weigh the value under collation %s: %s", col.Name, t.name, a.failure)
	case a.lossy:
		return nil, unkeyable("column %s: the value is not well-formed in %s, or has characters the column's character set %s lacks (MariaDB would refuse or replace them)", col.Name, from, t.charset)
	}
	if err := fitsColumn(col, use, a.chars, a.octets); err != nil {
		n, ok := cutLength(col, use)
		if !ok {
			return nil, err
		}
		// Stored as its first n characters (or refused, strict): the key
		// of those, as the primary cuts and weighs them.
		if a, err = t.srv.s.ask(t, textQuestion{collation: t.name, from: from, via: via, charCol: charCol, value: s, cut: n}); err != nil || a.failure != "" {
			return nil, unkeyable("column %s: cannot ask the primary how collation %s weighs the value cut to %d characters: %v%s", col.Name, t.name, n, err, a.failure)
		}
	}
	return []byte(a.key), nil
}

// valueCharsets returns the character set a text value's bytes are in and
// the connection's, which the server converts it through first ("" when it
// does not): an introducer names the literal's (_latin1 X'E9' too); hex
// and bit literals and BLOB parameters are otherwise binary strings, which
// meet a text column as bytes of its character set; anything else
// arrives in the client's and is converted to the connection's.
func valueCharsets(v parser.Value, cs TextCharsets) (from, via string) {
	switch {
	case v.Charset != "":
		return v.Charset, ""
	case v.Kind == parser.ValueHex || v.Kind == parser.ValueBit:
		return "binary", ""
	}
	from, via = cs.client(), cs.connection()
	if via == from {
		via = ""
	}
	return from, via
}

// fitsColumn refuses a value stored (Assign) into a text column that
// would cut it: the row then holds a shorter value than the one given (a
// CHAR or VARCHAR caller keys the cut value instead, see cutLength).
// chars counts the characters that matter (trailing spaces, which MariaDB
// drops silently, not under PAD SPACE), octets its bytes in the column's
// character set.
func fitsColumn(col *Column, use Use, chars, octets int) error {
	if use != Assign {
		return nil
	}
	switch strings.ToLower(col.DataType) {
	case "char", "varchar":
		if n, ok := charLength(col.ColumnType); ok && chars > n {
			return unkeyable("a value of %d characters stored into %s column %s is cut to %d", chars, col.ColumnType, col.Name, n)
		}
	case "tinytext", "text", "mediumtext":
		limit := map[string]int{"tinytext": 255, "text": 65535, "mediumtext": 16777215}[strings.ToLower(col.DataType)]
		if octets > limit {
			return unkeyable("a value of %d bytes stored into %s column %s is cut to %d", octets, col.DataType, col.Name, limit)
		}
	}
	return nil
}

// cutLength is the number of characters a CHAR or VARCHAR column keeps
// of a longer value stored into it: under an empty sql_mode or IGNORE
// MariaDB stores the first n characters; strict, it refuses the
// statement and writes nothing. Either way the only row written is the
// cut value's.
func cutLength(col *Column, use Use) (int, bool) {
	if use != Assign {
		return 0, false
	}
	switch strings.ToLower(col.DataType) {
	case "char", "varchar":
		return charLength(col.ColumnType)
	}
	return 0, false
}

// cutText is a printable ASCII value cut to its column's length, as a
// CHAR column reads it back (without trailing spaces) or a VARCHAR one.
func cutText(s string, charCol bool) string {
	if charCol {
		return strings.TrimRight(s, " ")
	}
	return s
}

// charLength reads n from "varchar(n)" or "char(n)".
func charLength(columnType string) (int, bool) {
	_, rest, ok := strings.Cut(columnType, "(")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, ")")
	n, err := strconv.Atoi(num)
	return n, err == nil && n >= 0
}

func normalizeBinary(col *Column, v parser.Value, use Use) ([]byte, error) {
	s, err := textOf(col, v, use)
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(col.DataType, "binary") {
		// BINARY(n) stores values right-padded with NUL to n bytes.
		if n := typeLength(col.ColumnType); n > len(s) {
			s += strings.Repeat("\x00", n-len(s))
		}
	}
	return []byte(s), nil
}

// typeLength reads n from "binary(n)"; 0 when absent.
func typeLength(columnType string) int {
	_, rest, ok := strings.Cut(columnType, "(")
	if !ok {
		return 0
	}
	num, _, _ := strings.Cut(rest, ")")
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || n > 255 {
		return 0
	}
	return n
}

// normalizeUnknown canonicalises a value for a column whose type is not
// known: numbers, and strings that are wholly numbers, canonical; other
// strings folded like a _ci PAD SPACE collation.
func normalizeUnknown(v parser.Value) ([]byte, error) {
	switch v.Kind {
	case parser.ValueHex, parser.ValueBit:
		return nil, unkeyable("%s on a column of unknown type (describe the table with LoadSchema)", v.Text)
	case parser.ValueString:
		if c, ok := canonDecimal(strings.TrimSpace(v.Str)); ok {
			return []byte(c), nil
		}
		return []byte(collate("", v.Str, false)), nil
	}
	n, err := numberOf(v)
	if err != nil {
		return nil, err
	}
	return []byte(n), nil
}
