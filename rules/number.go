package rules

import (
	"math"
	"strconv"
	"strings"
)

// maxExp bounds the decimal exponent canonDecimal accepts, so "1e999999999"
// cannot make it build a billion-digit string.
const maxExp = 400

// canonDecimal returns the canonical text of an exact decimal number
// written as [sign]digits[.digits][e[sign]digits]: no leading zeros, no
// trailing fraction zeros, no exponent, "-0" as "0". ok is false when s is
// not such a number (or its exponent is beyond ±maxExp).
func canonDecimal(s string) (string, bool) {
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > maxExp || e < -maxExp {
			return "", false
		}
		mant, exp = s[:i], e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" && frac == "" || !allDigits(intPart) || !allDigits(frac) {
		return "", false
	}
	digits := intPart + frac
	point := len(intPart) + exp // position of the decimal point in digits
	for point > len(digits) {
		digits += "0"
	}
	for point < 0 {
		digits = "0" + digits
		point++
	}
	ip := strings.TrimLeft(digits[:point], "0")
	fp := strings.TrimRight(digits[point:], "0")
	if ip == "" {
		ip = "0"
	}
	out := ip
	if fp != "" {
		out += "." + fp
	}
	if neg && out != "0" {
		out = "-" + out
	}
	return out, true
}

// MariaDB's DECIMAL holds at most 65 digits, 38 after the point: within
// them it reads a decimal text exactly, beyond them it rounds.
const (
	maxDecimalDigits = 65
	maxDecimalScale  = 38
)

// exactDecimal reports whether a canonical decimal is within the digits
// MariaDB reads exactly.
func exactDecimal(canon string) bool {
	ip, fp, _ := strings.Cut(strings.TrimPrefix(canon, "-"), ".")
	if ip == "0" {
		ip = ""
	}
	return len(fp) <= maxDecimalScale && len(ip)+len(fp) <= maxDecimalDigits
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// numericPrefix returns the longest prefix of s that MySQL's string to
// number conversion reads (after leading white space): [sign] digits [.
// digits] [e [sign] digits]. It returns "0" when s starts with no number,
// as MySQL converts 'abc' to 0.
func numericPrefix(s string) string {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	nd := i - start
	if i < len(s) && s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		nd += j - i - 1
		i = j
	}
	if nd == 0 {
		return "0"
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k > j {
			i = k
		}
	}
	p := s[:i]
	p = strings.TrimSuffix(p, ".")
	if p == "" || p == "+" || p == "-" {
		return "0"
	}
	return p
}

// isIntegral reports whether a canonical decimal has no fraction.
func isIntegral(canon string) bool { return !strings.Contains(canon, ".") }

// exactInDouble reports whether every integer of the canonical decimal's
// magnitude converts to a double exactly and alone (|x| < 2^53), so a comparison
// done in doubles picks exactly one integer.
func exactInDouble(canon string) bool {
	f, err := strconv.ParseFloat(canon, 64)
	return err == nil && math.Abs(f) < 1<<53
}

// floatText is the canonical decimal of a float64, or its 'e' form when it
// has no exact short decimal (huge, tiny, infinite).
func floatText(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	if c, ok := canonDecimal(strconv.FormatFloat(f, 'g', -1, 64)); ok {
		return c
	}
	return strconv.FormatFloat(f, 'e', -1, 64)
}

// bytesToUint reads big-endian bytes (a hex or bit literal) as an unsigned
// integer; ok is false beyond 8 significant bytes.
func bytesToUint(b string) (uint64, bool) {
	b = strings.TrimLeft(b, "\x00")
	if len(b) > 8 {
		return 0, false
	}
	var u uint64
	for i := 0; i < len(b); i++ {
		u = u<<8 | uint64(b[i])
	}
	return u, true
}

// roundHalfAway rounds a canonical decimal to an integer, half away from
// zero, as MySQL stores a decimal into an integer column.
func roundHalfAway(canon string) (string, bool) {
	ip, fp, found := strings.Cut(canon, ".")
	if !found {
		return canon, true
	}
	if fp[0] < '5' {
		if ip == "-0" {
			return "0", true
		}
		return ip, true
	}
	neg := strings.HasPrefix(ip, "-")
	mag := strings.TrimPrefix(ip, "-")
	n, err := strconv.ParseUint(mag, 10, 64)
	if err != nil || n == math.MaxUint64 {
		return "", false
	}
	out := strconv.FormatUint(n+1, 10)
	if neg {
		out = "-" + out
	}
	return out, true
}

// roundToScale rounds a canonical decimal to scale fraction digits, half
// away from zero, and returns it canonical again.
func roundToScale(canon string, scale int) (string, bool) {
	ip, fp, found := strings.Cut(canon, ".")
	if !found || len(fp) <= scale {
		return canon, true
	}
	neg := strings.HasPrefix(ip, "-")
	digits := []byte(strings.TrimPrefix(ip, "-") + fp[:scale])
	if fp[scale] >= '5' {
		i := len(digits) - 1
		for ; i >= 0 && digits[i] == '9'; i-- {
			digits[i] = '0'
		}
		if i < 0 {
			digits = append([]byte{'1'}, digits...)
		} else {
			digits[i]++
		}
	}
	intLen := len(digits) - scale
	text := string(digits[:intLen])
	if scale > 0 {
		text += "." + string(digits[intLen:])
	}
	if neg {
		text = "-" + text
	}
	return canonDecimal(text)
}
