package sampling

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// point is one exposed series: its label set as written (without braces)
// and its value.
type point struct {
	labels string
	value  float64
}

// Exposition is a parsed Prometheus text exposition: every series by
// metric name.
type Exposition map[string][]point

// ParseExposition reads the Prometheus text format. Comment lines are
// skipped; a line that cannot be read is an error naming it.
func ParseExposition(r io.Reader) (Exposition, error) {
	m := Exposition{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, rest, err := splitSeries(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %w", n, line, err)
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("metrics line %d %q: no value", n, line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %w", n, line, err)
		}
		m[name] = append(m[name], point{labels: labels, value: v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return m, nil
}

// splitSeries splits `name{labels} rest` or `name rest`; label values may
// hold spaces, braces and escaped quotes.
func splitSeries(line string) (name, labels, rest string, err error) {
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return "", "", "", fmt.Errorf("no metric name")
	}
	name = line[:i]
	if line[i] != '{' {
		return name, "", line[i:], nil
	}
	inQuote, esc := false, false
	for j := i + 1; j < len(line); j++ {
		c := line[j]
		switch {
		case esc:
			esc = false
		case c == '\\' && inQuote:
			esc = true
		case c == '"':
			inQuote = !inQuote
		case c == '}' && !inQuote:
			return name, line[i+1 : j], line[j+1:], nil
		}
	}
	return "", "", "", fmt.Errorf("unterminated label set")
}

// Sum adds the values of name's series whose label set contains every one
// of the given `label="value"` pairs; absent series sum to 0.
func (m Exposition) Sum(name string, match ...string) float64 {
	var s float64
	for _, p := range m[name] {
		ok := true
		for _, want := range match {
			if !strings.Contains(p.labels, want) {
				ok = false
				break
			}
		}
		if ok {
			s += p.value
		}
	}
	return s
}

// Has reports whether name is exposed at all.
func (m Exposition) Has(name string) bool { return len(m[name]) > 0 }
