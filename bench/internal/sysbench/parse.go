package sysbench

import (
	"bufio"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ErrReport is wrapped when sysbench's output cannot be read as a report.
var ErrReport = errors.New("sysbench: unreadable report")

// Stats are the figures of one sysbench run. Latencies are in milliseconds.
type Stats struct {
	Transactions int     `json:"transactions"`
	TPS          float64 `json:"tps"`
	Queries      int     `json:"queries"`
	QPS          float64 `json:"qps"`
	Errors       int     `json:"errors"`
	Reconnects   int     `json:"reconnects"`
	Seconds      float64 `json:"seconds"`
	Events       int     `json:"events"`
	// AvgMs is sum/events, finer than the two decimals sysbench prints.
	AvgMs float64 `json:"avg_ms"`
	MinMs float64 `json:"min_ms"`
	MaxMs float64 `json:"max_ms"`
	// PctMs is the percentile sysbench was asked for (--percentile).
	PctMs float64 `json:"pct_ms"`
	// P95Ms and P99Ms come from the histogram when there is one (else 0 and
	// PctMs respectively).
	P95Ms float64 `json:"p95_ms"`
	P99Ms float64 `json:"p99_ms"`
	SumMs float64 `json:"sum_ms"`
	// ClientCPUSec is sysbench's own user+system CPU time (set by Run).
	ClientCPUSec float64 `json:"client_cpu_s"`
}

// Bucket is one histogram line: the latency value and how many events fell there.
type Bucket struct {
	Ms    float64
	Count int
}

// Parse reads a sysbench 1.0 `run` report.
func Parse(out string) (Stats, error) {
	var s Stats
	var hist []Bucket
	var seen int
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if b, ok := histLine(line); ok {
			hist = append(hist, b)
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if parseField(&s, strings.TrimSpace(key), strings.TrimSpace(val)) {
			seen++
		}
	}
	if seen < 6 || s.Events == 0 {
		return s, fmt.Errorf("%w: %d fields, %d events", ErrReport, seen, s.Events)
	}
	s.AvgMs = s.SumMs / float64(s.Events)
	s.P99Ms = s.PctMs
	if len(hist) > 0 {
		s.P95Ms = Percentile(hist, 95)
		s.P99Ms = Percentile(hist, 99)
	}
	return s, nil
}

// parseField stores one "key: value" line, reporting whether it was known.
func parseField(s *Stats, key, val string) bool {
	first, rate := splitRate(val)
	switch {
	case key == "transactions":
		s.Transactions, s.TPS = atoi(first), rate
	case key == "queries":
		s.Queries, s.QPS = atoi(first), rate
	case key == "ignored errors":
		s.Errors = atoi(first)
	case key == "reconnects":
		s.Reconnects = atoi(first)
	case key == "total time":
		s.Seconds = atof(strings.TrimSuffix(first, "s"))
	case key == "total number of events":
		s.Events = atoi(first)
	case key == "min":
		s.MinMs = atof(first)
	case key == "max":
		s.MaxMs = atof(first)
	case key == "sum":
		s.SumMs = atof(first)
	case strings.HasSuffix(key, "th percentile"):
		s.PctMs = atof(first)
	default:
		return false
	}
	return true
}

// splitRate splits "17941  (17923.21 per sec.)" into "17941" and 17923.21.
func splitRate(val string) (string, float64) {
	first, rest, _ := strings.Cut(val, " ")
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(rest, "(") {
		return first, 0
	}
	num, _, _ := strings.Cut(strings.TrimPrefix(rest, "("), " ")
	return first, atof(num)
}

// histLine reads "1.608 |*****   11".
func histLine(line string) (Bucket, bool) {
	v, rest, ok := strings.Cut(line, "|")
	if !ok {
		return Bucket{}, false
	}
	ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return Bucket{}, false
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return Bucket{}, false
	}
	n, err := strconv.Atoi(f[len(f)-1])
	if err != nil {
		return Bucket{}, false
	}
	return Bucket{Ms: ms, Count: n}, true
}

// Percentile returns the smallest bucket value at or below which at least
// pct percent of the events fall.
func Percentile(hist []Bucket, pct float64) float64 {
	h := append([]Bucket(nil), hist...)
	sort.Slice(h, func(i, j int) bool { return h[i].Ms < h[j].Ms })
	total := 0
	for _, b := range h {
		total += b.Count
	}
	if total == 0 {
		return 0
	}
	need := pct / 100 * float64(total)
	cum := 0
	for _, b := range h {
		cum += b.Count
		if float64(cum) >= need {
			return b.Ms
		}
	}
	return h[len(h)-1].Ms
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func atof(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}
