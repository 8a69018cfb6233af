package contend

import (
	"math"
	"sort"
	"time"
)

// Latency summarises durations in milliseconds.
type Latency struct {
	N     int     `json:"n"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	AvgMs float64 `json:"avg_ms"`
}

// Summarize computes the nearest-rank p50 and p99, the max and the mean of
// ds; ds is not modified. No durations give the zero Latency.
func Summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Latency{
		N: len(s), P50Ms: ms(Percentile(s, 50)), P99Ms: ms(Percentile(s, 99)),
		MaxMs: ms(s[len(s)-1]), AvgMs: ms(sum / time.Duration(len(s))),
	}
}

// Percentile is the nearest-rank p-th percentile of sorted (ascending):
// the smallest value with at least p% of the values at or below it.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TailRatio is p99/p50 (0 when p50 is 0).
func (l Latency) TailRatio() float64 { return Ratio(l.P99Ms, l.P50Ms) }

// Ratio is a/b, or 0 when b is 0: the report prints 0 as "–".
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Fairness describes how evenly work was shared among clients.
type Fairness struct {
	// Jain is Jain's index (Σx)² / (n·Σx²): 1 when every client did the
	// same, 1/n when one client did everything.
	Jain float64 `json:"jain"`
	Min  int     `json:"min"`
	Max  int     `json:"max"`
	// MaxOverMin is Max/Min (0 when some client did nothing).
	MaxOverMin float64 `json:"max_over_min"`
	// Starved counts clients that did nothing.
	Starved int `json:"starved"`
}

// FairnessOf computes Fairness over per-client counts.
func FairnessOf(counts []int) Fairness {
	if len(counts) == 0 {
		return Fairness{}
	}
	f := Fairness{Min: counts[0], Max: counts[0]}
	var sum, sq float64
	for _, c := range counts {
		f.Min, f.Max = min(f.Min, c), max(f.Max, c)
		if c == 0 {
			f.Starved++
		}
		sum += float64(c)
		sq += float64(c) * float64(c)
	}
	if sq > 0 {
		f.Jain = sum * sum / (float64(len(counts)) * sq)
	}
	if f.Min > 0 {
		f.MaxOverMin = float64(f.Max) / float64(f.Min)
	}
	return f
}

// Oversold is how many more orders were taken than there was stock.
func Oversold(initial, orders int64) int64 { return max(0, orders-initial) }

// Lost counts updates that vanished: units taken (orders, or successful
// decrements) that the stock does not show as gone.
func Lost(initial, final, taken int64) int64 { return taken - (initial - final) }

// Median is the median of xs (mean of the middle two), 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
