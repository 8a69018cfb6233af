package rules

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/lockproxy/lockproxy/parser"
)

// NormalizeParam is Normalize for a typed execute-time parameter: the key
// of the rows MariaDB compares (Compare) or stores (Assign) p with on
// column col. It follows what MariaDB 10.11 does with each (parameter
// type, column type) pair, as the differential tests against a real
// server show:
//
//   - A TIME, DATE or DATETIME parameter meets a BIGINT column as the
//     number it converts to (00:10:01 is 1001, 2024-01-05 is 20240105,
//     2024-01-05 00:10:01 is 20240105001001). A smaller integer column is
//     compared as a time instead, and several integers convert to one time
//     (1001, 101001001 and 1231001001 are all 00:10:01): refused.
//   - A DATE or DATETIME parameter meets a DATE, DATETIME or TIMESTAMP
//     column as a datetime; a TIME meets a TIME column as a time. A TIME
//     against a date column depends on today's date: refused.
//   - A DOUBLE (or FLOAT) parameter compares as a double: exact on an
//     integer column below 2^53 and on a DECIMAL of at most 15 digits,
//     refused elsewhere.
//   - DECIMAL parameters are exact numbers; strings and blobs are strings.
//
// Any other pair, and any value MariaDB would convert with a warning
// (an invalid date, a fraction it would round), wraps ErrUnkeyable; an
// integer or decimal stored out of its column's range is keyed as the
// end of the range MariaDB stores it as (clip.go). Safe for concurrent
// use.
func NormalizeParam(col *Column, p Param, use Use) ([]byte, error) {
	return NormalizeParamIn(col, p, use, TextCharsets{})
}

// NormalizeParamIn is NormalizeParam for a session whose text arrives in
// the character sets cs (see NormalizeIn).
func NormalizeParamIn(col *Column, p Param, use Use, cs TextCharsets) ([]byte, error) {
	switch p.Type {
	case ParamNull:
		return nil, unkeyable("NULL never equals a row's key")
	case ParamOther:
		return nil, unkeyable("%s: lockproxy cannot tell how MariaDB reads this parameter (or one before it)", p)
	case ParamDate, ParamDateTime, ParamTime:
		return normalizeTemporalParam(col, p, use)
	case ParamDouble:
		if err := doubleMeets(col, p, use); err != nil {
			return nil, err
		}
	case ParamDecimal:
		if !plainDecimal(string(p.Bytes)) {
			return nil, unkeyable("%s is not a decimal lockproxy reads as MariaDB does", p)
		}
		if col != nil && use == Assign && (family(col.DataType) == famString || family(col.DataType) == famBinary) {
			return nil, unkeyable("%s stored into %s column %s", p, col.DataType, col.Name)
		}
	}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	return NormalizeIn(col, v, use, cs)
}

// plainDecimal reports whether s is [sign]digits[.digits] with at most 65
// digits, the text MariaDB's DECIMAL parameter reads exactly.
func plainDecimal(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	ip, fp, _ := strings.Cut(s, ".")
	return ip+fp != "" && len(ip)+len(fp) <= 65 && allDigits(ip) && allDigits(fp)
}

// doubleMeets refuses a double parameter on a column where comparing as
// doubles can make rows with different keys equal to it.
func doubleMeets(col *Column, p Param, use Use) error {
	if math.IsInf(p.Float, 0) || math.IsNaN(p.Float) {
		return unkeyable("%s is not a number a row can hold", p)
	}
	if col == nil {
		return unkeyable("%s on a column of unknown type (describe the table with LoadSchema)", p)
	}
	switch family(col.DataType) {
	case famInt:
		if strings.EqualFold(col.DataType, "year") || math.Abs(p.Float) >= 1<<53 {
			return unkeyable("%s compares inexactly (as a double) with %s column %s", p, col.DataType, col.Name)
		}
	case famDecimal:
		if use == Compare && decimalPrecision(col.ColumnType) > 15 {
			return unkeyable("%s compares as a double with %s column %s, whose values have more digits than a double", p, col.ColumnType, col.Name)
		}
	case famFloat:
		if strings.EqualFold(col.DataType, "float") {
			return unkeyable("%s compared with single-precision column %s", p, col.Name)
		}
	default:
		if use == Assign {
			return unkeyable("%s stored into %s column %s", p, col.DataType, col.Name)
		}
	}
	return nil
}

// decimalPrecision reads p from "decimal(p,s)" (10 when absent, as MySQL
// has it; 66, more than any column, when unreadable).
func decimalPrecision(columnType string) int {
	_, rest, ok := strings.Cut(columnType, "(")
	if !ok {
		return 10
	}
	num, _, _ := strings.Cut(rest, ",")
	num, _, _ = strings.Cut(num, ")")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n < 1 {
		return 66
	}
	return n
}

