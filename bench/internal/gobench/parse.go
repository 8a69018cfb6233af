package gobench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrParse is wrapped by a benchmark result line that cannot be read.
var ErrParse = errors.New("gobench: malformed benchmark line")

// Line is one benchmark result line of `go test -bench` output, e.g.
//
//	BenchmarkCacheHit-2   	 2170641	        49.42 ns/op	       0 B/op	       0 allocs/op
type Line struct {
	Pkg   string `json:"pkg,omitempty"` // from the preceding "pkg:" line
	Name  string `json:"name"`          // without the -GOMAXPROCS suffix
	Procs int    `json:"procs,omitempty"`
	N     int64  `json:"n"`
	// Metrics maps each unit ("ns/op", "B/op", "allocs/op", or a custom
	// one such as "roundtrips/op") to its value.
	Metrics map[string]float64 `json:"metrics"`
}

// Status is how a benchmark that printed no result line ended.
type Status struct {
	Pkg    string `json:"pkg,omitempty"`
	Name   string `json:"name"`
	Result string `json:"result"` // SKIP or FAIL
	// Log is what the benchmark logged before ending (t.Skip's reason,
	// b.Fatal's error), trimmed.
	Log string `json:"log,omitempty"`
}

// Output is everything Parse found in one `go test -v -bench` output.
type Output struct {
	Lines []Line
	Ended []Status // skipped or failed benchmarks
}

// Parse reads `go test -v -bench` output. Lines it does not know (test
// logs, "goos:", "PASS", "ok") are ignored; a line that starts like a
// result (name, iteration count) but has a malformed value is an error.
func Parse(r io.Reader) (Output, error) {
	var out Output
	pkg, current := "", ""
	var log []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		switch {
		case strings.HasPrefix(text, "pkg: "):
			pkg = strings.TrimSpace(strings.TrimPrefix(text, "pkg: "))
		case strings.HasPrefix(trimmed, "--- SKIP: "), strings.HasPrefix(trimmed, "--- FAIL: "):
			res, name := trimmed[4:8], strings.Fields(trimmed[10:])
			if len(name) > 0 && strings.HasPrefix(name[0], "Benchmark") {
				out.Ended = append(out.Ended, Status{Pkg: pkg, Name: stripProcs(name[0]), Result: res, Log: strings.Join(log, "\n")})
			}
			log = nil
		case strings.HasPrefix(text, "Benchmark"):
			l, ok, err := parseLine(text)
			if err != nil {
				return out, err
			}
			if ok {
				l.Pkg = pkg
				out.Lines = append(out.Lines, l)
			} else if f := strings.Fields(text); len(f) == 1 {
				current, log = f[0], nil // -v prints the bare name first
			}
		case current != "" && (strings.HasPrefix(text, " ") || strings.HasPrefix(text, "\t")) && trimmed != "":
			log = append(log, trimmed)
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("gobench: read output: %w", err)
	}
	return out, nil
}

// parseLine reads one result line; ok is false for a line that is not one
// (a bare benchmark name, a name followed by log output).
func parseLine(text string) (Line, bool, error) {
	f := strings.Fields(text)
	if len(f) < 4 || len(f)%2 != 0 {
		return Line{}, false, nil
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return Line{}, false, nil
	}
	l := Line{Name: stripProcs(f[0]), Procs: procs(f[0]), N: n, Metrics: map[string]float64{}}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || !strings.Contains(f[i+1], "/") && f[i+1] != "MB/s" {
			return Line{}, false, fmt.Errorf("%w: %q: value %q unit %q", ErrParse, text, f[i], f[i+1])
		}
		l.Metrics[f[i+1]] = v
	}
	return l, true, nil
}

// stripProcs drops the "-N" GOMAXPROCS suffix go test appends to a name.
func stripProcs(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

func procs(name string) int {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if n, err := strconv.Atoi(name[i+1:]); err == nil {
			return n
		}
	}
	return 0
}
