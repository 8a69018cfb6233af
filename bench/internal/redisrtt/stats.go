package redisrtt

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ErrStats is returned for INFO commandstats text that cannot be read.
var ErrStats = errors.New("redisrtt: commandstats")

// Counts is calls per command name (lower case, e.g. "set", "evalsha",
// "client|setname").
type Counts map[string]int64

// ParseCommandStats reads the calls of every command out of the text of
// `INFO commandstats` (lines `cmdstat_<name>:calls=<n>,usec=...`).
func ParseCommandStats(text string) (Counts, error) {
	c := Counts{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		found := false
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%w: %q: %v", ErrStats, line, err)
				}
				c[name], found = n, true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: no calls= in %q", ErrStats, line)
		}
	}
	return c, nil
}

// ignored are commands the measurement itself sends.
var ignored = map[string]bool{"info": true}

// Sub is after - before per command, leaving out the measurement's own
// commands and commands that did not move.
func Sub(after, before Counts) Counts {
	d := Counts{}
	for k, v := range after {
		if ignored[k] {
			continue
		}
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

// Total is the sum of all calls.
func (c Counts) Total() int64 {
	var t int64
	for _, v := range c {
		t += v
	}
	return t
}

// PerUnit spreads the calls of a window of seconds over units statements,
// after taking away the background (calls per second per command of the
// idle window).
func PerUnit(window Counts, background map[string]float64, seconds float64, units int) map[string]float64 {
	out := map[string]float64{}
	if units <= 0 {
		return out
	}
	for k, v := range window {
		x := (float64(v) - background[k]*seconds) / float64(units)
		if x > 0.0005 || x < -0.0005 {
			out[k] = x
		}
	}
	return out
}

// Rate turns the calls of an idle window into calls per second.
func Rate(c Counts, seconds float64) map[string]float64 {
	out := map[string]float64{}
	if seconds <= 0 {
		return out
	}
	for k, v := range c {
		out[k] = float64(v) / seconds
	}
	return out
}

// Sum adds the values of m.
func Sum(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

// Format lists m as "evalsha 1.00, publish 1.00", largest first.
func Format(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2f", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