// normalizeTemporalParam keys a DATE, DATETIME/TIMESTAMP or TIME parameter.
func normalizeTemporalParam(col *Column, p Param, use Use) ([]byte, error) {
	if err := p.Time.check(p.Type); err != nil {
		return nil, unkeyable("%s: %v", p, err)
	}
	if col == nil {
		return nil, unkeyable("%s on a column of unknown type (describe the table with LoadSchema)", p)
	}
	t := p.Time
	switch {
	case family(col.DataType) == famInt && strings.EqualFold(col.DataType, "bigint") && use == Compare:
		// MariaDB turns the constant into the BIGINT column's integer.
		if c, ok := canonDecimal(t.number(p.Type)); ok {
			return []byte(c), nil
		}
	case family(col.DataType) == famTemporal && p.Type != ParamTime:
		if use == Assign && (t.Micro != 0 || strings.EqualFold(col.DataType, "date") && t.Hour+t.Minute+t.Second != 0) {
			return nil, unkeyable("%s stored into %s column %s loses part of it", p, col.ColumnType, col.Name)
		}
		s := t.dateText() + " " + t.clockText(false)
		if p.Type == ParamDate {
			s = t.dateText() + " 00:00:00"
		}
		if c, ok := canonDateTime(s); ok {
			return []byte(c), nil
		}
	case family(col.DataType) == famTime && p.Type == ParamTime:
		if use == Assign && t.Micro != 0 {
			return nil, unkeyable("%s stored into %s column %s loses part of it", p, col.ColumnType, col.Name)
		}
		return []byte(canonTime(t.Neg, t.Day*24+t.Hour, t.Minute, t.Second, t.Micro)), nil
	case family(col.DataType) == famInt && use == Compare:
		return nil, unkeyable("%s compares as a date/time with %s column %s, and several integers convert to one date/time", p, col.DataType, col.Name)
	}
	return nil, unkeyable("%s meets %s column %s in a way lockproxy cannot key", p, col.ColumnType, col.Name)
}

// check refuses fields MariaDB would read with a warning or clip.
func (t Temporal) check(typ ParamType) error {
	if typ == ParamTime {
		if t.Day < 0 || t.Day > 34 || t.Day*24+t.Hour >= 838 || t.Minute > 59 || t.Second > 59 || t.Micro > 999999 {
			return fmt.Errorf("out of the TIME range MariaDB reads without clipping")
		}
		return nil
	}
	if t.Year < 1 || t.Year > 9999 || t.Month < 1 || t.Month > 12 || t.Day < 1 || t.Day > daysIn(t.Year, t.Month) {
		return fmt.Errorf("not a valid date")
	}
	if typ == ParamDateTime && (t.Hour > 23 || t.Minute > 59 || t.Second > 59 || t.Micro > 999999) {
		return fmt.Errorf("not a valid time of day")
	}
	return nil
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// number is the decimal text MariaDB converts the value to in a numeric
// context: [-]hhmmss[.ffffff], YYYYMMDD, YYYYMMDDhhmmss[.ffffff].
func (t Temporal) number(typ ParamType) string {
	var s string
	switch typ {
	case ParamTime:
		s = fmt.Sprintf("%d%02d%02d", t.Day*24+t.Hour, t.Minute, t.Second)
		if t.Neg {
			s = "-" + s
		}
	case ParamDate:
		return fmt.Sprintf("%04d%02d%02d", t.Year, t.Month, t.Day)
	default:
		s = fmt.Sprintf("%04d%02d%02d%02d%02d%02d", t.Year, t.Month, t.Day, t.Hour, t.Minute, t.Second)
	}
	if t.Micro != 0 {
		s += fmt.Sprintf(".%06d", t.Micro)
	}
	return s
}

// canonTime is the key of a TIME value: [-]h:mm:ss[.f], no trailing
// fraction zeros, no sign on zero.
func canonTime(neg bool, h, m, s, us int) string {
	out := fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	if us != 0 {
		out += strings.TrimRight(fmt.Sprintf(".%06d", us), "0")
	}
	if neg && h+m+s+us != 0 {
		out = "-" + out
	}
	return out
}

// normalizeTime keys a literal compared with or stored into a TIME
// column: a string [-]h:mm:ss[.ffffff] or an integer [-]hhmmss, hours
// below 838. Other spellings ('10:01' is 10:01:00, '1 02:00:00' has days)
// are refused rather than guessed.
func normalizeTime(col *Column, v parser.Value) ([]byte, error) {
	neg, h, m, s, us, ok := false, 0, 0, 0, 0, false
	switch v.Kind {
	case parser.ValueInt:
		n := v.Int
		if neg = n < 0; neg {
			n = -n
		}
		h, m, s, ok = int(n/10000), int(n/100%100), int(n%100), n < 1e7
	case parser.ValueString:
		neg, h, m, s, us, ok = parseClock(v.Str)
	}
	if !ok || h >= 838 || m > 59 || s > 59 {
		return nil, unkeyable("%s is not a time lockproxy can canonicalise (column %s)", v.Text, col.Name)
	}
	return []byte(canonTime(neg, h, m, s, us)), nil
}

// parseClock reads [-]h:mm:ss[.ffffff] (one to three hour digits).
func parseClock(str string) (neg bool, h, m, s, us int, ok bool) {
	neg = strings.HasPrefix(str, "-")
	str = strings.TrimPrefix(str, "-")
	clock, frac, hasFrac := strings.Cut(str, ".")
	parts := strings.Split(clock, ":")
	if len(parts) != 3 || len(parts[0]) < 1 || len(parts[0]) > 3 || len(parts[1]) != 2 || len(parts[2]) != 2 ||
		hasFrac && (frac == "" || len(frac) > 6 || !allDigits(frac)) {
		return false, 0, 0, 0, 0, false
	}
	for _, p := range parts {
		if !allDigits(p) {
			return false, 0, 0, 0, 0, false
		}
	}
	h, _ = strconv.Atoi(parts[0])
	m, _ = strconv.Atoi(parts[1])
	s, _ = strconv.Atoi(parts[2])
	if hasFrac {
		us, _ = strconv.Atoi((frac + "00000")[:6])
	}
	return neg, h, m, s, us, true
}
