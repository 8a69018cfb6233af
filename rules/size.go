package rules

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes, written in YAML as a plain integer or with a
// binary unit: "512KiB", "64MiB", "1GiB" (or MariaDB's own "512K", "64M",
// "1G", which mean the same).
type Size int64

// Bytes returns s as an int64.
func (s Size) Bytes() int64 { return int64(s) }

// sizeUnits are the suffixes ParseSize takes, longest first.
var sizeUnits = []struct {
	suffix string
	shift  uint
}{
	{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40},
	{"K", 10}, {"M", 20}, {"G", 30}, {"T", 40}, {"B", 0},
}

// ParseSize parses a rules.yaml size: bytes as an integer ("67108864"), or
// an integer with a binary unit ("64MiB", "64M"). Decimal units ("64MB")
// are refused rather than guessed: MariaDB reads "64M" as 2^26 bytes, SI
// as 64,000,000.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	shift := uint(0)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(t, u.suffix); ok && n != "" {
			t, shift = strings.TrimSpace(n), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || strings.HasPrefix(t, "+") {
		if strings.HasSuffix(strings.ToUpper(strings.TrimSpace(s)), "B") {
			return 0, fmt.Errorf("must be a size in bytes such as 67108864, 64MiB or 1GiB (binary units; KB, MB and GB are not taken), not %q", s)
		}
		return 0, fmt.Errorf("must be a size in bytes such as 67108864, 64MiB or 1GiB, not %q", s)
	}
	if n < 0 {
		return 0, fmt.Errorf("must not be negative, got %q", s)
	}
	if n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("too large: %q", s)
	}
	return Size(n << shift), nil
}

// UnmarshalYAML lets goccy/go-yaml read a Size from "1GiB" or 1073741824.
func (s *Size) UnmarshalYAML(b []byte) error {
	v, err := ParseSize(strings.Trim(strings.TrimSpace(string(b)), `"'`))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalYAML writes a Size as its number of bytes.
func (s Size) MarshalYAML() ([]byte, error) {
	return []byte(strconv.FormatInt(int64(s), 10)), nil
}
