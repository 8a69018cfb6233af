package rules

import (
	"strconv"
	"strings"
)

// Values stored out of their column's range. Strict, MariaDB refuses the
// statement (no row is written, so any key is safe); otherwise, and under
// INSERT IGNORE or UPDATE IGNORE, it stores the nearest end of the range
// (99999999999 into an INT is 2147483647, -1 into an UNSIGNED column is
// 0, 1e10 into a DECIMAL(12,3) is 999999999.999). Either way the row
// written, if any, is the nearest end: that is the key.

// intEnd is the nearest end of col's integer range to the canonical
// integer n, which is outside it (see inIntRange).
func intEnd(col *Column, n string) string {
	bits := map[string]uint{"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}[strings.ToLower(col.DataType)]
	neg := strings.HasPrefix(n, "-")
	switch {
	case col.Unsigned && neg:
		return "0"
	case col.Unsigned && bits == 64:
		return "18446744073709551615"
	case col.Unsigned:
		return strconv.FormatUint(1<<bits-1, 10)
	case neg && bits == 64:
		return "-9223372036854775808"
	case neg:
		return strconv.FormatInt(-(1 << (bits - 1)), 10)
	case bits == 64:
		return "9223372036854775807"
	}
	return strconv.FormatInt(1<<(bits-1)-1, 10)
}

// decimalEnd is the nearest end of the range of a DECIMAL(p,s) column to
// the canonical decimal n, which is outside it.
func decimalEnd(col *Column, n string) string {
	if strings.HasPrefix(n, "-") && col.Unsigned {
		return "0"
	}
	p, s := decimalPrecision(col.ColumnType), decimalScale(col.ColumnType)
	end := strings.Repeat("9", p-s)
	if end == "" {
		end = "0"
	}
	if s > 0 {
		end += "." + strings.Repeat("9", s)
	}
	if strings.HasPrefix(n, "-") {
		end = "-" + end
	}
	return end
}
