package rules

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lockproxy/lockproxy/parser"
)

// normalizeTemporal canonicalises a DATE, DATETIME or TIMESTAMP value to
// "YYYY-MM-DD hh:mm:ss[.ffffff]" (MySQL compares a date with a datetime
// constant as datetimes, so a date is its midnight). Accepted spellings:
// 'YYYY-MM-DD[ hh:mm:ss[.f]]' with any of - / . : as date separator and
// one- or two-digit parts, and 'YYYYMMDD[hhmmss]' as a string or integer.
// Anything else is unkeyed rather than guessed.
//
// Stored (use Assign), a fraction beyond the column's precision is cut (or
// rounded, under TIME_ROUND_FRACTIONAL): such a value is unkeyed. A DATE
// keeps only the date of a datetime: that is its key.
func normalizeTemporal(col *Column, v parser.Value, use Use) ([]byte, error) {
	var s string
	switch v.Kind {
	case parser.ValueString:
		s = strings.TrimSpace(v.Str)
	case parser.ValueInt:
		s = strconv.FormatInt(v.Int, 10)
	default:
		return nil, unkeyable("%s on %s column %s", v.Text, col.DataType, col.Name)
	}
	out, ok := canonDateTime(s)
	if !ok {
		return nil, unkeyable("%s is not a date/time lockproxy can canonicalise (column %s)", v.Text, col.Name)
	}
	if use == Assign && strings.EqualFold(col.DataType, "date") {
		// A DATE keeps the date of a datetime stored into it (a note, or
		// refused by MariaDB: no row), whatever its time.
		date, _, _ := strings.Cut(out, " ")
		return []byte(date + " 00:00:00"), nil
	}
	if _, frac, has := strings.Cut(out, "."); use == Assign && has && len(frac) > fractionDigits(col.ColumnType) {
		// Rounded under TIME_ROUND_FRACTIONAL, cut otherwise: which one
		// depends on the session's sql_mode.
		return nil, unkeyable("%s has more fraction digits than %s column %s stores", v.Text, col.ColumnType, col.Name)
	}
	return []byte(out), nil
}

// fractionDigits reads N from "datetime(N)" or "timestamp(N)" (0 when
// absent).
func fractionDigits(columnType string) int {
	_, rest, ok := strings.Cut(columnType, "(")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), ")"))
	if err != nil {
		return 0
	}
	return n
}

func canonDateTime(s string) (string, bool) {
	var f [6]int
	frac := ""
	if head, tail, ok := strings.Cut(s, "."); ok && len(head) == 14 && allDigits(head) && len(tail) >= 1 && len(tail) <= 6 && allDigits(tail) {
		// 'YYYYMMDDhhmmss.ffffff': MariaDB reads the fraction as the
		// spelling with separators does.
		s, frac = head, tail
	}
	if allDigits(s) && (len(s) == 8 || len(s) == 14) {
		f[0], _ = strconv.Atoi(s[0:4])
		f[1], _ = strconv.Atoi(s[4:6])
		f[2], _ = strconv.Atoi(s[6:8])
		if len(s) == 14 {
			f[3], _ = strconv.Atoi(s[8:10])
			f[4], _ = strconv.Atoi(s[10:12])
			f[5], _ = strconv.Atoi(s[12:14])
		}
	} else {
		date, clock, hasClock := strings.Cut(s, " ")
		if !hasClock {
			date, clock, hasClock = strings.Cut(s, "T")
		}
		if !splitInts(date, "-/.:", f[0:3], []int{4, 2, 2}) {
			return "", false
		}
		if hasClock {
			clock = strings.TrimSpace(clock)
			clock, frac, _ = strings.Cut(clock, ".")
			if !splitInts(clock, ":", f[3:6], []int{2, 2, 2}) || len(frac) > 6 || !allDigits(frac) {
				return "", false
			}
		}
	}
	// A day the month lacks (2000-02-30) MariaDB refuses, or under a
	// lenient sql_mode stores as 0000-00-00: not the value as written.
	if f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > daysIn(f[0], f[1]) || f[3] > 23 || f[4] > 59 || f[5] > 59 {
		return "", false
	}
	out := fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d", f[0], f[1], f[2], f[3], f[4], f[5])
	if frac = strings.TrimRight(frac, "0"); frac != "" {
		out += "." + frac
	}
	return out, true
}

// splitInts splits s at any of seps into exactly len(dst) numbers of 1 to
// max[i] digits (the first exactly max[0] when max[0] is 4: a year).
func splitInts(s, seps string, dst []int, max []int) bool {
	parts := strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(seps, r) })
	if len(parts) != len(dst) || strings.Count(s, "")-1 != len(strings.Join(parts, ""))+len(parts)-1 {
		return false
	}
	for i, p := range parts {
		if p == "" || len(p) > max[i] || !allDigits(p) || (max[i] == 4 && len(p) != 4) {
			return false
		}
		dst[i], _ = strconv.Atoi(p)
	}
	return true
}
