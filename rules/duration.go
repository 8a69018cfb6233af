package rules

import (
	"fmt"
	"strings"
	"time"
)

// ParseDuration parses a rules.yaml duration: a Go duration such as "2s",
// "150ms" or "1m30s", or "0". Negative durations are rejected.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("must be a duration such as 2s or 150ms, not %q", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative, got %q", s)
	}
	return d, nil
}

// UnmarshalYAML lets goccy/go-yaml (and anyone decoding a Config with it)
// read a Duration from "2s" or "150ms".
func (d *Duration) UnmarshalYAML(b []byte) error {
	s := strings.TrimSpace(string(b))
	s = strings.Trim(s, `"'`)
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes a Duration as "2s".
func (d Duration) MarshalYAML() ([]byte, error) {
	return []byte(time.Duration(d).String()), nil
}

// String returns the duration as Go writes it ("2s").
func (d Duration) String() string { return time.Duration(d).String() }
