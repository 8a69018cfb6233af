package rules

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrInvalidConfig is wrapped by every *ValidationError, so callers can test
// for a bad rules.yaml with errors.Is.
var ErrInvalidConfig = errors.New("rules: invalid configuration")

// Problem is one thing wrong with a configuration: where it is (file, line,
// key path such as "rules[1].key") and what is wrong with it. Line is 0 when
// the problem has no place in the file (a table missing on the primary).
type Problem struct {
	File string
	Line int
	Path string
	Msg  string
}

// String renders the problem as "file:line: path: msg".
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	} else if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// ValidationError lists every problem found in a configuration, in file
// order. It wraps ErrInvalidConfig.
type ValidationError struct {
	Problems []Problem
}

// Error lists all problems, one per line.
func (e *ValidationError) Error() string {
	lines := make([]string, 0, len(e.Problems)+1)
	switch len(e.Problems) {
	case 1:
		return e.Problems[0].String()
	default:
		lines = append(lines, fmt.Sprintf("%d problems:", len(e.Problems)))
	}
	for _, p := range e.Problems {
		lines = append(lines, "  "+p.String())
	}
	return strings.Join(lines, "\n")
}

// Unwrap makes errors.Is(err, ErrInvalidConfig) true.
func (e *ValidationError) Unwrap() error { return ErrInvalidConfig }

// problems collects Problems for one file.
type problems struct {
	file   string
	list   []Problem
	failed map[string]bool // key paths that already have a problem
}

// covered reports whether path, or a path above it, already has a problem:
// a value that failed to decode is left unset, and validating it again
// would only add noise ("missing primary" after a primary with a typo).
func (ps *problems) covered(path string) bool {
	for p := path; p != ""; {
		if ps.failed[p] {
			return true
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return false
}

func (ps *problems) add(line int, path, format string, args ...any) {
	if ps.failed == nil {
		ps.failed = map[string]bool{}
	}
	ps.failed[path] = true
	ps.list = append(ps.list, Problem{File: ps.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// err returns nil or a *ValidationError with the problems in line order
// (stable, so problems on one line keep the order they were found in).
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	out := append([]Problem(nil), ps.list...)
	sort.SliceStable(out, func(i, j int) bool {
		li, lj := out[i].Line, out[j].Line
		if li == 0 || lj == 0 {
			return lj == 0 && li != 0 // placeless problems go last
		}
		return li < lj
	})
	return &ValidationError{Problems: out}
}
